#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "batching/frame.h"
#include "sharc/sharc.h"
#include "testutil.h"

#define CONTROL 4096

static float audio[2][3] = {{1, 2, 3}, {4, 5, 0}};
static int32_t lens[2] = {3, 2};
static int32_t id_offsets[3] = {0, 3, 7};
static char id_bytes[] = "abcdefg";

static sharc_tensor make(const char *name, sharc_dtype dt, int ndim, int64_t d0, int64_t d1,
                         void *data)
{
    sharc_tensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    t.dtype = dt;
    t.device = SHARC_DEVICE_HOST;
    t.ndim = ndim;
    t.shape[0] = d0;
    t.shape[1] = d1;
    t.nbytes = sharc_dtype_size(dt) * (size_t)d0 * (size_t)(ndim > 1 ? d1 : 1);
    t.data = data;
    return t;
}

static size_t sample_tensors(sharc_tensor *t)
{
    t[0] = make("audio", SHARC_DTYPE_F32, 2, 2, 3, audio);
    t[1] = make("audio_lens", SHARC_DTYPE_I32, 1, 2, 0, lens);
    t[2] = make("cut_id_offsets", SHARC_DTYPE_I32, 1, 3, 0, id_offsets);
    t[3] = make("cut_id_bytes", SHARC_DTYPE_U8, 1, 7, 0, id_bytes);
    return 4;
}

static sharc__frame_limits limits = {8, 1 << 20};

/* Decode from a buffer of exactly `len` bytes so ASan catches any read past the end. */
static int decode_exact(const uint8_t *bytes, size_t len, sharc__ctx *ctx, sharc__frame_header *h,
                        sharc_tensor *t, uint64_t *off)
{
    uint8_t *copy = malloc(len ? len : 1);
    memcpy(copy, bytes, len);
    int rc = sharc__frame_decode(ctx, copy, len, &limits, h, t, off);
    free(copy);
    return rc;
}

static uint8_t block[CONTROL];

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Recompute the header CRC after a test edits a field, so the field check itself runs. */
static void recrc(uint8_t *b)
{
    uint32_t n = get32(b + 24), msg = get32(b + 44);
    if (n > 16)
        n = 16;
    if (msg > 1024)
        msg = 1024;
    uLong c = crc32(0L, Z_NULL, 0);
    c = crc32(c, b, 60);
    c = crc32(c, b + 64, n * 96 + msg);
    put32(b + 60, (uint32_t)c);
}

static void encode_sample(uint64_t *payload)
{
    sharc_tensor t[4];
    uint64_t off[4];
    size_t n = sample_tensors(t);
    memset(block, 0, sizeof block);
    ck_assert_int_eq(sharc__frame_layout(t, n, off, payload), 0);
    ck_assert_int_eq(sharc__frame_encode_data(block, CONTROL, 7, 2, t, off, n, *payload, 0), 0);
}

static void expect_reject(size_t len, const char *needle)
{
    sharc__ctx ctx;
    sharc__frame_header h;
    sharc_tensor t[8];
    uint64_t off[8];
    sharc__ctx_init(&ctx, NULL, NULL);
    int rc = decode_exact(block, len, &ctx, &h, t, off);
    ck_assert_int_eq(rc, SHARC_ERR_FRAME);
    ck_assert_msg(strstr(ctx.error, needle), "error '%s' lacks '%s'", ctx.error, needle);
}

START_TEST(layout_is_packed_and_aligned)
{
    sharc_tensor t[4];
    uint64_t off[4], payload = 0;
    size_t n = sample_tensors(t);
    ck_assert_int_eq(sharc__frame_layout(t, n, off, &payload), 0);
    ck_assert_uint_eq(off[0], 0);
    ck_assert_uint_eq(off[1], 256);
    ck_assert_uint_eq(off[2], 512);
    ck_assert_uint_eq(off[3], 768);
    ck_assert_uint_eq(payload, 768 + 7);
    ck_assert_uint_eq(sharc__frame_align(1), 256);
    ck_assert_uint_eq(sharc__frame_align(256), 256);
    ck_assert_uint_eq(sharc__frame_align(UINT64_MAX - 3), 0);
}
END_TEST

