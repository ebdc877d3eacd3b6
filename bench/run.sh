#!/bin/sh
# Runs the whole CPU benchmark suite (issue 4 and issue 6 §3) in one go:
#   1. bench-ops-blis: BLIS sgemm (skx kernels on AVX-512 hosts) on every GEMM shape of bench-ops;
#   2. bench-ops: rtgen against oneDNN, OpenBLAS (SkylakeX on AVX-512 hosts) and the BLIS results,
#      1 and 2 threads;
#   3. bench-model: the perfmodel's ranking of the top-10 against measurement, on the tuning and
#      the held-out set;
#   4. bench-contract: issue 20's contractions (batched, ragged, triangular, vgemm) against oneDNN
#      and OpenBLAS, each line graded PASS/MISS against the issue's target.
# usage: bench/run.sh [--quick] [--ops=NAME,...] [--model-device=FILE.ini] [--contract-only]
# Environment: RTGEN_BENCH_BUILD (default build-bench) is configured and built if needed.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RTGEN_BENCH_BUILD:-$root/build-bench}
quick=""
ops=""
model_device=""
contract_only=""
for arg in "$@"; do
    case $arg in
    --quick) quick=--quick ;;
    --ops=*) ops=$arg ;;
    --model-device=*) model_device="--device=${arg#--model-device=}" ;;
    --contract-only) contract_only=1 ;;
    *) echo "usage: bench/run.sh [--quick] [--ops=NAME,...] [--model-device=FILE.ini] [--contract-only]" >&2; exit 2 ;;
    esac
done
# Both libraries choose their kernels when they load: set before any program starts. Only on
# AVX-512 hosts (a Zen 4 CPU is not known to OpenBLAS 0.3.21 and BLIS, which fall back to SSE3
# and haswell kernels); an AVX2 host they detect themselves, and skx kernels would die there.
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
    export OPENBLAS_CORETYPE=SkylakeX
    export BLIS_ARCH_TYPE=0
fi
budget=200
[ -n "$quick" ] && budget=60
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" -j2 --target bench-ops bench-ops-blis bench-model bench-contract >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# LLVM's feature-name warnings from the JIT are noise here; everything else on stderr is kept.
quiet() { { "$@" 2>&1 1>&3 | { grep -v "is not a recognized feature" >&2 || true; }; } 3>&1; }

# shellcheck disable=SC2086
contract() { quiet "$build/bench/bench-contract" $quick --budget-ms=$budget; }
if [ -n "$contract_only" ]; then
    echo "== bench-contract: contractions vs oneDNN, OpenBLAS (issue 20's targets)"
    contract
    exit 0
fi
echo "== bench-ops-blis: BLIS sgemm"
# shellcheck disable=SC2086
gemms=$("$build/bench/bench-ops" --list-gemm $quick $ops)
if [ -n "$gemms" ]; then
    # shellcheck disable=SC2086
    "$build/bench/bench-ops-blis" --budget-ms=$budget $gemms >"$tmp/blis.txt"
    cat "$tmp/blis.txt"
fi
echo
echo "== bench-ops: rtgen vs oneDNN, OpenBLAS, BLIS"
# shellcheck disable=SC2086
quiet "$build/bench/bench-ops" $quick $ops --budget-ms=$budget --blis="$tmp/blis.txt"
echo
echo "== bench-model: predicted vs measured over the top-10, tuning and held-out sets"
# shellcheck disable=SC2086
quiet "$build/bench/bench-model" --runs=5 $quick $model_device
echo
echo "== bench-contract: contractions vs oneDNN, OpenBLAS (issue 20's targets)"
contract
