// test-perfmodel-cpu.c: the CPU side of the micro-performance model (perfmodel/cpu.c) — load
// ports and vector registers from the INI, the micro-kernel's step cost (loads per FMA, FMA
// latency, spills), the packed-GEMM blocking mirrored from the CPU backend (plain and implicit:
// a convolution's groups and batch), the busiest core's share of unequal work items, C's round
// trips per k block, the general path's loop nest (work items, vector loops with constant and
// run-time trip counts, the row packing of window reads, warm operators timed from the cache), and that the top-K are distinct kernels whose predictions differ for
// packing, register-block and loop reasons.
#include "test.h"
#include "test-perfmodel-ops.h"

#include <math.h>

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

// A k step's cycles from its FMA or load time and its B stream's from L2 (perfmodel.h
// RT_PERF_CPU_STREAM_OVERLAP_P).
static double overlap(double busy, double stream) {
    double p = RT_PERF_CPU_STREAM_OVERLAP_P;
    return pow(pow(busy, p) + pow(stream, p), 1.0 / p);
}

static void test_ukernel(const rt_device *dev) {
    rt_device d = *dev;
    double l2 = 188.0 / 2 / 2.1; // B per cycle per core from L2 (devices/x86-avx512.ini)
    // 1.5 vector loads per cycle per core.
    d.level[d.n_levels - 2].bandwidth_gbps = 1.5 * 2 * 2.1 * 64;
    rt_perf_ukernel uk;
    // 8x16: 8 accumulators = 4 FMA cycles, 9 loads = 6 cycles: load bound at 2/3.
    RT_EXPECT(rt_perf_cpu_ukernel(&d, 4, 8, 16, 1, &uk));
    RT_EXPECT_EQ(uk.acc_vectors, 8);
    RT_EXPECT_EQ(uk.vector_regs, 10);
    RT_EXPECT_NEAR(uk.cycles_per_k, 6.0, 1e-9);
    // 6x32: 12 accumulators = 6 cycles, 8 loads = 5.33 cycles: at the FMA ports, with the
    // 128 B of B per step from L2 (2.9 cycles) overlapping them (1.3% more).
    RT_EXPECT(rt_perf_cpu_ukernel(&d, 4, 6, 32, 256, &uk));
    RT_EXPECT_NEAR(uk.cycles_per_k, overlap(6.0, 128 / l2), 1e-9);
    RT_EXPECT(uk.cycles_per_k > 6.0 && uk.cycles_per_k < 6.1);
    RT_EXPECT_NEAR(uk.call_cycles,
                   256 * overlap(6.0, 128 / l2) + 2 * 12 / 1.5 + RT_PERF_CPU_CALL_CYCLES, 1e-9);
    RT_EXPECT(uk.eff > 0.95 && uk.eff < 1.0);
    // 1x16: one accumulator waits the FMA latency (4 cycles) for half a cycle of work.
    RT_EXPECT(rt_perf_cpu_ukernel(&d, 4, 1, 16, 1, &uk));
    RT_EXPECT_NEAR(uk.cycles_per_k, 4.0, 1e-9);
    // 14x32 fits 32 registers (28 + 2 + 1); 16x32 does not: 3 spilled accumulators add a
    // reload and a store each per step.
    RT_EXPECT(rt_perf_cpu_ukernel(&d, 4, 14, 32, 1, &uk));
    RT_EXPECT(!rt_perf_cpu_ukernel(&d, 4, 16, 32, 1, &uk));
    RT_EXPECT_NEAR(uk.cycles_per_k, (16 + 2 + 6) / 1.5, 1e-9);
    // L1 (48 KiB, 12 ways: 44 KiB for the A micro-panel and the C tile, which stay; B streams
    // from L2 at 188 GB/s over 2 cores at 2.1 GHz, 44.8 B per cycle, within the FMA time of
    // both): 8x32 with kc = 512 keeps 17 KiB and runs at its FMA bound; 12x32 with kc = 1024
    // keeps 49.5 KiB, so each k step also brings its 12 A values from L2 again, of which
    // RT_PERF_CPU_RELOAD_EXPOSED is not hidden behind its 12 FMA cycles.
    rt_perf_ukernel fit, over;
    rt_perf_cpu_ukernel(&d, 4, 8, 32, 512, &fit);
    rt_perf_cpu_ukernel(&d, 4, 12, 32, 1024, &over);
    RT_EXPECT_NEAR(fit.cycles_per_k, overlap(8.0, 128 / l2), 1e-9);
    RT_EXPECT_NEAR(over.cycles_per_k,
                   overlap(24.0 / 2, 128 / l2) + RT_PERF_CPU_RELOAD_EXPOSED * 48.0 / l2, 1e-9);
    RT_EXPECT(over.eff < fit.eff);
    // An L2 too slow for the stream bounds the step: at 16 B per cycle per core, 4x64's four B
    // vectors (256 B) take 16 cycles against its 8 FMA cycles (and a little more).
    rt_device slow = d;
    slow.level[slow.n_levels - 3].bandwidth_gbps = 16.0 * 2 * 2.1;
    rt_perf_cpu_ukernel(&slow, 4, 4, 64, 512, &over);
    rt_perf_cpu_ukernel(&d, 4, 4, 64, 512, &fit);
    RT_EXPECT_NEAR(fit.cycles_per_k, overlap(8.0, 256 / l2), 1e-9);
    RT_EXPECT_NEAR(over.cycles_per_k, overlap(8.0, 16.0), 1e-9);
    RT_EXPECT(over.cycles_per_k > 16.0 && over.cycles_per_k < 16.3);
    // At 32 B per cycle, 4x64's stream takes its FMA time (8 cycles): the two overlap
    // imperfectly, 2^(1/p) more; 12x32's 128 B (4 cycles) against 12 FMA cycles hardly adds.
    rt_device mid = d;
    mid.level[mid.n_levels - 3].bandwidth_gbps = 32.0 * 2 * 2.1;
    rt_perf_cpu_ukernel(&mid, 4, 4, 64, 512, &over);
    rt_perf_cpu_ukernel(&mid, 4, 12, 32, 256, &fit);
    RT_EXPECT_NEAR(over.cycles_per_k, 8.0 * pow(2.0, 1.0 / RT_PERF_CPU_STREAM_OVERLAP_P), 1e-9);
    RT_EXPECT(fit.cycles_per_k < 12.0 * 1.01);
    RT_EXPECT(over.eff < 0.9 * fit.eff);
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
    // kc: the 8-row A micro-panel fills half of the 48 KiB L1 up to 512 (24576 / 32 = 768).
    RT_EXPECT_EQ(g.kc, 512);
    // mc: half of a core's L3 share (1920 KiB) over kc is 480, then the two row blocks are
    // made equal (256 + 256, not 480 + 32), one per core.
    RT_EXPECT_EQ(g.mc, 256);
    // nc: the B block fills a quarter of L2 (512 KiB / 2 KiB per column = 256).
    RT_EXPECT_EQ(g.nc, 256);
    RT_EXPECT_EQ(g.items, 2);
    // A 16-wide rTile becomes two vectors; a 16-row block with two vectors is cut to 14.
    const int64_t t16[4][3] = {{128, 128, 256}, {64, 64, 64}, {16, 16, 16}, {16, 16, 1}};
    rt_rprog q;
    set_tiles(&q, t16, 4);
    RT_EXPECT(rt_perf_cpu_gemm_view(m, &q, &g));
    RT_EXPECT_EQ(g.nr, 32);
    RT_EXPECT_EQ(g.mr, 14);
    // kc: 24576 / 56 = 438 -> 432, and K = 512 cut into two equal k blocks of 256.
    RT_EXPECT_EQ(g.kc, 256);
    RT_EXPECT_EQ(g.mc, 266); // 256 rounded up to mr
    RT_EXPECT_EQ(g.nc, 512);
    RT_EXPECT_EQ(g.ng, 1);
    RT_EXPECT_EQ(g.items, 2);
    // A 14-row A panel is past LLVM's widest interleave: the backend gathers its rows, about a
    // cycle per element, where an 8-row panel of the same block is loaded and shuffled.
    {
        rt_perf_cpu_gemm g8 = g;
        g8.mr = 8;
        double n14, p14, n8, p8, e14, e8;
        const char *w14;
        RT_EXPECT(g.a_k_unit);
        RT_EXPECT(rt_perf_cpu_gemm_time(m, &g, &n14, &p14, &e14, &w14));
        RT_EXPECT(rt_perf_cpu_gemm_time(m, &g8, &n8, &p8, &e8, &w14));
        RT_EXPECT(p14 - p8 >
                  0.5 * 256 * 512 * rt_hal_cpu_costs(dev).gather_cycles / rt_perf_cpu_ghz(dev));
    }

    // Packing: a work item is a row block times a run of nc blocks and packs A once for the
    // run. With a row block per core (512 x 2048 x 512) the eight n blocks form one run, so A is
    // packed once; four runs of two blocks (ng = 4) pack it four times.
    const char *why;
    RT_EXPECT(rt_perf_evaluate(m, &p, &why));
    rt_perf_model *mw;
    RT_EXPECT_EQ(
        rt_perf_model_build(a, tp_matmul(a, 512, 2048, 512, RT_DTYPE_F32), dev, NULL, &mw, &err),
        RT_OK);
    const int64_t t128[4][3] = {{128, 128, 256}, {64, 64, 64}, {16, 32, 16}, {8, 32, 1}};
    rt_rprog r;
    set_tiles(&r, t128, 4);
    RT_EXPECT(rt_perf_cpu_gemm_view(mw, &r, &g));
    RT_EXPECT_EQ(g.nc, 256);
    RT_EXPECT_EQ(g.ng, 1);
    RT_EXPECT_EQ(g.items, 2);
    double ns, pack_ns, eff, ns4, pack4_ns;
    RT_EXPECT(rt_perf_cpu_gemm_time(mw, &g, &ns, &pack_ns, &eff, &why));
    g.ng = 4;
    g.items = 8;
    RT_EXPECT(rt_perf_cpu_gemm_time(mw, &g, &ns4, &pack4_ns, &eff, &why));
    // A is packed four times instead of once (the total may still be lower: a run of one
    // column block keeps a 4x smaller C region, which the model takes from a nearer level):
    // three more 256 x 512 blocks, each at least its vector loads and stores (A is read along
    // k, 4 rows per panel: shuffled, not gathered).
    double a_block_ns = 256.0 * 512 / 16 * 2 / rt_perf_cpu_load_ports(dev) / rt_perf_cpu_ghz(dev);
    RT_EXPECT(g.a_k_unit);
    RT_EXPECT(pack4_ns - pack_ns > 3.0 * a_block_ns);
    RT_EXPECT(ns4 > 0.0);
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

// A convolution is an implicit GEMM: m = the filters, n = the output pixels (y, x flattened,
// the output's unit-stride suffix of the input's axes), k = (c, r, s), and the batch apart.
static void test_conv_view(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 22);
    rt_err err = {0};
    rt_op *op = tp_conv(a, 1, 64, 56, 64, 3, 1, 1);
    rt_perf_model *m;
    RT_EXPECT_EQ(rt_perf_model_build(a, op, dev, NULL, &m, &err), RT_OK);
    const int64_t t[4][7] = {{1, 64, 56, 56, 64, 3, 3},
                             {1, 32, 2, 56, 32, 1, 3},
                             {1, 4, 1, 56, 8, 1, 3},
                             {1, 4, 1, 56, 1, 1, 3}};
    rt_rprog p;
    memset(&p, 0, sizeof p);
    for (int32_t l = 1; l <= 4; l++)
        for (int32_t x = 0; x < 7; x++)
            p.tile[l].shape[x] = t[l - 1][x];
    rt_perf_cpu_gemm g;
    RT_EXPECT(rt_perf_cpu_gemm_view(m, &p, &g));
    RT_EXPECT(g.implicit);
    RT_EXPECT(g.b_window); // I(n, c, y + r - 1, x + s - 1)
    RT_EXPECT_EQ(g.M, 64);
    RT_EXPECT_EQ(g.N, 56 * 56);
    RT_EXPECT_EQ(g.K, 64 * 9);
    RT_EXPECT_EQ(g.batch, 1);
    RT_EXPECT_EQ(g.group[0], RT_PERF_GEMM_BATCH); // n
    RT_EXPECT_EQ(g.group[1], RT_PERF_GEMM_M);     // f
    RT_EXPECT_EQ(g.group[2], RT_PERF_GEMM_N);     // y
    RT_EXPECT_EQ(g.group[3], RT_PERF_GEMM_N);     // x
    RT_EXPECT_EQ(g.group[6], RT_PERF_GEMM_K);     // s
    // Seeds are the groups' products: register 4 x 56 (four vectors); kc from the L1 rule for a
    // 4-row A micro-panel (RT_PERF_CPU_MAX_KC), so K = 576 is one k block.
    RT_EXPECT_EQ(g.mr, 4);
    RT_EXPECT_EQ(g.nr, 64);
    RT_EXPECT_EQ(g.kc, 576);
    // Tensor sizes: the input (not K x N: the window reads it nine times), filters, output.
    RT_EXPECT_NEAR(g.b_bytes, 64.0 * 56 * 56 * 4, 1e-6);
    RT_EXPECT_NEAR(g.a_bytes, 64.0 * 64 * 9 * 4, 1e-6);
    RT_EXPECT_NEAR(g.c_bytes, 64.0 * 56 * 56 * 4, 1e-6);
    const char *why;
    RT_EXPECT(rt_perf_evaluate(m, &p, &why));
    RT_EXPECT_EQ(p.bottleneck, -1);
    // Batch 3: the batch folds into runs of column blocks over batch x n blocks.
    rt_op *op3 = tp_conv(a, 3, 8, 13, 16, 3, 2, 1);
    rt_perf_model *m3;
    RT_EXPECT_EQ(rt_perf_model_build(a, op3, dev, NULL, &m3, &err), RT_OK);
    rt_rprog q;
    memset(&q, 0, sizeof q);
    for (int32_t l = 1; l <= 4; l++)
        for (int32_t x = 0; x < 7; x++)
            q.tile[l].shape[x] = 1;
    RT_EXPECT(rt_perf_cpu_gemm_view(m3, &q, &g));
    RT_EXPECT_EQ(g.batch, 3);
    RT_EXPECT_EQ(g.N, 7 * 7);
    int64_t nblk = 3 * rt_ceil_div(g.N, g.nc);
    RT_EXPECT_EQ(g.items, rt_ceil_div(g.M, g.mc) * rt_ceil_div(nblk, rt_ceil_div(nblk, g.ng)));
    // A 1x1 convolution reads its input plainly: no window to test in the pack.
    rt_perf_model *m1;
    RT_EXPECT_EQ(rt_perf_model_build(a, tp_conv(a, 1, 16, 8, 32, 1, 1, 0), dev, NULL, &m1, &err),
                 RT_OK);
    RT_EXPECT(rt_perf_cpu_gemm_view(m1, &q, &g));
    RT_EXPECT(!g.b_window);
    RT_EXPECT_EQ(g.K, 16);
    // Depthwise convolution (the channel in every operand) and pooling are no GEMM.
    const int64_t dims[4] = {1, 8, 6, 6};
    rt_perf_model *mr;
    RT_EXPECT_EQ(rt_perf_model_build(a, tp_relu(a, dims), dev, NULL, &mr, &err), RT_OK);
    RT_EXPECT(!rt_perf_cpu_gemm_view(mr, &q, &g));
    rt_arena_free(a);
}

