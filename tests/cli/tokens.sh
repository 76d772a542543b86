#!/bin/sh
# cli_tokens: --tokenizer over generated corpora. Models are trained here with spm_train on
# tests/data/tokenizer_text.txt (English, German, Polish); every row of every batch must hold
# Python sentencepiece's encode_as_ids of its transcript, padded with the model's pad id
# (tokens_check.py): one model, and one per language (NeMo's AggregateTokenizer, ids offset
# by the models before). The same batches and tokens for 1 and 2 threads, and after a
# resume; errors name the model file, the language without a model and the cut whose
# transcript is not UTF-8.
. "$(dirname "$0")/lib.sh"

need_spm "sentencepiece, numpy"
here=$(cd "$(dirname "$0")" && pwd)
text=$here/../data/tokenizer_text.txt
spm_model pad 100 --pad_id=3 --unk_id=0 --bos_id=1 --eos_id=2
spm_model en 70
spm_model de 90
spm_model pl 110

gen "$tmp/c" --layout all --shards 3 --cuts-per-shard 6 --min-duration 0.5 --max-duration 4 \
    --seed 5
B="--max-duration 10 --num-buckets 2 --buffer-size 5 --seed 3"

# One model, pad id 3, on every layout.
for layout in shar nemo wds; do
    rm -rf "$tmp/d"
    expect_rc 0 "$SHARC" read --quiet $B --tokenizer "$tmp/pad.model" --dump-dir "$tmp/d" \
        "$tmp/c/$layout"
    rows=$("$py" "$here/tokens_check.py" "$tmp/d" 3 "$tmp/pad.model")
    [ "$rows" = 18 ] || fail "$layout: $rows rows checked, not 18"
done

# One model per language: ids offset by 70 (de) and 160 (pl); no pad id, so 0.
rm -rf "$tmp/d"
agg="--tokenizer en=$tmp/en.model --tokenizer de=$tmp/de.model --tokenizer pl=$tmp/pl.model"
expect_rc 0 "$SHARC" read --quiet $B $agg --dump-dir "$tmp/d" "$tmp/c/shar"
rows=$("$py" "$here/tokens_check.py" "$tmp/d" 0 en="$tmp/en.model" de="$tmp/de.model" \
    pl="$tmp/pl.model")
[ "$rows" = 18 ] || fail "aggregate: $rows rows checked, not 18"

# The same batches and tokens whatever the threads; a resume gives the rest of them.
expect_rc 0 "$SHARC" read --json --json-tokens $B $agg --threads 1 "$tmp/c/shar"
grep '"type":"batch"' "$tmp/out" >"$tmp/t1"
expect_in "$tmp/t1" '"tokens":[['
expect_rc 0 "$SHARC" read --json --json-tokens $B $agg --threads 2 "$tmp/c/shar"
grep '"type":"batch"' "$tmp/out" >"$tmp/t2"
cmp -s "$tmp/t1" "$tmp/t2" || fail "1 and 2 threads give other tokens"
expect_rc 0 "$SHARC" read --json --json-tokens $B $agg --threads 2 --save-state-at 1 "$tmp/s" \
    "$tmp/c/shar"
expect_rc 0 "$SHARC" read --json --json-tokens $B $agg --threads 2 --resume "$tmp/s" \
    "$tmp/c/shar"
grep '"type":"batch"' "$tmp/out" >"$tmp/r"
tail -n +3 "$tmp/t1" >"$tmp/t1rest"
[ -s "$tmp/r" ] || fail "the resumed run gave no batch"
cmp -s "$tmp/t1rest" "$tmp/r" || fail "the resumed run's tokens differ from steps 2..."

# Models whose pieces stop at word starts are encoded word by word, through a cache (unigram
# ones where a word's best split wins by a safe margin): the same ids as Python's
# encode_as_ids of the whole transcript, whatever its spacing, script or repeats. Models
# where that does not hold (pieces across words, no dummy prefix) are encoded whole, and give
# Python's ids too.
spm_model bpe 150 --model_type=bpe
spm_model bpe_across 150 --model_type=bpe --split_by_whitespace=false
spm_model bpe_noprefix 150 --model_type=bpe --add_dummy_prefix=false
mkdir "$tmp/ws"
"$py" - "$tmp/ws/shard-000000.tar" "$here" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from wds_texts import write
texts = ["the quick brown fox", "  the   quick  brown fox  ", "the\tquick\nbrown fox",
         "the\u00a0quick\u3000brown fox", "caf\u00e9 cafe\u0301 \u0301tail",
         "\u0141\u00f3d\u017a \u00fcber stra\u00dfe", "\u4f60\u597d \u4e16\u754c x",
         "the quick brown fox", "a" * 70 + " the " + "b" * 70, "\U0001f600 smile \ufb01le",
         " ", "the the the the quick quick"]
