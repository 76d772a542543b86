#!/usr/bin/env bash
# docs/examples/train_loop.c against the INSTALLED library: meson install into a temporary
# DESTDIR, compile with `pkg-config --cflags --libs sharc` (PKG_CONFIG_SYSROOT_DIR pointing
# into it), run on 4 ranks with --mesh dp=2,cp=2 over a generated corpus, and check that
# every peer printed its source's steps, that all ended together, and that a run resumed
# from the state saved after step 1 yields exactly the remaining steps.
#   train_loop_example.sh BUILD_ROOT SOURCE_ROOT SHARC_GEN
set -euo pipefail
build=$1 src=$2 gen=$3
unset LD_LIBRARY_PATH # meson points it at the build tree; the example must use the install
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

meson install -C "$build" --no-rebuild --destdir "$tmp/root" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; exit 1; }
opt() { meson introspect "$build" --buildoptions |
  python3 -c "import json,sys; print([o['value'] for o in json.load(sys.stdin) if o['name']=='$1'][0])"; }
prefix=$(opt prefix) libdir=$(opt libdir)
case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac
export PKG_CONFIG_SYSROOT_DIR=$tmp/root PKG_CONFIG_PATH=$tmp/root$libdir/pkgconfig
test -f "$tmp/root$prefix/include/sharc/loader.h"
test -f "$tmp/root$prefix/include/sharc/mpi.h"
flags=$(pkg-config --cflags --libs sharc)
case $flags in *"$tmp/root"*) ;; *) echo "pkg-config did not point into DESTDIR: $flags"; exit 1 ;; esac
mpi_flags=$(env -u PKG_CONFIG_SYSROOT_DIR pkg-config --cflags --libs ompi-c 2>/dev/null ||
  mpicc --showme:compile --showme:link)
# A sanitizer build's library needs its runtime in the program too.
sanitize=$(opt b_sanitize)
[ "$sanitize" = none ] || mpi_flags="$mpi_flags -fsanitize=$sanitize"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror "$src/docs/examples/train_loop.c" $flags $mpi_flags \
  -Wl,-rpath,"$tmp/root$libdir" -o "$tmp/train_loop"
if ldd "$tmp/train_loop" | grep -q "libsharc.*$build"; then
  echo "the example linked the build tree's library, not the installed one"; exit 1
fi

"$gen" --out "$tmp/data" --layout shar --compress none --shards 4 --cuts-per-shard 8 \
  --max-duration 5 >/dev/null
run() { mpirun --oversubscribe -n 4 "$tmp/train_loop" --mesh dp=2,cp=2 "$tmp/data/shar" "$@"; }
run "$tmp/state" >"$tmp/full.txt"
run "$tmp/state" >"$tmp/resumed.txt"

python3 - "$tmp/full.txt" "$tmp/resumed.txt" <<'PY'
import re, sys
def parse(path):
    steps, ends = {}, {}
    for line in open(path):
        m = re.match(r"rank (\d) \((source|peer)\): step (\d+), (\d+) cuts, first (\S*), sum (\S+)", line)
        if m:
            r = int(m.group(1))
            assert m.group(2) == ("source" if r % 2 == 0 else "peer"), line
            steps.setdefault(r, []).append((int(m.group(3)), m.group(4), m.group(5), m.group(6)))
            continue
        m = re.match(r"rank (\d): end of data after (\d+) steps", line)
        assert m, f"unexpected line: {line!r}"
        ends[int(m.group(1))] = int(m.group(2))
    assert sorted(ends) == [0, 1, 2, 3], f"not every rank ended: {ends}"
    return steps, ends
full, ends = parse(sys.argv[1])
for src, peer in ((0, 1), (2, 3)):
    assert full[src] == full[peer], f"rank {peer} differs from its source {src}"
    assert ends[src] == ends[peer] == len(full[src]) >= 3
    assert [s[0] for s in full[src]] == list(range(len(full[src])))
resumed, _ = parse(sys.argv[2])
for src, peer in ((0, 1), (2, 3)):
    # The state was saved after the second step (1): the resumed run starts at step 2.
    assert resumed[src] == resumed[peer]
    assert [s[0] for s in resumed[src]][:1] == [2], resumed[src][:1]
    assert resumed[src][: len(full[src]) - 2] == full[src][2:], "resume differs from the run"
print("train_loop example: installed headers and pkg-config, 4 ranks, resume ok")
PY
