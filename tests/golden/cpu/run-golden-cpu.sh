#!/bin/sh
# Golden emitted C of the CPU backend: regenerates tests/golden/cpu/NAME-x86-avx512.c with
#   rtgen --device=devices/x86-avx512.ini --emit=c --no-profile [--set ...] examples/SPEC.spec
# (the top-1 candidate's portable C, no profiling), diffs it with the golden file, and compiles
# the golden with `cc -O3 -march=native -fopenmp -fsyntax-only`. RTGEN_UPDATE_GOLDEN=1 rewrites
# the golden file instead of diffing. Each case is emitted twice to catch nondeterminism.
# usage: run-golden-cpu.sh RTGEN ROOT NAME
set -u
rtgen=$1
root=$2
name=$3
cd "$root" || exit 1
case $name in
matmul) spec=examples/matmul.spec; sets="--set M=64 --set N=48 --set K=32" ;;
relu) spec=examples/relu.spec; sets="" ;;
softmax) spec=examples/softmax.spec; sets="" ;;
conv2d) spec=examples/conv2d.spec
        sets="--set N=1 --set C=8 --set H=10 --set W=10 --set F=16 --set OH=5 --set OW=5" ;;
linear_gelu) spec=examples/linear_gelu.spec; sets="--set M=16" ;;
dwconv) spec=examples/dwconv.spec; sets="" ;; # a strided window read packed by rows into a ring
# a per-entry GEMM (ragged attention scores) with row tails: entries of 0 to 13 rows
qkt) spec=examples/qkt.spec; sets="--set B=8 --set H=2 --set D=16 --lengths len=tests/data/lens-layer.txt" ;;
*) echo "run-golden-cpu.sh: unknown case '$name'" >&2; exit 2 ;;
esac
golden=tests/golden/cpu/$name-x86-avx512.c
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for run in 1 2; do
    # shellcheck disable=SC2086
    if ! "$rtgen" --device=devices/x86-avx512.ini --emit=c --no-profile --top-k=1 $sets \
            -o "$tmp/out$run" "$spec" >"$tmp/log$run" 2>&1; then
        cat "$tmp/log$run"; echo "FAIL: rtgen failed on $spec"; exit 1
    fi
done
got=$tmp/out1/$(basename "$spec" .spec).c
if [ ! -s "$got" ]; then
    echo "FAIL: rtgen wrote no C source for $spec"; ls "$tmp/out1"; exit 1
fi
if ! cmp -s "$got" "$tmp/out2/$(basename "$spec" .spec).c"; then
    echo "FAIL: emitted C for $spec differs between two runs (nondeterministic)"
    diff -u "$got" "$tmp/out2/$(basename "$spec" .spec).c" | head -40
    exit 1
fi
if [ "${RTGEN_UPDATE_GOLDEN:-0}" = 1 ]; then
    cp "$got" "$golden" && echo "updated $golden"
else
    if [ ! -f "$golden" ]; then
        echo "FAIL: $golden is missing (RTGEN_UPDATE_GOLDEN=1 writes it)"; exit 1
    fi
    if ! cmp -s "$golden" "$got"; then
        diff -u "$golden" "$got"; echo "FAIL: emitted C differs from $golden"; exit 1
    fi
fi
cc=${CC:-cc}
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "skipped: $name's syntax check (no C compiler '$cc'; the golden file matched)"; exit 77
fi
if ! "$cc" -O3 -march=native -fopenmp -fsyntax-only "$golden"; then
    echo "FAIL: $golden does not compile"; exit 1
fi
echo "ok: $name"
