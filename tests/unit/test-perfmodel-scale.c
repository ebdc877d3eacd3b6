// test-perfmodel-scale.c: construction and lowering cost what the memory hierarchy and the cores
// bound, not the extents (issue 18 item 12). A 10^6 x 10^6 x 10^6 GEMM, a 10^8-element ReLU, a
// triangular 10^5 x 10^5 times 10^5 x 2 10^10 and a ragged QK^T over a batch of 10^5 distinct
// lengths (examples/matmul.spec, a ReLU over N x C x H x W, examples/trmm.spec and
// examples/qkt.spec, sizes bound as rtgen --set binds them) against the same
// operators at 10^3: the model's loop steps (rt_perf_result.n_steps: work items, column blocks,
// blocking choices and distribution values it sums) of one evaluation, of the top-10
// construction and of lowering the top-1, and the lowered kernel's C text, each within twice
// its 10^3 value; the tile evaluations within the construction's budget. The numbers at 10^18
// points stay finite (run under -DRTGEN_SANITIZE=undefined for the integer side). Times are
// printed, never asserted.
#include "test.h"

#include "emit.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

// The construction's evaluation budget (rt_perf_options.max_evals, its default): an epsilon round
// stops at it, and no round starts once twice it is spent.
#define SCALE_MAX_EVALS 1000

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

typedef enum scale_op { SCALE_GEMM, SCALE_RELU, SCALE_QKT, SCALE_TRMM } scale_op;

static const char relu_spec[] = "size N = 1\nsize C = 1\nsize H = 1\nsize W = 1\n"
                                "def relu(float(N, C, H, W) I) -> (O) {\n"
                                "    O(n, c, h, w) = max(I(n, c, h, w), 0)\n}\n";

// One operator at one size: GEMM M, N, K; ReLU N, C, H, W; triangular L . X N, P; QK^T B with B
// lengths spread over 1..size[1] (a seeded shuffle of a ramp: min(B, size[1]) distinct values).
typedef struct scale_case {
    scale_op op;
    int64_t size[4];
} scale_case;

// What one case costs to construct and lower.
typedef struct scale_run {
    rt_arena *a;
    rt_op *op;
    rt_perf_options opt;
    rt_perf_length_dist len;
    rt_perf_result *r;
    int64_t evals, steps, lower_steps;
    size_t c_bytes; // the top-1's C text
    double construct_ms, lower_ms;
} scale_run;

// Parses the case's operator into out->a and sets its options (lengths for QK^T).
static bool load_case(const scale_case *c, scale_run *out) {
    rt_err err = {0};
    rt_status st;
    out->opt = (rt_perf_options){.top_k = 10, .max_evals = SCALE_MAX_EVALS};
    if (c->op == SCALE_GEMM) {
        rt_size_binding set[] = {{"M", c->size[0]}, {"N", c->size[1]}, {"K", c->size[2]}};
        st = rt_spec_load(out->a, "examples/matmul.spec", set, 3, &out->op, &err);
    } else if (c->op == SCALE_TRMM) {
        rt_size_binding set[] = {{"N", c->size[0]}, {"P", c->size[1]}};
        st = rt_spec_load(out->a, "examples/trmm.spec", set, 2, &out->op, &err);
    } else if (c->op == SCALE_RELU) {
        rt_size_binding set[] = {
            {"N", c->size[0]}, {"C", c->size[1]}, {"H", c->size[2]}, {"W", c->size[3]}};
        st = rt_spec_parse(out->a, relu_spec, "relu.spec", set, 4, &out->op, &err);
    } else {
        rt_size_binding set[] = {{"B", c->size[0]}};
        st = rt_spec_load(out->a, "examples/qkt.spec", set, 1, &out->op, &err);
        int32_t n = (int32_t)c->size[0];
        int64_t *lens = rt_arena_calloc(out->a, (size_t)n, sizeof *lens);
        uint64_t seed = 1;
        for (int32_t i = 0; lens && i < n; i++)
            lens[i] = 1 + i % c->size[1];
        for (int32_t i = n - 1; lens && i > 0; i--) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            int32_t j = (int32_t)((seed >> 33) % (uint64_t)(i + 1));
            int64_t t = lens[i];
            lens[i] = lens[j];
            lens[j] = t;
        }
        out->len.tensor = "len";
        if (st == RT_OK)
            st = rt_extent_dist_from_samples(out->a, lens, n, RT_NOLOC, &out->len.dist, &err);
        out->opt.lengths = &out->len;
        out->opt.n_lengths = 1;
    }
    if (st != RT_OK)
        fprintf(stderr, "spec: %s\n", err.msg);
    RT_EXPECT_EQ(st, RT_OK);
    return st == RT_OK;
}

