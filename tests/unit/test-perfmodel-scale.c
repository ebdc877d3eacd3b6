// test-perfmodel-scale.c: construction and lowering cost what the memory hierarchy and the cores
// bound, not the extents (issue 18 item 12). A 10^6 x 10^6 x 10^6 GEMM and a 10^8-element ReLU
// (examples/matmul.spec and a ReLU over N x C x H x W, the sizes bound as rtgen --set binds
// them) against the same operators at 10^3: the model's loop steps (rt_perf_result.n_steps:
// work items, column blocks, blocking choices and distribution values it sums) of one
// evaluation, of the top-10 construction and of lowering the top-1, and the lowered kernel's C
// text, each within twice its 10^3 value; the tile evaluations within the construction's budget. The numbers at 10^18 points
// stay finite (run under -DRTGEN_SANITIZE=undefined for the integer side). Times are printed,
// never asserted.
#include "test.h"

#include "emit.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

// The construction's evaluation budget (rt_perf_options.max_evals, its default): an epsilon round
// stops at it, and no round starts once twice it is spent.
#define SCALE_MAX_EVALS 1000

static const char relu_spec[] = "size N = 1\nsize C = 1\nsize H = 1\nsize W = 1\n"
                                "def relu(float(N, C, H, W) I) -> (O) {\n"
                                "    O(n, c, h, w) = max(I(n, c, h, w), 0)\n}\n";

// What one operator at one size costs to construct and lower.
typedef struct scale_run {
    rt_arena *a;
    rt_perf_result *r;
    int64_t evals, steps, lower_steps;
    size_t c_bytes; // the top-1's C text
    double construct_ms, lower_ms;
} scale_run;

static rt_op *load_op(rt_arena *a, bool gemm, const int64_t *size) {
    rt_err err = {0};
    rt_op *op = NULL;
    rt_status st;
    if (gemm) {
        rt_size_binding set[] = {{"M", size[0]}, {"N", size[1]}, {"K", size[2]}};
        st = rt_spec_load(a, "examples/matmul.spec", set, 3, &op, &err);
    } else {
        rt_size_binding set[] = {{"N", size[0]}, {"C", size[1]}, {"H", size[2]}, {"W", size[3]}};
        st = rt_spec_parse(a, relu_spec, "relu.spec", set, 4, &op, &err);
    }
    if (st != RT_OK)
        fprintf(stderr, "spec: %s\n", err.msg);
    RT_EXPECT_EQ(st, RT_OK);
    return st == RT_OK ? op : NULL;
}

