#!/usr/bin/env python3
"""Make damaged copies of shards for the reader and CLI tests.

Usage: corrupt.py OP FILE ARGS...
  truncate FILE N            keep the first N bytes (N < 0: drop the last -N bytes)
  flip FILE OFFSET           invert the byte at OFFSET (negative: from the end)
  tar-cut TAR MEMBER WHERE   cut an uncompressed tar short in MEMBER's data (WHERE: mid) or
                             right after it (WHERE: end), as a writer that stopped leaves it
  tar-replace TAR MEMBER DATA   replace a member's bytes (DATA: text, or @garbage:N)
  tar-drop TAR MEMBER        remove a member
  tar-add TAR NAME DATA      append a member
  tar-rename TAR OLD NEW     rename a member
  tar-huge TAR NAME SIZE     append a header that declares SIZE bytes, with a tiny body
  wav-comment TAR MEMBER WHERE N   give a WAV member a LIST/INFO comment of N bytes of text,
                             before or after its data chunk (WHERE: before | after); the
                             samples stay the same
  audio-edit TAR MEMBER HOW  damage an audio member so that only its decoding can tell:
                             wav-short:N (drop its last N bytes: shorter than its data chunk),
                             wav-data-size:N (write N as its data chunk's size),
                             wav-float:I:VALUE (the same samples as a float32 WAV, sample I
                             set to VALUE: nan, inf or -inf), ogg-last-page (flip a byte of
                             its last Ogg page: that page fails its CRC), flac-no-length
                             (STREAMINFO's total sample count 0: unknown, as the format allows)
  lines-swap FILE I J        swap lines I and J (0-based)
  lines-drop FILE I          remove line I
  lines-set FILE I TEXT      replace line I
  lines-key FILE I KEY TEXT  set KEY of the JSON object on line I to the string TEXT
  lines-json FILE I KEY JSON set KEY of the JSON object on line I to the value JSON
Compression (gzip, zstd) is detected from the bytes and kept.
"""
import gzip
import io
import json
import os
import struct
import subprocess
import sys
import tarfile


def read_any(path):
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        return gzip.decompress(raw), "gzip"
    if raw[:4] == b"\x28\xb5\x2f\xfd":
        return subprocess.run(["zstd", "-dc"], input=raw, capture_output=True, check=True).stdout, "zstd"
    return raw, None


def write_any(path, data, comp):
    if comp == "gzip":
        data = gzip.compress(data, mtime=0)
    elif comp == "zstd":
        data = subprocess.run(["zstd", "-c", "-q"], input=data, capture_output=True, check=True).stdout
    open(path, "wb").write(data)


def payload(spec):
    if spec.startswith("@garbage:"):
        n = int(spec.split(":")[1])
        return bytes((i * 131 + 7) % 256 for i in range(n))
    if spec.startswith("@flac-garbage:"):
        n = int(spec.split(":")[1])
        return b"fLaC" + bytes((i * 131 + 7) % 256 for i in range(n))
    return spec.encode()


def rewrite_tar(path, edit):
    raw, comp = read_any(path)
    src = tarfile.open(fileobj=io.BytesIO(raw), mode="r:")
    members = [(m, src.extractfile(m).read() if m.isfile() else None) for m in src.getmembers()]
    members = edit(members)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:", format=tarfile.PAX_FORMAT) as dst:
        for m, data in members:
            if data is not None:
                m.size = len(data)
                dst.addfile(m, io.BytesIO(data))
            else:
                dst.addfile(m)
    write_any(path, out.getvalue(), comp)


def wav_comment(wav, where, n):
    """`wav` with a LIST chunk holding an INFO ICMT comment of `n` bytes (n even), placed
    before or after its data chunk; RIFF size updated."""
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE" and n % 2 == 0, wav[:12]
    text = bytes(65 + i % 26 for i in range(n - 1)) + b"\0"
    icmt = b"ICMT" + len(text).to_bytes(4, "little") + text
    chunk = b"LIST" + (4 + len(icmt)).to_bytes(4, "little") + b"INFO" + icmt
    at = 12
    while wav[at:at + 4] != b"data":
        at += 8 + int.from_bytes(wav[at + 4:at + 8], "little")
        at += at % 2
    if where == "after":
        at += 8 + int.from_bytes(wav[at + 4:at + 8], "little")
        at += at % 2
    out = wav[:at] + chunk + wav[at:]
    return out[:4] + (len(out) - 8).to_bytes(4, "little") + out[8:]


def wav_chunks(wav):
    """(id, offset of the size field, body offset, size) of each chunk of a RIFF WAVE."""
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE", wav[:12]
    pos, out = 12, []
    while pos + 8 <= len(wav):
        cid, size = wav[pos:pos + 4], struct.unpack("<I", wav[pos + 4:pos + 8])[0]
        out.append((cid, pos + 4, pos + 8, size))
        pos += 8 + size + (size & 1)
    return out


