/*
 * sharc read's batches: print, dump and checkpoint the batches of a loader (the default mode
 * of the command; cmd_read.c has the options and the cuts mode).
 */
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "cli.h"
#include "cli_loader.h"
#include "cli_opts.h"
#include "cli_reader_opts.h"
#include "cli_resume.h"
#include "cli_tokens.h"
#include "npy.h"
#include "read.h"

static const char *const cmd = "read";

/* ---- batches ---------------------------------------------------------------------------- */

/* What one batch's line says. */
typedef struct batch_info {
    int64_t B, T;
    const int32_t *lens;
    const float *duration;
    int rate;
    double audio_seconds;
    double padded_seconds;
    uint32_t crc;
} batch_info;

/* Totals of this run and the first error of the command itself. */
typedef struct batch_run {
    uint64_t batches;
    uint64_t first_step;
    uint64_t cuts;
    double audio_seconds;
    double padded_seconds;
    char error[1024];
} batch_run;

static uint32_t crc32_of(const void *data, size_t n)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    const Bytef *p = data;
    while (n > 0) {
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return (uint32_t)crc;
}

/*
 * The batch's sampling rate, which the batch does not carry: --sampling-rate when given,
 * else the rate its lengths and durations imply. Lengths are num_samples from the metadata
 * or round(duration * rate), and manifest durations are often rounded to milliseconds, so
 * the estimate is snapped to a usual rate within 0.5%, else rounded to a whole Hz.
 */
static int batch_rate(const batch_info *bi, int given)
{
    static const int usual[] = {8000,  11025, 12000, 16000, 22050, 24000,
                                32000, 44100, 48000, 88200, 96000, 192000};
    if (given > 0)
        return given;
    double samples = 0, seconds = 0;
    for (int64_t i = 0; i < bi->B; i++) {
        samples += bi->lens[i];
        seconds += bi->duration[i];
    }
    if (!(seconds > 0))
        return 0;
    double est = samples / seconds;
    for (size_t i = 0; i < sizeof usual / sizeof usual[0]; i++) {
        if (fabs(est - usual[i]) <= 0.005 * usual[i])
            return usual[i];
    }
    return (int)lround(est);
}

static const sharc_tensor *tensor_of(const sharc_batch *b, const char *name, sharc_dtype dtype,
                                     int ndim, int64_t dim0)
{
    const sharc_tensor *t = sharc_batch_tensor(b, name);
    if (t == NULL || t->dtype != dtype || t->ndim != ndim || t->shape[0] != dim0 ||
        t->device != SHARC_DEVICE_HOST)
        return NULL;
    return t;
}

/* Look up the standard tensors and compute the numbers of the batch's line. */
static int batch_info_compute(const sharc_batch *b, int given_rate, batch_info *bi, batch_run *run)
{
    const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
    const sharc_tensor *lens = sharc_batch_tensor(b, "audio_lens");
    /* --no-keep-audio leaves the features and audio_lens: T is then the longest row, which
     * is what the batch's padded width was (its rows all at the features' rate). */
    if (audio == NULL && sharc_batch_tensor(b, "features") != NULL && lens != NULL &&
        lens->dtype == SHARC_DTYPE_I32 && lens->ndim == 1) {
        bi->B = lens->shape[0];
        bi->T = 0;
        for (int64_t i = 0; i < bi->B; i++)
            if (((const int32_t *)lens->data)[i] > bi->T)
                bi->T = ((const int32_t *)lens->data)[i];
    } else if (audio == NULL || audio->dtype != SHARC_DTYPE_F32 || audio->ndim != 2) {
        snprintf(run->error, sizeof run->error, "batch %" PRIu64 " has no [B,T] f32 audio tensor",
                 b->step);
        return -1;
    } else {
        bi->B = audio->shape[0];
        bi->T = audio->shape[1];
    }
    lens = tensor_of(b, "audio_lens", SHARC_DTYPE_I32, 1, bi->B);
    const sharc_tensor *dur = tensor_of(b, "duration", SHARC_DTYPE_F32, 1, bi->B);
    if (lens == NULL || dur == NULL ||
        tensor_of(b, "cut_id_offsets", SHARC_DTYPE_I32, 1, bi->B + 1) == NULL) {
        snprintf(run->error, sizeof run->error,
                 "batch %" PRIu64 " lacks audio_lens, duration or cut_id tensors of %" PRId64
                 " rows",
                 b->step, bi->B);
        return -1;
    }
    bi->lens = lens->data;
    bi->duration = dur->data;
    bi->audio_seconds = 0;
    for (int64_t i = 0; i < bi->B; i++)
        bi->audio_seconds += bi->duration[i];
    bi->rate = batch_rate(bi, given_rate);
    bi->padded_seconds = bi->rate > 0 ? (double)bi->B * (double)bi->T / bi->rate : 0.0;
    bi->crc = audio != NULL ? crc32_of(audio->data, audio->nbytes) : 0;
    return 0;
}