// Work items go to the cores in contiguous chunks; with 3 equal items on 2 cores the busiest
// does 2, and a run with a short edge block makes its item cheaper than a full one.
static void test_gemm_balance(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_perf_model *m;
    RT_EXPECT_EQ(
        rt_perf_model_build(a, tp_matmul(a, 64, 768, 256, RT_DTYPE_F32), dev, NULL, &m, &err),
        RT_OK);
    rt_perf_cpu_gemm g;
    rt_rprog p;
    const int64_t t[4][3] = {{64, 256, 256}, {64, 64, 64}, {16, 32, 16}, {8, 32, 1}};
    set_tiles(&p, t, 4);
    RT_EXPECT(rt_perf_cpu_gemm_view(m, &p, &g));
    // The L2 rule (1024 columns at kc = 256) capped by N, then halved for a second work item.
    RT_EXPECT_EQ(g.nc, 384);
    g.nc = 256; // three column blocks
    double ns3, ns2, pk, eff;
    const char *why;
    g.ng = 3; // three runs of one 256-column block each
    g.items = 3;
    RT_EXPECT(rt_perf_cpu_gemm_time(m, &g, &ns3, &pk, &eff, &why));
    g.ng = 2; // runs of two blocks and one: still two blocks on the busiest core
    g.items = 2;
    RT_EXPECT(rt_perf_cpu_gemm_time(m, &g, &ns2, &pk, &eff, &why));
    // Same busiest-core work (two blocks), but ng = 3 packs A twice on it, ng = 2 once.
    RT_EXPECT(ns3 > ns2);
    g.ng = 1; // one core does everything
    g.items = 1;
    double ns1;
    RT_EXPECT(rt_perf_cpu_gemm_time(m, &g, &ns1, &pk, &eff, &why));
    RT_EXPECT(ns1 > 1.4 * ns2);
    rt_arena_free(a);
}

