/*
 * The binary interface: every field of the public structs stays at the offset recorded here
 * (the rule is in sharc/common.h and docs/design.md); the settings structs carry their
 * struct_size, and the open functions refuse a struct not filled by *_default_settings().
 */
#include <check.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sharc/sharc.h"
#include "testutil.h"

typedef struct recorded_offset {
    const char *type, *field;
    size_t now, recorded;
} recorded_offset;

#define AT(type, field, n)                                                                         \
    {                                                                                              \
#type, #field, offsetof(type, field), n                                                    \
    }
#define SIZE(type, n)                                                                              \
    {                                                                                              \
#type, "sizeof", sizeof(type), n                                                           \
    }

/* Recorded on LP64 (x86-64 and arm64 lay these structs out alike). A field may be added only
 * by carving it from a reserved tail: append its row, shrink the reserved one, and leave every
 * other number as it is. */
static const recorded_offset recorded[] = {
    SIZE(sharc_logger, 24),
    AT(sharc_logger, cookie, 0),
    AT(sharc_logger, callback, 8),
    AT(sharc_logger, level, 16),
    SIZE(sharc_allocator, 24),
    AT(sharc_allocator, cookie, 0),
    AT(sharc_allocator, alloc, 8),
    AT(sharc_allocator, free, 16),
    SIZE(sharc_problem_report, 48),
    AT(sharc_problem_report, kind, 0),
    AT(sharc_problem_report, code, 4),
    AT(sharc_problem_report, shard, 8),
    AT(sharc_problem_report, member, 16),
    AT(sharc_problem_report, cut_id, 24),
    AT(sharc_problem_report, message, 32),
    AT(sharc_problem_report, shard_left, 40),
    SIZE(sharc_field, 40),
    AT(sharc_field, name, 0),
    AT(sharc_field, member, 8),
    AT(sharc_field, json, 16),
    AT(sharc_field, data, 24),
    AT(sharc_field, nbytes, 32),
    SIZE(sharc_cut, 176),
    AT(sharc_cut, id, 0),
    AT(sharc_cut, duration, 8),
    AT(sharc_cut, sampling_rate, 16),
    AT(sharc_cut, channels, 20),
    AT(sharc_cut, num_samples, 24),
    AT(sharc_cut, samples, 32),
    AT(sharc_cut, text, 40),
    AT(sharc_cut, speaker, 48),
    AT(sharc_cut, language, 56),
    AT(sharc_cut, json, 64),
    AT(sharc_cut, shard, 72),
    AT(sharc_cut, member, 80),
    AT(sharc_cut, audio, 88),
    AT(sharc_cut, audio_nbytes, 96),
    AT(sharc_cut, offset, 104),
    AT(sharc_cut, epoch, 112),
    AT(sharc_cut, shard_index, 120),
    AT(sharc_cut, position, 128),
    AT(sharc_cut, n_fields, 136),
    AT(sharc_cut, fields, 144),
    AT(sharc_cut, speed, 152),
    AT(sharc_cut, gain, 160),
    AT(sharc_cut, snr_db, 168),
    SIZE(sharc_sampler_settings, 176),
    AT(sharc_sampler_settings, struct_size, 0),
    AT(sharc_sampler_settings, max_duration, 8),
    AT(sharc_sampler_settings, max_cuts, 16),
    AT(sharc_sampler_settings, quadratic_duration, 24),
    AT(sharc_sampler_settings, num_buckets, 32),
    AT(sharc_sampler_settings, bins, 40),
    AT(sharc_sampler_settings, n_bins, 48),
    AT(sharc_sampler_settings, bucket_batch_size, 56),
    AT(sharc_sampler_settings, num_cuts_for_bins_estimate, 64),
    AT(sharc_sampler_settings, buffer_size, 68),
    AT(sharc_sampler_settings, max_buffer_bytes, 72),
    AT(sharc_sampler_settings, shuffle, 80),
    AT(sharc_sampler_settings, drop_last, 84),
    AT(sharc_sampler_settings, sync_buckets, 88),
    AT(sharc_sampler_settings, world_size, 92),
    AT(sharc_sampler_settings, min_duration, 96),
    AT(sharc_sampler_settings, max_cut_duration, 104),
    AT(sharc_sampler_settings, bin_tokens, 112),
    AT(sharc_sampler_settings, max_tps, 120),
    AT(sharc_sampler_settings, n_max_tps, 128),
    AT(sharc_sampler_settings, min_tps, 136),
    AT(sharc_sampler_settings, min_tokens, 144),
    AT(sharc_sampler_settings, max_tokens, 148),
    AT(sharc_sampler_settings, token_equivalent_duration, 152),
    AT(sharc_sampler_settings, batch_tokens, 160),
    AT(sharc_sampler_settings, reserved, 164),
    SIZE(sharc_reader_settings, 528),
    AT(sharc_reader_settings, struct_size, 0),
    AT(sharc_reader_settings, paths, 8),
    AT(sharc_reader_settings, n_paths, 16),
    AT(sharc_reader_settings, layout, 24),
    AT(sharc_reader_settings, seed, 32),
    AT(sharc_reader_settings, shuffle_shards, 40),
    AT(sharc_reader_settings, epochs, 48),
    AT(sharc_reader_settings, dp_rank, 56),
    AT(sharc_reader_settings, dp_size, 60),
    AT(sharc_reader_settings, on_error, 64),
    AT(sharc_reader_settings, decode, 68),
    AT(sharc_reader_settings, sampling_rate, 72),
    AT(sharc_reader_settings, channel, 76),
    AT(sharc_reader_settings, length_tolerance, 80),
    AT(sharc_reader_settings, max_member_bytes, 88),
    AT(sharc_reader_settings, max_line_bytes, 96),
    AT(sharc_reader_settings, nemo_text_field, 104),
    AT(sharc_reader_settings, nemo_lang_field, 112),
    AT(sharc_reader_settings, sampler, 120),
    AT(sharc_reader_settings, n_threads, 296),
    AT(sharc_reader_settings, prefetch, 300),
    AT(sharc_reader_settings, max_held_batches, 304),
    AT(sharc_reader_settings, resume_state, 312),
    AT(sharc_reader_settings, resume_state_size, 320),
    AT(sharc_reader_settings, on_problem, 328),
    AT(sharc_reader_settings, problem_cookie, 336),
    AT(sharc_reader_settings, logger, 344),
    AT(sharc_reader_settings, allocator, 368),
    AT(sharc_reader_settings, read_ahead_bytes, 392),
    AT(sharc_reader_settings, features, 400),
    AT(sharc_reader_settings, keep_audio, 404),
    AT(sharc_reader_settings, fbank_n_mels, 408),
    AT(sharc_reader_settings, fbank_sample_rate, 412),
    AT(sharc_reader_settings, fbank_window, 416),
    AT(sharc_reader_settings, fbank_hop, 420),
    AT(sharc_reader_settings, fbank_n_fft, 424),
    AT(sharc_reader_settings, fbank_pad_to, 428),
    AT(sharc_reader_settings, fbank_preemph, 432),
    AT(sharc_reader_settings, fbank_dither, 440),
    AT(sharc_reader_settings, retries, 448),
    AT(sharc_reader_settings, timeout_ms, 452),
    AT(sharc_reader_settings, input_cfg, 456),
    AT(sharc_reader_settings, max_open_streams, 464),
    AT(sharc_reader_settings, mix_finite, 468),
    AT(sharc_reader_settings, input_cfg_text, 472),
    AT(sharc_reader_settings, device, 480),
    AT(sharc_reader_settings, device_ordinal, 484),
    AT(sharc_reader_settings, augment, 488),
    AT(sharc_reader_settings, resample, 496),
    AT(sharc_reader_settings, tokenizer, 504),
    AT(sharc_reader_settings, n_tokenizer, 512),
    AT(sharc_reader_settings, reserved, 520),
    SIZE(sharc_augment_settings, 120),
    AT(sharc_augment_settings, struct_size, 0),
    AT(sharc_augment_settings, speed_perturb, 8),
    AT(sharc_augment_settings, n_speed_perturb, 16),
    AT(sharc_augment_settings, speed_perturb_prob, 24),
    AT(sharc_augment_settings, volume_perturb_db, 32),
    AT(sharc_augment_settings, volume_perturb_prob, 48),
    AT(sharc_augment_settings, noise, 56),
    AT(sharc_augment_settings, n_noise, 64),
    AT(sharc_augment_settings, noise_snr_db, 72),
    AT(sharc_augment_settings, noise_prob, 88),
    AT(sharc_augment_settings, noise_max_bytes, 96),
    AT(sharc_augment_settings, reserved, 104),
    SIZE(sharc_reader_stats, 432),
    AT(sharc_reader_stats, cuts, 0),
    AT(sharc_reader_stats, audio_seconds, 8),
    AT(sharc_reader_stats, shards, 16),
    AT(sharc_reader_stats, skipped_cuts, 24),
    AT(sharc_reader_stats, skipped_shards, 32),
    AT(sharc_reader_stats, problems, 40),
    AT(sharc_reader_stats, batches, 296),
    AT(sharc_reader_stats, filtered_cuts, 304),
    AT(sharc_reader_stats, dropped_cuts, 312),
    AT(sharc_reader_stats, padded_seconds, 320),
    AT(sharc_reader_stats, stage_seconds, 328),
    AT(sharc_reader_stats, n_problem_kinds, 368),
    AT(sharc_reader_stats, net_retries, 372),
    AT(sharc_reader_stats, net_bytes, 376),
    AT(sharc_reader_stats, net_wait_seconds, 384),
    AT(sharc_reader_stats, feature_seconds, 392),
    AT(sharc_reader_stats, condition_seconds, 400),
    AT(sharc_reader_stats, noise_seconds, 408),
    AT(sharc_reader_stats, reserved, 416),
    SIZE(sharc_tensor, 96),
    AT(sharc_tensor, name, 0),
    AT(sharc_tensor, dtype, 32),
    AT(sharc_tensor, device, 36),
    AT(sharc_tensor, device_ordinal, 40),
    AT(sharc_tensor, ndim, 44),
    AT(sharc_tensor, shape, 48),
    AT(sharc_tensor, data, 80),
    AT(sharc_tensor, nbytes, 88),
    SIZE(sharc_batch, 40),
    AT(sharc_batch, step, 0),
    AT(sharc_batch, epoch, 8),
    AT(sharc_batch, n_tensors, 16),
    AT(sharc_batch, tensors, 24),
    AT(sharc_batch, owner_, 32),
    SIZE(sharc_mesh, 368),
    AT(sharc_mesh, n_axes, 0),
    AT(sharc_mesh, names, 4),
    AT(sharc_mesh, sizes, 132),
    AT(sharc_mesh, coords, 164),
    AT(sharc_mesh, broadcast_mask, 196),
    AT(sharc_mesh, rank, 200),
    AT(sharc_mesh, size, 204),
    AT(sharc_mesh, error, 208),
    SIZE(sharc_transport_settings, 120),
    AT(sharc_transport_settings, struct_size, 0),
    AT(sharc_transport_settings, allocator, 8),
    AT(sharc_transport_settings, logger, 32),
    AT(sharc_transport_settings, timeout_ms, 56),
    AT(sharc_transport_settings, reserved, 60),
    SIZE(sharc_loader_settings, 1016),
    AT(sharc_loader_settings, struct_size, 0),
    AT(sharc_loader_settings, reader, 8),
    AT(sharc_loader_settings, mesh, 536),
    AT(sharc_loader_settings, transport, 904),
    AT(sharc_loader_settings, max_frame_bytes, 912),
    AT(sharc_loader_settings, control_bytes, 920),
    AT(sharc_loader_settings, produce, 928),
    AT(sharc_loader_settings, produce_cookie, 936),
    AT(sharc_loader_settings, max_steps, 944),
    AT(sharc_loader_settings, dp_transport, 952),
    AT(sharc_loader_settings, even_steps, 960),
    AT(sharc_loader_settings, reserved, 964),
    SIZE(sharc_writer_settings, 184),
    AT(sharc_writer_settings, struct_size, 0),
    AT(sharc_writer_settings, layout, 4),
    AT(sharc_writer_settings, out_dir, 8),
    AT(sharc_writer_settings, compression, 16),
    AT(sharc_writer_settings, cuts_per_shard, 20),
    AT(sharc_writer_settings, zstd_threads, 24),
    AT(sharc_writer_settings, duration_tolerance, 32),
    AT(sharc_writer_settings, max_audio_bytes, 40),
    AT(sharc_writer_settings, dry_run, 48),
    AT(sharc_writer_settings, cancel, 56),
    AT(sharc_writer_settings, cancel_cookie, 64),
    AT(sharc_writer_settings, allocator, 72),
    AT(sharc_writer_settings, logger, 96),
    AT(sharc_writer_settings, reserved, 120),
};

