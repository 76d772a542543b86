/*
 * sharc bench --broadcast-only: per-step time of sharc_loader_next() on every rank of a
 * broadcast group, against a raw broadcast of the same bytes on the same communicator,
 * alternating the two in one run so that both see the same machine state. The source's
 * batches come from a produce callback (sharc_loader_batch_new), shaped like an ASR batch:
 * audio f32 [32, T] plus a cut_id string column.
 */
#include "bench_bcast.h"

#include <getopt.h>
#include <stddef.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_loader.h"
#include "cli_opts.h"

#if SHARC_CLI_HAVE_MPI
#include <mpi.h>
#endif

static const char *const cmd = "bench --broadcast-only";

#define ROWS     32
#define ID_BYTES 16

typedef struct bcast_opts {
    uint64_t bytes; /* audio bytes per batch */
    uint64_t steps, warmup;
    int json;
    cli_dist dist;
} bcast_opts;

typedef struct producer {
    int64_t frames;
    uint64_t made;
} producer;

int bench_bcast_requested(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--broadcast-only") == 0)
            return 1;
    return 0;
}

/* --broadcast-only itself: what brought the command here. */
static int parse_broadcast_only(cli_parser *p, const cli_opt *opt, const char *val, void *target)
{
    return 0;
}

static int parse_bytes(cli_parser *p, const cli_opt *opt, const char *val, void *target)
{
    uint64_t *bytes = target;
    if (cli_parse_u64(cmd, "--bytes", val, bytes) < 0)
        return -1;
    if (*bytes < 128 || *bytes > ((uint64_t)1 << 34))
        return cli_usage_error(cmd, "--bytes must be from 128 to 2^34"), -1;
    return 0;
}

static int parse_steps(cli_parser *p, const cli_opt *opt, const char *val, void *target)
{
    uint64_t *steps = target;
    if (cli_parse_u64(cmd, "--steps", val, steps) < 0)
        return -1;
    if (*steps < 1 || *steps > 1000000)
        return cli_usage_error(cmd, "--steps must be from 1 to 1000000"), -1;
    return 0;
}

static int parse_warmup(cli_parser *p, const cli_opt *opt, const char *val, void *target)
{
    uint64_t *warmup = target;
    if (cli_parse_u64(cmd, "--warmup", val, warmup) < 0)
        return -1;
    if (*warmup < 8)
        return cli_usage_error(cmd, "--warmup must be at least 8: the first steps write the "
                                    "pooled batches in full"),
               -1;
    return 0;
}

#define OWN(field) .target = CLI_T_CMD, .offset = offsetof(bcast_opts, field)

static const cli_opt options[] = {
    {CLI_OPT_CUSTOM, "broadcast-only", .handler = parse_broadcast_only, .flags = CLI_NO_VALUE},
    {CLI_OPT_CUSTOM, "bytes", .metavar = "N", OWN(bytes), .handler = parse_bytes,
     .help = "audio bytes per batch, a multiple of 128 is used\n"
             "(default 20480000: 32 x 160000 float32)"},
    {CLI_OPT_CUSTOM, "steps", .metavar = "N", OWN(steps), .handler = parse_steps,
     .help = "measured steps of each kind (default 50)"},
    {CLI_OPT_CUSTOM, "warmup", .metavar = "N", OWN(warmup), .handler = parse_warmup,
     .help = "unmeasured steps first, at least 8 (default 10)"},
    CLI_USE(cli_dist_group, "transport",
            "self (default) or mpi, which runs under mpirun, one process\n"
            "per rank, the rank and size from MPI_COMM_WORLD (not nccl:\n"
            "the raw broadcast compared with is MPI_Bcast)"),
    CLI_USE(cli_dist_group, "mesh",
            "rank mesh, axes outermost first (\"dp=2,cp=2\"); each cp/tp\n"
            "group broadcasts from its coordinate-0 rank (default:\n"
            "cp=<world size>, one group)"),
    CLI_USE(cli_dist_group, "timeout",
            "seconds a rank waits in one collective before its group fails\n"
            "with a timeout; 0 waits forever (default 600)"),
    CLI_USE(cli_even_group, "even-steps",
            "with several data-parallel slots, the sources agree at every\n"
            "step (a one-word all-reduce, timed as part of the step; default)"),
    CLI_USE(cli_even_group, "no-even-steps", NULL),
    {CLI_OPT_FLAG, "json", OWN(json), .min = 1,
     .help = "print one JSON object per rank:\n"
             "{\"seconds_per_step\",\"raw_seconds_per_step\",\"ratio\",\"bytes\",\n"
             " \"steps\",\"transport\",\"ranks\",\"rank\",\"source\"}\n"
             "(medians over the steps; ratio = loader / raw; bytes is the\n"
             "frame's tensor bytes, which the raw broadcast also moves)"},
    CLI_HELP_OPT,
    CLI_END,
};

#undef OWN

