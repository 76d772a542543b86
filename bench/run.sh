#!/bin/sh
# sharc's benchmarks, side by side on the same shards (docs/benchmarks.md has the figures):
#
#   cuts     sharc read's cut-level reader next to the floor (issue 2)
#   batches  bucketed batches with --threads 1 and 2, each next to the floor (issue 3)
#   pair     two `--threads 1` batch runs at once, on cores 0 and 1: what two cores give
#            when nothing at all is shared but the machine (memory, caches), the ceiling
#            against which to read the 2-thread figure
#   lhotse   Lhotse's from_shar + DynamicBucketingSampler + collation, one thread (issue 3)
#   alternate  after the repetitions: --alternations 2-thread batch runs (no floor), each
#            between two 1-thread runs (1, 2, 1, 2, ..., 1); each 2-thread run is divided by
#            the mean of the 1-thread runs on either side of it, which cancels a drift of
#            the machine's speed that is steady over the three runs (tag "alternate", the
#            position in the sequence as "rep")
#   datapath WAV only: sharc-datapath with 1 and 2 threads, the memory traffic of the batches
#            and nothing else (pread each member, convert to float32, zero the padding);
#            its 2-thread / 1-thread ratio bounds the scaling of any loader here; then
#            the same with --from-memory (tag "convert"): the members read into memory
#            first, the conversion and padding alone timed, the memory system's own scaling
#
# For each codec (FLAC, WAV) it generates a Lhotse Shar corpus with sharc-gen (plain tars and
# JSONL, as Lhotse's SharWriter writes them), then runs each measurement --repeat times,
# alternating the loaders within each repetition (sharc bench alternates with its floor
# itself), and prints a table of medians and the target ratios (medians of the ratios within
# each repetition, whose runs are seconds apart). Raw JSON goes to the --out directory.
#
# Usage: bench/run.sh [options]
#   --build DIR        build directory with tools/sharc, testdata/sharc-gen and
#                      bench/sharc-datapath (default: the SHARC, SHARC_GEN and SHARC_DATAPATH
#                      environment variables, else build-bench, else build)
#   --data DIR         where the corpora are generated, reused when present
#                      (default BUILD/bench-data)
#   --out DIR          raw results, one JSON object per line (default BUILD/bench-results)
#   --codec C          flac, wav or all (default all); a comma-separated list works
#   --what W           cuts, batches, pair, lhotse, datapath, alternate or all (default all);
#                      a comma-separated list works
#   --alternations N   2-thread runs in the alternated sequence (default 8)
#   --seconds S        timed window of every run (default 10)
#   --repeat R         repetitions (default 3)
#   --threads LIST     thread counts for batches, e.g. "1 2" or 1,2 (default "1 2")
#   --shards N         shards per corpus (default 16)
#   --cuts-per-shard N (default 64)
#   --venv DIR         Python venv with lhotse, from bench/setup_lhotse.sh
#                      (default BUILD/lhotse-venv); without it the Lhotse runs are skipped
#   --require-lhotse   exit 77 (skipped) instead when there is no such venv
#   --no-pin           do not pin a run with N threads to cores 0..N-1 (taskset)
# Batching settings are the same for both loaders: --batch-duration 200, 10 buckets (one per
# cut on a corpus of fewer than 10 cuts; the batch runs need 2) with the bins that
# `sharc buckets` estimates (equal to Lhotse's), buffer of 1000 cuts, seed 0.
# Exit status: 0, 1 when a run fails, 2 on usage errors, 77 when nothing could run (no
# sharc-gen, Lhotse was required and is not installed, or no run applied: pair and alternate
# need 2 cores, datapath a WAV corpus and sharc-datapath).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")

all_what="cuts,batches,pair,lhotse,datapath,alternate"
build="" data="" out="" codecs="flac wav" what=$all_what seconds=10 repeat=3
threads="1 2" shards=16 cps=64 venv="" require_lhotse=0 pin_cores=1 alternations=8

# usage MESSAGE: a usage error, exit 2.
usage() {
    echo "bench/run.sh: $*" >&2
    echo "Try 'bench/run.sh --help'." >&2
    exit 2
}

