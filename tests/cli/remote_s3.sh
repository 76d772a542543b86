#!/bin/sh
# cli_remote_s3: Shar, NeMo and WebDataset corpora in a bucket of a local S3-compatible
# server (moto, tests/remote/s3server.py) that checks the requests' signatures: listed and
# detected as a local directory is, read into the same batches as from disk with the same
# seed, validated, resumed from a state saved mid-epoch; a wrong key is a clear 403; the
# credentials appear in no message, JSON output or saved state.
#
# Needs moto: tools/dev setup installs it into build-moto-venv/ (SHARC_MOTO_PYTHON names the
# interpreter); without it the test is skipped.
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")/.." && pwd)
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
moto=${SHARC_MOTO_PYTHON:-}
if [ -z "$moto" ] || ! "$moto" -c "import moto.server, boto3" 2>/dev/null; then
    echo "moto is not installed (tools/dev setup); skipping"
    exit 77
fi

c=$tmp/c
gen "$c" --layout all --shards 3 --cuts-per-shard 6 --min-duration 0.5 --max-duration 4 --seed 5
gen "$tmp/w" --layout wds --shards 2 --cuts-per-shard 4 --compress none --codec wav --seed 6
"$PYTHON" "$here/remote/nemo_long.py" "$tmp/long" >"$tmp/where" || fail "nemo_long.py"

"$moto" "$here/remote/s3server.py" "$tmp/s3" corpora "shar=$c/shar" "nemo=$c/nemo" \
    "wds=$c/wds" "plain/wds=$tmp/w/wds" "long=$tmp/long" >"$tmp/s3.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
for _ in $(seq 600); do [ -f "$tmp/s3" ] && break; sleep 0.1; done
[ -f "$tmp/s3" ] || fail "the S3 server did not start: $(tail -5 "$tmp/s3.log")"
{
    read -r endpoint
    read -r key_id
    read -r secret
} <"$tmp/s3"
export AWS_ENDPOINT_URL="$endpoint" AWS_ACCESS_KEY_ID="$key_id" AWS_SECRET_ACCESS_KEY="$secret"
export AWS_REGION=us-east-1
unset AWS_SESSION_TOKEN AWS_DEFAULT_REGION

same() {
    "$PYTHON" "$here/remote/samebatches.py" "$@" || fail "batches differ ($*)"
}
no_secrets() {
    for f in "$@"; do
        if grep -qF -e "$secret" -e "$key_id" "$f"; then fail "$f holds the credentials"; fi
    done
}

B="--json --max-duration 8 --num-buckets 2 --seed 3"
for layout in shar nemo wds; do
    for threads in 1 2; do
        expect_rc 0 "$SHARC" read $B --threads $threads "$c/$layout"
        cp "$tmp/out" "$tmp/local"
        expect_rc 0 "$SHARC" read $B --threads $threads "s3://corpora/$layout/"
        same "$tmp/local" "$tmp/out"
        expect_in "$tmp/out" "\"layout\":\"$layout\""
        no_secrets "$tmp/out" "$tmp/err"
    done
done
# Uncompressed tars (WAV), and a brace pattern over object URLs.
expect_rc 0 "$SHARC" read $B "$tmp/w/wds"
cp "$tmp/out" "$tmp/local"
expect_rc 0 "$SHARC" read $B "s3://corpora/plain/wds/shard-00000{0..1}.tar"
same "$tmp/local" "$tmp/out"

# A long WAV recording cut into windows by NeMo rows, in an uncompressed tar: left in the
# object and read by byte range (signed requests too), the same batches as from disk, and
# less fetched than the recording's size.
expect_rc 0 "$SHARC" read $B --threads 2 "$tmp/long"
cp "$tmp/out" "$tmp/local"
expect_rc 0 "$SHARC" read $B --threads 2 "s3://corpora/long/"
same "$tmp/local" "$tmp/out"
expect_in "$tmp/out" '"long-sub2.wav"'
expect_rc 0 "$SHARC" bench --json --warmup 0 --threads 1 "s3://corpora/long/"
"$PYTHON" - "$tmp/out" "$tmp/where" <<'PY' || fail "bench network over S3"
import json, sys
net = json.load(open(sys.argv[1]))["network"]
size = json.load(open(sys.argv[2]))["size"]
assert 0 < net["bytes"] < size, (net, size)
PY

# A NeMo prefix lists sharded_manifests/ too; another subdirectory is said to be ignored.
expect_rc 0 "$SHARC" validate --json "s3://corpora/nemo/"
expect_rc 1 "$SHARC" validate --verbose "s3://corpora/"
expect_in "$tmp/err" "ignoring directory s3://corpora/wds/: shards are read from the directories given"
expect_in "$tmp/out" "no shards found in s3://corpora/"

# A state saved mid-epoch over S3 resumes into the batches an uninterrupted run gives.
expect_rc 0 "$SHARC" read $B --epochs 2 --threads 2 "s3://corpora/shar/"
cp "$tmp/out" "$tmp/whole"
expect_rc 0 "$SHARC" read $B --epochs 2 --threads 2 --save-state-at 3 "$tmp/state" --limit 4 \
    "s3://corpora/shar/"
no_secrets "$tmp/state"
expect_rc 0 "$SHARC" read $B --epochs 2 --threads 1 --resume "$tmp/state" "s3://corpora/shar/"
same "$tmp/whole" "$tmp/out" --from-step 4

# Wrong credentials: a 403 that says so, and never the key.
expect_rc 1 env AWS_SECRET_ACCESS_KEY=not-the-secret-1 "$SHARC" read --json "s3://corpora/wds/"
expect_in "$tmp/err" "sharc read: cannot open the dataset: cannot list s3://corpora/wds/: HTTP 403 (SignatureDoesNotMatch): access denied: check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN and AWS_REGION, and the object's permissions"
no_secrets "$tmp/out" "$tmp/err"
if grep -q "not-the-secret-1" "$tmp/out" "$tmp/err"; then fail "the wrong secret was printed"; fi
expect_rc 1 env AWS_ACCESS_KEY_ID=AKIAWRONGKEY0000 "$SHARC" read "s3://corpora/wds/shard-000000.tar.gz"
expect_in "$tmp/err" "sharc: error: s3://corpora/wds/shard-000000.tar.gz: cannot start reading the archive: HTTP 403 (InvalidAccessKeyId): access denied"
if grep -q "AKIAWRONGKEY0000" "$tmp/err"; then fail "the key id was printed"; fi
expect_rc 1 "$SHARC" read "s3://corpora/wds/shard-000009.tar.gz"
expect_in "$tmp/err" "sharc: error: s3://corpora/wds/shard-000009.tar.gz: cannot start reading the archive: HTTP 404 (NoSuchKey): no such object or bucket"
expect_rc 1 "$SHARC" read "s3://no-such-bucket/wds/"
expect_in "$tmp/err" "cannot list s3://no-such-bucket/wds/: HTTP 404 (NoSuchBucket): no such object or bucket"
expect_rc 1 "$SHARC" read "s3://corpora/empty/"
expect_in "$tmp/err" "no shards found in s3://corpora/empty/"
echo ok