/* Each cut's speed factor, gain and SNR (null without noise) when the batch has them (a
 * reader with conditioning): ,"speed":[..],"gain":[..],"snr_db":[..]. */
static void print_cond_json(FILE *f, const sharc_batch *b, int64_t B)
{
    static const char *const names[] = {"speed", "gain", "snr_db"};
    for (size_t k = 0; k < 3; k++) {
        const sharc_tensor *t = tensor_of(b, names[k], SHARC_DTYPE_F32, 1, B);
        if (t == NULL)
            continue;
        cli_json_key(f, names[k], 0);
        fputc('[', f);
        for (int64_t i = 0; i < B; i++) {
            if (i > 0)
                fputc(',', f);
            cli_json_f32(f, ((const float *)t->data)[i]);
        }
        fputc(']', f);
    }
}

static void print_batch_json(const sharc_batch *b, const batch_info *bi, const cli_dist *d,
                             const sharc_loader *l, int tokens)
{
    FILE *f = stdout;
    fprintf(f, "{\"type\":\"batch\",\"step\":%" PRIu64 ",\"epoch\":%" PRIu64 ",\"cuts\":%" PRId64,
            b->step, b->epoch, bi->B);
    cli_json_key(f, "ids", 0);
    fputc('[', f);
    for (int64_t i = 0; i < bi->B; i++) {
        size_t len = 0;
        const char *id = sharc_batch_string(b, "cut_id", (size_t)i, &len);
        if (i > 0)
            fputc(',', f);
        if (id != NULL)
            cli_json_strn(f, id, len);
        else
            fputs("null", f);
    }
    fprintf(f, "],\"frames\":%" PRId64, bi->T);
    cli_json_key(f, "audio_seconds", 0);
    cli_json_num(f, bi->audio_seconds);
    cli_json_key(f, "padded_seconds", 0);
    cli_json_num(f, bi->padded_seconds);
    fprintf(f, ",\"audio_crc32\":%" PRIu32, bi->crc);
    if (tokens)
        cli_tokens_json(f, b);
    print_cond_json(f, b, bi->B);
    cli_dist_json(f, d, l);
    fputs("}\n", f);
}

static void print_batch_text(const sharc_batch *b, const batch_info *bi)
{
    printf("step %-6" PRIu64 " epoch %-3" PRIu64 " %4" PRId64 " cuts  T %9" PRId64
           "  %9.3fs audio  %9.3fs padded  ",
           b->step, b->epoch, bi->B, bi->T, bi->audio_seconds, bi->padded_seconds);
    for (int64_t i = 0; i < bi->B && i < TEXT_IDS; i++) {
        size_t len = 0;
        const char *id = sharc_batch_string(b, "cut_id", (size_t)i, &len);
        char shown[128];
        char raw[128];
        len = len < sizeof raw - 1 ? len : sizeof raw - 1;
        memcpy(raw, id ? id : "", id ? len : 0);
        raw[id ? len : 0] = '\0';
        printf("%s%s", i ? " " : "", read_shorten(shown, sizeof shown, raw, 40));
    }
    if (bi->B > TEXT_IDS)
        printf(" (+%" PRId64 ")", bi->B - TEXT_IDS);
    putchar('\n');
}