// A batched contraction whose batch axes both operands read (attention scores, K read as
// (b, h, j, d)): the view groups b.h as the batch with a_batch (A packed per entry), K's panels
// gathered along k (b_k_unit), the work items entry-major, and the busiest core's time covers
// its share of the entries: 12 entries on 2 cores cost six times one entry's items, not one.
static void test_batched_view(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op = NULL;
    const char *text = "def f(float(4, 3, 128, 64) Q, float(4, 3, 128, 64) K) -> (S) {\n"
                       " S(b, h, i, j) +=! Q(b, h, i, d) * K(b, h, j, d)\n}\n";
    RT_EXPECT_EQ(rt_spec_parse(a, text, "batched.spec", NULL, 0, &op, &err), RT_OK);
    rt_perf_model *m = NULL;
    if (!op || rt_perf_model_build(a, op, dev, NULL, &m, &err) != RT_OK) {
        RT_EXPECT(false);
        rt_arena_free(a);
        return;
    }
    rt_rprog p;
    memset(&p, 0, sizeof p);
    for (int32_t l = 1; l <= m->top; l++)
        for (int32_t x = 0; x < m->n_axes; x++)
            p.tile[l].shape[x] = m->axes[x].is_reduce ? 16 : 8;
    rt_perf_cpu_gemm g;
    RT_EXPECT(rt_perf_cpu_gemm_view(m, &p, &g));
    RT_EXPECT(g.a_batch);
    RT_EXPECT(g.b_k_unit);
    RT_EXPECT_EQ(g.batch, 12);
    RT_EXPECT_EQ(g.M, 128);
    RT_EXPECT_EQ(g.N, 128);
    RT_EXPECT_EQ(g.K, 64);
    int64_t mt = (g.M + g.mc - 1) / g.mc;
    RT_EXPECT_EQ(g.items, 12 * mt * g.ng);
    double ns12, ns2, pk, eff;
    const char *why;
    RT_EXPECT(rt_perf_cpu_gemm_time(m, &g, &ns12, &pk, &eff, &why));
    g.batch = 2;
    g.items = 2 * mt * g.ng;
    RT_EXPECT(rt_perf_cpu_gemm_time(m, &g, &ns2, &pk, &eff, &why));
    if (ns12 < 5.5 * ns2 || ns12 > 6.5 * ns2)
        fprintf(stderr, "batched: 12 entries %g ns, 2 entries %g ns\n", ns12, ns2);
    RT_EXPECT(ns12 > 5.5 * ns2 && ns12 < 6.5 * ns2);
    rt_arena_free(a);
}

// The blocking rule's result for an M x N x K GEMM with an 8 x 32 register tile (the other
// seeds below every device rule).
static rt_perf_cpu_gemm block_of(const rt_device *dev, int64_t M, int64_t N, int64_t K) {
    rt_perf_cpu_gemm g = {
        .M = M, .N = N, .K = K, .mr = 8, .nr = 32, .kc = 256, .mc = 96, .nc = 256};
    rt_perf_cpu_gemm_block(dev, 1, &g);
    return g;
}

// The work items of the blocking rule keep both cores busy: row blocks of equal height (880
// rows under the 480-row L3 bound of this device at kc = 512 are two of 440, not 480 + 400), and
// as many runs of column blocks as it takes to spread an odd number of row blocks (7 row blocks
// on 2 cores: 14 items, not 4 + 3).
static void test_gemm_items(const rt_device *dev) {
    rt_perf_cpu_gemm g = block_of(dev, 880, 512, 1024);
    RT_EXPECT_EQ(g.kc, 512);
    RT_EXPECT_EQ(g.mc, 440);
    RT_EXPECT_EQ(g.ng, 1);
    RT_EXPECT_EQ(g.items, 2);
    // 8-row A micro-panels in half of a 48 KiB L1: kc = 768, 4096 cut into 6 k blocks of 683,
    // and row blocks of at most 359 (half of a core's L3 share over 683 x 4 bytes).
    g = block_of(dev, 2400, 4096, 4096);
    RT_EXPECT_EQ(g.kc, 683);
    RT_EXPECT_EQ(g.mc, 344);
    RT_EXPECT_EQ(g.ng, 2);
    RT_EXPECT_EQ(g.items, 14);
    // Already even: one run per row block (A packed once per k block).
    g = block_of(dev, 1920, 4096, 4096);
    RT_EXPECT_EQ(g.mc, 320);
    RT_EXPECT_EQ(g.ng, 1);
    RT_EXPECT_EQ(g.items, 6);
    // K cut into equal k blocks: 1033 = 2 x 517 (not 768 + 265).
    RT_EXPECT_EQ(block_of(dev, 1021, 1031, 1033).kc, 517);
    // With a large L3 all 1021 rows fit one block, and the L2 rule's 736 columns would leave
    // the two cores 736 and 295 of them. Two row blocks (512 + 509) balance the cores and let
    // each pack half of A and half of B; one row block in two column blocks of 544 and 487 would
    // have both cores pack all of A (6% more work on the busiest one).
    rt_device big = *dev;
    big.level[big.n_levels - 4].capacity_bytes = 64 << 20;
    g = block_of(&big, 1021, 1031, 1033);
    RT_EXPECT_EQ(g.mc, 512);
    RT_EXPECT_EQ(g.items, 2);
    // One row panel (M = 8): the columns are split evenly instead. The L2 rule's 352 would
    // leave 352 and 679 columns; 9 blocks of 128 in 5 runs leave 512 and 519.
    g = block_of(&big, 8, 1031, 1033);
    RT_EXPECT_EQ(g.mc, 8);
    RT_EXPECT_EQ(g.nc, 128);
    RT_EXPECT_EQ(g.items, 5);
}

// C is read and written once per k block: where it lives beyond L2, a shorter kc (more k
// blocks) costs more than the micro-kernel's own C update.
static void test_c_revisits(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_perf_model *m;
    RT_EXPECT_EQ(
        rt_perf_model_build(a, tp_matmul(a, 1024, 1024, 1024, RT_DTYPE_F32), dev, NULL, &m, &err),
        RT_OK);
    rt_rprog p;
    const int64_t t[4][3] = {{128, 512, 512}, {64, 128, 128}, {16, 16, 16}, {8, 16, 1}};
    set_tiles(&p, t, 4);
    rt_perf_cpu_gemm g;
    RT_EXPECT(rt_perf_cpu_gemm_view(m, &p, &g));
    RT_EXPECT_EQ(g.kc, 512);
    g.kc = 256;
    double ns256, ns128, pk, eff;
    const char *why;
    RT_EXPECT(rt_perf_cpu_gemm_time(m, &g, &ns256, &pk, &eff, &why));
    g.kc = 128;
    RT_EXPECT(rt_perf_cpu_gemm_time(m, &g, &ns128, &pk, &eff, &why));
    rt_perf_ukernel u256, u128;
    rt_perf_cpu_ukernel(dev, 4, 8, 32, 256, &u256);
    rt_perf_cpu_ukernel(dev, 4, 8, 32, 128, &u128);
    double calls = 1024.0 / 8 * 1024 / 32 / 2; // per core, per k block of 128
    double uk_ns = calls * (2 * u128.call_cycles - u256.call_cycles) / 2.1;
    RT_EXPECT(ns128 - ns256 > uk_ns);
    rt_arena_free(a);
}

// rProgram with every level's tile on axis 0 at 96 and at 32 points, and their loop plans.
static void plans_96_32(const rt_perf_model *m, rt_rprog *p96, rt_rprog *p32,
                        rt_perf_cpu_loops *l96, rt_perf_cpu_loops *l32) {
    memset(p96, 0, sizeof *p96);
    memset(p32, 0, sizeof *p32);
    for (int32_t l = 1; l <= m->top; l++) {
        p96->tile[l].shape[0] = 96;
        p32->tile[l].shape[0] = 32;
    }
    RT_EXPECT(rt_perf_cpu_loop_plan(m, p96, l96));
    RT_EXPECT(rt_perf_cpu_loop_plan(m, p32, l32));
}

