#!/bin/sh
# cli_conditioning: --resample, --speed-perturb, --volume-perturb and --noise from the command line
# (docs/conditioning.md): a 24 kHz corpus read at 16 kHz with Lhotse's lengths and the
# durations kept, each cut's speed, gain and SNR in --json with the perturbed lengths, and in
# the batches' --json the same values per cut, the same
# batches with 1 and 2 threads, sharc bench's conditioning_share, and the errors that name
# the setting.
. "$(dirname "$0")/lib.sh"

gen "$tmp/c" --layout shar --shards 2 --cuts-per-shard 6 --min-duration 0.3 --max-duration 2 \
    --sampling-rate 24000 --seed 5
d=$tmp/c/shar
exp=$tmp/c/shar.expected.jsonl

expect_rc 0 "$SHARC" read --cuts --json --sampling-rate 16000 --resample \
    --speed-perturb 0.9,1.0,1.1 --volume-perturb -6,6 --seed 2 "$d"
"$PYTHON" - "$tmp/out" "$exp" <<'EOF'
import json, sys
from decimal import Decimal, ROUND_HALF_UP, ROUND_HALF_DOWN
cuts = [json.loads(l) for l in open(sys.argv[1]) if '"cut"' in l]
exp = {e["id"]: e for e in map(json.loads, open(sys.argv[2]))}
assert len(cuts) == len(exp) == 12, len(cuts)
speeds = set()
for c in cuts:
    e = exp[c["id"]]
    n = int(Decimal(round(e["num_samples"] / 24000 * 16000, ndigits=8)).quantize(0, rounding=ROUND_HALF_UP))
    f = c["speed"]
    speeds.add(f)
    if f != 1:
        rounding = ROUND_HALF_UP if f >= 1 else ROUND_HALF_DOWN
        n = int(Decimal(round(n / f, ndigits=8)).quantize(0, rounding=rounding))
    assert c["sampling_rate"] == 16000 and c["num_samples"] == n, (c, n)
    want = n / 16000 if f != 1 else e["duration"]
    assert abs(c["duration"] - want) < 1e-9, (c, want)
    assert 10 ** (-6 / 20) - 1e-12 <= c["gain"] <= 10 ** (6 / 20) + 1e-12, c
assert speeds == {0.9, 1.0, 1.1}, speeds
EOF

# Noise from a WebDataset corpus at 16 kHz: each cut's SNR in --json, within the range.
gen "$tmp/n" --layout wds --shards 1 --cuts-per-shard 3 --min-duration 0.5 --max-duration 1
expect_rc 0 "$SHARC" read --cuts --json --sampling-rate 16000 --resample --noise "$tmp/n/wds" \
    --noise-snr 3,9 --noise-prob 0.5 "$d"
"$PYTHON" -c '
import json, sys
snr = [c["snr_db"] for c in map(json.loads, open(sys.argv[1])) if c["type"] == "cut"]
assert len(snr) == 12 and None in snr, snr
assert all(3 <= s <= 9 for s in snr if s is not None) and any(s is not None for s in snr), snr' \
    "$tmp/out"

# Batches carry each cut's speed, gain and SNR in --json: cut mode's values as float32.
C="--sampling-rate 16000 --resample --speed-perturb 0.9,1.0,1.1 --volume-perturb -6,6 --seed 2
   --noise $tmp/n/wds --noise-snr 3,9 --noise-prob 0.5"
expect_rc 0 "$SHARC" read --cuts --json $C "$d"
mv "$tmp/out" "$tmp/cuts.jsonl"
expect_rc 0 "$SHARC" read --json $C --max-cuts 5 --threads 2 "$d"
"$PYTHON" - "$tmp/cuts.jsonl" "$tmp/out" <<'EOF'
import json, struct, sys
f32 = lambda v: None if v is None else struct.unpack("f", struct.pack("f", v))[0]
cuts = {c["id"]: c for c in map(json.loads, open(sys.argv[1])) if c["type"] == "cut"}
rows = 0
for b in (b for b in map(json.loads, open(sys.argv[2])) if b["type"] == "batch"):
    for k in ("speed", "gain", "snr_db"):
        assert len(b[k]) == b["cuts"], (k, b)
    for i, cid in enumerate(b["ids"]):
        c = cuts.pop(cid)
        # printed as the shortest text that reads back as the same float32
        got = tuple(f32(b[k][i]) for k in ("speed", "gain", "snr_db"))
        assert got == tuple(f32(c[k]) for k in ("speed", "gain", "snr_db")), (cid, got, c)
        rows += 1
