#!/usr/bin/env python3
"""Checks of `sharc validate --report` output for the CLI tests (cli_report, cli_report_render).

usage: reportcheck.py CHECK ARGS...
  clean JSON EXPECTED N_SHARDS     the report's numbers against sharc-gen's expected cuts
  embedded HTML JSON               the page embeds exactly the JSON written by --report-json
  offline HTML                     nothing in the page is fetched from anywhere
  damaged JSON SHARD MEMBER CUT    the problems of a damaged copy, grouped and per shard
  png PNG                          a screenshot that is not blank
  dom DOM JSON                     Chromium's DOM holds the charts and tables of the report
"""
import json
import math
import re
import struct
import sys
import zlib


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def close(a, b, tol=1e-6):
    return abs(a - b) <= tol * max(1.0, abs(b))


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def check_clean(path, expected, n_shards):
    r = load(path)
    exp = [json.loads(l) for l in open(expected, encoding="utf-8")]
    durations = [e["duration"] for e in exp]
    want = {"cuts": len(exp), "shards": int(n_shards), "checked_shards": int(n_shards),
            "problem_count": 0, "problems": [],
            "shards_cut_short": 0, "per_shard_omitted": 0}
    for k, v in want.items():
        if r[k] != v:
            fail(f"{path}: {k} = {r[k]!r}, expected {v!r}")
    if not close(r["duration_seconds"], sum(durations)):
        fail(f"{path}: duration_seconds {r['duration_seconds']} != {sum(durations)}")
    if not close(r["hours"], sum(durations) / 3600):
        fail(f"{path}: hours {r['hours']}")
    st = r["duration_stats"]
    for k, v in (("min", min(durations)), ("max", max(durations)),
                 ("mean", sum(durations) / len(durations))):
        if not close(st[k], v):
            fail(f"{path}: duration_stats {k} {st[k]} != {v}")
    h = r["duration_histogram"]
    edges, counts = h["edges"], h["counts"]
    if len(edges) != len(counts) + 1 or sum(counts) != len(exp):
        fail(f"{path}: histogram of {sum(counts)} cuts over {len(edges)} edges")
    if edges != sorted(edges) or edges[0] != 0 or edges[-1] < max(durations):
        fail(f"{path}: histogram edges {edges} do not cover 0..{max(durations)}")
    for i, c in enumerate(counts):
        n = sum(1 for d in durations if edges[i] <= d < edges[i + 1] or (i == len(counts) - 1 and d == edges[-1]))
        if n != c:
            fail(f"{path}: histogram bin [{edges[i]}, {edges[i + 1]}) holds {c} cuts, expected {n}")
    rates, channels = {}, {}
    for e in exp:
        rates[str(e["sampling_rate"])] = rates.get(str(e["sampling_rate"]), 0) + 1
        channels[str(e["channels"])] = channels.get(str(e["channels"]), 0) + 1
    if r["sampling_rates"] != rates or r["channels"] != channels:
        fail(f"{path}: rates {r['sampling_rates']} channels {r['channels']}, expected {rates} {channels}")
    if sum(r["codecs"].values()) != len(exp):
        fail(f"{path}: codecs {r['codecs']} do not count {len(exp)} cuts")
    # Per shard: cuts and seconds from the expected cuts, sizes of the files.
    rows = r["per_shard"]
    if len(rows) != int(n_shards):
        fail(f"{path}: {len(rows)} per-shard rows")
    for i, row in enumerate(rows):
        mine = [e for e in exp if e["shard_index"] == i]
        if row["cuts"] != len(mine) or not close(row["audio_seconds"], sum(e["duration"] for e in mine)):
            fail(f"{path}: shard {i} row {row}, expected {len(mine)} cuts")
        if not row["shard"].endswith(mine[0]["shard"]) or row["problems"] != 0 or row["bytes"] <= 0:
            fail(f"{path}: shard {i} row {row} (expected {mine[0]['shard']})")
    if r["shard_bytes"] != sum(row["bytes"] for row in rows):
        fail(f"{path}: shard_bytes {r['shard_bytes']}")
    # Characters per second: the extremes by cut id.
    cps = {e["id"]: len(e["text"]) / e["duration"] for e in exp if e.get("text")}
    t = r["text"]
    if t["cuts"] != len(cps) or t["chars"] != sum(len(e["text"]) for e in exp if e.get("text")):
        fail(f"{path}: text cuts {t['cuts']} chars {t['chars']}, expected {len(cps)}")
    order = sorted(cps, key=lambda i: (-cps[i], i))
    got = [x["cut_id"] for x in t["highest_chars_per_second"]]
    if got != order[:len(got)] or len(got) != min(10, len(cps)):
        fail(f"{path}: highest chars/s {got}, expected {order[:10]}")
    for x in t["highest_chars_per_second"]:
        if not close(x["value"], cps[x["cut_id"]]):
            fail(f"{path}: chars/s of {x['cut_id']} {x['value']} != {cps[x['cut_id']]}")
    low = sorted(cps, key=lambda i: (cps[i], i))[:10]
    if [x["cut_id"] for x in t["lowest_chars_per_second"]] != low:
        fail(f"{path}: lowest chars/s {t['lowest_chars_per_second']}, expected {low}")
    if sum(t["chars_per_second_histogram"]["counts"]) != len(cps):
        fail(f"{path}: chars/s histogram does not sum to {len(cps)}")
    # Signal: the DC offsets from the generator's sums.
    s = r["signal"]
    n = sum(e["num_samples"] * e["channels"] for e in exp)
    if s["decoded_cuts"] != len(exp) or s["samples"] != n:
        fail(f"{path}: signal over {s['decoded_cuts']} cuts, {s['samples']} samples; expected {n}")
    dc = {e["id"]: abs(e["sample_sum"]) / (e["num_samples"] * e["channels"]) for e in exp}
    top = s["largest_dc_offset"]
    if not top:
        fail(f"{path}: no DC offsets listed")
    near = lambda a, b: abs(a - b) <= 1e-3 * abs(b) + 1e-9
    for x in top:
        if not near(x["value"], dc[x["cut_id"]]):
            fail(f"{path}: DC offset of {x['cut_id']} {x['value']} != {dc[x['cut_id']]}")
    if not near(top[0]["value"], max(dc.values())):
        fail(f"{path}: largest DC offset {top[0]}, expected {max(dc.values())}")
    for k in ("digital_silence_share", "clipping_share"):
        if not 0 <= s[k] <= 1:
            fail(f"{path}: {k} {s[k]}")
    if s["length_mismatch_cuts"] != 0:
        fail(f"{path}: {s['length_mismatch_cuts']} length mismatches in a clean corpus")
    print(f"ok {path}: {len(exp)} cuts, {n_shards} shards, {len(counts)} bins")


