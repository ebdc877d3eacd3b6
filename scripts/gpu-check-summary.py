#!/usr/bin/env python3
"""The summary of scripts/gpu-check.sh: reads the per-op rtgen reports, exit codes and stderr
the check left in its scratch folder, the peers' lines and rtcalib's INI, and writes
OUTDIR/ops.jsonl (one object per op: name, spec, args, exit, seconds, stderr tail, rtgen's JSON
report) and OUTDIR/report.md (the tables). Exit 0 when every op exited 0, no candidate is
"wrong" and no peer result is wrong; 1 otherwise (the report says which).

Every figure is measured, except the FP32 peak when rtcalib could not measure it: then the
device file's value is used and labelled nominal.
"""
import argparse
import configparser
import json
import os
import re
import sys


def kendall_tau(xs, ys):
    n, s, pairs = len(xs), 0, 0
    for i in range(n):
        for j in range(i + 1, n):
            a = (xs[i] > xs[j]) - (xs[i] < xs[j])
            b = (ys[i] > ys[j]) - (ys[i] < ys[j])
            if a and b:
                s += a * b
                pairs += 1
    return s / pairs if pairs else None


def read_ini(path):
    cp = configparser.ConfigParser(inline_comment_prefixes=(";",), strict=False)
    try:
        with open(path) as f:
            cp.read_string(f.read())
    except (OSError, configparser.Error):
        return None
    return cp


def f32_peak(calib, device):
    """The FP32 peak in GFLOP/s and its label."""
    cal = read_ini(calib)
    if cal and cal.has_option("compute", "f32_gflops"):
        src = cal.get("compute", "source", fallback="")
        label = "measured (rtcalib)" if "measured" in src else "nominal (device file)"
        return cal.getfloat("compute", "f32_gflops"), label
    dev = read_ini(device)
    if dev and dev.has_option("compute", "f32_gflops"):
        src = dev.get("compute", "source", fallback="")
        if "measured" in src and "f32_gflops" in src.split("--")[0]:
            return dev.getfloat("compute", "f32_gflops"), "measured (rtcalib, the device file's)"
        return dev.getfloat("compute", "f32_gflops"), "nominal (device file; rtcalib not run or failed)"
    return None, "unknown"


def peers_of(path):
    peers = {}
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return peers, ["peers.txt missing"]
    notes = []
    for ln in lines:
        if ln.startswith("#"):
            notes.append(ln[1:].strip())
            continue
        f = ln.split()
        if len(f) >= 6 and f[5] == "skipped:":
            continue
        key = tuple(int(x) for x in f[1:5]) if len(f) >= 5 else None
        if f[0] in ("cublas", "cublas_f16", "cublas_bf16") and len(f) == 10:
            key += (f[0][7:] or "f32",)  # the inputs' type: cublas_f16 is cublasGemmEx on half
            peers.setdefault(key, {})["cublas"] = (float(f[7]), f[9])
        elif f[0] in ("torch", "triton") and len(f) == 9:
            peers.setdefault(key + ("f32",), {})[f[0]] = (float(f[6]), f[8])
    return peers, notes


def op_summary(name, spec, k, args, tmp):
    def slurp(suffix):
        try:
            return open(os.path.join(tmp, f"op-{name}.{suffix}")).read()
        except OSError:
            return ""
    rc = int(slurp("rc").strip() or 124)
    err = slurp("err")
    try:
        rep = json.loads(slurp("json"))
    except ValueError:
        rep = None
    rec = {"name": name, "spec": spec, "top_k": int(k), "args": args.strip(), "exit": rc,
           "stderr_tail": err[-2000:], "report": rep}
    return rec


def shape_of(spec, args):
    """The GEMM shape and input type of a matmul op (fp32: SGEMM, torch, Triton) or a half /
    bfloat16 GEMM into float (cublasGemmEx), else None."""
    t = {"matmul.spec": "f32", "half-gemm.spec": "f16", "bf16-gemm.spec": "bf16"}.get(
        os.path.basename(spec))
    if t is None:
        return None
    d = dict(re.findall(r"--set (\w+)=(\d+)", args))
    if all(x in d for x in "MNK"):
        return (int(d["M"]), int(d["N"]), int(d["K"]), 1, t)
    return None


