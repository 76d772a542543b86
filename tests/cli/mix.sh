#!/bin/sh
# cli_mix: `sharc read --input-cfg` mixes a NeMo input_cfg of Shar, NeMo tarred and
# WebDataset entries: the per-source summary (cuts, seconds, realised share against the
# weight) in text and JSON, every cut once with --mix-finite, the same batches from a state
# saved and resumed, `sharc buckets --input-cfg`, and errors naming the entry.
. "$(dirname "$0")/lib.sh"

gen "$tmp/a" --layout shar --compress none --shards 6 --cuts-per-shard 20 --max-duration 3
gen "$tmp/b" --layout nemo --compress none --shards 4 --cuts-per-shard 15 --seed 2 --max-duration 3
gen "$tmp/c" --layout wds --compress none --shards 3 --cuts-per-shard 10 --seed 3 --max-duration 3
cat >"$tmp/cfg.yaml" <<YAML
- type: lhotse_shar
  shar_path: $tmp/a/shar
  weight: 0.6
  tags: {lang: en}
- type: group
  weight: 0.4
  input_cfg:
    - type: nemo_tarred
      manifest_filepath: $tmp/b/nemo/sharded_manifests/manifest__OP_0..3_CL_.json
      tarred_audio_filepaths: $tmp/b/nemo/audio__OP_0..3_CL_.tar
      weight: 3
    - type: wds
      paths: $tmp/c/wds
      weight: 1
YAML

# Finite: each source's cuts exactly once, counted per source.
expect_rc 0 "$SHARC" read --input-cfg "$tmp/cfg.yaml" --cuts --mix-finite --no-decode --json
"$PYTHON" - "$tmp/out" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
summary = lines[-1]
assert summary["type"] == "summary", summary
assert summary["layout"] == "mixture", summary["layout"]
src = summary["sources"]
assert [s["name"] for s in src] == ["input_cfg[0]", "input_cfg[1].input_cfg[0]", "input_cfg[1].input_cfg[1]"], src
assert [s["cuts"] for s in src] == [120, 60, 30], src
for s, w in zip(src, [0.6, 0.4 * 0.75, 0.4 * 0.25]):
    assert abs(s["weight"] - w) < 1e-12, (s, w)
assert summary["cuts"] == 210
# every cut of the Shar source carries its lang tag
cuts = [l for l in lines if l["type"] == "cut"]
assert len(cuts) == 210
assert sum(1 for c in cuts if c["language"] == "en") >= 120
PY

# Repeating: the text summary names each source with its share and weight.
expect_rc 0 "$SHARC" read --input-cfg "$tmp/cfg.yaml" --cuts --no-decode --limit 2000
expect_in "$tmp/out" "-- 3 sources (input_cfg): cuts, seconds of audio, share of cuts against weight"
expect_in "$tmp/out" "shards opened, layout mixture"
expect_in "$tmp/out" "(weight 60.00%)"
expect_in "$tmp/out" "(weight 30.00%)"
expect_in "$tmp/out" "(weight 10.00%)"
grep -q "^--   input_cfg\[1\].input_cfg\[1\] " "$tmp/out" || fail "no line for the wds source"

# Batches: a state saved at step 4 resumes to the same batches as the run that went on.
expect_rc 0 "$SHARC" read --input-cfg "$tmp/cfg.yaml" --max-duration 10 --limit 12 \
    --save-state-at 4 "$tmp/state" --threads 2
grep '^step' "$tmp/out" | tail -7 >"$tmp/whole"
expect_in "$tmp/out" "padding), layout mixture"
expect_rc 0 "$SHARC" read --input-cfg "$tmp/cfg.yaml" --max-duration 10 --limit 7 \
    --resume "$tmp/state" --threads 1
grep '^step' "$tmp/out" >"$tmp/rest"
cmp "$tmp/whole" "$tmp/rest" || fail "resumed batches differ: $(diff "$tmp/whole" "$tmp/rest" | head)"

# bench reports the shares of its last repetition.
expect_rc 0 "$SHARC" bench --input-cfg "$tmp/cfg.yaml" --batches 10 --warmup 1 --threads 1 \
    --max-duration 10 --json
