"""sharc.Reader(tokenizer=...): token ids in every batch, equal to Python sentencepiece's."""
import pytest

import sharc
from conftest import expected

np = pytest.importorskip("numpy")
spm = pytest.importorskip("sentencepiece")

def check_batches(reader, encode):
    rows = 0
    for b in reader:
        assert {"tokens", "token_lens"} <= set(b)
        tokens, lens = np.from_dlpack(b["tokens"]), np.from_dlpack(b["token_lens"])
        assert tokens.dtype == np.int32 and lens.dtype == np.int32
        for i, (text, lang) in enumerate(zip(b["text"], b["language"])):
            assert tokens[i, : lens[i]].tolist() == encode(text, lang)
            assert (tokens[i, lens[i]:] == 0).all()
            rows += 1
    return rows


def test_one_model(corpus, models):
    sp = spm.SentencePieceProcessor(model_file=models["en"])
    with sharc.Reader(str(corpus / "shar"), batch_duration=12.0, tokenizer=models["en"]) as r:
        assert check_batches(r, lambda text, lang: sp.encode_as_ids(text)) == 12


def test_aggregate_tokenizer_as_a_dict(corpus, models):
    sps = {k: spm.SentencePieceProcessor(model_file=v) for k, v in models.items()}
    offsets = {"en": 0, "de": 70, "pl": 160}
    with sharc.Reader(str(corpus / "shar"), batch_duration=12.0, tokenizer=models) as r:
        assert check_batches(r, lambda text, lang: [x + offsets[lang] for x in sps[lang].encode_as_ids(text)]) == 12


def test_bad_model_is_named(corpus, tmp_path):
    bad = tmp_path / "bad.model"
    bad.write_text("not a model")
    with pytest.raises(sharc.Error, match="cannot load the SentencePiece model .*bad.model"):
        sharc.Reader(str(corpus / "shar"), tokenizer=str(bad))


def test_nemo_2d_bins_and_token_filters(corpus, models):
    """A Canary-style config: 2D bins, one batch size and one max_tps per bin."""
    sp = spm.SentencePieceProcessor(model_file=models["en"])
    bins = [[2.0, 30], [2.0, 60], [4.0, 40], [4.0, 80]]
    sizes, caps = [2, 3, 2, 3], [40.0, 40.0, 20.0, 20.0]
    with sharc.Reader(str(corpus / "shar"), tokenizer=models["en"], bins=bins, bucket_batch_size=sizes,
                      max_tps=caps, min_tokens=2) as r:
        rows = 0
        for b in r:
            lens = np.from_dlpack(b["token_lens"]).tolist()
            durs = np.from_dlpack(b["duration"]).tolist()
            fits = set()
            for n, d in zip(lens, durs):
                group = [i for i, (bd, _) in enumerate(bins) if bd == min(x for x, _ in bins if x >= d)]
                k = next(i for i in group if bins[i][1] >= n)
                assert n >= 2 and n / d <= caps[k]
                fits.add(k)
            assert len(fits) == 1 and len(lens) <= sizes[fits.pop()]
            rows += len(lens)
        assert rows + r.stats()["filtered_cuts"] == 12 and r.stats()["filtered_cuts"] > 0
        # Each filtered cut under the first filter it fails, as NeMo's filters and strict
        # find_smallest_bucket: min_tokens, then no bucket, or over its bucket's max_tps.
        want = dict.fromkeys(("min_duration", "max_cut_duration", "min_tokens", "max_tokens", "min_tps",
                              "max_tps", "no_bucket"), 0)
        for e in expected(corpus, "shar"):
            n, d = len(sp.encode_as_ids(e["text"])), e["duration"]
            fit = [i for i, (bd, bt) in enumerate(bins)
                   if bd == min((x for x, _ in bins if x >= d), default=None) and bt >= n]
            if n < 2:
                want["min_tokens"] += 1
            elif not fit:
                want["no_bucket"] += 1
            elif n / d > caps[fit[0]]:
                want["max_tps"] += 1
        assert r.stats()["filtered"] == want and sum(want.values()) == r.stats()["filtered_cuts"], want


def test_batches_by_audio_tokens(corpus):
    """NeMo's multimodal sampling: cuts of ceil(d / 0.08) audio tokens, at most 400 per batch."""
    with sharc.Reader(str(corpus / "shar"), token_equivalent_duration=0.08, batch_tokens=400, num_buckets=2) as r:
        n = 0
        for b in r:
            lens = [-(-d // 0.08) for d in np.from_dlpack(b["duration"]).astype(np.float64).tolist()]
            assert len(lens) * max(lens[:-1] or [0]) <= 400 or len(lens) == 1
            n += len(lens)
        assert n == 12
    with pytest.raises(sharc.Error, match="batch_tokens needs token_equivalent_duration"):
        sharc.Reader(str(corpus / "shar"), batch_tokens=400)
