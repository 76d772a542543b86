#!/bin/sh
# cli_buckets: `sharc buckets` estimates the same bins as Lhotse's estimate_duration_buckets
# (a Python port with numpy's pairwise sum, checked against Lhotse by test_sampler's vectors),
# from metadata only, over every layout; counts and seconds per bucket follow bisect_left;
# --num-cuts, the duration filters, --quiet and usage errors work.
. "$(dirname "$0")/lib.sh"

gen "$tmp/c" --layout all --shards 3 --cuts-per-shard 20 --max-duration 20 --seed 12

cat >"$tmp/check.py" <<'PY'
import bisect, json, sys

def pairwise(a):
    n = len(a)
    if n < 8:
        r = 0.0
        for x in a:
            r += x
        return r
    if n <= 128:
        r = list(a[:8])
        i = 8
        while i < n - n % 8:
            for j in range(8):
                r[j] += a[i + j]
            i += 8
        s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for x in a[i:]:
            s += x
        return s
    n2 = n // 2
    n2 -= n2 % 8
    return pairwise(a[:n2]) + pairwise(a[n2:])

def lhotse_bins(durs, k):
    sizes = sorted(durs)
    per_bucket = pairwise(sizes) / k
    bins, tot = [], 0.0
    for s in sizes:
        if tot > per_bucket:
            bins.append(s)
            tot = 0.0
        tot += s
    return bins

out, expected, k, lo, hi, limit = sys.argv[1:7]
k, lo, hi, limit = int(k), float(lo), float(hi), int(limit)
durs = [json.loads(l)["duration"] for l in open(expected)]
if limit:
    durs = durs[:limit]
kept = [d for d in durs if d >= lo and (hi == 0 or d <= hi)]
got = json.loads(open(out).read())
want = lhotse_bins(kept, k)
assert got["bins"] == want, (got["bins"], want)
counts = [0] * (len(want) + 1)
secs = [0.0] * (len(want) + 1)
for d in kept:
    b = bisect.bisect_left(want, d)
    counts[b] += 1
    secs[b] += d
assert got["counts"] == counts, (got["counts"], counts)
assert all(abs(a - b) < 1e-9 for a, b in zip(got["seconds"], secs)), (got["seconds"], secs)
assert got["cuts"] == len(kept) and got["ignored_cuts"] == len(durs) - len(kept)
assert got["num_buckets"] == k
for i, c in enumerate(counts):
    if c:
        assert got["max"][i] * c - secs[i] - got["padding_seconds"][i] < 1e-6
        assert 0 <= got["padding_ratio"][i] < 1
    else:  # an empty bucket: no min or max, and nothing to pad (the text says 0.000 too)
        assert got["min"][i] is None and got["max"][i] is None, got
        assert got["padding_seconds"][i] == 0 and got["padding_ratio"][i] == 0, got
print("ok", len(want), "bins", counts.count(0), "empty")
PY

for layout in shar nemo wds; do
    d=$tmp/c/$layout
    exp=$tmp/c/$layout.expected.jsonl
    for k in 2 5 12; do
        expect_rc 0 "$SHARC" buckets --json --num-buckets $k "$d"
        "$PYTHON" "$tmp/check.py" "$tmp/out" "$exp" $k 0 0 0 >/dev/null || fail "$layout k=$k"
    done
done

d=$tmp/c/shar
exp=$tmp/c/shar.expected.jsonl
# The expected file lists cuts in reading order; --num-cuts takes the first N in sorted
# shard order, which is the order sharc buckets reads.
expect_rc 0 "$SHARC" read --cuts --json --no-decode --no-shuffle-shards "$d"
grep '"type":"cut"' "$tmp/out" >"$tmp/sorted.jsonl"
expect_rc 0 "$SHARC" buckets --json --num-buckets 4 --num-cuts 25 "$d"
"$PYTHON" "$tmp/check.py" "$tmp/out" "$tmp/sorted.jsonl" 4 0 0 25 >/dev/null || fail "--num-cuts"
# Lhotse's estimate may leave the last bucket empty (fewer bins than --num-buckets - 1).
expect_rc 0 "$SHARC" buckets --json --num-buckets 3 --num-cuts 6 "$d"
[ "$("$PYTHON" "$tmp/check.py" "$tmp/out" "$tmp/sorted.jsonl" 3 0 0 6)" = "ok 2 bins 1 empty" ] ||
    fail "an empty bucket: $(cat "$tmp/out")"
