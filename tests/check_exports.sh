#!/bin/sh
# Fails when the shared library exports a symbol without the sharc_ prefix, or an internal
# sharc__ one (a double underscore marks a function shared between sharc's own files, which
# must stay hidden).
set -eu
lib="$1"
syms=$(nm -D --defined-only "$lib" | awk '{print $3}')
bad=$(printf '%s\n' "$syms" | grep -v '^sharc_' | grep -v '^_' || true)
if [ -n "$bad" ]; then
    echo "symbols exported without the sharc_ prefix:"
    echo "$bad"
    exit 1
fi
internal=$(printf '%s\n' "$syms" | grep '^sharc__' || true)
if [ -n "$internal" ]; then
    echo "internal sharc__ symbols exported:"
    echo "$internal"
    exit 1
fi
count=$(printf '%s\n' "$syms" | grep -c '^sharc_')
echo "$count sharc_ symbols exported, none without the prefix, none internal"
