/*
 * --resume FILE on another number of data-parallel slots than the run that saved it
 * (elastic resume): the states FILE.dp0 ... FILE.dp<D-1> (or FILE alone, saved by one slot)
 * packed with sharc_reader_pack_states() into the one blob every slot resumes from.
 */
#ifndef SHARC_TOOLS_CLI_RESUME_H
#define SHARC_TOOLS_CLI_RESUME_H

#include <stddef.h>

/**
 * The states `base` names for slot `slot` of `slots`, when they were saved by another
 * number of slots: FILE.dp<k> for k = 0, 1, ... while they exist, or FILE alone when there
 * is none (a run of one slot).
 * @param blob receives the bundle (free it) when 1 is returned
 * @return 1 with a bundle; 0 when the run resumes from its own file as before (as many
 *         files as slots, or one slot and FILE itself); -1 after a message in `why` (a
 *         file missing between others, one that cannot be read)
 */
int cli_resume_bundle(const char *base, int slot, int slots, void **blob, size_t *size, char *why,
                      size_t cap);

/**
 * Read a state file whole (a regular file of 1 byte to 1 GiB).
 * @param data receives the bytes (free them)
 * @return 0, or -1 with "cannot read the state file PATH: <why>" in `why`
 */
int cli_resume_read_file(const char *path, void **data, size_t *size, char *why, size_t cap);

#endif /* SHARC_TOOLS_CLI_RESUME_H */