/*
 * Every output of the command that could not be written (the dump folder, a dump file, a
 * state file) is reported here and nowhere else, so that one place decides what the run
 * does about it: the batch loop stops, and the message is printed and ends the JSON summary.
 */
static void output_failure(batch_run *run, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void output_failure(batch_run *run, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(run->error, sizeof run->error, fmt, ap);
    va_end(ap);
}

static int make_dir(const char *dir, batch_run *run)
{
    struct stat sb;
    if (mkdir(dir, 0777) == 0 || (errno == EEXIST && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)))
        return 0;
    output_failure(run, "cannot create the dump directory %s: %s", dir,
                   strerror(errno == EEXIST ? ENOTDIR : errno));
    return -1;
}

static int write_tensor(FILE *f, const void *t)
{
    return -npy_write_tensor(f, t);
}

/* Write every tensor of the batch as DIR/step<k>.<name>.npy, each complete or not at all. */
static int dump_batch(const read_opts *o, const sharc_batch *b, batch_run *run)
{
    const char *dir = o->dump_dir;
    for (size_t i = 0; i < b->n_tensors; i++) {
        const sharc_tensor *t = &b->tensors[i];
        char name[SHARC_TENSOR_NAME_MAX], path[4096];
        memcpy(name, t->name, sizeof name);
        name[sizeof name - 1] = '\0';
        int n = snprintf(path, sizeof path, "%s/step%" PRIu64 ".%s.npy", dir, b->step, name);
        int err = ENAMETOOLONG;
        const char *input = NULL;
        if (n > 0 && (size_t)n < sizeof path && strchr(name, '/') == NULL &&
            (input = cli_inputs_find(&o->inputs, path)) == NULL)
            err = cli_write_file(path, NULL, 0, write_tensor, t);
        if (input != NULL) {
            output_failure(run,
                           "cannot write tensor %s of step %" PRIu64 " to %s: it is the input "
                           "file %s, which an output never replaces",
                           name, b->step, path, input);
            return -1;
        }
        if (err != 0) {
            output_failure(run, "cannot write tensor %s of step %" PRIu64 " to %s: %s", name,
                           b->step, dir, strerror(err));
            return -1;
        }
    }
    return 0;
}

static int save_state(sharc_loader *l, const read_opts *o, save_point *sp, batch_run *run,
                      size_t *bytes)
{
    size_t size = 0;
    void *buf = NULL;
    int rc = sharc_loader_state_save(l, NULL, 0, &size);
    if (rc == 0 && !sharc_loader_is_source(l)) {
        sp->done = 1; /* the state lives on the source; a peer's is empty */
        return 0;
    }
    if (rc == SHARC_ERR(ENOSPC) && (buf = malloc(size ? size : 1)) != NULL)
        rc = sharc_loader_state_save(l, buf, size, &size);
    else if (rc == SHARC_ERR(ENOSPC))
        rc = SHARC_ERR(ENOMEM);
    if (rc < 0) {
        snprintf(run->error, sizeof run->error, "cannot save the state after step %" PRIu64 ": %s",
                 sp->step, sharc_loader_last_error(l));
        free(buf);
        return -1;
    }
    /* Checked before the run as well; a link to an input made since then is refused here. */
    const char *input = cli_inputs_find(&o->inputs, sp->file);
    int err = input ? 0 : cli_write_file(sp->file, buf, size, NULL, NULL);
    free(buf);
    if (input != NULL) {
        output_failure(run,
                       "cannot write the state of step %" PRIu64 " to %s: it is the input file "
                       "%s, which an output never replaces",
                       sp->step, sp->file, input);
        return -1;
    }
    if (err != 0) {
        output_failure(run, "cannot write the state of step %" PRIu64 " to %s: %s", sp->step,
                       sp->file, strerror(err));
        return -1;
    }
    sp->done = 1;
    *bytes = size;
    return 0;
}

static int read_state_file(read_opts *o, char *error, size_t cap)
{
    if (cli_resume_read_file(o->resume_file, &o->state, &o->state_size, error, cap) == 0)
        return 0;
    fprintf(stderr, "sharc read: %s\n", error);
    return -1;
}

