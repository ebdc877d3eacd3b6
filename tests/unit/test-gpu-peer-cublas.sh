#!/bin/sh
# bench/gpu-peer-cublas to the driver boundary (no GPU here): it opens tests/unit/fake-cublas.c
# (a host stand-in for libcuda and libcublas, through $RTGEN_LIBCUDA and $RTGEN_LIBCUBLAS) and
#   - runs SGEMM, strided batched SGEMM, and cublasGemmEx on half and bfloat16 inputs into float
#     (CUDA_R_16F / CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F): one line per shape, named
#     cublas, cublas_f16, cublas_bf16, "ok" against its double reference, 1 ms per GEMM (the
#     fake's clock), exit 0;
#   - says "wrong" and exits 1 when the library's result is off ($FAKE_CUBLAS_WRONG);
#   - refuses a batched 16-bit shape and a type word without a shape (exit 2).
#   test-gpu-peer-cublas.sh PEER FAKE_LIB
set -u
peer=$1
fake=$2
fail=0
export RTGEN_LIBCUDA="$fake" RTGEN_LIBCUBLAS="$fake"
out=$("$peer" --reps=3 48 40 24 , f16 48 40 24 , bf16 32 24 16 , 16 8 8 3 2>&1)
rc=$?
echo "$out"
[ $rc = 0 ] || { echo "FAIL: exit $rc"; fail=1; }
for want in "cublas 48 40 24 1 1.0000 1.0000 " "cublas_f16 48 40 24 1 1.0000 1.0000 " \
    "cublas_bf16 32 24 16 1 1.0000 1.0000 " "cublas 16 8 8 3 3.0000 3.0000 "; do
    echo "$out" | grep "^$want" | grep -q ' ok$' || { echo "FAIL: no ok line '$want...'"; fail=1; }
done
out=$(FAKE_CUBLAS_WRONG=1 "$peer" --reps=2 f16 32 16 16 2>&1)
rc=$?
[ $rc = 1 ] && echo "$out" | grep -q '^cublas_f16 32 16 16 1 .* wrong$' ||
    { echo "FAIL: a wrong result gave exit $rc: $out"; fail=1; }
for bad in "f16 8 8 8 2" "8 8 8 , bf16" "8 f16 8 8"; do
    "$peer" $bad >/dev/null 2>&1
    rc=$?
    [ $rc = 2 ] || { echo "FAIL: '$bad' gave exit $rc, not 2 (usage)"; fail=1; }
done
exit $fail