def mma_peak(rep, win_rank, device):
    """For a winner whose plan runs matrix instructions ("mma: wmma 16x16x16 half" or "mma:
    mma.sync m16n8k16 half" in its GPU plan): that peak of the device file (mma_f16_gflops,
    mma_bf16_gflops) and its key, else (None, None)."""
    cands = (rep.get("construction") or {}).get("candidates") or []
    plan = " ".join(cands[win_rank - 1].get("gpu_plan") or []) if len(cands) >= win_rank else ""
    m = re.search(r"mma: (?:wmma|mma\.sync) \S+ (half|bfloat16)", plan)
    key = {"half": "mma_f16_gflops", "bfloat16": "mma_bf16_gflops"}.get(m.group(1)) if m else None
    dev = read_ini(device)
    if not key or not dev or not dev.has_option("compute", key):
        return None, None
    return dev.getfloat("compute", key), key


def analyse(rec, peak, device=None):
    rep = rec["report"] or {}
    kern = rep.get("kernels") or []
    cands = (rep.get("construction") or {}).get("candidates") or []
    st = {}
    for kd in kern:
        st[kd.get("status", "?")] = st.get(kd.get("status", "?"), 0) + 1
    ok = [kd for kd in kern if kd.get("status") == "ok" and kd.get("kernel_median_ns")]
    win = next((kd for kd in kern if kd.get("winner")), None)
    a = {"statuses": st, "n": len(kern), "ok": len(ok)}
    if win and win.get("kernel_median_ns"):
        ns = win["kernel_median_ns"]
        a["win_rank"], a["win_ns"] = win["rank"], ns
        a["timer"] = win.get("kernel_timed_with", "")
        a["check"] = win.get("check", "")
        # The useful FLOPs of the bound data (ragged lengths, triangles: no padding), which
        # rtgen reports per timed kernel; reports without them (older rtgen) hold the plan's
        # FLOPs, exact for dense ops only.
        flops = win.get("flops")
        if not flops:
            ragged = any(ax.get("ragged") for ax in (rep.get("construction") or {}).get("axes") or [])
            plan = cands[win["rank"] - 1].get("flops") if len(cands) >= win["rank"] else None
            flops = plan if not ragged else None
        if flops:
            a["gflops"] = flops / ns
            mpeak, a["peak_key"] = mma_peak(rep, win["rank"], device)
            if mpeak or peak:
                a["peak_pct"] = 100.0 * a["gflops"] / (mpeak or peak)
    if ok:
        pred = [kd["predicted_ns"] for kd in ok]
        meas = [kd["kernel_median_ns"] for kd in ok]
        a["tau"] = kendall_tau(pred, meas)
        best = min(meas)
        # the model's choice once the top-K were compiled (priced with the compiler's registers);
        # rank 1 in reports of builds that did not name it
        top1 = next((kd for kd in ok if kd["rank"] == rep.get("model_top1", 1)), None)
        if top1:
            a["top1_vs_best"] = top1["kernel_median_ns"] / best
            a["top1_pred_over_meas"] = top1["predicted_ns"] / top1["kernel_median_ns"]
    a["reasons"] = sorted({(kd.get("status"), (kd.get("reason") or kd.get("compile_error") or "")[:160])
                           for kd in kern if kd.get("status") not in ("ok",)})
    return a


