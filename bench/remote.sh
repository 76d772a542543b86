#!/bin/sh
# Remote shards against local disk (docs/benchmarks.md, "Remote shards"): `sharc bench`
# batches/s over the same WebDataset corpus (FLAC and WAV, uncompressed tars) read from
# disk, over loopback S3 (moto, tests/remote/s3server.py), over loopback HTTP
# (tests/remote/faultserver.py) and over HTTP with 20 ms added to every request, with 1 and
# 2 threads. Each cell also gives sharc's CPU time per audio second and the share of the
# machine's CPU that the server took, which on loopback comes out of sharc's. Every run
# first warms up for WARMUP seconds: remote shards hold their audio in the sampler's buffer
# (1 GiB by default), which takes seconds to fill, and the window should time the steady
# state that follows, for local and remote alike (0: from the second batch, as `sharc bench`
# times by default).
# Usage: bench/remote.sh [BUILD_DIR] [SECONDS] [WARMUP]   (needs build-moto-venv/)
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$repo/build}
secs=${2:-8}
warm=${3:-15}
warmup=""
[ "$warm" = 0 ] || warmup="--warmup-seconds $warm"
sharc=$build/tools/sharc
tmp=$(mktemp -d)
pids=""
trap 'kill $pids 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY
for codec in flac wav; do
    "$build/testdata/sharc-gen" --out "$tmp/$codec" --layout wds --shards 8 --cuts-per-shard 40 \
        --codec $codec --compress none --seed 1 >/dev/null
    mkdir -p "$tmp/root"
    ln -s "$tmp/$codec/wds" "$tmp/root/$codec"
done
python3 "$repo/tests/remote/faultserver.py" "$tmp/root" "$tmp/port" >/dev/null 2>&1 &
http_pid=$!
python3 "$repo/tests/remote/faultserver.py" "$tmp/root" "$tmp/port20" --delay-ms 20 >/dev/null 2>&1 &
http20_pid=$!
"$repo/build-moto-venv/bin/python" "$repo/tests/remote/s3server.py" "$tmp/s3" bench \
    "flac=$tmp/flac/wds" "wav=$tmp/wav/wds" >/dev/null 2>&1 &
s3_pid=$!
pids="$http_pid $http20_pid $s3_pid"
for _ in $(seq 300); do [ -f "$tmp/s3" ] && [ -f "$tmp/port" ] && [ -f "$tmp/port20" ] && break; sleep 0.2; done
{ read -r AWS_ENDPOINT_URL; read -r AWS_ACCESS_KEY_ID; read -r AWS_SECRET_ACCESS_KEY; } <"$tmp/s3"
export AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION=us-east-1
http=http://127.0.0.1:$(cat "$tmp/port")/ok
http20=http://127.0.0.1:$(cat "$tmp/port20")/ok

# /proc/PID/stat's user + system clock ticks
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
cores=$(nproc)

# One `sharc bench` over the given paths, its server's process SERVER (or -): batches/s,
# then sharc's CPU microseconds per audio second and the share of the machine's CPU the
# server took over the run, as "RATE CPU SHARE%" (SHARE "-" without a server).
cell() {
    server=$1
    shift
    t0=$(date +%s.%N)
    s0=-
    [ "$server" = - ] || s0=$(ticks "$server")
    "$sharc" bench --json --epochs 0 $warmup --seconds "$secs" --batch-duration 100 "$@" \
        >"$tmp/out.json"
    s1=-
    [ "$server" = - ] || s1=$(ticks "$server")
    t1=$(date +%s.%N)
    python3 - "$tmp/out.json" "$s0" "$s1" "$t0" "$t1" "$hz" "$cores" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s0, s1 = sys.argv[2:4]
t0, t1, hz, cores = map(float, sys.argv[4:])
share = "-" if s0 == "-" else "%.0f%%" % (100 * (float(s1) - float(s0)) / hz / ((t1 - t0) * cores))
print("%.2f %.1f %s" % (d["batches_per_second"], 1e6 * d["cpu_seconds_per_audio_second"], share))
PY
}

# Each cell: batches/s, sharc's CPU us per audio second, the server's share of the CPU.
printf '%-5s %-7s %-22s %-22s %-22s %-22s\n' codec threads local s3 http http+20ms
for codec in flac wav; do
    for t in 1 2; do
        shards="shard-00000{0..7}.tar"
        printf '%-5s %-7s %-22s %-22s %-22s %-22s\n' $codec $t \
            "$(cell - --threads $t "$tmp/$codec/wds")" \
            "$(cell "$s3_pid" --threads $t "s3://bench/$codec/")" \
            "$(cell "$http_pid" --threads $t "$http/$codec/$shards")" \
            "$(cell "$http20_pid" --threads $t "$http20/$codec/$shards")"
    done
done
