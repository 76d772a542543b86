/*
 * sharc bench: measure the loader (batches, or cuts with --cuts) and, with --floor, the floor
 * (libarchive + libsndfile alone, bench_floor.c) in the same run, alternating the two.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench_bcast.h"
#include "bench_floor.h"
#include "bench.h"
#include "bench_report.h"
#include "cli.h"
#include "cli_loader.h"
#include "cli_opts.h"
#include "cli_reader_opts.h"

static const char *const cmd = "bench";

/* JSON names of sharc_reader_stats.stage_seconds, by enum sharc_stage. */
const char *const bench_stage_names[N_STAGES] = {[SHARC_STAGE_READ] = "read",
                                                 [SHARC_STAGE_DECOMPRESS] = "decompress",
                                                 [SHARC_STAGE_SAMPLE] = "sample",
                                                 [SHARC_STAGE_DECODE] = "decode",
                                                 [SHARC_STAGE_COLLATE] = "collate"};
const char *const bench_role_names[N_ROLES] = {"planner", "decode", "read_ahead", "noise", "other"};

/* Every failure is recorded for the {"error"} object --json ends with (cli_fail). */
#define fail_with(...) cli_fail(cmd, __VA_ARGS__)

/* The transport and mesh fields of the {"error"} object (cli_print_json_failure). */
static void dist_json(FILE *f, const void *dist)
{
    cli_dist_json(f, dist, NULL);
}

/* ---- the loader runs ---- */

typedef struct window {
    double t0, cpu0;
    double stage0[N_STAGES];
    double role0[N_ROLES];
    double net0[3]; /* bytes, retries, wait seconds */
    sharc_device_stats dev0;
    double cpu_feat0; /* the decode threads' feature seconds at the start */
    double cond0;     /* and their conditioning seconds */
    double noise0;    /* the noise stream's seconds */
    double bcast0;    /* this rank's broadcast seconds (sharc_loader_broadcast_seconds) */
    int open;         /* the window has started */
} window;

static void window_start(window *w, sharc_reader *r, const sharc_loader *l, double t0)
{
    sharc_reader_stats st = {0};
    if (r != NULL) /* NULL on a peer of a broadcast group: it reads nothing */
        sharc_reader_get_stats(r, &st);
    w->t0 = t0;
    w->cpu0 = bench_process_cpu_seconds();
    bench_role_cpu_seconds(w->role0);
    memcpy(w->stage0, st.stage_seconds, sizeof w->stage0);
    w->net0[0] = (double)st.net_bytes;
    w->net0[1] = st.net_retries;
    w->net0[2] = st.net_wait_seconds;
    w->cpu_feat0 = st.feature_seconds;
    w->cond0 = st.condition_seconds;
    w->noise0 = st.noise_seconds;
    if (l == NULL || sharc_loader_broadcast_seconds(l, &w->bcast0) < 0)
        w->bcast0 = 0;
    sharc_reader_get_device_stats(r, &w->dev0);
    w->open = 1;
}

static void window_end(const window *w, sharc_reader *r, const sharc_loader *l, run_result *res)
{
    sharc_reader_stats st = {0};
    if (r != NULL)
        sharc_reader_get_stats(r, &st);
    res->wall = cli_now() - w->t0;
    res->cpu = bench_process_cpu_seconds() - w->cpu0;
    for (int k = 0; k < N_STAGES; k++)
        res->stage[k] = st.stage_seconds[k] - w->stage0[k];
    res->net_bytes = (double)st.net_bytes - w->net0[0];
    res->net_retries = st.net_retries - w->net0[1];
    res->net_wait = st.net_wait_seconds - w->net0[2];
    res->cpu_feat_seconds = st.feature_seconds - w->cpu_feat0;
    res->cond_seconds = st.condition_seconds - w->cond0;
    res->noise_seconds = st.noise_seconds - w->noise0;
    double bcast = 0;
    res->bcast_seconds =
        l != NULL && sharc_loader_broadcast_seconds(l, &bcast) == 0 ? bcast - w->bcast0 : NAN;
    sharc_device_stats ds;
    sharc_reader_get_device_stats(r, &ds);
    res->dev_batches = (double)(ds.batches - w->dev0.batches);
    res->dev_seconds = ds.seconds - w->dev0.seconds;
    res->feat_seconds = ds.feature_seconds - w->dev0.feature_seconds;
    res->feat_bytes = (double)(ds.feature_read_bytes + ds.feature_write_bytes -
                               w->dev0.feature_read_bytes - w->dev0.feature_write_bytes);
    double role[N_ROLES];
    bench_role_cpu_seconds(role);
    for (int k = 0; k < N_ROLES; k++) /* a thread that ended in the window took its time */
        res->role_cpu[k] = role[k] > w->role0[k] ? role[k] - w->role0[k] : 0;
}