START_TEST(public_fields_stay_put)
{
#if defined(__LP64__)
    int moved = 0;
    for (size_t i = 0; i < sizeof recorded / sizeof *recorded; i++) {
        const recorded_offset *o = &recorded[i];
        if (o->now != o->recorded) {
            fprintf(stderr, "%s.%s is at %zu, recorded at %zu\n", o->type, o->field, o->now,
                    o->recorded);
            moved++;
        }
    }
    ck_assert_msg(moved == 0, "%d public struct fields or sizes changed (listed above)", moved);
#else
    fputs("offsets are recorded for LP64 only; not checked here\n", stderr);
#endif
}
END_TEST

START_TEST(default_settings_set_struct_size)
{
    sharc_reader_settings rs;
    memset(&rs, 0xAB, sizeof rs);
    sharc_reader_default_settings(&rs);
    ck_assert_uint_eq(rs.struct_size, sizeof rs);
    ck_assert_uint_eq(rs.sampler.struct_size, sizeof rs.sampler);
    sharc_loader_settings ls;
    memset(&ls, 0xAB, sizeof ls);
    sharc_loader_default_settings(&ls);
    ck_assert_uint_eq(ls.struct_size, sizeof ls);
    ck_assert_uint_eq(ls.reader.struct_size, sizeof ls.reader);
    ck_assert_uint_eq(ls.reader.sampler.struct_size, sizeof ls.reader.sampler);
    sharc_transport_settings ts;
    memset(&ts, 0xAB, sizeof ts);
    sharc_transport_default_settings(&ts);
    ck_assert_uint_eq(ts.struct_size, sizeof ts);
    for (size_t i = 0; i < sizeof rs.reserved; i++)
        ck_assert_uint_eq(rs.reserved[i], 0);
    for (size_t i = 0; i < sizeof rs.sampler.reserved; i++)
        ck_assert_uint_eq(rs.sampler.reserved[i], 0);
    for (size_t i = 0; i < sizeof ls.reserved; i++)
        ck_assert_uint_eq(ls.reserved[i], 0);
    for (size_t i = 0; i < sizeof ts.reserved; i++)
        ck_assert_uint_eq(ts.reserved[i], 0);
}
END_TEST

