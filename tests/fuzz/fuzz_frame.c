/*
 * Fuzz target for the receiver-side frame decoder: any bytes as a control block must be
 * rejected or decoded into descriptors that stay inside the block and the payload.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "batching/frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sharc_tensor tensors[64];
    static uint64_t offsets[64];
    static sharc__frame_header h;
    sharc__ctx ctx;
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__frame_limits limits = {64, (uint64_t)1 << 30};
    sharc__ctx_init(&ctx, NULL, &quiet);
    /* An exact-size copy, so a sanitizer build catches any read past the end. */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    if (sharc__frame_decode(&ctx, copy, size, &limits, &h, tensors, offsets) == 0 &&
        h.kind == SHARC__FRAME_DATA) {
        volatile uint8_t sink = 0;
        for (uint32_t i = 0; i < h.n_tensors; i++) {
            if (tensors[i].device != SHARC_DEVICE_HOST || tensors[i].nbytes == 0)
                continue;
            if (offsets[i] + tensors[i].nbytes > h.payload_bytes)
                abort(); /* the decoder promised this cannot happen */
            if (h.inline_offset) {
                const uint8_t *p = copy + h.inline_offset + offsets[i];
                sink ^= p[0] ^ p[tensors[i].nbytes - 1];
            }
        }
        (void)sink;
    }
    free(copy);
    return 0;
}
