#!/bin/sh
# rtgen's default device from the command line: the first run measures the host and labels its
# figures "measured DATE", the second reads the cache and prints the same; RTGEN_NO_PROBE prints
# "nominal"; the host.ini search path ($RTGEN_HOST_INI, then $XDG_CONFIG_HOME/rtgen/host.ini,
# never ./devices/host.ini) with located errors.
# Caches and configs live in a temporary directory, never in the real home.
#   usage: test-host-cli.sh RTGEN SOURCE_DIR
set -u
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
rtgen=$(abs "$1")
src=$(abs "$2")
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fails=0
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
export XDG_CACHE_HOME="$t/cache" XDG_CONFIG_HOME="$t/config" HOME="$t/home"
unset RTGEN_HOST_INI RTGEN_NO_PROBE
relu="$src/examples/relu.spec"

# --- first use measures, the second run reads the cache ------------------------------------------
# Up to 4 tries: a probe that other work kept from enough undisturbed samples leaves its figures
# nominal and writes no cache.
for try in 1 2 3 4; do
    "$rtgen" --dry-run "$relu" >"$t/first" 2>"$t/stderr" || fail "first run: $(cat "$t/stderr")"
    [ -n "$(ls "$t/cache/rtgen" 2>/dev/null)" ] && break
    echo "probe disturbed (try $try)"
done
[ "$(ls "$t/cache/rtgen" | wc -l)" -eq 1 ] || fail "expected one cache file in $t/cache/rtgen"
grep -Eq '^units .* MHz \(measured [0-9]{4}-[0-9]{2}-[0-9]{2}\)$' "$t/first" || fail "clock not measured: $(grep '^units' "$t/first")"
grep -Eq '^peak +f32 [0-9.]+ GFLOP/s \(measured [0-9-]{10}\) f64 [0-9.]+ GFLOP/s \(nominal\)$' "$t/first" ||
    fail "peaks: $(grep '^peak' "$t/first")"
grep -Eq '^level 0 dram .* GB/s \(measured [0-9-]{10}\)' "$t/first" || fail "DRAM not measured"
grep -Eq '^level 1 .* GB/s \(measured [0-9-]{10}\)' "$t/first" || fail "level 1 not measured"
"$rtgen" --dry-run "$relu" >"$t/second" 2>&1 || fail "second run"
cmp -s "$t/first" "$t/second" || fail "the cached run prints other figures: $(diff "$t/first" "$t/second")"
"$rtgen" --dry-run --json "$relu" >"$t/json" 2>&1 || fail "--json run"
grep -q '"clock_mhz_label": "measured ' "$t/json" || fail "JSON: no clock_mhz_label"
grep -q 'figures cached in '"$t/cache/rtgen/host-" "$t/json" || fail "JSON: the source names no cache file"

# --- RTGEN_NO_PROBE: nominal, and said so -------------------------------------------------------
RTGEN_NO_PROBE=1 "$rtgen" --dry-run "$relu" >"$t/nominal" 2>&1 || fail "RTGEN_NO_PROBE run"
grep -Eq '^units .* MHz \(nominal\)$' "$t/nominal" || fail "RTGEN_NO_PROBE: clock not nominal"
grep -Eq '^peak +f32 [0-9.]+ GFLOP/s \(nominal\)' "$t/nominal" || fail "RTGEN_NO_PROBE: peak"
grep -Eq '^level 0 dram .* GB/s \(nominal\)' "$t/nominal" || fail "RTGEN_NO_PROBE: DRAM"

# --- the host.ini search path -------------------------------------------------------------------
# Not ./devices/host.ini: a file there is ignored.
mkdir -p "$t/cwd/devices"
cp "$src/devices/x86-avx512.ini" "$t/cwd/devices/host.ini"
(cd "$t/cwd" && "$rtgen" --dry-run "$relu") >"$t/cwd.out" 2>&1 || fail "run in a directory with devices/host.ini"
grep -q '^device  host CPU (' "$t/cwd.out" || fail "./devices/host.ini was used: $(grep '^device' "$t/cwd.out")"
# $RTGEN_HOST_INI.
RTGEN_HOST_INI="$src/devices/x86-avx2.ini" "$rtgen" --dry-run "$relu" >"$t/env.out" 2>&1 || fail "RTGEN_HOST_INI run"
grep -q '^device  Intel Core i7-6700K' "$t/env.out" || fail "RTGEN_HOST_INI not used"
RTGEN_HOST_INI="$t/missing.ini" "$rtgen" --dry-run "$relu" >/dev/null 2>"$t/err"
code=$?
[ "$code" -eq 1 ] || fail "RTGEN_HOST_INI missing: exit $code, expected 1"
[ "$(cat "$t/err")" = "rtgen: error: RTGEN_HOST_INI=$t/missing.ini: cannot read: No such file or directory" ] ||
    fail "RTGEN_HOST_INI missing: $(cat "$t/err")"
printf '[device]\nname = bad\nclass = cpu\nbogus = 1\n' >"$t/bad.ini"
RTGEN_HOST_INI="$t/bad.ini" "$rtgen" --dry-run "$relu" >/dev/null 2>"$t/err"
code=$?
[ "$code" -eq 1 ] || fail "corrupt RTGEN_HOST_INI: exit $code, expected 1"
grep -q "^$t/bad.ini:4:1: error: " "$t/err" || fail "corrupt RTGEN_HOST_INI: $(cat "$t/err")"
# $XDG_CONFIG_HOME/rtgen/host.ini, where rtcalib -o puts a calibration.
mkdir -p "$t/config/rtgen"
cp "$src/devices/x86-avx2.ini" "$t/config/rtgen/host.ini"
"$rtgen" --dry-run "$relu" >"$t/cfg.out" 2>&1 || fail "config host.ini run"
grep -q '^device  Intel Core i7-6700K' "$t/cfg.out" || fail "\$XDG_CONFIG_HOME/rtgen/host.ini not used"
cp "$t/bad.ini" "$t/config/rtgen/host.ini"
"$rtgen" --dry-run "$relu" >/dev/null 2>"$t/err"
grep -q "^$t/config/rtgen/host.ini:4:1: error: " "$t/err" || fail "corrupt config host.ini: $(cat "$t/err")"
rm -f "$t/config/rtgen/host.ini"

[ $fails -eq 0 ] && echo "ok: test-host-cli"
exit $((fails > 0))
