#!/bin/sh
# Remote shards against local disk (docs/benchmarks.md, "Remote shards"): `sharc bench`
# batches/s over the same WebDataset corpus (FLAC and WAV, uncompressed tars) read from
# disk, over loopback S3 (moto, tests/remote/s3server.py), over loopback HTTP
# (tests/remote/faultserver.py) and over HTTP with 20 ms added to every request, with 1 and
# 2 threads. Usage: bench/remote.sh [BUILD_DIR] [SECONDS]   (needs build-moto-venv/)
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$repo/build}
secs=${2:-8}
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
pids="$pids $!"
python3 "$repo/tests/remote/faultserver.py" "$tmp/root" "$tmp/port20" --delay-ms 20 >/dev/null 2>&1 &
pids="$pids $!"
"$repo/build-moto-venv/bin/python" "$repo/tests/remote/s3server.py" "$tmp/s3" bench \
    "flac=$tmp/flac/wds" "wav=$tmp/wav/wds" >/dev/null 2>&1 &
pids="$pids $!"
for _ in $(seq 300); do [ -f "$tmp/s3" ] && [ -f "$tmp/port" ] && [ -f "$tmp/port20" ] && break; sleep 0.2; done
{ read -r AWS_ENDPOINT_URL; read -r AWS_ACCESS_KEY_ID; read -r AWS_SECRET_ACCESS_KEY; } <"$tmp/s3"
export AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION=us-east-1
http=http://127.0.0.1:$(cat "$tmp/port")/ok
http20=http://127.0.0.1:$(cat "$tmp/port20")/ok

rate() { # batches/s of `sharc bench` over the given paths
    "$sharc" bench --json --epochs 0 --seconds "$secs" --max-duration 100 "$@" |
        python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["batches_per_second"])'
}
printf '%-5s %-7s %10s %10s %10s %10s\n' codec threads local s3 http http+20ms
for codec in flac wav; do
    for t in 1 2; do
        shards="shard-00000{0..7}.tar"
        printf '%-5s %-7s %10s %10s %10s %10s\n' $codec $t \
            "$(rate --threads $t "$tmp/$codec/wds")" \
            "$(rate --threads $t "s3://bench/$codec/")" \
            "$(rate --threads $t "$http/$codec/$shards")" \
            "$(rate --threads $t "$http20/$codec/$shards")"
    done
done