/* What the library wrote to stderr (the default logger) while `fn` ran. */
static char stderr_text[4096];
static int capture_stderr(int (*fn)(void *), void *arg)
{
    char path[] = "/tmp/sharc-abi-stderr.XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    int saved = dup(2);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_ge(dup2(fd, 2), 0);
    int rc = fn(arg);
    fflush(stderr);
    ck_assert_int_ge(dup2(saved, 2), 0);
    close(saved);
    ssize_t n = pread(fd, stderr_text, sizeof stderr_text - 1, 0);
    stderr_text[n > 0 ? n : 0] = 0;
    close(fd);
    unlink(path);
    return rc;
}

static int open_reader(void *arg)
{
    sharc_reader *r = (sharc_reader *)&r;
    int rc = sharc_reader_open(&r, arg);
    ck_assert_ptr_null(r);
    return rc;
}

static int open_loader(void *arg)
{
    sharc_loader *l = (sharc_loader *)&l;
    int rc = sharc_loader_open(&l, arg);
    ck_assert_ptr_null(l);
    return rc;
}

static int open_self_transport(void *arg)
{
    sharc_transport *t = (sharc_transport *)&t;
    int rc = sharc_transport_self_open(&t, arg);
    ck_assert_ptr_null(t);
    return rc;
}

