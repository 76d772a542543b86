/*
 * Fuzz target for the handshake decoder (src/handshake.c): any bytes a peer receives as the
 * source's handshake must be rejected or decoded into NUL-terminated fields, and comparing
 * them with a rank's own fields must stay inside both.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bcast/handshake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sharc__handshake theirs, mine;
    sharc__ctx ctx;
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx_init(&ctx, NULL, &quiet);
    /* An exact-size copy, so a sanitizer build catches any read past the end. */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    if (sharc__handshake_decode(&ctx, copy, size, &theirs) == 0) {
        if (theirs.n > SHARC__HANDSHAKE_MAX_FIELDS)
            abort(); /* the decoder promised this cannot happen */
        memset(&mine, 0, sizeof mine);
        sharc__handshake_add(&mine, "protocol version", "%d", 2);
        sharc__handshake_add(&mine, "max_steps", "%d", 0);
        char why[512];
        sharc__handshake_compare(&theirs, &mine, 0, 1, why, sizeof why);
        uint8_t again[SHARC__HANDSHAKE_BYTES];
        sharc__handshake_encode(&theirs, again);
        if (sharc__handshake_decode(&ctx, again, sizeof again, &mine) != 0 || mine.n != theirs.n)
            abort(); /* what decodes must encode and decode again to the same fields */
    }
    free(copy);
    return 0;
}