// The general path: relu over 1008 x 42 x 42 (one fused axis) reading a tensor whose rows are
// 48 wide (so the axis is not one flat run, rt_perf_cpu_flat_axis) blocked by 96-point tiles
// is rows of 42 (constant trip, whole vectors) two at a time; by 32-point tiles it is 32- and
// 10-wide pieces of every row with run-time trip counts: more items and slower vector loops.
static void test_loops(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    const int64_t dims[4] = {1, 1008, 42, 42};
    rt_op *op = tp_relu(a, dims);
    op->tensors[0].dims[3].extent = tp_num(a, 48);
    rt_perf_model *m;
    RT_EXPECT_EQ(rt_perf_model_build(a, op, dev, NULL, &m, &err), RT_OK);
    rt_perf_flat fl;
    RT_EXPECT_EQ(rt_perf_cpu_flat_axis(m, &op->stmts[0], &fl), 0);
    RT_EXPECT_EQ(m->flat.n, 0);
    rt_rprog p96, p32;
    rt_perf_cpu_loops l96, l32;
    plans_96_32(m, &p96, &p32, &l96, &l32);
    RT_EXPECT_EQ(l96.n_vars, 4);
    RT_EXPECT_EQ(l96.tile[3][m->top], 42); // w: the whole row
    RT_EXPECT_EQ(l96.tile[2][m->top], 2);  // h: two rows per tile
    RT_EXPECT_EQ(l96.items, 1008 * 21);
    RT_EXPECT_EQ(l32.tile[3][m->top], 32);
    RT_EXPECT_EQ(l32.tile[2][m->top], 1);
    RT_EXPECT_EQ(l32.items, 1008 * 42 * 2);
    double ns96, ns32, s96, s32;
    RT_EXPECT(rt_perf_cpu_loop_time(m, &l96, &ns96, &s96));
    RT_EXPECT(rt_perf_cpu_loop_time(m, &l32, &ns32, &s32));
    RT_EXPECT(ns32 > 1.5 * ns96);
    // Four times the items, and every row's two loops dispatched at run time.
    RT_EXPECT(s32 > 4 * s96);
    // The larger of loop time and memory time binds: 96-point tiles stay memory bound.
    const char *why;
    RT_EXPECT(rt_perf_evaluate(m, &p96, &why));
    RT_EXPECT(rt_perf_evaluate(m, &p32, &why));
    RT_EXPECT(p96.bottleneck >= 0);
    RT_EXPECT(p32.predicted_ns > p96.predicted_ns);
    // The serial part (work items, vector-loop entries) is the core's own work and hides under
    // memory stalls: the memory-bound tiles, though they have serial work, are predicted at
    // their level's time alone (the traffic into level b + 1 from the binding level b); the
    // core's work and its serial part bind where they take longer.
    double launch_ns = dev->launch_overhead_us * 1000.0;
    RT_EXPECT(s96 > 0);
    RT_EXPECT(fabs(p96.predicted_ns - launch_ns - p96.tile[p96.bottleneck + 1].time_ns) <
              1e-9 * p96.predicted_ns);
    double mem32 = 0;
    for (int32_t l = 0; l <= m->top; l++)
        mem32 = fmax(mem32, p32.tile[l].time_ns);
    RT_EXPECT(fabs(p32.predicted_ns - launch_ns - fmax(mem32, p32.compute_ns + s32)) <
              1e-9 * p32.predicted_ns);
    // A GEMM has no loop plan of its own nest to time (it runs as the packed GEMM).
    rt_perf_model *mg;
    RT_EXPECT_EQ(
        rt_perf_model_build(a, tp_matmul(a, 64, 64, 64, RT_DTYPE_F32), dev, NULL, &mg, &err),
        RT_OK);
    rt_perf_cpu_loops lg;
    double ng, sg;
    RT_EXPECT(!rt_perf_cpu_loop_plan(mg, &p96, &lg) || !rt_perf_cpu_loop_time(mg, &lg, &ng, &sg));
    rt_arena_free(a);
}

// The same relu over its own 42-wide rows: n.c.h.w is one flat run in both tensors, and the
// loop plan has one entry, the axis as a flat index cut into the axis's tiles: 96- and 32-point
// tiles are both whole vectors with constant trips (the 32-point tiles only have three times
// the items), where the per-member nest cut rows of 42 into pieces of 32 and 10.
static void test_flat_loops(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    const int64_t dims[4] = {1, 1008, 42, 42};
    rt_op *op = tp_relu(a, dims);
    rt_perf_model *m;
    RT_EXPECT_EQ(rt_perf_model_build(a, op, dev, NULL, &m, &err), RT_OK);
    rt_perf_flat fl;
    RT_EXPECT_EQ(rt_perf_cpu_flat_axis(m, &op->stmts[0], &fl), 4);
    RT_EXPECT_EQ(fl.total, 1008 * 42 * 42);
    RT_EXPECT_EQ(fl.mem[0], 0);
    RT_EXPECT_EQ(fl.mem[3], 3);
    RT_EXPECT_EQ(fl.axis, 0);
    RT_EXPECT_EQ(m->flat.n, 4); // the model holds it from its build
    rt_rprog p96, p32;
    rt_perf_cpu_loops l96, l32;
    plans_96_32(m, &p96, &p32, &l96, &l32);
    RT_EXPECT_EQ(l96.n_vars, 1);
    RT_EXPECT_EQ(l96.var[0], 3);
    RT_EXPECT_EQ(l96.extent[0], 1008 * 42 * 42);
    RT_EXPECT_EQ(l96.tile[0][m->top], 96);
    RT_EXPECT_EQ(l96.items, 1008 * 42 * 42 / 96);
    RT_EXPECT_EQ(l32.items, 1008 * 42 * 42 / 32);
    double ns96, ns32, s96, s32;
    RT_EXPECT(rt_perf_cpu_loop_time(m, &l96, &ns96, &s96));
    RT_EXPECT(rt_perf_cpu_loop_time(m, &l32, &ns32, &s32));
    RT_EXPECT(ns32 < 1.5 * ns96);
    RT_EXPECT(s32 > 2 * s96);
    rt_arena_free(a);
}

// A warm operator (its tensors within half of the last-level cache, 3.75 MiB here) is not
// timed by DRAM: ReLU over 16 x 42 x 42 (221 KiB in and out) is bound by a cache or its loop,
// over 1008 x 42 x 42 (14 MiB) by DRAM; the same rTiles, scaled to the size, predict the small
// one faster per byte.
// A softmax fused row-wise (one main statement, three fused ones) small enough to be warm:
// the fused statements' compulsory traffic (Y, as large as X) is priced into level 2, where a
// warm operator's compulsory traffic is (level 1's fill is not), as well as into level 1.
static void test_warm_fused(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    const char *text = "def sm(float(512, 256) X) -> (Y) {\n mx(n) max=! X(n, d)\n"
                       " e(n, d) = exp(X(n, d) - mx(n))\n s(n) +=! e(n, d)\n"
                       " Y(n, d) = e(n, d) / s(n)\n}\n";
    rt_op *op = NULL;
    rt_perf_model *m = NULL;
    RT_EXPECT_EQ(rt_spec_parse(a, text, "sm.spec", NULL, 0, &op, &err), RT_OK);
    if (!op || rt_perf_model_build(a, op, dev, NULL, &m, &err) != RT_OK) {
        RT_EXPECT(false);
        rt_arena_free(a);
        return;
    }
    RT_EXPECT(rt_perf_cpu_warm(m) && m->n_fused == 3);
    RT_EXPECT_NEAR(m->extra_dram_bytes, 512.0 * 256 * 4, 1.0); // Y
    int64_t shape[RT_PERF_MAX_AXES] = {0};
    for (int32_t x = 0; x < m->n_axes; x++)
        shape[x] = m->axes[x].extent;
    double with = rt_perf_traffic_bytes(m, 2, shape, NULL);
    m->warm = false;
    double without = rt_perf_traffic_bytes(m, 2, shape, NULL);
    RT_EXPECT_NEAR(with - without, m->extra_dram_bytes, 1.0);
    rt_arena_free(a);
}

static void test_warm(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    const int64_t small[4] = {1, 16, 42, 42}, large[4] = {1, 1008, 42, 42};
    rt_perf_model *ms, *ml;
    RT_EXPECT_EQ(rt_perf_model_build(a, tp_relu(a, small), dev, NULL, &ms, &err), RT_OK);
    RT_EXPECT_EQ(rt_perf_model_build(a, tp_relu(a, large), dev, NULL, &ml, &err), RT_OK);
    RT_EXPECT(rt_perf_cpu_warm(ms));
    RT_EXPECT(!rt_perf_cpu_warm(ml));
    rt_rprog ps, pl;
    memset(&ps, 0, sizeof ps);
    memset(&pl, 0, sizeof pl);
    for (int32_t l = 1; l <= ms->top; l++)
        ps.tile[l].shape[0] = pl.tile[l].shape[0] = 84;
    const char *why;
    RT_EXPECT(rt_perf_evaluate(ms, &ps, &why));
    RT_EXPECT(rt_perf_evaluate(ml, &pl, &why));
    RT_EXPECT(ps.bottleneck != 0);
    RT_EXPECT_EQ(pl.bottleneck, 0);
    RT_EXPECT(ps.predicted_ns * 63 < pl.predicted_ns);
    rt_arena_free(a);
}

// A padded 5x5 stride-2 depthwise conv (its input read packed by rows, codegen/lower-cpu.c
// rt_win_pack): y runs over the work item's whole tile (the tiles below it are dropped, so
// rPrograms differing only there are one kernel), and a work item of fewer output rows packs
// more rows per output row (ay (t - 1) + 5 rows for t of them) and is predicted slower. An
// unpadded stride-1 read is not packed: its y tiles stay.
static rt_perf_model *window_model(rt_arena *a, const rt_device *dev, const char *text) {
    rt_err err = {0};
    rt_op *op = NULL;
    rt_perf_model *m = NULL;
    RT_EXPECT_EQ(rt_spec_parse(a, text, "window.spec", NULL, 0, &op, &err), RT_OK);
    RT_EXPECT(op && rt_perf_model_build(a, op, dev, NULL, &m, &err) == RT_OK);
    return m;
}

