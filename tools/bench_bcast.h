/*
 * sharc bench --broadcast-only: the loader's per-step broadcast against a raw broadcast of
 * the same bytes over the same transport (bench_bcast.c).
 */
#ifndef SHARC_TOOLS_BENCH_BCAST_H
#define SHARC_TOOLS_BENCH_BCAST_H

/** 1 when argv asks for --broadcast-only (then bench_bcast_main handles the command). */
int bench_bcast_requested(int argc, char **argv);

/** Run `sharc bench --broadcast-only ...`; argv[0] is "bench". Returns the exit status. */
int bench_bcast_main(int argc, char **argv);

#endif /* SHARC_TOOLS_BENCH_BCAST_H */