/* A batch whose device tensors (--device cuda) are copied to the host, so that it is
 * printed and dumped as a host batch is. */
typedef struct host_view {
    sharc_batch b;
    sharc_tensor *t;
} host_view;

/* Free the copies of `orig`'s device tensors. */
static void host_view_free(host_view *v, const sharc_batch *orig)
{
    for (size_t i = 0; v->t != NULL && i < orig->n_tensors; i++)
        if (orig->tensors[i].device != SHARC_DEVICE_HOST)
            free(v->t[i].data);
    free(v->t);
    v->t = NULL;
}

/* `b` itself when it has no device tensor, else its copy in `v` (host_view_free frees it). */
static const sharc_batch *host_view_of(const sharc_batch *b, host_view *v, batch_run *run)
{
    memset(v, 0, sizeof *v);
    size_t n_dev = 0;
    for (size_t i = 0; i < b->n_tensors; i++)
        n_dev += b->tensors[i].device != SHARC_DEVICE_HOST;
    if (n_dev == 0)
        return b;
    v->b = *b;
    v->t = calloc(b->n_tensors, sizeof *v->t);
    if (v->t == NULL) {
        snprintf(run->error, sizeof run->error, "out of memory for batch %" PRIu64, b->step);
        return NULL;
    }
    v->b.tensors = v->t;
    for (size_t i = 0; i < b->n_tensors; i++) {
        const sharc_tensor *t = &b->tensors[i];
        v->t[i] = *t;
        if (t->device == SHARC_DEVICE_HOST)
            continue;
        v->t[i].device = SHARC_DEVICE_HOST;
        v->t[i].device_ordinal = 0;
        v->t[i].data = malloc(t->nbytes ? t->nbytes : 1);
        int rc = v->t[i].data == NULL ? SHARC_ERR(ENOMEM)
                                      : sharc_tensor_copy_to_host(t, v->t[i].data, t->nbytes);
        if (rc < 0) {
            snprintf(run->error, sizeof run->error,
                     "cannot copy tensor %.31s of step %" PRIu64 " from device cuda:%d: %s",
                     t->name, b->step, t->device_ordinal, sharc_strerror(rc));
            host_view_free(v, b);
            return NULL;
        }
    }
    return &v->b;
}

/* Print, dump and save as asked for one batch. */
static int handle_batch_host(sharc_loader *l, const sharc_batch *b, read_opts *o, int given_rate,
                             batch_run *run, FILE *saved);

static int handle_batch(sharc_loader *l, const sharc_batch *b, read_opts *o, int given_rate,
                        batch_run *run, FILE *saved)
{
    host_view v;
    const sharc_batch *hb = host_view_of(b, &v, run);
    if (hb == NULL)
        return -1;
    int rc = handle_batch_host(l, hb, o, given_rate, run, saved);
    host_view_free(&v, b);
    return rc;
}

static int handle_batch_host(sharc_loader *l, const sharc_batch *b, read_opts *o, int given_rate,
                             batch_run *run, FILE *saved)
{
    batch_info bi;
    if (batch_info_compute(b, given_rate, &bi, run) < 0)
        return -1;
    if (run->batches == 0)
        run->first_step = b->step;
    run->batches++;
    run->cuts += (uint64_t)bi.B;
    run->audio_seconds += bi.audio_seconds;
    run->padded_seconds += bi.padded_seconds;
    if (o->json)
        print_batch_json(b, &bi, &o->dist, l, o->json_tokens);
    else if (!o->quiet)
        print_batch_text(b, &bi);
    /* A slot's peers receive the batch its source wrote: only the source writes it. */
    if (o->dump_dir != NULL && sharc_loader_is_source(l) && dump_batch(o, b, run) < 0)
        return -1;
    for (size_t i = 0; i < o->n_saves; i++) {
        save_point *sp = &o->saves[i];
        size_t bytes = 0;
        if (sp->step != b->step)
            continue;
        if (save_state(l, o, sp, run, &bytes) < 0)
            return -1;
        /* Listed in the summary: keep the entries as JSON text until then. */
        fprintf(saved, "%s{\"step\":%" PRIu64 ",\"file\":", ftell(saved) > 0 ? "," : "", sp->step);
        cli_json_str(saved, sp->file);
        fprintf(saved, ",\"bytes\":%zu}", bytes);
        if (!o->json && !o->quiet)
            printf("-- saved the state after step %" PRIu64 " to %s (%zu bytes)\n", sp->step,
                   sp->file, bytes);
    }
    return 0;
}