expect_rc 0 "$SHARC" buckets --json --num-buckets 6 --min-duration 2 --max-cut-duration 15 "$d"
"$PYTHON" "$tmp/check.py" "$tmp/out" "$exp" 6 2 15 0 >/dev/null || fail "filters"
[ -s "$tmp/err" ] && fail "--max-cut-duration printed on stderr: $(cat "$tmp/err")"
# --max-duration, the filter's old name here (the batch limit's in read and bench), still
# filters, and warns naming the new one.
cp "$tmp/out" "$tmp/filtered.json"
expect_rc 0 "$SHARC" buckets --json --num-buckets 6 --min-duration 2 --max-duration 15 "$d"
cmp -s "$tmp/out" "$tmp/filtered.json" || fail "buckets --max-duration is not --max-cut-duration"
expect_in "$tmp/err" "sharc buckets: warning: --max-duration is deprecated; use --max-cut-duration"

# Text output: the bins line first, then one line per bucket and a summary.
expect_rc 0 "$SHARC" buckets --num-buckets 5 "$d"
expect_rc 0 "$SHARC" buckets --json --num-buckets 5 "$d"
# The shortest of %.15g..%.17g that reads back as the same double, as --json prints them.
bins=$("$PYTHON" -c 'import json,sys
def short(v):
    return next(t for t in ("%.15g" % v, "%.16g" % v, "%.17g" % v) if float(t) == v)
print(",".join(short(b) for b in json.load(open(sys.argv[1]))["bins"]))' "$tmp/out")
expect_rc 0 "$SHARC" buckets --num-buckets 5 "$d"
[ "$(head -1 "$tmp/out")" = "$bins" ] || fail "text bins line '$(head -1 "$tmp/out")' != '$bins'"
expect_in "$tmp/out" "histogram"
expect_in "$tmp/out" "-- 60 cuts"
expect_rc 0 "$SHARC" buckets --quiet --num-buckets 5 "$d"
[ "$(wc -l <"$tmp/out")" -eq 1 ] || fail "--quiet printed more than the bins"

# Errors: too few cuts, bad values, no path.
expect_rc 1 "$SHARC" buckets --num-buckets 100 "$d"
expect_in "$tmp/err" "too few for 100 buckets"
grep -q "outside --min-duration" "$tmp/err" && fail "no cut was filtered, yet the error says so"
expect_rc 1 "$SHARC" buckets --num-buckets 2 --min-duration 1000 "$d"
expect_in "$tmp/err" "0 cuts are too few for 2 buckets (Lhotse's estimation needs at least one cut per bucket; a batch reader would use 0 buckets); 60 more were outside --min-duration/--max-cut-duration"
# The message names the filter as read and bench name it.
grep -q -- "--max-duration" "$tmp/err" && fail "buckets names its deprecated --max-duration"
expect_rc 2 "$SHARC" buckets --num-cuts 99999999999999999999 "$d"
expect_in "$tmp/err" "out of range: at most 18446744073709551615"
expect_rc 2 "$SHARC" buckets --num-buckets 1 "$d"
expect_rc 2 "$SHARC" buckets --min-duration abc "$d"
expect_in "$tmp/err" "--min-duration"
expect_rc 2 "$SHARC" buckets
expect_in "$tmp/err" "no PATH"
expect_rc 1 "$SHARC" buckets "$tmp/nothing-here"
# With --json, a failure still ends with one object that says why.
expect_rc 1 "$SHARC" buckets --json "$tmp/nothing-here"
"$PYTHON" -c 'import json,sys
o = json.loads(open(sys.argv[1]).read())
assert list(o) == ["error"] and "nothing-here" in o["error"], o' "$tmp/out" ||
    fail "buckets --json on a missing path: $(cat "$tmp/out")"
expect_rc 1 "$SHARC" buckets --json --num-buckets 100 "$d"
"$PYTHON" -c 'import json,sys
o = json.loads(open(sys.argv[1]).read())
assert "60 cuts are too few for 100 buckets" in o["error"], o' "$tmp/out" ||
    fail "buckets --json with too few cuts: $(cat "$tmp/out")"
# A read error is reported once (the library's line), by buckets and by bench; bench --quiet,
# whose library log is silent, reports it itself.
gen "$tmp/bad" --layout shar --shards 1 --cuts-per-shard 3 --max-duration 2 --compress none
check json-member "$tmp/bad/shar/recording.000000.tar" "*" num_samples=1000000000
for cmd in "buckets" "bench --seconds 1" "bench --quiet --seconds 1"; do
    expect_rc 1 "$SHARC" $cmd "$tmp/bad/shar"
    [ "$(grep -c 'num_samples says 1000000000' "$tmp/err")" -eq 1 ] ||
        fail "sharc $cmd: the error is not printed exactly once: $(cat "$tmp/err")"
done
expect_rc 1 "$SHARC" buckets --json "$tmp/bad/shar"
expect_in "$tmp/out" '{"error":"'
expect_in "$tmp/out" 'num_samples says 1000000000'
[ "$(grep -c 'num_samples says 1000000000' "$tmp/err")" -eq 1 ] ||
    fail "buckets --json: the error is not printed exactly once on stderr: $(cat "$tmp/err")"
echo ok
