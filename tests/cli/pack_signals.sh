#!/bin/sh
# cli_pack_signals: `sharc pack` stopped by SIGTERM, SIGHUP or SIGINT in the middle of writing
# leaves --out as it found it (absent, or empty; NeMo's sharded_manifests/ removed too), says
# so on stderr and ends by that signal (a shell shows 128 + signal); a re-run into the same
# --out then succeeds. Files are written under hidden temporary names and renamed only when
# the whole run is done.
. "$(dirname "$0")/lib.sh"

# 1500 cuts of one 100 kB WAV of noise, gzip'd: seconds of writing to interrupt.
"$PYTHON" - "$tmp" <<'PY'
import os, random, struct, sys, wave
tmp = sys.argv[1]
random.seed(3)
with wave.open(os.path.join(tmp, "noise.wav"), "wb") as w:
    w.setnchannels(1)
    w.setsampwidth(2)
    w.setframerate(16000)
    w.writeframes(bytes(random.getrandbits(8) for _ in range(100000)))
with open(os.path.join(tmp, "big.jsonl"), "w") as f:
    for i in range(1500):
        f.write('{"audio_filepath": "noise.wav", "id": "cut%04d", "text": "t"}\n' % i)
with open(os.path.join(tmp, "small.jsonl"), "w") as f:
    f.write('{"audio_filepath": "noise.wav", "id": "one", "text": "t"}\n')
PY

# interrupt SIGNAL OUT LAYOUT: start a pack of big.jsonl into OUT, send SIGNAL once more than
# 1 MB is written there, and check what is left.
interrupt() {
    "$PYTHON" - "$SHARC" "$tmp" "$@" <<'PY'
import os, signal, subprocess, sys, time
sharc, tmp, name, out, layout = sys.argv[1:6]
sig = getattr(signal, name)
existed = os.path.isdir(out)

def written():
    total = 0
    for root, _, files in os.walk(out):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total

# The signal's default action, whatever this test was started with (a shell without job
# control starts background jobs with SIGINT ignored).
p = subprocess.Popen([sharc, "pack", "--manifest", os.path.join(tmp, "big.jsonl"), "--out", out,
                      "--layout", layout, "--compress", "gzip", "--cuts-per-shard", "100"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL))
deadline = time.monotonic() + 120
while written() < 1 << 20:
    if p.poll() is not None or time.monotonic() > deadline:
        p.kill()
        sys.exit(f"FAIL: pack ended (or stalled) before writing 1 MB: {p.communicate()[1]!r}")
    time.sleep(0.005)
p.send_signal(sig)
_, err = p.communicate(timeout=120)
err = err.decode()
if p.returncode != -sig:
    sys.exit(f"FAIL: {name}: pack exited with {p.returncode}, not by the signal; stderr: {err!r}")
lines = err.splitlines()
if lines[:1] != [f"sharc pack: interrupted by {name}"]:
    sys.exit(f"FAIL: {name}: stderr {err!r}")
if len(lines) != 2 or not lines[1].startswith("sharc pack: removed the ") or \
        not lines[1].endswith(f" files written to {out}"):
    sys.exit(f"FAIL: {name}: stderr {err!r}")
if existed:
    left = os.listdir(out)
    if left:
        sys.exit(f"FAIL: {name}: {out} was empty and now holds {left}")
elif os.path.exists(out):
    sys.exit(f"FAIL: {name}: {out} did not exist and now holds {os.listdir(out)}")
PY
}

interrupt SIGTERM "$tmp/term" shar
interrupt SIGHUP "$tmp/hup" nemo
mkdir "$tmp/int"
interrupt SIGINT "$tmp/int" shar
mkdir "$tmp/int-nemo"
interrupt SIGTERM "$tmp/int-nemo" nemo

# The folder is as it was: a re-run writes into it.
for d in term hup int int-nemo; do
    layout=shar
    case $d in hup | int-nemo) layout=nemo ;; esac
    expect_rc 0 "$SHARC" pack --manifest "$tmp/small.jsonl" --out "$tmp/$d" --layout "$layout"
    expect_in "$tmp/out" "-- packed 1 cuts"
done
[ "$(ls -A "$tmp/int")" = "$(printf 'cuts.000000.jsonl.gz\nrecording.000000.tar')" ] ||
    fail "a complete run left $(ls -A "$tmp/int")"
[ "$(ls -A "$tmp/hup" "$tmp/hup/sharded_manifests" | tr '\n' ' ')" = \
    "$tmp/hup: audio_0.tar sharded_manifests tarred_audio_manifest.json  $tmp/hup/sharded_manifests: manifest_0.json " ] ||
    fail "a complete NeMo run left $(ls -AR "$tmp/hup")"

# A signal that was ignored when pack started (nohup) stays ignored: the run completes.
"$PYTHON" - "$SHARC" "$tmp" <<'PY'
import os, signal, subprocess, sys, time
sharc, tmp = sys.argv[1:3]
out = os.path.join(tmp, "nohup")
p = subprocess.Popen([sharc, "pack", "--manifest", os.path.join(tmp, "big.jsonl"), "--out", out,
                      "--cuts-per-shard", "500", "--quiet"],
                     preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
while not os.path.isdir(out) or not os.listdir(out):
    if p.poll() is not None:
        break
    time.sleep(0.005)
p.send_signal(signal.SIGHUP)
if p.wait(timeout=300) != 0:
    sys.exit(f"FAIL: an ignored SIGHUP ended pack ({p.returncode})")
names = sorted(os.listdir(out))
if names != ["cuts.000000.jsonl.gz", "cuts.000001.jsonl.gz", "cuts.000002.jsonl.gz",
             "recording.000000.tar", "recording.000001.tar", "recording.000002.tar"]:
    sys.exit(f"FAIL: the run under nohup left {names}")
PY
echo "ok"
