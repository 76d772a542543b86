"""Shared fixtures: a synthetic corpus written by sharc-gen (SHARC_GEN, set by meson test)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def _gen():
    exe = os.environ.get("SHARC_GEN")
    if not exe or not os.path.exists(exe):
        pytest.fail("SHARC_GEN is not set to build/testdata/sharc-gen (run the tests with meson test)")
    return exe


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    """Every layout, 2 shards of 6 cuts each (gzip-compressed), cuts of 0.5..4 s."""
    out = tmp_path_factory.mktemp("corpus") / "c"
    subprocess.run([_gen(), "--out", str(out), "--layout", "all", "--shards", "2", "--cuts-per-shard", "6",
                    "--max-duration", "4"], check=True, stdout=subprocess.DEVNULL)
    return out


@pytest.fixture()
def plain_shar(tmp_path):
    """A Shar corpus with uncompressed tars, for damaging members."""
    out = tmp_path / "p"
    subprocess.run([_gen(), "--out", str(out), "--layout", "shar", "--shards", "2", "--cuts-per-shard", "6",
                    "--max-duration", "4", "--compress", "none"], check=True, stdout=subprocess.DEVNULL)
    return out / "shar"


def expected(corpus, layout):
    with open(corpus / f"{layout}.expected.jsonl") as f:
        return [json.loads(line) for line in f]


def corrupt(*args):
    root = os.environ.get("SHARC_SOURCE_ROOT", os.path.join(HERE, "..", ".."))
    subprocess.run([sys.executable, os.path.join(root, "tests", "corrupt.py"), *map(str, args)], check=True)


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """SentencePiece models trained by spm_train on tests/data/tokenizer_text.txt: {lang: path}
    for en, de and pl (vocabularies of 70, 90 and 110)."""
    if not shutil.which("spm_train"):
        pytest.skip("spm_train (Debian sentencepiece) is not installed")
    root = os.environ.get("SHARC_SOURCE_ROOT", os.path.join(HERE, "..", ".."))
    text = os.path.join(root, "tests", "data", "tokenizer_text.txt")
    d = tmp_path_factory.mktemp("spm")
    out = {}
    for name, vocab in (("en", 70), ("de", 90), ("pl", 110)):
        subprocess.run(["spm_train", f"--input={text}", f"--model_prefix={d / name}", f"--vocab_size={vocab}",
                        "--character_coverage=1.0", "--minloglevel=2"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out[name] = str(d / f"{name}.model")
    return out