"$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d["sources"]; assert [x["name"] for x in s][0] == "input_cfg[0]" and sum(x["cuts"] for x in s) > 0, s' "$tmp/out"

# Bins over the mixture: 10000 cuts drawn by the weights.
expect_rc 0 "$SHARC" buckets --input-cfg "$tmp/cfg.yaml" --num-buckets 4 --json
"$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["cuts"] == 10000 and len(d["bins"]) == 3, d' "$tmp/out"

# Errors: PATH and --input-cfg together; an entry of an unknown type; a missing dataset.
expect_rc 2 "$SHARC" read --input-cfg "$tmp/cfg.yaml" "$tmp/a/shar"
expect_in "$tmp/err" "sharc read: give PATH or --input-cfg, not both"
printf -- '- {type: wds, paths: %s/c/wds, weight: 1}\n- {type: foo, weight: 1}\n' "$tmp" >"$tmp/bad.yaml"
expect_rc 1 "$SHARC" read --input-cfg "$tmp/bad.yaml" --cuts
expect_in "$tmp/err" "$tmp/bad.yaml: input_cfg[1]: unknown type 'foo' (lhotse_shar, nemo_tarred, wds or group)"
printf -- '- {type: lhotse_shar, shar_path: %s/nowhere}\n' "$tmp" >"$tmp/gone.yaml"
expect_rc 1 "$SHARC" read --input-cfg "$tmp/gone.yaml" --cuts
expect_in "$tmp/err" "$tmp/gone.yaml: input_cfg[0]: $tmp/nowhere"

# A source's bad shard: the problem is logged once, naming the source, under either policy
# and in batches as in cuts.
gen "$tmp/d" --layout wds --compress none --shards 2 --cuts-per-shard 5 --seed 4 --max-duration 3
head -c 30000 "$tmp/d/wds/shard-000001.tar" >"$tmp/cut.tar"
mv "$tmp/cut.tar" "$tmp/d/wds/shard-000001.tar"
printf -- '- {type: wds, paths: %s/d/wds, weight: 1}\n- {type: wds, paths: %s/c/wds, weight: 1}\n' \
    "$tmp" "$tmp" >"$tmp/trunc.yaml"
problem="input_cfg[0]: $tmp/d/wds/shard-000001.tar: member '"
once() { # LEVEL TEXT: exactly one line of the log, at LEVEL, naming the source, with TEXT
    n=$(grep -cF "$problem" "$tmp/err" || true)
    [ "$n" = 1 ] || fail "the problem was logged $n times: $(cat "$tmp/err")"
    grep -F "sharc: $1: $problem" "$tmp/err" | grep -qF "$2" ||
        fail "no $1 naming the source: $(cat "$tmp/err")"
}
expect_rc 1 "$SHARC" read --input-cfg "$tmp/trunc.yaml" --cuts --mix-finite --no-decode
once error "Truncated tar archive"
expect_rc 0 "$SHARC" read --input-cfg "$tmp/trunc.yaml" --cuts --mix-finite --no-decode \
    --on-error skip
once warning "Truncated tar archive"
expect_rc 1 "$SHARC" read --input-cfg "$tmp/trunc.yaml" --mix-finite --max-duration 10 --threads 2
once error "ends after"
# A member whose audio does not decode fails on a decode thread, in batches: named too.
gen "$tmp/e" --layout wds --compress none --shards 2 --cuts-per-shard 5 --seed 5 --max-duration 3
"$PYTHON" - "$tmp/e/wds/shard-000001.tar" <<'PY'
import sys, tarfile
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
member = next(m for m in tarfile.open(path) if m.name.endswith(".flac"))
data[member.offset_data + 200:member.offset_data + min(member.size, 3000)] = \
    b"\x55" * (min(member.size, 3000) - 200)
open(path, "wb").write(bytes(data))
PY
printf -- '- {type: wds, paths: %s/c/wds, weight: 1}\n- {type: wds, paths: %s/e/wds, weight: 1}\n' \
    "$tmp" "$tmp" >"$tmp/undecodable.yaml"