static void window_tiles(const rt_perf_model *m, rt_rprog *p, int64_t y_item, int64_t y_l1) {
    memset(p, 0, sizeof *p);
    for (int32_t l = 1; l <= m->top; l++)
        for (int32_t x = 0; x < m->n_axes; x++) {
            const char *n = m->axes[x].name;
            int64_t t = m->axes[x].extent;
            if (strcmp(n, "y") == 0)
                t = l == m->block_level ? y_item : l == m->top ? 1 : y_l1;
            else if (strcmp(n, "c") == 0 || strcmp(n, "n") == 0)
                t = 1;
            p->tile[l].shape[x] = t;
        }
}

// The loop model's time of m's window nest under window_tiles(y_item, y_l1); 0 where it has none.
static double window_time(const rt_perf_model *m, int64_t y_item, int64_t y_l1) {
    rt_rprog p;
    rt_perf_cpu_loops lp;
    double ns = 0, serial_ns;
    window_tiles(m, &p, y_item, y_l1);
    RT_EXPECT(rt_perf_cpu_loop_plan(m, &p, &lp));
    RT_EXPECT(rt_perf_cpu_loop_time(m, &lp, &ns, &serial_ns));
    return ns;
}

static const char dw5x5s2_spec[] =
    "def dw(float(1, 8, 83, 83) I pad 0, float(8, 5, 5) W) -> (float(1, 8, 42, 42) O) {\n"
    "    O(n, c, y, x) +=! I(n, c, 2*y + r - 2, 2*x + s - 2) * W(c, r, s)\n}\n";

static void test_window_pack(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_perf_model *m = window_model(a, dev, dw5x5s2_spec);
    if (!m) {
        rt_arena_free(a);
        return;
    }
    rt_rprog whole, whole3, part;
    window_tiles(m, &whole, 42, 6);
    window_tiles(m, &whole3, 42, 3);
    window_tiles(m, &part, 6, 6);
    rt_perf_cpu_loops lw, lw3, lp;
    RT_EXPECT(rt_perf_cpu_loop_plan(m, &whole, &lw));
    RT_EXPECT(rt_perf_cpu_loop_plan(m, &whole3, &lw3));
    RT_EXPECT(rt_perf_cpu_loop_plan(m, &part, &lp));
    RT_EXPECT_EQ(lw.n_vars, 4);
    for (int32_t lv = m->block_level; lv <= m->top; lv++) {
        RT_EXPECT_EQ(lw.tile[2][lv], 42);
        RT_EXPECT_EQ(lw3.tile[2][lv], 42);
        RT_EXPECT_EQ(lp.tile[2][lv], 6);
    }
    RT_EXPECT_EQ(lw.items, 8);
    RT_EXPECT_EQ(lp.items, 8 * 7);
    double nw, np, sw, sp;
    RT_EXPECT(rt_perf_cpu_loop_time(m, &lw, &nw, &sw));
    RT_EXPECT(rt_perf_cpu_loop_time(m, &lp, &np, &sp));
    // 87 rows packed per plane against 7 x 15 = 105: 18 more rows of 87 elements, each at
    // least its 6 vectors loaded and stored.
    double ghz = rt_perf_cpu_ghz(dev), ports = rt_perf_cpu_load_ports(dev);
    RT_EXPECT(np - nw > 8.0 * 18 * 6 * 2 / ports / ghz / (double)dev->units);
    // Items of 21 rows compute two output rows per y (7 packed rows loaded for 50 points);
    // items of 41 and 1 rows do not (one row is too few): the same rows packed, 30% fewer loads
    // of packed rows in the first.
    RT_EXPECT(window_time(m, 21, 21) < 0.97 * window_time(m, 41, 41));
    // The x loop runs once with the 25 points unrolled (codegen/lower-cpu.c rt_lower_window):
    // at least 25 FMAs per output vector, 3 per 42-wide row. With one FMA pipe (a Zen 4 core)
    // that bound is above the load slots of the paired rows (7 x 5 loads per 50 points).
    rt_device one_pipe = *dev;
    one_pipe.teus_per_unit = 1; // at twice the clock, and the L1 at the same slots per cycle
    one_pipe.level[one_pipe.n_levels - 2].bandwidth_gbps *= 2;
    rt_perf_model *mf = window_model(a, &one_pipe, dw5x5s2_spec);
    if (mf) {
        double nf = window_time(mf, 21, 21);
        double fma_ns = 8.0 * 42 * 3 * 25 / rt_perf_cpu_ghz(&one_pipe) / one_pipe.units;
        RT_EXPECT(nf >= fma_ns);
        // The packing adds less than the FMAs (26 passes over x, as a window looped outside
        // the x loop, would add 26 loads and stores per vector).
        RT_EXPECT(nf < 2 * fma_ns);
    }
    // Items of 3 rows pair rows 0-1, then 1-2 (the last pair shifted back to end at the item's
    // end): 4 rows computed for 3. 14 items of 3 rows are predicted at least 15% slower than 11
    // items of 4 rows (the last of 2), which recompute none (the packing alone: 9% more rows).
    RT_EXPECT(window_time(m, 3, 3) > 1.15 * window_time(m, 4, 4));
    // Unpadded stride 1: nothing packed, y's tiles stay.
    rt_perf_model *m1 = window_model(
        a, dev,
        "def dw1(float(1, 8, 44, 44) I, float(8, 3, 3) W) -> (float(1, 8, 42, 42) O) {\n"
        "    O(n, c, y, x) +=! I(n, c, y + r, x + s) * W(c, r, s)\n}\n");
    rt_rprog q;
    rt_perf_cpu_loops l1;
    if (m1) {
        window_tiles(m1, &q, 42, 6);
        RT_EXPECT(rt_perf_cpu_loop_plan(m1, &q, &l1));
        RT_EXPECT_EQ(l1.tile[2][m1->top], 1);
        RT_EXPECT_EQ(l1.tile[2][m1->top - 1], 6);
    }
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
        // The top-K are different kernels: no two share a blocking (the backend would compile
        // the same code for both), and construction met such duplicates on the way.
        RT_EXPECT(r->n_cands >= 4);
        for (int32_t i = 0; i < r->n_cands; i++)
            for (int32_t j = 0; j < i; j++) {
                rt_perf_cpu_gemm gi, gj;
                RT_EXPECT(rt_perf_cpu_gemm_view(m, &r->cands[i], &gi));
                RT_EXPECT(rt_perf_cpu_gemm_view(m, &r->cands[j], &gj));
                RT_EXPECT(gi.mr != gj.mr || gi.nr != gj.nr || gi.kc != gj.kc || gi.mc != gj.mc ||
                          gi.nc != gj.nc || gi.ng != gj.ng);
            }
        RT_EXPECT(r->n_same_kernel > 0);
    }
    RT_EXPECT(distinct_ops >= 1);
    rt_arena_free(a);
}

// The vector instructions of a statement (rt_perf_cpu_expr_cycles) on the two FMA pipes of
// x86-avx512.ini: Y = exp(X - m) is a subtraction and the 14 of the inline exp (7.5 cycles per
// vector), on one pipe twice that; tanh goes to libm one lane at a time. A fused softmax's
// compute is its statements' instructions over the cores: 7 times its flops at the FMA peak (a
// flop per operation, 5 per element), which is what it was predicted at before.
static void test_vector_ops(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op = NULL;
    static const char text[] = "size N = 512\nsize D = 1024\n"
                               "def softmax(float(N, D) X) -> (Y) {\n"
                               "    mx(n) max=! X(n, d)\n    e(n, d) = exp(X(n, d) - mx(n))\n"
                               "    s(n) +=! e(n, d)\n    Y(n, d) = e(n, d) / s(n)\n}\n";
    RT_EXPECT_EQ(rt_spec_parse(a, text, "softmax.spec", NULL, 0, &op, &err), RT_OK);
    if (!op)
        return;
    const rt_expr *ex = op->stmts[1].rhs;
    RT_EXPECT_NEAR(rt_perf_cpu_expr_cycles(dev, ex), (1 + RT_PERF_CPU_EXP_OPS) / 2, 1e-12);
    rt_device one = *dev;
    one.teus_per_unit = 1;
    RT_EXPECT_NEAR(rt_perf_cpu_expr_cycles(&one, ex), 1 + RT_PERF_CPU_EXP_OPS, 1e-12);
    rt_expr call = *ex;
    call.fn = RT_FN_TANH;
    RT_EXPECT_NEAR(rt_perf_cpu_expr_cycles(dev, &call), 0.5 + dev->cpu_costs.libm_cycles * 16,
                   1e-9);
    // The costs are the device file's ([compute] libm_cycles, sqrt_cycles): another device
    // prices the same expression by its own.
    rt_device slow = *dev;
    slow.cpu_costs.libm_cycles = 2 * dev->cpu_costs.libm_cycles;
    RT_EXPECT_NEAR(rt_perf_cpu_expr_cycles(&slow, &call), 0.5 + slow.cpu_costs.libm_cycles * 16,
                   1e-9);
    call.fn = RT_FN_SQRT;
    slow.cpu_costs.sqrt_cycles = 11;
    RT_EXPECT_NEAR(rt_perf_cpu_expr_cycles(&slow, &call), 0.5 + 11, 1e-9);
    rt_perf_model *m = NULL;
    RT_EXPECT_EQ(rt_perf_model_build(a, op, dev, NULL, &m, &err), RT_OK);
    if (!m)
        return;
    // max 1, exp and its subtraction 15, the sum's add 1, the division 1: 18 per vector.
    double vectors = 512.0 * 1024 / 16;
    RT_EXPECT_NEAR(m->main_vector_cycles + m->fused_vector_cycles, vectors * 18 / 2, 1e-6);
    rt_perf_result *r = NULL;
    rt_perf_options opt = {0};
    opt.top_k = 3;
    RT_EXPECT_EQ(rt_perf_construct(a, op, dev, &opt, &r, &err), RT_OK);
    if (r && r->n_cands > 0) {
        double ns = vectors * 9 / 2 / rt_perf_cpu_ghz(dev);
        RT_EXPECT(r->cands[0].compute_ns >= ns * 0.999);
        RT_EXPECT(r->cands[0].compute_ns > 5 * 512.0 * 1024 * 5 / m->peak_gflops);
    }
    rt_arena_free(a);
}

