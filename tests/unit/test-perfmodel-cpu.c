// test-perfmodel-cpu.c: the CPU side of the micro-performance model (perfmodel/cpu.c) — load
// ports and vector registers from the INI, the micro-kernel's step cost (loads per FMA, FMA
// latency, spills), the packed-GEMM blocking mirrored from the CPU backend, and that the
// predictions of a GEMM's candidates differ for packing and register-block reasons.
#include "test.h"
#include "test-perfmodel-ops.h"

static bool load_dev(const char *path, rt_device *dev) {
    rt_err err = {0};
    if (rt_hal_load_device(path, dev, &err) != RT_OK) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return false;
    }
    return true;
}

static void test_ports_regs(const rt_device *dev) {
    // 630 GB/s / (2 cores x 2.1 GHz x 64 B) of devices/x86-avx512.ini.
    RT_EXPECT_NEAR(rt_perf_cpu_load_ports(dev), 630.0 / (2 * 2.1 * 64), 1e-9);
    RT_EXPECT_EQ(rt_perf_cpu_vector_regs(dev), 32);
    rt_device d = *dev;
    d.clock_mhz = 0;
    RT_EXPECT_NEAR(rt_perf_cpu_load_ports(&d), RT_PERF_CPU_DEFAULT_LOAD_PORTS, 1e-12);
}

static void test_ukernel(const rt_device *dev) {
    rt_device d = *dev;
    // 1.5 vector loads per cycle per core.
    d.level[d.n_levels - 2].bandwidth_gbps = 1.5 * 2 * 2.1 * 64;
    rt_perf_ukernel uk;
    // 8x16: 8 accumulators = 4 FMA cycles, 9 loads = 6 cycles: load bound at 2/3.
    RT_EXPECT(rt_perf_cpu_ukernel(&d, 4, 8, 16, 1, &uk));
    RT_EXPECT_EQ(uk.acc_vectors, 8);
    RT_EXPECT_EQ(uk.vector_regs, 10);
    RT_EXPECT_NEAR(uk.cycles_per_k, 6.0, 1e-9);
    // 6x32: 12 accumulators = 6 cycles, 8 loads = 5.33 cycles: at the FMA ports.
    RT_EXPECT(rt_perf_cpu_ukernel(&d, 4, 6, 32, 256, &uk));
    RT_EXPECT_NEAR(uk.cycles_per_k, 6.0, 1e-9);
    RT_EXPECT_NEAR(uk.call_cycles, 256 * 6.0 + 2 * 12 / 1.5 + RT_PERF_CPU_CALL_CYCLES, 1e-9);
    RT_EXPECT(uk.eff > 0.95 && uk.eff < 1.0);
    // 1x16: one accumulator waits the FMA latency (4 cycles) for half a cycle of work.
    RT_EXPECT(rt_perf_cpu_ukernel(&d, 4, 1, 16, 1, &uk));
    RT_EXPECT_NEAR(uk.cycles_per_k, 4.0, 1e-9);
    // 14x32 fits 32 registers (28 + 2 + 1); 16x32 does not: 3 spilled accumulators add a
    // reload and a store each per step.
    RT_EXPECT(rt_perf_cpu_ukernel(&d, 4, 14, 32, 1, &uk));
    RT_EXPECT(!rt_perf_cpu_ukernel(&d, 4, 16, 32, 1, &uk));
    RT_EXPECT_NEAR(uk.cycles_per_k, (16 + 2 + 6) / 1.5, 1e-9);
    // Larger blocks amortize the C update: a longer kc raises the efficiency.
    rt_perf_ukernel a, b;
    rt_perf_cpu_ukernel(&d, 4, 8, 32, 16, &a);
    rt_perf_cpu_ukernel(&d, 4, 8, 32, 256, &b);
    RT_EXPECT(b.eff > a.eff);
}

static void set_tiles(rt_rprog *p, const int64_t t[][3], int32_t n) {
    memset(p, 0, sizeof *p);
    for (int32_t l = 1; l <= n; l++)
        for (int32_t x = 0; x < 3; x++)
            p->tile[l].shape[x] = t[l - 1][x];
}

