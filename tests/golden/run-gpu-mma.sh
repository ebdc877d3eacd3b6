#!/bin/sh
# The matrix-instruction GEMM (issue 22 item 4), read from its PTX: rtgen emits the model's top-1
# of a half and a bfloat16 GEMM into float (tests/data/{half,bf16}-gemm.spec) for DEVICE
# (--no-profile; NVRTC compiles it and ptxas reports its resources into the JSON report), and
#   - at SIZE^3 (full tiles) the plan (kernel header) says "mma: mma.sync m16n8k16" over S >= 2
#     cp.async stages; the PTX of `nvcc -ptx -arch=ARCH` has a k loop (the back edge around the
#     mma.sync instructions) holding, per k step the plan makes (the loop may be unrolled u
#     times, every count then u times), exactly (wm/16)(wn/8)(ks/16)
#     mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16} instructions, (wm/16)(ks/16)
#     ldmatrix.sync.aligned.m8n8.x4.shared.b16 and (wn/16)(ks/16) ldmatrix ... .x4.trans, the
#     step's cp.async.cg 16-byte copies (per thread ceil(T1m ks / 8 / threads) of A's tile and
#     ceil(ks T1n / 8 / threads) of B's), one
#     cp.async.wait_group S-2, one commit_group and one bar.sync; S - 1 commit_groups before it;
#     no 128-bit global loads (the tiles go global -> shared without registers);
#   - at 1000 x 1000 x 999 the plan says "mma: wmma 16x16x16" and "guarded edges", and the PTX
#     has wmma.mma.sync and no cp.async;
#   - everywhere: no fma.rn.f32 (the products run on the matrix units), no local memory
#     (ld/st.local), and `ptxas -v` of that PTX and rtgen's NVRTC report: 0 bytes of stack,
#     spill stores and loads.
# The kernels cannot run here (no GPU; PoCL has no matrix instructions); scripts/gpu-check.sh
# runs them on the H100. Exit 77 (skip) without nvcc.
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
def fail(msg):
    global ok
    print(f"FAIL {name}: {msg}")
    ok = False
plan = re.search(r"^// plan phase 0: .*$", hdr, re.M)
plan = plan.group(0) if plan else ""
inst = "mma.sync m16n8k16" if want == "full tiles" else "wmma 16x16x16"
if f"mma: {inst}" not in plan or want not in plan:
    fail(f"plan without 'mma: {inst}' and '{want}': {plan}")
k = json.load(open(js))["kernels"][0]
if k["status"] != "compiled" or k["spill_bytes"] != 0:
    fail(f"NVRTC: status {k['status']}, {k['spill_bytes']} spill bytes")
log = open(ptxas).read()
sp = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
if not sp or any(int(x) for t in sp for x in t):
    fail(f"ptxas stack / spills {sp}")
n_fma = len(re.findall(r"\bfma\.rn\.f32\b", text))
n_local = len(re.findall(r"\b(ld|st)\.local\b", text))
if n_fma or n_local:
    fail(f"{n_fma} fma.rn.f32, {n_local} ld/st.local in the PTX")
n_async = len(re.findall(r"\bcp\.async\.cg\.shared\.global \[[^]]*\], \[[^]]*\], 16\b", text))
regs = re.findall(r"Used (\d+) registers", log)
summary = ""
if want != "full tiles":
    if not re.search(r"\bwmma\.mma\.sync\.", text) or n_async:
        fail(f"no wmma.mma.sync, or {n_async} cp.async")
