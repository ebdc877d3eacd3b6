#!/bin/sh
# The GPU model reads the global level's bandwidth curve (rtcalib: GB/s by bytes in flight per
# unit) at the bytes the plan's resident blocks keep in flight (perfmodel/cost.c, gpu-plan.c):
# a softmax of 1024 rows whose threads each walk a row (8 blocks of 128 threads on 132 units)
# is priced far below the peak bandwidth, which is what an H200 measured (515 us, against the
# 29 us the peak predicted); a 4096^3 GEMM whose blocks fill the device is not priced slower
# than without the curve. With the curve, the compiled candidates are also re-priced with the
# global latency each reduction step exposes, the copies overlapping the other blocks' compute
# (cost.c, gpu_exposed_ns), which the file without a curve cannot price: there the copies are
# charged at bandwidth, so the GEMM may come out cheaper with the curve (0.87x on h200), never
# dearer and never by more than a fifth. Compared: devices/h200.ini as shipped, and the same
# file without its curve.
#   test-gpu-inflight.sh RTGEN ROOT
set -u
rtgen=$1
root=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-gpu-inflight.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
grep -v '^bandwidth_curve_gbps' "$root/devices/h200.ini" >"$tmp/flat.ini"
pred() { # DEVICE SPEC ARGS...: the top-1's predicted ns
    dev=$1
    shift
    "$rtgen" --device="$dev" --no-profile --top-k=1 --json -o "$tmp/k" "$@" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["kernels"][0]["predicted_ns"])'
}
s_curve=$(pred "$root/devices/h200.ini" "$root/bench/specs/softmax.spec" --set N=1024)
s_flat=$(pred "$tmp/flat.ini" "$root/bench/specs/softmax.spec" --set N=1024)
g_curve=$(pred "$root/devices/h200.ini" "$root/examples/matmul.spec" --set M=4096 --set N=4096 --set K=4096)
g_flat=$(pred "$tmp/flat.ini" "$root/examples/matmul.spec" --set M=4096 --set N=4096 --set K=4096)
python3 - "$s_curve" "$s_flat" "$g_curve" "$g_flat" <<'PY' || exit 1
import sys
s_curve, s_flat, g_curve, g_flat = map(float, sys.argv[1:])
ok = True
if not s_curve > 5 * s_flat:
    print(f"FAIL: softmax with the curve {s_curve:.0f} ns, without {s_flat:.0f}: not 5x slower"); ok = False
if not 0.8 < g_curve / g_flat < 1.1:
    print(f"FAIL: GEMM 4096 with the curve {g_curve:.0f} ns, without {g_flat:.0f}: not in 0.8-1.1x"); ok = False
print(f"softmax {s_curve/1e3:.1f} us (peak only: {s_flat/1e3:.1f}), GEMM {g_curve/1e3:.1f} us ({g_flat/1e3:.1f})")
sys.exit(0 if ok else 1)
PY
