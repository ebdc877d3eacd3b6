#!/bin/sh
# The fp32 GEMM top-1 is built to be fast, read from its PTX (issue 22): rtgen emits the model's
# top-1 of examples/matmul.spec at SIZE^3 for DEVICE (--no-profile), `nvcc -ptx -arch=ARCH`
# compiles it, and in the loop over the reduction steps (the PTX loop holding the FMAs):
#   - no bounds checks: one setp and one predicated instruction (the loop's own branch), since
#     every extent is a multiple of the block tile and the k step (the plan's "full tiles");
#   - FMA / shared-load instructions at least the register tile's (m * n) / (m + n);
#   - with VEC=v4 (the plan's "128-bit loads"): the fragments read from shared memory 4 floats
#     at a time — ld.shared.v4.f32 and no scalar ld.shared.f32, FMA / shared-load instructions
#     at least 4 (m * n) / (m + n) — and the tiles copied with 128-bit global loads
#     (ld.global[.nc].v4.f32 / .u32); the ragged shape's step loop reads 128-bit fragments exactly when
#     its plan says so.
# A ragged shape (1000 x 1000 x 999, no extent a multiple of the tiles) is split (the plan's
# "edge split"): the interior blocks' step loop (a loop holding FMAs and a barrier) has no
# bounds check — every setp and predicated instruction in it is a loop's own back branch, no
# selp — and where the plan says "global B interior" (B's rows of 1000 floats keep 16-byte
# alignment; A's of 999 do not) it copies with 128-bit global loads and reads 128-bit
# fragments; the edge blocks' step loop keeps its guards. The interior step loop has no backward
# branch within a step (its only one is its own): the reduction loop of the k step (24 trips on
# h100) and the copies are unrolled — exactly k step x register tile FMAs between its barriers.
# Exit 77 (skip) without nvcc.
#   run-gpu-ptx.sh RTGEN ROOT DEVICE.ini ARCH SIZE VEC OUTDIR
set -u
rtgen=$1
root=$2
dev=$3
arch=$4
size=$5
vec=$6
out=$7
cc=$(command -v nvcc || true)
[ -n "$cc" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || cc=/usr/local/cuda/bin/nvcc
[ -n "$cc" ] || { echo "nvcc not found"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "python3 not found"; exit 77; }
rm -rf "$out"
mkdir -p "$out"
cd "$root" || exit 1
fail=0
# emit SHAPE-NAME M N K: the top-1's .cu compiled to PTX; prints the plan line
emit() {
    "$rtgen" --device="$dev" --no-profile --top-k=1 --set M="$2" --set N="$3" --set K="$4" \
        -o "$out/$1" examples/matmul.spec >"$out/$1.log" 2>&1 || { echo "FAIL: rtgen $1"; cat "$out/$1.log"; return 1; }
    "$cc" -ptx -arch="$arch" -o "$out/$1.ptx" "$out/$1/matmul.cu" 2>"$out/$1.nvcc.log" ||
        { echo "FAIL: nvcc $1"; cat "$out/$1.nvcc.log"; return 1; }
}
emit full "$size" "$size" "$size" || exit 1
emit ragged 1000 1000 999 || exit 1
python3 - "$out/full.ptx" "$out/full/matmul.cu" "$out/ragged.ptx" "$out/ragged/matmul.cu" "$vec" <<'PY' || fail=1
import re, sys
full_ptx, full_cu, ragged_ptx, ragged_cu, vec = sys.argv[1:]

def fma_loop(path):
    """The instructions of the innermost PTX loop holding the most FMAs: the lines between a
    label and the branch back to it."""
    lines = [l.strip() for l in open(path)]
    best = None
    for i, l in enumerate(lines):
        m = re.match(r"^(\$L__\w+):$", l)
        if not m:
            continue
        for j in range(i + 1, len(lines)):
            if re.search(r"\bbra(\.uni)?\s+" + re.escape(m.group(1)) + ";", lines[j]):
                body = [x for x in lines[i + 1:j + 1] if x and not x.startswith("//")]
                n = sum(x.startswith("fma.rn.f32") for x in body)
                if n and (best is None or n > best[0]):
                    best = (n, body)
                break
    return best[1] if best else []

def step_loops(path):
    """Every PTX loop holding FMAs and a barrier (a reduction step loop), as its lines."""
    lines = [l.strip() for l in open(path)]
    loops = []
    for i, l in enumerate(lines):
        m = re.match(r"^(\$L__\w+):$", l)
        if not m:
            continue
        last = None
        for j in range(i + 1, len(lines)):
            if re.search(r"\bbra(\.uni)?\s+" + re.escape(m.group(1)) + ";", lines[j]):
                last = j
        if last is None:
            continue
        body = [x for x in lines[i:last + 1] if x and not x.startswith("//")]
        if any(x.startswith("fma.rn.f32") for x in body) and any(x.startswith("bar.sync") for x in body):
            loops.append(body)
    return loops

def inner_back_branches(body):
    """Backward branches in a loop other than its own: loops left rolled inside one trip."""
    head = re.match(r"^(\$L__\w+):$", body[0]).group(1)
    seen, n = set(), 0
    for x in body[1:]:
        m = re.match(r"^(\$L__\w+):$", x)
        if m:
            seen.add(m.group(1))
            continue
        m = re.search(r"\bbra(\.uni)?\s+(\$L__\w+);", x)
        n += bool(m and m.group(2) in seen and m.group(2) != head)
    return n

def fmas_between_barriers(body):
    """FMAs from the first barrier of a loop to the next."""
    i = next((k for k, x in enumerate(body) if x.startswith("bar.sync")), None)
    if i is None:
        return 0
    j = next((k for k in range(i + 1, len(body)) if body[k].startswith("bar.sync")), len(body))
    return sum(x.startswith("fma.rn.f32") for x in body[i:j])

def guards(body):
    """Bounds checks in a loop: setp not feeding a back branch of a loop inside it, predicated
    instructions other than those back branches, selp."""
    seen, back, n = set(), set(), 0
    for x in body:
        m = re.match(r"^(\$L__\w+):$", x)
        if m:
            seen.add(m.group(1))
            continue
        m = re.match(r"^@!?(%p\d+)\s+bra(\.uni)?\s+(\$L__\w+);", x)
        if m and m.group(3) in seen:
            back.add(m.group(1))
        elif x.startswith("@") or x.startswith("selp."):
            n += 1
    for x in body:
        m = re.match(r"^setp\.\S+\s+(%p\d+)", x)
        if m and m.group(1) not in back:
            n += 1
    return n

def counts(body):
    c = {"fma": 0, "lds": 0, "lds_v4": 0, "lds_f32": 0, "ldg_v4": 0, "setp": 0, "pred": 0}
    for x in body:
        c["fma"] += x.startswith("fma.rn.f32")
        c["lds"] += x.startswith("ld.shared.")
        c["lds_v4"] += x.startswith("ld.shared.v4.f32")
        c["lds_f32"] += x.startswith("ld.shared.f32")
        # a copy that only moves bits is loaded as .u32 / .b32 (nvcc: the B tile)
        c["ldg_v4"] += bool(re.match(r"ld\.global(\.nc)?\.v4\.(f32|u32|b32)", x))
        c["setp"] += x.startswith("setp.")
        c["pred"] += x.startswith("@")
    return c

hdr = open(full_cu).read()
m = re.search(r"^// rTile reg: \[(\d+), (\d+), \d+\]$", hdr, re.M)
if not m or "; full tiles;" not in hdr:
    print("FAIL: the top-1's header has no register tile or no 'full tiles' plan")
    sys.exit(1)
rm, rn = int(m.group(1)), int(m.group(2))
need = rm * rn / (rm + rn)
c = counts(fma_loop(full_ptx))
print(f"full: register tile {rm}x{rn}, step loop {c}")
ok = True
if c["fma"] == 0 or c["lds"] == 0:
    print("FAIL: no step loop with FMAs and shared loads"); ok = False
elif c["fma"] / c["lds"] < need:
    print(f"FAIL: {c['fma']} FMA / {c['lds']} shared loads = {c['fma']/c['lds']:.2f} < {need:.2f}"); ok = False
if c["setp"] > 1 or c["pred"] > 1:
    print(f"FAIL: bounds checks in the step loop ({c['setp']} setp, {c['pred']} predicated)"); ok = False
if vec == "v4":
    v = re.search(r"; 128-bit loads: shared((, global \w+)*);", hdr)
    if not v or sorted(v.group(1).split(", global ")[1:]) != ["A", "B"]:
        print("FAIL: the top-1's plan has no '128-bit loads: shared, global A, global B'"); ok = False
    if c["lds_v4"] == 0 or c["lds_f32"] > 0:
        print(f"FAIL: fragments not read 4 at a time ({c['lds_v4']} ld.shared.v4.f32, {c['lds_f32']} ld.shared.f32)"); ok = False
    elif c["fma"] / c["lds"] < 4 * need:
        print(f"FAIL: {c['fma']} FMA / {c['lds']} 128-bit shared loads < {4 * need:.2f}"); ok = False
    if c["ldg_v4"] == 0:
        print("FAIL: no 128-bit global load (ld.global.v4) in the step loop"); ok = False
# The ragged shape: an edge split, the interior's step loop without guards (128-bit loads where
# its plan says), the edge's with them.
rhdr = open(ragged_cu).read()
sloops = step_loops(ragged_ptx)
loops = [(guards(b), counts(b)) for b in sloops]
print(f"ragged step loops (guards, counts): {loops}")
if "; edge split: interior " not in rhdr:
    print("FAIL: the ragged shape's top-1 has no edge split in its plan"); ok = False
inner = [c for g, c in loops if g == 0]
edge = [c for g, c in loops if g > 0]
if len(inner) != 1:
    print(f"FAIL: ragged shape: {len(inner)} step loops without bounds checks (expected the interior's)"); ok = False
if not edge:
    print("FAIL: the ragged shape's edge step loop has no bounds checks (guards lost)"); ok = False
if len(inner) == 1:
    body = [b for b in sloops if guards(b) == 0][0]
    rm2 = re.search(r"^// rTile reg: \[(\d+), (\d+), \d+\]$", rhdr, re.M)
    ks = re.search(r"; reduction step k (\d+);", rhdr)
    nb, nf = inner_back_branches(body), fmas_between_barriers(body)
    want = int(ks.group(1)) * int(rm2.group(1)) * int(rm2.group(2)) if rm2 and ks else -1
    print(f"ragged interior step: {nb} inner backward branches, {nf} FMAs between barriers (k step x register tile {want})")
    if nb:
        print(f"FAIL: ragged shape: {nb} loops left rolled within the interior's k step"); ok = False
    if nf != want:
        print(f"FAIL: ragged shape: {nf} FMAs in the interior's k step, not its k step x register tile {want}"); ok = False
if vec == "v4" and len(inner) == 1:
    c1 = inner[0]
    rv = "; 128-bit loads: shared" in rhdr
    if rv != (c1["lds_v4"] > 0 and c1["lds_f32"] == 0):
        print(f"FAIL: ragged shape: plan {'with' if rv else 'without'} 128-bit loads, interior step loop {c1}"); ok = False
    gv = re.search(r", global B interior\b", rhdr) is not None
    if gv != (c1["ldg_v4"] > 0):
        print(f"FAIL: ragged shape: plan {'with' if gv else 'without'} interior 128-bit copies of B, interior step loop {c1}"); ok = False
    if re.search(r", global A", rhdr):
        print("FAIL: ragged shape: A's rows of 999 floats are not 16-byte aligned, yet copied 128-bit"); ok = False
sys.exit(0 if ok else 1)
PY
exit $fail