static void expect_refused(int (*fn)(void *), void *settings, const char *line)
{
    ck_assert_int_eq(capture_stderr(fn, settings), SHARC_ERR(EINVAL));
    ck_assert_str_eq(stderr_text, line);
}

START_TEST(open_refuses_a_wrong_struct_size)
{
    const char *paths[] = {"/nonexistent"};
    sharc_reader_settings rs;
    sharc_reader_default_settings(&rs);
    rs.paths = paths;
    rs.n_paths = 1;
    rs.struct_size = 0;
    expect_refused(open_reader, &rs,
                   "sharc: error: sharc_reader_settings.struct_size is 0: fill the settings with "
                   "sharc_reader_default_settings()\n");
    rs.struct_size = sizeof rs + 8;
    char want[512];
    snprintf(want, sizeof want,
             "sharc: error: sharc_reader_settings.struct_size is %zu, but this library (sharc "
             "%s) knows only %zu: build with the sharc headers of the library the program runs "
             "with, and fill the settings with sharc_reader_default_settings()\n",
             sizeof rs + 8, SHARC_VERSION_STRING, sizeof rs);
    expect_refused(open_reader, &rs, want);
    rs.struct_size = sizeof rs;
    rs.sampler.struct_size = 0;
    expect_refused(open_reader, &rs,
                   "sharc: error: sharc_reader_settings.sampler.struct_size is 0: fill the "
                   "settings with sharc_reader_default_settings()\n");
    rs.sampler.struct_size = sizeof rs.sampler;
    rs.sampler.reserved[sizeof rs.sampler.reserved - 1] = 1;
    expect_refused(open_reader, &rs,
                   "sharc: error: invalid reader settings: sampler reserved bytes must be zero\n");

    sharc_loader_settings ls;
    sharc_loader_default_settings(&ls);
    ls.struct_size = 0;
    expect_refused(open_loader, &ls,
                   "sharc: error: sharc_loader_settings.struct_size is 0: fill the settings with "
                   "sharc_loader_default_settings()\n");
    ls.struct_size = sizeof ls;
    ls.reader.struct_size = 12;
    snprintf(want, sizeof want,
             "sharc: error: sharc_loader_settings.reader.struct_size is 12, but this library "
             "(sharc %s) knows only %zu: build with the sharc headers of the library the "
             "program runs with, and fill the settings with sharc_loader_default_settings()\n",
             SHARC_VERSION_STRING, sizeof ls.reader);
    expect_refused(open_loader, &ls, want);
    ls.reader.struct_size = sizeof ls.reader;
    ls.reader.sampler.struct_size = 0;
    expect_refused(open_loader, &ls,
                   "sharc: error: sharc_loader_settings.reader.sampler.struct_size is 0: fill "
                   "the settings with sharc_loader_default_settings()\n");

    sharc_transport_settings ts;
    sharc_transport_default_settings(&ts);
    ts.struct_size = 0;
    expect_refused(open_self_transport, &ts,
                   "sharc: error: sharc_transport_settings.struct_size is 0: fill the settings "
                   "with sharc_transport_default_settings()\n");
    ts.struct_size = sizeof ts;
    ts.logger.callback = NULL;
    ts.reserved[0] = 1;
    ck_assert_int_eq(open_self_transport(&ts), SHARC_ERR(EINVAL));
    ts.reserved[0] = 0;
    sharc_transport *t = NULL;
    ck_assert_int_eq(sharc_transport_self_open(&t, &ts), 0);
    sharc_transport_close(&t);
}
END_TEST