while [ $# -gt 0 ]; do
    # Every option with a value: check there is one before reading $2 (set -u).
    case $1 in
    --build | --data | --out | --codec | --what | --seconds | --repeat | --threads | \
        --alternations | --shards | --cuts-per-shard | --venv)
        [ $# -ge 2 ] || usage "$1 needs a value"
        ;;
    esac
    case $1 in
    --build) build=$2 ;;
    --data) data=$2 ;;
    --out) out=$2 ;;
    --codec) codecs=$2 ;;
    --what) what=$2 ;;
    --seconds) seconds=$2 ;;
    --repeat) repeat=$2 ;;
    --threads) threads=$2 ;;
    --alternations) alternations=$2 ;;
    --shards) shards=$2 ;;
    --cuts-per-shard) cps=$2 ;;
    --venv) venv=$2 ;;
    --require-lhotse | --no-pin)
        [ "$1" = --no-pin ] && pin_cores=0 || require_lhotse=1
        shift
        continue
        ;;
    -h | --help)
        sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        usage "unknown option '$1'"
        ;;
    esac
    shift 2
done

# The values, checked before anything runs. positive OPTION VALUE: an integer >= 1 (no
# leading zeros: they would name a second corpus, and $((...)) reads them as octal).
positive() {
    case $2 in
    '' | *[!0-9]* | 0*) usage "$1: a positive integer is expected, not '$2'" ;;
    esac
}
positive --repeat "$repeat"
positive --alternations "$alternations"
positive --shards "$shards"
positive --cuts-per-shard "$cps"
# --seconds: a number > 0, decimals allowed (sharc bench and sharc-datapath take them).
case $seconds in
'' | *[!0-9.]* | *.*.* | .) usage "--seconds: a number > 0 is expected, not '$seconds'" ;;
*[1-9]*) ;;
*) usage "--seconds: a number > 0 is expected, not '$seconds'" ;;
esac
# --threads: a list of positive integers, separated by spaces or commas.
threads=$(printf "%s\n" "$threads" | tr ',' ' ')
list=""
for t in $threads; do
    positive --threads "$t"
    list="$list $t"
done
[ -n "$list" ] || usage "--threads: a list of positive integers is expected, not '$threads'"
# --codec: flac, wav or all, or a comma-separated list of them.
list=""
for c in $(printf "%s\n" "$codecs" | tr ',' ' '); do
    case $c in
    all) list="$list flac wav" ;;
    flac | wav) list="$list $c" ;;
    *) usage "--codec: unknown codec '$c' (flac, wav or all; a comma-separated list works)" ;;
    esac
done
[ -n "$list" ] || usage "--codec: flac, wav or all is expected, not '$codecs'"
codecs=""
for c in flac wav; do
    case " $list " in *" $c "*) codecs="$codecs $c" ;; esac
done
codecs=${codecs# }
# --what: the names above, or all, or a comma-separated list of them.
list=""
for w in $(printf "%s\n" "$what" | tr ',' ' '); do
    case $w in
    all) list="$list,$all_what" ;;
    cuts | batches | pair | lhotse | datapath | alternate) list="$list,$w" ;;
    *) usage "--what: unknown measurement '$w' (cuts, batches, pair, lhotse, datapath," \
        "alternate or all; a comma-separated list works)" ;;
    esac
done
[ -n "$list" ] || usage "--what: cuts, batches, pair, lhotse, datapath, alternate or all" \
    "is expected, not '$what'"
