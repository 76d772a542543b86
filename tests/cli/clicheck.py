#!/usr/bin/env python3
"""Checks for the sharc CLI tests: compares `sharc read/validate --json` output with what
sharc-gen (or the Lhotse fixture) says was written, and makes corrupted copies of corpora.

Usage: clicheck.py <check> ARGS...   (see the functions named check_* and corrupt_*)
Exits 1 with a message naming the cut on the first mismatch.
"""
import gzip
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tarfile


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def load_jsonl(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                rows.append(json.loads(line))
            except ValueError as e:
                fail(f"{path}:{n}: not JSON ({e}): {line[:200]!r}")
    return rows


def split_output(path):
    """(cut objects, problem objects, summary) of a --json run; the summary must be last."""
    rows = load_jsonl(path)
    if not rows or rows[-1].get("type") != "summary":
        fail(f"{path}: the last line is not a summary")
    if any(r.get("type") == "summary" for r in rows[:-1]):
        fail(f"{path}: more than one summary")
    cuts = [r for r in rows if r.get("type") == "cut"]
    problems = [r for r in rows if r.get("type") == "problem"]
    shards = [r for r in rows if r.get("type") == "shard"]
    if len(cuts) + len(problems) + len(shards) + 1 != len(rows):
        fail(f"{path}: lines of unknown type")
    # One record per shard checked, and their cuts are the summary's.
    if len({r["shard"] for r in shards}) != len(shards):
        fail(f"{path}: a shard has two records")
    if shards and sum(r["cuts"] for r in shards) != rows[-1]["cuts"]:
        fail(f"{path}: the shard records count {sum(r['cuts'] for r in shards)} cuts, "
             f"the summary {rows[-1]['cuts']}")
    return cuts, problems, rows[-1]


def close(a, b, rel=1e-3, abs_tol=1e-3):
    return a is not None and b is not None and abs(a - b) <= max(abs_tol, rel * abs(b))


def by_id(rows, what):
    out = {}
    for r in rows:
        if r["id"] in out:
            fail(f"{what}: cut {r['id']} appears more than once")
        out[r["id"]] = r
    return out


def compare_cut(got, exp, what, samples=True):
    cid = exp["id"]
    for k in ("num_samples", "sampling_rate", "channels"):
        if got.get(k) != exp[k]:
            fail(f"{what}: cut {cid}: {k} {got.get(k)} != expected {exp[k]}")
    if "text" in got and got["text"] != exp["text"]:
        fail(f"{what}: cut {cid}: text {got['text']!r} != expected {exp['text']!r}")
    if not close(got.get("duration"), exp["duration"], 1e-6, 1e-6):
        fail(f"{what}: cut {cid}: duration {got.get('duration')} != expected {exp['duration']}")
    if samples and "sample_sum" in got and not close(got["sample_sum"], exp["sample_sum"]):
        fail(f"{what}: cut {cid}: sample_sum {got['sample_sum']} != expected {exp['sample_sum']}")
    if os.path.basename(got.get("shard") or "") != exp["shard"]:
        fail(f"{what}: cut {cid}: shard {got.get('shard')} != expected {exp['shard']}")
    if got.get("member") != exp["member"]:
        fail(f"{what}: cut {cid}: member {got.get('member')} != expected {exp['member']}")


def check_read(out, expected, epochs="1"):
    """Every expected cut exactly once per epoch, with the right text and samples."""
    cuts, problems, summary = split_output(out)
    exp = by_id(load_jsonl(expected), expected)
    epochs = int(epochs)
    if len(cuts) != epochs * len(exp) or summary["cuts"] != len(cuts):
        fail(f"{out}: {len(cuts)} cuts (summary {summary['cuts']}), expected {epochs} x {len(exp)}")
    for e in range(epochs):
        got = by_id([c for c in cuts if c["epoch"] == e], f"{out} epoch {e}")
        if set(got) != set(exp):
            fail(f"{out}: epoch {e}: missing {sorted(set(exp) - set(got))[:5]}, "
                 f"unexpected {sorted(set(got) - set(exp))[:5]}")
        for cid, c in got.items():
            compare_cut(c, exp[cid], f"{out} epoch {e}")
            if c["speaker"] != exp[cid]["speaker"] and exp[cid]["layout"] != "nemo":
                fail(f"{out}: cut {cid}: speaker {c['speaker']!r} != {exp[cid]['speaker']!r}")
    if summary["error"] is not None or summary["skipped_cuts"] != 0:
        fail(f"{out}: summary reports an error or skipped cuts: {summary}")
    if not close(summary["audio_seconds"], epochs * sum(e["duration"] for e in exp.values()), 1e-6):
        fail(f"{out}: audio_seconds {summary['audio_seconds']} is wrong")
    print(f"ok {out}: {len(cuts)} cuts")


def check_no_decode(out, expected):
    cuts, _, summary = split_output(out)
    exp = by_id(load_jsonl(expected), expected)
    if set(c["id"] for c in cuts) != set(exp) or len(cuts) != len(exp):
        fail(f"{out}: --no-decode did not return every cut once")
    for c in cuts:
        if c["sample_sum"] is not None:
            fail(f"{out}: cut {c['id']}: sample_sum without decoding")
        compare_cut(c, exp[c["id"]], out, samples=False)
    print(f"ok {out}")


def check_partition(expected, *outs):
    """The cuts of several --dp-rank runs are disjoint and together are the whole dataset."""
    exp = set(r["id"] for r in load_jsonl(expected))
    seen = {}
    for out in outs:
        cuts, _, _ = split_output(out)
        if not cuts:
            fail(f"{out}: a rank got no cuts")
        for c in cuts:
            if c["id"] in seen:
                fail(f"cut {c['id']} is in both {seen[c['id']]} and {out}")
            seen[c["id"]] = out
    if set(seen) != exp:
        fail(f"ranks together miss {sorted(exp - set(seen))[:5]}")
    print(f"ok: {len(outs)} ranks partition {len(exp)} cuts")


def check_limit(out, n):
    cuts, _, summary = split_output(out)
    if len(cuts) != int(n) or summary["cuts"] != int(n):
        fail(f"{out}: --limit {n} gave {len(cuts)} cuts")
    print(f"ok {out}")


def check_validate_clean(out, expected, n_shards):
    """A clean corpus: every cut once with the right numbers, RMS from the generator's sums."""
    cuts, problems, summary = split_output(out)
    if problems:
        fail(f"{out}: problems on a clean corpus: {problems[:3]}")
    exp = by_id(load_jsonl(expected), expected)
    got = by_id(cuts, out)
    if set(got) != set(exp):
        fail(f"{out}: missing {sorted(set(exp) - set(got))[:5]}, extra {sorted(set(got) - set(exp))[:5]}")
    for cid, c in got.items():
        e = exp[cid]
        compare_cut(c, e, out)
        n = e["num_samples"] * e["channels"]
        rms = math.sqrt(e["sample_sumsq"] / n)
        want = 20 * math.log10(rms) if rms > 0 else None
        if want is None and c["rms_dbfs"] is not None:
            fail(f"{out}: cut {cid}: rms_dbfs {c['rms_dbfs']} for silence")
        if want is not None and not close(c["rms_dbfs"], want, 0, 0.01):
            fail(f"{out}: cut {cid}: rms_dbfs {c['rms_dbfs']} != {want}")
        if not (0 < c["peak"] <= 1.0) or c["peak"] < rms:
            fail(f"{out}: cut {cid}: implausible peak {c['peak']} (rms {rms})")
    want = {"shards": int(n_shards), "cuts": len(exp), "problems": 0}
    for k, v in want.items():
        if summary[k] != v:
            fail(f"{out}: summary {k} = {summary[k]}, expected {v}")
    if not close(summary["audio_seconds"], sum(e["duration"] for e in exp.values()), 1e-6):
        fail(f"{out}: summary audio_seconds {summary['audio_seconds']}")
    print(f"ok {out}: {len(cuts)} cuts, clean")


def check_same_cuts(a, b):
    """Two validate runs (different --threads) report the same cuts and problems."""
    ca, pa, sa = split_output(a)
    cb, pb, sb = split_output(b)
    key = lambda r: json.dumps(r, sort_keys=True)
    if sorted(map(key, ca)) != sorted(map(key, cb)):
        fail(f"{a} and {b} differ in their cut lines")
    if sorted(p["code"] + str(p["cut_id"]) for p in pa) != sorted(p["code"] + str(p["cut_id"]) for p in pb):
        fail(f"{a} and {b} differ in their problems")
    for k in ("shards", "cuts", "problems"):
        if sa[k] != sb[k]:
            fail(f"{a} and {b}: summary {k} {sa[k]} != {sb[k]}")
    print(f"ok: {a} == {b}")


def check_problem(out, spec):
    """spec: code=C[,shard=SUBSTR][,member=M][,cut_id=ID][,message=SUBSTR][,count=N]; `|`
    separates alternatives for a value. At least one problem (exactly count) must match."""
    cuts, problems, summary = split_output(out)
    want = dict(kv.split("=", 1) for kv in spec.split(","))
    count = int(want.pop("count", "0"))
    hits = []
    for p in problems:
        ok = True
        for k, alts in want.items():
            v = p.get(k) or ""
            if k in ("shard", "message"):
                ok = ok and any(a in v for a in alts.split("|"))
            else:
                ok = ok and v in alts.split("|")
        if ok:
            hits.append(p)
    if not hits or (count and len(hits) != count):
        fail(f"{out}: {len(hits)} problems match {spec} (count {count or '>=1'}); reported:\n  "
             + "\n  ".join(json.dumps(p, ensure_ascii=False) for p in problems[:20]))
    if summary["problems"] != len(problems):
        fail(f"{out}: summary says {summary['problems']} problems, {len(problems)} reported")
    print(f"ok {out}: {len(hits)} x {spec}")


def check_min_cuts(out, n):
    cuts, _, summary = split_output(out)
    if len(cuts) < int(n) or summary["cuts"] != len(cuts):
        fail(f"{out}: only {len(cuts)} cuts reported (summary {summary['cuts']}), expected >= {n}")
    print(f"ok {out}: {len(cuts)} cuts")


# ---- batches (sharc read without --cuts) ----

def split_batches(path):
    """(batch objects, summary) of a batch-mode --json run; the summary must be last."""
    rows = load_jsonl(path)
    if not rows or rows[-1].get("type") != "summary":
        fail(f"{path}: the last line is not a summary")
    batches = rows[:-1]
    for r in batches:
        if r.get("type") != "batch":
            fail(f"{path}: a line that is not a batch: {json.dumps(r)[:200]}")
        if r["cuts"] != len(r["ids"]) or r["cuts"] < 1:
            fail(f"{path}: step {r['step']}: cuts {r['cuts']} but {len(r['ids'])} ids")
    return batches, rows[-1]


def bucket_of(bins, d):
    """Python's bisect_left, as the sampler assigns buckets."""
    import bisect
    return bisect.bisect_left(bins, d)


def check_batches(out, expected, *opts):
    """Every expected cut exactly `epochs` times over the batches (unless filtered or dropped),
    steps consecutive, frames/durations/padding right, each batch within the size rule.
    opts: epochs=N max_duration=S max_cuts=N quadratic=Q bins=A,B bbs=N,M min_duration=S
    max_cut_duration=S drop_last=1."""
    o = dict(kv.split("=", 1) for kv in opts)
    epochs = int(o.get("epochs", 1))
    max_dur = float(o.get("max_duration", 0))
    max_cuts = int(o.get("max_cuts", 0))
    q = float(o.get("quadratic", 0))
    bins = [float(x) for x in o["bins"].split(",")] if "bins" in o else None
    bbs = [int(x) for x in o["bbs"].split(",")] if "bbs" in o else None
    lo, hi = float(o.get("min_duration", 0)), float(o.get("max_cut_duration", 0))
    drop_last = o.get("drop_last") == "1"
    batches, summary = split_batches(out)
    exp = by_id(load_jsonl(expected), expected)
    kept = {i for i, e in exp.items() if e["duration"] >= lo and (not hi or e["duration"] <= hi)}
    seen = {}
    partial = {}
    first = summary["first_step"]
    for n, b in enumerate(batches):
        what = f"{out}: step {b['step']}"
        if b["step"] != first + n:
            fail(f"{what}: expected step {first + n}")
        rows = []
        for i in b["ids"]:
            if i not in kept:
                fail(f"{what}: cut {i!r} is not expected (or should have been filtered)")
            seen[i] = seen.get(i, 0) + 1
            rows.append(exp[i])
        longest = max(r["num_samples"] for r in rows)
        rate = rows[0]["sampling_rate"]
        if b["frames"] != longest:
            fail(f"{what}: frames {b['frames']} != longest cut {longest}")
        if not close(b["audio_seconds"], sum(r["duration"] for r in rows), 1e-6, 1e-6):
            fail(f"{what}: audio_seconds {b['audio_seconds']} is not the sum of durations")
        if not close(b["padded_seconds"], len(rows) * longest / rate, 1e-9, 1e-9):
            fail(f"{what}: padded_seconds {b['padded_seconds']} != {len(rows)} x {longest} / {rate}")
        # Lhotse's rule: cuts are taken while (n+1) * longest <= max_duration for the n taken
        # so far, the cut that breaks it included; so the first n-1 of a batch of n obey it.
        eff = [r["duration"] + (r["duration"] ** 2 / q if q else 0) for r in rows]
        if max_dur and len(rows) > 1 and len(rows) * max(eff[:-1]) > max_dur + 1e-9:
            fail(f"{what}: {len(rows)} cuts but {len(rows)} x {max(eff[:-1])} s (longest of the "
                 f"first {len(rows) - 1}) > max_duration {max_dur}")
        if max_cuts and len(rows) > max_cuts:
            fail(f"{what}: {len(rows)} cuts > max_cuts {max_cuts}")
        if bbs:
            kinds = {bucket_of(bins, r["duration"]) for r in rows}
            if len(kinds) != 1:
                fail(f"{what}: cuts of buckets {sorted(kinds)} in one batch")
            k = kinds.pop()
            if len(rows) > bbs[k]:
                fail(f"{what}: {len(rows)} cuts > bucket_batch_size {bbs[k]} of bucket {k}")
            if len(rows) < bbs[k]:
                partial[k] = partial.get(k, 0) + 1
                if partial[k] > epochs:
                    fail(f"{what}: more than {epochs} partial batches from bucket {k}")
    got = sum(seen.values())
    if drop_last:
        if any(c > epochs for c in seen.values()):
            fail(f"{out}: a cut appears more than {epochs} times")
        if summary["reader"]["dropped_cuts"] != epochs * len(kept) - got or got == 0:
            fail(f"{out}: {got} cuts kept, dropped_cuts {summary['reader']['dropped_cuts']}, "
                 f"{epochs * len(kept)} expected in all")
    else:
        wrong = sorted(i for i in kept if seen.get(i, 0) != epochs)
        if wrong:
            fail(f"{out}: cuts not seen exactly {epochs} times: "
                 + ", ".join(f"{i} ({seen.get(i, 0)})" for i in wrong[:5]))
    filtered = epochs * (len(exp) - len(kept))
    if summary["reader"]["filtered_cuts"] != filtered:
        fail(f"{out}: filtered_cuts {summary['reader']['filtered_cuts']} != {filtered}")
    if summary["batches"] != len(batches) or summary["cuts"] != got or summary["error"] is not None:
        fail(f"{out}: summary {summary} disagrees with {len(batches)} batches of {got} cuts")
    if not close(summary["audio_seconds"], sum(b["audio_seconds"] for b in batches), 1e-9):
        fail(f"{out}: summary audio_seconds {summary['audio_seconds']}")
    if not close(summary["reader"]["padded_seconds"], summary["padded_seconds"], 1e-9):
        fail(f"{out}: padded_seconds {summary['padded_seconds']} != the reader's "
             f"{summary['reader']['padded_seconds']}")
    print(f"ok {out}: {len(batches)} batches, {got} cuts, {filtered} filtered")


def check_same_batches(a, *others):
    """Runs that must yield the same batches (ids, samples): identical batch lines."""
    ba, sa = split_batches(a)
    for b in others:
        bb, sb = split_batches(b)
        if len(ba) != len(bb):
            fail(f"{a} has {len(ba)} batches, {b} {len(bb)}")
        for x, y in zip(ba, bb):
            if x != y:
                fail(f"{a} and {b} differ at step {x['step']}:\n  {json.dumps(x)[:300]}\n"
                     f"  {json.dumps(y)[:300]}")
    if not ba:
        fail(f"{a}: no batches")
    print(f"ok: {len(others) + 1} runs give the same {len(ba)} batches")


def check_resume(full, resumed, k):
    """A run resumed from the state of step k yields the uninterrupted run's steps k+1...,
    each with the same ids and audio_crc32."""
    k = int(k)
    bf, _ = split_batches(full)
    br, sr = split_batches(resumed)
    want = [b for b in bf if b["step"] > k]
    if not want:
        fail(f"{full}: no batch after step {k} to compare")
    if len(br) != len(want):
        fail(f"{resumed}: {len(br)} batches after resuming at {k}, expected {len(want)}")
    for x, y in zip(want, br):
        for key in ("step", "epoch", "ids", "frames", "audio_crc32"):
            if x[key] != y[key]:
                fail(f"{resumed}: step {x['step']}: {key} {y[key]} != uninterrupted {x[key]}")
    if sr["first_step"] != k + 1 or sr["error"] is not None:
        fail(f"{resumed}: summary {sr}")
    print(f"ok {resumed}: steps {k + 1}..{want[-1]['step']} as uninterrupted")


def check_saved(out, *step_files):
    """The summary lists a saved state per STEP=FILE, with the file's size."""
    _, s = split_batches(out)
    want = [sf.split("=", 1) for sf in step_files]
    got = [(str(x["step"]), x["file"], x["bytes"]) for x in s["saved_states"]]
    exp = [(st, f, os.path.getsize(f)) for st, f in want]
    if sorted(got) != sorted(exp):
        fail(f"{out}: saved_states {got} != {exp}")
    print(f"ok {out}: {len(exp)} states saved")


NPY_DESCR = {"<f4": ("f", 4), "<i4": ("i", 4), "|u1": ("B", 1)}


def read_npy(path):
    """Parse an .npy file by hand (format 1.0 as numpy writes it): (descr, shape, data bytes)."""
    import ast
    raw = open(path, "rb").read()
    if raw[:6] != b"\x93NUMPY" or raw[6:8] != b"\x01\x00":
        fail(f"{path}: not an NPY 1.0 file: {raw[:10]!r}")
    hlen = int.from_bytes(raw[8:10], "little")
    if (10 + hlen) % 64 != 0 or raw[10 + hlen - 1:10 + hlen] != b"\n":
        fail(f"{path}: header of {hlen} bytes is not padded to 64 bytes or does not end in \\n")
    header = ast.literal_eval(raw[10:10 + hlen].decode("latin1"))
    if sorted(header) != ["descr", "fortran_order", "shape"] or header["fortran_order"] is not False:
        fail(f"{path}: bad header {header}")
    if header["descr"] not in NPY_DESCR:
        fail(f"{path}: unexpected descr {header['descr']}")
    n = 1
    for x in header["shape"]:
        n *= x
    data = raw[10 + hlen:]
    if len(data) != n * NPY_DESCR[header["descr"]][1]:
        fail(f"{path}: {len(data)} data bytes for shape {header['shape']} {header['descr']}")
    return header["descr"], header["shape"], data


def check_npy_dump(d, out, expected):
    """The .npy files of --dump-dir: names, dtypes and shapes; zero padding beyond
    audio_lens; samples that sum to the generator's sums; the CRC-32 of the audio equal to
    audio_crc32; strings equal to the ids and texts. With numpy: numpy.load agrees and
    numpy.save writes the same bytes."""
    import array
    import zlib
    batches, _ = split_batches(out)
    exp = by_id(load_jsonl(expected), expected)
    cols = ("cut_id", "text", "speaker", "language")
    names = ["audio", "audio_lens", "duration"] + [f"{c}_{k}" for c in cols for k in ("offsets", "bytes")]
    want_files = {f"step{b['step']}.{n}.npy" for b in batches for n in names}
    if set(os.listdir(d)) != want_files:
        fail(f"{d}: files {sorted(set(os.listdir(d)) ^ want_files)[:6]} differ from the expected set")
    for b in batches:
        B, T = b["cuts"], b["frames"]
        t = {}
        for n in names:
            t[n] = read_npy(os.path.join(d, f"step{b['step']}.{n}.npy"))
        shapes = {"audio": ("<f4", (B, T)), "audio_lens": ("<i4", (B,)), "duration": ("<f4", (B,))}
        for c in cols:
            shapes[c + "_offsets"] = ("<i4", (B + 1,))
        for n, (descr, shape) in shapes.items():
            if t[n][:2] != (descr, shape):
                fail(f"step {b['step']}: {n} is {t[n][:2]}, expected {(descr, shape)}")
        if zlib.crc32(t["audio"][2]) != b["audio_crc32"]:
            fail(f"step {b['step']}: CRC-32 of audio.npy data != audio_crc32 {b['audio_crc32']}")
        audio = array.array("f", t["audio"][2])
        lens = array.array("i", t["audio_lens"][2])
        strings = {}
        for c in cols:
            off = array.array("i", t[c + "_offsets"][2])
            data = t[c + "_bytes"][2]
            if t[c + "_bytes"][0] != "|u1" or off[0] != 0 or off[-1] != len(data):
                fail(f"step {b['step']}: {c} offsets {list(off)} do not span {len(data)} bytes")
            strings[c] = [data[off[i]:off[i + 1]].decode("utf-8") for i in range(B)]
        if strings["cut_id"] != b["ids"]:
            fail(f"step {b['step']}: cut_id strings {strings['cut_id']} != ids {b['ids']}")
        for i, cid in enumerate(b["ids"]):
            e = exp[cid]
            row = audio[i * T:(i + 1) * T]
            if lens[i] != e["num_samples"]:
                fail(f"step {b['step']}: audio_lens[{i}] {lens[i]} != {e['num_samples']} ({cid})")
            if any(x != 0.0 for x in row[lens[i]:]):
                fail(f"step {b['step']}: row {i} ({cid}) is not zero beyond audio_lens {lens[i]}")
            if not close(sum(row[:lens[i]]), e["sample_sum"]):
                fail(f"step {b['step']}: row {i} ({cid}) sums to {sum(row[:lens[i]])}, "
                     f"expected {e['sample_sum']}")
            if strings["text"][i] != (e["text"] or ""):
                fail(f"step {b['step']}: text {strings['text'][i]!r} != {e['text']!r} ({cid})")
            if e["layout"] != "nemo" and strings["speaker"][i] != (e["speaker"] or ""):
                fail(f"step {b['step']}: speaker {strings['speaker'][i]!r} != {e['speaker']!r}")
    try:
        import numpy
    except ImportError:
        print(f"ok {d}: {len(want_files)} .npy files (no numpy here: parsed by hand only)")
        return
    for f in sorted(want_files):
        path = os.path.join(d, f)
        a = numpy.load(path)
        descr, shape, data = read_npy(path)
        if a.dtype.str != descr or a.shape != shape or a.tobytes() != data:
            fail(f"{path}: numpy.load gives {a.dtype.str} {a.shape}, not {descr} {shape}")
        buf = io.BytesIO()
        numpy.save(buf, a)
        if buf.getvalue() != open(path, "rb").read():
            fail(f"{path}: numpy.save writes other bytes for the same array")
    print(f"ok {d}: {len(want_files)} .npy files, numpy {numpy.__version__} reads them and "
          f"writes the same bytes")


def corrupt_flip_byte(path, offset):
    """Flip the low bit of the byte at `offset` (negative: from the end)."""
    data = bytearray(open(path, "rb").read())
    data[int(offset)] ^= 0x01
    open(path, "wb").write(bytes(data))


# ---- corrupted copies ----

def tar_members(path):
    with tarfile.open(path) as t:
        return [(m, t.extractfile(m).read() if m.isfile() else None) for m in t.getmembers()]


def write_tar(path, members):
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        for m, data in members:
            m.size = len(data)
            t.addfile(m, io.BytesIO(data))


def lines_path(d, stem):
    for ext in ("", ".gz"):
        p = os.path.join(d, stem + ext)
        if os.path.exists(p):
            return p
    fail(f"no {stem} in {d}")


def read_lines(p):
    data = open(p, "rb").read()
    if p.endswith(".gz"):
        data = gzip.decompress(data)
    return data.decode("utf-8").splitlines(keepends=True)


def write_lines(p, lines):
    data = "".join(lines).encode("utf-8")
    open(p, "wb").write(gzip.compress(data) if p.endswith(".gz") else data)


def corrupt_truncate(path):
    """Keep the first half (and 100 bytes); of a plain tar, print the member the archive then
    breaks at: the last one whose header is whole."""
    size = os.path.getsize(path)
    cut = size // 2 + 100
    member = None
    if path.endswith(".tar"):
        with tarfile.open(path) as t:
            member = ([m.name for m in t.getmembers() if m.offset_data <= cut] or [None])[-1]
    os.truncate(path, cut)
    if member:
        print(member)


def corrupt_flac_header(tar_path, index):
    """Overwrite the start of the audio member `index` (magic and STREAMINFO) in place."""
    with tarfile.open(tar_path) as t:
        audio = [m for m in t.getmembers() if not m.name.endswith((".json", ".txt"))]
        m = audio[int(index)]
    with open(tar_path, "r+b") as f:
        f.seek(m.offset_data)
        f.write(bytes((i * 37 + 11) & 0xFF for i in range(64)))
    print(m.name)


def corrupt_flac_middle(tar_path, index):
    """Flip bytes in the middle of audio member `index` (frame data) in place."""
    with tarfile.open(tar_path) as t:
        audio = [m for m in t.getmembers() if not m.name.endswith((".json", ".txt"))]
        m = audio[int(index)]
    with open(tar_path, "r+b") as f:
        f.seek(m.offset_data + m.size // 2)
        chunk = bytearray(f.read(256))
        f.seek(m.offset_data + m.size // 2)
        f.write(bytes(b ^ 0x5A for b in chunk))
    print(m.name)


def corrupt_delete_line(d, stem, index):
    p = lines_path(d, stem)
    lines = read_lines(p)
    removed = lines.pop(int(index))
    write_lines(p, lines)
    print(json.loads(removed)["id"])


def corrupt_swap_lines(d, stem, i, j):
    p = lines_path(d, stem)
    lines = read_lines(p)
    i, j = int(i), int(j)
    lines[i], lines[j] = lines[j], lines[i]
    write_lines(p, lines)
    print(json.loads(lines[i])["id"], json.loads(lines[j])["id"])


def corrupt_add_member(tar_path, name, *extra_names):
    """Append copies of the first audio member (and of its .json when asked) under new names."""
    members = tar_members(tar_path)
    audio = next((m, d) for m, d in members if not m.name.endswith((".json", ".txt")))
    meta = next(((m, d) for m, d in members if m.name.endswith(".json")), None)
    for new in (name,) + extra_names:
        src = meta if new.endswith(".json") and meta else audio
        m = tarfile.TarInfo(new)
        m.mode, m.mtime = 0o644, src[0].mtime
        members.append((m, src[1]))
    write_tar(tar_path, members)


def corrupt_remove_member(tar_path, index):
    """Remove audio member `index` (NeMo: its manifest row stays)."""
    members = tar_members(tar_path)
    audio = [i for i, (m, _) in enumerate(members) if not m.name.endswith((".json", ".txt"))]
    m, _ = members.pop(audio[int(index)])
    write_tar(tar_path, members)
    print(m.name)


def edit_nemo_rows(d, member, edit):
    """Apply `edit` to the manifest rows of `member` in every NeMo manifest in d."""
    for root, _, files in os.walk(d):
        for f in files:
            if not f.endswith(".json"):
                continue
            p = os.path.join(root, f)
            rows = [json.loads(l) for l in read_lines(p)]
            for r in rows:
                if r.get("audio_filepath") == member:
                    edit(r)
            write_lines(p, [json.dumps(r) + "\n" for r in rows])


def corrupt_nemo_duration(d, member, delta):
    """Add `delta` seconds to `duration` of the manifest rows of `member`."""
    edit_nemo_rows(d, member, lambda r: r.update(duration=r["duration"] + float(delta)))


def corrupt_nemo_set(d, member, *assignments):
    """Set KEY=JSON in the manifest rows of `member`."""
    edit_nemo_rows(d, member, lambda r: set_keys(r, assignments))


def check_cut_samples(out, cut_id, num_samples):
    """The --per-cut line of `cut_id` in `out` has `num_samples`."""
    cuts = [json.loads(l) for l in open(out, encoding="utf-8") if '"type":"cut"' in l]
    got = [c["num_samples"] for c in cuts if c["id"] == cut_id]
    if got != [int(num_samples)]:
        fail(f"{out}: cut {cut_id}: num_samples {got}, expected [{num_samples}]")
    print(f"ok {out}: cut {cut_id} has {num_samples} samples")


def set_keys(obj, assignments):
    """Apply KEY=JSON assignments to a JSON object; KEY may be a dotted path (a.b.c)."""
    for a in assignments:
        key, value = a.split("=", 1)
        *path, last = key.split(".")
        target = obj
        for k in path:
            target = target[k]
        target[last] = json.loads(value)


def corrupt_json_member(tar_path, member, *assignments):
    """Set KEY=JSON in the .json member `member` of a plain tar ('*': every .json member)."""
    members = tar_members(tar_path)
    hit = 0
    for i, (m, data) in enumerate(members):
        if m.name.endswith(".json") and member in ("*", m.name):
            meta = json.loads(data)
            set_keys(meta, assignments)
            members[i] = (m, json.dumps(meta).encode())
            hit += 1
    if not hit:
        fail(f"no member {member} in {tar_path}")
    write_tar(tar_path, members)


def corrupt_cut_line(d, stem, cut_id, *assignments):
    """Set KEY=JSON (dotted paths: recording.num_samples) in the cut line `cut_id` of the
    jsonl file `stem` in d ('*': every line)."""
    p = lines_path(d, stem)
    lines = read_lines(p)
    hit = 0
    for i, line in enumerate(lines):
        cut = json.loads(line)
        if cut_id in ("*", cut["id"]):
            set_keys(cut, assignments)
            lines[i] = json.dumps(cut) + "\n"
            hit += 1
    if not hit:
        fail(f"no cut {cut_id} in {p}")
    write_lines(p, lines)


def corrupt_duplicate_shard(d, src, dst):
    """Copy every file of Shar shard `src` (cuts.SRC..., recording.SRC...) to index `dst`."""
    n = 0
    for f in sorted(os.listdir(d)):
        if f".{src}." in f:
            shutil.copy(os.path.join(d, f), os.path.join(d, f.replace(f".{src}.", f".{dst}.")))
            n += 1
    if n == 0:
        fail(f"no files of shard {src} in {d}")


# ---- the Lhotse fixture ----

def decode_peak(data):
    """max |sample| as libsndfile decodes it to float32: python3-soundfile, else sox."""
    try:
        import soundfile
        import numpy
        x, _ = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
        return float(numpy.abs(x).max()) if x.size else 0.0, 1e-7
    except ImportError:
        pass
    r = subprocess.run(["sox", "-t", "flac", "-", "-n", "stat"], input=data,
                       capture_output=True, check=True)
    vals = {}
    for line in r.stderr.decode().splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            vals[k.strip()] = v.strip()
    # sox prints six decimals.
    return max(abs(float(vals["Maximum amplitude"])), abs(float(vals["Minimum amplitude"]))), 2e-6


def check_lhotse(out, d, expected_json):
    cuts, problems, summary = split_output(out)
    exp = json.load(open(expected_json, encoding="utf-8"))["cuts"]
    if problems:
        fail(f"{out}: problems on the Lhotse fixture: {problems[:3]}")
    got = by_id(cuts, out)
    if set(got) != set(exp):
        fail(f"{out}: ids {sorted(got)} != expected {sorted(exp)}")
    audio = {}
    for f in sorted(os.listdir(d)):
        if f.startswith("recording.") and ".tar" in f and not f.endswith(".idx"):
            for m, data in tar_members(os.path.join(d, f)):
                if data is not None and not m.name.endswith(".json"):
                    audio[(f, m.name)] = data
    for cid, c in got.items():
        e = exp[cid]
        for k in ("num_samples", "sampling_rate", "channels"):
            if c[k] != e[k]:
                fail(f"{out}: cut {cid}: {k} {c[k]} != expected {e[k]}")
        key = (os.path.basename(c["shard"]), c["member"])
        if key not in audio:
            fail(f"{out}: cut {cid}: no member {key}")
        if c["member"].rsplit(".", 1)[0] != cid:
            fail(f"{out}: cut {cid}: member {c['member']} does not belong to it")
        peak, tol = decode_peak(audio[key])
        if abs(c["peak"] - peak) > tol:
            fail(f"{out}: cut {cid}: peak {c['peak']} != libsndfile's {peak}")
    if summary["cuts"] != len(exp) or summary["problems"] != 0:
        fail(f"{out}: bad summary {summary}")
    print(f"ok {out}: {len(cuts)} Lhotse cuts, peaks match libsndfile")


def check_lhotse_read(out, expected_json):
    cuts, _, summary = split_output(out)
    exp = json.load(open(expected_json, encoding="utf-8"))["cuts"]
    got = by_id(cuts, out)
    if set(got) != set(exp):
        fail(f"{out}: ids {sorted(got)} != expected {sorted(exp)}")
    for cid, c in got.items():
        e = exp[cid]
        text = " ".join(e["texts"]) if e["texts"] else None
        if c["text"] != text:
            fail(f"{out}: cut {cid}: text {c['text']!r} != {text!r}")
        if c["num_samples"] != e["num_samples"] or not close(c["sample_sum"], e["sample_sum"], 1e-6, 1e-4):
            fail(f"{out}: cut {cid}: num_samples/sample_sum {c['num_samples']}/{c['sample_sum']} "
                 f"!= {e['num_samples']}/{e['sample_sum']}")
    print(f"ok {out}: {len(cuts)} Lhotse cuts read")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        fail("usage: clicheck.py CHECK ARGS...")
    name = sys.argv[1].replace("-", "_")
    fn = globals().get("check_" + name) or globals().get("corrupt_" + name)
    if fn is None:
        fail(f"unknown check {sys.argv[1]}")
    fn(*sys.argv[2:])
