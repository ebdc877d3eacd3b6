#!/bin/sh
# The MFMA GEMM (codegen/lower-gpu-mfma.c) run on the host: no AMD GPU here, so the emitted
# .hip.cpp of each "mfma" candidate on devices/mi250x.ini (gfx90a) is compiled by the host C++
# compiler against tests/unit/mfma-host.hpp (threads as std::threads, __syncthreads a barrier,
# v_mfma_f32_16x16x16{f16,bf16_1k} over a wavefront of 64 lanes as the CDNA 2 ISA lays out its
# operands and accumulator, -fsanitize=alignment for the 64-bit operand reads and 128-bit copies)
# and its C compared with a double reference (mfma-host-main.cpp over gemm16-host-main.hpp). Shapes: full tiles and
# guarded edges, half and bfloat16, rtgen's top-2 of each; every candidate's plan must say
# mfma. Exit 77 without a C++20 compiler that has _Float16.
#   test-gpu-mfma-host.sh RTGEN ROOT
set -u
rtgen=$1
root=$2
cxx=${CXX:-c++}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-gpu-mfma-host.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
printf '#include <barrier>\nint main() { std::barrier<> b(1); b.arrive_and_wait(); _Float16 h = (_Float16)1.0f; return (int)(float)h - 1; }\n' >"$tmp/probe.cpp"
"$cxx" -std=c++20 -pthread -o "$tmp/probe" "$tmp/probe.cpp" 2>/dev/null && "$tmp/probe" ||
    { echo "no C++20 compiler with _Float16 ($cxx)"; exit 77; }
fail=0
# run SPEC BF16(0/1) M N K
run() {
    spec=$1 bf=$2 M=$3 N=$4 K=$5
    name=$(basename "$spec" .spec)-${M}x${N}x$K
    "$rtgen" --device="$root/devices/mi250x.ini" --no-profile --top-k=2 --set M="$M" --set N="$N" \
        --set K="$K" -o "$tmp/$name" "$root/tests/data/$spec" >"$tmp/$name.log" 2>&1 ||
        { echo "FAIL $name: rtgen"; cat "$tmp/$name.log"; fail=1; return; }
    n=0
    for src in "$tmp/$name"/*.hip.cpp; do
        grep -q '^// plan phase 0: .*; mma: mfma 16x16x16' "$src" ||
            { echo "FAIL $name: $(basename "$src") not on MFMA: $(grep '^// plan phase 0' "$src")"; fail=1; continue; }
        kname=$(sed -n 's/^\(rt_[A-Za-z0-9_]*\)(.*/\1/p' "$src" | head -n 1)
        threads=$(sed -n 's/^\/\/ plan phase 0: .*; threads \([0-9]*\), blocks \([0-9]*\);.*/\1/p' "$src")
        blocks=$(sed -n 's/^\/\/ plan phase 0: .*; threads \([0-9]*\), blocks \([0-9]*\);.*/\2/p' "$src")
        exe=$tmp/$name-$n
        defs=
        [ "$bf" = 0 ] || defs=-DRT_BF16
        "$cxx" -std=c++20 -O1 -pthread -fsanitize=alignment -fno-sanitize-recover=all \
            -Wno-unused-variable -Wno-unused-function -D__HIPCC_RTC__ $defs -I"$root/tests/unit" \
            -DRT_KERNEL_FILE="\"$src\"" -DRT_KERNEL="$kname" -DRT_THREADS="$threads" \
            -DRT_BLOCKS="$blocks" -DRT_M="$M" -DRT_N="$N" -DRT_K="$K" \
            -o "$exe" "$root/tests/unit/mfma-host-main.cpp" 2>"$exe.cc.log" ||
            { echo "FAIL $name: $(basename "$src") does not compile on the host"; head -n 20 "$exe.cc.log"; fail=1; continue; }
        if r=$("$exe" 2>&1); then
            echo "$name $(basename "$src") ($(sed -n 's/^\/\/ plan phase 0: .*; mma: \(.*\)$/\1/p' "$src")): $r"
        else
            echo "FAIL $name $(basename "$src"): $r"
            fail=1
        fi
        n=$((n + 1))
    done
    [ "$n" -gt 0 ] || { echo "FAIL $name: no candidate"; fail=1; }
}
run half-gemm.spec 0 256 256 64
run bf16-gemm.spec 1 128 128 64
run half-gemm.spec 0 300 136 72
run bf16-gemm.spec 1 136 200 48
exit $fail
