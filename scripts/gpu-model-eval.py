#!/usr/bin/env python3
"""gpu-model-eval.py: the GPU model's ranking, re-scored against a GPU check's measurements.

Reads the ops.jsonl of scripts/gpu-check.sh (every candidate's predicted and measured kernel
time) and asks this build of rtgen (--no-profile --json, NVRTC switched off so that nothing
compiles) for its predictions of the same ops on the same device file. Per op it prints, for the
recorded predictions ("old") and this build's ("new"): Kendall tau-b between predicted and
measured time over the measured candidates, and top-1/best (the measured time of the model's
top-1 over the best measured). The top-1 is the report's model_top1 (the model's choice once
the top-K are compiled and priced with the compiler's registers; rank 1 in reports without it);
the new top-K are compiled with NVRTC/hipRTC here (no GPU needed); where that kernel was not measured, top-1/best shows '-' and the line says so. The new
predictions of measured kernels that drop out of the top-K come from a wider construction
(--top-k=4K, at least 40, then 200); kernels match by their phases' names.

usage: scripts/gpu-model-eval.py OPS.jsonl [--rtgen build/rtgen] [--device devices/h100.ini]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def kendall_tau_b(xs, ys):
    n = len(xs)
    conc = disc = tx = ty = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx = (xs[i] > xs[j]) - (xs[i] < xs[j])
            dy = (ys[i] > ys[j]) - (ys[i] < ys[j])
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                tx += 1
            elif dy == 0:
                ty += 1
            elif dx == dy:
                conc += 1
            else:
                disc += 1
    den = ((conc + disc + tx) * (conc + disc + ty)) ** 0.5
    return (conc - disc) / den if den > 0 else None


def key_of(kernel):
    return tuple(p["kernel"] for p in kernel["phases"])


def predictions(rtgen, device, spec, args, top_k, root, compile_=False):
    # The top-K are compiled (NVRTC/hipRTC, no GPU needed) so that their prices use the
    # compiler's registers and the report names the model's choice; the wider constructions
    # only fill in kernels that dropped out of the top-K, uncompiled.
    env = dict(os.environ)
    if not compile_:
        env["RTGEN_LIBNVRTC"] = "/nonexistent/libnvrtc.so"
    with tempfile.TemporaryDirectory() as out:
        cmd = [rtgen, "--device=" + device, "--no-profile", "--json", "--top-k=%d" % top_k,
               "-o", out, spec] + args.split()
        r = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("gpu-model-eval: %s failed (%d): %s" % (" ".join(cmd), r.returncode,
                                                          r.stderr.strip()))
    rep = json.loads(r.stdout)
    ranked = [(key_of(k), k["predicted_ns"]) for k in rep["kernels"]]
    top1 = next((key_of(k) for k in rep["kernels"] if k["rank"] == rep.get("model_top1", 1)),
                ranked[0][0] if ranked else None)
    return ranked, top1


def score(pred, meas, top1):
    keys = [k for k in meas if k in pred]
    tau = kendall_tau_b([pred[k] for k in keys], [meas[k] for k in keys]) if len(keys) > 1 else None
    best = min(meas.values())
    ratio = meas[top1] / best if top1 in meas else None
    return tau, ratio


def fmt(v):
    return "-" if v is None else "%.2f" % v


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("ops")
    ap.add_argument("--rtgen", default=os.path.join(root, "build", "rtgen"))
    ap.add_argument("--device", default="devices/h100.ini")
    a = ap.parse_args()
    rows = []
    taus = {"old": [], "new": []}
    within = {"old": 0, "new": 0}
    print("| op | n | tau old | tau new | top-1/best old | top-1/best new | pred/meas top-1 old "
          "| new | new top-1 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for line in open(a.ops):
        d = json.loads(line)
        ks = [k for k in d["report"].get("kernels", []) if k.get("kernel_median_ns")]
        if not ks:
            continue
        meas = {key_of(k): k["kernel_median_ns"] for k in ks}
        old = {key_of(k): k["predicted_ns"] for k in ks}
        rep = d["report"]
        old_top1 = next((key_of(x) for x in rep["kernels"] if x["rank"] == rep.get("model_top1", 1)),
                        key_of(rep["kernels"][0]))
        k = d["top_k"]
        ranked, new_top1 = predictions(a.rtgen, a.device, d["spec"], d["args"], k, root, True)
        wide = {}
        for wk in (max(4 * k, 40), 200):
            if all(x in wide for x in meas):
                break
            wide = dict(predictions(a.rtgen, a.device, d["spec"], d["args"], wk, root)[0])
        new = {key: p for key, p in wide.items() if key in meas}
        new.update({key: p for key, p in ranked if key in meas})
        to, ro = score(old, meas, old_top1)
        tn, rn = score(new, meas, new_top1)
        for tag, t, r in (("old", to, ro), ("new", tn, rn)):
            if t is not None:
                taus[tag].append(t)
            if r is not None and r <= 1.10:
                within[tag] += 1
        note = "measured" if new_top1 in meas else "NOT measured: " + "+".join(new_top1)
        missing = [x for x in meas if x not in new]
        if missing:
            note += "; no new prediction for " + ", ".join("+".join(x) for x in missing)
        po = old[old_top1] / meas[old_top1] if old_top1 in meas else None
        pn = new[new_top1] / meas[new_top1] if new_top1 in meas else None
        print("| %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
            d["name"], len(ks), fmt(to), fmt(tn), fmt(ro), fmt(rn), fmt(po), fmt(pn), note))
        rows.append(d["name"])
    for tag in ("old", "new"):
        t = taus[tag]
        print("%s: mean tau %s over %d ops; top-1 within 10%% of the best measured on %d/%d ops"
              % (tag, fmt(sum(t) / len(t) if t else None), len(t), within[tag], len(rows)))


if __name__ == "__main__":
    main()
