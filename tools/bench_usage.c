/*
 * sharc bench's measures of the process: CPU seconds, peak resident memory, and CPU seconds
 * of the library's threads by role.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench.h"

double bench_process_cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0.0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/*
 * Writing 5 to /proc/self/clear_refs resets the peak RSS (VmHWM) to the current RSS (Linux
 * >= 4.0), so that each loader run reports its own peak, not the floor's or a previous run's.
 * Returns 1 when the reset worked.
 */
int bench_reset_peak_rss(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f == NULL)
        return 0;
    int ok = fputs("5", f) >= 0;
    ok &= fclose(f) == 0;
    return ok;
}

/* VmHWM from /proc/self/status, else the process's ru_maxrss; bytes. */
uint64_t bench_peak_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f != NULL) {
        char line[256];
        unsigned long long kib = 0;
        int found = 0;
        while (!found && fgets(line, sizeof line, f) != NULL)
            found = sscanf(line, "VmHWM: %llu kB", &kib) == 1;
        fclose(f);
        if (found)
            return (uint64_t)kib * 1024;
    }
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (uint64_t)ru.ru_maxrss * 1024 : 0;
}

/* CPU seconds of thread `tid` of this process: from schedstat (nanoseconds), else from
 * stat (clock ticks); -1 when it is gone or /proc cannot tell. */
static double task_cpu_seconds(const char *tid)
{
    char path[300], line[512];
    snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", tid);
    FILE *f = fopen(path, "r");
    unsigned long long ns;
    if (f != NULL) {
        int ok = fscanf(f, "%llu", &ns) == 1;
        fclose(f);
        if (ok)
            return (double)ns * 1e-9;
    }
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", tid);
    if ((f = fopen(path, "r")) == NULL)
        return -1;
    const char *end = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
    fclose(f);
    unsigned long long utime, stime;
    /* After the name: state, then 10 fields up to utime and stime (proc(5)). */
    if (end == NULL || sscanf(end + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                              &utime, &stime) != 2)
        return -1;
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/* CPU seconds so far of this process's threads, by role; 0 for all when /proc cannot tell. */
void bench_role_cpu_seconds(double out[N_ROLES])
{
    for (int k = 0; k < N_ROLES; k++)
        out[k] = 0;
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue; /* the thread ended */
        if (fgets(comm, sizeof comm, f) == NULL)
            comm[0] = 0;
        fclose(f);
        double cpu = task_cpu_seconds(e->d_name);
        if (cpu < 0)
            continue;
        int role = strncmp(comm, "sharc-planner", 13) == 0  ? ROLE_PLANNER
                   : strncmp(comm, "sharc-decode", 12) == 0 ? ROLE_DECODE
                   : strncmp(comm, "sharc-lane", 10) == 0   ? ROLE_READ_AHEAD
                   : strncmp(comm, "sharc-noise", 11) == 0  ? ROLE_NOISE
                                                            : ROLE_OTHER;
        out[role] += cpu;
    }
    closedir(d);
}