/* The filtered cuts by reason, counts[k] for sharc_filter k; zero without a reader (a peer). */
static void filter_counts(const sharc_reader *r, uint64_t counts[SHARC_FILTER_COUNT])
{
    memset(counts, 0, SHARC_FILTER_COUNT * sizeof *counts);
    if (r != NULL)
        sharc_reader_filter_counts(r, counts, SHARC_FILTER_COUNT);
}

static void print_reader_stats_json(FILE *f, const sharc_reader *r, const sharc_reader_stats *st)
{
    uint64_t by[SHARC_FILTER_COUNT];
    filter_counts(r, by);
    cli_json_key(f, "reader", 0);
    fprintf(f, "{\"batches\":%" PRIu64 ",\"cuts\":%" PRIu64, st->batches, st->cuts);
    cli_json_key(f, "audio_seconds", 0);
    cli_json_num(f, st->audio_seconds);
    cli_json_key(f, "padded_seconds", 0);
    cli_json_num(f, st->padded_seconds);
    fprintf(f, ",\"filtered_cuts\":%" PRIu64, st->filtered_cuts);
    cli_json_key(f, "filtered", 0);
    for (int k = 0; k < SHARC_FILTER_COUNT; k++) {
        fputc(k ? ',' : '{', f);
        cli_json_str(f, sharc_filter_name((sharc_filter)k));
        fprintf(f, ":%" PRIu64, by[k]);
    }
    fprintf(f, "},\"dropped_cuts\":%" PRIu64, st->dropped_cuts);
    read_print_shards_json(f, st);
    fputc('}', f);
}

static void print_batch_summary_json(const sharc_reader *r, const batch_run *run,
                                     const sharc_reader_stats *st, double wall, const char *saved,
                                     const char *error, const cli_dist *d, const sharc_loader *l)
{
    FILE *f = stdout;
    read_print_summary_head(f, r);
    fprintf(f, ",\"batches\":%" PRIu64, run->batches);
    cli_json_key(f, "first_step", 0);
    if (run->batches > 0)
        fprintf(f, "%" PRIu64, run->first_step);
    else
        fputs("null", f);
    fprintf(f, ",\"cuts\":%" PRIu64, run->cuts);
    cli_json_key(f, "audio_seconds", 0);
    cli_json_num(f, run->audio_seconds);
    cli_json_key(f, "padded_seconds", 0);
    cli_json_num(f, run->padded_seconds);
    cli_json_key(f, "wall_seconds", 0);
    cli_json_num(f, wall);
    cli_json_key(f, "audio_seconds_per_second", 0);
    cli_json_num(f, wall > 0 ? run->audio_seconds / wall : 0.0);
    fprintf(f, ",\"saved_states\":[%s]", saved);
    size_t n_bins = 0;
    const double *bins = r ? sharc_reader_bins(r, &n_bins) : NULL;
    cli_json_key(f, "bins", 0);
    if (bins)
        cli_json_nums(f, bins, n_bins);
    else
        fputs("null", f);
    print_reader_stats_json(f, r, st);
    cli_print_sources_json(f, r);
    cli_dist_json(f, d, l);
    cli_json_key(f, "error", 0);
    cli_json_str(f, error);
    fputs("}\n", f);
}

