/*
 * Fuzz NeMo input_cfg parsing (YAML, and JSON through the same parser) and the effective
 * weights computed from it, under a memory limit: every byte the library allocates goes
 * through a counting allocator, and more than 64 MiB live at once is a finding (the bounds
 * of docs/mixing.md keep a config far below it; an alias bomb of a few hundred bytes once
 * went past 5 GB). A parsed config has a source, its weights are shares in [0, 1] that sum
 * to 1, and everything is freed.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/ctx.h"
#include "plan/input_cfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define LIMIT ((size_t)64 << 20)

static size_t live;

/* Each block has a header of `h` bytes (16 or the alignment) whose last two words hold
 * the size asked for and `h`. */
static void *counted_alloc(void *cookie, size_t size, size_t align)
{
    (void)cookie;
    if (size > LIMIT || live + size > LIMIT)
        __builtin_trap(); /* more than the limit live at once */
    size_t h = align > 16 ? align : 16;
    void *p = NULL;
    if (posix_memalign(&p, h, h + size) != 0)
        return NULL;
    uint8_t *user = (uint8_t *)p + h;
    ((size_t *)user)[-2] = size;
    ((size_t *)user)[-1] = h;
    live += size;
    return user;
}

static void counted_free(void *cookie, void *ptr)
{
    (void)cookie;
    if (!ptr)
        return;
    size_t *words = ptr;
    live -= words[-2];
    free((uint8_t *)ptr - words[-1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sharc__ctx ctx;
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc_allocator counted = {NULL, counted_alloc, counted_free};
    sharc__ctx_init(&ctx, &counted, &quiet);
    sharc__input_cfg c;
    if (sharc__input_cfg_parse(&c, &ctx, "fuzz.yaml", (const char *)data, size) == 0) {
        if (c.n_sources == 0 || c.n_nodes < c.n_sources)
            __builtin_trap();
        double *counts = malloc(c.n_sources * sizeof *counts);
        double *w = malloc(c.n_sources * sizeof *w);
        if (!counts || !w)
            __builtin_trap();
        /* Cut counts from the input's bytes, some of them 0. */
        for (size_t i = 0; i < c.n_sources; i++)
            counts[i] = (double)(data[i % size] % 4) * (double)(i + 1);
        int rc = sharc__input_cfg_weights(&c, &ctx,
                                          sharc__input_cfg_needs_counts(&c) ? counts : NULL, w);
        if (rc == 0) {
            double sum = 0;
            for (size_t i = 0; i < c.n_sources; i++) {
                if (!(w[i] >= 0 && w[i] <= 1))
                    __builtin_trap();
                sum += w[i];
            }
            if (fabs(sum - 1) > 1e-6)
                __builtin_trap();
        } else if (rc != SHARC_ERR_FORMAT || !ctx.error[0]) {
            __builtin_trap();
        }
        free(counts);
        free(w);
        sharc__input_cfg_free(&c, &ctx);
    }
    if (live != 0)
        __builtin_trap(); /* a failed parse frees what it built */
    return 0;
}
