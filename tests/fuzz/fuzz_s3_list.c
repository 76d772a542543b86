/*
 * Fuzz the parser of S3 ListObjectsV2 pages (io/remote.h) with pages of any bytes, as a
 * broken or hostile server may send: it must parse or refuse, never overrun, loop or leak,
 * and every object it yields is a URL in the bucket.
 */
#include <stdint.h>
#include <string.h>

#include "base/ctx.h"
#include "io/remote.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    sharc__ctx ctx;
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx_init(&ctx, NULL, &quiet);
    char *page = sharc__strndup(&ctx, (const char *)data, size);
    if (!page)
        return 0;
    sharc__strs keys = {0}, dirs = {0};
    char *token = NULL;
    int rc = sharc__s3_parse_list(&ctx, page, size, "bkt", &keys, &dirs, &token);
    if ((rc != 0 && (!ctx.error[0] || token)) || (token && !*token))
        __builtin_trap();
    for (size_t i = 0; i < keys.n; i++)
        if (strncmp(keys.items[i], "s3://bkt/", 9) != 0)
            __builtin_trap();
    sharc__free(&ctx, token);
    sharc__strs_free(&ctx, &keys);
    sharc__strs_free(&ctx, &dirs);
    sharc__free(&ctx, page);
    return 0;
}
