// test-cpu-ukernel.c: the packed GEMM's register block on every CPU device file and the
// detected host. Its rules come from the device (lanes, the register level's capacity, FMA
// latency and pipes: rt_perf_cpu_uk_rules_of), and the micro-kernel chosen must fit: mr x nv
// accumulators + nv B vectors + one broadcast A value <= the vector registers, nr a whole number
// of vectors. Checked over a sweep of rTile seeds and GEMM shapes (rt_perf_cpu_gemm_block) and on
// the kernels the backend lowers for the GEMM-shaped examples (every ranked candidate). On
// x86-avx512.ini the rules are the ones the backend had before they were derived (16 lanes,
// 12 to 28 accumulators, 2 to 4 B vectors) except where those overflowed the 32 registers.
#include "test.h"

#include "emit.h"
#include "perfmodel.h"

#include <dirent.h>
#include <stdlib.h>

static int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

// Does an mr x nr micro-kernel fit dev's vector registers (as whole vectors of lanes floats)?
static bool fits(const rt_device *dev, int64_t mr, int64_t nr, const char *what) {
    int64_t lanes = dev->lanes, regs = rt_perf_cpu_vector_regs(dev);
    int64_t nv = nr / lanes;
    bool ok = mr >= 1 && nr % lanes == 0 && nv >= 1 && nv <= RT_PERF_CPU_UK_MAX_NV &&
              mr * nv + nv + 1 <= regs;
    if (!ok)
        fprintf(stderr,
                "%s: %s: micro-kernel %lldx%lld does not fit %lld registers of %lld lanes\n",
                dev->path, what, (long long)mr, (long long)nr, (long long)regs, (long long)lanes);
    return ok;
}

static void test_rules(const rt_device *dev) {
    rt_perf_cpu_uk_rules r;
    rt_perf_cpu_uk_rules_of(dev, &r);
    RT_EXPECT_EQ(r.lanes, dev->lanes);
    RT_EXPECT_EQ(r.regs, rt_perf_cpu_vector_regs(dev));
    RT_EXPECT(r.nv_min >= 1 && r.nv_min <= r.nv_max && r.nv_max <= RT_PERF_CPU_UK_MAX_NV);
    for (int64_t nv = 1; nv <= r.nv_max; nv++) {
        int64_t lo = ceil_div(r.acc_min, nv), hi = rt_perf_cpu_uk_max_mr(&r, nv);
        RT_EXPECT(lo <= hi);
        RT_EXPECT(fits(dev, hi, nv * r.lanes, "largest block"));
        RT_EXPECT((hi + 1) * nv + nv + 1 > r.regs || (hi + 1) * nv > RT_PERF_CPU_UK_MAX_ACC);
    }
}

// Every seed and shape: the block that rt_perf_cpu_gemm_block chooses fits.
static void test_sweep(const rt_device *dev) {
    static const int64_t sizes[] = {1, 5, 8, 16, 24, 33, 100, 512, 1000, 4096};
    int32_t bad = 0;
    for (size_t im = 0; im < sizeof sizes / sizeof *sizes; im++)
        for (size_t in = 0; in < sizeof sizes / sizeof *sizes; in++)
            for (int64_t mr = 1; mr <= 32; mr += mr < 8 ? 1 : 3)
                for (int64_t nr = 1; nr <= 128; nr += nr < 16 ? 3 : 8) {
                    rt_perf_cpu_gemm g = {.M = sizes[im],
                                          .N = sizes[in],
                                          .K = 256,
                                          .mr = mr,
                                          .nr = nr,
                                          .kc = 64,
                                          .mc = 64,
                                          .nc = 256};
                    rt_perf_cpu_gemm_block(dev, 1, &g);
                    bad += !fits(dev, g.mr, g.nr, "gemm_block");
                }
    RT_EXPECT_EQ(bad, 0);
}