static void print_batch_summary_text(const sharc_reader *r, const batch_run *run,
                                     const sharc_reader_stats *st, double wall)
{
    char a[32], b[32];
    printf("-- %" PRIu64 " batches", run->batches);
    if (run->batches > 0)
        printf(" (steps %" PRIu64 "..%" PRIu64 ")", run->first_step,
               run->first_step + run->batches - 1);
    /* Durations and frame counts differ by rounding: no padding is 0%, not -0.0%. */
    double padding =
        run->padded_seconds > 0 ? 100.0 * (1.0 - run->audio_seconds / run->padded_seconds) : 0.0;
    printf(", %" PRIu64 " cuts, %.3f s of audio (%s), %.3f s padded (%.1f%% padding), layout %s\n",
           run->cuts, run->audio_seconds, cli_fmt_duration(a, sizeof a, run->audio_seconds),
           run->padded_seconds, padding > 0 ? padding : 0.0,
           r != NULL && cli_reader_layout_name(r) ? cli_reader_layout_name(r)
                                                  : "unknown (a peer reads no shards)");
    uint64_t by[SHARC_FILTER_COUNT];
    filter_counts(r, by);
    printf("-- filtered %" PRIu64 " cuts", st->filtered_cuts);
    int reasons = 0; /* the reasons that filtered any, in parentheses */
    for (int k = 0; k < SHARC_FILTER_COUNT; k++)
        if (by[k] > 0)
            printf("%s%s %" PRIu64, reasons++ ? ", " : " (", sharc_filter_name((sharc_filter)k),
                   by[k]);
    printf("%s, dropped %" PRIu64 " (drop-last), %" PRIu64 " shards opened; ", reasons ? ")" : "",
           st->dropped_cuts, st->shards);
    read_print_skipped_text("", st);
    printf("\n-- wall time %s, %s batches/s, %.1f s of audio per second\n",
           cli_fmt_duration(a, sizeof a, wall),
           cli_fmt_count(b, sizeof b, wall > 0 ? (double)run->batches / wall : 0.0),
           wall > 0 ? run->audio_seconds / wall : 0.0);
    cli_print_sources_text(stdout, r);
}

/* A --save-state-at step that the run never reached is an error: the file was promised. */
static int check_saves_done(const read_opts *o, batch_run *run)
{
    for (size_t i = 0; i < o->n_saves; i++) {
        if (o->saves[i].done)
            continue;
        if (run->batches > 0 && o->saves[i].step < run->first_step) {
            snprintf(run->error, sizeof run->error,
                     "no state saved to %s: step %" PRIu64
                     " came before this run's first step, %" PRIu64
                     " (a resumed run starts after the step its state was saved at)",
                     o->saves[i].file, o->saves[i].step, run->first_step);
            return -1;
        }
        snprintf(run->error, sizeof run->error,
                 "no state saved to %s: the run ended before step %" PRIu64 " (%" PRIu64
                 " batches read)",
                 o->saves[i].file, o->saves[i].step, run->batches);
        return -1;
    }
    return 0;
}

/* A run that could not start still ends with its summary line under --json, with the reason. */
static int fail_to_start(const read_opts *o, const char *error, double t0)
{
    if (o->json) {
        batch_run none = {0};
        sharc_reader_stats zero = {0};
        print_batch_summary_json(NULL, &none, &zero, cli_now() - t0, "", error, &o->dist, NULL);
    }
    return CLI_EXIT_FAIL;
}

/* `fmt` with `path` and `slot`, kept in o->slot_names; NULL when out of memory. */
static const char *slot_name(read_opts *o, const char *fmt, const char *path, int slot)
{
    int n = snprintf(NULL, 0, fmt, path, slot);
    char *s = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (s == NULL)
        return NULL;
    snprintf(s, (size_t)n + 1, fmt, path, slot);
    o->slot_names[o->n_slot_names++] = s;
    return s;
}

/*
 * With several data-parallel slots in one job (mpirun, or RANK and WORLD_SIZE), every rank
 * runs the same command line, and each slot's source writes and reads files of its own:
 * FILE.dp<k> for --save-state-at and --resume, DIR/dp<k>/ for --dump-dir.
 */
