#include "plan/cut.h"

void sharc__rawcut_reset(sharc__rawcut *c)
{
    sharc__buf_clear(&c->id);
    sharc__buf_clear(&c->text);
    sharc__buf_clear(&c->speaker);
    sharc__buf_clear(&c->language);
    sharc__buf_clear(&c->json);
    sharc__buf_clear(&c->member);
    sharc__buf_clear(&c->audio);
    c->audio_in_file = 0;
    c->audio_file_id = 0;
    c->audio_lent = NULL;
    sharc__buf_clear(&c->tokens);
    c->has_text = c->has_speaker = c->has_language = c->has_tokens = 0;
    c->duration = 0;
    c->offset = 0;
    c->window = 0;
    c->sampling_rate = 0;
    c->channels = 0;
    c->num_samples = -1;
    c->shard = NULL;
    c->position = 0;
    for (size_t i = 0; i < c->n_fields; i++) {
        c->fields[i].present = 0;
        sharc__buf_clear(&c->fields[i].member);
        sharc__buf_clear(&c->fields[i].json);
        sharc__buf_clear(&c->fields[i].data);
    }
}

const uint8_t *sharc__rawcut_audio(const sharc__rawcut *c, size_t *n)
{
    if (c->audio_lent) {
        *n = (size_t)c->audio_size;
        return c->audio_lent;
    }
    *n = c->audio.len;
    return c->audio.data;
}

void sharc__rawcut_free(sharc__ctx *ctx, sharc__rawcut *c)
{
    sharc__buf *bufs[] = {&c->id,   &c->text,   &c->speaker, &c->language,
                          &c->json, &c->member, &c->audio,   &c->tokens};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        sharc__buf_free(ctx, bufs[i]);
    for (size_t i = 0; i < SHARC__MAX_FIELDS; i++) {
        sharc__buf_free(ctx, &c->fields[i].member);
        sharc__buf_free(ctx, &c->fields[i].json);
        sharc__buf_free(ctx, &c->fields[i].data);
    }
}