problem="input_cfg[1]: $tmp/e/wds/shard-000001.tar member "
expect_rc 1 "$SHARC" read --input-cfg "$tmp/undecodable.yaml" --mix-finite --max-duration 10 \
    --threads 2
once error "decode failed"
expect_rc 0 "$SHARC" read --input-cfg "$tmp/undecodable.yaml" --mix-finite --max-duration 10 \
    --threads 2 --on-error skip
once warning "decode failed"
# A YAML alias is refused where it stands, before anything is read: aliases could expand a
# few hundred bytes to any number of sources.
cat >"$tmp/bomb.yaml" <<YAML
- &s {type: wds, paths: $tmp/c/wds, weight: 1}
- &g {type: group, weight: 1, input_cfg: [*s, *s, *s, *s, *s, *s, *s, *s]}
- {type: group, weight: 1, input_cfg: [*g, *g, *g, *g, *g, *g, *g, *g]}
YAML
expect_rc 1 "$SHARC" read --input-cfg "$tmp/bomb.yaml" --cuts --limit 5
expect_in "$tmp/err" "$tmp/bomb.yaml: line 2 column 43: alias *s: an input_cfg takes no YAML aliases"
# Weights at a double's ends: 1e308 each is half each, and the mixture reads (it used to end
# at once with status 0); a subnormal weight is refused saying why.
printf -- '- {type: wds, paths: %s/c/wds, weight: 1e308}\n- {type: lhotse_shar, shar_path: %s/a/shar, weight: 1e308}\n' \
    "$tmp" "$tmp" >"$tmp/huge.yaml"
expect_rc 0 "$SHARC" read --input-cfg "$tmp/huge.yaml" --cuts --no-decode --limit 40 --json
"$PYTHON" - "$tmp/out" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert sum(1 for l in lines if l["type"] == "cut") == 40, lines[-1]
assert [s["weight"] for s in lines[-1]["sources"]] == [0.5, 0.5], lines[-1]
PY
printf -- '- {type: wds, paths: %s/c/wds, weight: 1e-320}\n' "$tmp" >"$tmp/tiny.yaml"
expect_rc 1 "$SHARC" read --input-cfg "$tmp/tiny.yaml" --cuts --limit 5
expect_in "$tmp/err" "$tmp/tiny.yaml: input_cfg[0]: weight 1e-320 is too small to compute with (the least is 2.2e-308; 0 leaves an entry out)"
# YAML that would be read with another meaning is refused naming its line: input_cfg twice
# (the last would win), a second document (it would be ignored), a null tag (it would be "~").
printf 'input_cfg:\n  - {type: wds, paths: %s/c/wds}\ninput_cfg:\n  - {type: lhotse_shar, shar_path: %s/a/shar}\n' \
    "$tmp" "$tmp" >"$tmp/twice.yaml"
expect_rc 1 "$SHARC" read --input-cfg "$tmp/twice.yaml" --cuts --limit 5
expect_in "$tmp/err" "$tmp/twice.yaml: line 3 column 1: input_cfg given twice (first on line 1)"
printf -- '- {type: wds, paths: %s/c/wds}\n---\n- {type: wds, paths: /elsewhere}\n' "$tmp" >"$tmp/two.yaml"
expect_rc 1 "$SHARC" read --input-cfg "$tmp/two.yaml" --cuts --limit 5
expect_in "$tmp/err" "$tmp/two.yaml: line 2 column 1: a second YAML document ('---'): an input_cfg is one document"
printf -- '- {type: wds, paths: %s/c/wds, tags: {lang: ~}}\n' "$tmp" >"$tmp/null.yaml"
expect_rc 1 "$SHARC" read --input-cfg "$tmp/null.yaml" --cuts --limit 5
expect_in "$tmp/err" "$tmp/null.yaml: line 1 column"
expect_in "$tmp/err" ": input_cfg[0]: tag 'lang' is null; give it a value, or quote it ('~')"
echo "cli_mix: ok"