assert rows == 12 and not cuts, (rows, cuts)
EOF
expect_rc 0 "$SHARC" read --json --max-cuts 5 "$d"
if grep -q '"speed"' "$tmp/out"; then fail "batches without conditioning list speeds"; fi

# Batches: the same with 1 and 2 threads.
B="--sampling-rate 16000 --resample --speed-perturb 0.9,1.1 --max-cuts 4 --seed 3 --noise $tmp/n/wds"
expect_rc 0 "$SHARC" read --json $B --threads 1 "$d"
grep -v '"summary"' "$tmp/out" >"$tmp/t1.jsonl"
expect_rc 0 "$SHARC" read --json $B --threads 2 "$d"
grep -v '"summary"' "$tmp/out" >"$tmp/t2.jsonl"
[ "$(wc -l <"$tmp/t1.jsonl")" -ge 3 ] || fail "too few batches: $(cat "$tmp/t1.jsonl")"
cmp "$tmp/t1.jsonl" "$tmp/t2.jsonl" || fail "1 and 2 threads gave other batches"

expect_rc 0 "$SHARC" bench --json --threads 1 --batches 2 --warmup 0 $B "$d"
"$PYTHON" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert 0 < d["conditioning_share"] < 1, d["conditioning_share"]
assert d["noise_seconds"] > 0 and "noise" in d["cpu_us_per_cut"], d' "$tmp/out"
expect_rc 0 "$SHARC" bench --threads 1 --batches 2 --warmup 0 $B "$d"
expect_in "$tmp/out" "of the decode threads' decoding time"
expect_in "$tmp/out" "s reading and decoding noise, on its own thread"
# The cut reader mixes noise from the same thread of its own: its time is reported too.
C="--sampling-rate 16000 --resample --noise $tmp/n/wds --noise-prob 1 --batches 4 --warmup 0"
expect_rc 0 "$SHARC" bench --cuts --json $C "$d"
"$PYTHON" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["mode"] == "cuts" and d["noise_seconds"] > 0, d
assert d["conditioning_share"] is None, d' "$tmp/out"
expect_rc 0 "$SHARC" bench --cuts $C "$d"
expect_in "$tmp/out" "s reading and decoding noise, on its own thread"

# Errors that name the setting.
expect_rc 1 "$SHARC" read --cuts --sampling-rate 16000 "$d"
expect_in "$tmp/err" "24000 Hz (turn on the resample setting, --resample, to convert it)"
expect_rc 1 "$SHARC" read --cuts --resample "$d"
expect_in "$tmp/err" "resample needs sampling_rate (--sampling-rate)"
expect_rc 1 "$SHARC" read --cuts --speed-perturb 0.9,3.5 "$d"
expect_in "$tmp/err" "speed_perturb: each factor must be in (0, 3]"
expect_rc 1 "$SHARC" read --cuts --speed-perturb 1.1 --speed-perturb-prob 2 "$d"
expect_in "$tmp/err" "speed_perturb_prob must be in [0, 1]"
expect_rc 1 "$SHARC" read --cuts --volume-perturb 6,-6 "$d"
expect_in "$tmp/err" "volume_perturb: the low gain must not be above the high one"
expect_rc 2 "$SHARC" read --cuts --volume-perturb 6 "$d"
expect_in "$tmp/err" "--volume-perturb takes two gains in dB"
expect_rc 1 "$SHARC" read --cuts --noise "$tmp/n/wds" "$d"
expect_in "$tmp/err" "noise needs sampling_rate (--sampling-rate)"
expect_rc 1 "$SHARC" read --cuts --sampling-rate 24000 --noise "$tmp/n/wds" --noise-snr 9,3 "$d"
expect_in "$tmp/err" "noise_snr: the low SNR must not be above the high one"
echo ok