def embedded(html):
    text = open(html, encoding="utf-8").read()
    m = re.search(r'<script type="application/json" id="sharc-report">(.*?)</script>', text, re.S)
    if not m:
        fail(f"{html}: no embedded report JSON")
    return json.loads(m.group(1)), text


def check_embedded(html, path):
    got, _ = embedded(html)
    if got != load(path):
        fail(f"{html}: the embedded JSON differs from {path}")
    print(f"ok {html}: embeds {path}")


def check_offline(html):
    text = open(html, encoding="utf-8").read()
    for pat in (r"(?i)\b(src|href|xlink:href|action)\s*=\s*[\"']?\s*(https?:)?//", r"(?i)https?://",
                r"(?i)<link\b", r"(?i)@import", r"(?i)url\(", r"(?i)<script(?![^>]*application/json)"):
        m = re.search(pat, text)
        if m:
            fail(f"{html}: network reference {text[max(0, m.start() - 40):m.end() + 40]!r}")
    print(f"ok {html}: nothing fetched")


def check_damaged(path, shard, member, cut):
    r = load(path)
    probs = r["problems"]
    if r["problem_count"] != len(probs) + r["problems_omitted"] or not probs:
        fail(f"{path}: problem_count {r['problem_count']}, {len(probs)} listed")
    hit = [p for p in probs if p["code"] == "archive" and (p["shard"] or "").endswith(shard)
           and p["member"] == member and p["cut_id"] == cut]
    if len(hit) != 1:
        fail(f"{path}: no archive problem naming {shard} {member} {cut}: {probs}")
    kinds = {k["code"]: k for k in r["problems_by_kind"]}
    by_code = {}
    for p in probs:
        by_code[p["code"]] = by_code.get(p["code"], 0) + 1
    if {c: k["count"] for c, k in kinds.items()} != by_code:
        fail(f"{path}: problems_by_kind {kinds}, counted {by_code}")
    for c, k in kinds.items():
        if k["examples"] != [p for p in probs if p["code"] == c][:3]:
            fail(f"{path}: examples of {c} are not its first problems")
    rows = {row["shard"]: row for row in r["per_shard"]}
    bad = [s for s in rows if s.endswith(shard)]
    if len(bad) != 1 or rows[bad[0]]["problems"] < 1:
        fail(f"{path}: shard {shard} row {[rows[s] for s in bad]}")
    if sum(row["problems"] for row in rows.values()) + r["unattributed_problems"] != r["problem_count"]:
        fail(f"{path}: per-shard problems do not add up to {r['problem_count']}")
    if r["shards_cut_short"] != 1:
        fail(f"{path}: shards_cut_short {r['shards_cut_short']}")
    print(f"ok {path}: {r['problem_count']} problems, {shard} {member} {cut}")