START_TEST(problem_counters_have_fixed_room)
{
    ck_assert_uint_eq(sizeof((sharc_reader_stats *)0)->problems / sizeof(uint64_t),
                      SHARC_PROBLEM_CAPACITY);
    ck_assert_int_le(SHARC_PROBLEM_COUNT, SHARC_PROBLEM_CAPACITY);
    sharc_reader_stats st;
    memset(&st, 0xAB, sizeof st);
    sharc_reader_get_stats(NULL, &st);
    ck_assert_uint_eq(st.n_problem_kinds, SHARC_PROBLEM_COUNT);
    for (int i = 0; i < SHARC_PROBLEM_CAPACITY; i++)
        ck_assert_uint_eq(st.problems[i], 0);
    for (size_t i = 0; i < sizeof st.reserved; i++)
        ck_assert_uint_eq(st.reserved[i], 0);
}
END_TEST

START_TEST(version_end_and_free)
{
    ck_assert_uint_eq(sharc_version(), SHARC_VERSION_NUMBER);
    ck_assert_str_eq(sharc_version_string(), SHARC_VERSION_STRING);
    ck_assert_str_eq(sharc_version_string(), SHARC_TEST_PROJECT_VERSION);
    ck_assert_int_eq(SHARC_END, 1);
    ck_assert_int_eq(SHARC_ERR_END, SHARC_END);
    ck_assert_str_eq(sharc_strerror(SHARC_END), "end of stream");
    ck_assert_str_eq(sharc_err_name(SHARC_END), "SHARC_END");
    char **paths = NULL;
    size_t n = 0;
    ck_assert_int_eq(sharc_reader_expand_path("a{1..3}", &paths, &n, NULL, 0), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(paths[2], "a3");
    sharc_free(paths);
    sharc_free(NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("abi");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, public_fields_stay_put);
    tcase_add_test(tc, default_settings_set_struct_size);
    tcase_add_test(tc, open_refuses_a_wrong_struct_size);
    tcase_add_test(tc, problem_counters_have_fixed_room);
    tcase_add_test(tc, version_end_and_free);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
