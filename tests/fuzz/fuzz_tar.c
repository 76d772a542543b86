/*
 * Fuzz target for the tar and line readers: the input is opened as an in-memory archive
 * (any compression libarchive's gzip/zstd filters sniff) and every member is read until the
 * end or an error; then the same bytes are read as a text file, line by line.
 */
#include <stdint.h>
#include <string.h>

#include "io/tar.h"
#include "io/lines.h"
#include "base/buf.h"
#include "base/ctx.h"

#define MAX_MEMBER (1u << 20)
#define MAX_LINE   (64u << 10)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_tar(sharc__ctx *ctx, const uint8_t *data, size_t size)
{
    sharc__tar *t = NULL;
    sharc__member m = {0};
    if (sharc__tar_open_memory(&t, ctx, data, size, MAX_MEMBER) < 0)
        return;
    uint64_t expect_index = 0;
    for (;;) {
        int rc = sharc__tar_next(t, &m);
        if (rc == SHARC_ERR_TOO_LARGE)
            continue; /* not final: the next call skips the oversized payload */
        if (rc != 0)
            break;
        /* Invariants a caller relies on; a violation crashes so the fuzzer reports it. */
        if (m.index != expect_index++ || m.data.len > MAX_MEMBER ||
            (m.data.data && m.data.data[m.data.len] != 0) || !m.name.data)
            __builtin_trap();
    }
    sharc__tar_close(&t);
    sharc__member_free(ctx, &m);
}

static void read_lines(sharc__ctx *ctx, const uint8_t *data, size_t size)
{
    sharc__lines *l = NULL;
    if (sharc__lines_open_memory(&l, ctx, data, size, MAX_LINE) < 0)
        return;
    const char *line;
    size_t len;
    uint64_t lineno, last = 0;
    while (sharc__lines_next(l, &line, &len, &lineno) == 0) {
        if (len == 0 || len > MAX_LINE || strlen(line) != len || lineno <= last)
            __builtin_trap();
        last = lineno;
    }
    sharc__lines_close(&l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sharc__ctx ctx;
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx_init(&ctx, NULL, &quiet);
    read_tar(&ctx, data, size);
    read_lines(&ctx, data, size);
    return 0;
}