/* Whether the window is complete after `n` units in `elapsed` seconds. */
static int window_done(const bench_opts *o, uint64_t n, double elapsed)
{
    return (o->count > 0 && n >= o->count) || (o->seconds > 0 && elapsed >= o->seconds);
}

static void progress(cli_progress *p, const bench_opts *o, const char *what, int rep, uint64_t n,
                     double elapsed, double audio)
{
    char suffix[160];
    snprintf(suffix, sizeof suffix, "rep %d/%d %s: %" PRIu64 " %s, %.0f s of audio/s", rep + 1,
             o->repeat, what, n, o->cuts_mode ? "cuts" : "batches",
             elapsed > 0 ? audio / elapsed : 0.0);
    if (o->count > 0)
        cli_progress_update(p, (double)n, (double)o->count, suffix, 0);
    else
        cli_progress_update(p, elapsed, o->seconds, suffix, 0);
}

/* Add one batch's figures to the window. */
static int count_batch(const sharc_batch *b, double max_duration, run_result *res)
{
    const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
    const sharc_tensor *lens = sharc_batch_tensor(b, "audio_lens");
    const sharc_tensor *dur = sharc_batch_tensor(b, "duration");
    /* --no-keep-audio drops the audio: the rows are then counted from audio_lens, and the
     * padded width is the longest row (all rows are at the features' rate). */
    int64_t rows = audio != NULL && audio->ndim == 2                  ? audio->shape[0]
                   : audio == NULL && lens != NULL && lens->ndim == 1 ? lens->shape[0]
                                                                      : -1;
    if (rows < 0 || lens == NULL || dur == NULL || lens->dtype != SHARC_DTYPE_I32 ||
        dur->dtype != SHARC_DTYPE_F32 || lens->shape[0] != rows || dur->shape[0] != rows) {
        fail_with("batch %" PRIu64 " lacks the audio, audio_lens or duration tensor of the "
                  "documented shape",
                  b->step);
        return -1;
    }
    int64_t n = rows, width = audio != NULL ? audio->shape[1] : 0;
    const int32_t *l = lens->data;
    const float *d = dur->data;
    /* --device cuda: the lengths and durations are read from their copies on the host. */
    int32_t *l_host = NULL;
    float *d_host = NULL;
    if (lens->device != SHARC_DEVICE_HOST || dur->device != SHARC_DEVICE_HOST) {
        l_host = malloc(lens->nbytes + 1);
        d_host = malloc(dur->nbytes + 1);
        int rc = l_host == NULL || d_host == NULL
                     ? SHARC_ERR(ENOMEM)
                     : sharc_tensor_copy_to_host(lens, l_host, lens->nbytes);
        if (rc == 0)
            rc = sharc_tensor_copy_to_host(dur, d_host, dur->nbytes);
        if (rc < 0) {
            free(l_host);
            free(d_host);
            fail_with("batch %" PRIu64 ": cannot copy audio_lens and duration from device "
                      "cuda:%d: %s",
                      b->step, lens->device_ordinal, sharc_strerror(rc));
            return -1;
        }
        l = l_host;
        d = d_host;
    }
    double sum_d = 0;
    for (int64_t i = 0; i < n; i++) {
        res->real_frames += l[i];
        sum_d += d[i];
        if (audio == NULL && l[i] > width)
            width = l[i];
    }
    free(l_host);
    free(d_host);
    res->padded_frames += (double)n * (double)width;
    res->audio += sum_d;
    res->cuts += (double)n;
    res->batches += 1;
    if (max_duration > 0)
        res->fill_sum += sum_d / max_duration;
    return 0;
}

