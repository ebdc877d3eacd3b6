#!/bin/sh
# scripts/gpu-check.sh --dry-run: every step of the GPU check runs here on PoCL
# (devices/pocl-cpu.ini) with the ops file's small sizes, writes its 7 files, one report row per
# op with every candidate ok, and the peers say why they cannot run without a CUDA driver.
#   test-gpu-check.sh ROOT BUILD
set -u
root=$1
build=$2
out=$(mktemp -d "${TMPDIR:-/tmp}/test-gpu-check.XXXXXX")
trap 'rm -rf "$out"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
sh "$root/scripts/gpu-check.sh" --dry-run --bin="$build" "$out/r" >"$out/console" 2>&1
rc=$?
[ $rc = 0 ] || { cat "$out/console"; fail "gpu-check.sh --dry-run: exit $rc"; }
# No OpenCL platform here (PoCL not installed, or a sanitized build): nothing to run on.
if [ ! -f "$out/r/calib.ini" ] && grep -q 'no GPU: ' "$out/r/log.txt" 2>/dev/null; then
    echo "skipped: $(grep -m1 'no GPU: ' "$out/r/log.txt")"
    exit 77
fi
n=$(ls "$out/r" | wc -l)
[ "$n" -le 8 ] || fail "$n files under the report folder (at most 8)"
for f in report.md ops.jsonl peers.txt calib.ini calib.diff facts.txt log.txt; do
    [ -s "$out/r/$f" ] || fail "no $f"
done
ops=$(grep -v '^[[:space:]]*#' "$root/scripts/gpu-check.ops" | grep -v '^[[:space:]]*$' |
    cut -d'|' -f1 | tr -d ' ')
for name in $ops; do
    grep -Eq "^\| $name \| 0 \| ([1-9][0-9]*)/\1 \|" "$out/r/report.md" ||
        fail "no row with every candidate ok for $name: $(grep "^| $name " "$out/r/report.md")"
done
[ "$(wc -l <"$out/r/ops.jsonl")" = "$(echo "$ops" | wc -l)" ] || fail "ops.jsonl: one line per op"
grep -q '^Verdict: PASS' "$out/r/report.md" || fail "verdict: $(grep Verdict "$out/r/report.md")"
grep -q '^FP32 peak: [0-9]* GFLOP/s, measured (rtcalib)' "$out/r/report.md" ||
    fail "the FP32 peak is not rtcalib's measurement"
grep -q '^# gpu-peer-cublas exit 3 gpu-peer-cublas: no CUDA driver' "$out/r/peers.txt" ||
    fail "peers.txt: the cuBLAS peer does not say why it did not run"
grep -q '^mode: dry run (PoCL)' "$out/r/facts.txt" || fail "facts.txt: no mode line"
# --no-calib: no rtcalib run, no calib.ini; the peak is the device file's, labelled by its source
# (pocl-cpu.ini's f32 figure is the spec's: nominal).
sh "$root/scripts/gpu-check.sh" --dry-run --no-calib --only=relu --bin="$build" "$out/n" >"$out/console" 2>&1 ||
    fail "gpu-check.sh --dry-run --no-calib: exit $?: $(tail -n 5 "$out/console")"
[ ! -e "$out/n/calib.ini" ] || fail "--no-calib wrote calib.ini"
grep -q '^rtcalib skipped (--no-calib)' "$out/n/calib.diff" || fail "--no-calib: calib.diff: $(cat "$out/n/calib.diff")"
grep -q '^FP32 peak: [0-9]* GFLOP/s, nominal (device file; rtcalib not run or failed)' "$out/n/report.md" ||
    fail "--no-calib: the FP32 peak line: $(grep '^FP32 peak' "$out/n/report.md")"
grep -Eq "^\| relu \| 0 \| ([1-9][0-9]*)/\1 \|" "$out/n/report.md" || fail "--no-calib: no relu row"
echo "ok: gpu-check --dry-run, $(echo "$ops" | wc -l) ops; --no-calib"
