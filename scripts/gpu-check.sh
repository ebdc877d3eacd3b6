#!/bin/sh
# gpu-check.sh: the whole GPU story in one command, for the day a GPU machine is lent.
#
#   scripts/gpu-check.sh [--dry-run] [--device=FILE.ini] [--ops=FILE] [--only=a,b] [--bin=DIR]
#                        [--budget-s=S] [--no-calib] OUTDIR
#
# Steps, each bounded in time, in this order:
#   1. facts: the GPU, driver and toolkit (nvidia-smi, nvcc), the CPU, rtgen's version;
#   2. rtcalib's GPU probes run for real on the device, writing a measured INI (calib.ini),
#      diffed against the device file (calib.diff); --no-calib skips it (a rerun on a device
#      whose file rtcalib already measured: the summary then takes the FP32 peak from the file);
#   3. every op of scripts/gpu-check.ops: rtgen --json (top-K compiled, run, checked against
#      the reference with fresh random inputs and poisoned outputs, kernel-only timing, winner);
#   4. the peers on every GEMM shape of step 3: cuBLAS SGEMM (bench/gpu-peer-cublas, dlopen'd
#      libcublas) and, from python3, PyTorch's matmul and an autotuned Triton matmul; for the
#      half / bfloat16 GEMMs into float, cublasGemmEx on those types (f32 compute);
#   5. the summary (scripts/gpu-check-summary.py): per op the winner's time, GFLOP/s and % of the
#      measured FP32 peak, ratio to each peer, every candidate's status, and the model's Kendall
#      tau and top-1 against the best measured.
# OUTDIR receives report.md (the summary), ops.jsonl (every rtgen report), peers.txt, calib.ini,
# calib.diff, facts.txt and log.txt: 7 files.
#
# --dry-run runs every step here, on devices/pocl-cpu.ini (PoCL runs the same kernel structure)
# with the small sizes of the ops file; the cuBLAS and Python peers then report why they cannot
# run (no CUDA driver), and rtcalib runs its --quick probes. CI runs it (tests/unit).
# Programs: --bin=DIR holds rtgen, rtcalib and gpu-peer-cublas (a bundle, scripts/gpu-bundle.sh,
# or a build folder, whose bench/ holds the peer), else build/rtgen, build/rtcalib and build/bench/gpu-peer-cublas.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
dry=0
dev=""
ops=$root/scripts/gpu-check.ops
only=""
bin=""
budget=420
calib=1
out=""""
for a in "$@"; do
    case $a in
    --dry-run) dry=1 ;;
    --device=*) dev=${a#--device=} ;;
    --ops=*) ops=${a#--ops=} ;;
    --only=*) only=${a#--only=} ;;
    --bin=*) bin=${a#--bin=} ;;
    --budget-s=*) budget=${a#--budget-s=} ;;
    --no-calib) calib=0 ;;
    -*) echo "gpu-check: unknown option $a" >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "gpu-check: one OUTDIR" >&2; exit 2; }; out=$a ;;
    esac
done
[ -n "$out" ] || { echo "usage: gpu-check.sh [--dry-run] [--device=F] [--ops=F] [--only=a,b] [--bin=DIR] [--budget-s=S] [--no-calib] OUTDIR" >&2; exit 2; }
if [ -n "$bin" ]; then
    rtgen=$bin/rtgen rtcalib=$bin/rtcalib peer=$bin/gpu-peer-cublas
    [ -x "$peer" ] || peer=$bin/bench/gpu-peer-cublas # a build folder
else
    rtgen=$root/build/rtgen rtcalib=$root/build/rtcalib peer=$root/build/bench/gpu-peer-cublas
fi
for p in "$rtgen" "$rtcalib" "$peer"; do
    [ -x "$p" ] || { echo "gpu-check: $p is not built (build, or give --bin=DIR)" >&2; exit 2; }
done
if [ -z "$dev" ]; then
    if [ $dry = 1 ]; then dev=$root/devices/pocl-cpu.ini; else dev=$root/devices/h100.ini; fi
    # The H200 is the H100's chip with more and faster memory: its own file where shipped.
    if [ $dry = 0 ] && command -v nvidia-smi >/dev/null 2>&1 &&
        nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | grep -q H200 &&
        [ -f "$root/devices/h200.ini" ]; then dev=$root/devices/h200.ini; fi
fi
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
log=$out/log.txt
: >"$log"
start=$(date +%s)
left() { echo $((budget - ($(date +%s) - start))); }
say() { echo "[$(($(date +%s) - start))s] $*" | tee -a "$log" >&2; }

# --- 1. facts -------------------------------------------------------------------------------
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "mode: $([ $dry = 1 ] && echo 'dry run (PoCL)' || echo GPU)"
    echo "device file: ${dev#"$root"/}"
    echo "rtgen: $("$rtgen" --version 2>&1)"
    echo "host: $(uname -srm), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit \
            --format=csv 2>&1
    else
        echo "nvidia-smi: not on this machine"
    fi
    for d in /usr/local/cuda/lib64 /usr/local/cuda/extras/CUPTI/lib64; do
        [ -d "$d" ] && echo "$d: $(ls "$d" | grep -E '^lib(cuda|nvrtc|cublas|cupti)[a-zA-Z]*\.so\.[0-9]+$' | tr '\n' ' ')"
    done
    python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' 2>&1 | tail -1
    if command -v nvcc >/dev/null 2>&1; then nvcc --version | tail -2
    elif [ -x /usr/local/cuda/bin/nvcc ]; then /usr/local/cuda/bin/nvcc --version | tail -2
    else echo "nvcc: not on this machine"; fi
} >"$out/facts.txt" 2>&1
say "facts: $(sed -n 2,3p "$out/facts.txt" | tr '\n' ' ')"

# --- 2. rtcalib on the device ---------------------------------------------------------------
cq=""
[ $dry = 1 ] && cq=--quick
if [ $calib = 0 ]; then
    say "rtcalib: skipped (--no-calib)"
    echo "rtcalib skipped (--no-calib): the device file's own figures are used" >"$out/calib.diff"
else
    say "rtcalib $cq --device=${dev#"$root"/}"
    timeout 90 "$rtcalib" --device="$dev" $cq -o "$out/calib.ini" >"$tmp/calib.txt" 2>&1
    rc=$?
    cat "$tmp/calib.txt" >>"$log"
    echo "rtcalib exit $rc" >"$tmp/calib.rc"
    if [ -f "$out/calib.ini" ]; then
        diff -u "$dev" "$out/calib.ini" >"$out/calib.diff"
    else
        echo "rtcalib wrote no INI (exit $rc)" >"$out/calib.diff"
    fi
    say "rtcalib exit $rc"
fi

# --- 3. the ops -----------------------------------------------------------------------------
: >"$tmp/ops.list"
grep -v '^[[:space:]]*#' "$ops" | grep -v '^[[:space:]]*$' | while IFS='|' read -r name spec k gargs dargs; do
    name=$(echo "$name" | tr -d ' ')
    spec=$(echo "$spec" | tr -d ' ')
    k=$(echo "$k" | tr -d ' ')
    if [ -n "$only" ]; then
        case ",$only," in *",$name,"*) ;; *) continue ;; esac
    fi
    # The dry run keeps 3 candidates per op: PoCL compiles each in seconds on 2 cores.
    if [ $dry = 1 ]; then args=$dargs; [ "$k" -gt 3 ] && k=3; else args=$gargs; fi
    echo "$name|$spec|$k|$args" >>"$tmp/ops.list"
done
n_ops=$(wc -l <"$tmp/ops.list")
i=0
while IFS='|' read -r name spec k args; do
    i=$((i + 1))
    rem=$(left)
    if [ "$rem" -lt 20 ]; then
        say "op $i/$n_ops $name: skipped, the $budget s budget is spent"
        echo "skipped: the check's time budget is spent" >"$tmp/op-$name.err"
        echo 124 >"$tmp/op-$name.rc"
        continue
    fi
    t=$((rem - 10))
    [ $t -gt 150 ] && t=150
    say "op $i/$n_ops $name: rtgen --top-k=$k$args $spec (limit ${t}s)"
    (cd "$root" && timeout "$t" "$rtgen" --device="$dev" --json --top-k="$k" $args \
        -o "$tmp/k-$name" "$spec") >"$tmp/op-$name.json" 2>"$tmp/op-$name.err"
    rc=$?
    [ $rc -eq 124 ] && echo "timed out after ${t} s (its share of the ${budget} s budget)" >>"$tmp/op-$name.err"
    echo $rc >"$tmp/op-$name.rc"
    echo "$name|$spec|$k|$args" >>"$tmp/ops.done"
    sed "s/^/  $name: /" "$tmp/op-$name.err" >>"$log"
    say "op $name: exit $rc"
done <"$tmp/ops.list"

# --- 4. peers on the GEMM shapes ------------------------------------------------------------
: >"$out/peers.txt"
shapes=""
pyshapes=""
while IFS='|' read -r name spec k args; do
    # fp32 matmuls: SGEMM, torch, Triton; half / bfloat16 GEMMs into float: cublasGemmEx
    case $spec in *matmul.spec) t="" ;; *half-gemm.spec) t=f16 ;; *bf16-gemm.spec) t=bf16 ;; *) continue ;; esac
    m=$(echo "$args" | sed -n 's/.*--set M=\([0-9]*\).*/\1/p')
    n=$(echo "$args" | sed -n 's/.*--set N=\([0-9]*\).*/\1/p')
    kk=$(echo "$args" | sed -n 's/.*--set K=\([0-9]*\).*/\1/p')
    [ -n "$m" ] && [ -n "$n" ] && [ -n "$kk" ] || continue
    shapes="$shapes $t $m $n $kk ,"
    [ -n "$t" ] || pyshapes="$pyshapes $m,$n,$kk"
done <"$tmp/ops.list"
if [ -n "$shapes" ]; then
    say "cuBLAS on$(echo "$shapes" | tr -s ' ,' ' ')"
    timeout 120 "$peer" $shapes >>"$out/peers.txt" 2>"$tmp/peer.err"
    echo "# gpu-peer-cublas exit $? $(tr '\n' ' ' <"$tmp/peer.err")" >>"$out/peers.txt"
    rem=$(left)
    pyb=$((rem - 30))
    [ $pyb -gt 120 ] && pyb=120
    if [ $pyb -gt 10 ]; then
        say "torch and Triton on$pyshapes (budget ${pyb}s)"
        timeout $((pyb + 60)) python3 "$root/scripts/gpu-peers.py" --budget-s=$pyb $pyshapes \
            >>"$out/peers.txt" 2>"$tmp/py.err"
        echo "# gpu-peers.py exit $? $(tail -c 300 "$tmp/py.err" | tr '\n' ' ')" >>"$out/peers.txt"
    else
        echo "# gpu-peers.py skipped: the time budget is spent" >>"$out/peers.txt"
    fi
fi

# --- 5. summary -----------------------------------------------------------------------------
python3 "$root/scripts/gpu-check-summary.py" --tmp="$tmp" --out="$out" --device="$dev" \
    --dry-run=$dry --seconds=$(($(date +%s) - start))
rc=$?
say "report: $out/report.md (exit $rc)"
exit $rc
