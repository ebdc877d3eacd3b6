// test-gpu-reprice.c: a GPU candidate priced again once compiled (rt_perf_reprice_compiled,
// perfmodel/cost.c): the blocks resident on a unit follow the compiler's registers, allocated per
// warp in the device file's granules, and on a device whose global level has a latency (rtcalib's
// curve: h100.ini) each reduction step exposes the latency the other resident blocks' compute
// does not hide. Before compilation (compiled_regs 0) the price is the construction's. The
// numbers are those of the H100 check (2026-11-27): the 4096^3 fp32 GEMM's 128x256x16 kernel on
// 512 threads (128 registers, one block per unit) and the 2048^3 128x128x8 / 128x128x16 pair
// (121 and 152 registers: two blocks per unit against one; measured 373 against 437 us, where
// the construction's price had ranked the 152-register kernel first).
#include "test.h"
#include "perfmodel.h"

#include <math.h>
#include <string.h>

static rt_perf_result *construct_gemm(rt_arena *a, const rt_device *dev, int64_t n, int32_t k) {
    rt_size_binding sz[3] = {{"M", n}, {"N", n}, {"K", n}};
    rt_op *op = NULL;
    rt_perf_result *r = NULL;
    rt_perf_options popt = {.top_k = k};
    rt_err err = {0};
    if (rt_spec_load(a, "examples/matmul.spec", sz, 3, &op, &err) != RT_OK ||
        rt_perf_construct(a, op, dev, &popt, &r, &err) != RT_OK)
        return NULL;
    return r;
}

// The staged candidate with block tile m x n x k and a register tile of 8 x 8.
static rt_rprog *find(rt_perf_result *r, int64_t m, int64_t n, int64_t k) {
    for (int32_t i = 0; r && i < r->n_cands; i++) {
        rt_rprog *p = &r->cands[i];
        const int64_t *b = p->tile[1].shape, *t = p->tile[2].shape;
        if (b[0] == m && b[1] == n && b[2] == k && t[0] == 8 && t[1] == 8)
            return p;
    }
    return NULL;
}

// 4096^3, 128x256x16 on 512 threads: 128 registers leave one block per unit, which hides
// nothing: 4 waves of 512 blocks over 132 units x 256 k steps = 1024 steps, each one global
// latency (h100.ini's curve: 2048 B at 530 GB/s over 132 units = 510 ns).
static void test_latency_exposed(void) {
    rt_device dev;
    rt_err err = {0};
    RT_EXPECT_EQ(rt_hal_load_device("devices/h100.ini", &dev, &err), RT_OK);
    rt_arena *a = rt_arena_new(1 << 20);
    rt_perf_result *r = construct_gemm(a, &dev, 4096, 10);
    rt_rprog *p = find(r, 128, 256, 16);
    RT_EXPECT(p != NULL);
    if (!p) {
        rt_arena_free(a);
        return;
    }
    RT_EXPECT_EQ(p->threads_per_block, 512);
    RT_EXPECT_EQ(p->compiled_regs, 0);
    double before = p->predicted_ns;
    const char *why = NULL;
    RT_EXPECT(rt_perf_reprice_compiled(r, p, 128, &why));
    RT_EXPECT_EQ(p->compiled_regs, 128);
    RT_EXPECT_EQ(p->blocks_per_unit, 1);
    double latency_ns = 2048.0 / (530.0 / 132.0);
    double comp = p->compute_ns, top = p->tile[2].time_ns;
    double worst = fmax(fmax(comp, top), p->tile[1].time_ns);
    // the smaller of compute and shared loads over 16 warps on 4 schedulers
    double expect = worst + fmin(comp, top) / 4 + 1024 * latency_ns + dev.launch_overhead_us * 1e3;
    RT_EXPECT(fabs(p->predicted_ns - expect) < 1e-6 * expect);
    // the construction's price: every level's time added, not overlapped (5605 us, measured 2965)
    RT_EXPECT(before > p->predicted_ns * 1.3);
    // the price without the compiler's registers is the construction's again
    RT_EXPECT(rt_perf_reprice_compiled(r, p, 0, &why));
    RT_EXPECT(fabs(p->predicted_ns - before) < 1e-9 * before);
    rt_arena_free(a);
}

// 2048^3 on 256 threads: 121 registers (3872 per warp in granules of 256) fit two blocks on a
// unit, 152 (4864) one; the two-block kernel hides its copies and comes first.
static void test_occupancy_ranks(void) {
    rt_device dev;
    rt_err err = {0};
    RT_EXPECT_EQ(rt_hal_load_device("devices/h100.ini", &dev, &err), RT_OK);
    rt_arena *a = rt_arena_new(1 << 20);
    rt_perf_result *r = construct_gemm(a, &dev, 2048, 10);
    rt_rprog *k8 = find(r, 128, 128, 8), *k16 = find(r, 128, 128, 16);
    RT_EXPECT(k8 && k16);
    if (!k8 || !k16) {
        rt_arena_free(a);
        return;
    }
    const char *why = NULL;
    RT_EXPECT(rt_perf_reprice_compiled(r, k8, 121, &why));
    RT_EXPECT(rt_perf_reprice_compiled(r, k16, 152, &why));
    RT_EXPECT_EQ(k8->blocks_per_unit, 2);
    RT_EXPECT_EQ(k16->blocks_per_unit, 1);
    RT_EXPECT(k8->predicted_ns < k16->predicted_ns);
    // registers beyond one block's share of the file: no block fits, the price refuses
    rt_rprog copy = *k16;
    RT_EXPECT(!rt_perf_reprice_compiled(r, &copy, 300, &why));
    RT_EXPECT(why && strstr(why, "no block fits") != NULL);
    rt_arena_free(a);
}

// A device without a latency (a100.ini has no curve): the registers set the blocks per unit,
// and the price stays the construction's form.
static void test_no_curve(void) {
    rt_device dev;
    rt_err err = {0};
    RT_EXPECT_EQ(rt_hal_load_device("devices/a100.ini", &dev, &err), RT_OK);
    RT_EXPECT_EQ(dev.level[0].n_curve, 0);
    rt_arena *a = rt_arena_new(1 << 20);
    rt_perf_result *r = construct_gemm(a, &dev, 2048, 10);
    RT_EXPECT(r && r->n_cands > 0);
    if (!r || r->n_cands == 0) {
        rt_arena_free(a);
        return;
    }
    rt_rprog *p = &r->cands[0];
    int64_t bpu = p->blocks_per_unit;
    double before = p->predicted_ns;
    const char *why = NULL;
    RT_EXPECT(rt_perf_reprice_compiled(r, p, 255, &why));
    RT_EXPECT(p->blocks_per_unit <= bpu);
    RT_EXPECT(p->predicted_ns >= before);
    rt_arena_free(a);
}

int main(void) {
    test_latency_exposed();
    test_occupancy_ranks();
    test_no_curve();
    return rt_test_finish("test-gpu-reprice");
}
