#!/usr/bin/env python3
"""Helpers of tests/cli/pack.sh: make loose audio files and manifests, then check what
`sharc pack` wrote against the source files (decoded with soundfile, i.e. libsndfile).

  packcheck.py make DIR                  audio under DIR/a, DIR/b; manifests DIR/a/m1.jsonl,
                                         DIR/b/m2.jsonl; DIR/expected.json (one entry per cut)
  packcheck.py summary OUT.json OUTDIR EXPECTED SHARDS
  packcheck.py read READ.jsonl EXPECTED LAYOUT CUTS_PER_SHARD SUFFIX
  packcheck.py shar OUTDIR EXPECTED CUTS_PER_SHARD SUFFIX   files, tar members byte for byte,
                                         the cuts lines as Lhotse writes them
  packcheck.py nemo OUTDIR EXPECTED CUTS_PER_SHARD SUFFIX   files, members, manifests
  packcheck.py validate VALIDATE.jsonl EXPECTED
  packcheck.py lhotse OUTDIR EXPECTED    (run with Lhotse's python) CutSet.from_shar loads
                                         every cut with the same id, duration, text and samples
"""
import gzip
import json
import math
import os
import sys
import tarfile


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def make(d):
    import numpy as np
    import soundfile as sf

    rng = np.random.default_rng(7)
    os.makedirs(f"{d}/a/wav", exist_ok=True)
    os.makedirs(f"{d}/a/flac", exist_ok=True)
    os.makedirs(f"{d}/b", exist_ok=True)
    # (path under d, rate, channels, seconds, subtype, manifest row extras)
    files = [
        ("a/wav/one.wav", 16000, 1, 0.5, "PCM_16",
         {"text": "hello world", "speaker": "spk1", "lang": "en"}, "m1"),
        ("a/flac/two.flac", 16000, 1, 0.8, "PCM_16",
         {"text": "Zażółć gęślą jaźń \"q\"", "language": "pl", "id": "custom/id-2",
          "duration_shift": 0.05}, "m1"),
        ("a/st.wav", 8000, 2, 1.1, "PCM_16", {"text": "stereo"}, "m1"),
        ("a/three.flac", 22050, 1, 1.3, "PCM_24", {"no_duration": True}, "m1"),
        ("a/five.wav", 16000, 1, 0.25, "PCM_16", {"text": "five", "speaker": "s5"}, "m2rel"),
        ("b/six.ogg", 16000, 1, 0.9, "VORBIS", {"text": "six", "offset": 0}, "m2"),
        ("b/seven.flac", 16000, 1, 2.0, "PCM_16", {"text": "seven", "speaker": "s7"}, "m2abs"),
    ]
    expected, m1, m2 = [], [], []
    for path, rate, ch, sec, subtype, extra, man in files:
        n = int(round(rate * sec))
        x = (rng.standard_normal((n, ch)) * 3000).astype(np.int16)
        sf.write(f"{d}/{path}", x if ch > 1 else x[:, 0], rate, subtype=subtype)
        y, _ = sf.read(f"{d}/{path}", dtype="float32", always_2d=True)
        info = sf.info(f"{d}/{path}")
        frames = info.frames
        row = {}
        if man == "m1":
            row["audio_filepath"] = path[2:]
        elif man == "m2rel":
            row["audio_filepath"] = "../" + path
        elif man == "m2abs":
            row["audio_filepath"] = os.path.abspath(f"{d}/{path}")
        else:
            row["audio_filepath"] = path[2:]
        if not extra.get("no_duration"):
            row["duration"] = frames / rate + extra.get("duration_shift", 0)
        for k in ("text", "speaker", "lang", "language", "id", "offset"):
            if k in extra:
                row[k] = extra[k]
        (m1 if man == "m1" else m2).append(row)
        expected.append({
            "id": extra.get("id", os.path.splitext(os.path.basename(path))[0]),
            "path": os.path.abspath(f"{d}/{path}"),
            "ext": {"PCM_16": None, "PCM_24": None, "VORBIS": "ogg"}[subtype]
            or os.path.splitext(path)[1][1:],
            "rate": rate, "channels": ch, "frames": frames,
            "text": extra.get("text"), "speaker": extra.get("speaker"),
            "language": extra.get("lang", extra.get("language")),
            "sum": float(np.sum(y, dtype=np.float64)),
        })
    with open(f"{d}/a/m1.jsonl", "w") as f:
        for r in m1:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    with open(f"{d}/b/m2.jsonl", "w") as f:
        f.write(json.dumps(m2[0]) + "\n\n")  # a blank line is ignored
        for r in m2[1:]:
            f.write(json.dumps(r) + "\n")
    with open(f"{d}/expected.json", "w") as f:
        json.dump(expected, f, ensure_ascii=False)


def load(p):
    with open(p) as f:
        return json.load(f)


def dur(e):
    return e["frames"] / e["rate"]


def tar_name(layout, shard, suffix):
    return f"recording.{shard:06d}.tar{suffix}" if layout == "shar" else f"audio_{shard}.tar{suffix}"