// Constructs the top-10 and lowers the top-1 to C. False when a step fails.
static bool run_case(const rt_device *dev, const scale_case *c, scale_run *out) {
    memset(out, 0, sizeof *out);
    out->a = rt_arena_new(1 << 20);
    rt_err err = {0};
    if (!load_case(c, out))
        return false;
    double t0 = now_ms();
    if (rt_perf_construct(out->a, out->op, dev, &out->opt, &out->r, &err) != RT_OK) {
        fprintf(stderr, "construct %s on %s: %s\n", out->op->name, dev->name, err.msg);
        RT_EXPECT(false);
        return false;
    }
    out->construct_ms = now_ms() - t0;
    out->evals = out->r->n_evals;
    out->steps = out->r->n_steps;
    const rt_perf_model *m = out->r->model;
    int64_t before = *m->steps;
    rt_lower_options lopt = {.rank = 0};
    rt_kir_kernel *k = NULL;
    const char *text = NULL;
    t0 = now_ms();
    rt_status st = rt_lower_cpu(out->a, out->op, dev, m, &out->r->cands[0], &lopt, &k, &err);
    if (st == RT_OK)
        st = rt_emit_c(out->a, k, &text, &err);
    out->lower_ms = now_ms() - t0;
    out->lower_steps = *m->steps - before;
    if (st != RT_OK)
        fprintf(stderr, "lower %s on %s: %s\n", out->op->name, dev->name, err.msg);
    RT_EXPECT_EQ(st, RT_OK);
    out->c_bytes = text ? strlen(text) : 0;
    return st == RT_OK;
}

// Steps of evaluating the small case's top-1 rProgram on the model of the large case, against
// the same on its own model. Checked before the large construction, which takes minutes (0.14 s
// an evaluation of a 10^6 GEMM) when an evaluation's work follows the extents.
static bool one_evaluation(const rt_device *dev, const scale_run *small, const scale_case *large) {
    scale_run l;
    memset(&l, 0, sizeof l);
    l.a = rt_arena_new(1 << 20);
    rt_perf_model *m = NULL;
    rt_err err = {0};
    bool ok =
        load_case(large, &l) && rt_perf_model_build(l.a, l.op, dev, &l.opt, &m, &err) == RT_OK;
    RT_EXPECT(ok);
    if (!ok) {
        rt_arena_free(l.a);
        return false;
    }
    rt_rprog p = small->r->cands[0];
    const rt_perf_model *ms = small->r->model;
    const char *why;
    int64_t s0 = *ms->steps, l0 = *m->steps;
    RT_EXPECT(rt_perf_evaluate(ms, &p, &why));
    int64_t small_steps = *ms->steps - s0;
    p = small->r->cands[0];
    RT_EXPECT(rt_perf_evaluate(m, &p, &why));
    int64_t large_steps = *m->steps - l0;
    printf("%s %s: one evaluation, %lld model steps small, %lld large\n", dev->name, l.op->name,
           (long long)small_steps, (long long)large_steps);
    RT_EXPECT(small_steps > 0);
    RT_EXPECT(large_steps <= 2 * small_steps);
    RT_EXPECT(isfinite(p.predicted_ns) && p.predicted_ns > 0);
    rt_arena_free(l.a);
    return large_steps <= 2 * small_steps;
}

