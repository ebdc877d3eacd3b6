#!/bin/sh
# test-check-size.sh: scripts/check-size.sh on generated trees: a function of 151 lines with a
# signature on two lines is reported, one of 150 lines and a 200-line table are not, a file of
# 1501 lines is reported, and an allow-list entry lets exactly its offender through.
#   tests/layers/test-check-size.sh SCRIPT
set -u
script=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mkdir -p "$tmp/src" "$tmp/hal"
# body N: a function whose opening line to closing brace spans N lines (signature on 2 lines).
fn() {
    printf 'static int %s(int a,\n              int b) {\n' "$1"
    i=0
    while [ $i -lt $(($2 - 3)) ]; do echo "    a += b;"; i=$((i + 1)); done
    echo "}"
}
{
    fn long_fn 151
    echo
    fn ok_fn 150
    echo
    echo "static const int table[sizeof(int) * 50] = {"
    i=0
    while [ $i -lt 200 ]; do echo "    $i,"; i=$((i + 1)); done
    echo "};"
} >"$tmp/src/a.c"
i=0
while [ $i -lt 1501 ]; do echo "int v$i;"; i=$((i + 1)); done >"$tmp/hal/big.c"

out=$(sh "$script" "$tmp" /dev/null 2>&1) && fail "offenders passed: $out"
echo "$out" | grep -q "src/a.c: function long_fn is 151 lines" || fail "long_fn not reported: $out"
echo "$out" | grep -q "ok_fn" && fail "ok_fn (150 lines) reported: $out"
echo "$out" | grep -q "table" && fail "an initializer reported as a function: $out"
echo "$out" | grep -q "hal/big.c: 1501 lines" || fail "big.c not reported: $out"
[ "$(echo "$out" | grep -c error)" -eq 2 ] || fail "expected 2 errors: $out"

printf 'src/a.c long_fn plan\n' >"$tmp/allow"
out=$(sh "$script" "$tmp" "$tmp/allow" 2>&1) && fail "big.c passed with long_fn allowed: $out"
echo "$out" | grep -q "allowed: src/a.c: function long_fn" || fail "long_fn not allowed: $out"
printf 'src/a.c long_fn plan\nhal/big.c - run\n' >"$tmp/allow"
out=$(sh "$script" "$tmp" "$tmp/allow" 2>&1) || fail "all offenders allowed, still failed: $out"
echo "ok"