write(sys.argv[1], ((f"c{k:02d}", t.encode()) for k, t in enumerate(texts)))
PY
for m in bpe:0 bpe_across:0 bpe_noprefix:0 en:0 pad:3; do
    pad=${m#*:}
    m=${m%:*}
    rm -rf "$tmp/d"
    expect_rc 0 "$SHARC" read --quiet --max-cuts 4 --tokenizer "$tmp/$m.model" \
        --dump-dir "$tmp/d" "$tmp/ws"
    rows=$("$py" "$here/tokens_check.py" "$tmp/d" "$pad" "$tmp/$m.model")
    [ "$rows" = 12 ] || fail "$m: $rows rows checked, not 12"
done

# And over 1000 random transcripts of the shipped text's words (some reversed, so that
# rarer splits come up), each word met many times.
mkdir "$tmp/rw"
"$py" - "$tmp/rw/shard-000000.tar" "$text" "$here" <<'PY'
import random, sys
sys.path.insert(0, sys.argv[3])
from wds_texts import write
words = open(sys.argv[2], encoding="utf-8").read().split()
rnd = random.Random(3)
write(sys.argv[1], ((f"c{k:04d}", " ".join(rnd.choice(words)[:: 1 if rnd.random() > 0.05 else -1]
                                          for _ in range(rnd.randint(1, 60))).encode())
                    for k in range(1000)))
PY
for m in bpe:0 en:0 pad:3; do
    pad=${m#*:}
    m=${m%:*}
    rm -rf "$tmp/d"
    expect_rc 0 "$SHARC" read --quiet --max-cuts 100 --tokenizer "$tmp/$m.model" \
        --dump-dir "$tmp/d" "$tmp/rw"
    rows=$("$py" "$here/tokens_check.py" "$tmp/d" "$pad" "$tmp/$m.model")
    [ "$rows" = 1000 ] || fail "$m, random texts: $rows rows checked, not 1000"
done

# Token filters and NeMo's 2D buckets: every batch inside one bucket and within its size,
# exactly the cuts that pass out, the rest counted, each under the filter it failed first
# (tokens_buckets.py, NeMo's algorithm).
buckets() { # buckets NAME SETTINGS_JSON SHARC_OPTIONS...
    name=$1
    cfg=$2
    shift 2
    expect_rc 0 "$SHARC" read --json --json-tokens --seed 3 --buffer-size 5 \
        --tokenizer "$tmp/pad.model" "$@" "$tmp/c/shar"
    cp "$tmp/out" "$tmp/$name.jsonl"
    n=$("$py" "$here/tokens_buckets.py" "$tmp/c/shar.expected.jsonl" "$tmp/$name.jsonl" "$cfg" \
        "$tmp/pad.model") || fail "$name: $n"
    echo "$n"
}
bins='[[1.5,20],[1.5,35],[3,25],[3,37],[4,30],[4,44]]'
n=$(buckets filters '{"min_tokens":10,"max_tokens":42,"min_tps":5,"max_tps":30}' \
    --max-duration 10 --min-tokens 10 --max-tokens 42 --min-tps 5 --max-tps 30)
[ "$n" = "9 min_tokens=2 max_tokens=2 min_tps=3 max_tps=2" ] ||
    fail "token filters: $n cuts filtered, not 9 (2, 2, 3, 2)"
cfg='{"min_duration":1,"max_cut_duration":3.5,"min_tokens":10,"max_tokens":42,"min_tps":5,"max_tps":30}'
n=$(buckets durations "$cfg" --max-duration 10 --min-duration 1 --max-cut-duration 3.5 \
    --min-tokens 10 --max-tokens 42 --min-tps 5 --max-tps 30)
[ "$n" = "10 min_duration=2 max_cut_duration=2 min_tokens=1 max_tokens=2 min_tps=2 max_tps=1" ] ||
    fail "duration and token filters: $n cuts filtered, not 10 (2, 2, 1, 2, 2, 1)"
n=$(buckets 2d "{\"bins\":$bins,\"bbs\":[2,2,3,2,2,3]}" --bins "$bins" \
    --bucket-batch-size 2,2,3,2,2,3)
[ "$n" = "4 no_bucket=4" ] || fail "2D buckets: $n cuts filtered, not 4 (no_bucket)"
n=$(buckets 2d-tps "{\"bins\":$bins,\"bbs\":[2,2,3,2,2,3],\"max_tps\":[20,20,15,9,10,12]}" \
    --bins "$bins" --bucket-batch-size 2,2,3,2,2,3 --max-tps 20,20,15,9,10,12)
[ "$n" = "8 max_tps=4 no_bucket=4" ] ||
    fail "2D buckets with max_tps per bucket: $n cuts filtered, not 8 (max_tps 4, no_bucket 4)"
# The 2D sampler resumes: steps 2... of an uninterrupted run.
B2="--seed 3 --buffer-size 5 --tokenizer $tmp/pad.model --bins $bins --bucket-batch-size 2,2,3,2,2,3"
expect_rc 0 "$SHARC" read --json --json-tokens $B2 --threads 2 --save-state-at 1 "$tmp/s2" \
    "$tmp/c/shar"
expect_rc 0 "$SHARC" read --json --json-tokens $B2 --resume "$tmp/s2" "$tmp/c/shar"
grep '"type":"batch"' "$tmp/out" >"$tmp/r2"
grep '"type":"batch"' "$tmp/2d.jsonl" | tail -n +3 >"$tmp/2drest"
[ -s "$tmp/r2" ] || fail "the resumed 2D run gave no batch"
cmp -s "$tmp/2drest" "$tmp/r2" || fail "the resumed 2D run differs from steps 2..."
# Its counters, filtered cuts by reason included, end where the uninterrupted run's do.
"$py" -c '
import json, sys
a, b = ([o["reader"] for o in map(json.loads, open(f)) if o["type"] == "summary"][0] for f in sys.argv[1:])
assert (a["filtered_cuts"], a["filtered"]) == (b["filtered_cuts"], b["filtered"]), (a, b)
assert b["filtered"]["no_bucket"] == 4, b' "$tmp/out" "$tmp/2d.jsonl" || fail "resumed counters"
# NeMo's multimodal sampling: cuts measured in audio tokens, batches capped in them.
expect_rc 0 "$SHARC" read --json --token-equivalent-duration 0.08 --batch-tokens 120 \
    --num-buckets 3 --quadratic-duration 50 --seed 3 --buffer-size 8 "$tmp/c/shar"
out=$("$py" "$here/multimodal_check.py" "$tmp/c/shar.expected.jsonl" "$tmp/out" 0.08 120 50) ||
    fail "multimodal sampling: $out"
case $out in "18 ["*) ;; *) fail "multimodal sampling: $out" ;; esac
expect_rc 1 "$SHARC" read --quiet --batch-tokens 120 "$tmp/c/shar"
expect_in "$tmp/err" "batch_tokens needs token_equivalent_duration"
# sharc bench takes the same 2D bins, for timing them against 1D ones.
expect_rc 0 "$SHARC" bench --json --quiet --batches 2 --warmup 0 $B2 "$tmp/c/shar"
expect_in "$tmp/out" '"batches":2,'
# Settings that cannot work are refused at open, naming them.
expect_rc 1 "$SHARC" read --quiet --tokenizer "$tmp/pad.model" --bins '[[2,30],[2,20]]' \
    --bucket-batch-size 2,2 "$tmp/c/shar"
