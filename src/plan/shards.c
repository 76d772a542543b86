#include "plan/shards.h"

#include <errno.h>
#include <string.h>

int sharc__dataset_add_shard(sharc__ctx *ctx, sharc__dataset *d, sharc__shard **out)
{
    sharc__shard *p =
        sharc__realloc(ctx, d->shards, d->n_shards * sizeof *p, (d->n_shards + 1) * sizeof *p);
    if (!p)
        return SHARC_ERR(ENOMEM);
    d->shards = p;
    *out = &p[d->n_shards++];
    memset(*out, 0, sizeof **out);
    (*out)->nemo_shard_id = -1;
    return 0;
}

void sharc__dataset_free(sharc__dataset *d, sharc__ctx *ctx)
{
    for (size_t i = 0; i < d->n_shards; i++) {
        sharc__shard *s = &d->shards[i];
        sharc__free(ctx, s->audio_path);
        sharc__free(ctx, s->meta_path);
        for (size_t f = 0; f < s->n_fields; f++) {
            sharc__free(ctx, s->fields[f].name);
            sharc__free(ctx, s->fields[f].path);
        }
        sharc__free(ctx, s->fields);
        sharc__buf_free(ctx, &s->nemo_rows);
    }
    sharc__free(ctx, d->shards);
    memset(d, 0, sizeof *d);
}
