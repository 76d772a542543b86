#!/bin/sh
# gen_deterministic: sharc-gen must write byte-identical corpora for the same flags, and what it
# writes must be well-formed. Usage: check_gen.sh SHARC_GEN [PYTHON3]
set -eu
gen=$1
py=${2:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sharc-gen-check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

run() { # name, flags...
  name=$1
  shift
  "$gen" --out "$tmp/$name.a" --layout all --shards 2 --cuts-per-shard 5 --max-duration 2 "$@"
  "$gen" --out "$tmp/$name.b" --layout all --shards 2 --cuts-per-shard 5 --max-duration 2 "$@"
  if ! diff -r "$tmp/$name.a" "$tmp/$name.b" >"$tmp/diff.txt"; then
    echo "FAIL: sharc-gen $* is not deterministic:"
    head -20 "$tmp/diff.txt"
    exit 1
  fi
  # A different seed must give different audio.
  "$gen" --out "$tmp/$name.c" --layout wds --shards 1 --cuts-per-shard 2 --max-duration 2 \
    --seed 7 "$@"
  if cmp -s "$tmp/$name.a/wds/shard-000000.tar"* "$tmp/$name.c/wds/shard-000000.tar"*; then
    echo "FAIL: --seed 7 wrote the same shard as --seed 1"
    exit 1
  fi
  if [ -n "$py" ]; then
    "$py" - "$tmp/$name.a" "$@" <<'PYEOF'
import gzip, io, json, os, sys, tarfile

root = sys.argv[1]
KEYS = ["id", "layout", "shard_index", "position", "shard", "member", "duration", "num_samples",
        "sampling_rate", "channels", "text", "speaker", "language", "cut_seed", "offset_frames",
        "sample_sum", "sample_sumsq"]

def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)

def members(path):
    if path.endswith(".zst"):
        return None  # no zstd in the standard library
    with tarfile.open(path, "r|*") as t:
        return [m.name for m in t]

def read_lines(path):
    data = open(path, "rb").read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    elif path.endswith(".zst"):
        return None
    return [json.loads(l) for l in data.decode("utf-8").splitlines()]

for layout in ["shar", "nemo", "wds"]:
    exp = [json.loads(l) for l in open(os.path.join(root, layout + ".expected.jsonl"), encoding="utf-8")]
    if not exp:
        fail(f"{layout}: empty expected.jsonl")
    ids = set()
    tars = {}
    for e in exp:
        for k in KEYS:
            if k not in e:
                fail(f"{layout}: expected line without {k}: {e}")
        if e["layout"] != layout or e["id"] in ids:
            fail(f"{layout}: bad or duplicate id {e['id']}")
        ids.add(e["id"])
        if abs(e["duration"] * e["sampling_rate"] - e["num_samples"]) > 1e-6:
            fail(f"{layout}: {e['id']}: duration {e['duration']} != num_samples/rate")
        path = os.path.join(root, layout, e["shard"])
        if not os.path.isfile(path):
            fail(f"{layout}: shard {path} is missing")
        if path not in tars:
            tars[path] = members(path)
        if tars[path] is not None and e["member"] not in tars[path]:
            fail(f"{layout}: member {e['member']} not in {path}")
    if layout == "shar":
        for path, names in tars.items():
            cuts = read_lines(path.replace("recording.", "cuts.").replace(".tar", ".jsonl"))
            if names is None or cuts is None:
                continue
            if len(names) != 2 * len(cuts):
                fail(f"{path}: {len(names)} members for {len(cuts)} cuts")
            if os.path.exists(path + ".idx"):  # Lhotse 2.0 index: offset of each pair, sentinel
                import struct
                raw = open(path + ".idx", "rb").read()
                idx = struct.unpack("<%dQ" % (len(raw) // 8), raw)
                with tarfile.open(path) as t:
                    offs = [m.offset for m in t.getmembers()][::2]
                if list(idx[:-1]) != offs or idx[-1] > os.path.getsize(path):
                    fail(f"{path}.idx: {idx} does not index pairs at {offs}")
            for i, c in enumerate(cuts):
                if names[2 * i] != c["id"] + "." + names[2 * i].rsplit(".", 1)[1] or \
                        names[2 * i + 1] != c["id"] + ".json":
                    fail(f"{path}: members {names[2*i:2*i+2]} do not pair with cut {c['id']}")
                if c["type"] not in ("MonoCut", "MultiCut") or c["recording"]["num_samples"] <= 0:
                    fail(f"{path}: bad cut line {c}")
    if layout == "nemo":
        rows = read_lines(os.path.join(root, "nemo", "tarred_audio_manifest.json"))
        live = [r for r in rows if not r.get("_skipme")]
        if [r["audio_filepath"] for r in live] != [e["id"] for e in exp]:
            fail("nemo: manifest rows do not match expected.jsonl")
        if len(rows) == len(live):
            fail("nemo: no _skipme row")
        import re
        for path, names in tars.items():
            sid = int(re.search(r"audio_(\d+)\.tar", path).group(1))
            shard_rows = read_lines(os.path.join(root, "nemo", "sharded_manifests", f"manifest_{sid}.json"))
            if any(r["shard_id"] != sid for r in shard_rows):
                fail(f"nemo: manifest_{sid}.json has rows of another shard")
            # Lhotse's LazyNeMoTarredIterator: member name == audio_filepath without "-subN".
            base = {re.sub(r"-sub\d+(\.\w+)$", r"\1", r["audio_filepath"]) for r in shard_rows}
            if names is not None and set(names) != base:
                fail(f"nemo: {path} members {sorted(set(names) ^ base)} have no row or no member")
    if layout == "wds":
        for path, names in tars.items():
            if names is None:
                continue
            keys = {}
            for n in names:
                k, ext = n.rsplit("/", 1)[-1].split(".", 1)
                keys.setdefault(n.rsplit("/", 1)[0] + "/" + k if "/" in n else k, []).append(ext)
            for k, exts in keys.items():
                if len(exts) != 3 or {"json", "txt"} - set(exts) or \
                        len(set(exts) - {"json", "txt"}) != 1:
                    fail(f"wds: {path}: key {k} has members {exts}")
if "--index" in sys.argv[2:] and not any(f.endswith(".idx") for f in os.listdir(os.path.join(root, "shar"))):
    fail("--index wrote no .idx files")
if "--index" not in sys.argv[2:] and any(f.endswith(".idx") for f in os.listdir(os.path.join(root, "shar"))):
    fail(".idx files written without --index")
print("ok", root)
PYEOF
  fi
}

run flac-gzip
run wav-none --codec wav --compress none --channels 2 --index
run opus-zstd --codec opus --compress zstd
run mp3-gzip --codec mp3 --sampling-rate 22050
echo "all generated corpora are deterministic and well-formed"
