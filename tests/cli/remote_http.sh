#!/bin/sh
# cli_remote_http: shards over HTTP from a local server that injects faults
# (tests/remote/faultserver.py), and from commands (pipe:). A connection reset or stalled
# mid-body, 503s, a wrong Content-Length, a reset under weak or long (400-character) ETags,
# a redirect: retried and resumed (or followed), the batches identical to those of the same
# shards read from disk; an object whose weak ETag changed between two answers fails; a
# signed request is never redirected. A body always cut short, endless 503s, 403 and 404: an
# error naming the URL, never a hang. A command that fails, is killed or stops early: an
# error naming the command and its status, or a truncated shard.
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")/.." && pwd)
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY

c=$tmp/c
gen "$c" --layout all --shards 3 --cuts-per-shard 6 --min-duration 0.5 --max-duration 4 --seed 5

"$PYTHON" "$here/remote/faultserver.py" "$c" "$tmp/port" --log "$tmp/log" &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
for _ in $(seq 100); do [ -f "$tmp/port" ] && break; sleep 0.1; done
[ -f "$tmp/port" ] || fail "the fault server did not start"
url=http://127.0.0.1:$(cat "$tmp/port")

same() {
    "$PYTHON" "$here/remote/samebatches.py" "$@" || fail "batches differ ($*)"
}

B="--json --max-duration 8 --num-buckets 2 --seed 3 --threads 2 --timeout-ms 700"
expect_rc 0 "$SHARC" read $B "$c/wds/shard-00000{0..2}.tar.gz"
cp "$tmp/out" "$tmp/wds.local"
expect_rc 0 "$SHARC" read $B "$c/shar"
cp "$tmp/out" "$tmp/shar.local"

# Faults that retries and resumption (Range) get over: nothing lost, nothing repeated.
for mode in ok reset stall 503 biglen smalllen longetag; do
    expect_rc 0 "$SHARC" read $B "$url/$mode/wds/shard-00000{0..2}.tar.gz"
    same "$tmp/wds.local" "$tmp/out"
done
# Weak ETags (W/"..."), which If-Match never matches: a reset shard is resumed all the same,
# the answer's ETag compared with the first instead; one that changed is an error, no splice.
expect_rc 0 "$SHARC" read $B "$url/weakreset/wds/shard-00000{0..2}.tar.gz"
same "$tmp/wds.local" "$tmp/out"
expect_rc 1 "$SHARC" read --retries 2 "$url/weakchange/wds/shard-000001.tar.gz"
expect_in "$tmp/err" "sharc: error: $url/weakchange/wds/shard-000001.tar.gz: member '"
expect_in "$tmp/err" "the object changed while it was being read (its ETag W/\"$(stat -c %s "$c/wds/shard-000001.tar.gz")-"
expect_in "$tmp/err" " is now W/\"changed\")"
# Shar's JSON-lines files and tars, from brace patterns over URLs.
expect_rc 0 "$SHARC" read $B "$url/reset/shar/cuts.00000{0..2}.jsonl.gz" \
    "$url/reset/shar/recording.00000{0..2}.tar.gz" "$url/reset/shar/lang_id.00000{0..2}.jsonl.gz"
same "$tmp/shar.local" "$tmp/out"
expect_rc 0 "$SHARC" validate "$url/stall/wds/shard-000001.tar.gz"

# sharc bench reports what the network cost: a shard reset once on the way, one retry.
one=shard-000001.tar.gz
expect_rc 0 "$SHARC" bench --json --warmup 0 --threads 1 "$url/flaky/wds/$one"
"$PYTHON" - "$tmp/out" "$(wc -c <"$c/wds/$one")" <<'PY' || fail "bench network"
import json, sys
net = json.load(open(sys.argv[1]))["network"]
size = int(sys.argv[2])
assert net["retries"] == 1, net
assert size <= net["bytes"] < 2 * size, (net, size)
assert net["wait_seconds"] > 0, net
PY

# An S3 listing in pages of two keys (the fault server's ListObjectsV2), unsigned, read
# through a reset: every page and every shard once.
expect_rc 0 env AWS_ENDPOINT_URL="$url/reset-list" AWS_ACCESS_KEY_ID= AWS_SECRET_ACCESS_KEY= \
    "$SHARC" read $B "s3://wds/"
same "$tmp/wds.local" "$tmp/out"
expect_rc 0 env AWS_ENDPOINT_URL="$url/ok" "$SHARC" read $B "s3://shar"
same "$tmp/shar.local" "$tmp/out"

# A redirect to another host (127.0.0.2): followed for a URL, which carries no credentials;
# never for a signed S3 request (an object or a listing), whose session token libcurl would
# send along: the 307 is the error, and no credential reaches the other host.
expect_rc 0 "$SHARC" read $B "$url/redirect/wds/shard-00000{0..2}.tar.gz"
same "$tmp/wds.local" "$tmp/out"
grep -q "^ok wds/shard-000001.tar.gz bytes=0- [0-9]* [0-9]* 127.0.0.2 -$" "$tmp/log" ||
    fail "the redirect was not followed: $(tail -3 "$tmp/log")"
