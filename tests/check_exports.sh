#!/bin/sh
# Fails when the shared library exports a symbol without the sharc_ prefix.
set -eu
lib="$1"
bad=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^sharc_' | grep -v '^_' || true)
if [ -n "$bad" ]; then
    echo "symbols exported without the sharc_ prefix:"
    echo "$bad"
    exit 1
fi
count=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -c '^sharc_')
echo "$count sharc_ symbols exported, none without the prefix"
