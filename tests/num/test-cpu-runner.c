// test-cpu-runner.c: rt_cpu_runner, the in-process handle an embedding program (or a benchmark)
// runs a compiled candidate through many times. Its first run equals rt_cpu_run_winner's; inputs
// written through rt_cpu_runner_data are what the next run reads (checked against the
// interpreter on the same new values, ragged included); a '+=' op adds once per run; every
// candidate of the report can be run, and a bad index is refused with its message.
#include "test.h"
#include "num-host.h"

#include "rtgen.h"
#include "compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct fixture {
    rt_arena *a;
    rt_op *op;
    rt_bindings *b;
    rt_cpu_report *rep;
} fixture;

static bool build(const rt_device *dev, const char *spec, int32_t top_k, fixture *f) {
    rt_err err = {0};
    rt_perf_result *perf = NULL;
    rt_perf_options popt = {.top_k = top_k};
    rt_cpu_options copt = {.profile = true, .budget_ms = 1, .threads = 2};
    f->a = rt_arena_new(1 << 20);
    if (rt_spec_parse(f->a, spec, "inline.spec", NULL, 0, &f->op, &err) != RT_OK ||
        rt_perf_construct(f->a, f->op, dev, &popt, &perf, &err) != RT_OK ||
        rt_bindings_new(f->a, f->op, 5, &f->b, &err) != RT_OK ||
        rt_cpu_build_and_profile(f->a, f->op, dev, f->b, perf, &copt, &f->rep, &err) != RT_OK) {
        fprintf(stderr, "%.40s: %s\n", spec, err.msg);
        RT_EXPECT(0);
        rt_arena_free(f->a);
        return false;
    }
    RT_EXPECT(f->rep->winner >= 0);
    return true;
}

// Largest |x - y| over an output's elements.
static double max_diff(const rt_tensor_data *x, const rt_tensor_data *y) {
    double d = 0;
    for (int64_t e = 0; e < x->layout.elems; e++)
        d = fmax(d, fabs(x->data[e] - y->data[e]));
    return d;
}

// Whether got passes as ref by the one acceptance rule for dtype t.
static bool accepted(const double *ref, const double *got, int64_t n, rt_dtype t) {
    rt_compare_result cr;
    rt_compare_data(ref, got, n, &cr);
    if (!rt_compare_accept(&cr, t))
        fprintf(stderr, "off by %g at %lld (nmse %g)\n", cr.max_abs_err, (long long)cr.worst_index,
                cr.nmse);
    return rt_compare_accept(&cr, t);
}

// spec's winner through a runner: equal to rt_cpu_run_winner, then on new inputs written into
// the runner's float buffers, accepted against the interpreter on those inputs.
static void inputs_case(const rt_device *dev, const char *spec, const char *out) {
    fixture f;
    if (!build(dev, spec, 3, &f))
        return;
    rt_err err = {0};
    rt_bindings *ref = NULL, *got = NULL;
    rt_cpu_runner *rn = NULL;
    RT_EXPECT_EQ(rt_bindings_new(f.a, f.op, 5, &ref, &err), RT_OK);
    RT_EXPECT_EQ(rt_bindings_new(f.a, f.op, 5, &got, &err), RT_OK);
    RT_EXPECT_EQ(rt_cpu_run_winner(f.rep, ref, &err), RT_OK);
    RT_EXPECT_EQ(rt_cpu_runner_new(f.rep, -1, got, &rn, &err), RT_OK);
    if (!rn) {
        rt_arena_free(f.a);
        return;
    }
    RT_EXPECT_EQ(rt_cpu_runner_run(rn, &err), RT_OK);
    rt_cpu_runner_outputs(rn, got);
    RT_EXPECT(max_diff(rt_bindings_data(ref, out), rt_bindings_data(got, out)) == 0.0);
    // New inputs: x -> 0.5 - x/2 in the runner's buffers and in the interpreter's bindings.
    for (int32_t t = 0; t < f.op->n_tensors; t++) {
        if (f.op->tensors[t].role != RT_ROLE_INPUT || f.op->tensors[t].dtype != RT_DTYPE_F32)
            continue;
        float *p = rt_cpu_runner_data(rn, t);
        RT_EXPECT(p != NULL);
        rt_tensor_data *td = &got->tensors[t];
        for (int64_t e = 0; p && e < td->layout.elems; e++) {
            td->data[e] = (double)(float)(0.5 - td->data[e] / 2);
            p[e] = (float)td->data[e];
        }
    }
    RT_EXPECT_EQ(rt_cpu_runner_run(rn, &err), RT_OK);
    RT_EXPECT_EQ(rt_interp_run(f.op, got, &err), RT_OK);
    rt_bindings *mine = NULL;
    RT_EXPECT_EQ(rt_bindings_new(f.a, f.op, 5, &mine, &err), RT_OK);
    RT_EXPECT_EQ(rt_bindings_prepare(mine, &err), RT_OK);
    rt_cpu_runner_outputs(rn, mine);
    const rt_tensor_data *want = rt_bindings_data(got, out), *have = rt_bindings_data(mine, out);
    bool ok = accepted(want->data, have->data, want->layout.elems,
                       f.op->tensors[rt_op_tensor_index(f.op, out)].dtype);
    if (!ok)
        fprintf(stderr, "%.40s: runner on new inputs\n", spec);
    RT_EXPECT(ok);
    RT_EXPECT(max_diff(rt_bindings_data(ref, out), rt_bindings_data(mine, out)) > 0.0);
    rt_cpu_runner_free(rn);
    rt_arena_free(f.a);
}