expect_in "$tmp/err" "2D bins must be sorted by duration, then tokens: bin 1 [2, 20] comes after [2, 30]"
expect_rc 1 "$SHARC" read --quiet --bins '[[2,30],[4,20]]' --bucket-batch-size 2,2 "$tmp/c/shar"
expect_in "$tmp/err" "need a tokenizer"
expect_rc 1 "$SHARC" read --quiet --tokenizer "$tmp/pad.model" --bins '[[2,30],[4,20]]' \
    --max-tps 3,4,5 --bucket-batch-size 2,2 "$tmp/c/shar"
expect_in "$tmp/err" "max_tps has 3 values: one, or one per 2D bin (2)"
expect_rc 2 "$SHARC" read --quiet --tokenizer "$tmp/pad.model" --bins '[[2,30],[4,20]]' \
    --bucket-batch-size 2,2,2 "$tmp/c/shar"
expect_in "$tmp/err" "--bucket-batch-size has 3 numbers but --bins 2"

# sharc buckets --tokenizer: NeMo's 2D bins and max_tps, as nemo_bins_2d.py (the script's
# algorithm with numpy) computes them, over 300 cuts, with and without outliers left out.
gen "$tmp/big" --layout shar --shards 3 --cuts-per-shard 100 --min-duration 0.3 \
    --max-duration 3 --codec wav --compress none --seed 7
