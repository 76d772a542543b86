/*
 * The token ids of a batch (the tokenizer setting) in the CLI's JSON output.
 */
#ifndef SHARC_TOOLS_CLI_TOKENS_H
#define SHARC_TOOLS_CLI_TOKENS_H

#include <stdio.h>

#include <sharc/sharc.h>

/**
 * Write `,"tokens":[[id,...],...]`, each row's ids without its padding, when `b` has host
 * tensors `tokens` (i32 [B, L]) and `token_lens` (i32 [B]); else `,"tokens":null`.
 */
void cli_tokens_json(FILE *f, const sharc_batch *b);

#endif /* SHARC_TOOLS_CLI_TOKENS_H */
