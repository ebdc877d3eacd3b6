// test-layer.c: a layer of four defs (projection, bias + GELU, projection, residual with the
// layer input) on ragged batches: lengths with 0, 1 and primes, all equal, all 1, mostly empty,
// all 0. The interpreter's run of the layer (rt_layer_interp_run) and the layer run of the
// winners (rt_layer_run: kernels in order on the layer's buffers, one shared prelude) both
// equal a plain C computation of the chain written here, and the run's own check against the
// interpreter passes; the prelude holds one start array for the one ragged structure.
#include "test.h"
#include "num-host.h"

#include "layer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define B 7
#define D 24
#define F 40

static const char *spec =
    "size B = 7\nsize D = 24\nsize F = 40\n"
    "def ffn1(int32(B) len, float(b:B, len(b), D) X, float(D, F) W1) -> (H) {\n"
    "    H(b, i, n) +=! X(b, i, k) * W1(k, n)\n}\n"
    "def gelu(int32(B) len, float(b:B, len(b), F) H, float(F) bias) -> (G) {\n"
    "    G(b, i, n) = 0.5 * (H(b, i, n) + bias(n)) *\n"
    "        (1 + erf((H(b, i, n) + bias(n)) * 0.70710678))\n}\n"
    "def ffn2(int32(B) len, float(b:B, len(b), F) G, float(F, D) W2) -> (Y) {\n"
    "    Y(b, i, n) +=! G(b, i, k) * W2(k, n)\n}\n"
    "def res(int32(B) len, float(b:B, len(b), D) Y, float(b:B, len(b), D) X)"
    " -> (Z) {\n"
    "    Z(b, i, n) = Y(b, i, n) + X(b, i, n)\n}\n";

static const double *data_of(rt_layer_bindings *lb, int32_t k, const char *name) {
    return rt_bindings_data(lb->ops[k], name)->data;
}

// The chain in plain C (double) on lb's inputs, compared with def res's Z in lb: accepted by
// the tolerance rule of floats.
static bool chain_matches(rt_layer_bindings *lb, const int32_t *len) {
    const double *X = data_of(lb, 0, "X"), *W1 = data_of(lb, 0, "W1");
    const double *bias = data_of(lb, 1, "bias"), *W2 = data_of(lb, 2, "W2");
    const rt_tensor_data *Z = rt_bindings_data(lb->ops[3], "Z");
    int64_t rows = 0;
    for (int32_t b = 0; b < B; b++)
        rows += len[b];
    if (Z->layout.elems != rows * D)
        return false;
    double ref[D], g[F], max_err = 0, max_ref = 0;
    for (int64_t r = 0; r < rows; r++) {
        for (int32_t n = 0; n < F; n++) {
            double h = 0;
            for (int32_t k = 0; k < D; k++)
                h += X[r * D + k] * W1[k * F + n];
            double v = (double)(float)h + bias[n];
            g[n] = 0.5 * v * (1 + erf(v * 0.70710678));
        }
        for (int32_t n = 0; n < D; n++) {
            double y = 0;
            for (int32_t k = 0; k < F; k++)
                y += g[k] * W2[k * D + n];
            ref[n] = y + X[r * D + n];
            max_err = fmax(max_err, fabs(ref[n] - Z->data[r * D + n]));
            max_ref = fmax(max_ref, fabs(ref[n]));
        }
    }
    if (!(max_err <= 1e-4 * (1 + max_ref)))
        fprintf(stderr, "Z differs from the plain chain by %g (max |Z| %g)\n", max_err, max_ref);
    return max_err <= 1e-4 * (1 + max_ref);
}

static rt_status bind_lengths(rt_arena *a, const rt_layer *l, const int32_t *len,
                              rt_layer_bindings **out, rt_err *err) {
    RT_TRY(rt_layer_bindings_new(a, l, 3, out, err));
    RT_TRY(rt_bindings_set_lengths((*out)->ops[0], "len", len, B, err));
    return rt_layer_bindings_prepare(*out, err);
}

