#!/bin/sh
# The matrix-instruction GEMM (issue 22 item 4), read from its PTX: rtgen emits the model's top-1
# of a half and a bfloat16 GEMM into float (tests/data/{half,bf16}-gemm.spec) for DEVICE
# (--no-profile; NVRTC compiles it and ptxas reports its resources into the JSON report), and
#   - the plan (kernel header and JSON) says "mma: wmma 16x16x16", "full tiles" at SIZE^3 and
#     "guarded edges" at 1000 x 1000 x 999;
#   - `nvcc -ptx -arch=ARCH` of the .cu has wmma.mma.sync instructions (mma.sync on sm_80+) and
#     no fma.rn.f32 (the products run on the matrix units);
#   - `ptxas -v` of that PTX and rtgen's NVRTC report: 0 bytes of spill stores and loads;
#   - where the plan says "double-buffered (cp.async)" (the full SIZE^3 top-1s: the model
#     prices the two stages cheaper), the PTX has cp.async.cg.shared.global 16-byte copies,
#     cp.async.commit_group and cp.async.wait_group, and no 128-bit global loads (ld.global.v4:
#     the tiles go global -> shared without registers); "double-buffered" is required there.
# The kernels cannot run here (no GPU; PoCL has no WMMA); scripts/gpu-check.ops runs them on
# the H100. Exit 77 (skip) without nvcc.
#   run-gpu-mma.sh RTGEN ROOT DEVICE.ini ARCH SIZE OUTDIR
set -u
rtgen=$1
root=$2
dev=$3
arch=$4
size=$5
out=$6
cc=$(command -v nvcc || true)
[ -n "$cc" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || cc=/usr/local/cuda/bin/nvcc
[ -n "$cc" ] || { echo "nvcc not found"; exit 77; }
pa=$(dirname "$cc")/ptxas
command -v python3 >/dev/null 2>&1 || { echo "python3 not found"; exit 77; }
rm -rf "$out"
mkdir -p "$out"
cd "$root" || exit 1
fail=0
# check NAME SPEC M N K WANT: WANT is "full tiles" or "guarded edges"
check() {
    name=$1 spec=$2 want=$6 db=${7:-}
    "$rtgen" --device="$dev" --no-profile --top-k=1 --set M="$3" --set N="$4" --set K="$5" \
        -o "$out/$name" "$spec" >"$out/$name.log" 2>&1 || { echo "FAIL: rtgen $name"; cat "$out/$name.log"; return 1; }
    cu=$(ls "$out/$name"/*.cu)
    "$cc" -ptx -arch="$arch" -o "$out/$name.ptx" "$cu" 2>"$out/$name.nvcc.log" ||
        { echo "FAIL: nvcc $name"; cat "$out/$name.nvcc.log"; return 1; }
    "$pa" -v -arch="$arch" -o "$out/$name.cubin" "$out/$name.ptx" >"$out/$name.ptxas.log" 2>&1 ||
        { echo "FAIL: ptxas $name"; cat "$out/$name.ptxas.log"; return 1; }
    python3 - "$cu" "$out/$name.ptx" "$out/$name.ptxas.log" "$out/$name"/*.json "$want" "$name" "$db" <<'PY'
import json, re, sys
cu, ptx, ptxas, js, want, name, db = sys.argv[1:]
hdr = open(cu).read()
text = open(ptx).read()
ok = True
plan = re.search(r"^// plan phase 0: .*$", hdr, re.M)
plan = plan.group(0) if plan else ""
if "mma: wmma 16x16x16" not in plan or want not in plan:
    print(f"FAIL {name}: plan without 'mma: wmma 16x16x16' and '{want}': {plan}"); ok = False
k = json.load(open(js))["kernels"][0]
if k["status"] != "compiled" or k["spill_bytes"] != 0:
    print(f"FAIL {name}: NVRTC: status {k['status']}, {k['spill_bytes']} spill bytes"); ok = False
n_mma = len(re.findall(r"\bwmma\.mma\.sync\.|\bmma\.sync\.", text))
n_fma = len(re.findall(r"\bfma\.rn\.f32\b", text))
if n_mma == 0 or n_fma > 0:
    print(f"FAIL {name}: {n_mma} wmma.mma.sync / mma.sync, {n_fma} fma.rn.f32 in the PTX"); ok = False
sp = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", open(ptxas).read())
if not sp or any(int(a) or int(b) for a, b in sp):
    print(f"FAIL {name}: ptxas spills {sp}"); ok = False
n_async = len(re.findall(r"\bcp\.async\.cg\.shared\.global \[[^]]*\], \[[^]]*\], 16\b", text))
n_commit = len(re.findall(r"\bcp\.async\.commit_group\b", text))
n_wait = len(re.findall(r"\bcp\.async\.wait_group\b", text))
n_v4 = len(re.findall(r"\bld\.global(\.\w+)*\.v4\.", text))
if "double-buffered (cp.async)" in plan or db:
    if "double-buffered (cp.async)" not in plan:
        print(f"FAIL {name}: plan not double-buffered: {plan}"); ok = False
    if n_async == 0 or n_commit == 0 or n_wait == 0 or n_v4 > 0:
        print(f"FAIL {name}: {n_async} cp.async.cg 16-byte copies, {n_commit} commit_group, "
              f"{n_wait} wait_group, {n_v4} ld.global.v4 in the PTX"); ok = False
elif n_async > 0:
    print(f"FAIL {name}: cp.async in a single-stage kernel"); ok = False
regs = re.findall(r"Used (\d+) registers", open(ptxas).read())
print(f"{name}: {plan.split('; mma: ')[-1]}; {n_mma} mma instructions, {n_async} cp.async, "
      f"ptxas {regs} registers, spills {sp}")
sys.exit(0 if ok else 1)
PY
}
check half tests/data/half-gemm.spec "$size" "$size" "$size" "full tiles" db || fail=1
check bf16 tests/data/bf16-gemm.spec "$size" "$size" "$size" "full tiles" db || fail=1
check half-odd tests/data/half-gemm.spec 1000 1000 999 "guarded edges" || fail=1
exit $fail