// Every CPU device file sets the microarchitecture costs in [compute]; a device without them
// (built by hand) gets the documented defaults.
static void test_costs_from_files(const rt_device *avx512) {
    RT_EXPECT_NEAR(avx512->cpu_costs.store_ports, 1.0, 1e-12);
    RT_EXPECT(avx512->cpu_costs.gather_cycles > 0 && avx512->cpu_costs.vloop_entry_cycles > 0 &&
              avx512->cpu_costs.libm_cycles > 0 && avx512->cpu_costs.sqrt_cycles > 0);
    static const char *const files[] = {"devices/x86-avx2.ini", "devices/arm-neoverse-n1.ini"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        rt_device d;
        RT_EXPECT(load_dev(files[i], &d));
        RT_EXPECT(d.cpu_costs.store_ports > 0 && d.cpu_costs.gather_cycles > 0 &&
                  d.cpu_costs.vloop_entry_cycles > 0 && d.cpu_costs.libm_cycles > 0 &&
                  d.cpu_costs.sqrt_cycles > 0);
    }
    rt_device bare;
    memset(&bare, 0, sizeof bare);
    rt_cpu_costs c = rt_hal_cpu_costs(&bare);
    RT_EXPECT_NEAR(c.store_ports, RT_CPU_COST_DEFAULT_STORE_PORTS, 1e-12);
    RT_EXPECT_NEAR(c.gather_cycles, RT_CPU_COST_DEFAULT_GATHER_CYCLES, 1e-12);
    RT_EXPECT_NEAR(c.vloop_entry_cycles, RT_CPU_COST_DEFAULT_VLOOP_ENTRY_CYCLES, 1e-12);
    RT_EXPECT_NEAR(c.libm_cycles, RT_CPU_COST_DEFAULT_LIBM_CYCLES, 1e-12);
    RT_EXPECT_NEAR(c.sqrt_cycles, RT_CPU_COST_DEFAULT_SQRT_CYCLES, 1e-12);
}

// A token-flattened ragged FFN (rt_perf_gemm_tokens_of): the view is a plain GEMM of the
// expected sum(len) rows ((b.i) fused), and the fused bias + GELU is priced over those rows: its
// FLOPs double when every length doubles (before, every vloop counted RT_PERF_DEFAULT_MAX_LEN / 2).
static void test_tokens_view(const rt_device *dev) {
    const char *text =
        "size B = 4\ndef f(int32(B) len, float(b:B, len(b), 64) X, float(64, 96) W, float(96) "
        "bias) -> (Y) {\n t(b, i, n) +=! X(b, i, k) * W(k, n)\n"
        " Y(b, i, n) = 0.5 * (t(b, i, n) + bias(n)) * (1 + erf((t(b, i, n) + bias(n)) * 0.7))\n}";
    double extra[2] = {0, 0};
    for (int32_t r = 0; r < 2; r++) {
        rt_arena *a = rt_arena_new(1 << 20);
        rt_err err = {0};
        rt_op *op = NULL;
        int64_t lens[4] = {3 * (r + 1), 1 * (r + 1), 0, 8 * (r + 1)};
        rt_perf_length_dist d = {.tensor = "len"};
        RT_EXPECT_EQ(rt_spec_parse(a, text, "tokens.spec", NULL, 0, &op, &err), RT_OK);
        RT_EXPECT_EQ(rt_extent_dist_from_samples(a, lens, 4, (rt_loc){0}, &d.dist, &err), RT_OK);
        rt_perf_options opt = {.lengths = &d, .n_lengths = 1};
        rt_perf_model *m = NULL;
        if (!op || rt_perf_model_build(a, op, dev, &opt, &m, &err) != RT_OK) {
            RT_EXPECT(false);
            rt_arena_free(a);
            return;
        }
        rt_rprog p;
        memset(&p, 0, sizeof p);
        for (int32_t l = 1; l <= m->top; l++)
            for (int32_t x = 0; x < m->n_axes; x++)
                p.tile[l].shape[x] = 8;
        rt_perf_cpu_gemm g;
        RT_EXPECT(rt_perf_cpu_gemm_view(m, &p, &g));
        RT_EXPECT(g.tokens);
        RT_EXPECT(!g.implicit && !g.a_batch);
        RT_EXPECT_EQ(g.M, 12 * (r + 1));
        RT_EXPECT_EQ(g.N, 96);
        RT_EXPECT_EQ(g.K, 64);
        RT_EXPECT_EQ(g.batch, 1);
        extra[r] = m->extra_flops;
        rt_arena_free(a);
    }
    RT_EXPECT(extra[0] > 0);
    RT_EXPECT_NEAR(extra[1], 2 * extra[0], 1e-9 * extra[1]);
}

// Attention x V over four entries of 8 heads of 64 (P packed per head, V as (b, j, h, d)).
static const char attn_v_text[] =
    "size B = 4\ndef f(int32(B) len, float(b:B, 8, i:len(b), len(b)) P, "
    "float(b:B, len(b), 8, 64) V) -> (O) {\n"
    " O(b, i, h, d) +=! P(b, h, i, j) * V(b, j, h, d)\n}\n";

// A ragged op of four entries whose length tensor "len" holds len each: the op (NULL on error)
// and its length distribution in *d, as the model options take it.
static rt_op *ragged_op(rt_arena *a, const char *text, int64_t len, rt_perf_length_dist *d) {
    rt_err err = {0};
    rt_op *op = NULL;
    int64_t lens[4] = {len, len, len, len};
    *d = (rt_perf_length_dist){.tensor = "len"};
    RT_EXPECT_EQ(rt_spec_parse(a, text, "ragged.spec", NULL, 0, &op, &err), RT_OK);
    RT_EXPECT_EQ(rt_extent_dist_from_samples(a, lens, 4, (rt_loc){0}, &d->dist, &err), RT_OK);
    return err.msg[0] ? NULL : op;
}

// The per-entry plan of Q.K^T over a ragged batch (rt_perf_cpu_rentry_*), all lengths len.
static bool rentry_model(rt_arena *a, const rt_device *dev, int64_t len, rt_perf_model **m,
                         rt_perf_cpu_gemm *g) {
    const char *text = "size B = 4\ndef f(int32(B) len, float(b:B, len(b), 2, 64) Q, "
                       "float(b:B, len(b), 2, 64) K) -> (S) {\n"
                       " S(b, h, i, j) +=! Q(b, i, h, d) * K(b, j, h, d)\n}\n";
    rt_err err = {0};
    rt_perf_length_dist d;
    rt_op *op = ragged_op(a, text, len, &d);
    rt_perf_options opt = {.lengths = &d, .n_lengths = 1};
    if (!op || rt_perf_model_build(a, op, dev, &opt, m, &err) != RT_OK)
        return false;
    rt_rprog p;
    memset(&p, 0, sizeof p);
    for (int32_t l = 1; l <= (*m)->top; l++)
        for (int32_t x = 0; x < (*m)->n_axes; x++)
            p.tile[l].shape[x] = 8;
    return rt_perf_cpu_gemm_view(*m, &p, g) && g->rentry;
}

