#!/bin/sh
# cli_device: --device on `sharc read` and `sharc bench`: cpu is the default (the same batches
# and dump files), the values it refuses, and the errors at open when the device cannot be
# used, each naming the device: a build without CUDA, dither or another sampling rate with
# the GPU features, an ordinal no device has or no usable device. The device batches
# themselves are checked on a GPU by tests/gpu/gpu_device.c.
. "$(dirname "$0")/lib.sh"

gen "$tmp/d" --layout shar --cuts-per-shard 6 --shards 2
B="--max-cuts 4 --num-buckets 1 --features fbank --n-mels 64"

# cpu is the default: the same output and the same dump files, byte for byte.
expect_rc 0 "$SHARC" read --json $B --dump-dir "$tmp/default" "$tmp/d/shar"
grep '"type":"batch"' "$tmp/out" >"$tmp/default.json"
expect_rc 0 "$SHARC" read --json $B --device cpu --dump-dir "$tmp/cpu" "$tmp/d/shar"
grep '"type":"batch"' "$tmp/out" >"$tmp/cpu.json"
cmp "$tmp/default.json" "$tmp/cpu.json" || fail "--device cpu changed the batches"
[ "$(ls "$tmp/cpu" | wc -l)" -gt 0 ] || fail "nothing dumped"
for f in "$tmp/default"/*; do
    cmp "$f" "$tmp/cpu/$(basename "$f")" || fail "--device cpu changed $(basename "$f")"
done
expect_in "$tmp/cpu.json" '"step":0'

# Values --device does not take.
for v in gpu cuda: cuda:x cuda:-1 cuda:1x CUDA:0 cuda0 ""; do
    expect_rc 2 "$SHARC" read $B --device "$v" "$tmp/d/shar"
    expect_in "$tmp/err" "sharc read: --device '$v': cpu, cuda or cuda:N (N >= 0)"
done
expect_rc 2 "$SHARC" bench $B --device gpu "$tmp/d/shar"
expect_in "$tmp/err" "sharc bench: --device 'gpu': cpu, cuda or cuda:N (N >= 0)"

# What a CUDA device needs, refused at open with the device named.
open_error="sharc read: cannot open the dataset:"
if [ "${SHARC_BUILT_WITH_CUDA:-0}" = 0 ]; then
    expect_rc 1 "$SHARC" read $B --device cuda:0 "$tmp/d/shar"
    expect_in "$tmp/err" "$open_error sharc was built without CUDA: --device cuda:0 needs a CUDA build"
    expect_rc 1 "$SHARC" read $B --device cuda "$tmp/d/shar"
    expect_in "$tmp/err" "--device cuda:0 needs a CUDA build"
    exit 0
fi
expect_rc 1 "$SHARC" read $B --fbank-dither 0.1 --device cuda:2 "$tmp/d/shar"
expect_in "$tmp/err" "$open_error fbank dither 0.1: the features on device cuda:2 are not dithered (set 0, or compute them on the host)"
expect_rc 1 "$SHARC" read $B --sampling-rate 8000 --device cuda:2 "$tmp/d/shar"
expect_in "$tmp/err" "$open_error sampling_rate 8000: the features on device cuda:2 are made for 16000 Hz (fbank_sample_rate); sharc does not resample"
for cmd in read bench; do
    expect_rc 1 "$SHARC" $cmd $B --device cuda:1000 "$tmp/d/shar"
    if grep -qF "no such device" "$tmp/err"; then
        expect_in "$tmp/err" "device cuda:1000: no such device ("
        expect_in "$tmp/err" " visible, cuda:0..cuda:"
    else
        expect_in "$tmp/err" "device cuda:1000: no CUDA device can be used: cudaGetDeviceCount failed: "
    fi
done