// Constructs the top-10 and lowers the top-1 to C. False when a step fails.
static bool run_op(const rt_device *dev, bool gemm, const int64_t *size, scale_run *out) {
    memset(out, 0, sizeof *out);
    out->a = rt_arena_new(1 << 20);
    rt_op *op = load_op(out->a, gemm, size);
    rt_err err = {0};
    rt_perf_options opt = {.top_k = 10, .max_evals = SCALE_MAX_EVALS};
    double t0 = now_ms();
    if (!op || rt_perf_construct(out->a, op, dev, &opt, &out->r, &err) != RT_OK) {
        fprintf(stderr, "construct %s on %s: %s\n", op ? op->name : "?", dev->name, err.msg);
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
    rt_status st = rt_lower_cpu(out->a, op, dev, m, &out->r->cands[0], &lopt, &k, &err);
    if (st == RT_OK)
        st = rt_emit_c(out->a, k, &text, &err);
    out->lower_ms = now_ms() - t0;
    out->lower_steps = *m->steps - before;
    if (st != RT_OK)
        fprintf(stderr, "lower %s on %s: %s\n", op->name, dev->name, err.msg);
    RT_EXPECT_EQ(st, RT_OK);
    out->c_bytes = text ? strlen(text) : 0;
    return st == RT_OK;
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

// Steps of evaluating the small operator's top-1 rProgram on the model of the large one, against
// the same on its own model. Checked before the large construction, which takes minutes (0.14 s
// an evaluation at 10^6) when an evaluation's work follows the extents.
static bool one_evaluation(const rt_device *dev, const scale_run *small, const int64_t *size) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_op *op = load_op(a, true, size);
    rt_perf_model *m = NULL;
    rt_err err = {0};
    bool ok = op && rt_perf_model_build(a, op, dev, NULL, &m, &err) == RT_OK;
    RT_EXPECT(ok);
    if (!ok) {
        rt_arena_free(a);
        return false;
    }
    rt_rprog p = small->r->cands[0];
    const rt_perf_model *ms = small->r->model;
    const char *why;
    int64_t s0 = *ms->steps;
    RT_EXPECT(rt_perf_evaluate(ms, &p, &why));
    int64_t small_steps = *ms->steps - s0;
    p = small->r->cands[0];
    RT_EXPECT(rt_perf_evaluate(m, &p, &why));
    int64_t large_steps = *m->steps;
    printf("%s: one evaluation, %lld model steps at 10^3, %lld at 10^6\n", dev->name,
           (long long)small_steps, (long long)large_steps);
    RT_EXPECT(small_steps > 0);
    RT_EXPECT(large_steps <= 2 * small_steps);
    RT_EXPECT(isfinite(p.predicted_ns) && p.predicted_ns > 0);
    rt_arena_free(a);
    return large_steps <= 2 * small_steps;
}

static void compare(const rt_device *dev, const char *what, const scale_run *s,
                    const scale_run *l) {
    printf("%s %s: construction %lld -> %lld tile evaluations, %lld -> %lld model steps, "
           "%.1f -> %.1f ms; top-1 lowering %lld -> %lld steps, %zu -> %zu bytes of C, "
           "%.1f -> %.1f ms\n",
           dev->name, what, (long long)s->evals, (long long)l->evals, (long long)s->steps,
           (long long)l->steps, s->construct_ms, l->construct_ms, (long long)s->lower_steps,
           (long long)l->lower_steps, s->c_bytes, l->c_bytes, s->lower_ms, l->lower_ms);
    // Fewer sizes fit a 10^3 extent, so its evaluations may be fewer: both within the budget.
    RT_EXPECT(l->evals <= 3 * SCALE_MAX_EVALS);
    RT_EXPECT(l->steps <= 2 * s->steps);
    RT_EXPECT(l->lower_steps <= 2 * s->lower_steps);
    RT_EXPECT(l->c_bytes <= 2 * s->c_bytes);
    RT_EXPECT(l->r->n_cands >= 1);
}

static void test_gemm(const rt_device *dev) {
    const int64_t small[3] = {1000, 1000, 1000}, large[3] = {1000000, 1000000, 1000000};
    scale_run s, l;
    if (run_op(dev, true, small, &s) && one_evaluation(dev, &s, large) &&
        run_op(dev, true, large, &l)) {
        RT_EXPECT(s.steps > 0);
        compare(dev, "gemm 10^3 -> 10^6", &s, &l);
        check_finite(&s, 2e9);
        check_finite(&l, 2e18);
        rt_arena_free(l.a);
    }
    rt_arena_free(s.a);
}

static void test_relu(const rt_device *dev) {
    const int64_t small[4] = {1, 10, 10, 10}, large[4] = {100, 100, 100, 100};
    scale_run s, l;
    if (run_op(dev, false, small, &s) && run_op(dev, false, large, &l)) {
        compare(dev, "relu 10^3 -> 10^8", &s, &l);
        check_finite(&s, 1e3);
        check_finite(&l, 1e8);
        rt_arena_free(l.a);
    }
    rt_arena_free(s.a);
}

int main(void) {
    const char *paths[] = {"devices/x86-avx2.ini", "devices/x86-avx512.ini"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        rt_device dev;
        rt_err err = {0};
        if (rt_hal_load_device(paths[i], &dev, &err) != RT_OK) {
            fprintf(stderr, "%s: %s\n", paths[i], err.msg);
            RT_EXPECT(false);
            continue;
        }
        test_gemm(&dev);
        test_relu(&dev);
    }
    return rt_test_finish("test-perfmodel-scale");
}