S3KEYS="AWS_ACCESS_KEY_ID=AKIDREDIRECT0 AWS_SECRET_ACCESS_KEY=redirect-secret-1 AWS_SESSION_TOKEN=redirect-token-1"
expect_rc 1 env AWS_ENDPOINT_URL="$url/redirect-s3" $S3KEYS "$SHARC" read "s3://wds/$one"
expect_in "$tmp/err" "sharc: error: s3://wds/$one: cannot start reading the archive: HTTP 307: a redirect, not followed for a signed request so that its credentials stay with AWS_ENDPOINT_URL (or the region's endpoint): check AWS_REGION and AWS_ENDPOINT_URL"
expect_rc 1 env AWS_ENDPOINT_URL="$url/redirect-s3" $S3KEYS "$SHARC" read "s3://wds/"
expect_in "$tmp/err" "cannot list s3://wds/: HTTP 307: a redirect, not followed"
grep -q "^redirect-s3 wds.* 127.0.0.1 Authorization,X-Amz-Security-Token$" "$tmp/log" ||
    fail "no signed request came to the endpoint: $(tail -3 "$tmp/log")"
if grep -q " 127.0.0.2 [^-]" "$tmp/log"; then
    fail "a credential went to another host: $(grep " 127.0.0.2 [^-]" "$tmp/log" | head -3)"
fi
if grep -q -e "redirect-token-1" -e "redirect-secret-1" "$tmp/err" "$tmp/out"; then
    fail "a credential was printed"
fi

# Presigned URLs: the layout and names come from the URL's path; the query (a signature, a
# credential) goes with every request and nowhere else: messages, logs, JSON output and
# saved states show the URL with "?…". A state resumes with the URLs signed again.
q="X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDPRESIGNED%2F20261205%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Expires=600&X-Amz-Signature"
no_query() {
    if grep -q -e "presigned-secret" -e "AKIDPRESIGNED" "$@"; then fail "a query string was shown: $(grep -h "presigned-secret" "$@" | head -3)"; fi
}
expect_rc 0 "$SHARC" read $B --verbose "$url/presigned/wds/shard-00000{0..2}.tar.gz?$q=presigned-secret-1"
same "$tmp/wds.local" "$tmp/out"
no_query "$tmp/out" "$tmp/err"
expect_rc 0 "$SHARC" read $B "$url/presigned/shar/cuts.00000{0..2}.jsonl.gz?$q=presigned-secret-1" \
    "$url/presigned/shar/recording.00000{0..2}.tar.gz?$q=presigned-secret-1" \
    "$url/presigned/shar/lang_id.00000{0..2}.jsonl.gz?$q=presigned-secret-1"
same "$tmp/shar.local" "$tmp/out"
expect_rc 0 "$SHARC" read $B --save-state-at 1 "$tmp/state" --limit 2 \
    "$url/presigned/wds/shard-00000{0..2}.tar.gz?$q=presigned-secret-1"
no_query "$tmp/out" "$tmp/err" "$tmp/state"
expect_rc 0 "$SHARC" read $B --resume "$tmp/state" "$url/presigned/wds/shard-00000{0..2}.tar.gz?$q=presigned-secret-2"
same "$tmp/wds.local" "$tmp/out" --from-step 2
expect_rc 1 "$SHARC" validate --json "$url/presigned/wds/$one?$q=expired-presigned-secret-3"
expect_in "$tmp/out" "\"shard\":\"$url/presigned/wds/$one?…\""
no_query "$tmp/out" "$tmp/err"
expect_rc 1 "$SHARC" read --json "$url/presigned/wds/$one?$q=expired-presigned-secret-3"
expect_in "$tmp/err" "sharc: error: $url/presigned/wds/$one?…: cannot start reading the archive: HTTP 403 (AccessDenied): access denied"
no_query "$tmp/out" "$tmp/err"
expect_rc 1 "$SHARC" read "$url/presigned/wds/download?file=$one&$q=presigned-secret-1"
expect_in "$tmp/err" "no shards found in $url/presigned/wds/download?… (expected"
no_query "$tmp/out" "$tmp/err"

# A whole archive, then a server that trickles a byte every 0.2 s (within timeout_ms) and
# never ends: the shard is read on for 2 s at most after the archive's end, not held open.
expect_rc 0 timeout 60 "$SHARC" read --json "$url/trickle/wds/$one"
expect_in "$tmp/out" '"cuts":6,'
expect_rc 0 timeout 60 "$SHARC" read --json "$url/trickle/shar/cuts.000000.jsonl.gz" "$url/trickle/shar/recording.000000.tar.gz"
expect_in "$tmp/out" '"cuts":6,'

