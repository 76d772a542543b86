/*
 * sharc bench --report: the run as one self-contained HTML page (throughput timeline, stage
 * split, memory over time, settings and machine) with its JSON embedded, and
 * `sharc bench --compare A.json B.json --report C.html`: two runs side by side.
 */
#ifndef SHARC_TOOLS_BENCH_REPORT_H
#define SHARC_TOOLS_BENCH_REPORT_H

#include <stddef.h>

/** Seconds between the timeline's samples at first (doubled when there are too many). */
#define BENCH_TIMELINE_STEP 0.25
/** Samples kept per repetition, at most. */
#define BENCH_TIMELINE_MAX 1200

/**
 * Note the progress of repetition `rep` (0-based) `t` seconds into its window: `units`
 * batches (cuts with --cuts) and `audio` seconds of audio so far. Keeps a sample (with the
 * process's resident memory) every BENCH_TIMELINE_STEP seconds or more. Not thread-safe.
 */
void bench_timeline_add(int rep, double t, double units, double audio);

/**
 * Write the report of a run: `result` is the run's --json object (its text), `argc/argv` the
 * command line. Either path may be NULL. Files are written under a temporary name and
 * renamed; on failure none is left and the error is printed.
 * @return 0, or -1
 */
int bench_report_save(const char *html_path, const char *json_path, const char *result, int argc,
                      char **argv);

/** Whether argv asks for --compare (handled by bench_compare_main()). */
int bench_compare_requested(int argc, char **argv);

/** sharc bench --compare A.json B.json --report C.html. @return an exit status */
int bench_compare_main(int argc, char **argv);

/** Free the timeline. */
void bench_timeline_free(void);

#endif /* SHARC_TOOLS_BENCH_REPORT_H */
