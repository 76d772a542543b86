#!/bin/sh
# cli_remote_range: members left in a remote uncompressed tar and read with ranged requests
# (io/tar.h, sharc__tar_set_ranged). A NeMo shard over HTTP whose long WAV recording is cut
# into windows by offset/duration rows (tests/remote/nemo_long.py): the batches equal those
# of the same shard read from disk, the stream skips the recording with a new request past
# it, and each window is fetched by its own byte range, so the server sends less than the
# recording's size. A reset during a ranged read is retried and resumed; an object replaced
# between two ranged reads (412, or another ETag) and a 404 are errors that name the URL,
# the byte range, the member and the cut.
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")/.." && pwd)
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY

"$PYTHON" "$here/remote/nemo_long.py" "$tmp/c/n" >"$tmp/where" || fail "nemo_long.py"
"$PYTHON" "$here/remote/faultserver.py" "$tmp/c" "$tmp/port" --log "$tmp/log" &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
for _ in $(seq 100); do [ -f "$tmp/port" ] && break; sleep 0.1; done
[ -f "$tmp/port" ] || fail "the fault server did not start"
url=http://127.0.0.1:$(cat "$tmp/port")

same() {
    "$PYTHON" "$here/remote/samebatches.py" "$@" || fail "batches differ ($*)"
}
# ranges MODE THREADS: what the server was asked for audio_0.tar and sent, against what a
# reader that leaves long.wav in the shard asks for: the stream from 0, the stream again
# from the member after long.wav, long.wav's header (4096 bytes, once per fetching thread
# at most) and each window's samples (16 kHz mono PCM16 after its 44-byte header), once.
ranges() {
    "$PYTHON" - "$tmp/log" "$tmp/where" "$1" "$2" <<'PY' || fail "ranges asked for ($1)"
import json, sys
log, where, mode, threads = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3], int(sys.argv[4])
at, size, nxt = where["at"], where["size"], where["next"]
asked = [l.split() for l in open(log) if l.startswith(mode + " n/audio_0.tar ")]
rng = [a[2] for a in asked]
data = at + 44
windows = [(12.5, 3.0), (600.25, 2.5), (1195.0, 4.0)]
want = [f"bytes={data + int(o * 16000) * 2}-{data + int((o + d) * 16000) * 2 - 1}"
        for o, d in windows]
head = f"bytes={at}-{at + 4095}"
assert rng.count("bytes=0-") == 1, rng
assert rng.count(f"bytes={nxt}-") == 1, rng
assert 1 <= rng.count(head) <= threads + 1, rng
for w in want:
    assert rng.count(w) == 1, (w, rng)
assert sorted(set(rng)) == sorted(set(["bytes=0-", f"bytes={nxt}-", head] + want)), rng
sent = sum(int(a[3]) for a in asked)
assert sent < size, f"{sent} bytes sent for a {size}-byte member"
# A thread's ranged reads share its connection.
ports = {a[4] for a in asked if a[2] in want}
assert len(ports) <= threads, (ports, asked)
PY
}

B="--json --max-duration 30 --num-buckets 2 --seed 3"
for threads in 1 2; do
    expect_rc 0 "$SHARC" read $B --threads $threads "$tmp/c/n/audio_0.tar" "$tmp/c/n/manifest_0.json"
    cp "$tmp/out" "$tmp/local"
    : >"$tmp/log"
    expect_rc 0 "$SHARC" read $B --threads $threads "$url/ok/n/audio_0.tar" \
        "$url/ok/n/manifest_0.json"
    same "$tmp/local" "$tmp/out"
    expect_in "$tmp/out" '"long-sub2.wav"'
    ranges ok $threads
done

# Weak ETags (W/"..."), which If-Match never matches: the restarted stream and the ranged
# reads compare their answers' ETags instead, and read the same as over strong ones.
: >"$tmp/log"
expect_rc 0 "$SHARC" read $B --threads 2 "$url/weakok/n/audio_0.tar" "$url/weakok/n/manifest_0.json"
same "$tmp/local" "$tmp/out"
ranges weakok 2

# A presigned URL (the server refuses a request without its query): the stream, its restart
# and every ranged read carry the query, which no message or output shows.
: >"$tmp/log"
expect_rc 0 "$SHARC" read $B --threads 2 "$url/presigned/n/audio_0.tar?X-Amz-Signature=range-secret-1" \
    "$url/presigned/n/manifest_0.json?X-Amz-Signature=range-secret-1"
same "$tmp/local" "$tmp/out"
ranges presigned 2
if grep -q "range-secret" "$tmp/out" "$tmp/err"; then fail "a query string was shown"; fi

# A reset halfway through the first ranged read (the header): retried from the byte the
# reset stopped at, nothing lost.
: >"$tmp/log"
expect_rc 0 "$SHARC" read $B --threads 1 "$url/rangereset/n/audio_0.tar" \
    "$url/rangereset/n/manifest_0.json"
same "$tmp/local" "$tmp/out"
"$PYTHON" - "$tmp/log" "$tmp/where" <<'PY' || fail "the reset ranged read was not resumed"
import json, sys
at = json.load(open(sys.argv[2]))["at"]
asked = [l.split() for l in open(sys.argv[1]) if " n/audio_0.tar bytes=" in l]
closed = [a for a in asked if not a[2].endswith("-")]
assert closed[0][2:4] == [f"bytes={at}-{at + 4095}", "2048"], closed
# The retry asks for the rest of the range: from the first byte not received.
first, last = map(int, closed[1][2][6:].split("-"))
assert at <= first <= at + 2048 and last == at + 4095, closed
assert int(closed[1][3]) == last + 1 - first, closed
PY

# The object replaced between two ranged reads of one thread: 412 on the If-Match of the
# ETag its first read saw. Replaced before a thread's first read: the ETag differs from
# the stream's. Either way the member's bytes are not taken from another object.
u="$url/replaced2/n/audio_0.tar"
expect_rc 1 "$SHARC" read $B --threads 1 "$u" "$url/replaced2/n/manifest_0.json"
expect_in "$tmp/err" "sharc: error: $u member long.wav (cut long-sub3.wav): $u: bytes 38273324-38401323: HTTP 412 (PreconditionFailed): the object changed while it was being read"
u="$url/replaced1/n/audio_0.tar"
expect_rc 1 "$SHARC" read $B --threads 1 "$u" "$url/replaced1/n/manifest_0.json"
expect_in "$tmp/err" "sharc: error: $u member long.wav (cut long-sub3.wav): $u: bytes 33280-37375: the object changed after its headers were read (its ETag is now \"replaced\"), so its members are no longer where they were"
# Gone (404) when its member is read: at once, naming the range, member and cut.
u="$url/range404/n/audio_0.tar"
expect_rc 1 "$SHARC" read $B --threads 1 --retries 3 "$u" "$url/range404/n/manifest_0.json"
expect_in "$tmp/err" "sharc: error: $u member long.wav (cut long-sub1.wav): $u: bytes 33280-37375: HTTP 404 (NoSuchKey): no such object or bucket"