static int name_files_by_slot(read_opts *o)
{
    if (sharc_mesh_dp_size(&o->dist.mesh) <= 1)
        return 0;
    const int slot = sharc_mesh_dp_rank(&o->dist.mesh);
    for (size_t i = 0; i < o->n_saves; i++)
        if ((o->saves[i].file = slot_name(o, "%s.dp%d", o->saves[i].file, slot)) == NULL)
            return -1;
    o->resume_base = o->resume_file;
    if (o->resume_file != NULL &&
        (o->resume_file = slot_name(o, "%s.dp%d", o->resume_file, slot)) == NULL)
        return -1;
    if (o->dump_dir != NULL && (o->dump_dir = slot_name(o, "%s/dp%d", o->dump_dir, slot)) == NULL)
        return -1;
    return 0;
}

static void free_slot_names(read_opts *o)
{
    for (size_t i = 0; i < o->n_slot_names; i++)
        free(o->slot_names[i]);
    o->n_slot_names = 0;
}

/* Whether `path` is a dump file's name, step<k>.<tensor>.npy, in folder `dir` (both may be
 * links): such an input would be replaced by a batch's tensor. */
static int is_dump_file_of(const char *path, const char *dir)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t len = strlen(base);
    if (strncmp(base, "step", 4) != 0)
        return 0;
    size_t digits = strspn(base + 4, "0123456789");
    if (digits == 0 || base[4 + digits] != '.' || len < 9 || strcmp(base + len - 4, ".npy") != 0)
        return 0;
    char *parent = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    struct stat a, b;
    int same = parent && stat(parent, &a) == 0 && stat(dir, &b) == 0 && a.st_dev == b.st_dev &&
               a.st_ino == b.st_ino;
    free(parent);
    return same;
}

/*
 * No output may replace a file the run reads (a shard, a cuts file or manifest, the --resume
 * state): a state file or dump file that is one of them is refused before anything is read.
 * Returns -1 to go on, else the exit status after the message.
 */
static int refuse_outputs_over_inputs(const sharc_reader_settings *s, read_opts *o)
{
    if (o->n_saves == 0 && o->dump_dir == NULL)
        return -1; /* nothing is written but stdout */
    if (cli_inputs_add_reader(&o->inputs, s) != 0 ||
        (o->resume_file != NULL && cli_inputs_add(&o->inputs, o->resume_file) != 0)) {
        fprintf(stderr, "sharc read: out of memory\n");
        return CLI_EXIT_FAIL;
    }
    for (size_t i = 0; i < o->n_saves; i++) {
        const char *input = cli_inputs_find(&o->inputs, o->saves[i].file);
        if (input != NULL)
            return cli_usage_error(cmd,
                                   "--save-state-at %" PRIu64 " %s would overwrite %s, an input "
                                   "of this run: outputs never replace inputs",
                                   o->saves[i].step, o->saves[i].file, input);
    }
    for (size_t i = 0; o->dump_dir != NULL && i < o->inputs.n; i++) {
        const char *input = o->inputs.v[i].path;
        if (is_dump_file_of(input, o->dump_dir))
            return cli_usage_error(cmd,
                                   "--dump-dir %s would overwrite %s, an input of this run "
                                   "(dump files are named step<k>.<tensor>.npy): outputs never "
                                   "replace inputs",
                                   o->dump_dir, input);
    }
    return -1;
}