def check_problem_rows(html, path):
    """The page's tables list the problems: by kind with their first examples, and each one."""
    r = load(path)
    text = open(html, encoding="utf-8").read()
    for table, want in (("problem-kinds", sum(len(k["examples"]) for k in r["problems_by_kind"])),
                        ("problem-list", len(r["problems"]))):
        m = re.search(r'<table id="%s"[^>]*>(.*?)</table>' % table, text, re.S)
        rows = re.findall(r"<tr>(.*?)</tr>", m.group(1), re.S) if m else []
        if len(rows) != want + 1:
            fail(f"{html}: {table} has {len(rows) - 1} rows, expected {want}")
        for p in r["problems"][:1]:
            if p["cut_id"] and p["cut_id"] not in m.group(1):
                fail(f"{html}: {table} does not name cut {p['cut_id']}")
    print(f"ok {html}: {len(r['problems'])} problems listed")


def png_pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path}: not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            if depth != 8 or ctype not in (2, 6):
                fail(f"{path}: PNG of depth {depth}, colour type {ctype}")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def check_png(path):
    w, h, bpp, rows = png_pixels(path)
    colors, counts = set(), {}
    for row in rows[::4]:
        for x in range(0, w * bpp, bpp * 4):
            px = row[x:x + 3]
            colors.add(px)
            counts[px] = counts.get(px, 0) + 1
    background = max(counts.values()) / sum(counts.values())
    # The charts' bars are blue: some pixels must be clearly blue.
    blue = sum(n for px, n in counts.items() if px[2] > 180 and px[0] < 120)
    if len(colors) < 20 or background > 0.97 or blue == 0:
        fail(f"{path}: looks blank ({len(colors)} colours, {background:.1%} background, {blue} blue)")
    print(f"ok {path}: {w}x{h}, {len(colors)} colours, {background:.1%} background")