what=${list#,}

wants() { case ",$what," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

# The batch runs (batches, pair, lhotse, alternate) use 10 buckets, or one per cut on a
# corpus of fewer than 10 cuts: `sharc buckets` wants at least one cut per bucket, and at
# least 2 buckets. None are estimated when no batch run is wanted.
buckets=0
if wants batches || wants pair || wants lhotse || wants alternate; then
    ncuts=$((shards * cps))
    [ "$ncuts" -ge 2 ] || usage "the batch runs (batches, pair, lhotse, alternate) need at" \
        "least 2 cuts to estimate buckets; --shards $shards --cuts-per-shard $cps make $ncuts"
    buckets=$((ncuts < 10 ? ncuts : 10))
    [ "$buckets" = 10 ] || echo "bench/run.sh: $ncuts cuts: $buckets buckets, not 10" >&2
fi

if [ -z "$build" ]; then
    for b in "$repo/build-bench" "$repo/build"; do
        [ -x "$b/tools/sharc" ] && { build=$b; break; }
    done
fi
sharc=${SHARC:-$build/tools/sharc}
gen=${SHARC_GEN:-$build/testdata/sharc-gen}
build=${build:-$(dirname "$(dirname "$sharc")")}
datapath=${SHARC_DATAPATH:-$build/bench/sharc-datapath}
data=${data:-$build/bench-data}
out=${out:-$build/bench-results}
venv=${venv:-${LHOTSE_VENV:-$build/lhotse-venv}}
[ -x "$sharc" ] || { echo "bench/run.sh: no sharc program at $sharc (build first)" >&2; exit 2; }
[ -x "$gen" ] || { echo "bench/run.sh: no sharc-gen at $gen; skipping" >&2; exit 77; }

lhotse_py=""
if wants lhotse; then
    if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import lhotse' 2>/dev/null; then
        lhotse_py=$venv/bin/python
    else
        echo "bench/run.sh: no Lhotse venv at $venv (bench/setup_lhotse.sh makes one);" \
            "skipping the Lhotse runs" >&2
        if [ "$what" = lhotse ] || [ $require_lhotse = 1 ]; then exit 77; fi
    fi
fi

mkdir -p "$data" "$out"
stamp=$(date +%Y%m%d-%H%M%S)
results=$out/results-$stamp.jsonl
: >"$results"

# Each run is pinned to as many cores as it has threads (cores 0..N-1, with taskset when there
# is one), loader and floor alike: sharc's pipeline has a planner thread (reading, pairing,
# sampling) besides its N decode threads, and "N threads" is meant as N cores' worth of work.
pin() {
    n=$1
    shift
    if command -v taskset >/dev/null 2>&1 && [ "$pin_cores" = 1 ]; then
        taskset -c "0-$((n - 1))" "$@"
    else
        "$@"
    fi
}

# run TAG CODEC THREADS CMD...: one measurement; its JSON line gets the tag, codec and threads.
# The machine's "cpu" line of /proc/stat, read around each run: the share of its CPU time
# that went to other guests (steal) and to waiting for the disk (iowait) while the run
# lasted lands in the run's JSON as "machine", so a slow repetition can be told apart.
cpu_line() { head -n 1 /proc/stat 2>/dev/null || echo "cpu 0 0 0 0 0 0 0 0"; }
machine_py='import os
def machine():
    a, b = ([int(x) for x in os.environ[k].split()[1:9]] for k in ("CPU0", "CPU1"))
    d = [y - x for x, y in zip(a, b)]
    total = sum(d) or 1
    return {"steal_fraction": d[7] / total, "iowait_fraction": d[4] / total}
'

run() {
    tag=$1 codec=$2 nthreads=$3
    shift 3
    echo "  $tag $codec threads=$nthreads: $*" >&2
    CPU0=$(cpu_line)
    export CPU0
    if ! pin "$nthreads" "$@" >"$out/last.json" 2>"$out/last.err"; then
        echo "bench/run.sh: failed: $*" >&2
        cat "$out/last.err" >&2
        exit 1
    fi
    CPU1=$(cpu_line)
    export CPU1
    python3 -c "$machine_py"'
import json,sys; j=json.load(open(sys.argv[1]))
j.update(tag=sys.argv[2], codec=sys.argv[3], nthreads=int(sys.argv[4]), cmd=sys.argv[5],
         rep=int(sys.argv[6]), load_average=open("/proc/loadavg").read().split()[0],
         machine=machine())
print(json.dumps(j))' "$out/last.json" "$tag" "$codec" "$nthreads" "$*" "$rep" >>"$results"
}

# run_pair CODEC CMD...: CMD twice at once, on cores 0 and 1; one JSON line with the sum.
run_pair() {
    codec=$1
    shift
    echo "  pair $codec: 2 x $*" >&2
    CPU0=$(cpu_line)
    export CPU0
    pids=""
    for core in 0 1; do
        if command -v taskset >/dev/null 2>&1 && [ "$pin_cores" = 1 ]; then
            taskset -c "$core" "$@" >"$out/pair$core.json" 2>"$out/pair$core.err" &
        else
            "$@" >"$out/pair$core.json" 2>"$out/pair$core.err" &
        fi
        pids="$pids $!"
    done
    failed=0
    for pid in $pids; do wait "$pid" || failed=1; done
    if [ $failed = 1 ]; then
        echo "bench/run.sh: failed: $*" >&2
        cat "$out/pair0.err" "$out/pair1.err" >&2
        exit 1
    fi
    CPU1=$(cpu_line)
    export CPU1
    python3 -c "$machine_py"'
import json,sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
j = {"tag": "pair", "codec": sys.argv[3], "nthreads": 2, "cmd": sys.argv[4], "rep": int(sys.argv[5]),
     "load_average": open("/proc/loadavg").read().split()[0], "processes": [a, b],
     "machine": machine()}
for k in ("audio_seconds_per_second", "cuts_per_second"):
    j[k] = a[k] + b[k]
j["cpu_seconds_per_audio_second"] = (
    a["cpu_seconds_per_audio_second"] * a["audio_seconds_per_second"]
    + b["cpu_seconds_per_audio_second"] * b["audio_seconds_per_second"]) / j["audio_seconds_per_second"]
j["time_to_first_batch_s"] = max(a["time_to_first_batch_s"], b["time_to_first_batch_s"])
j["peak_rss_bytes"] = a["peak_rss_bytes"] + b["peak_rss_bytes"]
print(json.dumps(j))' "$out/pair0.json" "$out/pair1.json" "$codec" "$*" "$rep" >>"$results"
}

# --epochs 0: the corpus repeats, so every window is as long as asked.
common="--seconds $seconds --seed 0 --epochs 0"
for codec in $codecs; do
    corpus=$data/$codec-${shards}x$cps
    if [ ! -d "$corpus/shar" ]; then
        echo "generating $corpus" >&2
        "$gen" --out "$corpus" --layout shar --codec "$codec" --compress none --shards "$shards" \
            --cuts-per-shard "$cps" --seed 1 >/dev/null
    fi
    d=$corpus/shar
    bins="" batching=""
    if [ "$buckets" -gt 0 ]; then
        # The bins of $buckets buckets; `sharc buckets` says why when it cannot estimate them.
        json=$("$sharc" buckets --num-buckets "$buckets" --json "$d") || {
            echo "bench/run.sh: no bucket bins for $d (sharc buckets failed)" >&2
            exit 1
        }
        bins=$(printf "%s\n" "$json" |
            python3 -c 'import json,sys; print(",".join(map(repr, json.load(sys.stdin)["bins"])))')
        batching="--batch-duration 200 --bins $bins --buffer-size 1000"
    fi
    echo "$codec: $d ($(du -sh "$d" | cut -f1)), bins ${bins:-none (not needed)}" >&2
    # How the page cache holds the corpus changes how fast it is read: on a WAV corpus cached
    # for hours, 1 thread went from 80k to 130k s/s once it was evicted and read again (the
    # kernel's page-cache lookups fell from 10% to 4% of the time). Each codec's runs start
    # from the state a read from disk leaves: the files are written out, evicted
    # (posix_fadvise) and read back in order.
    python3 -c 'import os, sys
for name in sorted(os.listdir(sys.argv[1])):
    fd = os.open(os.path.join(sys.argv[1], name), os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    while os.read(fd, 1 << 20):
        pass
    os.close(fd)' "$d"
    for rep in $(seq "$repeat"); do
        echo "repetition $rep/$repeat" >&2
        if wants cuts; then
            run cuts "$codec" 1 "$sharc" bench --cuts --floor --repeat 1 --json --quiet $common "$d"
        fi
        if wants batches; then
            for t in $threads; do
                run batches "$codec" "$t" "$sharc" bench --floor --repeat 1 --threads "$t" \
                    --json --quiet $common $batching "$d"
            done
        fi
        if wants pair && [ "$(nproc 2>/dev/null || echo 1)" -ge 2 ]; then
            run_pair "$codec" "$sharc" bench --repeat 1 --threads 1 --json --quiet $common \
                $batching "$d"
        fi
        if wants datapath && [ "$codec" = wav ] && [ -x "$datapath" ]; then
            for t in $threads; do
                run datapath "$codec" "$t" "$datapath" --threads "$t" --seconds "$seconds" "$d"
            done
            for t in $threads; do
                run convert "$codec" "$t" "$datapath" --from-memory --threads "$t" \
                    --seconds "$seconds" "$d"
            done
        fi
        if [ -n "$lhotse_py" ]; then
            run lhotse "$codec" 1 "$lhotse_py" "$here/lhotse_bench.py" --in-dir "$d" \
                --repeat 1 $common $batching
        fi
    done
    if wants alternate && [ "$(nproc 2>/dev/null || echo 1)" -ge 2 ]; then
        echo "alternated 1- and 2-thread runs ($alternations of 2 threads)" >&2
        rep=0
        run alternate "$codec" 1 "$sharc" bench --repeat 1 --threads 1 --json --quiet $common \
            $batching "$d"
        for rep in $(seq "$alternations"); do
            run alternate "$codec" 2 "$sharc" bench --repeat 1 --threads 2 --json --quiet \
                $common $batching "$d"
            run alternate "$codec" 1 "$sharc" bench --repeat 1 --threads 1 --json --quiet \
                $common $batching "$d"
        done
    fi
done

# Nothing ran (pair and alternate need 2 cores, datapath a WAV corpus and sharc-datapath):
# nothing to summarise.
if [ ! -s "$results" ]; then
    echo "bench/run.sh: nothing could run for --what $what --codec $codecs; skipping" >&2
    rm -f "$results"
    exit 77
fi
echo "results: $results" >&2
python3 "$here/summarize.py" "$results"