/* Take one batch (cut); 1 with one, 0 at the end, -1 after printing the error. */
static int take_one(sharc_reader *r, sharc_loader *l, const bench_opts *o, double max_duration,
                    int counted, run_result *res)
{
    int rc;
    if (o->cuts_mode) {
        const sharc_cut *c;
        rc = sharc_reader_next(r, &c);
        if (rc == 0 && counted) {
            res->audio += c->duration;
            res->cuts += 1;
        }
    } else {
        sharc_batch *b;
        rc = sharc_loader_next(l, &b);
        if (rc == 0) {
            int bad = counted ? count_batch(b, max_duration, res) : 0;
            sharc_batch_release(b);
            if (bad < 0)
                return -1;
        }
    }
    if (rc == SHARC_END)
        return 0;
    if (rc < 0) {
        const char *why = l != NULL ? sharc_loader_last_error(l) : sharc_reader_last_error(r);
        snprintf(cli_failure_buf(), CLI_FAILURE_BYTES, "read error: %s",
                 why[0] ? why : sharc_strerror(rc));
        cli_report_error("bench", "read error: ", why[0] ? why : sharc_strerror(rc));
        return -1;
    }
    return 1;
}

static int open_reader(const sharc_reader_settings *s, sharc_reader **r)
{
    int rc = cli_open_reader("bench", s, r);
    if (rc < 0)
        cli_open_failure_text(cli_failure_buf(), CLI_FAILURE_BYTES, "dataset", rc);
    return rc < 0 ? -1 : 0;
}

/*
 * Batches come from a sharc_loader: a plain reader alone, and under --transport/--mesh the
 * source of each group reads while its peers receive. A dataset the source cannot open is
 * reported by the first next, which also tells the peers.
 */
static int open_loader(const sharc_reader_settings *s, const bench_opts *o, sharc_loader **l)
{
    sharc_loader_settings ls;
    sharc_loader_default_settings(&ls);
    ls.reader = *s;
    cli_dist_apply(&o->dist, &ls);
    int rc = cli_open_loader("bench", &ls, l);
    if (rc < 0)
        cli_open_failure_text(cli_failure_buf(), CLI_FAILURE_BYTES, "loader", rc);
    if (rc == 0 && sharc_loader_is_source(*l) && sharc_loader_reader(*l) == NULL) {
        sharc_batch *b = NULL;
        rc = sharc_loader_next(*l, &b);
        fail_with("%s", sharc_loader_last_error(*l));
        sharc_loader_close(l);
    }
    return rc < 0 ? -1 : 0;
}

/* A mixture's per-source summary of the last repetition, as text and as a JSON member. */
char *bench_sources_text, *bench_sources_json;

static void keep_sources(const sharc_reader *r)
{
    if (r == NULL || sharc_reader_num_sources(r) == 0)
        return;
    size_t len;
    free(bench_sources_text);
    free(bench_sources_json);
    bench_sources_text = bench_sources_json = NULL;
    FILE *f = open_memstream(&bench_sources_text, &len);
    if (f) {
        cli_print_sources_text(f, r);
        fclose(f);
    }
    f = open_memstream(&bench_sources_json, &len);
    if (f) {
        cli_print_sources_json(f, r);
        fclose(f);
    }
}