// Every candidate's figures are finite and positive, its flops at least the operator's.
static void check_finite(const scale_run *s, double flops) {
    for (int32_t i = 0; i < s->r->n_cands; i++) {
        const rt_rprog *p = &s->r->cands[i];
        RT_EXPECT(isfinite(p->predicted_ns) && p->predicted_ns > 0);
        RT_EXPECT(isfinite(p->compute_ns) && p->compute_ns > 0);
        RT_EXPECT(p->flops >= flops * (1 - 1e-9) && isfinite(p->flops));
        RT_EXPECT(p->blocks >= 1);
    }
}

// The small and the large case of one operator, compared; flops: each one's least flops.
static void scale_pair(const rt_device *dev, const char *what, const scale_case *small,
                       const scale_case *large, double small_flops, double large_flops) {
    scale_run s, l;
    bool has_steps = small->op != SCALE_RELU; // the ReLU's model has no such loops
    if (!run_case(dev, small, &s) || (has_steps && !one_evaluation(dev, &s, large)) ||
        !run_case(dev, large, &l)) {
        rt_arena_free(s.a);
        return;
    }
    printf("%s %s: construction %lld -> %lld tile evaluations, %lld -> %lld model steps, "
           "%.1f -> %.1f ms; top-1 lowering %lld -> %lld steps, %zu -> %zu bytes of C, "
           "%.1f -> %.1f ms\n",
           dev->name, what, (long long)s.evals, (long long)l.evals, (long long)s.steps,
           (long long)l.steps, s.construct_ms, l.construct_ms, (long long)s.lower_steps,
           (long long)l.lower_steps, s.c_bytes, l.c_bytes, s.lower_ms, l.lower_ms);
    // Fewer sizes fit a 10^3 extent, so its evaluations may be fewer: both within the budget.
    RT_EXPECT(l.evals <= 3 * SCALE_MAX_EVALS);
    RT_EXPECT(!has_steps || s.steps > 0);
    RT_EXPECT(l.steps <= 2 * s.steps);
    RT_EXPECT(l.lower_steps <= 2 * s.lower_steps);
    RT_EXPECT(l.c_bytes <= 2 * s.c_bytes);
    RT_EXPECT(l.r->n_cands >= 1);
    check_finite(&s, small_flops);
    check_finite(&l, large_flops);
    rt_arena_free(l.a);
    rt_arena_free(s.a);
}

int main(void) {
    const char *paths[] = {"devices/x86-avx2.ini", "devices/x86-avx512.ini"};
    const scale_case gemm3 = {SCALE_GEMM, {1000, 1000, 1000}},
                     gemm6 = {SCALE_GEMM, {1000000, 1000000, 1000000}};
    const scale_case relu3 = {SCALE_RELU, {1, 10, 10, 10}},
                     relu8 = {SCALE_RELU, {100, 100, 100, 100}};
    // 1000 sequences of lengths 1..512 against 10^5 of lengths 1..10^5 (8 heads of 64).
    const scale_case qkt3 = {SCALE_QKT, {1000, 512}}, qkt5 = {SCALE_QKT, {100000, 100000}};
    // A triangular GEMM 10^3 x 4 10^3 against one 10^5 x 2 10^10 (fuzz-gen found its cost walking
    // each item's column blocks: minutes at P = 2 10^10).
    const scale_case trmm3 = {SCALE_TRMM, {1000, 4000}},
                     trmm10 = {SCALE_TRMM, {100000, 20000000000}};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        rt_device dev;
        rt_err err = {0};
        if (rt_hal_load_device(paths[i], &dev, &err) != RT_OK) {
            fprintf(stderr, "%s: %s\n", paths[i], err.msg);
            RT_EXPECT(false);
            continue;
        }
        scale_pair(&dev, "gemm 10^3 -> 10^6", &gemm3, &gemm6, 2e9, 2e18);
        scale_pair(&dev, "relu 10^3 -> 10^8", &relu3, &relu8, 1e3, 1e8);
        scale_pair(&dev, "qkt 10^3 -> 10^5 lengths", &qkt3, &qkt5, 1, 1);
        scale_pair(&dev, "trmm 10^3 x 4 10^3 -> 10^5 x 2 10^10", &trmm3, &trmm10, 1, 1);
    }
    return rt_test_finish("test-perfmodel-scale");
}
