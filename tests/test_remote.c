/* Remote shards (io/remote.h): which paths are remote, URLs with credentials refused, query
 * strings hidden, the ListObjectsV2 page parser and the bounds of a listing, pipe: commands
 * read to their end or stopped, and ranged reads against a server that ignores the range or
 * answers other bytes. Transfers over HTTP and S3 are tested end to end in
 * tests/cli/remote_http.sh and remote_s3.sh. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/ctx.h"
#include "io/remote.h"
#include "io/tar.h"
#include "testutil.h"

static sharc__ctx quiet_ctx(void)
{
    sharc__ctx ctx;
    sharc_logger quiet = {NULL, NULL, SHARC_LOG_ERROR};
    sharc__ctx_init(&ctx, NULL, &quiet);
    return ctx;
}

START_TEST(tells_remote_paths)
{
    ck_assert(sharc__is_remote("s3://b/k.tar"));
    ck_assert(sharc__is_remote("http://h/x.tar"));
    ck_assert(sharc__is_remote("https://h/x.tar"));
    ck_assert(sharc__is_remote("pipe:cat x.tar"));
    ck_assert(!sharc__is_remote("/data/s3://x"));
    ck_assert(!sharc__is_remote("s3:/b/k"));
    ck_assert(!sharc__is_remote("pipe"));
    ck_assert(sharc__remote_is_prefix("s3://b"));
    ck_assert(sharc__remote_is_prefix("s3://b/"));
    ck_assert(sharc__remote_is_prefix("s3://b/corpus/shar/"));
    ck_assert(!sharc__remote_is_prefix("s3://b/corpus/shard-0.tar"));
    ck_assert(!sharc__remote_is_prefix("https://h/dir/"));
}
END_TEST

START_TEST(refuses_credentials_in_urls)
{
    sharc__ctx ctx = quiet_ctx();
    ck_assert_int_eq(sharc__remote_check_path(&ctx, "https://h/a@b.tar"), 0);
    ck_assert_int_eq(sharc__remote_check_path(&ctx, "pipe:curl -u me:pw@x https://h/x.tar"), 0);
    ck_assert_int_eq(sharc__remote_check_path(&ctx, "https://me:pw-123@h:9/x.tar"),
                     SHARC_ERR(EINVAL));
    ck_assert_str_eq(ctx.error, "https://***@h:9/x.tar: a URL with a user name or password is "
                                "refused, so that credentials never appear in messages or saved "
                                "states: give them in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
    ck_assert_ptr_null(strstr(ctx.error, "pw-123"));
}
END_TEST

START_TEST(hides_query_strings)
{
    sharc__ctx ctx = quiet_ctx();
    const char *url = "https://h:9/a/x.tar?X-Amz-Credential=AKID%2Fx&X-Amz-Signature=5ec2e7";
    char *shown = sharc__remote_shown(&ctx, url);
    ck_assert_str_eq(shown, "https://h:9/a/x.tar?…");
    ck_assert_ptr_eq(sharc__remote_query(url), strchr(url, '?'));
    ck_assert_ptr_null(sharc__remote_query(shown)); /* shown already */
    /* Only an http(s) URL's query is one; a fragment comes after it. */
    const char *kept[] = {"s3://b/k?x=1", "pipe:curl 'https://h/x?s=1'", "https://h/x#f?y",
                          "/data/x.tar?s=1", "https://h/x.tar"};
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++) {
        char *same = sharc__remote_shown(&ctx, kept[i]);
        ck_assert_str_eq(same, kept[i]);
        ck_assert_ptr_null(sharc__remote_query(kept[i]));
        sharc__free(&ctx, same);
    }
    /* Credentials and a query: neither is shown. */
    ck_assert_int_eq(sharc__remote_check_path(&ctx, "https://me:pw@h/x.tar?sig=5ec2e7"),
                     SHARC_ERR(EINVAL));
    ck_assert_msg(strstr(ctx.error, "https://***@h/x.tar?…: a URL with a user name") == ctx.error,
                  "%s", ctx.error);
    ck_assert_ptr_null(strstr(ctx.error, "5ec2e7"));
    /* A shown URL whose query this process never saw cannot be read: said, not guessed. */
    char buf[4];
    ck_assert_int_eq(sharc__remote_read_range(&ctx, NULL, "https://h/never-seen.tar?…", 0, 4,
                                              (uint8_t *)buf, (char[8]){0}, 8),
                     SHARC_ERR(EINVAL));
    ck_assert_str_eq(ctx.error, "https://h/never-seen.tar?…: the query string of this URL is "
                                "not known in this process: give the URL whole (with its "
                                "query) as a path");
    sharc__free(&ctx, shown);
}
END_TEST

