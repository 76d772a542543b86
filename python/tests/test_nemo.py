"""sharc.nemo: NeMo train_ds configs (FastConformer, Canary) in, NeMo's ASR batches out, without NeMo."""
import itertools
import json
import os
import re
import warnings

import pytest

import sharc

torch = pytest.importorskip("torch", reason="sharc.nemo hands out torch tensors")
spm = pytest.importorskip("sentencepiece")
import sharc.nemo as nemo  # noqa: E402

ROOT = os.environ.get("SHARC_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
ALL_KEYS = os.path.join(os.path.dirname(__file__), "data", "nemo_lhotse_config_all_keys.json")


class SentencePieceTokenizer:
    """The attributes of NeMo's SentencePieceTokenizer that sharc.nemo reads (NeMo is not installed)."""

    def __init__(self, path):
        self.tokenizer = spm.SentencePieceProcessor(model_file=path)


class TokenizerWrapper:
    """NeMo's TokenizerWrapper, which its datasets hold (dataset.tokenizer)."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer


class LhotseSpeechToTextBpeDataset:
    def __init__(self, tokenizer):
        self.tokenizer = TokenizerWrapper(tokenizer)
        self.return_cuts = False


class AggregateTokenizer:
    """NeMo's AggregateTokenizer: per-language tokenizers, ids offset in this order."""

    def __init__(self, tokenizers):
        self.tokenizers_dict = tokenizers


class DictConfig:
    """An OmegaConf-like read-only mapping (not a dict) with list-like values (not lists)."""

    def __init__(self, d):
        self._d = d

    def keys(self):
        return self._d.keys()

    def __getitem__(self, k):
        v = self._d[k]
        return DictConfig(v) if isinstance(v, dict) else ListConfig(v) if isinstance(v, list) else v


class ListConfig:
    def __init__(self, items):
        self._items = items

    def __len__(self):
        return len(self._items)

    def __iter__(self):
        for v in self._items:
            yield ListConfig(v) if isinstance(v, list) else v


def nemo_tarred(corpus):
    return {"manifest_filepath": str(corpus / "nemo" / "sharded_manifests" / "manifest__OP_0..1_CL_.json"),
            "tarred_audio_filepaths": str(corpus / "nemo" / "audio__OP_0..1_CL_.tar.gz")}


def fastconformer_train_ds(corpus):
    """examples/asr/conf/fastconformer/fast-conformer_ctc_bpe.yaml's train_ds, with Lhotse on and
    its data here."""
    return {**nemo_tarred(corpus), "sample_rate": 16000, "batch_size": 4, "shuffle": True, "num_workers": 2,
            "pin_memory": True, "max_duration": 3.5, "min_duration": 0.1, "is_tarred": True, "shuffle_n": 2048,
            "bucketing_strategy": "fully_randomized", "bucketing_batch_size": None, "use_lhotse": True,
            "shard_seed": "randomized", "seed": 7, "shuffle_buffer_size": 24}


def canary_train_ds(corpus):
    """speech_multitask/fast-conformer_aed.yaml's train_ds with OOMptimizer-style 2D buckets."""
    return {"use_lhotse": True, "shar_path": str(corpus / "shar"), "sample_rate": 16000, "shuffle": True,
            "num_workers": 2, "batch_size": None, "batch_duration": None, "quadratic_duration": 15,
            "use_bucketing": True, "num_buckets": 20, "bucket_buffer_size": 20000, "shuffle_buffer_size": 10000,
            "bucket_duration_bins": [[2.0, 30], [2.0, 60], [4.0, 40], [4.0, 80]], "bucket_batch_size": [2, 3, 2, 3],
            "max_tps": [40.0, 40.0, 20.0, 20.0], "shard_seed": 11, "force_finite": True}


def check_nemo_batch(batch, reader_batch, encode):
    audio, audio_lens, tokens, token_lens = batch
    assert audio.dtype == torch.float32 and audio.dim() == 2
    assert audio_lens.shape == (audio.shape[0],) and token_lens.shape == (audio.shape[0],)
    assert tokens.dtype == torch.int64 and token_lens.dtype == torch.int64 and tokens.shape[0] == audio.shape[0]
    assert int(token_lens.max()) == tokens.shape[1]
    assert torch.equal(audio, torch.from_dlpack(reader_batch["audio"]))
    assert torch.equal(audio_lens, torch.from_dlpack(reader_batch["audio_lens"]))
    for i, (text, lang) in enumerate(zip(reader_batch["text"], reader_batch["language"])):
        want = encode(text, lang)
        assert tokens[i, : token_lens[i]].tolist() == want and int(token_lens[i]) == len(want)
        assert (tokens[i, token_lens[i]:] == 0).all()


def test_fastconformer_train_ds(corpus, models):
    """Infinite (NeMo's default), batch_size 4, the max_duration filter, and NeMo's legacy keys warned about.
    (An endless reader fills its shuffle buffer first: a small one keeps the test short.)"""
    cfg = fastconformer_train_ds(corpus)
    with pytest.warns(UserWarning, match="is_tarred, shuffle_n, bucketing_strategy, bucketing_batch_size belong"):
        loader = nemo.get_lhotse_dataloader_from_config(cfg, global_rank=0, world_size=1,
                                                        tokenizer=SentencePieceTokenizer(models["en"]))
    with pytest.warns(UserWarning):
        paths, settings = nemo.reader_settings(cfg, tokenizer=models["en"])
    assert settings["max_cut_duration"] == 3.5 and settings["max_cuts"] == 4 and settings["seed"] == 7
    assert "batch_duration" not in settings and settings["epochs"] == 0 and settings["threads"] == 2
    sp = spm.SentencePieceProcessor(model_file=models["en"])
    with sharc.Reader(paths, **settings) as reader:
        rows = 0
        for batch, expected in itertools.islice(zip(loader, reader), 8):
            assert batch[0].shape[0] <= 4
            assert max(torch.from_dlpack(expected["duration"]).tolist()) <= 3.5
            check_nemo_batch(batch, expected, lambda text, lang: sp.encode_as_ids(text))
            rows += batch[0].shape[0]
    assert rows > 12  # past the end of the 12 cuts: NeMo's loader repeats without end
    loader.close()


def test_canary_train_ds_2d_buckets(corpus, models):
    """2D bins, one batch size and one max_tps per bin, an aggregate tokenizer, force_finite."""
    tok = AggregateTokenizer({lang: SentencePieceTokenizer(models[lang]) for lang in ("en", "de", "pl")})
    cfg = canary_train_ds(corpus)
    loader = nemo.get_lhotse_dataloader_from_config(cfg, 0, 1, tokenizer=tok, max_held_batches=64)
    sps = {lang: spm.SentencePieceProcessor(model_file=models[lang]) for lang in ("en", "de", "pl")}
    offsets = {"en": 0, "de": 70, "pl": 160}
    paths, settings = nemo.reader_settings(cfg, tokenizer=models)
    assert settings["bucket_batch_size"] == [2, 3, 2, 3] and "batch_duration" not in settings
    bins, sizes = cfg["bucket_duration_bins"], cfg["bucket_batch_size"]
    with sharc.Reader(paths, **settings, max_held_batches=64) as reader:
        expected = list(reader)
    got = list(loader)
    assert len(got) == len(expected) > 0
    for batch, want in zip(got, expected):
        check_nemo_batch(batch, want, lambda text, lang: [x + offsets[lang] for x in sps[lang].encode_as_ids(text)])
        durs = torch.from_dlpack(want["duration"]).tolist()
        buckets = set()
        for n, d in zip(batch[3].tolist(), durs):
            group = [i for i, (bd, _) in enumerate(bins) if bd == min(x for x, _ in bins if x >= d)]
            k = next(i for i in group if bins[i][1] >= n)
            assert n / d <= cfg["max_tps"][k]
            buckets.add(k)
        assert len(buckets) == 1 and batch[0].shape[0] <= sizes[buckets.pop()]


def test_state_dict_resumes(corpus, models):
    """Also: the tokenizer of NeMo's ASR dataset, in its TokenizerWrapper."""
    cfg = {**canary_train_ds(corpus), "force_finite": True}
    dataset = LhotseSpeechToTextBpeDataset(SentencePieceTokenizer(models["en"]))
    loader = nemo.get_lhotse_dataloader_from_config(cfg, 0, 1, dataset=dataset)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    rest = [b[2].tolist() for b in it]
    again = nemo.get_lhotse_dataloader_from_config(cfg, 0, 1, tokenizer=models["en"])
    again.load_state_dict(state)
    assert [b[2].tolist() for b in again] == rest and rest


def test_dictconfig_model_config_and_data_parallel_slots(corpus):
    """A whole model config as a DictConfig-like object; without a tokenizer, fields by name; two
    ranks read disjoint halves."""
    train_ds = {**nemo_tarred(corpus), "batch_duration": 8.0, "force_finite": True, "shard_seed": "randomized",
                "text_field": "text", "lang_field": "lang", "bucket_duration_bins": [1.0, 2.0, 3.0],
                "use_bucketing": True}
    seen = []
    for rank in (0, 1):
        loader = nemo.get_lhotse_dataloader_from_config(DictConfig({"model": {"train_ds": train_ds}}), rank, 2)
        for b in loader:
            assert isinstance(b["audio"], torch.Tensor) and b["audio"].dtype == torch.float32
            assert b["audio_lens"].shape == (len(b["cut_id"]),) and len(b["text"]) == len(b["cut_id"])
            seen.append(sorted(b["cut_id"]))
    ids = [i for batch in seen for i in batch]
    assert len(ids) == len(set(ids)) == 12


def test_text_and_lang_fields(corpus):
    """Swapped: the transcript from each row's "lang", the language from its "text"."""
    cfg = {**nemo_tarred(corpus), "batch_size": 12, "force_finite": True, "shard_seed": 1, "lang_field": "text",
           "text_field": "lang"}
    rows = [(t, lang) for b in nemo.get_lhotse_dataloader_from_config(cfg, 0, 1) for t, lang in zip(b["text"], b["language"])]
    with open(corpus / "nemo.expected.jsonl") as f:
        want = sorted((e["language"], e["text"]) for e in map(json.loads, f))
    assert sorted(rows) == want


def test_trng_is_shared_over_torch_distributed(corpus, tmp_path):
    """With torch.distributed initialized, shard_seed: trng is drawn on rank 0 and broadcast,
    so the ranks of a job split the shards by one order (here a group of one process)."""
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    base = {**nemo_tarred(corpus), "batch_size": 4}
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        seeds = {nemo.reader_settings(base, 0, 2)[1]["seed"] for _ in range(4)}
    finally:
        dist.destroy_process_group()
    assert len(seeds) > 1 and all(0 <= x < 2**32 for x in seeds)  # a fresh draw each time


def test_errors_name_the_key(corpus):
    base = {**nemo_tarred(corpus), "batch_size": 4}
    with pytest.raises(ValueError, match=r"'manifest_filepath' = \[\] is not supported: give at least one path"):
        nemo.reader_settings({**base, "manifest_filepath": [], "tarred_audio_filepaths": []})
    with pytest.raises(ValueError, match=r"unknown config key 'bath_duration': .* remove it or correct its spelling"):
        nemo.reader_settings({**base, "bath_duration": 10})
    with pytest.raises(ValueError, match=r"'rir_enabled' = True is not supported: remove it: sharc has no reverb"):
        nemo.reader_settings({**base, "rir_enabled": True})
    with pytest.raises(ValueError, match=r"'batch_tokens' = 100 .* it applies with use_multimodal_sampling: true"):
        nemo.reader_settings({**base, "batch_tokens": 100})
    with pytest.raises(ValueError, match=r"'measure_total_length' = True .* set measure_total_length: false"):
        nemo.reader_settings({**base, "use_multimodal_sampling": True, "token_equivalent_duration": 0.08})
    with pytest.raises(ValueError, match=r"'shard_seed' = 'trng' is not supported: .* set shard_seed to \"randomized\""):
        nemo.reader_settings(base, 0, 2)
    with pytest.raises(ValueError, match=r"'seed' = 'trng' is not supported: .* set seed to an integer"):
        nemo.reader_settings({**base, "seed": "trng", "shard_seed": "randomized"}, 1, 2)
    assert nemo.reader_settings(base, 0, 1)[1]["seed"] >= 0  # trng alone: NeMo's default, a random seed
    with pytest.raises(ValueError, match=r"'max_tps' = 20 is not supported: token filters count tokens: pass tokenizer="):
        nemo.reader_settings({**base, "max_tps": 20})
    with pytest.raises(ValueError, match=r"'bucketing_2d_strict_mode' = False .* strict mode only"):
        nemo.reader_settings({**base, "bucketing_2d_strict_mode": False})
    with pytest.raises(ValueError, match="give exactly one of input_cfg, shar_path"):
        nemo.reader_settings({**base, "shar_path": str(corpus / "shar")})
    with pytest.raises(ValueError, match="sets no batch size: give batch_duration, batch_size"):
        nemo.reader_settings(nemo_tarred(corpus))
    with pytest.raises(TypeError, match="dataset PromptedAudioToTextLhotseDataset is not supported"):
        nemo.get_lhotse_dataloader_from_config(base, 0, 1, dataset=type("PromptedAudioToTextLhotseDataset", (), {})())


def test_nemo_defaults_are_sharcs(corpus):
    """Keys left out take NeMo's defaults: 30 buckets, linspace bins from max_duration, 10000 buffer."""
    _, s = nemo.reader_settings({"shar_path": "x", "batch_duration": 100, "use_bucketing": True, "max_duration": 20,
                                 "shard_seed": 5})
    assert (s["num_buckets"], s["bins"], s["buffer_size"], s["num_cuts_for_bins"]) == (30, "linspace", 10000, 10000)
    assert (s["batch_duration"], s["max_cut_duration"], s["shuffle"], s["drop_last"]) == (100.0, 20.0, False, False)
    assert (s["sampling_rate"], s["resample"], s["on_error"], s["epochs"]) == (16000, True, "skip", 0)
    assert "min_duration" not in s and "threads" not in s


def test_docs_table_matches_the_config_with_every_key():
    with open(ALL_KEYS) as f:
        shipped = json.load(f)
    assert shipped == nemo.NEMO_DEFAULTS
    with open(os.path.join(ROOT, "docs", "python.md")) as f:
        doc = f.read()
    section = doc[doc.index("<!-- nemo-keys -->"):doc.index("<!-- /nemo-keys -->")]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\| `(\w+)` \| (.*?) \| `(.*?)` \| (.*) \|$", line)
        if m:
            rows[m.group(1)] = json.loads(m.group(3))
    assert rows == shipped
    # The shipped config (every key at NeMo's default), given data and a batch size, is accepted.
    _, s = nemo.reader_settings({**shipped, "shar_path": "x", "batch_duration": 60, "shard_seed": 3})
    assert s["batch_duration"] == 60 and s["num_buckets"] == 1 and s["buffer_size"] == 10000


def test_reader_field_keywords(corpus):
    paths = [nemo_tarred(corpus)["tarred_audio_filepaths"], nemo_tarred(corpus)["manifest_filepath"]]
    with pytest.raises(ValueError, match="keyword 'nemo_text_field' must not be empty"):
        sharc.Reader(paths, max_cuts=4, nemo_text_field="")
    with pytest.raises(TypeError, match="keyword 'nemo_lang_field' must be a str"):
        sharc.Reader(paths, max_cuts=4, nemo_lang_field=1)
    with pytest.raises(ValueError, match="keyword 'nemo_text_field': embedded null byte"):
        sharc.Reader(paths, max_cuts=4, nemo_text_field="te\0xt")


def test_reader_max_duration_is_batch_durations_deprecated_name(corpus):
    """One meaning per name: batch_duration is the batch limit, max_cut_duration the filter; the
    old max_duration= still works, warning at the caller's line and naming the new keyword."""
    shar = str(corpus / "shar")
    with sharc.Reader(shar, batch_duration=6.0, seed=2) as r:
        want = [b["cut_id"] for b in r]
    with pytest.warns(DeprecationWarning, match="keyword 'max_duration' is deprecated; use batch_duration") as w:
        r = sharc.Reader(shar, max_duration=6.0, seed=2)
    assert w[0].filename == __file__
    with r:
        assert [b["cut_id"] for b in r] == want
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sharc.Reader(shar, batch_duration=6.0).close()
    with pytest.raises(TypeError, match="give batch_duration only"):
        sharc.Reader(shar, batch_duration=6.0, max_duration=6.0)


def test_noise_and_multimodal_keys(corpus):
    """noise_path (a dict of a NeMo tarred set), noise_snr and noise_mix_prob mix noise into every
    cut; use_multimodal_sampling measures cuts in audio tokens."""
    base = {"shar_path": str(corpus / "shar"), "batch_size": 12, "force_finite": True, "shard_seed": 1}
    noisy_cfg = {**base, "noise_path": nemo_tarred(corpus), "noise_snr": [0.0, 0.0], "noise_mix_prob": 1.0}
    _, s = nemo.reader_settings(noisy_cfg)
    assert s["noise"] == [nemo_tarred(corpus)["tarred_audio_filepaths"], nemo_tarred(corpus)["manifest_filepath"]]
    assert (s["noise_snr"], s["noise_prob"]) == ([0.0, 0.0], 1.0)
    clean = {i: a for b in nemo.get_lhotse_dataloader_from_config(base, 0, 1)
             for i, a in zip(b["cut_id"], b["audio"])}
    noisy = {i: a for b in nemo.get_lhotse_dataloader_from_config(noisy_cfg, 0, 1)
             for i, a in zip(b["cut_id"], b["audio"])}
    assert clean.keys() == noisy.keys() and all(not torch.equal(clean[i], noisy[i]) for i in clean)
    _, s = nemo.reader_settings({**base, "use_multimodal_sampling": True, "token_equivalent_duration": 0.08,
                                 "batch_tokens": 400, "quadratic_factor": 50, "measure_total_length": False})
    assert (s["token_equivalent_duration"], s["batch_tokens"], s["quadratic_duration"]) == (0.08, 400, 50.0)


def test_values_are_typed_as_nemos_config_schema_types_them(corpus):
    """Values convert as OmegaConf converts them for NeMo's typed LhotseDataLoadingConfig (an int
    from an int or a numeric str, a bool from a bool or "true"/"false", ...); what it refuses
    (4.5 for batch_size, "maybe" for shuffle, noise_snr None) is a ValueError naming the key,
    never a silent truncation or a bare TypeError."""
    base = {"shar_path": str(corpus / "shar"), "shard_seed": 1}
    _, s = nemo.reader_settings({**base, "batch_size": "4", "batch_duration": "20", "shuffle": "false",
                                 "drop_last": "yes", "sample_rate": "8000", "force_finite": 1})
    assert (s["max_cuts"], s["batch_duration"], s["shuffle"], s["drop_last"], s["sampling_rate"]) == \
        (4, 20.0, False, True, 8000)
    assert "epochs" not in s  # force_finite: 1 is true
    for key, value, want in (("batch_size", 4.5, "give an integer"), ("batch_size", True, "give an integer"),
                             ("batch_duration", "soon", "give a number"), ("shuffle", "maybe", "give true or false"),
                             ("num_buckets", 2.0, "give an integer")):
        with pytest.raises(ValueError, match=rf"^sharc.nemo: config key '{key}' = {re.escape(repr(value))} is not "
                                             rf"supported: {want}"):
            nemo.reader_settings({**base, "batch_size": 4, "use_bucketing": True, key: value})
    with pytest.raises(ValueError, match=r"'bucket_batch_size' = \[8, 4.5\] is not supported: give a list of integers"):
        nemo.reader_settings({**base, "bucket_duration_bins": [2.0, 4.0], "bucket_batch_size": [8, 4.5]})
    noisy = {**base, "batch_size": 4, "noise_path": str(corpus / "wds")}
    for snr in (None, 5, [1, 2, 3]):
        with pytest.raises(ValueError, match=r"'noise_snr' = .* is not supported: give \[low, high\] in dB"):
            nemo.reader_settings({**noisy, "noise_snr": snr})


def test_legacy_key_warning_names_the_callers_line(corpus):
    cfg = {"shar_path": str(corpus / "shar"), "batch_size": 4, "shard_seed": 1, "is_tarred": True}
    for call in (lambda: nemo.reader_settings(cfg), lambda: nemo.get_lhotse_dataloader_from_config(cfg, 0, 1)):
        with pytest.warns(UserWarning, match="config keys is_tarred belong to NeMo's non-Lhotse datasets") as w:
            call()
        assert [x.filename for x in w] == [__file__]


def test_a_finite_loader_is_iterated_again_each_epoch(corpus):
    """force_finite (a validation set): each iteration reads the data once, and the loader is
    iterated again at the next validation, as NeMo's is; without it one iteration is endless."""
    cfg = {**nemo_tarred(corpus), "batch_size": 5, "force_finite": True, "shard_seed": 1}
    loader = nemo.get_lhotse_dataloader_from_config(cfg, 0, 1)
    with open(corpus / "nemo.expected.jsonl") as f:
        want = sorted(json.loads(line)["id"] for line in f)
    for _ in range(2):
        assert sorted(i for b in loader for i in b["cut_id"]) == want
    _, s = nemo.reader_settings({**cfg, "force_finite": False})
    assert s["epochs"] == 0


def test_shar_path_of_fields_is_refused_naming_the_key():
    fields = {"cuts": ["a/cuts.000000.jsonl.gz"], "recording": ["a/recording.000000.tar"]}
    with pytest.raises(ValueError, match=r"^sharc.nemo: config key 'shar_path' = \{'cuts': .* is not supported: "
                                         r"sharc reads Shar directories"):
        nemo.reader_settings({"shar_path": fields, "batch_size": 4, "shard_seed": 1})