def wav_as_float(wav, index, value):
    """The PCM16 WAV `wav` as float32, with sample `index` set to `value`."""
    chunks = {c[0]: c for c in wav_chunks(wav)}
    _, _, fmt_at, _ = chunks[b"fmt "]
    channels, rate = struct.unpack("<HI", wav[fmt_at + 2:fmt_at + 8])
    _, _, data_at, size = chunks[b"data"]
    pcm = struct.unpack("<%dh" % (size // 2), wav[data_at:data_at + size])
    samples = [s / 32768.0 for s in pcm]
    samples[index] = float(value)
    body = struct.pack("<%df" % len(samples), *samples)
    fmt = struct.pack("<HHIIHH", 3, channels, rate, rate * 4 * channels, 4 * channels, 32)
    riff = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + \
        struct.pack("<I", len(body)) + body
    return b"RIFF" + struct.pack("<I", len(riff)) + riff


def audio_edit(data, how):
    kind, _, arg = how.partition(":")
    if kind == "wav-short":
        return data[:len(data) - int(arg)]
    if kind == "wav-data-size":
        _, size_at, _, _ = [c for c in wav_chunks(data) if c[0] == b"data"][0]
        return data[:size_at] + struct.pack("<I", int(arg)) + data[size_at + 4:]
    if kind == "wav-float":
        index, value = arg.split(":")
        return wav_as_float(data, int(index), value)
    if kind == "ogg-last-page":
        at = data.rfind(b"OggS")
        body = at + 27 + data[at + 26]  # after the header and its segment table
        assert body < len(data), "the last page has no payload"
        return data[:body] + bytes([data[body] ^ 0x55]) + data[body + 1:]
    if kind == "flac-no-length":
        assert data[:4] == b"fLaC" and data[4] & 0x7F == 0, "no STREAMINFO first"
        b = bytearray(data)
        b[8 + 13] &= 0xF0  # the 36-bit count: the low nibble of byte 13 and bytes 14..17
        b[8 + 14:8 + 18] = b"\0\0\0\0"
        return bytes(b)
    sys.exit("unknown audio edit " + how)


def info(name, size):
    ti = tarfile.TarInfo(name)
    ti.size = size
    ti.mode = 0o644
    return ti


def main(argv):
    op, path, args = argv[1], argv[2], argv[3:]
    if op == "truncate":
        data = open(path, "rb").read()
        n = int(args[0])
        open(path, "wb").write(data[:n] if n >= 0 else data[:n])
    elif op == "flip":
        data = bytearray(open(path, "rb").read())
        data[int(args[0])] ^= 0xFF
        open(path, "wb").write(bytes(data))
    elif op == "tar-cut":
        with tarfile.open(path) as t:
            m = t.getmember(args[0])
        os.truncate(path, m.offset_data + (m.size // 2 if args[1] == "mid" else m.size))
    elif op == "tar-replace":
        rewrite_tar(path, lambda ms: [(m, payload(args[1]) if m.name == args[0] else d) for m, d in ms])
    elif op == "tar-drop":
        rewrite_tar(path, lambda ms: [(m, d) for m, d in ms if m.name != args[0]])
    elif op == "tar-add":
        rewrite_tar(path, lambda ms: ms + [(info(args[0], 0), payload(args[1]))])
    elif op == "tar-rename":
        def ren(ms):
            for m, _ in ms:
                if m.name == args[0]:
                    m.name = args[1]
            return ms
        rewrite_tar(path, ren)
    elif op == "tar-huge":
        raw, comp = read_any(path)
        end = len(raw)
        while end >= 512 and raw[end - 512:end] == b"\0" * 512:
            end -= 512
        ti = info(args[0], int(args[1]))
        header = ti.tobuf(format=tarfile.GNU_FORMAT)
        write_any(path, raw[:end] + header + b"tiny" + b"\0" * 508, comp)
    elif op == "wav-comment":
        rewrite_tar(path, lambda ms: [(m, wav_comment(d, args[1], int(args[2]))
                                       if m.name == args[0] else d) for m, d in ms])
    elif op == "audio-edit":
        rewrite_tar(path, lambda ms: [(m, audio_edit(d, args[1]) if m.name == args[0] else d)
                                      for m, d in ms])
    elif op.startswith("lines-"):
        data, comp = read_any(path)
        lines = data.decode().splitlines()
        i = int(args[0])
        if op == "lines-swap":
            j = int(args[1])
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "lines-drop":
            del lines[i]
        elif op == "lines-set":
            lines[i] = args[1]
        elif op == "lines-key":
            obj = json.loads(lines[i])
            obj[args[1]] = args[2]
            lines[i] = json.dumps(obj)
        elif op == "lines-json":
            obj = json.loads(lines[i])
            obj[args[1]] = json.loads(args[2])
            lines[i] = json.dumps(obj)
        write_any(path, ("\n".join(lines) + "\n").encode(), comp)
    else:
        sys.exit("unknown op " + op)


if __name__ == "__main__":
    main(sys.argv)
