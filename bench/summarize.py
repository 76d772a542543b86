#!/usr/bin/env python3
"""Summarise bench/run.sh results (JSON Lines, one object per run) as a table of medians and
the ratios the performance targets of issue 3 are stated in.

Usage: summarize.py RESULTS.jsonl [--markdown]
"""
import json
import statistics
import sys
from collections import defaultdict

TARGETS = {  # (what, codec) -> minimum
    ("floor", "flac"): 0.9,
    ("floor", "wav"): 0.9,
    ("scaling", "flac"): 1.8,
    ("scaling", "wav"): 1.8,
    ("lhotse", "flac"): 1.5,
    ("lhotse", "wav"): 5.0,
}


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def paired(runs, codec, a, b):
    """Median over repetitions of run a's audio s/s over run b's in the same repetition.
    Runs of one repetition are minutes apart at most, so this follows the machine's drift
    better than a ratio of medians; None without repetition numbers."""
    by_rep = defaultdict(dict)
    for key in (a, b):
        for x in runs.get((codec,) + key, []):
            if "rep" in x:
                by_rep[x["rep"]][key] = x["audio_seconds_per_second"]
    return med([r[a] / r[b] for r in by_rep.values() if a in r and b in r])


def alternated(runs, codec):
    """The alternated sequence of bench/run.sh (1, 2, 1, ..., 2, 1 threads; "rep" is the
    position): each 2-thread run over the mean of the 1-thread runs just before and after it.
    Returns (median, lowest, highest, count) or None."""
    one = {x["rep"]: x["audio_seconds_per_second"] for x in runs.get((codec, "alternate", 1), [])}
    two = {x["rep"]: x["audio_seconds_per_second"] for x in runs.get((codec, "alternate", 2), [])}
    r = [v / ((one[k - 1] + one[k]) / 2) for k, v in two.items() if k - 1 in one and k in one]
    return (statistics.median(r), min(r), max(r), len(r)) if r else None


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def main():
    path = sys.argv[1]
    markdown = "--markdown" in sys.argv[2:]
    runs = defaultdict(list)
    for line in open(path):
        j = json.loads(line)
        runs[(j["codec"], j["tag"], j["nthreads"])].append(j)

    rows = []
    rate = {}
    cpu = {}
    order = {"cuts": 0, "batches": 1, "alternate": 2, "pair": 3, "datapath": 4, "convert": 5,
             "lhotse": 6}
    for (codec, tag, t), rs in sorted(runs.items(), key=lambda kv: (kv[0][0], order.get(
            kv[0][1], 6), kv[0][2])):
        r = {
            "codec": codec,
            "run": ("sharc batches, two 1-thread processes at once" if tag == "pair" else
                    f"data path alone, {t} thread{'s' if t > 1 else ''}" if tag == "datapath" else
                    f"conversion from memory, {t} thread{'s' if t > 1 else ''}" if tag == "convert"
                    else
                    f"sharc batches alternated, {t} thread{'s' if t > 1 else ''}"
                    if tag == "alternate" else
                    f"{'sharc ' if tag != 'lhotse' else ''}{tag}, {t} thread{'s' if t > 1 else ''}"),
            "n": len(rs),
            "audio": med([x["audio_seconds_per_second"] for x in rs]),
            "floor": med([x.get("floor_audio_seconds_per_second") for x in rs]),
            # Paired: each run's loader and floor were measured back to back.
            "ratio": med([x.get("ratio_to_floor") for x in rs]),
            "cuts": med([x["cuts_per_second"] for x in rs]),
            "pad": med([x.get("padding_ratio") for x in rs]),
            "fill": med([x.get("batch_fill") for x in rs]),
            "first": med([x["time_to_first_batch_s"] for x in rs]),
            "rss": max(x["peak_rss_bytes"] for x in rs) / 2**20,
            "cpu": med([x.get("cpu_seconds_per_audio_second") for x in rs]),
            "floor_cpu": med([x.get("floor_cpu_seconds_per_audio_second") for x in rs]),
            # CPU seconds per wall second: how many cores the run actually got.
            "cores": med([x["cpu_seconds_per_audio_second"] * x["audio_seconds_per_second"]
                          for x in rs if x.get("cpu_seconds_per_audio_second")]),
        }
        rows.append(r)
        rate[(codec, tag, t)] = r["audio"]
        cpu[(codec, tag, t)] = r["cpu"]

    head = ["codec", "run", "reps", "audio s/s", "floor s/s", "vs floor", "cuts/s", "padding",
            "fill", "1st batch s", "peak RSS MiB", "CPU ms per audio s", "floor CPU ms",
            "cores used"]
    body = [[r["codec"], r["run"], str(r["n"]), fmt(r["audio"], ".0f"), fmt(r["floor"], ".0f"),
             fmt(r["ratio"], ".3f"), fmt(r["cuts"], ".1f"), fmt(r["pad"], ".3f"),
             fmt(r["fill"], ".3f"), fmt(r["first"], ".3f"), fmt(r["rss"], ".0f"),
             fmt(r["cpu"] and 1e3 * r["cpu"], ".3f"),
             fmt(r["floor_cpu"] and 1e3 * r["floor_cpu"], ".3f"), fmt(r["cores"], ".2f")]
            for r in rows]
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for b in body:
            print("| " + " | ".join(b) + " |")
    else:
        w = [max(len(x) for x in col) for col in zip(head, *body)]
        for line in [head] + body:
            print("  ".join(x.rjust(n) if i > 1 else x.ljust(n) for i, (x, n) in
                            enumerate(zip(line, w))))

    print()
    print("Targets (issue 3; ratios of runs in the same repetition, medians over them):")
    for codec in sorted({k[0] for k in runs}):
        checks = []
        b1 = next((r for r in rows
                   if r["codec"] == codec and r["run"] == "sharc batches, 1 thread"), None)
        if b1 and b1["ratio"] is not None:
            checks.append(("floor", "sharc batches 1 thread / floor", b1["ratio"]))
        # Ratios of runs made in the same repetition (see paired()), else of the medians.
        def ratio(a, b):
            p = paired(runs, codec, a, b)
            if p is not None:
                return p
            ra, rb = rate.get((codec,) + a), rate.get((codec,) + b)
            return ra / rb if ra and rb else None

        one, two, pair = ("batches", 1), ("batches", 2), ("pair", 2)
        if ratio(two, one) is not None:
            checks.append(("scaling", "sharc 2 threads / 1 thread", ratio(two, one)))
        alt = alternated(runs, codec)
        if alt is not None:
            # The same ratio from runs in alternation, each 2-thread run next to the 1-thread
            # runs on either side: steadier on a machine whose speed drifts.
            checks.append(("scaling", f"  same, alternated (median of {alt[3]}; "
                                      f"{alt[1]:.2f}-{alt[2]:.2f})", alt[0]))
        if ratio(pair, one) is not None:
            # The same scaling with nothing shared but the machine: its ceiling here.
            checks.append((None, "  two 1-thread processes / one", ratio(pair, one)))
        if ratio(two, pair) is not None:
            checks.append((None, "  sharc 2 threads / the two processes", ratio(two, pair)))
        dp1, dp2 = ("datapath", 1), ("datapath", 2)
        if ratio(dp2, dp1) is not None:
            # Reading the members and writing the batches, nothing else: the memory system's
            # scaling for the bytes any loader must move.
            checks.append((None, "  data path alone, 2 threads / 1", ratio(dp2, dp1)))
        cv1, cv2 = ("convert", 1), ("convert", 2)
        if ratio(cv2, cv1) is not None:
            # The same conversion and padding from memory, no system calls: the memory
            # system's own scaling for the batches' writes.
            checks.append((None, "  conversion from memory, 2 threads / 1", ratio(cv2, cv1)))
        if ratio(one, dp1) is not None:
            checks.append((None, "  sharc 1 thread / data path alone", ratio(one, dp1)))
        if rate.get((codec, "batches", 1)) and rate.get((codec, "lhotse", 1)):
            checks.append(("lhotse", "sharc / Lhotse, 1 thread",
                           rate[(codec, "batches", 1)] / rate[(codec, "lhotse", 1)]))
            if cpu.get((codec, "batches", 1)) and cpu.get((codec, "lhotse", 1)):
                # Robust to other load on the machine: CPU time spent per second of audio.
                checks.append((None, "  same, by CPU time per audio second",
                               cpu[(codec, "lhotse", 1)] / cpu[(codec, "batches", 1)]))
        for key, what, v in checks:
            target = TARGETS.get((key, codec))
            verdict = "" if target is None else (
                f"target >= {target}: {'met' if v >= target else 'MISSED'}")
            print(f"  {codec:5} {what:44} {v:7.3f}  {verdict}")

    # Where sharc's CPU goes, by thread (sharc bench's cpu_us_per_cut, from the threads'
    # names): steadier than the rates on a noisy machine.
    lines = []
    for (codec, tag, t), rs in sorted(runs.items()):
        per = [x["cpu_us_per_cut"] for x in rs if tag == "batches" and x.get("cpu_us_per_cut")]
        if per:
            v = {k: med([p[k] for p in per]) for k in ("planner", "decode", "read_ahead", "other")}
            lines.append(f"  {codec:5} {t} thread{'s' if t > 1 else ' '}  planner {v['planner']:6.1f}"
                         f"  decode {v['decode']:6.1f}  read-ahead {v['read_ahead']:6.1f}"
                         f"  other {v['other']:6.1f}")
    if lines:
        print()
        print("sharc batches, CPU microseconds per cut by thread (medians):")
        print("\n".join(lines))

    # The machine while the runs lasted (bench/run.sh records it): time taken by other guests
    # (steal) or spent waiting for the disk (iowait) slows a run through no fault of its own.
    worst = []
    for (codec, tag, t), rs in sorted(runs.items()):
        for x in rs:
            m = x.get("machine")
            if m:
                worst.append((max(m["steal_fraction"], m["iowait_fraction"]), m, codec, tag, t,
                              x.get("rep")))
    if worst:
        steal = med([w[1]["steal_fraction"] for w in worst])
        iowait = med([w[1]["iowait_fraction"] for w in worst])
        v, m, codec, tag, t, rep = max(worst, key=lambda w: w[0])
        print()
        print(f"machine during the runs: steal {100 * steal:.1f}%, iowait {100 * iowait:.1f}% of "
              f"its CPU time (medians); the most: {codec} {tag} {t} thread(s), repetition {rep}: "
              f"steal {100 * m['steal_fraction']:.1f}%, iowait {100 * m['iowait_fraction']:.1f}%")


if __name__ == "__main__":
    main()