def check_dom(dom, path):
    text = open(dom, encoding="utf-8").read()
    r = load(path)
    for cid in ("chart-duration", "chart-rates", "chart-channels", "chart-codecs", "chart-cps"):
        m = re.search(r'<svg id="%s"[^>]*>(.*?)</svg>' % cid, text, re.S)
        if not m:
            fail(f"{dom}: no chart {cid}")
        bars = len(re.findall(r'<rect class="bar"', m.group(1)))
        want = {"chart-duration": len(r["duration_histogram"]["counts"]),
                "chart-rates": len(r["sampling_rates"]), "chart-channels": len(r["channels"]),
                "chart-codecs": len(r["codecs"]),
                "chart-cps": len(r["text"]["chars_per_second_histogram"]["counts"])}[cid]
        if bars != want:
            fail(f"{dom}: {cid} has {bars} bars, expected {want}")
    m = re.search(r'<table id="shards"[^>]*>(.*?)</table>', text, re.S)
    if not m or len(re.findall(r"<tr>", m.group(1))) != min(len(r["per_shard"]), 500) + 1:
        fail(f"{dom}: the shard table does not list the shards")
    print(f"ok {dom}: charts and tables")


def check_bench(path, out, reps):
    r = load(path)
    result = json.load(open(out))
    if r["result"] != result:
        fail(f"{path}: result differs from the --json output")
    if len(r["timeline"]) != int(reps) or [t["rep"] for t in r["timeline"]] != list(range(int(reps))):
        fail(f"{path}: timeline of {len(r['timeline'])} repetitions, expected {reps}")
    for t in r["timeline"]:
        n = len(t["t"])
        if n < 3 or len(t["rss_bytes"]) != n or t["t"] != sorted(t["t"]) or min(t["rss_bytes"]) <= 0:
            fail(f"{path}: timeline {t}")
        for k in ("interval_t", "batches_per_second", "audio_seconds_per_second"):
            if len(t[k]) != n - 1 or min(t[k]) < 0:
                fail(f"{path}: timeline {k} {t[k]}")
        # The rates integrate back to what was counted between the first and last sample.
        batches = sum(b * (t["t"][i + 1] - t["t"][i]) for i, b in enumerate(t["batches_per_second"]))
        if batches > result["batches"] + 1e-6 or abs(batches - round(batches)) > 1e-6:
            fail(f"{path}: the timeline counts {batches} batches of {result['batches']}")
    m = r["machine"]
    if m["cpus"] < 1 or m["memory_bytes"] <= 0 or not m["hostname"]:
        fail(f"{path}: machine {m}")
    if r["argv"][-1] != result.get("paths", r["argv"][-1]) or "--report-json" not in r["argv"]:
        fail(f"{path}: argv {r['argv']}")
    print(f"ok {path}: {reps} repetitions, {sum(len(t['t']) for t in r['timeline'])} samples")


def check_compare(html, a, b):
    got, text = embedded(html)
    runs = got["runs"]
    if [x["file"] for x in runs] != [a, b]:
        fail(f"{html}: runs {[x['file'] for x in runs]}")
    for x, p in zip(runs, (a, b)):
        x = dict(x)
        del x["file"]
        if x != load(p):
            fail(f"{html}: run {p} differs from its file")
    for cid in ("chart-audio-rate", "chart-batch-rate", "chart-memory", "chart-stages"):
        if f'<svg id="{cid}"' not in text:
            fail(f"{html}: no chart {cid}")
    series = len(re.findall(r'<polyline', text.split('id="chart-audio-rate"')[1].split("</svg>")[0]))
    want = len(load(a)["timeline"]) + len(load(b)["timeline"])
    if series != want:
        fail(f"{html}: {series} throughput lines, expected {want}")
    print(f"ok {html}: {a} and {b} side by side")


CHECKS = {"bench": check_bench, "compare": check_compare, "clean": check_clean, "embedded": check_embedded, "offline": check_offline,
          "damaged": check_damaged, "problem-rows": check_problem_rows, "png": check_png, "dom": check_dom}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in CHECKS:
        fail(f"unknown check {sys.argv[1:2]}")
    CHECKS[sys.argv[1]](*sys.argv[2:])