// The check by rerunning (a layer above interp_max_flops): the layer run passes it, and a
// corrupted output of the last def (Z, after the run) fails it, named.
static void rerun_check(rt_arena *a, const rt_layer *l, rt_cpu_report *const *cpu,
                        rt_layer_bindings *lb) {
    rt_err err = {0};
    rt_layer_report *r = NULL;
    rt_layer_options lopt = {.budget_ms = 1, .seed = 3, .check = true, .interp_max_flops = 1};
    rt_status st = rt_layer_run(a, l, cpu, lb, &lopt, &r, &err);
    RT_EXPECT_EQ(st, RT_OK);
    if (st == RT_OK) {
        RT_EXPECT(r->checked && r->correct && r->check && !strcmp(r->check, "rerun"));
        for (int32_t k = 0; k < r->n_ops; k++)
            RT_EXPECT(r->ops[k].correct && r->ops[k].max_abs_err == 0);
    }
    rt_layer_runner *rn = NULL;
    st = rt_layer_runner_new(a, l, cpu, lb, &rn, &err);
    if (st == RT_OK)
        st = rt_layer_runner_run(rn, -1, &err);
    size_t bytes = 0;
    float *z = st == RT_OK ? rt_layer_runner_data(rn, "Z", &bytes) : NULL;
    RT_EXPECT(z && bytes >= sizeof(float));
    if (z) {
        z[bytes / sizeof(float) - 1] += 1.0f;
        st = rt_layer_runner_check_rerun(rn, &err);
        const rt_layer_report *rr = rt_layer_runner_report(rn);
        RT_EXPECT_EQ(st, RT_OK);
        RT_EXPECT(rr->checked && !rr->correct && !rr->ops[3].correct && rr->ops[2].correct);
        RT_EXPECT(rr->why && strstr(rr->why, "def res: output Z differs from its kernel's run"));
    }
    if (rn)
        rt_layer_runner_free(rn);
}

static void layer_case(const rt_device *dev, const int32_t *len) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_layer *l = NULL;
    rt_layer_bindings *lb = NULL, *ref = NULL;
    rt_cpu_report *cpu[4] = {0};
    rt_layer_report *r = NULL;
    rt_status st = rt_spec_parse_layer(a, spec, "layer.spec", NULL, 0, &l, &err);
    if (st == RT_OK)
        st = bind_lengths(a, l, len, &lb, &err);
    for (int32_t k = 0; st == RT_OK && k < l->n_ops; k++) {
        rt_perf_result *perf = NULL;
        rt_perf_options popt = {.top_k = 2};
        rt_cpu_options copt = {.profile = true, .budget_ms = 1, .threads = 2};
        st = rt_perf_construct(a, l->ops[k], dev, &popt, &perf, &err);
        if (st == RT_OK)
            st =
                rt_cpu_build_and_profile(a, l->ops[k], dev, lb->ops[k], perf, &copt, &cpu[k], &err);
    }
    rt_layer_options lopt = {.budget_ms = 1, .seed = 3, .check = true};
    if (st == RT_OK)
        st = rt_layer_run(a, l, cpu, lb, &lopt, &r, &err);
    // The interpreter's run of the layer on bindings of its own with the same lengths.
    if (st == RT_OK)
        st = bind_lengths(a, l, len, &ref, &err);
    if (st == RT_OK)
        st = rt_layer_interp_run(ref, &err);
    if (st != RT_OK)
        fprintf(stderr, "lengths %d %d ...: %s\n", (int)len[0], (int)len[1], err.msg);
    RT_EXPECT_EQ(st, RT_OK);
    if (st == RT_OK) {
        RT_EXPECT(r->checked && r->correct);
        RT_EXPECT(chain_matches(lb, len));
        RT_EXPECT(chain_matches(ref, len));
        RT_EXPECT_EQ(r->n_ops, 4);
        // One ragged structure (b:B, len(b)) for every tensor: one array, read by the kernels.
        RT_EXPECT_EQ(r->n_prelude, 1);
        RT_EXPECT(r->n_start_bufs >= 1);
        RT_EXPECT(r->reps >= 3 && r->median_ns > 0);
        RT_EXPECT(r->check && !strcmp(r->check, "interpreter"));
        if (len[6] == 13) // the first batch
            rerun_check(a, l, cpu, lb);
    }
    rt_arena_free(a);
}

int main(void) {
    rt_device dev;
    if (!rt_num_host(&dev))
        return 77;
    static const int32_t lens[][B] = {
        {0, 1, 2, 3, 5, 7, 13}, // 0, 1, primes
        {6, 6, 6, 6, 6, 6, 6},  // all equal
        {1, 1, 1, 1, 1, 1, 1},  // all 1
        {0, 0, 0, 17, 0, 0, 1}, // mostly empty, one long
        {0, 0, 0, 0, 0, 0, 0},  // empty batch
    };
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        layer_case(&dev, lens[i]);
    return rt_test_finish("test-layer");
}
