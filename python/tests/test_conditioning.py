"""Conditioning from Python (docs/conditioning.md): resample, speed_perturb, volume_perturb,
with Lhotse's length rules, and the keywords' errors."""
from decimal import ROUND_HALF_DOWN, ROUND_HALF_UP, Decimal

import pytest

import sharc
from conftest import expected

np = pytest.importorskip("numpy")


def compute_num_samples(duration, rate):
    """lhotse.utils.compute_num_samples"""
    return int(Decimal(round(duration * rate, ndigits=8)).quantize(0, rounding=ROUND_HALF_UP))


def perturb_num_samples(n, factor):
    """lhotse.utils.perturb_num_samples"""
    rounding = ROUND_HALF_UP if factor >= 1.0 else ROUND_HALF_DOWN
    return int(Decimal(round(n / factor, ndigits=8)).quantize(0, rounding=rounding))


def rows(reader):
    for b in reader:
        lens = np.from_dlpack(b["audio_lens"])
        dur = np.from_dlpack(b["duration"])
        audio = np.from_dlpack(b["audio"])
        for i, cut in enumerate(b["cut_id"]):
            assert not audio[i, lens[i]:].any()
            yield cut, int(lens[i]), float(dur[i])


def test_resample_keeps_durations(corpus):
    exp = {e["id"]: e for e in expected(corpus, "shar")}
    got = list(rows(sharc.Reader(str(corpus / "shar"), sampling_rate=8000, resample=True, max_cuts=4,
                                 threads=2)))
    assert sorted(c for c, _, _ in got) == sorted(exp)
    for cut, n, d in got:
        e = exp[cut]
        assert n == compute_num_samples(e["num_samples"] / e["sampling_rate"], 8000)
        assert d == pytest.approx(e["duration"], abs=1e-6)


def test_speed_perturb_lengths_and_durations(corpus):
    exp = {e["id"]: e for e in expected(corpus, "shar")}
    factors = [0.9, 1.0, 1.1]
    seen = set()
    for cut, n, d in rows(sharc.Reader(str(corpus / "shar"), speed_perturb=factors, volume_perturb=[-6, 6],
                                       max_cuts=4, threads=2, seed=5)):
        e = exp[cut]
        f = [f for f in factors if perturb_num_samples(e["num_samples"], f) == n]
        assert f, (cut, n)
        seen.add(f[0])
        if f[0] != 1.0:
            assert d == pytest.approx(n / e["sampling_rate"], abs=1e-6)
    assert len(seen) > 1


@pytest.mark.parametrize("kw, exc, text", [
    (dict(resample=True), sharc.Error, "invalid reader settings: resample needs sampling_rate"),
    (dict(speed_perturb=[0.0]), ValueError, "sharc.Reader: keyword 'speed_perturb' must be > 0"),
    (dict(speed_perturb_prob=1.5), ValueError, "sharc.Reader: keyword 'speed_perturb_prob' must be"),
    (dict(volume_perturb=[6, -6]), ValueError, "sharc.Reader: keyword 'volume_perturb' must be [low, high]"),
    (dict(volume_perturb_prob=-1), ValueError, "sharc.Reader: keyword 'volume_perturb_prob' must be"),
])
def test_bad_conditioning_keywords(corpus, kw, exc, text):
    with pytest.raises(exc) as info:
        sharc.Reader(str(corpus / "shar"), max_cuts=2, **kw)
    assert str(info.value).startswith(text), str(info.value)


def test_noise_at_the_drawn_snr(corpus, tmp_path):
    """Noise from a dataset of another layout, mixed into every cut: padding stays 0, and
    each row differs from the clean one by noise at an SNR in the range."""
    common = dict(sampling_rate=16000, noise=[str(corpus / "wds")], noise_snr=[5, 15], max_cuts=4,
                  threads=2, seed=1)
    clean = {c: n for c, n, _ in rows(sharc.Reader(str(corpus / "shar"), noise_prob=0.0, **common))}
    audio = {}
    for reader, p in ((sharc.Reader(str(corpus / "shar"), noise_prob=0.0, **common), "clean"),
                      (sharc.Reader(str(corpus / "shar"), noise_prob=1.0, **common), "noisy")):
        for b in reader:
            a = np.from_dlpack(b["audio"])
            lens = np.from_dlpack(b["audio_lens"])
            for i, cut in enumerate(b["cut_id"]):
                audio[p, cut] = a[i, :lens[i]].astype(np.float64)
                assert not a[i, lens[i]:].any()
    for cut, n in clean.items():
        x, y = audio["clean", cut], audio["noisy", cut]
        assert len(x) == len(y) == n
        snr = 10 * np.log10((x * x).sum() / ((y - x) ** 2).sum())
        assert 5 - 0.2 <= snr <= 15 + 0.2, (cut, snr)