static void print_help(void)
{
    printf("Usage: sharc bench --broadcast-only [options]\n"
           "\n"
           "Measure the loader's broadcast alone: the source of each broadcast group sends a\n"
           "synthetic batch (audio f32 [32, T] of --bytes bytes plus 32 cut ids) every step and\n"
           "every rank times sharc_loader_next(); each step is followed by a raw broadcast of\n"
           "the same bytes on the same communicator (MPI_Bcast), timed the same way, from a\n"
           "page-aligned buffer written in full before the first step. Both are preceded by\n"
           "a barrier of the group. Reads no data.\n"
           "\n"
           "Options:\n");
    cli_opts_print(stdout, options);
    printf("\n"
           "Exit status: 0 success, 1 failure, 2 usage error.\n"
           "\n"
           "Example:\n"
           "  mpirun -n 2 sharc bench --broadcast-only --transport mpi --bytes 20480000 --json\n");
}

static int parse_args(int argc, char **argv, bcast_opts *o)
{
    cli_getopt_reset();
    cli_parser p = {.cmd = cmd,
                    .table = options,
                    .print_help = print_help,
                    .own = o,
                    .dist = &o->dist,
                    .argc = argc,
                    .argv = argv};
    int status = cli_opts_parse(&p);
    if (status >= 0)
        return status;
    if (optind < argc)
        return cli_usage_error(cmd, "--broadcast-only reads no data: unexpected '%s'",
                               argv[optind]);
    if (strcmp(o->dist.transport, "nccl") == 0)
        return cli_usage_error(cmd, "--broadcast-only compares against MPI_Bcast: use "
                                    "--transport mpi (or self)");
    return -1;
}

/* The source's batch: the same shape every step, written in full while the pool warms up. */
static int produce(void *cookie, sharc_loader *l, sharc_batch **out)
{
    producer *p = cookie;
    sharc_tensor d[3];
    memset(d, 0, sizeof d);
    strcpy(d[0].name, "audio");
    d[0].dtype = SHARC_DTYPE_F32;
    d[0].ndim = 2;
    d[0].shape[0] = ROWS;
    d[0].shape[1] = p->frames;
    strcpy(d[1].name, "cut_id_offsets");
    d[1].dtype = SHARC_DTYPE_I32;
    d[1].ndim = 1;
    d[1].shape[0] = ROWS + 1;
    strcpy(d[2].name, "cut_id_bytes");
    d[2].dtype = SHARC_DTYPE_U8;
    d[2].ndim = 1;
    d[2].shape[0] = ROWS * ID_BYTES;
    for (int i = 0; i < 3; i++)
        d[i].device = SHARC_DEVICE_HOST;
    int rc = sharc_loader_batch_new(l, 3, d, out);
    if (rc < 0)
        return rc;
    sharc_batch *b = *out;
    float *audio = b->tensors[0].data;
    int32_t *off = b->tensors[1].data;
    char *ids = b->tensors[2].data;
    if (p->made < 8) { /* each pooled block (at most 4) once, before the measured steps */
        for (int64_t i = 0; i < ROWS * p->frames; i++)
            audio[i] = (float)(i % 1000) * 1e-3f;
    }
    if (p->made < 8) { /* the ids too: formatting them is the producer's work, not the loader's */
        for (int i = 0; i <= ROWS; i++)
            off[i] = i * ID_BYTES;
        for (int i = 0; i < ROWS; i++)
            snprintf(ids + i * ID_BYTES, ID_BYTES, "c%06" PRIu64 "-%03d", p->made, i);
    }
    audio[0] = (float)p->made;
    b->step = p->made++;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, uint64_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct timing {
    double *loader, *raw;
    uint64_t bytes;
    char error[1024];
} timing;

/* One loader step: everyone calls next; the batch is checked and released. */
static int loader_step(sharc_loader *l, uint64_t step, timing *tm, double *seconds)
{
    sharc_batch *b = NULL;
    double t0 = cli_now();
    int rc = sharc_loader_next(l, &b);
    *seconds = cli_now() - t0;
    if (rc != 0) {
        snprintf(tm->error, sizeof tm->error, "step %" PRIu64 ": %s", step,
                 sharc_loader_last_error(l));
        return -1;
    }
    const sharc_tensor *audio = sharc_batch_tensor(b, "audio");
    if (audio == NULL || ((const float *)audio->data)[0] != (float)step) {
        snprintf(tm->error, sizeof tm->error, "step %" PRIu64 ": wrong batch received", step);
        sharc_batch_release(b);
        return -1;
    }
    tm->bytes = 0;
    for (size_t i = 0; i < b->n_tensors; i++)
        tm->bytes += b->tensors[i].nbytes;
    sharc_batch_release(b);
    return 0;
}

#if SHARC_CLI_HAVE_MPI
/*
 * The raw broadcast's buffer: page-aligned, like the pooled blocks, and written in full
 * before the first broadcast. In a buffer never written (calloc's fresh pages) every page
 * is the kernel's one zero page, so the source's side of the copy would read 4 KiB that
 * stay in the cache instead of `bytes` of memory: a 20 MB raw broadcast ran up to twice as
 * fast as one of real data on the development VM, a speed no batch ever gets.
 */
static uint8_t *raw_buffer(uint64_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, (size_t)bytes) != 0)
        return NULL;
    memset(p, 0x5a, (size_t)bytes);
    return p;
}
#endif