// K of Q.K^T is contiguous along k: on 8-lane vectors the per-entry plan packs it as 8-row
// sub-panels (b_sub, codegen/kir.h), priced as 8-way interleaves, below the nr-wide gather;
// on 16-lane vectors it keeps nr-wide panels. Edge tiles cost their element-wise stores: 47 x 47
// entries (edges on both sides) take longer than 48 x 48 ones (none: 48 = 8 x 6 = 3 x 16), the
// same micro-kernel calls.
static void test_rentry_pack_edges(const rt_device *avx512) {
    rt_device avx2;
    if (!load_dev("devices/x86-avx2.ini", &avx2)) {
        RT_EXPECT(false);
        return;
    }
    rt_arena *a = rt_arena_new(1 << 20);
    rt_perf_model *m = NULL;
    rt_perf_cpu_gemm g;
    RT_EXPECT(rentry_model(a, avx512, 48, &m, &g));
    RT_EXPECT(g.b_k_unit);
    RT_EXPECT_EQ(g.b_sub, 0);
    double ns[2] = {0, 0}, pk, eff;
    for (int32_t i = 0; i < 2; i++) {
        RT_EXPECT(rentry_model(a, &avx2, 48 - i, &m, &g));
        RT_EXPECT(g.b_k_unit);
        RT_EXPECT_EQ(g.mr, 6);
        RT_EXPECT_EQ(g.nr, 16);
        RT_EXPECT_EQ(g.b_sub, 8);
        RT_EXPECT(rt_perf_cpu_rentry_time(m, &g, &ns[i], &pk, &eff));
    }
    if (!(ns[1] > ns[0]))
        fprintf(stderr, "rentry: 48 x 48 entries %g ns, 47 x 47 %g ns\n", ns[0], ns[1]);
    RT_EXPECT(ns[1] > ns[0]);
    double ghz = rt_perf_cpu_ghz(&avx2);
    double sub = rt_perf_cpu_pack_cycles(&avx2, &g, true, 48, 64, ghz);
    g.b_sub = 0;
    double gathered = rt_perf_cpu_pack_cycles(&avx2, &g, true, 48, 64, ghz);
    if (!(sub < 0.5 * gathered))
        fprintf(stderr, "rentry: B pack %g cycles in sub-panels, %g gathered\n", sub, gathered);
    RT_EXPECT(sub < 0.5 * gathered);
    rt_arena_free(a);
}

// Row tails (rt_perf_cpu_gemm.row_tail_acc): the sets of an exact-rows kernel reach about
// acc accumulators within the full kernel's registers; split sets divide the FMA latency
// bound of a tail's step. The per-entry plan takes row tails, and its price of entries of
// 13 rows (mr = 12 on 16 lanes: a full panel and a tail of one row) is at least 20 % below
// the price with them off (two full panels: 24 rows computed).
static void test_rentry_row_tails(const rt_device *avx512) {
    RT_EXPECT_EQ(rt_perf_cpu_tail_sets(12, 1, 1, 12), 12);
    RT_EXPECT_EQ(rt_perf_cpu_tail_sets(12, 1, 5, 12), 2); // at most 12 / 5 sets of 5
    RT_EXPECT_EQ(rt_perf_cpu_tail_sets(12, 2, 4, 12), 2);
    RT_EXPECT_EQ(rt_perf_cpu_tail_sets(12, 1, 12, 12), 1); // a full tile
    RT_EXPECT_EQ(rt_perf_cpu_tail_sets(6, 2, 1, 0), 1);    // no row tails
    // Every mr: a tail kernel covers its rows, stays below mr, and at most 3 join the mr-row one
    // (the JIT compiles each); 13 rows of mr = 12 run a 3-row tail after the full panel.
    for (int64_t mr = 2; mr <= 32; mr++) {
        int64_t kernels = 0, prev = 0;
        for (int64_t r = 1; r < mr; r++) {
            int64_t t = rt_perf_cpu_tail_rows(mr, r);
            RT_EXPECT(t >= r && t <= mr);
            kernels += t < mr && t != prev;
            prev = t;
        }
        if (kernels > 3)
            fprintf(stderr, "row tails: mr %lld has %lld tail kernels\n", (long long)mr,
                    (long long)kernels);
        RT_EXPECT(kernels <= 3);
    }
    RT_EXPECT_EQ(rt_perf_cpu_tail_rows(12, 1), 3);
    RT_EXPECT_EQ(rt_perf_cpu_tail_rows(12, 12), 12);
    rt_perf_ukernel one, four;
    RT_EXPECT(rt_perf_cpu_ukernel_sets(avx512, 4, 1, 16, 64, 1, &one));
    RT_EXPECT(rt_perf_cpu_ukernel_sets(avx512, 4, 1, 16, 64, 4, &four));
    RT_EXPECT_NEAR(one.cycles_per_k, (double)avx512->fma_latency_cycles, 1e-9);
    RT_EXPECT(four.cycles_per_k < one.cycles_per_k && four.vector_regs == 4 + 1 + 1);
    rt_arena *a = rt_arena_new(1 << 20);
    rt_perf_model *m = NULL;
    rt_perf_cpu_gemm g;
    RT_EXPECT(rentry_model(a, avx512, 13, &m, &g));
    // A warm operator's C tiles are not prefetched for writing (re_warm, codegen no_pf_c).
    RT_EXPECT(m && rt_perf_cpu_warm(m) && g.re_warm);
    g.mr = 12, g.nr = 16, g.mc = 24;
    RT_EXPECT(g.row_tail_acc > 0);
    double tails = 0, clamped = 0, pk, eff;
    RT_EXPECT(rt_perf_cpu_rentry_time(m, &g, &tails, &pk, &eff));
    g.row_tail_acc = 0;
    RT_EXPECT(rt_perf_cpu_rentry_time(m, &g, &clamped, &pk, &eff));
    if (!(tails < 0.8 * clamped))
        fprintf(stderr, "rentry: 13-row entries %g ns with row tails, %g without\n", tails,
                clamped);
    RT_EXPECT(tails < 0.8 * clamped);
    rt_arena_free(a);
}

// Attention x V's V (b, j, h, d) is read in place by the per-entry micro-kernel where a k
// block's rows stay in L1 at their stride (perfmodel re_b_in_place): H x D = 512 floats apart,
// 2 KiB, the rows start in 2 of a 48 KiB 12-way L1's 64 sets, so up to 24 of them. Its B pack
// is then not priced. Q.K^T's K (k contiguous) is never read in place.
static void test_rentry_b_in_place(const rt_device *avx512) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    for (int32_t c = 0; c < 2; c++) {
        rt_perf_length_dist d;
        rt_op *op = ragged_op(a, attn_v_text, c ? 97 : 13, &d);
        rt_perf_model *m = NULL;
        rt_perf_options opt = {.lengths = &d, .n_lengths = 1};
        RT_EXPECT(op && rt_perf_model_build(a, op, avx512, &opt, &m, &err) == RT_OK);
        rt_rprog p;
        memset(&p, 0, sizeof p);
        for (int32_t l = 1; m && l <= m->top; l++)
            for (int32_t x = 0; x < m->n_axes; x++)
                p.tile[l].shape[x] = 8;
        rt_perf_cpu_gemm g;
        if (!m || !rt_perf_cpu_gemm_view(m, &p, &g) || !g.rentry) {
            RT_EXPECT(false);
            continue;
        }
        RT_EXPECT_EQ(g.re_b_ld, 512);
        RT_EXPECT_EQ(g.re_b_in_place, c == 0); // 13 rows stay in L1, 97 would not
        if (c == 0) {                          // no B pack priced: the packed plan costs more
            double in_place, packed, pk_in, pk_packed, eff;
            RT_EXPECT(rt_perf_cpu_rentry_time(m, &g, &in_place, &pk_in, &eff));
            g.re_b_in_place = false;
            RT_EXPECT(rt_perf_cpu_rentry_time(m, &g, &packed, &pk_packed, &eff));
            RT_EXPECT(in_place < packed && pk_in < pk_packed);
        }
    }
    rt_perf_model *m = NULL;
    rt_perf_cpu_gemm g;
    RT_EXPECT(rentry_model(a, avx512, 13, &m, &g));
    RT_EXPECT(!g.re_b_in_place);
    rt_arena_free(a);
}

// The per-entry plan pays for C's traffic (written once per k block, read again by each later
// one) and for the read of an A it reads in place, each at the bandwidth of the level it lives
// in (rt_perf_cpu_stream_cycles_per_byte of its total bytes): an output or an A moved from L1
// to beyond every cache (only g.c_bytes or g.a_bytes changed) costs each entry's bytes at the
// slower rate, on every core's share of the entries.
static void test_rentry_traffic(const rt_device *avx512) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_perf_model *m = NULL;
    rt_perf_cpu_gemm g;
    const int64_t len = 256;
    if (!rentry_model(a, avx512, len, &m, &g)) {
        RT_EXPECT(false);
        rt_arena_free(a);
        return;
    }
    RT_EXPECT(g.re_a_in_place && g.kc >= g.K); // A read in place, one k block
    double ghz = rt_perf_cpu_ghz(avx512), per_core = (double)g.batch / (double)avx512->units;
    int64_t r = g.mc < len ? g.mc : len;
    for (int32_t which = 0; which < 2; which++) { // 0: C, 1: A
        double bytes = which ? 4.0 * (double)(len * g.K) : 4.0 * (double)(len * len);
        double chunk = which ? 4.0 * (double)(r * g.kc) : 4.0 * (double)g.nr;
        double cpb_near = rt_perf_cpu_stream_cycles_per_byte(avx512, 1.0, chunk, ghz);
        double cpb_far = rt_perf_cpu_stream_cycles_per_byte(avx512, 1e12, chunk, ghz);
        RT_EXPECT(cpb_far > cpb_near && cpb_near > 0);
        double ns[2] = {0, 0}, pk, eff;
        for (int32_t far = 0; far < 2; far++) {
            rt_perf_cpu_gemm h = g;
            *(which ? &h.a_bytes : &h.c_bytes) = far ? 1e12 : 1.0;
            RT_EXPECT(rt_perf_cpu_rentry_time(m, &h, &ns[far], &pk, &eff));
        }
        double want = per_core * bytes * (cpb_far - cpb_near) / ghz;
        if (!(isfinite(ns[1]) && ns[1] - ns[0] >= 0.999 * want))
            fprintf(stderr, "rentry: %s near %g ns, far %g ns, want %g ns more\n",
                    which ? "A" : "C", ns[0], ns[1], want);
        RT_EXPECT(isfinite(ns[1]) && ns[1] - ns[0] >= 0.999 * want);
    }
    rt_arena_free(a);
}