def check_summary(out, outdir, exp, shards):
    lines = open(out).read().splitlines()
    if len(lines) != 1:
        fail(f"--json printed {len(lines)} lines")
    s = json.loads(lines[0])
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(outdir) for f in fs)
    want = {"shards": int(shards), "cuts": len(exp), "bytes": size}
    for k, v in want.items():
        if s.get(k) != v:
            fail(f"summary {k} = {s.get(k)}, expected {v}: {s}")
    if s.get("layout") not in ("shar", "nemo"):
        fail(f"summary layout {s}")
    if abs(s["audio_seconds"] - sum(dur(e) for e in exp)) > 1e-9:
        fail(f"summary audio_seconds {s['audio_seconds']}")
    print(s["layout"])


def check_read(path, exp, layout, k, suffix):
    k = int(k)
    cuts = [json.loads(l) for l in open(path) if l.strip()]
    cuts = [c for c in cuts if c.get("type") == "cut"]
    if len(cuts) != len(exp):
        fail(f"read gave {len(cuts)} cuts, expected {len(exp)}")
    by_id = {c["id"]: c for c in cuts}
    for pos, e in enumerate(exp):
        cid = e["id"] if layout == "shar" else f"{e['id']}.{e['ext']}"
        c = by_id.get(cid)
        if c is None:
            fail(f"cut {cid} missing from read: {sorted(by_id)}")
        want = {"sampling_rate": e["rate"], "channels": e["channels"],
                "num_samples": e["frames"], "member": f"{e['id']}.{e['ext']}"}
        want["text"] = e["text"] if e["text"] is not None else c.get("text")
        if layout == "shar":
            want["speaker"] = e["speaker"]
            want["language"] = e["language"]
        elif e["language"] is not None:
            want["language"] = e["language"]
        for kk, v in want.items():
            if c.get(kk) != v:
                fail(f"{cid}: {kk} = {c.get(kk)!r}, expected {v!r}")
        if e["text"] is None and c.get("text") not in (None, ""):
            fail(f"{cid}: text {c.get('text')!r} where the manifest has none")
        if abs(c["duration"] - dur(e)) > 1e-9:
            fail(f"{cid}: duration {c['duration']} != {dur(e)}")
        if os.path.basename(c["shard"]) != tar_name(layout, pos // k, suffix):
            fail(f"{cid}: in {c['shard']}, expected shard {pos // k}")
        if abs(c["sample_sum"] - e["sum"]) > 1e-6 * max(1.0, abs(e["sum"])):
            fail(f"{cid}: sample_sum {c['sample_sum']} != {e['sum']} (the source's)")


def shard_files(layout, n_shards, suffix):
    if layout == "shar":
        return {f for s in range(n_shards)
                for f in (f"cuts.{s:06d}.jsonl.gz", tar_name(layout, s, suffix))}
    return {f for s in range(n_shards)
            for f in (tar_name(layout, s, suffix), f"sharded_manifests/manifest_{s}.json")} | {
        "tarred_audio_manifest.json"}


def check_files(outdir, exp, layout, k, suffix):
    n = math.ceil(len(exp) / k)
    got = {os.path.relpath(os.path.join(r, f), outdir) for r, _, fs in os.walk(outdir) for f in fs}
    want = shard_files(layout, n, suffix)
    if got != want:
        fail(f"files {sorted(got)}, expected {sorted(want)}")
    return n


def tar_members(path):
    if path.endswith(".zst"):
        return None
    with tarfile.open(path, "r:*") as t:
        return [(m.name, t.extractfile(m).read()) for m in t.getmembers()]


def check_members(outdir, exp, layout, k, suffix, n):
    for s in range(n):
        part = exp[s * k:(s + 1) * k]
        members = tar_members(os.path.join(outdir, tar_name(layout, s, suffix)))
        if members is None:
            continue
        names = [m[0] for m in members]
        want = [f"{e['id']}.{e['ext']}" for e in part]
        if layout == "shar":
            want = [x for e, w in zip(part, want) for x in (w, f"{e['id']}.json")]
        if names != want:
            fail(f"shard {s}: members {names}, expected {want}")
        data = dict(members)
        for e in part:
            if data[f"{e['id']}.{e['ext']}"] != open(e["path"], "rb").read():
                fail(f"{e['id']}: the member is not the source file byte for byte")
            if layout == "shar":
                rec = json.loads(data[f"{e['id']}.json"])
                want_rec = {"id": e["id"], "sources": [{"type": "shar", "channels": list(
                    range(e["channels"])), "source": ""}], "sampling_rate": e["rate"],
                    "num_samples": e["frames"], "duration": dur(e),
                    "channel_ids": list(range(e["channels"]))}
                if rec != want_rec:
                    fail(f"{e['id']}.json: {rec} != {want_rec}")


def check_shar(outdir, exp, k, suffix):
    exp, k = load(exp), int(k)
    n = check_files(outdir, exp, "shar", k, suffix)
    check_members(outdir, exp, "shar", k, suffix, n)
    for s in range(n):
        with gzip.open(os.path.join(outdir, f"cuts.{s:06d}.jsonl.gz"), "rt") as f:
            lines = [json.loads(l) for l in f]
        part = exp[s * k:(s + 1) * k]
        if [c["id"] for c in lines] != [e["id"] for e in part]:
            fail(f"cuts.{s:06d}: ids {[c['id'] for c in lines]}")
        for c, e in zip(lines, part):
            mono = e["channels"] == 1
            if c["type"] != ("MonoCut" if mono else "MultiCut") or c["start"] != 0 or \
                    c["channel"] != (0 if mono else list(range(e["channels"]))) or \
                    abs(c["duration"] - dur(e)) > 1e-12 or c["recording"]["id"] != e["id"]:
                fail(f"cut line {c}")
            sup = {kk: e[kk] for kk in ("text", "language", "speaker") if e[kk] is not None}
            if not sup:
                if c["supervisions"] != []:
                    fail(f"{e['id']}: supervisions {c['supervisions']} without text/speaker/lang")
                continue
            got = c["supervisions"][0]
            if len(c["supervisions"]) != 1 or got["recording_id"] != e["id"] or \
                    got["start"] != 0 or abs(got["duration"] - dur(e)) > 1e-12 or \
                    {kk: got.get(kk) for kk in sup} != sup or \
                    any(kk in got for kk in ("text", "language", "speaker") if kk not in sup):
                fail(f"{e['id']}: supervision {got}, expected {sup}")


def check_nemo(outdir, exp, k, suffix):
    exp, k = load(exp), int(k)
    n = check_files(outdir, exp, "nemo", k, suffix)
    check_members(outdir, exp, "nemo", k, suffix, n)
    every = []
    for s in range(n):
        rows = [json.loads(l) for l in open(f"{outdir}/sharded_manifests/manifest_{s}.json")]
        every += rows
        part = exp[s * k:(s + 1) * k]
        for r, e in zip(rows, part):
            want = {"audio_filepath": f"{e['id']}.{e['ext']}", "duration": dur(e),
                    "text": e["text"] or "", "shard_id": s}
            if e["language"] is not None:
                want["lang"] = e["language"]
            if e["speaker"] is not None:
                want["speaker"] = e["speaker"]
            if r != want:
                fail(f"manifest_{s}: {r} != {want}")
        if len(rows) != len(part):
            fail(f"manifest_{s}: {len(rows)} rows")
    allrows = [json.loads(l) for l in open(f"{outdir}/tarred_audio_manifest.json")]
    if allrows != every:
        fail("tarred_audio_manifest.json is not the shards' manifests one after another")


def check_validate(path, exp):
    exp = load(exp)
    lines = [json.loads(l) for l in open(path) if l.strip()]
    summ = [x for x in lines if x.get("type") == "summary"]
    if len(summ) != 1:
        fail(f"validate: {len(summ)} summaries")
    s = summ[0]
    if s["cuts"] != len(exp) or s["problems"] != 0 or any(s["by_code"].values()):
        fail(f"validate summary {s}")


def check_lhotse(outdir, exp):
    import numpy as np
    import soundfile as sf
    from lhotse import CutSet

    exp = load(exp)
    cuts = list(CutSet.from_shar(in_dir=outdir))
    if [c.id for c in cuts] != [e["id"] for e in exp]:
        fail(f"Lhotse ids {[c.id for c in cuts]}")
    for c, e in zip(cuts, exp):
        x, _ = sf.read(e["path"], dtype="float32", always_2d=True)
        if c.sampling_rate != e["rate"] or c.num_samples != e["frames"] or \
                abs(c.duration - dur(e)) > 1e-9:
            fail(f"Lhotse {c.id}: {c.sampling_rate} {c.num_samples} {c.duration}")
        a = c.load_audio()
        if a.shape != x.T.shape or not np.array_equal(a, x.T):
            fail(f"Lhotse {c.id}: audio differs from the source file's")
        sup = c.supervisions[0] if c.supervisions else None
        for k in ("text", "speaker", "language"):
            got = getattr(sup, k) if sup else None
            if got != e[k]:
                fail(f"Lhotse {c.id}: {k} {got!r} != {e[k]!r}")
    print(f"lhotse: {len(cuts)} cuts ok")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "make":
        make(*args)
    elif cmd == "summary":
        check_summary(args[0], args[1], load(args[2]), args[3])
    elif cmd == "read":
        check_read(args[0], load(args[1]), args[2], args[3], args[4] if len(args) > 4 else "")
    elif cmd == "shar":
        check_shar(args[0], args[1], args[2], args[3] if len(args) > 3 else "")
    elif cmd == "nemo":
        check_nemo(args[0], args[1], args[2], args[3] if len(args) > 3 else "")
    elif cmd == "validate":
        check_validate(*args)
    elif cmd == "lhotse":
        check_lhotse(*args)
    else:
        fail(f"unknown check {cmd}")
