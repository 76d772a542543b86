/*
 * Fuzz the metadata parsers: a Lhotse cut line, a recording manifest, a custom jsonl
 * field line, a NeMo manifest row and a WebDataset key.json, all from the same bytes.
 */
#include <stdint.h>
#include <string.h>

#include "base/ctx.h"
#include "plan/cut.h"
#include "plan/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sharc__ctx ctx;
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx_init(&ctx, NULL, &quiet);
    sharc__rawcut c;
    memset(&c, 0, sizeof c);
    const char *text = (const char *)data;
    sharc__rawcut_reset(&c);
    if (sharc__json_lhotse_cut(&ctx, text, size, &c) == 0) {
        /* A parsed cut has an id and a sane duration. */
        if (c.id.len == 0 || c.duration < 0)
            __builtin_trap();
    }
    sharc__rawcut_reset(&c);
    (void)sharc__json_lhotse_recording(&ctx, text, size, &c);
    if (c.sampling_rate < 0 || (c.num_samples < -1))
        __builtin_trap();
    sharc__buf id = {0}, value = {0};
    int present = 0;
    (void)sharc__json_lhotse_field(&ctx, text, size, "lang_id", &id, &value, &present);
    sharc__nemo_row row = {0};
    sharc__rawcut_reset(&c);
    if (sharc__json_nemo_row(&ctx, text, size, "text", "lang", &row, &c) == 0 &&
        (!row.audio_filepath || !row.audio_filepath[0]))
        __builtin_trap();
    sharc__free(&ctx, row.audio_filepath);
    long long sid;
    (void)sharc__json_nemo_shard_id(&ctx, text, size, &sid);
    sharc__rawcut_reset(&c);
    (void)sharc__json_wds_meta(&ctx, text, size, &c);
    sharc__buf_free(&ctx, &id);
    sharc__buf_free(&ctx, &value);
    sharc__rawcut_free(&ctx, &c);
    return 0;
}
