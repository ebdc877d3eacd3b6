#!/bin/sh
# half and bfloat16 tensors in the GPU backend (issue 22 item 4): the elementwise and GEMM specs
# of tests/data run on PoCL (devices/pocl-cpu.ini, OpenCL vload_half / vstore_half_rte and
# bfloat16 as ushort) and every candidate matches the interpreter within the tolerance table;
# NVRTC (a100 sm_80, h100 sm_90; cuda_fp16.h / cuda_bf16.h) and hipRTC (mi250x gfx90a; _Float16,
# ushort) compile them (status "compiled"; skipped per toolkit when rtgen was built without it).
#   test-gpu-half.sh RTGEN ROOT
set -u
rtgen=$1
root=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-gpu-half.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
ran=0
# run DEVICE WANT SPEC ARGS...: every candidate's status is WANT ("ok": profiled and checked)
run() {
    dev=$1
    want=$2
    spec=$3
    shift 3
    name=$(basename "$dev" .ini)-$(basename "$spec" .spec)
    prof=
    [ "$want" = ok ] || prof=--no-profile
    "$rtgen" --device="$root/devices/$dev" $prof --top-k=2 -o "$tmp/$name" "$@" \
        "$root/tests/data/$spec" >"$tmp/$name.log" 2>&1
    rc=$?
    if grep -q "not built with\|no OpenCL platform\|cannot open\|disabled under AddressSanitizer" "$tmp/$name.log"; then
        echo "skip $name: $(grep -m1 'not built with\|no OpenCL platform\|cannot open\|disabled under AddressSanitizer' "$tmp/$name.log")"
        return 0
    fi
    ran=$((ran + 1))
    python3 - "$tmp/$name" "$want" "$name" "$rc" <<'PY' || { fail=1; cat "$tmp/$name.log"; }
import glob, json, sys
d, want, name, rc = sys.argv[1:]
js = glob.glob(d + "/*.json")
if not js:
    print(f"FAIL {name}: no report (exit {rc})"); sys.exit(1)
ks = json.load(open(js[0]))["kernels"]
bad = [(k["rank"], k["status"]) for k in ks if k["status"] != want]
if not ks or bad:
    print(f"FAIL {name}: candidates not {want}: {bad}"); sys.exit(1)
print(f"{name}: {len(ks)} candidates {want}" +
      (", max_rel " + ", ".join("%.2e" % k["max_rel_err"] for k in ks) if want == "ok" else ""))
PY
}
run pocl-cpu.ini ok half-eltwise.spec
run pocl-cpu.ini ok half-gemm.spec --set M=96 --set N=80 --set K=72
run pocl-cpu.ini ok bf16-gemm.spec --set M=96 --set N=80 --set K=72
for dev in a100.ini h100.ini mi250x.ini; do
    for spec in half-eltwise.spec half-gemm.spec bf16-gemm.spec; do
        run $dev compiled $spec
    done
done
[ "$ran" -gt 0 ] || { echo "no toolkit to run or compile with"; exit 77; }
exit $fail