else:
    g = lambda pat: re.search(pat, plan)
    th, t1m, t1n = g(r"threads (\d+)"), g(r"tile m (\d+)/"), g(r"n (\d+)/\d+;")
    wt, ks, st = g(r"warp tile (\d+)x(\d+)"), g(r"k step (\d+)"), g(r"(double-buffered|(\d+) stages) \(cp\.async\)")
    if not (th and t1m and t1n and wt and ks and st):
        fail(f"plan without threads, tiles, k step or cp.async stages: {plan}")
        sys.exit(1)
    th, t1m, t1n, ks = int(th.group(1)), int(t1m.group(1)), int(t1n.group(1)), int(ks.group(1))
    wm, wn = int(wt.group(1)), int(wt.group(2))
    S = 2 if st.group(1) == "double-buffered" else int(st.group(2))
    lines = text.splitlines()
    labels = {m.group(1): i for i, l in enumerate(lines) if (m := re.match(r"^(\$L__\w+):", l))}
    loop = None # the back edge around the first mma.sync
    first = next((i for i, l in enumerate(lines) if "mma.sync.aligned" in l), None)
    for i, l in enumerate(lines):
        m = re.search(r"\bbra(\.uni)?\s+(\$L__\w+);", l)
        if m and m.group(2) in labels and labels[m.group(2)] < i and first is not None and labels[m.group(2)] < first < i:
            if loop is None or labels[m.group(2)] > loop[0]:
                loop = (labels[m.group(2)], i)
    if loop is None:
        fail("no loop around the mma.sync instructions")
        sys.exit(1)
    body = "\n".join(lines[loop[0]:loop[1] + 1])
    ty = "bf16" if "bfloat16" in plan else "f16"
    c = lambda pat: len(re.findall(pat, body))
    n_mma = c(rf"\bmma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.{ty}\.{ty}\.f32\b")
    n_lda = c(r"\bldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16\b")
    n_ldb = c(r"\bldmatrix\.sync\.aligned\.m8n8\.x4\.trans\.shared\.b16\b")
    n_cp = c(r"\bcp\.async\.cg\.shared\.global \[[^]]*\], \[[^]]*\], 16\b")
    n_wait = re.findall(r"\bcp\.async\.wait_group (\d+);", body)
    n_commit, n_bar = c(r"\bcp\.async\.commit_group;"), c(r"\bbar\.sync\b")
    pre_commit = len(re.findall(r"\bcp\.async\.commit_group;", "\n".join(lines[:loop[0]])))
    per = {"mma": wm // 16 * (wn // 8) * (ks // 16), "ldmatrix.x4": wm // 16 * (ks // 16),
           "ldmatrix.x4.trans": wn // 16 * (ks // 16), "cp.async": -(-t1m * ks // 8 // th) - (-ks * t1n // 8 // th),
           "wait_group": 1, "commit_group": 1, "bar.sync": 1}
    got = {"mma": n_mma, "ldmatrix.x4": n_lda, "ldmatrix.x4.trans": n_ldb, "cp.async": n_cp,
           "wait_group": len(n_wait), "commit_group": n_commit, "bar.sync": n_bar}
    u = n_mma // per["mma"] if per["mma"] else 0
    if u < 1 or any(got[x] != u * per[x] for x in per):
        fail(f"k loop (unrolled {u}x): {got}, per step expected {per}")
    if any(int(w) != S - 2 for w in n_wait) or pre_commit != S - 1:
        fail(f"{S} stages planned: cp.async.wait_group {n_wait} in the loop, {pre_commit} commit_groups before it")
    if re.search(r"\bld\.global(\.\w+)*\.v4\.", text):
        fail("128-bit global loads (the tiles should go global -> shared by cp.async)")
    summary = f"k loop x{u}: {got}; {S} stages; "
print(f"{name}: {plan.split('; mma: ')[-1]}; {summary}{n_async} cp.async, ptxas {regs} registers, stack/spills {sp}")
sys.exit(0 if ok else 1)
PY
}
check half tests/data/half-gemm.spec "$size" "$size" "$size" "full tiles" db || fail=1
check bf16 tests/data/bf16-gemm.spec "$size" "$size" "$size" "full tiles" db || fail=1
check half-odd tests/data/half-gemm.spec 1000 1000 999 "guarded edges" || fail=1
exit $fail