static int run_steps(const bcast_opts *o, sharc_loader *l, timing *tm)
{
    uint8_t *raw = NULL;
    for (uint64_t i = 0; i < o->warmup + o->steps; i++) {
        double s = 0, r = 0;
#if SHARC_CLI_HAVE_MPI
        MPI_Comm *comm = cli_dist_mpi_comm(&o->dist);
        if (comm)
            MPI_Barrier(*comm);
#endif
        if (loader_step(l, i, tm, &s) < 0) {
            free(raw);
            return -1;
        }
#if SHARC_CLI_HAVE_MPI
        if (comm) {
            if (raw == NULL && (raw = raw_buffer(tm->bytes)) == NULL) {
                snprintf(tm->error, sizeof tm->error, "out of memory");
                return -1;
            }
            MPI_Barrier(*comm);
            double t0 = cli_now();
            /* The loader sends at most 1 GiB per MPI_Bcast too; --bytes stays far below. */
            MPI_Bcast(raw, (int)tm->bytes, MPI_BYTE, 0, *comm);
            r = cli_now() - t0;
        }
#endif
        if (i >= o->warmup) {
            tm->loader[i - o->warmup] = s;
            tm->raw[i - o->warmup] = r;
        }
    }
    free(raw);
    return 0;
}

static void print_result(const bcast_opts *o, const sharc_loader *l, double step, double raw,
                         uint64_t bytes)
{
    int ranks = o->dist.t ? sharc_transport_size(o->dist.t) : 1;
    if (o->json) {
        printf("{\"seconds_per_step\":");
        cli_json_num(stdout, step);
        printf(",\"raw_seconds_per_step\":");
        cli_json_num(stdout, raw);
        printf(",\"ratio\":");
        cli_json_num(stdout, raw > 0 ? step / raw : NAN);
        printf(",\"bytes\":%" PRIu64 ",\"steps\":%" PRIu64 ",\"transport\":", bytes, o->steps);
        cli_json_str(stdout, sharc_loader_transport_name(l));
        printf(",\"ranks\":%d", ranks);
        cli_dist_json(stdout, &o->dist, l);
        printf("}\n");
        return;
    }
    char ratio[48] = "- (no raw broadcast to compare with)";
    if (raw > 0)
        snprintf(ratio, sizeof ratio, "%.3f", step / raw);
    printf("rank %d (%s) %s, %d ranks, %" PRIu64 " bytes per step, %" PRIu64
           " steps: loader %.3f ms, raw %.3f ms, ratio %s\n",
           o->dist.rank, sharc_loader_is_source(l) ? "source" : "peer",
           sharc_loader_transport_name(l), ranks, bytes, o->steps, step * 1e3, raw * 1e3, ratio);
}

int bench_bcast_main(int argc, char **argv)
{
    bcast_opts o = {20480000, 50, 10, 0, {0}};
    cli_dist_init(&o.dist);
    o.dist.default_axis = "cp";
    int status = parse_args(argc, argv, &o);
    if (status >= 0)
        return status;
    if ((status = cli_dist_setup(cmd, &o.dist)) != 0)
        return status;
    producer prod = {(int64_t)(o.bytes / (4 * ROWS)), 0};
    sharc_loader_settings s;
    sharc_loader_default_settings(&s);
    cli_logger(&s.reader.logger, SHARC_LOG_WARN);
    cli_dist_apply(&o.dist, &s);
    s.produce = produce;
    s.produce_cookie = &prod;
    sharc_loader *l = NULL;
    timing tm = {calloc(o.steps, sizeof(double)), calloc(o.steps, sizeof(double)), 0, ""};
    status = CLI_EXIT_FAIL;
    if (tm.loader == NULL || tm.raw == NULL) {
        fprintf(stderr, "sharc bench: out of memory\n");
        goto done;
    }
    if (cli_open_loader("bench", &s, &l) < 0)
        goto done;
    if (run_steps(&o, l, &tm) < 0) {
        fprintf(stderr, "sharc bench: rank %d: %s\n", o.dist.rank, tm.error);
        cli_dist_abort(&o.dist); /* the other ranks would wait for this one */
        goto done;
    }
    print_result(&o, l, median(tm.loader, o.steps), median(tm.raw, o.steps), tm.bytes);
    status = cli_finish_output(cmd, CLI_EXIT_OK);
done:
    sharc_loader_close(&l);
    cli_dist_close(&o.dist);
    free(tm.loader);
    free(tm.raw);
    return status;
}
