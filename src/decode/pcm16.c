#include "decode/pcm16.h"

#include <string.h>

/*
 * numpy.pad(mode="reflect") at the end of the time axis: frame i (>= have) copies frame
 * j of the mirror sequence 0, 1, .., have-1, have-2, .., 1, 0, 1, .. (period
 * 2 * (have - 1)); a single frame is repeated, as numpy does for a singleton axis.
 */
void sharc__pad_reflect(float *out, int64_t have, int64_t want, int ch)
{
    const int64_t period = 2 * (have - 1);
    for (int64_t i = have; i < want; i++) {
        int64_t j = period ? i % period : 0;
        if (j >= have)
            j = period - j;
        memcpy(out + i * ch, out + j * ch, (size_t)ch * sizeof *out);
    }
}

int sharc__pcm16_plan(const sharc__wav_pcm16 *wav, const sharc__decode_spec *spec,
                      size_t out_capacity, int64_t *first, int64_t *count)
{
    const int64_t want = spec->want_frames, tol = spec->tolerance_frames;
    const int64_t offset = spec->offset_frames;
    const int out_ch = spec->channel >= 0 ? 1 : wav->channels;
    const int64_t cap_frames = (int64_t)(out_capacity / (size_t)out_ch);
    if (spec->channel >= wav->channels || offset < 0 || tol < 0 || want > cap_frames)
        return 0;
    /* libsndfile seeks PCM exactly; an offset past the end decodes nothing. */
    const int64_t rest = offset < wav->frames ? wav->frames - offset : 0;
    int64_t got;
    if (want < 0) {
        got = rest < cap_frames ? rest : cap_frames;
        if (rest > got)
            return 0; /* too large */
    } else {
        got = rest < want ? rest : want;
        if (got == want && !spec->allow_longer && rest - got > tol)
            return 0; /* much longer than the metadata */
        if (want - got > tol || (got == 0 && want > 0))
            return 0; /* much shorter */
    }
    *first = got > 0 ? offset : 0;
    *count = got;
    return 1;
}

void sharc__pcm16_convert_part(const sharc__wav_pcm16 *wav, const uint8_t *src, int64_t count,
                               const sharc__decode_spec *spec, float *out)
{
    if (count <= 0)
        return;
    if (spec->channel < 0)
        sharc__wav_pcm16_to_float(src, (size_t)count * (size_t)wav->channels, out,
                                  spec->stream_out);
    else
        sharc__wav_pcm16_channel_to_float(src, (size_t)count, wav->channels, spec->channel, out);
}

void sharc__pcm16_finish(const sharc__wav_pcm16 *wav, sharc__codec codec, int64_t count,
                         const sharc__decode_spec *spec, float *out, sharc__audio_info *info,
                         int64_t *frames)
{
    const int out_ch = spec->channel >= 0 ? 1 : wav->channels;
    const int64_t want = spec->want_frames;
    if (want >= 0)
        sharc__pad_reflect(out, count, want, out_ch);
    if (info)
        *info = (sharc__audio_info){codec, wav->sampling_rate, wav->channels, wav->frames, 0};
    *frames = want >= 0 ? want : count;
}

void sharc__pcm16_convert(const sharc__wav_pcm16 *wav, const uint8_t *src, int64_t count,
                          const sharc__decode_spec *spec, float *out, sharc__audio_info *info,
                          int64_t *frames)
{
    sharc__pcm16_convert_part(wav, src, count, spec, out);
    sharc__pcm16_finish(wav, SHARC__CODEC_WAV, count, spec, out, info, frames);
}
