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
