#!/usr/bin/env python3
"""An independent NumPy model of NeMo's FilterbankFeatures, to check sharc's CPU features.

Nothing here comes from sharc's C code: the mel filters are built from the Slaney formulas
(librosa.filters.mel with htk=False, norm="slaney", which NeMo calls), the STFT follows
torch.stft(center=True, pad_mode="constant") with torch.hann_window(window, periodic=False)
centred in the n_fft frame, and the rest follows FilterbankFeatures.forward and
normalize_batch (per_feature) of nemo/collections/asr/parts/preprocessing/features.py.
Everything is computed in float64; the filters are rounded to float32 as librosa returns them.

  fbank_ref.py check DIR [--n-mels N] [--pad-to P] [--tol T]
      compare every DIR/step<k>.features.npy that `sharc read --features fbank --dump-dir DIR`
      wrote with the model computed from the batch's audio and audio_lens: shapes, lengths
      exact, padding exactly 0, max abs error <= T (1e-4) on the valid frames
  fbank_ref.py make-nemo SHAR_WAV_DIR OUT_DIR [--broken]
      write a NeMo tarred dataset (audio_0.tar, manifest_0.json) of PCM16 WAV clips of edge
      lengths (1 sample, under a window, exactly a hop, odd lengths, ...) cut from the speech
      of a Lhotse Shar folder with WAV recordings (testdata/lhotse-shar-edge/wav)
"""
import argparse
import glob
import io
import json
import math
import os
import re
import sys
import tarfile
import wave

import numpy as np

LOG_GUARD = 2.0 ** -24
STD_GUARD = 1e-5


def hz_to_mel(f):
    """Slaney's mel scale: linear below 1 kHz (200/3 Hz per mel), logarithmic above."""
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, math.log(6.4) / 27.0
    f = np.asarray(f, dtype=np.float64)
    return np.where(f >= min_log_hz, min_log_mel + np.log(np.maximum(f, 1e-300) / min_log_hz) / logstep,
                    f / f_sp)


def mel_to_hz(m):
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, math.log(6.4) / 27.0
    m = np.asarray(m, dtype=np.float64)
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), f_sp * m)


def mel_filters(sr, n_fft, n_mels):
    """Triangles between n_mels + 2 points evenly spaced in mel from 0 to sr/2, each scaled
    by 2 / (its width in Hz) (Slaney normalisation: equal area)."""
    freqs = np.arange(n_fft // 2 + 1, dtype=np.float64) * sr / n_fft
    pts = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2.0), n_mels + 2))
    fb = np.zeros((n_mels, freqs.size))
    for m in range(n_mels):
        rise = (freqs - pts[m]) / (pts[m + 1] - pts[m])
        fall = (pts[m + 2] - freqs) / (pts[m + 2] - pts[m + 1])
        fb[m] = np.maximum(0.0, np.minimum(rise, fall)) * 2.0 / (pts[m + 2] - pts[m])
    return fb.astype(np.float32).astype(np.float64)


