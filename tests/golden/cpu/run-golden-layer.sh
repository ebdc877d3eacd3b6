#!/bin/sh
# Golden entry point of a layer (layer-emit.h): regenerates tests/golden/cpu/layer-NAME.c and
# layer-NAME.h with
#   rtgen --device=devices/x86-avx2.ini --emit=c --no-profile --top-k=1 examples/layers/NAME.spec
# (the defs' top-1 candidates, no profiling), twice (to catch nondeterminism), diffs them with the
# golden files, and compiles the emitted entry point with its kernels (`cc -O2 -fopenmp -c`).
# RTGEN_UPDATE_GOLDEN=1 rewrites the golden files instead of diffing.
# usage: run-golden-layer.sh RTGEN ROOT NAME
set -u
rtgen=$1
root=$2
name=$3
cd "$root" || exit 1
spec=examples/layers/$name.spec
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for run in 1 2; do
    if ! "$rtgen" --device=devices/x86-avx2.ini --emit=c --no-profile --top-k=1 \
            -o "$tmp/out$run" "$spec" >"$tmp/log$run" 2>&1; then
        cat "$tmp/log$run"; echo "FAIL: rtgen failed on $spec"; exit 1
    fi
done
for ext in c h; do
    got=$tmp/out1/$name.$ext
    golden=tests/golden/cpu/layer-$name.$ext
    if [ ! -s "$got" ]; then
        echo "FAIL: rtgen wrote no $name.$ext for $spec"; ls "$tmp/out1"; exit 1
    fi
    if ! cmp -s "$got" "$tmp/out2/$name.$ext"; then
        echo "FAIL: $name.$ext differs between two runs (nondeterministic)"
        diff -u "$got" "$tmp/out2/$name.$ext" | head -40
        exit 1
    fi
    if [ "${RTGEN_UPDATE_GOLDEN:-0}" = 1 ]; then
        cp "$got" "$golden" && echo "updated $golden"
    elif [ ! -f "$golden" ]; then
        echo "FAIL: $golden is missing (RTGEN_UPDATE_GOLDEN=1 writes it)"; exit 1
    elif ! cmp -s "$golden" "$got"; then
        diff -u "$golden" "$got"; echo "FAIL: emitted $name.$ext differs from $golden"; exit 1
    fi
done
cc=${CC:-cc}
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "skipped: $name's compile (no C compiler '$cc'; the golden files matched)"; exit 77
fi
if ! (cd "$tmp/out1" && "$cc" -O2 -fopenmp -Wall -Werror -c "$name.c" && \
        "$cc" -O2 -fopenmp -c ./*.c); then
    echo "FAIL: the emitted $name.c and its kernels do not compile"; exit 1
fi
echo "ok: $name"