static void test_gemm_view(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op = tp_matmul(a, 512, 512, 512, RT_DTYPE_F32);
    rt_perf_model *m;
    RT_EXPECT_EQ(rt_perf_model_build(a, op, dev, NULL, &m, &err), RT_OK);
    RT_EXPECT_EQ(m->top, 4);
    // l3 / l2 / l1 / reg over (m, n, k).
    const int64_t t256[4][3] = {{128, 256, 256}, {64, 64, 64}, {16, 32, 16}, {8, 32, 1}};
    rt_rprog p;
    set_tiles(&p, t256, 4);
    rt_perf_cpu_gemm g;
    RT_EXPECT(rt_perf_cpu_gemm_view(m, &p, &g));
    RT_EXPECT_EQ(g.axis_m, 0);
    RT_EXPECT_EQ(g.axis_n, 1);
    RT_EXPECT_EQ(g.axis_k, 2);
    RT_EXPECT_EQ(g.mr, 8);
    RT_EXPECT_EQ(g.nr, 32);
    // kc: the B micro-panel fills two thirds of the 48 KiB L1: 32768 / 128 = 256.
    RT_EXPECT_EQ(g.kc, 256);
    // mc: half of L2 over kc (1024), rounded to mr, capped by M.
    RT_EXPECT_EQ(g.mc, 512);
    RT_EXPECT_EQ(g.nc, 256);
    RT_EXPECT_EQ(g.items, 2);
    // A 16-wide rTile becomes two vectors; a 16-row block with two vectors is cut to 14.
    const int64_t t16[4][3] = {{128, 128, 256}, {64, 64, 64}, {16, 16, 16}, {16, 16, 1}};
    rt_rprog q;
    set_tiles(&q, t16, 4);
    RT_EXPECT(rt_perf_cpu_gemm_view(m, &q, &g));
    RT_EXPECT_EQ(g.nr, 32);
    RT_EXPECT_EQ(g.mr, 14);
    RT_EXPECT_EQ(g.mc, 518);
    RT_EXPECT_EQ(g.nc, 128);
    RT_EXPECT_EQ(g.ng, 2); // four nc blocks in two runs, one per core
    RT_EXPECT_EQ(g.items, 2);

    // Packing: a work item is a row block times a run of nc blocks and packs A once for the
    // run. With nc = 128 the four n blocks form two runs (one per core), so A is still packed
    // twice; one run per block (ng = 4) packs it four times and is slower.
    const char *why;
    RT_EXPECT(rt_perf_evaluate(m, &p, &why));
    const int64_t t128[4][3] = {{128, 128, 256}, {64, 64, 64}, {16, 32, 16}, {8, 32, 1}};
    rt_rprog r;
    set_tiles(&r, t128, 4);
    RT_EXPECT(rt_perf_cpu_gemm_view(m, &r, &g));
    RT_EXPECT_EQ(g.nc, 128);
    RT_EXPECT_EQ(g.ng, 2);
    RT_EXPECT_EQ(g.items, 2);
    double ns, pack_ns, eff, ns4, pack4_ns;
    RT_EXPECT(rt_perf_cpu_gemm_time(m, &g, &ns, &pack_ns, &eff, &why));
    g.ng = 4;
    g.items = 4;
    RT_EXPECT(rt_perf_cpu_gemm_time(m, &g, &ns4, &pack4_ns, &eff, &why));
    RT_EXPECT(pack4_ns > pack_ns);
    RT_EXPECT(ns4 > ns);
    RT_EXPECT(rt_perf_cpu_gemm_view(m, &p, &g));
    RT_EXPECT(rt_perf_cpu_gemm_time(m, &g, &ns, &pack_ns, &eff, &why));
    RT_EXPECT(pack_ns > 0 && pack_ns < ns);
    // The busiest core does at least its half of the arithmetic at the device's peak.
    RT_EXPECT(ns >= 2.0 * 512 * 512 * 512 / dev->peak_gflops[RT_DTYPE_F32]);
    RT_EXPECT(ns < 1.5 * 2.0 * 512 * 512 * 512 / dev->peak_gflops[RT_DTYPE_F32]);

    // Not a contraction: an elementwise op has no GEMM view.
    const int64_t dims[4] = {8, 64, 56, 56};
    rt_op *relu = tp_relu(a, dims);
    rt_perf_model *mr;
    RT_EXPECT_EQ(rt_perf_model_build(a, relu, dev, NULL, &mr, &err), RT_OK);
    RT_EXPECT(!rt_perf_cpu_gemm_view(mr, &p, &g));
    rt_arena_free(a);
}

// The ranking on the CPU: the top-1 register block is a multiple of the vector width with at
// least two vectors and enough accumulators to hide the FMA latency; candidates that compile
// to different blockings get different predictions.
static void test_ranking(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 22);
    rt_err err = {0};
    rt_perf_options opt = {0};
    opt.top_k = 10;
    const int64_t sizes[][3] = {{512, 512, 512}, {128, 1024, 1024}, {384, 768, 256}};
    int32_t distinct_ops = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        rt_op *op = tp_matmul(a, sizes[s][0], sizes[s][1], sizes[s][2], RT_DTYPE_F32);
        rt_perf_result *r;
        RT_EXPECT_EQ(rt_perf_construct(a, op, dev, &opt, &r, &err), RT_OK);
        const rt_perf_model *m = r->model;
        const rt_rprog *p = &r->cands[0];
        // The register block the backend compiles for it (rTiles of one vector are widened to
        // two, so a 16-wide and a 32-wide rTile may tie).
        rt_perf_cpu_gemm g;
        RT_EXPECT(rt_perf_cpu_gemm_view(m, p, &g));
        int64_t mr = g.mr, nr = g.nr;
        RT_EXPECT_EQ(nr % dev->lanes, 0);
        RT_EXPECT(nr >= 2 * dev->lanes);
        RT_EXPECT(mr * nr / dev->lanes >= dev->fma_latency_cycles * dev->teus_per_unit);
        bool distinct = false;
        for (int32_t i = 1; i < r->n_found; i++) {
            RT_EXPECT(r->cands[i].predicted_ns >= r->cands[i - 1].predicted_ns);
            distinct = distinct || r->cands[i].predicted_ns > r->cands[0].predicted_ns * 1.001;
        }
        distinct_ops += distinct;
    }
    RT_EXPECT(distinct_ops >= 1);
    rt_arena_free(a);
}

int main(void) {
    rt_device dev;
    if (!load_dev("devices/x86-avx512.ini", &dev)) {
        RT_EXPECT(false);
        return rt_test_finish("test-perfmodel-cpu");
    }
    test_ports_regs(&dev);
    test_ukernel(&dev);
    test_gemm_view(&dev);
    test_ranking(&dev);
    return rt_test_finish("test-perfmodel-cpu");
}