# A listing whose continuation tokens cycle (A, B, A ...): an error once a token comes again,
# not a listing forever.
expect_rc 1 timeout 60 env AWS_ENDPOINT_URL="$url/cycle" "$SHARC" read "s3://wds/"
expect_in "$tmp/err" "sharc read: cannot open the dataset: cannot list s3://wds/: the server gave the continuation token of an earlier page again (after 3 pages): its listing would never end"

# Faults that outlast the retries, or are final: the URL, what happened, the retries made.
one=shard-000001.tar.gz
expect_rc 1 "$SHARC" read --retries 2 "$url/always503/wds/$one"
expect_in "$tmp/err" "sharc: error: $url/always503/wds/$one: cannot start reading the archive: HTTP 503 (SlowDown): service unavailable (slow down) (after 2 retries)"
expect_rc 1 "$SHARC" read --retries 2 "$url/truncate/wds/$one"
expect_in "$tmp/err" "sharc: error: $url/truncate/wds/$one: member '"
expect_in "$tmp/err" "bytes remaining to read (after 3000 bytes) (after 2 retries)"
expect_rc 1 "$SHARC" read "$url/403/wds/$one"
expect_in "$tmp/err" "sharc: error: $url/403/wds/$one: cannot start reading the archive: HTTP 403 (AccessDenied): access denied: check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN and AWS_REGION, and the object's permissions"
expect_rc 1 "$SHARC" read --json "$url/404/wds/$one"
expect_in "$tmp/err" "sharc: error: $url/404/wds/$one: cannot start reading the archive: HTTP 404 (NoSuchKey): no such object or bucket"
expect_rc 1 "$SHARC" read "http://127.0.0.1:1/wds/$one" --retries 1
expect_in "$tmp/err" "sharc: error: http://127.0.0.1:1/wds/$one: cannot start reading the archive: Failed to connect to 127.0.0.1 port 1"
expect_in "$tmp/err" "(after 1 retries)"
# A stall is cut at timeout_ms and retried; with no retries left it is the error.
expect_rc 1 "$SHARC" read --retries 0 --timeout-ms 300 "$url/stallall/wds/$one"
expect_in "$tmp/err" "sharc: error: $url/stallall/wds/$one: member '"
expect_in "$tmp/err" "no data for 300 ms (timeout_ms) (after 0 retries)"
expect_rc 1 "$SHARC" read --retries 2 --timeout-ms 300 "$url/stallall/wds/$one"
expect_in "$tmp/err" "no data for 300 ms (timeout_ms) (after 2 retries)"

# Credentials in a URL are refused, and not repeated.
expect_rc 1 "$SHARC" read --json "http://someone:pw-SECRET-1@127.0.0.1:1/wds/$one"
expect_in "$tmp/err" "http://***@127.0.0.1:1/wds/$one: a URL with a user name or password is refused"
if grep -q "pw-SECRET-1" "$tmp/err" "$tmp/out"; then fail "a password in a URL was printed"; fi

# pipe:COMMAND: its standard output is the shard.
expect_rc 0 "$SHARC" read $B "pipe:cat $c/wds/shard-00000{0..2}.tar.gz"
same "$tmp/wds.local" "$tmp/out"
f=$c/wds/shard-000000.tar.gz
expect_rc 1 "$SHARC" read "pipe:sh -c 'cat \"\$0\"; exit 3' $f"
expect_in "$tmp/err" "sharc: error: pipe:sh -c 'cat \"\$0\"; exit 3' $f: at the end of the gzip data, after the tar's last member: the command exited with status 3"
expect_rc 1 "$SHARC" read "pipe:cat $f; kill -9 \$\$ # shard-000000.tar.gz"
expect_in "$tmp/err" "the command was killed by signal 9 (SIGKILL)"
expect_rc 1 "$SHARC" read "pipe:head -c 30000 $f"
expect_in "$tmp/err" "sharc: error: pipe:head -c 30000 $f: member '"
expect_in "$tmp/err" "truncated gzip input"
# A command whose shard is not read to its end is stopped when sharc is done with it; one
# that lingers, or writes on, after a whole archive is waited for only so long.
expect_rc 0 "$SHARC" read --cuts --limit 1 "pipe:cat $c/wds/shard-00000{0..2}.tar.gz; sleep 100 # shard-00000{0..2}.tar.gz"
expect_rc 0 "$SHARC" read --timeout-ms 500 "pipe:cat $f; sleep 100 # shard-000000.tar.gz"
expect_in "$tmp/out" "6 cuts"
expect_rc 0 "$SHARC" read "pipe:cat $f /dev/zero # shard-000000.tar.gz"
expect_in "$tmp/out" "6 cuts"
echo ok
