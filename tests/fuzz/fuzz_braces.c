/*
 * Fuzz brace expansion (NeMo's spellings, then Python's braceexpand rules) with patterns of
 * any bytes: it must expand within its cap or refuse, never overrun, loop or leak.
 */
#include <stdint.h>
#include <string.h>

#include "io/braces.h"
#include "base/ctx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    sharc__ctx ctx;
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx_init(&ctx, NULL, &quiet);
    char *pattern = sharc__strndup(&ctx, (const char *)data, size);
    if (!pattern)
        return 0;
    enum { CAP = 4096 };
    sharc__strs out = {0};
    int rc = sharc__braces_expand(&ctx, pattern, CAP, &out);
    /* Within the cap on success, nothing left behind on failure; a pattern without a brace
     * or NeMo's spelling of one stands for itself alone. */
    if ((rc == 0 && (out.n == 0 || out.n > CAP)) || (rc != 0 && !ctx.error[0]))
        __builtin_trap();
    if (rc == 0 && !strpbrk(pattern, "{}([<_") && (out.n != 1 || strcmp(out.items[0], pattern)))
        __builtin_trap();
    sharc__strs_free(&ctx, &out);
    sharc__free(&ctx, pattern);
    return 0;
}