START_TEST(data_round_trip)
{
    uint64_t payload;
    encode_sample(&payload);
    ck_assert(memcmp(block, "SHRC", 4) == 0);
    sharc__ctx ctx;
    sharc__frame_header h;
    sharc_tensor t[8];
    uint64_t off[8];
    sharc__ctx_init(&ctx, NULL, NULL);
    size_t used = sharc__frame_control_bytes(4);
    ck_assert_int_eq(decode_exact(block, used, &ctx, &h, t, off), 0);
    ck_assert_int_eq(h.kind, SHARC__FRAME_DATA);
    ck_assert_uint_eq(h.step, 7);
    ck_assert_uint_eq(h.epoch, 2);
    ck_assert_uint_eq(h.n_tensors, 4);
    ck_assert_uint_eq(h.payload_bytes, payload);
    ck_assert_uint_eq(h.inline_offset, 0);
    ck_assert_str_eq(t[0].name, "audio");
    ck_assert_int_eq(t[0].dtype, SHARC_DTYPE_F32);
    ck_assert_int_eq(t[0].device, SHARC_DEVICE_HOST);
    ck_assert_int_eq(t[0].ndim, 2);
    ck_assert_int_eq(t[0].shape[0], 2);
    ck_assert_int_eq(t[0].shape[1], 3);
    ck_assert_uint_eq(t[0].nbytes, 24);
    ck_assert_ptr_null(t[0].data);
    ck_assert_str_eq(t[3].name, "cut_id_bytes");
    ck_assert_int_eq(t[3].dtype, SHARC_DTYPE_U8);
    ck_assert_uint_eq(t[3].nbytes, 7);
    ck_assert_uint_eq(off[3], 768);
}
END_TEST

START_TEST(stop_and_error_round_trip)
{
    sharc__ctx ctx;
    sharc__frame_header h;
    sharc_tensor t[8];
    uint64_t off[8];
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc__frame_encode_stop(block, CONTROL, 11);
    ck_assert_int_eq(decode_exact(block, 64, &ctx, &h, t, off), 0);
    ck_assert_int_eq(h.kind, SHARC__FRAME_STOP);
    ck_assert_uint_eq(h.step, 11);
    sharc__frame_encode_error(block, CONTROL, 3, SHARC_ERR_DECODE, "corrupt FLAC in a.tar");
    ck_assert_int_eq(decode_exact(block, 64 + 21, &ctx, &h, t, off), 0);
    ck_assert_int_eq(h.kind, SHARC__FRAME_ERROR);
    ck_assert_int_eq(h.error_code, SHARC_ERR_DECODE);
    ck_assert_str_eq(h.message, "corrupt FLAC in a.tar");
    /* A message longer than the frame carries is cut, not overflowed. */
    char long_msg[3000];
    memset(long_msg, 'x', sizeof long_msg - 1);
    long_msg[sizeof long_msg - 1] = 0;
    sharc__frame_encode_error(block, CONTROL, 3, SHARC_ERR_DECODE, long_msg);
    ck_assert_int_eq(decode_exact(block, CONTROL, &ctx, &h, t, off), 0);
    ck_assert_uint_eq(strlen(h.message), SHARC__FRAME_MESSAGE_MAX);
}
END_TEST

START_TEST(rejects_bad_header_fields)
{
    uint64_t payload;
    size_t used = sharc__frame_control_bytes(4);
    encode_sample(&payload);
    block[0] = 'X';
    expect_reject(used, "magic");

    encode_sample(&payload);
    block[4] = 9;
    recrc(block);
    expect_reject(used, "version");

    encode_sample(&payload);
    block[6] = 9;
    recrc(block);
    expect_reject(used, "unknown frame kind 9");

    encode_sample(&payload);
    block[64 + 5] ^= 1; /* a name byte: caught by the CRC */
    expect_reject(used, "checksum");

    encode_sample(&payload);
    block[60] ^= 0x80;
    expect_reject(used, "checksum");

    encode_sample(&payload);
    put32(block + 24, 9); /* more tensors than the receiver accepts */
    recrc(block);
    expect_reject(CONTROL, "9 tensors");

    encode_sample(&payload);
    put32(block + 44, 5000);
    recrc(block);
    expect_reject(CONTROL, "message");

    encode_sample(&payload);
    put32(block + 56, 1);
    recrc(block);
    expect_reject(used, "reserved");

    encode_sample(&payload);
    put64(block + 32, (uint64_t)1 << 40);
    recrc(block);
    expect_reject(used, "over the cap");
}
END_TEST

START_TEST(rejects_truncated_frames)
{
    uint64_t payload;
    encode_sample(&payload);
    size_t used = sharc__frame_control_bytes(4);
    expect_reject(0, "truncated");
    expect_reject(63, "truncated");
    expect_reject(used - 1, "truncated");
    sharc__frame_encode_error(block, CONTROL, 3, SHARC_ERR_DECODE, "abcdef");
    expect_reject(64 + 5, "truncated");
}
END_TEST

static uint8_t *desc(int i)
{
    return block + 64 + 96 * i;
}

