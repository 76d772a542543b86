/*
 * The token ids of a batch in JSON (cli_tokens.h).
 */
#include "cli_tokens.h"

#include <inttypes.h>

void cli_tokens_json(FILE *f, const sharc_batch *b)
{
    const sharc_tensor *t = sharc_batch_tensor(b, "tokens");
    const sharc_tensor *n = sharc_batch_tensor(b, "token_lens");
    if (!t || !n || t->device != SHARC_DEVICE_HOST || n->device != SHARC_DEVICE_HOST ||
        t->dtype != SHARC_DTYPE_I32 || n->dtype != SHARC_DTYPE_I32 || t->ndim != 2 ||
        n->ndim != 1 || n->shape[0] != t->shape[0]) {
        fputs(",\"tokens\":null", f);
        return;
    }
    const int32_t *ids = t->data, *lens = n->data;
    const int64_t L = t->shape[1];
    fputs(",\"tokens\":[", f);
    for (int64_t i = 0; i < t->shape[0]; i++) {
        fputs(i ? ",[" : "[", f);
        for (int64_t k = 0; k < lens[i] && k < L; k++)
            fprintf(f, k ? ",%" PRId32 : "%" PRId32, ids[i * L + k]);
        fputc(']', f);
    }
    fputc(']', f);
}