static const char page[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>b</Name>"
    "<Prefix>c/</Prefix><KeyCount>5</KeyCount><MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter>"
    "<IsTruncated>true</IsTruncated>"
    "<Contents><Key>c/cuts.000000.jsonl.gz</Key><Size>10</Size></Contents>"
    "<Contents><Key>c/a&amp;b &lt;1&gt;&#x9;&#13;&#233;.tar</Key><Size>10</Size></Contents>"
    "<Contents><Key>c/.hidden.tar</Key><Size>1</Size></Contents>"
    "<Contents><Key>c/</Key><Size>0</Size></Contents>"
    "<CommonPrefixes><Prefix>c/sharded_manifests/</Prefix></CommonPrefixes>"
    "<CommonPrefixes><Prefix>c/other &amp; more/</Prefix></CommonPrefixes>"
    "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
    "</ListBucketResult>";

START_TEST(parses_a_listing_page)
{
    sharc__ctx ctx = quiet_ctx();
    sharc__strs keys = {0}, dirs = {0};
    char *token = NULL;
    ck_assert_int_eq(sharc__s3_parse_list(&ctx, page, strlen(page), "b", &keys, &dirs, &token), 0);
    ck_assert_uint_eq(keys.n, 2);
    ck_assert_str_eq(keys.items[0], "s3://b/c/cuts.000000.jsonl.gz");
    ck_assert_str_eq(keys.items[1], "s3://b/c/a&b <1>\t\r&#233;.tar");
    ck_assert_uint_eq(dirs.n, 2);
    ck_assert_str_eq(dirs.items[0], "c/sharded_manifests/");
    ck_assert_str_eq(dirs.items[1], "c/other & more/");
    ck_assert_str_eq(token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
    sharc__free(&ctx, token);
    sharc__strs_free(&ctx, &keys);
    sharc__strs_free(&ctx, &dirs);
}
END_TEST

START_TEST(refuses_broken_listings)
{
    sharc__ctx ctx = quiet_ctx();
    sharc__strs keys = {0}, dirs = {0};
    char *token = NULL;
    const char *no_token = "<ListBucketResult><IsTruncated>true</IsTruncated>"
                           "<Contents><Key>x.tar</Key></Contents></ListBucketResult>";
    ck_assert_int_eq(
        sharc__s3_parse_list(&ctx, no_token, strlen(no_token), "b", &keys, &dirs, &token),
        SHARC_ERR_IO);
    ck_assert_str_eq(ctx.error, "a truncated listing page without a NextContinuationToken");
    ck_assert_ptr_null(token);
    const char *no_key = "<ListBucketResult><Contents><Size>3</Size></Contents></ListBucketResult>";
    ck_assert_int_eq(sharc__s3_parse_list(&ctx, no_key, strlen(no_key), "b", &keys, &dirs, &token),
                     SHARC_ERR_IO);
    ck_assert_str_eq(ctx.error, "an object without a <Key> in the listing");
    /* The last page, and a page cut inside an element: what is whole is taken. */
    const char *cut = "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>y.tar"
                      "</Key></Contents><Contents><Key>z.t";
    ck_assert_int_eq(sharc__s3_parse_list(&ctx, cut, strlen(cut), "b", &keys, &dirs, &token), 0);
    ck_assert_ptr_null(token);
    ck_assert_uint_eq(keys.n, 2);
    ck_assert_str_eq(keys.items[1], "s3://b/y.tar");
    sharc__strs_free(&ctx, &keys);
    sharc__strs_free(&ctx, &dirs);
}
END_TEST

START_TEST(stops_listings_that_never_end)
{
    sharc__ctx ctx = quiet_ctx();
    sharc__s3_list_guard g = {.max_pages = 5000, .max_keys = 1000000};
    /* Tokens that cycle: A, B, then A again, whatever came between. */
    ck_assert_int_eq(sharc__s3_list_guard_page(&ctx, &g, "p/", "A", 2), 0);
    ck_assert_int_eq(sharc__s3_list_guard_page(&ctx, &g, "p/", "B", 2), 0);
    ck_assert_int_eq(sharc__s3_list_guard_page(&ctx, &g, "p/", "A", 2), SHARC_ERR_IO);
    ck_assert_str_eq(ctx.error, "the server gave the continuation token of an earlier page "
                                "again (after 3 pages): its listing would never end");
    /* The same token under another prefix is another listing's. */
    ck_assert_int_eq(sharc__s3_list_guard_page(&ctx, &g, "p/sharded_manifests/", "A", 2), 0);
    sharc__s3_list_guard_free(&ctx, &g);
    /* Tokens that never repeat (the set grows past its first size): the page cap. */
    g = (sharc__s3_list_guard){.max_pages = 3000, .max_keys = 1000000};
    char token[32];
    for (int i = 0; i < 2999; i++) {
        snprintf(token, sizeof token, "t%d", i);
        ck_assert_int_eq(sharc__s3_list_guard_page(&ctx, &g, "", token, 0), 0);
    }
    ck_assert_int_eq(sharc__s3_list_guard_page(&ctx, &g, "", NULL, 0), 0); /* the last page */
    ck_assert_int_eq(sharc__s3_list_guard_page(&ctx, &g, "", "t-last", 0), SHARC_ERR_IO);
    ck_assert_str_eq(ctx.error, "more than 3000 pages: the server would list on forever, or the "
                                "prefix holds more than one dataset (give its directories, or "
                                "the shards by name with braces)");
    sharc__s3_list_guard_free(&ctx, &g);
    /* And the objects: more than the cap is an error, the cap itself is not. */
    g = (sharc__s3_list_guard){.max_pages = 10, .max_keys = 2000};
    ck_assert_int_eq(sharc__s3_list_guard_page(&ctx, &g, "", "a", 1000), 0);
    ck_assert_int_eq(sharc__s3_list_guard_page(&ctx, &g, "", "b", 1000), 0);
    ck_assert_int_eq(sharc__s3_list_guard_page(&ctx, &g, "", NULL, 1), SHARC_ERR_IO);
    ck_assert_msg(strstr(ctx.error, "more than 2000 objects: ") == ctx.error, "%s", ctx.error);
    sharc__s3_list_guard_free(&ctx, &g);
    ck_assert_ptr_null(g.seen);
    ck_assert_uint_eq(SHARC__NET_LIST_MAX_PAGES, 10000);
    ck_assert_uint_eq(SHARC__NET_LIST_MAX_KEYS, 1000000);
}
END_TEST

/* Everything the stream of `path` gives, and what sharc__remote_end() says of it. */
static int read_all(const char *path, char *got, size_t cap, size_t *n, char *msg, size_t msg_cap)
{
    sharc__ctx ctx = quiet_ctx();
    sharc__remote *r = NULL;
    ck_assert_int_eq(sharc__remote_open(&r, &ctx, path), 0);
    *n = 0;
    ssize_t k;
    while (*n < cap && (k = sharc__remote_read(r, got + *n, cap - *n, -1)) > 0)
        *n += (size_t)k;
    msg[0] = 0;
    int rc = sharc__remote_end(r, msg, msg_cap);
    sharc__remote_close(&r, &ctx);
    ck_assert_ptr_null(r);
    return rc;
}

START_TEST(reads_a_command)
{
    char got[64], msg[256];
    size_t n;
    ck_assert_int_eq(
        read_all("pipe:printf 'a b\\n'; printf c", got, sizeof got, &n, msg, sizeof msg), 0);
    ck_assert_uint_eq(n, 5);
    ck_assert(memcmp(got, "a b\nc", 5) == 0);
    /* Standard input is /dev/null, not the caller's. */
    ck_assert_int_eq(read_all("pipe:cat", got, sizeof got, &n, msg, sizeof msg), 0);
    ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(reports_a_failing_command)
{
    char got[64], msg[256];
    size_t n;
    ck_assert_int_eq(read_all("pipe:printf ab; exit 7", got, sizeof got, &n, msg, sizeof msg),
                     SHARC_ERR_IO);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(msg, "the command exited with status 7");
    ck_assert_int_eq(read_all("pipe:printf ab; kill -9 $$", got, sizeof got, &n, msg, sizeof msg),
                     SHARC_ERR_IO);
    ck_assert_str_eq(msg, "the command was killed by signal 9 (SIGKILL)");
    ck_assert_int_eq(read_all("pipe:no-such-command-sharc", got, sizeof got, &n, msg, sizeof msg),
                     SHARC_ERR_IO);
    ck_assert_str_eq(msg, "the command exited with status 127");
}
END_TEST

START_TEST(stops_a_command_not_read_to_its_end)
{
    sharc__ctx ctx = quiet_ctx();
    sharc__remote *r = NULL;
    /* A pipeline that would run for minutes: closing stops all of it, at once. */
    ck_assert_int_eq(sharc__remote_open(&r, &ctx, "pipe:yes | cat; sleep 300"), 0);
    char buf[4096];
    ck_assert_int_gt(sharc__remote_read(r, buf, sizeof buf, -1), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    sharc__remote_close(&r, &ctx);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 5);
}
END_TEST

START_TEST(names_what_a_refused_connection_did)
{
    sharc__ctx ctx = quiet_ctx();
    sharc__ctx_set_net(&ctx, 2, 1000);
    sharc__remote *r = NULL;
    ck_assert_int_eq(sharc__remote_open(&r, &ctx, "http://127.0.0.1:1/x.tar"), 0);
    char buf[16], msg[512];
    ck_assert_int_eq(sharc__remote_read(r, buf, sizeof buf, -1), 0);
    ck_assert_int_eq(sharc__remote_end(r, msg, sizeof msg), SHARC_ERR_IO);
    ck_assert_msg(strstr(msg, "Failed to connect to 127.0.0.1 port 1") == msg, "%s", msg);
    ck_assert_msg(strstr(msg, "(after 0 bytes) (after 2 retries)"), "%s", msg);
    sharc__remote_close(&r, &ctx);
    ck_assert_uint_eq(atomic_load(&sharc__ctx_net(&ctx)->retries), 2);
}
END_TEST

/* ---- ranged reads (sharc__remote_read_range) against a one-answer HTTP server ---- */

/* A server on 127.0.0.1 that answers one request with `answer` and keeps the request. */
typedef struct one_answer {
    int listen_fd, port;
    const char *answer;
    size_t answer_len;
    char request[2048];
    pthread_t thread;
} one_answer;

static void *serve_one(void *arg)
{
    one_answer *s = arg;
    int c = accept(s->listen_fd, NULL, NULL);
    if (c < 0)
        return NULL;
    size_t n = 0;
    while (n < sizeof s->request - 1 && !strstr(s->request, "\r\n\r\n")) {
        ssize_t got = read(c, s->request + n, sizeof s->request - 1 - n);
        if (got <= 0)
            break;
        n += (size_t)got;
        s->request[n] = 0;
    }
    for (size_t sent = 0; sent < s->answer_len;) {
        ssize_t w = write(c, s->answer + sent, s->answer_len - sent);
        if (w <= 0)
            break;
        sent += (size_t)w;
    }
    close(c);
    return NULL;
}

static void serve_start(one_answer *s, const char *answer)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    memset(s->request, 0, sizeof s->request);
    s->answer = answer;
    s->answer_len = strlen(answer);
    s->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(s->listen_fd, 0);
    ck_assert_int_eq(bind(s->listen_fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(s->listen_fd, 1), 0);
    ck_assert_int_eq(getsockname(s->listen_fd, (struct sockaddr *)&a, &len), 0);
    s->port = ntohs(a.sin_port);
    ck_assert_int_eq(pthread_create(&s->thread, NULL, serve_one, s), 0);
}

static void serve_stop(one_answer *s)
{
    pthread_join(s->thread, NULL);
    close(s->listen_fd);
}

START_TEST(reads_a_range_from_an_answer_that_ignores_it)
{
    sharc__ctx ctx = quiet_ctx();
    one_answer s;
    /* A server without Range support sends the whole object: bytes 3..6 are cut out of it. */
    serve_start(&s, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nETag: \"e1\"\r\n"
                    "Connection: close\r\n\r\n0123456789");
    char url[64], etag[256] = "\"e1\"";
    snprintf(url, sizeof url, "http://127.0.0.1:%d/x.tar", s.port);
    uint8_t dst[8];
    memset(dst, '#', sizeof dst);
    ck_assert_int_eq(sharc__remote_read_range(&ctx, NULL, url, 3, 4, dst, etag, sizeof etag), 0);
    serve_stop(&s);
    ck_assert_int_eq(memcmp(dst, "3456####", 8), 0);
    ck_assert_msg(strstr(s.request, "Range: bytes=3-6\r\n"), "%s", s.request);
    ck_assert_msg(strstr(s.request, "If-Match: \"e1\"\r\n"), "%s", s.request);
    ck_assert_str_eq(etag, "\"e1\"");
    ck_assert_uint_eq(sharc__remote_etag_id(etag), sharc__remote_etag_id("\"e1\""));
    ck_assert_uint_ne(sharc__remote_etag_id(etag), sharc__remote_etag_id("\"e2\""));
    ck_assert_uint_eq(sharc__remote_etag_id(""), 0);
}
END_TEST

START_TEST(refuses_a_range_answered_with_other_bytes)
{
    sharc__ctx ctx = quiet_ctx();
    one_answer s;
    serve_start(&s, "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-3/10\r\n"
                    "Content-Length: 4\r\nConnection: close\r\n\r\n0123");
    char url[64], etag[256] = "";
    snprintf(url, sizeof url, "http://127.0.0.1:%d/x.tar", s.port);
    uint8_t dst[4] = {0};
    ck_assert_int_eq(sharc__remote_read_range(&ctx, NULL, url, 3, 4, dst, etag, sizeof etag),
                     SHARC_ERR_IO);
    serve_stop(&s);
    char want[256];
    snprintf(want, sizeof want,
             "%s: bytes 3-6: the server answered a request for bytes 3- with other bytes", url);
    ck_assert_str_eq(ctx.error, want);
    /* No ETag was known: none was asked for. */
    ck_assert_ptr_null(strstr(s.request, "If-Match"));
}
END_TEST

START_TEST(names_a_failed_range)
{
    sharc__ctx ctx = quiet_ctx();
    sharc__ctx_set_net(&ctx, 1, 1000);
    char etag[256] = "";
    uint8_t dst[100];
    sharc__remote_conn *conn = NULL;
    ck_assert_int_eq(sharc__remote_read_range(&ctx, &conn, "http://127.0.0.1:1/x.tar", 100, 100,
                                              dst, etag, sizeof etag),
                     SHARC_ERR_IO);
    ck_assert_msg(strstr(ctx.error,
                         "http://127.0.0.1:1/x.tar: bytes 100-199: Failed to connect to 127.0.0.1 "
                         "port 1") == ctx.error,
                  "%s", ctx.error);
    ck_assert_msg(strstr(ctx.error, "(after 1 retries)"), "%s", ctx.error);
    ck_assert_int_eq(sharc__remote_read_range(&ctx, &conn, "https://me:pw@h/x.tar", 0, 1, dst, etag,
                                              sizeof etag),
                     SHARC_ERR(EINVAL));
    ck_assert_ptr_null(strstr(ctx.error, "pw"));
    ck_assert_ptr_nonnull(conn); /* kept from the first read */
    ck_assert_int_eq(
        sharc__remote_read_range(&ctx, &conn, "http://127.0.0.1:1/x", 5, 0, dst, etag, 1), 0);
    sharc__remote_conn_free(&conn);
    ck_assert_ptr_null(conn);
}
END_TEST

/* A reader that stops reading for longer than timeout_ms holds the transfer up, but that
 * is no stall of the server's: no retry, every byte once. (The one-answer server would
 * not answer a retry.) */
START_TEST(a_paused_reader_is_no_stall)
{
    sharc__ctx ctx = quiet_ctx();
    sharc__ctx_set_net(&ctx, 2, 300);
    const size_t body = 24u << 20; /* past the ring, libcurl's buffer and the sockets' */
    const char *head = "HTTP/1.1 200 OK\r\nContent-Length: 25165824\r\nConnection: close\r\n\r\n";
    size_t head_len = strlen(head);
    char *answer = malloc(head_len + body + 1);
    ck_assert_ptr_nonnull(answer);
    memcpy(answer, head, head_len);
    for (size_t i = 0; i < body; i++)
        answer[head_len + i] = (char)('a' + (i * 7 + i / 4099) % 26);
    answer[head_len + body] = 0;
    one_answer s;
    serve_start(&s, answer);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/x.tar", s.port);
    sharc__remote *r = NULL;
    ck_assert_int_eq(sharc__remote_open(&r, &ctx, url), 0);
    static char got[1 << 16];
    size_t n = 0, bad = SIZE_MAX;
    ssize_t k = sharc__remote_read(r, got, 1024, -1);
    ck_assert_int_gt(k, 0);
    int pauses = 0;
    do {
        /* Three pauses of 1.5 x timeout_ms, the first before most of the body was sent. */
        if (pauses < 3 && n >= (size_t)pauses * (4u << 20)) {
            nanosleep(&(struct timespec){0, 450 * 1000 * 1000}, NULL);
            pauses++;
        }
        for (ssize_t i = 0; i < k && bad == SIZE_MAX; i++)
            if (got[i] != answer[head_len + n + (size_t)i])
                bad = n + (size_t)i;
        n += (size_t)k;
    } while ((k = sharc__remote_read(r, got, sizeof got, -1)) > 0);
    char msg[512] = "";
    ck_assert_int_eq(sharc__remote_end(r, msg, sizeof msg), 0);
    sharc__remote_close(&r, &ctx);
    serve_stop(&s);
    ck_assert_uint_eq(n, body);
    ck_assert_uint_eq(bad, SIZE_MAX);
    ck_assert_uint_eq(atomic_load(&sharc__ctx_net(&ctx)->retries), 0);
    ck_assert_uint_eq(atomic_load(&sharc__ctx_net(&ctx)->bytes), body);
    free(answer);
}
END_TEST

START_TEST(leaves_long_wav_members_only)
{
    const uint64_t min = SHARC__TAR_RANGED_MIN;
    ck_assert_uint_eq(min, 8u << 20);
    ck_assert(sharc__tar_ranged_member("x/long.wav", min));
    ck_assert(sharc__tar_ranged_member("LONG.WAV", min + 1));
    ck_assert(!sharc__tar_ranged_member("long.wav", min - 1));
    ck_assert(!sharc__tar_ranged_member("long.flac", min * 4));
    ck_assert(!sharc__tar_ranged_member("wav", min));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("remote");
    TCase *tc = tcase_create("remote");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, tells_remote_paths);
    tcase_add_test(tc, refuses_credentials_in_urls);
    tcase_add_test(tc, hides_query_strings);
    tcase_add_test(tc, parses_a_listing_page);
    tcase_add_test(tc, refuses_broken_listings);
    tcase_add_test(tc, stops_listings_that_never_end);
    tcase_add_test(tc, reads_a_command);
    tcase_add_test(tc, reports_a_failing_command);
    tcase_add_test(tc, stops_a_command_not_read_to_its_end);
    tcase_add_test(tc, names_what_a_refused_connection_did);
    tcase_add_test(tc, reads_a_range_from_an_answer_that_ignores_it);
    tcase_add_test(tc, refuses_a_range_answered_with_other_bytes);
    tcase_add_test(tc, names_a_failed_range);
    tcase_add_test(tc, leaves_long_wav_members_only);
    tcase_add_test(tc, a_paused_reader_is_no_stall);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
