#!/bin/sh
# The matrix-instruction GEMM (codegen/lower-gpu-mma*.c) run on the host: no GPU here and PoCL
# has no matrix instructions, so the emitted .cu of each "mma" candidate is compiled by the host
# C++ compiler against tests/unit/wmma-host.hpp (threads as std::threads, __syncthreads a
# barrier, WMMA fragments per lane, ldmatrix and mma.sync m16n8k16 as the PTX ISA lays their
# fragments over the warp's lanes, CUDA's alignment rules checked, -fsanitize=alignment for the
# 128-bit copies and 64-bit stores) and its C compared with a double reference
# (wmma-host-main.cpp over gemm16-host-main.hpp). Shapes: full tiles and guarded edges, half and bfloat16, on h100.ini
# (sm_90) and a100.ini (sm_80); the top-2 of each, those whose plan says mma (at least one per
# shape; on the full shapes, at least one on mma.sync, one with cp.async stages and one with 3
# or more, which wmma-host.hpp runs asynchronously). Exit 77 without a C++20 compiler.
#   test-gpu-mma-host.sh RTGEN ROOT
set -u
rtgen=$1
root=$2
cxx=${CXX:-c++}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-gpu-mma-host.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/inc"
: >"$tmp/inc/cuda_fp16.h"
: >"$tmp/inc/cuda_bf16.h"
: >"$tmp/inc/mma.h"
: >"$tmp/inc/cuda_pipeline.h"
printf '#include <barrier>\nint main() { std::barrier<> b(1); b.arrive_and_wait(); }\n' >"$tmp/probe.cpp"
"$cxx" -std=c++20 -pthread -o "$tmp/probe" "$tmp/probe.cpp" 2>/dev/null || { echo "no C++20 compiler ($cxx)"; exit 77; }
fail=0
# run DEVICE SPEC T16 CONV M N K [db]: with db, at least one candidate is double-buffered
run() {
    dev=$1 spec=$2 t16=$3 conv=$4 M=$5 N=$6 K=$7 want_db=${8:-}
    name=$(basename "$dev" .ini)-$(basename "$spec" .spec)-${M}x${N}x$K
    "$rtgen" --device="$root/devices/$dev" --no-profile --top-k=2 --set M="$M" --set N="$N" \
        --set K="$K" -o "$tmp/$name" "$root/tests/data/$spec" >"$tmp/$name.log" 2>&1 ||
        { echo "FAIL $name: rtgen"; cat "$tmp/$name.log"; fail=1; return; }
    n=0 n_db=0 n_sync=0 n_ms=0
    for cu in "$tmp/$name"/*.cu; do
        grep -q '^// plan phase 0: .*; mma: ' "$cu" || continue
        kname=$(sed -n 's/^\(rt_[A-Za-z0-9_]*\)(.*/\1/p' "$cu" | head -n 1)
        threads=$(sed -n 's/^\/\/ plan phase 0: .*; threads \([0-9]*\), blocks \([0-9]*\);.*/\1/p' "$cu")
        blocks=$(sed -n 's/^\/\/ plan phase 0: .*; threads \([0-9]*\), blocks \([0-9]*\);.*/\2/p' "$cu")
        exe=$tmp/$name-$n
        "$cxx" -std=c++20 -O1 -pthread -fsanitize=alignment -fno-sanitize-recover=all \
            -Wno-unused-variable -Wno-unused-function -I"$tmp/inc" -I"$root/tests/unit" \
            -DRT_KERNEL_FILE="\"$cu\"" -DRT_KERNEL="$kname" -DRT_THREADS="$threads" \
            -DRT_BLOCKS="$blocks" -DRT_M="$M" -DRT_N="$N" -DRT_K="$K" -DRT_T16="$t16" \
            -DRT_CONV="$conv" -o "$exe" "$root/tests/unit/wmma-host-main.cpp" 2>"$exe.cc.log" ||
            { echo "FAIL $name: $(basename "$cu") does not compile on the host"; head -n 20 "$exe.cc.log"; fail=1; continue; }
        if r=$("$exe" 2>&1); then
            echo "$name $(basename "$cu") ($(sed -n 's/^\/\/ plan phase 0: .*; mma: \(.*\)$/\1/p' "$cu")): $r"
        else
            echo "FAIL $name $(basename "$cu"): $r"
            fail=1
        fi
        n=$((n + 1))
        ! grep -q '^// plan phase 0: .*\(double-buffered\|stages\) (cp.async)' "$cu" || n_db=$((n_db + 1))
        ! grep -q '^// plan phase 0: .*; mma: mma.sync' "$cu" || n_sync=$((n_sync + 1))
        ! grep -q '^// plan phase 0: .*, [3-9] stages (cp.async)' "$cu" || n_ms=$((n_ms + 1))
    done
    [ -z "$want_db" ] || [ "$n_db" -gt 0 ] || { echo "FAIL $name: no double-buffered candidate"; fail=1; }
    [ -z "$want_db" ] || [ "$n_sync" -gt 0 ] || { echo "FAIL $name: no mma.sync candidate"; fail=1; }
    [ -z "$want_db" ] || [ "$n_ms" -gt 0 ] || { echo "FAIL $name: no candidate of 3 or more cp.async stages"; fail=1; }
    [ "$n" -gt 0 ] || { echo "FAIL $name: no candidate on matrix instructions"; grep '^// plan' "$tmp/$name"/*.cu; fail=1; }
}
run h100.ini half-gemm.spec __half __float2half_rn 128 128 128 db
run h100.ini half-gemm.spec __half __float2half_rn 300 136 72
run h100.ini bf16-gemm.spec __nv_bfloat16 __float2bfloat16_rn 128 128 128 db
run a100.ini bf16-gemm.spec __nv_bfloat16 __float2bfloat16_rn 200 136 72
run a100.ini half-gemm.spec __half __float2half_rn 136 200 40
exit $fail