/* One loader run: open, warm up, time the window. 0, or -1 after printing the error. */
static int run_loader(const sharc_reader_settings *s, const bench_opts *o, int rep, cli_progress *p,
                      run_result *res)
{
    memset(res, 0, sizeof *res);
    double t0 = cli_now();
    sharc_reader *r = NULL;
    sharc_loader *l = NULL;
    if (o->cuts_mode ? open_reader(s, &r) < 0 : open_loader(s, o, &l) < 0)
        return -1;
    if (l != NULL)
        r = sharc_loader_reader(l); /* NULL on a peer */
    res->shards = r != NULL ? sharc_reader_num_shards(r) : 0;
    window w = {0};
    if (o->warmup == 0 && o->warmup_seconds == 0)
        window_start(&w, r, l, t0);
    uint64_t taken = 0, n = 0;
    int rc;
    while ((rc = take_one(r, l, o, s->sampler.max_duration, w.open, res)) == 1) {
        if (taken++ == 0)
            res->first = cli_now() - t0;
        if (!w.open) {
            double now = cli_now();
            if (taken >= o->warmup && now - t0 >= o->warmup_seconds) {
                window_start(&w, r, l, now);
                res->warmup_wall = now - t0;
                res->warmup_taken = taken;
            }
            continue;
        }
        double elapsed = cli_now() - w.t0;
        progress(p, o, "sharc", rep, ++n, elapsed, res->audio);
        bench_timeline_add(rep, elapsed, (double)n, res->audio);
        if (window_done(o, n, elapsed))
            break;
    }
    if (rc == 0 && !w.open) {
        fail_with("the dataset ended after %" PRIu64 " %s, during the warm-up; use --epochs 0 "
                  "or a shorter warm-up (--warmup, --warmup-seconds)",
                  taken, o->cuts_mode ? "cuts" : "batches");
        rc = -1;
    }
    res->ended = rc == 0;
    if (rc >= 0)
        window_end(&w, r, l, res);
    keep_sources(r);
    if (l != NULL)
        sharc_loader_close(&l); /* the reader is the loader's */
    else
        sharc_reader_close(&r);
    return rc < 0 ? -1 : 0;
}

/* The floor's shortest window: a window of a few batches would time a member or two, or only
 * the metadata members before the first audio one. */
#define MIN_FLOOR_SECONDS 1.0

static int run_floor(char *const *shards, size_t n_shards, int threads, double seconds,
                     run_result *res)
{
    memset(res, 0, sizeof *res);
    bench_floor_result f;
    char err[1024] = "";
    if (bench_floor_run(shards, n_shards, threads, seconds, &f, err, sizeof err) < 0) {
        fail_with("floor: %s", err);
        return -1;
    }
    res->wall = f.wall_seconds;
    res->cpu = f.cpu_seconds;
    res->audio = f.audio_seconds;
    res->cuts = (double)f.members;
    return 0;
}

/* ---- the command ---- */