def valid_frames(n, hop, n_fft=512):
    """NeMo's get_seq_len for center=True: (n + 2 * (n_fft // 2) - n_fft) // hop (NeMo 2.x;
    NeMo 1.x added 1), a length of 0 kept at 0. The STFT has T // hop + 1 frames; those from
    here on are masked."""
    return 0 if n == 0 else (n + 2 * (n_fft // 2) - n_fft) // hop


def features(audio, lens, sr=16000, window=400, hop=160, n_fft=512, n_mels=80, preemph=0.97,
             pad_to=16):
    """audio float [B, T], lens [B] -> (features float64 [B, n_mels, frames], lens [B])."""
    B, T = audio.shape
    x = audio.astype(np.float64)
    y = np.concatenate([x[:, :1], x[:, 1:] - preemph * x[:, :-1]], axis=1) if T else x.copy()
    y[np.arange(T)[None, :] >= lens[:, None]] = 0.0
    win = np.zeros(n_fft)
    n = np.arange(window)
    left = (n_fft - window) // 2
    win[left:left + window] = 0.5 - 0.5 * np.cos(2 * np.pi * n / (window - 1)) if window > 1 else 1.0
    yp = np.pad(y, ((0, 0), (n_fft // 2, n_fft // 2)))
    n_frames = T // hop + 1
    idx = np.arange(n_frames)[:, None] * hop + np.arange(n_fft)[None, :]
    spec = np.fft.rfft(yp[:, idx] * win, axis=-1)               # [B, frames, bins]
    power = spec.real ** 2 + spec.imag ** 2
    mel = np.einsum("mk,btk->bmt", mel_filters(sr, n_fft, n_mels), power)
    logmel = np.log(mel + LOG_GUARD)
    out_lens = np.array([valid_frames(int(v), hop, n_fft) for v in lens], dtype=np.int64)
    out = np.zeros_like(logmel)
    for b in range(B):
        nv = out_lens[b]
        if nv == 0:
            continue
        v = logmel[b, :, :nv]
        mean = v.mean(axis=1, keepdims=True)
        std = v.std(axis=1, ddof=1, keepdims=True) if nv > 1 else np.zeros_like(mean)
        out[b, :, :nv] = (v - mean) / (std + STD_GUARD)
    if pad_to > 1 and n_frames % pad_to:
        out = np.pad(out, ((0, 0), (0, 0), (0, pad_to - n_frames % pad_to)))
    return out, out_lens


def check(args):
    steps = sorted(glob.glob(os.path.join(args.dir, "step*.features.npy")))
    if not steps:
        print(f"fbank_ref: no step*.features.npy in {args.dir}", file=sys.stderr)
        return 1
    worst, rows, failures = 0.0, 0, []
    for path in steps:
        step = re.search(r"step(\d+)\.features\.npy$", path).group(1)
        base = os.path.join(args.dir, f"step{step}.")
        got = np.load(path)
        got_lens = np.load(base + "feature_lens.npy")
        audio = np.load(base + "audio.npy")
        lens = np.load(base + "audio_lens.npy")
        want, want_lens = features(audio, lens, n_mels=args.n_mels, pad_to=args.pad_to)
        if got.dtype != np.float32 or got_lens.dtype != np.int32:
            failures.append(f"step {step}: dtypes {got.dtype}, {got_lens.dtype}")
            continue
        if got.shape != want.shape:
            failures.append(f"step {step}: shape {got.shape}, expected {want.shape}")
            continue
        if not np.array_equal(got_lens, want_lens):
            failures.append(f"step {step}: feature_lens {got_lens.tolist()}, "
                            f"expected {want_lens.tolist()}")
            continue
        for b in range(got.shape[0]):
            nv = want_lens[b]
            pad = got[b, :, nv:]
            if np.any(pad != 0) or np.any(np.signbit(pad)):
                failures.append(f"step {step} row {b}: a frame past {nv} is not exactly 0")
            err = float(np.max(np.abs(got[b, :, :nv] - want[b, :, :nv]))) if nv else 0.0
            if not np.all(np.isfinite(got[b])) or err > args.tol:
                failures.append(f"step {step} row {b} ({lens[b]} samples): max abs error "
                                f"{err:.3g} > {args.tol:g}")
            worst = max(worst, err)
            rows += 1
    for f in failures:
        print("fbank_ref: " + f, file=sys.stderr)
    print(f"fbank_ref: {len(steps)} batches, {rows} rows, max abs error {worst:.3g}")
    return 1 if failures else 0


EDGE_LENGTHS = [1, 2, 100, 159, 160, 161, 255, 256, 257, 399, 400, 401, 479, 480, 481, 511, 512,
                513, 1599, 3201, 16000, 16001, 24001]


def read_wav(data):
    with wave.open(io.BytesIO(data)) as w:
        assert w.getsampwidth() == 2, "PCM16 expected"
        x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").reshape(-1, w.getnchannels())
        return x[:, 0].copy(), w.getframerate()


def wav_bytes(x, sr):
    b = io.BytesIO()
    with wave.open(b, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sr)
        w.writeframes(x.astype("<i2").tobytes())
    return b.getvalue()


def make_nemo(args):
    speech = []
    for tar_path in sorted(glob.glob(os.path.join(args.src, "recording.*.tar"))):
        with tarfile.open(tar_path) as t:
            for m in t.getmembers():
                if m.name.endswith(".wav"):
                    x, sr = read_wav(t.extractfile(m).read())
                    speech.append(x)
    if not speech:
        print(f"fbank_ref: no WAV recordings in {args.src}", file=sys.stderr)
        return 1
    allx = np.concatenate(speech)
    os.makedirs(args.out, exist_ok=True)
    rows = []
    with tarfile.open(os.path.join(args.out, "audio_0.tar"), "w", format=tarfile.USTAR_FORMAT) as t:
        clips = [(f"edge-{n:05d}.wav", allx[(7919 * i) % (allx.size - n):][:n])
                 for i, n in enumerate(EDGE_LENGTHS)]
        clips.append(("silence-00800.wav", np.zeros(800, dtype=np.int16)))
        clips.append(("speech-whole.wav", speech[0]))
        if args.broken:
            clips.insert(5, ("broken-01000.wav", None))
        for name, x in clips:
            # A member that is not audio at all, for runs under the skip policy.
            data = b"RIFF\x10\x00\x00\x00WAVEjunk" + bytes(64) if x is None else wav_bytes(x, 16000)
            x = np.zeros(1000, dtype=np.int16) if x is None else x
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            t.addfile(info, io.BytesIO(data))
            rows.append({"audio_filepath": name, "duration": x.size / 16000.0, "text": name,
                         "shard_id": 0})
    with open(os.path.join(args.out, "manifest_0.json"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(f"fbank_ref: {len(rows)} clips in {args.out}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("dir")
    c.add_argument("--n-mels", type=int, default=80)
    c.add_argument("--pad-to", type=int, default=16)
    c.add_argument("--tol", type=float, default=1e-4)
    m = sub.add_parser("make-nemo")
    m.add_argument("src")
    m.add_argument("out")
    m.add_argument("--broken", action="store_true",
                   help="add an undecodable member, broken-01000.wav, among the clips")
    args = ap.parse_args()
    return check(args) if args.cmd == "check" else make_nemo(args)


if __name__ == "__main__":
    sys.exit(main())
