/* The reader's device setting (reader/device.c) on any machine: its defaults, the settings
 * refused at open with their messages (an unknown device, a negative ordinal, an ordinal for
 * the host, a build without CUDA, dither or another sampling rate with the GPU features, no
 * usable device), the settings the pipeline runs with under a device stage, and
 * sharc_tensor_copy_to_host on host tensors. The device batches themselves are checked on a
 * GPU by tests/gpu/gpu_device.c. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#include "reader/device.h"
#include "sharc/sharc.h"
#include "testutil.h"

static char last_log[2048];

static void capture(void *cookie, sharc_log_level level, const char *message)
{
    (void)cookie;
    (void)level;
    snprintf(last_log, sizeof last_log, "%s", message);
}

static const char *const no_path[] = {"/nonexistent/sharc-device-test"};

static void settings(sharc_reader_settings *s)
{
    sharc_reader_default_settings(s);
    s->paths = no_path;
    s->n_paths = 1;
    s->logger.callback = capture;
    s->logger.level = SHARC_LOG_ERROR;
    last_log[0] = 0;
}

/* Open with `s`, expect `rc`, and return the message logged. */
static const char *open_fails(const sharc_reader_settings *s, int rc)
{
    sharc_reader *r = NULL;
    ck_assert_int_eq(sharc_reader_open(&r, s), rc);
    ck_assert_ptr_null(r);
    return last_log;
}

START_TEST(defaults_are_the_host)
{
    sharc_reader_settings s;
    sharc_reader_default_settings(&s);
    ck_assert_int_eq(s.device, SHARC_DEVICE_HOST);
    ck_assert_int_eq(s.device_ordinal, 0);
    ck_assert(!sharc__device_wanted(&s));
    s.device = 0; /* a program built before the field left it zero: the host too */
    ck_assert(!sharc__device_wanted(&s));
}
END_TEST

START_TEST(bad_settings_are_named)
{
    sharc_reader_settings s;
    settings(&s);
    s.device = (sharc_device)7;
    ck_assert_str_eq(open_fails(&s, SHARC_ERR(EINVAL)),
                     "device 7: unknown (SHARC_DEVICE_HOST or SHARC_DEVICE_CUDA)");
    settings(&s);
    s.device_ordinal = 2;
    ck_assert_str_eq(open_fails(&s, SHARC_ERR(EINVAL)),
                     "device_ordinal 2: only for device SHARC_DEVICE_CUDA (the host has none: "
                     "leave it 0)");
    settings(&s);
    s.device = SHARC_DEVICE_CUDA;
    s.device_ordinal = -1;
    ck_assert_str_eq(open_fails(&s, SHARC_ERR(EINVAL)),
                     "device cuda:-1: the device ordinal must be >= 0");
}
END_TEST

START_TEST(cuda_needs_a_build_and_a_device)
{
    sharc_reader_settings s;
    settings(&s);
    s.device = SHARC_DEVICE_CUDA;
    s.device_ordinal = 3;
#if !SHARC_HAVE_CUDA
    ck_assert_str_eq(open_fails(&s, SHARC_ERR_UNSUPPORTED),
                     "sharc was built without CUDA: --device cuda:3 needs a CUDA build");
#else
    s.features = SHARC_FEATURES_FBANK;
#if SHARC_HAVE_FBANK_CUDA
    s.fbank_dither = 0.25;
    ck_assert_str_eq(open_fails(&s, SHARC_ERR(EINVAL)),
                     "fbank dither 0.25: the features on device cuda:3 are not dithered (set "
                     "0, or compute them on the host)");
    s.fbank_dither = 0;
    s.sampling_rate = 8000;
    ck_assert_str_eq(open_fails(&s, SHARC_ERR(EINVAL)),
                     "sampling_rate 8000: the features on device cuda:3 are made for 16000 Hz "
                     "(fbank_sample_rate); sharc does not resample");
    s.sampling_rate = 0;
#endif
    /* An ordinal past the devices, or no usable device at all: named either way. */
    s.device_ordinal = 1000;
    const char *m = open_fails(&s, SHARC_ERR_CUDA);
    const char *none = "device cuda:1000: no CUDA device can be used: cudaGetDeviceCount failed: ";
    const char *past = "device cuda:1000: no such device (";
    if (strncmp(m, none, strlen(none)) != 0)
        ck_assert_msg(strncmp(m, past, strlen(past)) == 0, "message: %s", m);
#endif
}
END_TEST

START_TEST(the_pipeline_computes_no_features_for_the_device)
{
    sharc_reader_settings s, p;
    sharc_reader_default_settings(&s);
    s.features = SHARC_FEATURES_FBANK;
    s.keep_audio = 0;
    sharc__device_pipeline_settings(&s, &p);
    ck_assert_int_eq(p.features, SHARC_FEATURES_FBANK); /* the host keeps its features */
    ck_assert_int_eq(p.keep_audio, 0);
    ck_assert_int_eq(p.sampling_rate, 0);
    s.device = SHARC_DEVICE_CUDA;
    s.device_ordinal = 1;
    sharc__device_pipeline_settings(&s, &p);
    ck_assert_int_eq(p.features, SHARC_FEATURES_NONE);
    ck_assert_int_eq(p.keep_audio, 1);
    ck_assert_int_eq(p.sampling_rate, 16000);
    ck_assert_int_eq(p.device_ordinal, 1);
    s.sampling_rate = 16000;
    s.features = SHARC_FEATURES_NONE;
    sharc__device_pipeline_settings(&s, &p);
    ck_assert_int_eq(p.features, SHARC_FEATURES_NONE);
    ck_assert_int_eq(p.sampling_rate, 16000);
    s.sampling_rate = 0;
    sharc__device_pipeline_settings(&s, &p);
    ck_assert_int_eq(p.sampling_rate, 0); /* no features: any rate, as on the host */
}
END_TEST

START_TEST(host_tensors_copy_to_the_host)
{
    float v[3] = {1.5f, -2, 0.25f}, got[4] = {9, 9, 9, 9};
    sharc_tensor t = {.name = "x",
                      .dtype = SHARC_DTYPE_F32,
                      .device = SHARC_DEVICE_HOST,
                      .ndim = 1,
                      .shape = {3},
                      .data = v,
                      .nbytes = sizeof v};
    ck_assert_int_eq(sharc_tensor_copy_to_host(&t, got, sizeof got), 0);
    ck_assert(got[0] == 1.5f && got[1] == -2 && got[2] == 0.25f && got[3] == 9);
    ck_assert_int_eq(sharc_tensor_copy_to_host(&t, got, sizeof v - 1), SHARC_ERR(EINVAL));
    ck_assert_int_eq(sharc_tensor_copy_to_host(NULL, got, sizeof got), SHARC_ERR(EINVAL));
    sharc_device_stats ds;
    memset(&ds, 0xAB, sizeof ds);
    sharc_reader_get_device_stats(NULL, &ds);
    ck_assert_uint_eq(ds.batches, 0);
    ck_assert_uint_eq(ds.allocations, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("device");
    TCase *tc = tcase_create("device");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, defaults_are_the_host);
    tcase_add_test(tc, bad_settings_are_named);
    tcase_add_test(tc, cuda_needs_a_build_and_a_device);
    tcase_add_test(tc, the_pipeline_computes_no_features_for_the_device);
    tcase_add_test(tc, host_tensors_copy_to_the_host);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