// A packed GEMM bound by reading its operands names the level they come from: a warm operator
// (attention x V over four 13-token sentences, all of it within half of L3) of which the cores'
// L2s (cut to 64 KiB each) hold about a quarter names L3 (cut to 20 GB/s, so that the roof
// binds), whose bandwidth its roof mostly used, never DRAM; its time is its bytes at the
// roof's bandwidth, and candidates the roof ties rank by their cores' time.
static void test_rentry_warm_roof(const rt_device *avx512) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_perf_length_dist d;
    rt_device dev = *avx512;
    dev.level[1].bandwidth_gbps = 20.0;
    dev.level[2].capacity_bytes = 64 << 10;
    rt_op *op = ragged_op(a, attn_v_text, 13, &d);
    rt_perf_options opt = {.top_k = 4, .lengths = &d, .n_lengths = 1};
    rt_perf_result *res = NULL;
    RT_EXPECT(op && rt_perf_construct(a, op, &dev, &opt, &res, &err) == RT_OK);
    int32_t at_l3 = 0, tied = 0;
    for (int32_t i = 0; res && i < res->n_cands; i++) {
        const rt_rprog *p = &res->cands[i];
        RT_EXPECT(p->bottleneck != 0);
        if (p->bottleneck != 1)
            continue;
        at_l3++;
        // Its roof: the bytes at the blended bandwidth, above L3's and below L2's.
        RT_EXPECT(p->bound_gbps > 20.0 && p->bound_gbps < dev.level[2].bandwidth_gbps);
        RT_EXPECT_NEAR(p->predicted_ns - dev.launch_overhead_us * 1000.0,
                       p->bound_bytes / p->bound_gbps, 1e-6 * p->predicted_ns);
        // Candidates the same roof ties rank by their cores' time (construct.c cmp_rprog).
        if (i > 0 && res->cands[i - 1].predicted_ns == p->predicted_ns) {
            RT_EXPECT(res->cands[i - 1].compute_ns <= p->compute_ns);
            tied++;
        }
    }
    RT_EXPECT(at_l3 > 0);
    RT_EXPECT(tied > 0);
    rt_arena_free(a);
}

// The warm packed GEMM's roof (rt_perf_cpu_roof_gbps): the L2's bandwidth where half the
// cores' L2s hold the whole operator (about 0.2 MB), named l2; between the L2's and the L3's
// where they hold a part (64 KiB of L2 per core), named l3; the L3's alone where the device has
// no unit-scope L2; DRAM's for a cold operator.
static void test_warm_l2_share(const rt_device *avx512) {
    for (int32_t c = 0; c < 4; c++) {
        rt_device dev = *avx512;
        if (c == 1)
            dev.level[2].capacity_bytes = 64 << 10;
        if (c == 2)
            dev.level[2].scope = RT_MEM_SCOPE_DEVICE;
        rt_arena *a = rt_arena_new(1 << 20);
        rt_err err = {0};
        rt_perf_length_dist d;
        rt_op *op = ragged_op(a, attn_v_text, 13, &d);
        rt_perf_options opt = {.lengths = &d, .n_lengths = 1};
        rt_perf_model *m = NULL;
        RT_EXPECT(op && rt_perf_model_build(a, op, &dev, &opt, &m, &err) == RT_OK);
        if (!m) {
            rt_arena_free(a);
            continue;
        }
        if (c == 3)
            m->warm = false;
        double l2 = dev.level[2].bandwidth_gbps, l3 = dev.level[1].bandwidth_gbps;
        int32_t level = -1;
        double gbps = rt_perf_cpu_roof_gbps(m, 1e6, 2, &level);
        RT_EXPECT(c == 3 || m->warm);
        if (c == 0) {
            RT_EXPECT_NEAR(gbps, l2, 1e-9 * l2);
            RT_EXPECT_EQ(level, 2);
        } else if (c == 1) {
            RT_EXPECT(gbps > 1.05 * l3 && gbps < 0.95 * l2);
            RT_EXPECT_EQ(level, 1);
        } else if (c == 2) {
            RT_EXPECT_NEAR(gbps, l3, 1e-9 * l3);
            RT_EXPECT_EQ(level, 1);
        } else {
            RT_EXPECT_NEAR(gbps, dev.level[0].bandwidth_gbps, 1e-9);
            RT_EXPECT_EQ(level, 0);
        }
        rt_arena_free(a);
    }
}

// vgemm's M, N and K from three length tensors of 64 distinct lengths each: the per-entry time
// sums over at most RT_PERF_RENTRY_MAX_POINTS joint entries (the sources coarsened), not 64^3,
// and its mean stays that of the lengths (one construction took 31 s of 64^3 entries).
static void test_rentry_sources(const rt_device *dev) {
    const char *text = "size B = 64\ndef f(int32(B) Ml, int32(B) Nl, int32(B) Kl, "
                       "float(b:B, Ml(b), Kl(b)) A, float(b:B, Kl(b), Nl(b)) Bt) -> (C) {\n"
                       " C(b, m, n) +=! A(b, m, k) * Bt(b, k, n)\n}\n";
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op = NULL;
    int64_t lens[3][64];
    for (int32_t i = 0; i < 64; i++)
        lens[0][i] = 512 + 8 * i, lens[1][i] = 520 + 8 * i, lens[2][i] = 528 + 8 * i;
    rt_perf_length_dist d[3] = {{.tensor = "Ml"}, {.tensor = "Nl"}, {.tensor = "Kl"}};
    RT_EXPECT_EQ(rt_spec_parse(a, text, "vgemm.spec", NULL, 0, &op, &err), RT_OK);
    for (int32_t t = 0; t < 3; t++)
        RT_EXPECT_EQ(rt_extent_dist_from_samples(a, lens[t], 64, (rt_loc){0}, &d[t].dist, &err),
                     RT_OK);
    rt_perf_options opt = {.lengths = d, .n_lengths = 3};
    rt_perf_model *m = NULL;
    RT_EXPECT(op && rt_perf_model_build(a, op, dev, &opt, &m, &err) == RT_OK);
    rt_rprog p;
    memset(&p, 0, sizeof p);
    rt_perf_cpu_gemm g;
    for (int32_t l = 1; m && l <= m->top; l++)
        for (int32_t x = 0; x < m->n_axes; x++)
            p.tile[l].shape[x] = 8;
    if (!m || !rt_perf_cpu_gemm_view(m, &p, &g) || !g.rentry) {
        RT_EXPECT(false);
        rt_arena_free(a);
        return;
    }
    // 64 matrices of about 760 x 770 x 780 exceed half the last-level cache: C's tiles are
    // prefetched (no re_warm).
    RT_EXPECT(!rt_perf_cpu_warm(m) && !g.re_warm);
    int64_t before = *m->steps;
    double ns, pk, eff;
    RT_EXPECT(rt_perf_cpu_rentry_time(m, &g, &ns, &pk, &eff));
    int64_t steps = *m->steps - before;
    if (steps > RT_PERF_RENTRY_MAX_POINTS)
        fprintf(stderr, "rentry: %lld entries summed\n", (long long)steps);
    RT_EXPECT(steps >= 27 && steps <= RT_PERF_RENTRY_MAX_POINTS);
    RT_EXPECT(isfinite(ns) && ns > 0);
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
    test_conv_view(&dev);
    test_gemm_balance(&dev);
    test_batched_view(&dev);
    test_tokens_view(&dev);
    test_rentry_pack_edges(&dev);
    test_rentry_row_tails(&dev);
    test_rentry_sources(&dev);
    test_rentry_b_in_place(&dev);
    test_rentry_traffic(&dev);
    test_rentry_warm_roof(&dev);
    test_warm_l2_share(&dev);
    test_gemm_items(&dev);
    test_c_revisits(&dev);
    test_loops(&dev);
    test_flat_loops(&dev);
    test_warm(&dev);
    test_warm_fused(&dev);
    test_window_pack(&dev);
    test_ranking(&dev);
    test_vector_ops(&dev);
    test_costs_from_files(&dev);
    return rt_test_finish("test-perfmodel-cpu");
}