// x86-avx512.ini keeps the register blocks of the rules it had as constants (nv in [2, 4] of 16
// lanes, 12 to 28 accumulators), but for the blocks those let overflow its 32 registers: 7x64
// (28 + 4 + 1 = 33; LLVM spilled a zmm per k step) is 6x64 now, and a single B vector (N <= 16)
// takes 30 rows where the constant stopped at 28.
static void test_avx512_unchanged(const rt_device *dev) {
    rt_perf_cpu_uk_rules r;
    rt_perf_cpu_uk_rules_of(dev, &r);
    RT_EXPECT_EQ(r.lanes, 16);
    RT_EXPECT_EQ(r.regs, 32);
    RT_EXPECT_EQ(r.acc_min, 12);
    RT_EXPECT_EQ(r.nv_min, 2);
    RT_EXPECT_EQ(r.nv_max, 4);
    int32_t diff = 0, same = 0;
    for (int64_t N = 1; N <= 80; N += 3)
        for (int64_t mr = 1; mr <= 40; mr++)
            for (int64_t nr = 1; nr <= 96; nr += 5) {
                rt_perf_cpu_gemm g = {
                    .M = 4096, .N = N, .K = 512, .mr = mr, .nr = nr, .kc = 64, .mc = 64, .nc = 256};
                rt_perf_cpu_gemm_block(dev, 1, &g);
                int64_t nv = clamp(ceil_div(nr, 16), 2, 4);
                nv = clamp(nv, 1, ceil_div(N, 16));
                int64_t old_mr = clamp(mr, ceil_div(12, nv), 28 / nv);
                int64_t want = old_mr;
                if (nv == 4 && old_mr == 7)
                    want = 6;
                if (nv == 1 && mr > 28)
                    want = mr < 30 ? mr : 30;
                if (g.mr != want || g.nr != 16 * nv) {
                    if (diff++ < 5)
                        fprintf(stderr, "avx512 seed %lldx%lld N %lld: %lldx%lld, want %lldx%lld\n",
                                (long long)mr, (long long)nr, (long long)N, (long long)g.mr,
                                (long long)g.nr, (long long)want, (long long)(16 * nv));
                } else {
                    same++;
                }
            }
    RT_EXPECT_EQ(diff, 0);
    RT_EXPECT(same > 1000);
}

static int32_t check_block(const rt_device *dev, const rt_kir_block *b, const char *what,
                           int32_t *n_uk) {
    int32_t bad = 0;
    for (int32_t i = 0; i < b->n; i++) {
        const rt_kir_node *n = b->nodes[i];
        if (n->kind == RT_KIR_N_UKERNEL) {
            (*n_uk)++;
            bad += n->uk.vl != dev->lanes || !fits(dev, n->uk.mr, n->uk.nr, what);
        }
        bad += check_block(dev, &n->body, what, n_uk) + check_block(dev, &n->else_body, what, n_uk);
    }
    return bad;
}

// The micro-kernels the backend compiles for the GEMM-shaped examples, every ranked candidate.
static void test_lowered(const rt_device *dev) {
    static const char *const specs[] = {"matmul", "linear_gelu", "conv2d", "vgemm", "attn_v"};
    int32_t n_uk = 0, bad = 0;
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
        rt_arena *a = rt_arena_new(1 << 20);
        char path[256];
        snprintf(path, sizeof path, "examples/%s.spec", specs[s]);
        rt_err err = {0};
        rt_op *op = NULL;
        rt_perf_result *r = NULL;
        rt_perf_options popt = {.top_k = 10};
        if (rt_spec_load(a, path, NULL, 0, &op, &err) != RT_OK ||
            rt_perf_construct(a, op, dev, &popt, &r, &err) != RT_OK) {
            fprintf(stderr, "%s on %s: %s\n", path, dev->path, err.msg);
            RT_EXPECT(false);
            rt_arena_free(a);
            continue;
        }
        for (int32_t i = 0; i < r->n_cands; i++) {
            rt_lower_options lo = {false, i, path};
            rt_kir_kernel *k;
            if (rt_lower_cpu(a, op, dev, r->model, &r->cands[i], &lo, &k, &err) != RT_OK) {
                fprintf(stderr, "%s rank %d on %s: %s\n", path, (int)i, dev->path, err.msg);
                bad++;
                continue;
            }
            for (int32_t p = 0; p < k->n_phases; p++)
                bad += check_block(dev, &k->phases[p].body, path, &n_uk);
        }
        rt_arena_free(a);
    }
    RT_EXPECT_EQ(bad, 0);
    if (n_uk < 5)
        fprintf(stderr, "%s: %d micro-kernels\n", dev->path, (int)n_uk);
    RT_EXPECT(n_uk >= 5); // the GEMMs do run micro-kernels
}

static void test_device(const rt_device *dev) {
    test_rules(dev);
    test_sweep(dev);
    test_lowered(dev);
}

int main(void) {
    DIR *d = opendir("devices");
    RT_EXPECT(d != NULL);
    struct dirent *e;
    int32_t n_cpu = 0;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".ini") != 0)
            continue;
        static rt_device dev;
        char path[512];
        snprintf(path, sizeof path, "devices/%s", e->d_name);
        rt_err err = {0};
        RT_EXPECT_EQ(rt_hal_load_device(path, &dev, &err), RT_OK);
        if (dev.devclass != RT_DEVCLASS_CPU)
            continue;
        n_cpu++;
        test_device(&dev);
        if (strcmp(e->d_name, "x86-avx512.ini") == 0)
            test_avx512_unchanged(&dev);
    }
    if (d)
        closedir(d);
    RT_EXPECT(n_cpu >= 3); // x86-avx2, x86-avx512, arm-neoverse-n1
    static rt_device host;
    rt_err err = {0};
    RT_EXPECT_EQ(rt_hal_detect_host(NULL, &host, &err), RT_OK);
    test_device(&host);
    return rt_test_finish("test-cpu-ukernel");
}