START_TEST(rejects_bad_descriptors)
{
    uint64_t payload;
    size_t used = sharc__frame_control_bytes(4);

    encode_sample(&payload);
    memset(desc(1), 'a', 32);
    recrc(block);
    expect_reject(used, "NUL-terminated");

    encode_sample(&payload);
    desc(1)[0] = 0;
    recrc(block);
    expect_reject(used, "empty");

    encode_sample(&payload);
    desc(0)[32] = 99;
    recrc(block);
    expect_reject(used, "unknown dtype 99");

    encode_sample(&payload);
    desc(0)[33] = 7;
    recrc(block);
    expect_reject(used, "unknown device");

    encode_sample(&payload);
    desc(0)[34] = 5;
    recrc(block);
    expect_reject(used, "5 dimensions");

    encode_sample(&payload);
    put64(desc(0) + 40, (uint64_t)1 << 62);
    put64(desc(0) + 48, (uint64_t)1 << 62);
    recrc(block);
    expect_reject(used, "overflows");

    encode_sample(&payload);
    put64(desc(0) + 40, UINT64_MAX);
    recrc(block);
    expect_reject(used, "negative extent");

    encode_sample(&payload);
    put64(desc(0) + 56, 3); /* extent past ndim */
    recrc(block);
    expect_reject(used, "past ndim");

    encode_sample(&payload);
    put64(desc(0) + 80, 25);
    recrc(block);
    expect_reject(used, "do not match");

    encode_sample(&payload);
    put64(desc(3) + 72, 1024); /* 7 bytes at 1024 in a 775-byte payload */
    recrc(block);
    expect_reject(used, "outside the payload");

    encode_sample(&payload);
    put64(desc(3) + 72, UINT64_MAX - 255);
    recrc(block);
    expect_reject(used, "outside the payload");

    encode_sample(&payload);
    put64(desc(1) + 72, 300);
    recrc(block);
    expect_reject(used, "outside the payload");

    encode_sample(&payload);
    memcpy(desc(1), "audio\0\0\0\0\0\0", 11);
    recrc(block);
    expect_reject(used, "appears twice");

    encode_sample(&payload);
    desc(2)[35] = 1;
    recrc(block);
    expect_reject(used, "reserved");
}
END_TEST

START_TEST(rejects_bad_inline_and_kinds)
{
    uint64_t payload;
    encode_sample(&payload);
    put32(block + 28, 128); /* inside the descriptors and unaligned */
    recrc(block);
    expect_reject(CONTROL, "inline");

    encode_sample(&payload);
    put32(block + 28, CONTROL - 256); /* payload of 775 bytes does not fit after it */
    recrc(block);
    expect_reject(CONTROL, "inline");

    sharc__frame_encode_stop(block, CONTROL, 1);
    put32(block + 24, 1);
    recrc(block);
    expect_reject(CONTROL, "STOP frame carries tensors");

    sharc__frame_encode_error(block, CONTROL, 1, SHARC_ERR_DECODE, "x");
    put32(block + 40, 5);
    recrc(block);
    expect_reject(CONTROL, "ERROR frame with code 5");

    encode_sample(&payload);
    put32(block + 40, (uint32_t)SHARC_ERR_DECODE);
    recrc(block);
    expect_reject(CONTROL, "DATA frame carries an error");
}
END_TEST

START_TEST(sender_checks_tensors)
{
    sharc__ctx ctx;
    sharc__ctx_init(&ctx, NULL, NULL);
    sharc_tensor t = make("audio", SHARC_DTYPE_F32, 2, 2, 3, audio);
    ck_assert_int_eq(sharc__frame_check_tensor(&ctx, &t), 0);
    t.nbytes = 20;
    ck_assert_int_eq(sharc__frame_check_tensor(&ctx, &t), SHARC_ERR_FRAME);
    ck_assert_ptr_nonnull(strstr(ctx.error, "'audio'"));
    t = make("audio", (sharc_dtype)42, 1, 2, 0, audio);
    ck_assert_int_eq(sharc__frame_check_tensor(&ctx, &t), SHARC_ERR_FRAME);
    t = make("audio", SHARC_DTYPE_F32, 1, 2, 0, audio);
    t.device = (sharc_device)9;
    ck_assert_int_eq(sharc__frame_check_tensor(&ctx, &t), SHARC_ERR_UNSUPPORTED);
    t = make("audio", SHARC_DTYPE_F32, 1, 2, 0, NULL);
    ck_assert_int_eq(sharc__frame_check_tensor(&ctx, &t), SHARC_ERR_FRAME);
    ck_assert_ptr_nonnull(strstr(ctx.error, "no data"));
    ck_assert_int_eq(sharc__frame_encode_data(block, 64 + 96, 0, 0, &t, (uint64_t[]){0}, 2, 0, 0),
                     SHARC_ERR_TOO_LARGE);
}
END_TEST

static Suite *frame_suite(void)
{
    Suite *s = suite_create("frame");
    TCase *tc = tcase_create("codec");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, layout_is_packed_and_aligned);
    tcase_add_test(tc, data_round_trip);
    tcase_add_test(tc, stop_and_error_round_trip);
    tcase_add_test(tc, rejects_bad_header_fields);
    tcase_add_test(tc, rejects_truncated_frames);
    tcase_add_test(tc, rejects_bad_descriptors);
    tcase_add_test(tc, rejects_bad_inline_and_kinds);
    tcase_add_test(tc, sender_checks_tensors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(frame_suite());
}
