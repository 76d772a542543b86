/*
 * The noise bank: the noise dataset's first cuts, decoded and converted by a cut reader.
 */
#include "reader/noise.h"

#include <errno.h>
#include <string.h>

#include "base/hash.h"

static int add_cut(sharc__ctx *ctx, sharc__noise_bank *bank, size_t *cap, const sharc_cut *c)
{
    if (*cap == bank->n) {
        size_t n = *cap ? *cap * 2 : 64;
        float **samples = sharc__malloc(ctx, n * sizeof *samples);
        int64_t *lens = sharc__malloc(ctx, n * sizeof *lens);
        if (!samples || !lens) {
            sharc__free(ctx, samples);
            sharc__free(ctx, lens);
            return SHARC_ERR(ENOMEM);
        }
        if (bank->n) {
            memcpy(samples, bank->samples, bank->n * sizeof *samples);
            memcpy(lens, bank->lens, bank->n * sizeof *lens);
        }
        sharc__free(ctx, bank->samples);
        sharc__free(ctx, bank->lens);
        bank->samples = samples;
        bank->lens = lens;
        *cap = n;
    }
    float *x = sharc__malloc(ctx, (size_t)c->num_samples * sizeof *x);
    if (!x)
        return SHARC_ERR(ENOMEM);
    memcpy(x, c->samples, (size_t)c->num_samples * sizeof *x);
    bank->samples[bank->n] = x;
    bank->lens[bank->n++] = c->num_samples;
    return 0;
}

int sharc__noise_load(sharc__ctx *ctx, const sharc_reader_settings *s, sharc__noise_bank *bank,
                      uint64_t *hash)
{
    const sharc_augment_settings *a = s->augment;
    sharc_reader_settings ns;
    sharc_reader_default_settings(&ns);
    ns.paths = a->noise;
    ns.n_paths = a->n_noise;
    ns.shuffle_shards = 0;
    ns.sampling_rate = s->sampling_rate;
    ns.resample = 1;
    ns.channel = 0;
    ns.logger = s->logger;
    ns.allocator = s->allocator;
    ns.retries = s->retries;
    ns.timeout_ms = s->timeout_ms;
    memset(bank, 0, sizeof *bank);
    *hash = SHARC__FNV_OFFSET;
    sharc_reader *r = NULL;
    const sharc_cut *c;
    size_t cap = 0;
    uint64_t held = 0;
    int rc = sharc_reader_open(&r, &ns);
    if (rc < 0)
        return sharc__fail(ctx, rc, "noise: cannot open the noise paths (%s%s)", a->noise[0],
                           a->n_noise > 1 ? ", ..." : "");
    while (held < a->noise_max_bytes && (rc = sharc_reader_next(r, &c)) == 0) {
        if (c->num_samples <= 0)
            continue;
        if ((rc = add_cut(ctx, bank, &cap, c)) < 0)
            break;
        held += (uint64_t)c->num_samples * sizeof(float);
        *hash = sharc__fnv1a_u64(*hash, (uint64_t)c->num_samples);
    }
    if (rc < 0 && rc != SHARC_END) {
        rc = sharc__fail(ctx, rc, "noise: %s", sharc_reader_last_error(r));
    } else if (bank->n == 0) {
        rc = sharc__fail(ctx, SHARC_ERR(EINVAL), "noise: no audio in the noise paths (%s%s)",
                         a->noise[0], a->n_noise > 1 ? ", ..." : "");
    } else {
        rc = 0;
    }
    sharc_reader_close(&r);
    if (rc < 0)
        sharc__noise_free(ctx, bank);
    return rc;
}

void sharc__noise_free(sharc__ctx *ctx, sharc__noise_bank *bank)
{
    for (size_t i = 0; i < bank->n; i++)
        sharc__free(ctx, bank->samples[i]);
    sharc__free(ctx, bank->samples);
    sharc__free(ctx, bank->lens);
    memset(bank, 0, sizeof *bank);
}
