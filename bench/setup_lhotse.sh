#!/bin/sh
# Create a Python virtual environment with Lhotse for bench/lhotse_bench.py.
#
#   bench/setup_lhotse.sh [VENV_DIR]      (default: build-bench/lhotse-venv in the repository)
#
# Installs lhotse (and what its Shar reader and DynamicBucketingSampler import: numpy,
# soundfile, urllib3) from PyPI. lhotse requires torch, so pip also installs torch, which on
# PyPI is the CUDA build (torch plus nvidia-* wheels: the venv is about 5.4 GB); the benchmark
# uses only the CPU and none of the code it times calls torch. Where torch cannot be imported
# (installed without it, e.g. `pip install --no-deps`), lhotse_bench.py supplies a minimal
# stand-in module (see its docstring).
# LHOTSE_VERSION pins the version (default: the newest on PyPI).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-$repo/build-bench/lhotse-venv}
python=${PYTHON:-python3}
spec=lhotse${LHOTSE_VERSION:+==$LHOTSE_VERSION}

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$spec" numpy soundfile \
    urllib3
# Import it the way the benchmark does (with the torch stand-in when torch is absent).
"$venv/bin/python" -c "import sys; sys.path.insert(0, sys.argv[1]); import lhotse_bench as b
lhotse, _, _, torch = b.import_lhotse(); import numpy, soundfile
print('lhotse', lhotse.__version__, '| numpy', numpy.__version__, '| soundfile',
      soundfile.__version__, '| libsndfile', soundfile.__libsndfile_version__, '| torch:', torch)" \
    "$repo/bench"
echo "$venv"
