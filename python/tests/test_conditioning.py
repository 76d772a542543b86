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