// C += A * B: each run adds A * B once more to the caller's C (two runs: C0 + 2 A B), on every
// candidate; an index past the report is refused.
static void accumulate_case(const rt_device *dev) {
    fixture f;
    if (!build(dev,
               "def acc(float(13, 29) A, float(29, 31) B) -> (float(13, 31) C) {\n"
               " C(m, n) += A(m, k) * B(k, n)\n}",
               3, &f))
        return;
    rt_err err = {0};
    int32_t ta = rt_op_tensor_index(f.op, "A"), tb = rt_op_tensor_index(f.op, "B"),
            tc = rt_op_tensor_index(f.op, "C");
    for (int32_t cand = 0; cand < f.rep->n; cand++) {
        rt_bindings *b = NULL;
        rt_cpu_runner *rn = NULL;
        RT_EXPECT_EQ(rt_bindings_new(f.a, f.op, 9, &b, &err), RT_OK);
        RT_EXPECT_EQ(rt_cpu_runner_new(f.rep, cand, b, &rn, &err), RT_OK);
        if (!rn)
            continue;
        RT_EXPECT(rt_cpu_runner_data(rn, tc) != NULL);
        RT_EXPECT_EQ(rt_cpu_runner_run(rn, &err), RT_OK);
        RT_EXPECT_EQ(rt_cpu_runner_run(rn, &err), RT_OK);
        const float *c = rt_cpu_runner_data(rn, tc);
        const double *a = b->tensors[ta].data, *bb = b->tensors[tb].data, *c0 = b->tensors[tc].data;
        static double want[13 * 31], have[13 * 31];
        for (int32_t m = 0; m < 13; m++)
            for (int32_t n = 0; n < 31; n++) {
                double s = 0;
                for (int32_t k = 0; k < 29; k++)
                    s += a[m * 29 + k] * bb[k * 31 + n];
                want[m * 31 + n] = c0[m * 31 + n] + 2 * s;
                have[m * 31 + n] = (double)c[m * 31 + n];
            }
        bool ok = accepted(want, have, 13 * 31, RT_DTYPE_F32);
        if (!ok)
            fprintf(stderr, "acc candidate %d: two runs\n", (int)cand);
        RT_EXPECT(ok);
        rt_cpu_runner_free(rn);
    }
    rt_cpu_runner *rn = NULL;
    RT_EXPECT_EQ(rt_cpu_runner_new(f.rep, f.rep->n, f.b, &rn, &err), RT_ERR_BACKEND);
    RT_EXPECT(rn == NULL);
    char want[64];
    snprintf(want, sizeof want, "no candidate %d (the report has %d)", (int)f.rep->n,
             (int)f.rep->n);
    RT_EXPECT_STR(err.msg, want);
    rt_arena_free(f.a);
}

int main(void) {
    rt_device dev;
    if (!rt_num_host(&dev))
        return 77;
    // The packed GEMM path on prime shapes, the general path, and a ragged op.
    inputs_case(&dev,
                "def mm(float(37, 41) A, float(41, 43) B) -> (C) {\n"
                " C(m, n) +=! A(m, k) * B(k, n)\n}",
                "C");
    inputs_case(&dev,
                "def softmax(float(13, 37) X) -> (Y) {\n mx(n) max=! X(n, d)\n"
                " e(n, d) = exp(X(n, d) - mx(n))\n s(n) +=! e(n, d)\n"
                " Y(n, d) = e(n, d) / s(n)\n}",
                "Y");
    inputs_case(&dev,
                "def rsum(int32(5) len, float(b:5, len(b), 7) X) -> (Y) {\n"
                " Y(b, d) +=! X(b, l, d)\n}",
                "Y");
    accumulate_case(&dev);
    return rt_test_finish("test-cpu-runner");
}
