#!/bin/sh
# The MFMA GEMM (issue 22 item 4) on devices/mi250x.ini (gfx90a), read from its code: rtgen
# emits the model's top-1 of a half and a bfloat16 GEMM into float (tests/data/{half,bf16}-
# gemm.spec; --no-profile: hipRTC compiles it and the code object's metadata gives registers,
# spills and LDS into the JSON report), and
#   - at SIZE^3 (full tiles) the plan (kernel header) says "mma: mfma 16x16x16" and "full
#     tiles"; the gfx90a assembly of `hipcc --cuda-device-only -S --offload-arch=gfx90a -O3`
#     has a k loop (the back edge around the first v_mfma) holding, per k step the plan makes
#     (the loop may be unrolled u times, every count then u times), exactly
#     (wm/16)(wn/16)(ks/16) v_mfma_f32_16x16x16f16 (bf16: _16x16x16bf16_1k), two s_barrier and
#     no vector FMA (v_fma_f32, v_fmac_f32, v_mac_f32: the products run on the matrix cores);
#   - at 1000 x 1000 x 999 the plan says mfma and "guarded edges" and the code has v_mfma;
#   - everywhere: hipRTC's report 0 spill bytes and the plan's LDS bytes; the assembly's
#     metadata 0 VGPR and SGPR spills, no private segment (scratch), the plan's LDS bytes;
#   - every emitted .hip.cpp compiles with `hipcc --genco` (issue 22 item 5);
#   - on devices/mi50.ini (gfx906, no MFMA) the same GEMM plans no matrix instructions and
#     its code has no v_mfma.
# The kernels cannot run here (no AMD GPU); tests/unit/test-gpu-mfma-host.sh runs them on the
# host against a model of the instruction. Exit 77 (skip) without hipcc or without hipRTC.
#   run-gpu-mfma.sh RTGEN ROOT SIZE OUTDIR
set -u
rtgen=$1
root=$2
size=$3
out=$4
cc=$(command -v hipcc || true)
[ -n "$cc" ] || { echo "hipcc not found"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "python3 not found"; exit 77; }
rm -rf "$out"
mkdir -p "$out"
cd "$root" || exit 1
fail=0
# check NAME DEVICE SPEC M N K WANT: WANT is "full tiles", "guarded edges" or "scalar"
check() {
    name=$1 dev=$2 spec=$3 want=$7 arch=gfx90a
    [ "$want" != scalar ] || arch=gfx906
    "$rtgen" --device="$dev" --no-profile --top-k=1 --set M="$4" --set N="$5" --set K="$6" \
        -o "$out/$name" "$spec" >"$out/$name.log" 2>&1 || { echo "FAIL: rtgen $name"; cat "$out/$name.log"; return 1; }
    if grep -q "not built with" "$out/$name.log"; then
        echo "SKIP: $(grep -m1 'not built with' "$out/$name.log")"
        exit 77
    fi
    src=$(ls "$out/$name"/*.hip.cpp)
    # as users compile it (issue 22 item 5)
    "$cc" --genco --offload-arch="$arch" -o "$out/$name.co" "$src" >"$out/$name.genco.log" 2>&1 &&
        [ -s "$out/$name.co" ] || { echo "FAIL: hipcc --genco $name"; cat "$out/$name.genco.log"; return 1; }
    "$cc" --cuda-device-only -S --offload-arch="$arch" -O3 -o "$out/$name.s" "$src" \
        >"$out/$name.hipcc.log" 2>&1 || { echo "FAIL: hipcc $name"; cat "$out/$name.hipcc.log"; return 1; }
    python3 - "$src" "$out/$name.s" "$out/$name"/*.json "$want" "$name" <<'PY'
import json, re, sys
src, asm, js, want, name = sys.argv[1:]
hdr = open(src).read()
text = open(asm).read()
ok = True
def fail(msg):
    global ok
    print(f"FAIL {name}: {msg}")
    ok = False
plan = re.search(r"^// plan phase 0: .*$", hdr, re.M)
plan = plan.group(0) if plan else ""
k = json.load(open(js))["kernels"][0]
if k["status"] != "compiled" or k["spill_bytes"] != 0:
    fail(f"hipRTC: status {k['status']}, {k['spill_bytes']} spill bytes")
md = lambda key: [int(x) for x in re.findall(rf"^\s+\.{key}:\s+(\d+)", text, re.M)]
if any(md("vgpr_spill_count")) or any(md("sgpr_spill_count")) or any(md("private_segment_fixed_size")):
    fail(f"spills {md('vgpr_spill_count')} {md('sgpr_spill_count')}, scratch {md('private_segment_fixed_size')}")
n_mfma = len(re.findall(r"\bv_mfma_", text))
if want == "scalar":
    if "; mma: " in plan or n_mfma:
        fail(f"gfx906 planned matrix instructions or has {n_mfma} v_mfma: {plan}")
    print(f"{name}: no matrix instructions on gfx906 (scalar plan), {k['registers']} registers, 0 spills")
    sys.exit(0 if ok else 1)
if "mma: mfma 16x16x16" not in plan or want not in plan:
    fail(f"plan without 'mma: mfma 16x16x16' and '{want}': {plan}")
sh = re.search(r"shared (\d+) B", plan)
lds = md("group_segment_fixed_size")
if not sh or k["smem_bytes"] != int(sh.group(1)) or lds != [int(sh.group(1))]:
    fail(f"LDS: plan {sh and sh.group(1)}, hipRTC {k['smem_bytes']}, hipcc {lds}")
ty = "bf16_1k" if "bfloat16" in plan else "f16"
summary = f"{n_mfma} v_mfma"
if want != "full tiles":
    if not n_mfma:
        fail("no v_mfma")
else:
    g = lambda pat: re.search(pat, plan)
    wt, ks = g(r"warp tile (\d+)x(\d+)"), g(r"k step (\d+)")
    if not (wt and ks):
        fail(f"plan without warp tile or k step: {plan}")
        sys.exit(1)
    wm, wn, ks = int(wt.group(1)), int(wt.group(2)), int(ks.group(1))
    lines = text.splitlines()
    labels = {m.group(1): i for i, l in enumerate(lines) if (m := re.match(r"^(\.LBB\w+):", l))}
    first = next((i for i, l in enumerate(lines) if "v_mfma_" in l), None)
    loop = None # the innermost back edge around the first v_mfma
    for i, l in enumerate(lines):
        m = re.search(r"\bs_(cbranch_\w+|branch)\s+(\.LBB\w+)", l)
        if m and m.group(2) in labels and first is not None and labels[m.group(2)] < first < i:
            if loop is None or labels[m.group(2)] > loop[0]:
                loop = (labels[m.group(2)], i)
    if loop is None:
        fail("no loop around the v_mfma instructions")
        sys.exit(1)
    body = "\n".join(lines[loop[0]:loop[1] + 1])
    c = lambda pat: len(re.findall(pat, body))
    per = {"mfma": wm // 16 * (wn // 16) * (ks // 16), "s_barrier": 2, "vector fma": 0}
    got = {"mfma": c(rf"\bv_mfma_f32_16x16x16{ty}\b"), "s_barrier": c(r"\bs_barrier\b"),
           "vector fma": c(r"\bv_(fma|fmac|mac)_f32\b")}
    u = got["mfma"] // per["mfma"] if per["mfma"] else 0
    if u < 1 or any(got[x] != u * per[x] for x in per) or c(r"\bv_mfma_") != got["mfma"]:
        fail(f"k loop (unrolled {u}x): {got}, per step expected {per}")
    summary = f"k loop x{u}: {got}"
print(f"{name}: {plan.split('; mma: ')[-1]}; {summary}; hipRTC {k['registers']} registers, "
      f"0 spills, LDS {k['smem_bytes']} B; hipcc VGPRs {md('vgpr_count')}")
sys.exit(0 if ok else 1)
PY
}
check half devices/mi250x.ini tests/data/half-gemm.spec "$size" "$size" "$size" "full tiles" || fail=1
check bf16 devices/mi250x.ini tests/data/bf16-gemm.spec "$size" "$size" "$size" "full tiles" || fail=1
check half-odd devices/mi250x.ini tests/data/half-gemm.spec 1000 1000 999 "guarded edges" || fail=1
check half-mi50 devices/mi50.ini tests/data/half-gemm.spec "$size" "$size" "$size" scalar || fail=1
exit $fail
