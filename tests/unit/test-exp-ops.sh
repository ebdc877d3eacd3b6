#!/bin/sh
# The CPU model prices exp and erf as the JIT's inline polynomials (perfmodel.h
# RT_PERF_CPU_EXP_OPS, RT_PERF_CPU_ERF_OPS); this ties those counts to what the LLVM emitter
# builds (codegen/emit-llvm.c rt_l_expf, rt_l_erff). It emits Y(i) = f(X(i)) and counts the
# vector operations of the kernel's IR: a compare and the select it feeds are one operation
# (a min, a max or a blend), a lone select one, every FMA, fmul, fadd, fsub, fneg and shl one,
# and each other llvm.* call (fabs, copysign) one; bitcasts, loads, stores and integer loop
# arithmetic are free (the loop model's).
#   test-exp-ops.sh RTGEN ROOT OUTDIR
set -u
rtgen=$1
root=$2
out=$3
mkdir -p "$out"
fail=0
for fn in exp erf; do
    NAME=$(echo "$fn" | tr a-z A-Z)
    want=$(sed -n "s/^#define RT_PERF_CPU_${NAME}_OPS \([0-9.]*\)$/\1/p" "$root/perfmodel/perfmodel.h")
    printf 'def k_%s(float(64) X) -> (float(64) Y) {\n    Y(i) = %s(X(i))\n}\n' "$fn" "$fn" \
        >"$out/$fn.spec"
    if ! "$rtgen" --no-profile --top-k=1 -o "$out/$fn" "$out/$fn.spec" >"$out/$fn.log" 2>&1; then
        echo "FAIL: rtgen on $fn:"; cat "$out/$fn.log"; fail=1; continue
    fi
    got=$(grep -oE '= (fcmp|select|fsub|fmul|fadd|fneg|shl|call [^@]*@llvm\.[a-z]+)' \
        "$out/$fn/k_$fn.ll" | awk '
        / fcmp/ { cmp++; next } / select/ { sel++; next }
        { n++ }
        END { print n + cmp + (sel > cmp ? sel - cmp : 0) }')
    echo "$fn: the emitter builds $got vector operations, the model prices ${want:-?}"
    if [ -z "$want" ] || [ "$(printf '%.0f' "$want")" != "$got" ]; then
        echo "FAIL: RT_PERF_CPU_${NAME}_OPS is ${want:-missing}, the emitter's $fn is $got"
        fail=1
    fi
done
exit $fail
