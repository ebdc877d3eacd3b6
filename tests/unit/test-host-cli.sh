#!/bin/sh
# rtgen's default device from the command line: the first run measures the host and labels its
# figures "measured DATE", the second reads the cache and prints the same; RTGEN_NO_PROBE prints
# "nominal"; the host.ini search path ($RTGEN_HOST_INI, then $XDG_CONFIG_HOME/rtgen/host.ini,
# never ./devices/host.ini) with located errors; and the ceiling of peak% in the table and the
# JSON: the last-level cache for a warm operator, DRAM (the faster of its ordinary and its
# non-temporal triad) for a cold one, the f32 peak for a GEMM.
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
# f32 measured; the others (f64, and bf16 or f16 where the host has them) nominal.
grep -Eq '^peak +f32 [0-9.]+ GFLOP/s \(measured [0-9-]{10}\)( [a-z0-9]+ [0-9.]+ GFLOP/s \(nominal\))+$' "$t/first" ||
    fail "peaks: $(grep '^peak' "$t/first")"
grep -Eq '^level 0 dram .* GB/s \(measured [0-9-]{10}\), [0-9.]+ GB/s streaming \(measured [0-9-]{10}\)' "$t/first" ||
    fail "DRAM not measured: $(grep '^level 0' "$t/first")"
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

# --- the ceiling of peak% -----------------------------------------------------------------------
# x86-avx2.ini has an 8 MiB L3: 2 MiB of tensors are warm (they fit in half of it), 16 MiB cold.
cat >"$t/warm.spec" <<'EOF'
def relu(float(1, 128, 64, 32) I) -> (O) {
    O(n, c, h, w) = max(I(n, c, h, w), 0)
}
EOF
cat >"$t/cold.spec" <<'EOF'
def relu(float(1, 1024, 64, 32) I) -> (O) {
    O(n, c, h, w) = max(I(n, c, h, w), 0)
}
EOF
# report SPEC [OPTIONS]: rtgen --json into $t/report.json and the table into $t/table, profiling
# the top candidate; peak_of: the "peak_of" of that candidate.
report() {
    spec=$1
    shift
    # shellcheck disable=SC2086 # the options are split on purpose
    "$rtgen" --json --top-k=1 -o "$t/o" $* "$spec" >"$t/report.json" 2>"$t/err" ||
        fail "rtgen --json $* $spec: $(cat "$t/err")"
    # shellcheck disable=SC2086
    "$rtgen" --top-k=1 -o "$t/o" $* "$spec" >"$t/table" 2>"$t/err" || fail "rtgen $* $spec"
}
peak_of() {
    sed -n 's/.*"peak_of": "\([^"]*\)".*/\1/p' "$t/report.json" | head -n 1
}
avx2="--device=$src/devices/x86-avx2.ini --profile"
report "$t/warm.spec" "$avx2"
[ "$(peak_of)" = "mem.l3.bandwidth_gbps" ] || fail "warm relu: peak_of $(peak_of)"
grep -Eq '^1 +rt_relu_c0 .* l3 ' "$t/table" || fail "warm relu: table column: $(grep rt_relu "$t/table")"
grep -q '^peak% of: f32 512 GFLOP/s (nominal) where the model'"'"'s bottleneck is compute, l3 288 GB/s (nominal) for the others (the operator fits in half of it' "$t/table" ||
    fail "warm relu: $(grep '^peak%' "$t/table")"
report "$t/cold.spec" "$avx2"
[ "$(peak_of)" = "mem.dram.bandwidth_gbps" ] || fail "cold relu: peak_of $(peak_of)"
grep -Eq '^1 +rt_relu_c0 .* dram ' "$t/table" || fail "cold relu: table column: $(grep rt_relu "$t/table")"
grep -q '^peak% of: .* dram 34.1 GB/s (nominal) for the others$' "$t/table" || fail "cold relu: $(grep '^peak%' "$t/table")"
# With a DRAM figure for non-temporal stores (faster: no read for ownership), the cold operator
# is against that one; the warm one keeps its cache's.
sed 's/^bandwidth_gbps    = 34.1$/&\nstream_gbps       = 45.5/' "$src/devices/x86-avx2.ini" >"$t/stream.ini"
grep -q '^stream_gbps' "$t/stream.ini" || fail "no stream_gbps in $t/stream.ini"
report "$t/cold.spec" --device="$t/stream.ini" --profile
[ "$(peak_of)" = "mem.dram.stream_gbps" ] || fail "cold relu, stream_gbps: peak_of $(peak_of)"
grep -q '^peak% of: .* dram 45.5 GB/s streaming (nominal) for the others$' "$t/table" ||
    fail "cold relu, stream_gbps: $(grep '^peak%' "$t/table")"
report "$t/warm.spec" --device="$t/stream.ini" --profile
[ "$(peak_of)" = "mem.l3.bandwidth_gbps" ] || fail "warm relu, stream_gbps: peak_of $(peak_of)"
report "$src/examples/matmul.spec" "$avx2" --set M=64 --set N=64 --set K=64
[ "$(peak_of)" = "f32_gflops" ] || fail "matmul: peak_of $(peak_of)"
grep -q '"peak_of_label": "nominal"' "$t/report.json" || fail "matmul: no peak_of_label"
# The default device: a warm operator against its measured last-level cache (level 1).
llc=$(sed -n 's/^level 1 \([a-z0-9]*\) .*/\1/p' "$t/first")
report "$t/warm.spec"
[ "$(peak_of)" = "mem.$llc.bandwidth_gbps" ] || fail "warm relu on the host: peak_of $(peak_of)"
grep -Eq '"peak_of_label": "measured [0-9-]{10}"' "$t/report.json" || fail "host: peak_of_label"
# A cold one (its tensors over half of level 1) against DRAM, at the higher of its triads.
llc_mib=$(sed -n 's/^level 1 [a-z0-9]* *device cache *\([0-9]*\) MiB.*/\1/p' "$t/first")
if [ -n "$llc_mib" ]; then
    printf 'def relu(float(1, %d, 64, 64) I) -> (O) {\n    O(n, c, h, w) = max(I(n, c, h, w), 0)\n}\n' \
        $((llc_mib * 16 + 16)) >"$t/host-cold.spec"
    report "$t/host-cold.spec"
    case $(peak_of) in
    mem.dram.bandwidth_gbps | mem.dram.stream_gbps) ;;
    *) fail "cold relu on the host: peak_of $(peak_of)" ;;
    esac
    grep -Eq '^peak% of: .* dram [0-9.]+ GB/s( streaming)? \(measured [0-9-]{10}\) for the others$' "$t/table" ||
        fail "cold relu on the host: $(grep '^peak%' "$t/table")"
fi

[ $fails -eq 0 ] && echo "ok: test-host-cli"
exit $((fails > 0))
