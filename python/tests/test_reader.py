"""sharc.Reader: reading every layout, DLPack, tensor lifetime, state, settings, errors."""
import gc
import json
import os
import pathlib
import re
import subprocess
import sys
import threading
import time

import pytest

import sharc
from conftest import corrupt, expected

np = pytest.importorskip("numpy")

SETTINGS = dict(batch_duration=12.0, threads=2, seed=3)


def read_all(reader):
    out = []
    for b in reader:
        out.append({"ids": list(b["cut_id"]), "audio": np.from_dlpack(b["audio"]).copy(),
                    "lens": np.from_dlpack(b["audio_lens"]).copy(), "step": b.step})
    return out


def test_package_is_the_one_under_test():
    """Under `tools/dev test`'s pip check, the suite runs against the installed package."""
    where = os.environ.get("SHARC_EXPECT_INSTALLED")
    if where:
        assert sharc.__file__.startswith(where) and sharc._sharc.__file__.endswith(".abi3.so")
    else:
        assert sharc._sharc.__file__.endswith(os.path.join("python", "sharc", "_sharc.abi3.so"))


def test_import_needs_neither_torch_nor_numpy():
    code = ("import sys; sys.modules['torch'] = None; sys.modules['numpy'] = None; import sharc; "
            "print(sharc.__version__, sorted(n for n in dir(sharc) if not n.startswith('_')))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert "DataError" in out and "Reader" in out and "RemoteError" in out


@pytest.mark.parametrize("layout", ["shar", "nemo", "wds"])
def test_reads_every_layout(corpus, layout):
    exp = expected(corpus, layout)
    by_id = {e["id"]: e for e in exp}
    seen = []
    with sharc.Reader(str(corpus / layout), **SETTINGS) as r:
        for b in r:
            assert set(b) == {"audio", "audio_lens", "duration", "cut_id", "text", "speaker", "language"}
            audio = np.from_dlpack(b["audio"])
            lens = np.from_dlpack(b["audio_lens"])
            dur = np.from_dlpack(b["duration"])
            assert audio.dtype == np.float32 and lens.dtype == np.int32 and dur.dtype == np.float32
            assert audio.shape == (len(b["cut_id"]), int(lens.max()))
            for i, cut in enumerate(b["cut_id"]):
                e = by_id[cut]
                n = e["num_samples"]
                assert lens[i] == n
                assert dur[i] == pytest.approx(e["duration"], abs=1e-6)
                row = audio[i, :n].astype(np.float64)
                assert row.sum() == pytest.approx(e["sample_sum"], rel=1e-6, abs=1e-6)
                assert (row * row).sum() == pytest.approx(e["sample_sumsq"], rel=1e-6)
                assert not audio[i, n:].any()  # zero padding
                assert b["text"][i] == (e.get("text") or "")
                assert b["speaker"][i] == (e.get("speaker") or "")
                assert b["language"][i] == (e.get("language") or "")
                seen.append(cut)
    assert sorted(seen) == sorted(by_id)


def test_same_batches_as_the_cli(corpus):
    exe = os.environ.get("SHARC_EXE")
    if not exe:
        pytest.skip("the sharc CLI is not built (-Dtools=false)")
    out = subprocess.run([exe, "read", str(corpus / "shar"), "--max-duration", "12", "--threads", "2", "--seed", "3",
                          "--json"], check=True, capture_output=True, text=True).stdout
    cli = [json.loads(l)["ids"] for l in out.splitlines() if json.loads(l).get("type") == "batch"]
    py = [list(b["cut_id"]) for b in sharc.Reader(str(corpus / "shar"), **SETTINGS)]
    assert py == cli and len(py) > 2


def test_dlpack_shares_memory_with_numpy_and_torch(corpus):
    r = sharc.Reader(str(corpus / "shar"), **SETTINGS)
    b = next(r)
    t = b["audio"]
    assert t.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(t)
    assert a.ctypes.data == t.data_ptr
    assert np.asarray(t).ctypes.data == t.data_ptr  # __array_interface__, no copy
    assert a.shape == t.shape and str(a.dtype) == t.dtype
    torch = pytest.importorskip("torch")
    tt = torch.from_dlpack(t)
    assert tt.data_ptr() == t.data_ptr and tt.dtype == torch.float32 and tuple(tt.shape) == t.shape
    lens = torch.from_dlpack(b["audio_lens"])
    assert lens.dtype == torch.int32 and lens.tolist() == np.from_dlpack(b["audio_lens"]).tolist()
    # A write through one view is seen through the other: the same memory.
    tt[0, 0] = 12.5
    assert a[0, 0] == 12.5


def test_capsule_is_consumed_once(corpus):
    b = next(sharc.Reader(str(corpus / "shar"), **SETTINGS))
    cap = b["duration"].__dlpack__()
    assert "dltensor" in repr(cap)
    del cap  # unconsumed: its destructor runs the deleter (no leak, no double free)
    gc.collect()
    assert b["duration"].__dlpack__(dl_device=(1, 0)) is not None
    with pytest.raises(BufferError, match=r"is on DLPack device \(1, 0\), not \(2, 0\)"):
        b["duration"].__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="without a copy only"):
        b["duration"].__dlpack__(copy=True)


