#!/usr/bin/env python3
"""The Python peers of scripts/gpu-check.sh: PyTorch's fp32 matmul (cuBLAS through the
framework, TF32 off) and an autotuned Triton fp32 matmul (IEEE fp32 dot products, no TF32),
each timed with triton.testing.do_bench (median of its timed calls, in ms) on the shapes given.

    gpu-peers.py --budget-s=90 M,N,K[,BATCH] ...

One line per shape and peer:
    PEER M N K BATCH median_ms gflops max_rel_err ok|wrong
or "PEER M N K BATCH skipped: REASON". The budget stops the Triton autotuning of further
shapes once spent (its configurations compile per shape). Exit 0 unless an import fails
(then 3, with the reason), or a result is wrong (1).
"""
import sys
import time


def parse(argv):
    budget, shapes = 90.0, []
    for a in argv:
        if a.startswith("--budget-s="):
            budget = float(a.split("=", 1)[1])
            continue
        v = [int(x) for x in a.split(",")]
        if len(v) not in (3, 4) or min(v) < 1:
            sys.exit("usage: gpu-peers.py [--budget-s=S] M,N,K[,BATCH] ...")
        shapes.append((v[0], v[1], v[2], v[3] if len(v) == 4 else 1))
    if not shapes:
        sys.exit("usage: gpu-peers.py [--budget-s=S] M,N,K[,BATCH] ...")
    return budget, shapes


def main():
    budget, shapes = parse(sys.argv[1:])
    try:
        import torch
        import triton
        import triton.language as tl
        from triton.testing import do_bench
    except Exception as e:  # no framework here: the step reports why and the check goes on
        print(f"gpu-peers: skipped: {e}", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("gpu-peers: skipped: torch sees no CUDA device", file=sys.stderr)
        return 3
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    configs = [
        triton.Config({"BM": bm, "BN": bn, "BK": bk, "G": 8}, num_warps=w, num_stages=s)
        for (bm, bn, bk, w, s) in [
            (128, 128, 32, 8, 3), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4),
            (64, 64, 32, 4, 4), (128, 128, 16, 8, 4), (256, 128, 16, 8, 3),
        ]
    ]

    @triton.autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def mm(a, b, c, M, N, K, sab, sbb, scb, BM: tl.constexpr, BN: tl.constexpr,
           BK: tl.constexpr, G: tl.constexpr):
        pid, bz = tl.program_id(0), tl.program_id(1)
        nm, nn = tl.cdiv(M, BM), tl.cdiv(N, BN)
        group = pid // (G * nn)
        first = group * G
        rows = tl.minimum(nm - first, G)
        pm = first + (pid % (G * nn)) % rows
        pn = (pid % (G * nn)) // rows
        om = pm * BM + tl.arange(0, BM)
        on = pn * BN + tl.arange(0, BN)
        ok = tl.arange(0, BK)
        pa = a + bz * sab + om[:, None] * K + ok[None, :]
        pb = b + bz * sbb + ok[:, None] * N + on[None, :]
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            ma = (om[:, None] < M) & (ok[None, :] + k0 < K)
            mb = (ok[:, None] + k0 < K) & (on[None, :] < N)
            x = tl.load(pa, mask=ma, other=0.0)
            y = tl.load(pb, mask=mb, other=0.0)
            acc += tl.dot(x, y, input_precision="ieee")
            pa += BK
            pb += BK * N
        mc = (om[:, None] < M) & (on[None, :] < N)
        tl.store(c + bz * scb + om[:, None] * N + on[None, :], acc, mask=mc)

    def triton_mm(x, y, out):
        B, M, K = x.shape
        N = y.shape[2]
        grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]), B)
        mm[grid](x, y, out, M, N, K, M * K, K * N, M * N)

    start, worst_rc = time.time(), 0
    for (m, n, k, bt) in shapes:
        x = torch.rand(bt, m, k, device="cuda") * 2 - 1
        y = torch.rand(bt, k, n, device="cuda") * 2 - 1
        ref = torch.matmul(x.double(), y.double())
        mag = torch.matmul(x.double().abs(), y.double().abs()).clamp_min(1e-30)
        flops = 2.0 * bt * m * n * k
        peers = [("torch", lambda o: torch.matmul(x, y, out=o))]
        if time.time() - start < budget:
            peers.append(("triton", lambda o: triton_mm(x, y, o)))
        else:
            print(f"triton {m} {n} {k} {bt} skipped: the {budget:.0f} s budget is spent")
        for name, fn in peers:
            out = torch.empty(bt, m, n, device="cuda")
            try:
                fn(out)
                torch.cuda.synchronize()
                ms = do_bench(lambda: fn(out), warmup=25, rep=100)
            except Exception as e:
                print(f"{name} {m} {n} {k} {bt} skipped: {type(e).__name__}: {e}"[:300])
                continue
            err = ((out.double() - ref).abs() / mag).max().item()
            good = err < 1e-5
            worst_rc = worst_rc if good else 1
            print(f"{name} {m} {n} {k} {bt} {ms:.4f} {flops / (ms * 1e6):.1f} {err:.3g} "
                  f"{'ok' if good else 'wrong'}", flush=True)
    return worst_rc


if __name__ == "__main__":
    sys.exit(main())