static int run_batches_named(sharc_reader_settings *s, read_opts *o, const char *dump_parent)
{
    char why[1400]; /* of a run that could not start */
    double t0 = cli_now();
    int elastic = o->resume_file == NULL
                      ? 0
                      : cli_resume_bundle(o->resume_base ? o->resume_base : o->resume_file,
                                          sharc_mesh_dp_rank(&o->dist.mesh),
                                          sharc_mesh_dp_size(&o->dist.mesh), &o->state,
                                          &o->state_size, why, sizeof why);
    if (elastic < 0)
        fprintf(stderr, "sharc read: %s\n", why);
    if (elastic < 0)
        return fail_to_start(o, why, t0);
    if (o->resume_file != NULL) {
        if (elastic == 0 && read_state_file(o, why, sizeof why) < 0)
            return fail_to_start(o, why, t0);
        s->resume_state = o->state;
        s->resume_state_size = o->state_size;
    }
    /* A state file that cannot be written, found before the run rather than at its step (a
     * process of its own slot is its source; in a broadcast group only the source writes, and
     * it is known once the loader is open). */
    for (size_t i = 0; !cli_dist_active(&o->dist) && i < o->n_saves; i++) {
        int err = cli_check_writable(o->saves[i].file);
        if (err != 0) {
            snprintf(why, sizeof why, "cannot write the state of step %" PRIu64 " to %s: %s",
                     o->saves[i].step, o->saves[i].file, strerror(err));
            fprintf(stderr, "sharc read: %s\n", why);
            return fail_to_start(o, why, t0);
        }
    }
    batch_run run = {0};
    /* DIR, then DIR/dp<k> when the slot names it (the same directory otherwise). */
    if (o->dump_dir != NULL &&
        (make_dir(dump_parent, &run) < 0 || make_dir(o->dump_dir, &run) < 0)) {
        fprintf(stderr, "sharc read: %s\n", run.error);
        return fail_to_start(o, run.error, t0);
    }
    char *saved = NULL;
    size_t saved_len = 0;
    FILE *saved_f = open_memstream(&saved, &saved_len);
    if (saved_f == NULL) {
        fprintf(stderr, "sharc read: out of memory\n");
        return CLI_EXIT_FAIL;
    }
    sharc_loader *l = NULL;
    if (read_open_loader(s, o, &l, why, sizeof why) < 0) {
        fclose(saved_f);
        free(saved);
        return fail_to_start(o, why, t0);
    }
    const sharc_reader *r = sharc_loader_reader(l); /* NULL on peers */
    int rc = 0, failed = 0;
    while (!failed && !ferror(stdout)) { /* until STOP: the loader stops after --limit */
        sharc_batch *b = NULL;
        rc = sharc_loader_next(l, &b);
        if (rc != 0)
            break;
        failed = handle_batch(l, b, o, s->sampling_rate, &run, saved_f) < 0;
        sharc_batch_release(b);
        if (failed) /* an output of this rank failed: the next step ends every rank */
            sharc_loader_fail(l, SHARC_ERR_IO, run.error);
        else if (ferror(stdout)) /* likewise; the reason is printed at exit */
            sharc_loader_fail(l, SHARC_ERR_IO, "its standard output failed");
        if (failed || ferror(stdout))
            rc = sharc_loader_next(l, &b);
    }
    double wall = cli_now() - t0;
    if (!failed && rc >= 0 && !ferror(stdout)) /* else the output's failure is the reason */
        failed = check_saves_done(o, &run) < 0;
    fclose(saved_f);
    const char *error = failed ? run.error : read_loader_error(l, rc);

    sharc_reader_stats st;
    memset(&st, 0, sizeof st);
    if (r != NULL)
        sharc_reader_get_stats(r, &st);
    if (o->json)
        print_batch_summary_json(r, &run, &st, wall, saved ? saved : "", error, &o->dist, l);
    else
        print_batch_summary_text(r, &run, &st, wall);
    fflush(stdout);
    if (failed)
        fprintf(stderr, "sharc read: %s\n", run.error);
    else if (!ferror(stdout)) /* a failed stdout is reported (or kept quiet) at exit */
        read_print_error_once(error);
    if (rc == SHARC_ERR_STATE && o->resume_file != NULL)
        fprintf(stderr, "sharc read: the state in %s was not accepted\n", o->resume_file);
    free(saved);
    sharc_loader_close(&l);
    cli_dist_close(&o->dist);
    return cli_finish_output(cmd, failed || rc < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK);
}

int read_run_batches(sharc_reader_settings *s, read_opts *o)
{
    const char *dump_parent = o->dump_dir; /* DIR of DIR/dp<k> */
    if (name_files_by_slot(o) < 0) {
        fprintf(stderr, "sharc read: out of memory\n");
        return CLI_EXIT_FAIL;
    }
    int status = refuse_outputs_over_inputs(s, o);
    if (status < 0)
        status = run_batches_named(s, o, dump_parent);
    cli_dist_close(&o->dist); /* also after a failed start: an MPI rank must finalize, or
                                 mpirun takes it for a crash and kills the others */
    free_slot_names(o);
    return status;
}