@pytest.mark.parametrize("kw, exc, text", [
    (dict(noise="x"), sharc.Error, "invalid reader settings: noise needs sampling_rate"),
    (dict(noise="x", sampling_rate=16000, noise_snr=[9, 1]), ValueError,
     "sharc.Reader: keyword 'noise_snr' must be [low, high] SNRs in dB"),
    (dict(noise_prob=3), ValueError, "sharc.Reader: keyword 'noise_prob' must be"),
    (dict(noise_prob=0.5), ValueError, "sharc.Reader: keyword 'noise_prob' applies with noise (the noise "
                                       "dataset): give noise too, or remove it"),
    (dict(noise_snr=[5, 10], sampling_rate=16000), ValueError, "sharc.Reader: keyword 'noise_snr' applies with noise"),
    (dict(noise_max_bytes=1 << 20), ValueError, "sharc.Reader: keyword 'noise_max_bytes' applies with noise"),
    (dict(speed_perturb_prob=0.5), ValueError, "sharc.Reader: keyword 'speed_perturb_prob' applies with "
                                               "speed_perturb (the speed factors): give speed_perturb too"),
    (dict(volume_perturb_prob=0.5), ValueError, "sharc.Reader: keyword 'volume_perturb_prob' applies with "
                                                "volume_perturb (the gain range): give volume_perturb too"),
])
def test_bad_noise_keywords(corpus, kw, exc, text):
    with pytest.raises(exc) as info:
        sharc.Reader(str(corpus / "shar"), max_cuts=2, **kw)
    assert str(info.value).startswith(text), str(info.value)


def test_batches_carry_the_draws(corpus):
    """Each batch has every cut's speed factor, linear gain and noise SNR (NaN without noise):
    the lengths follow the factors, and against the same cuts without gain and noise each row
    is the clean one times its gain, plus noise at its SNR where it has one."""
    exp = {e["id"]: e for e in expected(corpus, "shar")}
    common = dict(sampling_rate=16000, speed_perturb=[0.9, 1.0, 1.1], volume_perturb=[-6, 6],
                  noise=[str(corpus / "wds")], max_cuts=4, threads=2, seed=3)
    clean = {}
    for b in sharc.Reader(str(corpus / "shar"), volume_perturb_prob=0.0, noise_prob=0.0, **common):
        a, lens = np.from_dlpack(b["audio"]), np.from_dlpack(b["audio_lens"])
        assert (np.from_dlpack(b["gain"]) == 1).all() and np.isnan(np.from_dlpack(b["snr_db"])).all()
        for i, cut in enumerate(b["cut_id"]):
            clean[cut] = a[i, :lens[i]].astype(np.float64)
    seen = {"noise": 0, "clean": 0}
    for b in sharc.Reader(str(corpus / "shar"), noise_prob=0.5, **common):
        a, lens = np.from_dlpack(b["audio"]), np.from_dlpack(b["audio_lens"])
        speed, gain, snr = (np.from_dlpack(b[k]) for k in ("speed", "gain", "snr_db"))
        assert speed.dtype == gain.dtype == snr.dtype == np.float32
        assert len(speed) == len(gain) == len(snr) == len(b["cut_id"])
        for i, cut in enumerate(b["cut_id"]):
            assert speed[i] in (np.float32(0.9), np.float32(1.0), np.float32(1.1)), speed[i]
            assert lens[i] == perturb_num_samples(exp[cut]["num_samples"], float(speed[i]))
            assert 10 ** -0.3 - 1e-6 <= gain[i] <= 10 ** 0.3 + 1e-6, gain[i]
            x, y = clean.pop(cut) * float(gain[i]), a[i, :lens[i]].astype(np.float64)
            if np.isnan(snr[i]):
                seen["clean"] += 1
                np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-7)
            else:
                seen["noise"] += 1
                assert 10 <= snr[i] <= 20, snr[i]
                measured = 10 * np.log10((x * x).sum() / ((y - x) ** 2).sum())
                assert abs(measured - snr[i]) <= 0.2, (cut, measured, snr[i])
    assert not clean and seen["noise"] > 0 and seen["clean"] > 0, seen


def test_no_draws_without_conditioning(corpus):
    b = next(iter(sharc.Reader(str(corpus / "shar"), max_cuts=4)))
    assert not {"speed", "gain", "snr_db"} & set(b.keys())