def test_tensors_outlive_batch_and_reader(corpus):
    torch = pytest.importorskip("torch")
    reference = read_all(sharc.Reader(str(corpus / "shar"), **SETTINGS))
    r = sharc.Reader(str(corpus / "shar"), **SETTINGS)
    b = next(r)
    kept_np = np.from_dlpack(b["audio"])
    kept_torch = torch.from_dlpack(b["audio_lens"])
    kept_tensor = b["duration"]
    del b
    gc.collect()
    rest = [list(x["cut_id"]) for x in r]  # every other batch is read while the first is held
    assert rest == [x["ids"] for x in reference[1:]]
    r.close()
    del r
    gc.collect()
    # The first batch was neither reused nor freed by the reading that followed or the close.
    assert np.array_equal(kept_np, reference[0]["audio"])
    assert kept_torch.tolist() == reference[0]["lens"].tolist()
    assert np.from_dlpack(kept_tensor).shape == (len(reference[0]["ids"]),)


def test_held_tensors_hold_back_the_pool(corpus):
    """A batch goes back to the pool only when its last tensor and export are freed: with
    max_held_batches=2 and two batches held (one only through a torch tensor), the reader
    refuses a third with SHARC_ERR_BACKPRESSURE rather than reuse held memory."""
    torch = pytest.importorskip("torch")
    reference = read_all(sharc.Reader(str(corpus / "shar"), **SETTINGS))
    r = sharc.Reader(str(corpus / "shar"), max_held_batches=2, **SETTINGS)
    first = torch.from_dlpack(next(r)["audio"])  # the batch dict is gone, the export holds it
    second = next(r)
    gc.collect()
    with pytest.raises(sharc.Error) as info:
        next(r)
    assert info.value.code_name == "SHARC_ERR_BACKPRESSURE"
    assert str(info.value) == "the caller holds 2 batches (max_held_batches 2); release some first"
    assert np.array_equal(first.numpy(), reference[0]["audio"])
    assert list(second["cut_id"]) == reference[1]["ids"]
    del first  # the DLPack deleter releases the first batch
    gc.collect()
    third = next(r)
    assert list(third["cut_id"]) == reference[2]["ids"]
    assert np.array_equal(np.from_dlpack(second["audio"]), reference[1]["audio"])
    del second, third
    gc.collect()
    assert [list(b["cut_id"]) for b in r] == [x["ids"] for x in reference[3:]]