def fmt(x, f="{:.2f}"):
    return "—" if x is None else f.format(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--dry-run", type=int, default=0)
    ap.add_argument("--seconds", type=int, default=0)
    o = ap.parse_args()
    peak, peak_label = f32_peak(os.path.join(o.out, "calib.ini"), o.device)
    peers, peer_notes = peers_of(os.path.join(o.out, "peers.txt"))
    recs = []
    try:
        done = open(os.path.join(o.tmp, "ops.list")).read().splitlines()
    except OSError:
        done = []
    for ln in done:
        name, spec, k, args = ln.split("|", 3)
        recs.append(op_summary(name, spec, k, args, o.tmp))
    with open(os.path.join(o.out, "ops.jsonl"), "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    bad = []
    L = []
    L.append("# rtgen GPU check" + (" (dry run on PoCL)" if o.dry_run else ""))
    L.append("")
    try:
        L += ["```", open(os.path.join(o.out, "facts.txt")).read().rstrip(), "```", ""]
    except OSError:
        pass
    L.append(f"FP32 peak: {fmt(peak, '{:.0f}')} GFLOP/s, {peak_label}. Check wall time {o.seconds} s.")
    L.append("")
    L.append("| op | exit | candidates ok/n | statuses | winner | kernel ms | GFLOP/s | % peak "
             "| cuBLAS ratio | torch ratio | Triton ratio | tau | top-1/best | pred/meas top-1 |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    taus, top1s = [], []
    an = [analyse(r, peak, o.device) for r in recs]  # once per op: the tables below read it
    for r, a in zip(recs, an):
        if r["exit"] != 0:
            bad.append(f"{r['name']}: rtgen exit {r['exit']}")
        if a["statuses"].get("wrong"):
            bad.append(f"{r['name']}: {a['statuses']['wrong']} wrong candidate(s)")
        ratios = {}
        shp = shape_of(r["spec"], r["args"])
        if shp and shp in peers and a.get("gflops"):
            for p, (g, okp) in peers[shp].items():
                ratios[p] = a["gflops"] / g if g > 0 else None
                if okp != "ok":
                    bad.append(f"{r['name']}: peer {p} wrong")
        if a.get("tau") is not None:
            taus.append(a["tau"])
        if a.get("top1_vs_best") is not None:
            top1s.append(a["top1_vs_best"])
        st = ", ".join(f"{k} {v}" for k, v in sorted(a["statuses"].items()))
        L.append(f"| {r['name']} | {r['exit']} | {a['ok']}/{a['n']} | {st} | {a.get('win_rank', '—')} "
                 f"| {fmt(a['win_ns'] / 1e6 if a.get('win_ns') else None, '{:.4f}')} "
                 f"| {fmt(a.get('gflops'), '{:.0f}')} | {fmt(a.get('peak_pct'), '{:.1f}')} "
                 f"| {fmt(ratios.get('cublas'))} | {fmt(ratios.get('torch'))} | {fmt(ratios.get('triton'))} "
                 f"| {fmt(a.get('tau'))} | {fmt(a.get('top1_vs_best'))} | {fmt(a.get('top1_pred_over_meas'))} |")
    L.append("")
    L.append(f"Model: mean Kendall tau {fmt(sum(taus) / len(taus) if taus else None)} over {len(taus)} ops; "
             f"top-1 within 10 % of the best measured on "
             f"{sum(1 for t in top1s if t <= 1.10)}/{len(top1s)} ops.")
    L.append("")
    mk = sorted({(r["name"], a["peak_key"]) for r, a in zip(recs, an) if a.get("peak_key")})
    L.append("Ratios are rtgen's winner over the peer in GFLOP/s (> 1: rtgen faster), for the fp32 "
             "matmul ops (cuBLAS SGEMM, torch, Triton) and the half / bfloat16 GEMMs into float "
             "(cuBLAS: cublasGemmEx on those types, f32 compute); ragged ops count the useful FLOPs of the "
             "bound lengths (no padding). % peak is of the FP32 peak above"
             + ("; for " + ", ".join(f"{n} of the device file's {k}" for n, k in mk) if mk else "")
             + ". "
             "Timers: " + ", ".join(sorted({a.get('timer', '') for a in an} - {''})) + ".")
    L.append("")
    L.append("## Failures and non-ok candidates")
    for r, a in zip(recs, an):
        if r["exit"] != 0:
            L.append(f"- {r['name']}: exit {r['exit']}: " + r["stderr_tail"].strip().replace("\n", " / ")[-600:])
        for (s, why) in a["reasons"]:
            L.append(f"- {r['name']}: {s}: {why}")
    L.append("")
    L.append("## Peers")
    L += [f"- {n}" for n in peer_notes]
    for shp, d in sorted(peers.items()):
        L.append(f"- {shp[0]}x{shp[1]}x{shp[2]}{'' if shp[4] == 'f32' else ' ' + shp[4]}: " +
                 ", ".join(f"{p} {g:.0f} GFLOP/s ({ok})" for p, (g, ok) in sorted(d.items())))
    L.append("")
    L.append("## rtcalib (calib.diff, first lines)")
    try:
        L += ["```"] + open(os.path.join(o.out, "calib.diff")).read().splitlines()[:60] + ["```"]
    except OSError:
        L.append("no calib.diff")
    L.append("")
    L.append("Verdict: " + ("PASS" if not bad else "FAIL: " + "; ".join(bad)))
    with open(os.path.join(o.out, "report.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    print("\n".join(L[:0] + [ln for ln in L if ln.startswith("|") or ln.startswith("Verdict")
                             or ln.startswith("Model") or ln.startswith("FP32")]))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