/* Run the loader (and the floor) o->repeat times, alternating. */
static int run_all(const sharc_reader_settings *s, const bench_opts *o, char **shards,
                   size_t n_shards, run_result *runs, run_result *floors, int *scope_run)
{
    cli_progress p;
    cli_progress_init(&p, !o->quiet);
    *scope_run = 1;
    for (int i = 0; i < o->repeat; i++) {
        *scope_run &= bench_reset_peak_rss();
        int rc = run_loader(s, o, i, &p, &runs[i]);
        runs[i].peak_rss = bench_peak_rss_bytes();
        if (rc < 0)
            return cli_progress_clear(&p), -1;
        if (floors == NULL)
            continue;
        char suffix[64];
        snprintf(suffix, sizeof suffix, "rep %d/%d floor", i + 1, o->repeat);
        cli_progress_update(&p, 0, 0, suffix, 1);
        double floor_seconds = runs[i].wall > MIN_FLOOR_SECONDS ? runs[i].wall : MIN_FLOOR_SECONDS;
        if (run_floor(shards, n_shards, o->cuts_mode ? 1 : s->n_threads, floor_seconds,
                      &floors[i]) < 0)
            return cli_progress_clear(&p), -1;
    }
    cli_progress_clear(&p);
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    if (bench_bcast_requested(argc, argv)) /* --broadcast-only: tools/bench_bcast.c */
        return bench_bcast_main(argc, argv);
    if (bench_compare_requested(argc, argv)) /* --compare: tools/bench_report.c */
        return bench_compare_main(argc, argv);
    sharc_reader_settings s;
    sharc_reader_default_settings(&s);
    bench_opts o = {0};
    cli_dist_init(&o.dist);
    char **shards = NULL;
    size_t n_shards = 0;
    run_result *runs = NULL, *floors = NULL;
    int reported = 0; /* the report was printed: a failure after it is only stdout's */
    int status = bench_parse_args(argc, argv, &s, &o);
    if (status >= 0)
        goto done;
    status = CLI_EXIT_FAIL;
    cli_logger(&s.logger, o.quiet ? CLI_LOG_SILENT : (o.verbose ? SHARC_LOG_INFO : SHARC_LOG_WARN));
    /* The report is written at the end: a folder it cannot go to is found before the run. */
    const char *report_paths[2] = {o.report_html, o.report_json};
    for (int k = 0; k < 2; k++) {
        int err = report_paths[k] != NULL ? cli_check_writable(report_paths[k]) : 0;
        if (err != 0) {
            fail_with("cannot write the report %s: %s", report_paths[k], strerror(err));
            goto done;
        }
    }
    char err[1024];
    if (bench_floor_find_shards(s.paths, s.n_paths, &shards, &n_shards, err, sizeof err) < 0) {
        if (o.floor) {
            fail_with("floor: %s", err);
            goto done;
        }
        n_shards = 0; /* the tar count is only reported without --floor */
    }
    runs = calloc((size_t)o.repeat, sizeof *runs);
    floors = o.floor ? calloc((size_t)o.repeat, sizeof *floors) : NULL;
    if (runs == NULL || (o.floor && floors == NULL)) {
        fail_with("out of memory");
        goto done;
    }
    o.dist.device = s.device == SHARC_DEVICE_CUDA ? s.device_ordinal : -1;
    if (!o.cuts_mode && (status = cli_dist_setup(cmd, &o.dist)) != 0)
        goto done;
    status = CLI_EXIT_FAIL;
    int scope_run;
    if (run_all(&s, &o, shards, n_shards, runs, floors, &scope_run) < 0)
        goto done;
    report rp = {&o, &s, runs, floors, n_shards, scope_run, NAN};
    /* The device's copy bandwidth, measured once: the yardstick of the feature kernels'. */
    if (s.device == SHARC_DEVICE_CUDA &&
        sharc_device_copy_bandwidth(s.device_ordinal, &rp.copy_bw, NULL) < 0)
        rp.copy_bw = NAN;
    reported = 1;
    if (o.json)
        bench_print_json(stdout, &rp);
    else
        bench_print_text(&rp);
    status = cli_finish_output(cmd, CLI_EXIT_OK);
    if (o.report_html != NULL || o.report_json != NULL) {
        char *result = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&result, &len);
        if (m != NULL)
            bench_print_json(m, &rp);
        if (m == NULL || fclose(m) != 0 ||
            bench_report_save(o.report_html, o.report_json, result, argc, argv) < 0)
            status = CLI_EXIT_FAIL;
        free(result);
    }
done:
    if (status == CLI_EXIT_FAIL && o.json && !reported) /* the one object scripts wait for */
        cli_print_json_failure(stdout, dist_json, &o.dist);
    free(runs);
    free(floors);
    bench_floor_free_shards(shards, n_shards);
    free(o.bins);
    free(bench_sources_text);
    free(bench_sources_json);
    bench_timeline_free();
    cli_reader_opts_free(&o.ro);
    cli_dist_close(&o.dist);
    return status;
}