@pytest.mark.parametrize("layout", ["shar", "nemo", "wds"])
def test_state_round_trip_equals_an_uninterrupted_run(corpus, layout):
    settings = dict(SETTINGS, epochs=2, batch_duration=6.0)
    whole = read_all(sharc.Reader(str(corpus / layout), **settings))
    assert len(whole) > 4
    for k in (1, len(whole) // 2, len(whole) - 1):
        r = sharc.Reader(str(corpus / layout), **settings)
        head = [list(next(r)["cut_id"]) for _ in range(k)]
        state = r.state_dict()
        assert isinstance(state["sharc_reader_state"], bytes)
        r.close()
        resumed = sharc.Reader(str(corpus / layout), **settings)
        resumed.load_state_dict(state)
        tail = read_all(resumed)
        assert head == [x["ids"] for x in whole[:k]]
        assert [x["ids"] for x in tail] == [x["ids"] for x in whole[k:]]
        assert [x["step"] for x in tail] == [x["step"] for x in whole[k:]]
        for got, want in zip(tail, whole[k:]):
            assert np.array_equal(got["audio"], want["audio"])
        # The state of a resumed reader before its first batch is the one it resumed from.
        again = sharc.Reader(str(corpus / layout), **settings)
        again.load_state_dict(state)
        assert again.state_dict() == state


def test_state_of_a_fresh_reader_restarts(corpus):
    r = sharc.Reader(str(corpus / "shar"), **SETTINGS)
    assert r.state_dict() == {"sharc_reader_state": None}
    r.load_state_dict(r.state_dict())
    assert [list(b["cut_id"]) for b in r] == [x["ids"] for x in read_all(sharc.Reader(str(corpus / "shar"), **SETTINGS))]


def test_state_from_other_settings_is_refused(corpus):
    r = sharc.Reader(str(corpus / "shar"), **SETTINGS)
    next(r)
    state = r.state_dict()
    other = sharc.Reader(str(corpus / "shar"), **dict(SETTINGS, seed=4))
    other.load_state_dict(state)
    with pytest.raises(sharc.Error) as info:
        next(other)
    assert info.value.code_name == "SHARC_ERR_STATE"
    assert "cannot resume" in str(info.value)
    with pytest.raises(ValueError, match="sharc_reader_state"):
        other.load_state_dict({"x": 1})
    with pytest.raises(TypeError, match="must be bytes, not str"):
        other.load_state_dict({"sharc_reader_state": "abc"})


@pytest.mark.parametrize(
    "kw, exc, text",
    [
        ({"max_duraton": 3}, TypeError, "sharc.Reader: unknown keyword 'max_duraton'"),
        ({"max_duration": "3"}, TypeError, "sharc.Reader: keyword 'max_duration' must be a number, not str"),
        ({"max_duration": True}, TypeError, "sharc.Reader: keyword 'max_duration' must be a number, not bool"),
        ({"max_duration": -1.0}, ValueError, "sharc.Reader: keyword 'max_duration' must be > 0"),
        ({"max_duration": float("nan")}, ValueError, "sharc.Reader: keyword 'max_duration' must be > 0"),
        ({"num_buckets": 0}, ValueError, "sharc.Reader: keyword 'num_buckets' must be in 1..65536, got 0"),
        ({"num_buckets": 2.0}, TypeError, "sharc.Reader: keyword 'num_buckets' must be an int, not float"),
        ({"seed": -1}, ValueError, "sharc.Reader: keyword 'seed' must be in 0..18446744073709551615, got -1"),
        ({"seed": 1 << 64}, ValueError, "sharc.Reader: keyword 'seed' must be in 0.."),
        ({"threads": 5000}, ValueError, "sharc.Reader: keyword 'threads' must be in 0..4096, got 5000"),
        ({"shuffle": 1}, TypeError, "sharc.Reader: keyword 'shuffle' must be a bool, not int"),
        ({"layout": "tar"}, ValueError, "sharc.Reader: keyword 'layout' must be one of 'auto', 'shar', 'nemo', 'wds', got 'tar'"),
        ({"layout": 1}, TypeError, "sharc.Reader: keyword 'layout' must be a str, not int"),
        ({"on_error": "ignore"}, ValueError, "sharc.Reader: keyword 'on_error' must be one of 'fail', 'skip', got 'ignore'"),
        ({"bins": [2.0, 1.0]}, ValueError, "sharc.Reader: keyword 'bins' must be sorted"),
        ({"bins": "2,3"}, TypeError, "sharc.Reader: keyword 'bins' must be a sequence of numbers, not str"),
        ({"bins": [1.0, "x"]}, TypeError, "sharc.Reader: keyword 'bins' must be a number, not str"),
        ({"bins": []}, ValueError, "sharc.Reader: keyword 'bins' must not be empty"),
        ({"bins": "linspace"}, ValueError, "sharc.Reader: keyword 'bins'='linspace' needs max_cut_duration"),
        ({"bins": [1.0, 2.0], "bucket_batch_size": [4]}, ValueError,
         "sharc.Reader: keyword 'bucket_batch_size' needs one value per bin: 1 values for 2 bins"),
        ({"bucket_batch_size": [0]}, ValueError, "sharc.Reader: keyword 'bucket_batch_size' must be in 1..4294967295, got 0"),
        ({"features": "mfcc"}, ValueError, "sharc.Reader: keyword 'features' must be one of 'none', 'fbank', got 'mfcc'"),
        ({"n_mels": 0}, ValueError, "sharc.Reader: keyword 'n_mels' must be in 1..256, got 0"),
        ({"fbank_preemph": 1.0}, ValueError, "sharc.Reader: keyword 'fbank_preemph' must be >= 0 and at most 0.999999"),
        ({"keep_audio": 0}, TypeError, "sharc.Reader: keyword 'keep_audio' must be a bool, not int"),
        ({"retries": 1001}, ValueError, "sharc.Reader: keyword 'retries' must be in 0..1000, got 1001"),
        ({"timeout_ms": -1}, ValueError, "sharc.Reader: keyword 'timeout_ms' must be in 0..86400000, got -1"),
        ({"dp_rank": 2, "dp_size": 2}, ValueError, "sharc.Reader: keyword 'dp_rank' must be below dp_size (2), got 2"),
        ({"dp_rank": 1}, ValueError, "sharc.Reader: keyword 'dp_rank' must be below dp_size (1), got 1"),
    ],
)
def test_bad_keywords(corpus, kw, exc, text):
    with pytest.raises(exc) as info:
        sharc.Reader(str(corpus / "shar"), **kw)
    assert str(info.value).startswith(text), str(info.value)


def test_every_cli_keyword_is_accepted(corpus):
    r = sharc.Reader([str(corpus / "shar")], layout="shar", epochs=1, seed=1, shuffle_shards=False, dp_rank=0,
                     dp_size=1, on_error="skip", sampling_rate=16000, channel=0, threads=1, prefetch=2,
                     read_ahead_bytes=0, max_member_bytes=1 << 30, batch_duration=10, max_cuts=8,
                     quadratic_duration=30.0, num_buckets=2, num_cuts_for_bins=100, buffer_size=100,
                     max_buffer_bytes=0, shuffle=False, drop_last=False, min_duration=0.0, max_cut_duration=30,
                     max_held_batches=4)
    assert sum(len(b["cut_id"]) for b in r) == 12
    linspace = sharc.Reader(str(corpus / "shar"), bins="linspace", num_buckets=3, max_cut_duration=6.0,
                            bucket_batch_size=[2, 2])
    assert all(len(b["cut_id"]) <= 2 for b in linspace)


def test_fbank_features(corpus):
    """The CLI's feature options as keywords: features f32 [B, n_mels, frames] and
    feature_lens i32 [B] in every batch, and no audio with keep_audio=False."""
    for b in sharc.Reader(str(corpus / "shar"), features="fbank", n_mels=64, fbank_pad_to=0, **SETTINGS):
        feats = np.from_dlpack(b["features"])
        lens = np.from_dlpack(b["feature_lens"])
        audio_lens = np.from_dlpack(b["audio_lens"])
        assert feats.dtype == np.float32 and lens.dtype == np.int32
        # docs/features.md: T / hop + 1 frames, of which len / hop are valid (NeMo 2.x).
        assert feats.shape == (len(b["cut_id"]), 64, int(audio_lens.max()) // 160 + 1)
        assert lens.tolist() == (audio_lens // 160).tolist()
        assert np.isfinite(feats).all()
        for i, n in enumerate(lens):
            assert not feats[i, :, n:].any()
    b = next(sharc.Reader(str(corpus / "shar"), features="fbank", keep_audio=False, **SETTINGS))
    assert "audio" not in b and "features" in b and "audio_lens" in b


def test_dp_slots_split_the_shards(corpus):
    ids = [sorted(c for b in sharc.Reader(str(corpus / "shar"), dp_rank=k, dp_size=2, **SETTINGS)
                  for c in b["cut_id"]) for k in range(2)]
    assert ids[0] and ids[1] and not set(ids[0]) & set(ids[1])
    assert sorted(ids[0] + ids[1]) == sorted(e["id"] for e in expected(corpus, "shar"))


def test_bad_paths():
    with pytest.raises(TypeError, match="paths must be str, bytes or os.PathLike"):
        sharc.Reader([1], batch_duration=3)
    with pytest.raises(sharc.Error) as info:
        sharc.Reader("/nonexistent/shards", batch_duration=3)
    assert info.value.code_name == "ENOENT"
    assert str(info.value) == "/nonexistent/shards: No such file or directory"
    assert not isinstance(info.value, sharc.DataError)


def test_corrupt_shard_raises_data_error_naming_shard_member_and_cut(plain_shar):
    corrupt("tar-replace", plain_shar / "recording.000000.tar", "spk04-utt-000000.flac", "@garbage:100")
    r = sharc.Reader(str(plain_shar), **SETTINGS)
    with pytest.raises(sharc.DataError) as info:
        for _ in r:
            pass
    e = info.value
    assert isinstance(e, sharc.Error)
    assert e.code_name == "SHARC_ERR_DECODE" and e.code == -1004
    assert str(e).startswith(f"{plain_shar}/recording.000000.tar member spk04-utt-000000.flac "
                             "(cut spk04-utt-000000): ")
    assert e.message == str(e)


def test_corrupt_shard_is_skipped_under_skip(plain_shar):
    corrupt("tar-replace", plain_shar / "recording.000000.tar", "spk04-utt-000000.flac", "@garbage:100")
    r = sharc.Reader(str(plain_shar), on_error="skip", **SETTINGS)
    ids = [c for b in r for c in b["cut_id"]]
    assert len(ids) == 11 and "spk04-utt-000000" not in ids
    assert r.stats()["problems"]["decode"] == 1


def test_gil_is_released_while_reading(corpus):
    """Another Python thread runs while the reader makes a batch: the main thread gets its
    turn while a second thread is inside the C call, long before the call returns. A call
    that kept the GIL would let the main thread run only once it had returned."""
    # One batch of every cut of 50 epochs: a call of tens of milliseconds at least.
    r = sharc.Reader(str(corpus / "shar"), batch_duration=10000.0, threads=1, epochs=50, buffer_size=100000)
    inside = threading.Event()
    state = {}

    def read():
        inside.set()
        t0 = time.perf_counter()
        state["batch"] = r._c.next_batch()
        state["call"] = (t0, time.perf_counter())

    t = threading.Thread(target=read)
    t.start()
    inside.wait()
    main_ran = time.perf_counter()  # before the call returned if it released the GIL
    t.join()
    start, end = state["call"]
    assert len(state["batch"][0]["cut_id"]) == 50 and end - start > 0.02
    assert end - main_ran > (end - start) / 2, (main_ran - start, end - start)


def test_input_cfg_mixture(corpus, tmp_path):
    """A NeMo input_cfg through the input_cfg keyword: batches of both sources, each cut's
    language from its source's lang tag, another tag as a string column; the same batches on
    a second run. The bins are estimated from 200 cuts and the buckets hold 200: the defaults
    (10000 and 20000) would each take hundreds of passes over this endless mixture of 24 cuts
    before the first batch."""
    cfg = tmp_path / "mix.yaml"
    cfg.write_text(
        "input_cfg:\n"
        f"  - {{type: lhotse_shar, shar_path: {corpus / 'shar'}, weight: 0.5, tags: {{lang: en, task: asr}}}}\n"
        f"  - {{type: wds, paths: {corpus / 'wds'}, weight: 0.5, tags: {{lang: de, task: ast}}}}\n"
    )

    def run():
        out = []
        for b in sharc.Reader([], input_cfg=cfg, batch_duration=12.0, seed=3, max_open_streams=1,
                              num_cuts_for_bins=200, buffer_size=200):
            out.append((b["cut_id"], b["language"], b["task"]))
            if len(out) == 12:
                return out
        return out

    first = run()
    assert len(first) == 12
    pairs = {(lang, task) for _, langs, tasks in first for lang, task in zip(langs, tasks)}
    assert pairs == {("en", "asr"), ("de", "ast")}
    assert run() == first
    # The same structure inline, as NeMo's config holds it: the same batches.
    inline = [
        {"type": "lhotse_shar", "shar_path": str(corpus / "shar"), "weight": 0.5,
         "tags": {"lang": "en", "task": "asr"}},
        {"type": "wds", "paths": str(corpus / "wds"), "weight": 0.5, "tags": {"lang": "de", "task": "ast"}},
    ]
    cfg = inline
    assert run() == first
    cfg = {"input_cfg": inline}
    assert run() == first


@pytest.mark.parametrize(
    "args,kw,exc,text",
    [
        ((["x"],), {"input_cfg": "m.yaml"}, ValueError,
         "sharc.Reader: keyword 'input_cfg' reads the datasets it lists: give no paths with it "
         "(sharc.Reader([], input_cfg=...))"),
        (([],), {"input_cfg": 3}, TypeError,
         "sharc.Reader: keyword 'input_cfg' must be str, bytes or os.PathLike, not int"),
        (([],), {}, ValueError, "sharc.Reader: paths is empty"),
        (([],), {"input_cfg": [{"type": "wds", "paths": "/a", "weight": 1, "when": object()}]}, TypeError,
         "sharc.Reader: keyword 'input_cfg' holds a value JSON cannot represent"),
        (([],), {"input_cfg": [{"type": "wds", "paths": "/a", "shuffle": True}]}, sharc.Error,
         "input_cfg text: input_cfg[0]: unknown key 'shuffle'"),
        (([],), {"input_cfg": "m.yaml", "mix_finite": 1}, TypeError,
         "sharc.Reader: keyword 'mix_finite' must be a bool, not int"),
    ],
)
def test_input_cfg_keywords(args, kw, exc, text):
    with pytest.raises(exc) as e:
        sharc.Reader(*args, **kw)
    assert str(e.value) == text


def test_embedded_null_byte_is_refused(corpus, tmp_path):
    """A NUL in a string that goes into C would end it there ("DIR\x00x" read as DIR): every
    entry refuses it with ValueError, as CPython's own path functions do."""
    shar = str(corpus / "shar")
    cfg = tmp_path / "mix.yaml"
    cfg.write_text(f"input_cfg:\n  - {{type: lhotse_shar, shar_path: {shar}, weight: 1}}\n")
    inline = [{"type": "lhotse_shar", "shar_path": shar + "\x00x", "weight": 1}]
    cases = [
        ((shar + "\x00x",), {}, "sharc.Reader: paths: embedded null byte"),
        ((os.fsencode(shar) + b"\x00x",), {}, "sharc.Reader: paths: embedded null byte"),
        ((pathlib.Path(shar + "\x00x"),), {}, "sharc.Reader: paths: embedded null byte"),
        (([shar, shar + "\x00x"],), {}, "sharc.Reader: paths: embedded null byte"),
        (([],), {"input_cfg": str(cfg) + "\x00x"}, "sharc.Reader: keyword 'input_cfg': embedded null byte"),
        (([],), {"input_cfg": inline}, "sharc.Reader: keyword 'input_cfg': embedded null byte"),
        (([],), {"input_cfg": {"input_cfg": inline}}, "sharc.Reader: keyword 'input_cfg': embedded null byte"),
        ((shar,), {"device": "cpu\x00x"}, "sharc.Reader: keyword 'device': embedded null byte"),
    ]
    for args, kw, text in cases:
        with pytest.raises(ValueError) as e:
            sharc.Reader(*args, batch_duration=12.0, **kw)
        assert str(e.value) == text, (args, kw)
    # Not a NUL: an escaped backslash before "u0000" in a name; the config without the NUL opens.
    assert json.dumps(["\\u0000"]) == '["\\\\u0000"]'
    with pytest.raises(sharc.Error, match=r"u0000"):
        sharc.Reader([], input_cfg=[{"type": "lhotse_shar", "shar_path": shar + "\\u0000", "weight": 1}],
                     batch_duration=12.0)
    sharc.Reader([], input_cfg=cfg, batch_duration=12.0).close()
    if hasattr(sharc._sharc, "CLoader"):  # the C side's check, before MPI is started
        for kw, text in (({"mesh": "dp=1\x00x"}, "sharc.Loader: mesh: embedded null byte"),
                         ({"broadcast_axes": ["cp\x00x"]}, "sharc.Loader: broadcast_axes: embedded null byte")):
            with pytest.raises(ValueError) as e:
                sharc.Loader(shar, transport="mpi", batch_duration=12.0, **kw)
            assert str(e.value) == text
    # The frame codec of sharc.torch: a tensor name is refused; an error's text, which is
    # being reported, keeps its length with '?' for the NUL.
    with pytest.raises(ValueError, match="^frame_data: a tensor name: embedded null byte$"):
        sharc._sharc.frame_data(4096, 0, 0, [("t\x000", sharc._sharc.DTYPE_U8, sharc._sharc.DEVICE_HOST, 0, (1,), 1)],
                                True)
    err = sharc._sharc.frame_decode(sharc._sharc.frame_error(0, sharc._sharc.ERR_REMOTE, "bad\x00cut"), 1 << 20)
    assert err[6] == "bad?cut"


def test_iterating_again_starts_the_next_epoch(corpus):
    """Without epochs=, each iteration is one epoch (every cut once, batch.epoch e), the
    batches of a reader of one epoch with seed + e; a state saved in epoch 1 resumes there.
    With epochs=N, iterating a spent reader raises instead of yielding nothing."""
    path = str(corpus / "shar")
    ids = sorted(e["id"] for e in expected(corpus, "shar"))
    r = sharc.Reader(path, **SETTINGS)
    passes = [[(b.epoch, list(b["cut_id"])) for b in r] for _ in range(3)]
    for e, batches in enumerate(passes):
        assert {epoch for epoch, _ in batches} == {e}
        assert sorted(i for _, b in batches for i in b) == ids
        alone = sharc.Reader(path, **{**SETTINGS, "seed": SETTINGS["seed"] + e}, epochs=1)
        assert [b for _, b in batches] == [list(b["cut_id"]) for b in alone]
    assert passes[0] != passes[1]
    assert next(r, None) is None  # a spent epoch stays spent until iterated again
    # A state saved in the second epoch resumes in it, and the next iteration is the third.
    r = sharc.Reader(path, **SETTINGS)
    for _ in r:
        pass
    it = iter(r)
    head = [list(next(it)["cut_id"])]
    state = r.state_dict()
    assert state["sharc_reader_epoch"] == 1
    again = sharc.Reader(path, **SETTINGS)
    again.load_state_dict(state)
    assert head + [list(b["cut_id"]) for b in again] == [b for _, b in passes[1]]
    assert [(b.epoch, list(b["cut_id"])) for b in again] == passes[2]
    with pytest.raises(ValueError, match="sharc_reader_epoch 1 is not an epoch of this reader"):
        sharc.Reader(path, **SETTINGS, epochs=2).load_state_dict(state)
    for epochs, text in ((1, "the 1 epoch it was asked for (epochs=1) is read"),
                         (2, "the 2 epochs it was asked for (epochs=2) are read")):
        r = sharc.Reader(path, **SETTINGS, epochs=epochs)
        assert sorted(i for b in r for i in b["cut_id"]) == sorted(ids * epochs)
        with pytest.raises(sharc.Error, match=re.escape(text) + "; leave epochs unset") as info:
            iter(r)
        # Raised by the package, not the C reader, it carries what a sharc.Error carries.
        assert (info.value.code, info.value.code_name, info.value.message) == (-22, "EINVAL", str(info.value))


def test_dataloader_iterates_a_reader(corpus):
    """A reader made once torch is imported is an IterableDataset: DataLoader(reader,
    batch_size=None) yields its batches, one epoch per iteration, and has no len() when it
    batches by duration."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, IterableDataset
    path = str(corpus / "shar")
    r = sharc.Reader(path, **SETTINGS)
    assert isinstance(r, IterableDataset) and isinstance(r, sharc.Reader)
    loader = DataLoader(r, batch_size=None)
    got = [[list(b["cut_id"]) for b in loader] for _ in range(2)]
    want = sharc.Reader(path, **SETTINGS)
    assert got == [[list(b["cut_id"]) for b in want] for _ in range(2)]
    with pytest.raises(TypeError, match=r"^len\(sharc.Reader\) is not known: it batches by batch_duration: "):
        len(loader)


def test_dataloader_workers_are_refused_not_hung(corpus):
    """DataLoader(num_workers > 0) forks workers (or pickles the dataset into them): the
    reader's threads are not in a forked worker, so there it raises, naming num_workers,
    instead of waiting for ever (or crashing when closed); pickling it says the same."""
    pytest.importorskip("torch")
    import pickle
    from torch.utils.data import DataLoader
    r = sharc.Reader(str(corpus / "shar"), **SETTINGS)
    for epoch in range(2):  # the first epoch's reader, and the next one opened by iterating again
        with pytest.raises(RuntimeError, match=r"opened in process \d+, used in process \d+ .* "
                                               r"keep DataLoader's num_workers at 0"):
            next(iter(DataLoader(r, batch_size=None, num_workers=1, timeout=20)))
        assert len([b.step for b in r]) > 0  # this process still reads it
    with pytest.raises(TypeError, match=r"^sharc.Reader cannot be pickled: .* keep DataLoader's num_workers at 0"):
        pickle.dumps(r)


def test_a_forked_child_neither_hangs_nor_crashes(corpus):
    r = sharc.Reader(str(corpus / "shar"), **SETTINGS)
    next(r)
    state = r.state_dict()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: next() raises; a state loaded opens a reader of its own,
        try:  # forgetting the parent's; close() forgets it too
            try:
                next(r)
                said = "read a batch"
            except RuntimeError as e:
                said = str(e)
            r.load_state_dict(state)
            said += f" | then step {next(r).step}"
            r.close()
            os.write(write, said.encode())
        finally:
            os._exit(0)
    os.close(write)
    deadline = time.time() + 20
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.time() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung")
        time.sleep(0.05)
    said = os.read(read, 4096).decode()
    os.close(read)
    assert re.match(rf"sharc.Reader: opened in process {os.getpid()}, used in process \d+", said), said
    assert said.endswith(" | then step 1"), said
    assert next(r).step == 1  # the parent's reader is untouched


def test_a_state_saved_at_the_end_of_an_epoch_resumes_at_the_next(corpus):
    """A state saved once an epoch's iteration ended (the usual end-of-epoch checkpoint)
    resumes where the uninterrupted run's next iteration starts, the next epoch, rather
    than at the end of the finished one (an iteration of no batches); so do the gathered
    states of every slot saved there."""
    path = str(corpus / "shar")
    r = sharc.Reader(path, **SETTINGS)
    first = [list(b["cut_id"]) for b in r]
    state = r.state_dict()
    assert state["sharc_reader_epoch_done"] is True
    second = [(b.epoch, list(b["cut_id"])) for b in r]
    again = sharc.Reader(path, **SETTINGS)
    again.load_state_dict(state)
    assert [(b.epoch, list(b["cut_id"])) for b in again] == second
    assert again.state_dict()["sharc_reader_epoch"] == 1
    slots = [sharc.Reader(path, **SETTINGS, dp_rank=i, dp_size=2) for i in range(2)]
    for s in slots:
        assert [b for b in s]
    one = sharc.Reader(path, **SETTINGS)
    one.load_state_dict([s.state_dict() for s in slots])
    assert [(b.epoch, list(b["cut_id"])) for b in one] == second
    assert len(first) > 0


def test_a_reader_made_before_torch_says_so_to_a_dataloader(corpus):
    """A reader made before torch is imported is no IterableDataset: DataLoader takes it for a
    map-style dataset, and its len() or indexing says why, instead of suggesting the
    DataLoader(reader, batch_size=None) that was used."""
    pytest.importorskip("torch")
    code = ("import sys, sharc\n"
            "readers = [sharc.Reader(sys.argv[1], batch_duration=8.0, threads=1),\n"
            "           sharc.Reader(sys.argv[1], max_cuts=4, num_buckets=1, threads=1)]\n"
            "import torch.utils.data\n"
            "for r in readers:\n"
            "    try:\n"
            "        next(iter(torch.utils.data.DataLoader(r, batch_size=None)))\n"
            "    except TypeError as e:\n"
            "        print(e)\n")
    out = subprocess.run([sys.executable, "-c", code, str(corpus / "shar")], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    hint = ("made before torch was imported, this sharc.Reader is not a torch IterableDataset, which "
            "DataLoader(reader, batch_size=None) iterates: make the reader after `import torch`")
    assert len(out) == 2 and all(hint in line for line in out), out
    assert out[0].startswith("len(sharc.Reader) is not known: it batches by batch_duration")
    assert out[1].startswith("sharc.Reader is iterated, not indexed")


FIXED = dict(max_cuts=5, num_buckets=1, threads=1, seed=3)


@pytest.mark.parametrize("drop_last", [False, True])
def test_len_is_the_number_of_batches_of_a_fixed_batch_size(corpus, drop_last):
    """With max_cuts alone and one bucket, len() is the number of batches of the epoch
    iterating reads (this slot's cuts, also with more slots than shards), counted from
    metadata; DataLoader(reader, batch_size=None) has that len() too."""
    path = str(corpus / "shar")  # 2 shards of 6 cuts
    # slots' cuts: 12; 6 and 6; 3, 3 and 6 (two slots share a shard). Batches of 5, all
    # slots of an epoch together, without and with drop_last; the cuts in them, with it.
    for dp_size, batches, kept in ((1, (3, 2), 10), (2, (4, 2), 10), (3, (4, 1), 5)):
        lens, cuts = [0, 0], [0, 0]
        for rank in range(dp_size):
            r = sharc.Reader(path, dp_rank=rank, dp_size=dp_size, drop_last=drop_last, **FIXED)
            for epoch in range(2):  # len() before and after each epoch
                n = len(r)
                got = [len(b["cut_id"]) for b in r]
                assert n == len(got)
                lens[epoch] += n
                cuts[epoch] += sum(got)
            assert len(r) == len(list(r))
        assert lens == [batches[drop_last]] * 2
        assert cuts == [kept if drop_last else 12] * 2
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader
    loader = DataLoader(sharc.Reader(path, drop_last=drop_last, **FIXED), batch_size=None)
    assert len(loader) == len(list(loader)) == (2 if drop_last else 3)


def test_len_says_why_it_is_not_known(corpus):
    path = str(corpus / "shar")
    for settings, why in ((dict(threads=1, batch_duration=12.0), "it batches by batch_duration: the number"),
                          (dict(threads=1, max_cuts=5), "its cuts go to several buckets"),
                          (dict(FIXED, max_cut_duration=3.0), "its filter max_cut_duration drops"),
                          (dict(FIXED, epochs=0), "it reads epochs without end"),
                          (dict(FIXED, epochs=2), "one iteration reads 2 epochs as one stream")):
        with pytest.raises(TypeError, match=f"^len\\(sharc.Reader\\) is not known: {why}.*"
                                            r"use DataLoader\(reader, batch_size=None\)"):
            len(sharc.Reader(path, **settings))


def test_threads_default_to_the_cores_of_a_local_rank(corpus, monkeypatch):
    cores = len(os.sched_getaffinity(0))
    path = str(corpus / "shar")
    for var in ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE", "MPI_LOCALNRANKS"):
        monkeypatch.delenv(var, raising=False)
    assert f"threads={cores} ({cores} cores)" in repr(sharc.Reader(path, batch_duration=12.0))
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "8")
    want = f"threads={max(1, cores // 8)} ({cores} cores / 8 ranks on the node, OMPI_COMM_WORLD_LOCAL_SIZE)"
    assert want in repr(sharc.Reader(path, batch_duration=12.0))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    r = sharc.Reader(path, batch_duration=12.0)
    assert f"threads={max(1, cores // 2)} ({cores} cores / 2 ranks on the node, LOCAL_WORLD_SIZE)" in repr(r)
    assert repr(sharc.Reader(path, batch_duration=12.0, threads=3)) == \
        f"sharc.Reader({path!r}, threads=3, batch_duration=12.0, epoch 0)"


def test_device_keyword(corpus):
    for bad in ("gpu", "cuda:x", "cuda:"):
        with pytest.raises(ValueError, match=r"^sharc.Reader: keyword 'device' must be 'cpu', 'cuda' or 'cuda:N', got '"):
            sharc.Reader(str(corpus / "shar"), device=bad)
    batch = next(sharc.Reader(str(corpus / "shar"), device="cpu", batch_duration=30.0))
    assert batch["audio"].__dlpack_device__() == (1, 0)
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        pytest.skip("a GPU is visible: the device path is test_cuda.py's")
    # Without a usable GPU (or without CUDA in the build), opening names the device.
    with pytest.raises(sharc.Error, match=r"cuda:3"):
        sharc.Reader(str(corpus / "shar"), device="cuda:3", batch_duration=30.0)


def test_numpy_scalars_are_numbers(corpus):
    """numpy's integer and float scalars (np.int64 from an array, np.float32) are ints and
    numbers as Python's are; a float where an int goes, and numpy's bool_, are still refused."""
    path = str(corpus / "shar")
    want = [b["cut_id"] for b in sharc.Reader(path, max_cuts=4, num_buckets=1, epochs=1, threads=1)]
    got = [b["cut_id"] for b in sharc.Reader(path, max_cuts=np.int64(4), num_buckets=np.uint8(1),
                                             epochs=np.int32(1), threads=1)]
    assert got == want
    sizes = np.array([3, 2])
    r = sharc.Reader(path, bins=[np.float32(1.5), np.float64(4)], bucket_batch_size=list(sizes),
                     seed=np.int64(2), threads=1)
    assert all(len(b["cut_id"]) <= 3 for b in r)
    assert [b.epoch for b in r][:1] == [1]  # the next epoch's seed is seed + 1
    with pytest.raises(ValueError, match=r"^sharc.Reader: keyword 'num_buckets' must be in 1..65536, got 0"):
        sharc.Reader(path, num_buckets=np.int64(0))
    with pytest.raises(TypeError, match=r"^sharc.Reader: keyword 'max_cuts' must be an int, not float32"):
        sharc.Reader(path, max_cuts=np.float32(4))
    with pytest.raises(TypeError, match=r"^sharc.Reader: keyword 'max_cuts' must be an int, not bool_"):
        sharc.Reader(path, max_cuts=np.bool_(True))
    with pytest.raises(TypeError, match=r"^sharc.Reader: keyword 'batch_duration' must be a number, not bool_"):
        sharc.Reader(path, batch_duration=np.bool_(True))


@pytest.mark.parametrize("kw, hint", [
    ("duration_bins", "Lhotse's name for bins"),
    ("num_cuts_for_bins_estimate", "Lhotse's and NeMo's name for num_cuts_for_bins"),
    ("bucket_buffer_size", "NeMo's name for buffer_size"),
    ("world_size", "Lhotse's name for dp_size"),
    ("sample_rate", "NeMo's name for sampling_rate"),
    ("batch_size", "NeMo's name for max_cuts"),
    ("num_bucket", "did you mean num_buckets?"),
    ("sampling_rte", "did you mean sampling_rate?"),
    ("zzzz", None),
])
def test_unknown_keyword_names_the_sharc_keyword(corpus, kw, hint):
    """A Lhotse or NeMo name gets the sharc keyword it is; a misspelling the closest keyword."""
    with pytest.raises(TypeError) as info:
        sharc.Reader(str(corpus / "shar"), **{kw: 1})
    want = f"sharc.Reader: unknown keyword '{kw}'" + (f" ({hint})" if hint else "")
    assert str(info.value) == want


def test_quiet_and_verbose_set_what_the_library_prints(corpus):
    """As sharc read's --quiet and --verbose: quiet=True prints nothing on stderr (a failure
    still raises with its message), verbose=True adds the informational messages to the
    warnings."""
    code = ("import sys, sharc\n"
            "kw = eval(sys.argv[2])\n"
            "try:\n"
            "    for b in sharc.Reader(sys.argv[1], batch_duration=0.5, threads=1, **kw): pass\n"
            "    print('read')\n"
            "except sharc.Error as e:\n"
            "    print(type(e).__name__, e)\n")

    def run(path, **kw):
        p = subprocess.run([sys.executable, "-c", code, path, repr(kw)], capture_output=True, text=True, check=True)
        return p.stdout.strip(), p.stderr
    path = str(corpus / "shar")
    out, err = run(path)
    assert out == "read" and "sharc: warning: sampler: cut " in err and "sharc: info:" not in err
    assert run(path, quiet=True) == ("read", "")
    out, err = run(path, verbose=True)  # the library's informational messages are rare
    assert out == "read" and "sharc: warning: sampler: cut " in err
    out, err = run(path + "-missing", quiet=True)
    assert out == f"Error {path}-missing: No such file or directory" and err == ""
    with pytest.raises(ValueError, match="^sharc.Reader: give quiet or verbose, not both$"):
        sharc.Reader(path, quiet=True, verbose=True)
    with pytest.raises(TypeError, match="^sharc.Reader: keyword 'quiet' must be a bool, not int$"):
        sharc.Reader(path, quiet=1)