for cfg in "5 3 1.5" "10 2 4" "4 4 0.5" "30 5 4"; do
    set -- $cfg
    expect_rc 0 "$SHARC" buckets --tokenizer "$tmp/pad.model" --num-buckets "$1" \
        --num-subbuckets "$2" --token-outlier-threshold "$3" "$tmp/big/shar"
    sed -n 's/^\t\(bucket_duration_bins=\|max_tps=\)/\1/p' "$tmp/out" >"$tmp/got"
    "$py" "$here/nemo_bins_2d.py" "$tmp/big/shar.expected.jsonl" "$tmp/pad.model" "$1" "$2" \
        "$3" >"$tmp/want"
    cmp -s "$tmp/got" "$tmp/want" || fail "buckets $cfg: $(cat "$tmp/got") != $(cat "$tmp/want")"
done
expect_rc 0 "$SHARC" buckets --json --tokenizer "$tmp/pad.model" --num-buckets 30 \
    --num-subbuckets 5 "$tmp/big/shar"
"$py" -c 'import json, sys
o = json.load(open(sys.argv[1]))
want = dict(l.strip().split("=", 1) for l in open(sys.argv[2]))
assert o["bucket_duration_bins"] == json.loads(want["bucket_duration_bins"]), o
assert o["max_tps"] == json.loads(want["max_tps"]) and o["cuts"] == 300, o' "$tmp/out" \
    "$tmp/want" || fail "buckets --json: $(cat "$tmp/out")"

# Errors: a model that is missing or is not one, a language without a model.
expect_rc 1 "$SHARC" read --quiet --tokenizer "$tmp/missing.model" "$tmp/c/shar"
expect_in "$tmp/err" "cannot load the SentencePiece model $tmp/missing.model"
expect_rc 1 "$SHARC" read --quiet --tokenizer "$text" "$tmp/c/shar"
expect_in "$tmp/err" "cannot load the SentencePiece model $text"
expect_rc 1 "$SHARC" read --quiet --tokenizer en="$tmp/en.model" --tokenizer "$tmp/de.model" \
    "$tmp/c/shar"
expect_in "$tmp/err" "with several models each is LANG=PATH"
expect_rc 1 "$SHARC" read --quiet $B --tokenizer en="$tmp/en.model" \
    --tokenizer de="$tmp/de.model" "$tmp/c/shar"
expect_in "$tmp/err" "has no tokenizer model"
expect_in "$tmp/err" "(cut spk"
grep -q "its language 'pl' has no tokenizer model" "$tmp/err" ||
    fail "the error does not name language pl: $(cat "$tmp/err")"

# A WebDataset transcript that is not UTF-8: the cut is named, and skipped under skip.
mkdir "$tmp/w"
"$py" - "$tmp/w/shard-000000.tar" "$here" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from wds_texts import write
write(sys.argv[1], (("good", b"hello world"), ("bad", b"caf\xe9 au lait")))
PY
expect_rc 1 "$SHARC" read --quiet --max-cuts 2 --tokenizer "$tmp/pad.model" "$tmp/w"
expect_in "$tmp/err" "(cut bad)"
expect_in "$tmp/err" "its transcript is not valid UTF-8 (at byte 3)"
expect_rc 0 "$SHARC" read --json --json-tokens --max-cuts 2 --on-error skip \
    --tokenizer "$tmp/pad.model" "$tmp/w"
expect_in "$tmp/out" '"ids":["good"]'
expect_in "$tmp/out" '"skipped_cuts":1'
# A row dropped under skip (a NaN sample, found while decoding) takes its tokens along, and
# the rest are narrowed to their longest (tokens_check.py checks L = the longest row).
mkdir "$tmp/n"
"$py" - "$tmp/n/shard-000000.tar" "$here" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from wds_texts import wav, write
write(sys.argv[1], (("a", b"hello world", wav(1, 16, [1] * 1600)),
                    ("b", b"the quick brown fox jumps over the lazy dog",
                     wav(3, 32, [0.1] * 4000 + [float("nan")] + [0.1] * 4000)),
                    ("c", b"brown fox", wav(1, 16, [1] * 3200))))
PY
rm -rf "$tmp/d"
expect_rc 0 "$SHARC" read --quiet --max-cuts 3 --on-error skip --tokenizer "$tmp/pad.model" \
    --dump-dir "$tmp/d" "$tmp/n"
expect_in "$tmp/out" "non_finite 1"
rows=$("$py" "$here/tokens_check.py" "$tmp/d" 3 "$tmp/pad.model")
[ "$rows" = 2 ] || fail "skip: $rows rows checked, not 2"
echo "ok"
