// test-cpu-general.c: the CPU backend's general path with the rTile blocking (lower-cpu.c,
// rt_lower_tiled). Every ranked candidate of the memory-bound and windowed ops (relu,
// reduce_mean, avgpool, depthwise conv with pad reads, a ragged op) is JIT-built and checked
// against the reference interpreter on prime, size-1 and ragged shapes; then the lowering
// itself: distinct rTiles give distinct loop nests, the scale-out tiles are the work items and
// the innermost point loop is the vectorized one.
#include "test.h"
#include "num-host.h"

#include "emit.h"
#include "rtgen.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static rt_status load(rt_arena *a, const char *spec, rt_op **op, rt_err *err) {
    if (strchr(spec, '('))
        return rt_spec_parse(a, spec, "inline.spec", NULL, 0, op, err);
    return rt_spec_load(a, spec, NULL, 0, op, err);
}

// All top-k candidates of spec come out "ok" against the interpreter.
static void numeric_case(const rt_device *dev, const char *spec, int32_t top_k) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    rt_bindings *b = NULL;
    rt_cpu_report *rep = NULL;
    rt_perf_options popt = {.top_k = top_k};
    rt_cpu_options copt = {.profile = true, .budget_ms = 1, .threads = 2};
    if (load(a, spec, &op, &err) != RT_OK ||
        rt_perf_construct(a, op, dev, &popt, &perf, &err) != RT_OK ||
        rt_bindings_new(a, op, 11, &b, &err) != RT_OK ||
        rt_cpu_build_and_profile(a, op, dev, b, perf, &copt, &rep, &err) != RT_OK) {
        fprintf(stderr, "%.40s: %s\n", spec, err.msg);
        RT_EXPECT(0);
        rt_arena_free(a);
        return;
    }
    RT_EXPECT(rep->n >= 1);
    for (int32_t i = 0; i < rep->n; i++) {
        const rt_cpu_cand *cd = &rep->cands[i];
        if (cd->status != RT_CPU_CAND_OK)
            fprintf(stderr, "%.40s: candidate %d (%s): %s, max abs err %g\n", spec, (int)i,
                    cd->summary, rt_cpu_cand_status_name(cd->status), cd->max_abs_err);
        RT_EXPECT_EQ(cd->status, RT_CPU_CAND_OK);
        RT_EXPECT_STR(cd->check, "interpreter");
    }
    rt_arena_free(a);
}

static const rt_kir_node *innermost_loop(const rt_kir_block *b, const rt_kir_node *best) {
    for (int32_t i = 0; i < b->n; i++)
        if (b->nodes[i]->kind == RT_KIR_N_LOOP)
            return innermost_loop(&b->nodes[i]->body, b->nodes[i]);
    return best;
}

static int64_t ceil_div(int64_t x, int64_t y) {
    return (x + y - 1) / y;
}

// relu over (N, C, H, W) with W and H prime: per candidate, one phase blocked by the rTiles
// whose work items are the scale-out tiles of the fused axis taken as one flat index, the
// innermost loop vectorized; candidates with different scale-out tiles lower differently.
static void structure_case(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    rt_perf_options popt = {.top_k = 10};
    const char *spec = "def relu(float(2, 6, 13, 37) I) -> (O) {\n"
                       " O(n, c, h, w) = max(I(n, c, h, w), 0)\n}";
    if (load(a, spec, &op, &err) != RT_OK ||
        rt_perf_construct(a, op, dev, &popt, &perf, &err) != RT_OK) {
        fprintf(stderr, "structure: %s\n", err.msg);
        RT_EXPECT(0);
        rt_arena_free(a);
        return;
    }
    const rt_perf_model *m = perf->model;
    int32_t bl = m->block_level, n_distinct = 0, n_shapes = 0;
    int64_t items_seen[16], shapes_seen[16];
    RT_EXPECT(m->n_axes == 1); // n.c.h.w fused: one contiguous axis
    for (int32_t i = 0; i < perf->n_cands && i < 16; i++) {
        rt_lower_options lopt = {.rank = i};
        rt_kir_kernel *k = NULL;
        RT_EXPECT_EQ(rt_lower_cpu(a, op, dev, m, &perf->cands[i], &lopt, &k, &err), RT_OK);
        if (!k)
            continue;
        RT_EXPECT_EQ(k->n_phases, 1);
        const rt_kir_phase *p = &k->phases[0];
        RT_EXPECT(strstr(p->what, "blocked by the rTiles") != NULL);
        // Every access reads n.c.h.w as one contiguous run: the nest loops over it as one flat
        // index (rt_flat_axis), cut into scale-out tiles T (not T spread over rows of 37).
        int64_t t = perf->cands[i].tile[bl].shape[0], items = ceil_div(2 * 6 * 13 * 37, t);
        RT_EXPECT_EQ(p->n_items, items);
        char want[64];
        snprintf(want, sizeof want, "[n_c_h_w=%lld;", (long long)t);
        RT_EXPECT(strstr(p->what, want) != NULL);
        const rt_kir_node *in = innermost_loop(&p->body, NULL);
        RT_EXPECT(in && in->loop_kind == RT_KIR_LOOP_VECTOR);
        bool seen = false;
        for (int32_t j = 0; j < n_distinct; j++)
            seen = seen || items_seen[j] == p->n_items;
        if (!seen)
            items_seen[n_distinct++] = p->n_items;
        seen = false;
        for (int32_t j = 0; j < n_shapes; j++)
            seen = seen || shapes_seen[j] == perf->cands[i].tile[bl].shape[0];
        if (!seen)
            shapes_seen[n_shapes++] = perf->cands[i].tile[bl].shape[0];
    }
    RT_EXPECT(n_distinct >= 1);
    if (n_shapes > 1)
        RT_EXPECT(n_distinct > 1);
    // The naive kernel keeps the plain nest: one work item per n.
    rt_lower_options nopt = {.naive = true};
    rt_kir_kernel *k = NULL;
    RT_EXPECT_EQ(rt_lower_cpu(a, op, dev, NULL, NULL, &nopt, &k, &err), RT_OK);
    if (k)
        RT_EXPECT_EQ(k->phases[0].n_items, 2);
    rt_arena_free(a);
}

// The innermost loop's first node (the statement's store in an elementwise nest).
static const rt_kir_node *innermost_store(const rt_kir_phase *p) {
    const rt_kir_node *in = innermost_loop(&p->body, NULL);
    return in && in->body.n > 0 && in->body.nodes[0]->kind == RT_KIR_N_STORE ? in->body.nodes[0]
                                                                             : NULL;
}

// The top-1 of spec lowers its fused axis as one flat index (`axis` in the phase's rTile list,
// e.g. "a_b_c=") or, with axis NULL, as a per-member nest; `stream`: its store is non-temporal.
static void flat_case(const rt_device *dev, const char *spec, const char *axis, bool stream) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    rt_perf_options popt = {.top_k = 1};
    rt_lower_options lopt = {.rank = 0};
    rt_kir_kernel *k = NULL;
    if (load(a, spec, &op, &err) != RT_OK ||
        rt_perf_construct(a, op, dev, &popt, &perf, &err) != RT_OK ||
        rt_lower_cpu(a, op, dev, perf->model, &perf->cands[0], &lopt, &k, &err) != RT_OK) {
        fprintf(stderr, "flat: %s\n", err.msg);
        RT_EXPECT(0);
        rt_arena_free(a);
        return;
    }
    const rt_kir_phase *p = &k->phases[0];
    if (axis)
        RT_EXPECT(strstr(p->what, axis) != NULL);
    else
        RT_EXPECT(strstr(p->what, "_") == NULL);
    const rt_kir_node *st = innermost_store(p);
    RT_EXPECT(st != NULL);
    if (st)
        RT_EXPECT_EQ(st->stream, stream);
    rt_arena_free(a);
}

// Bit 0 (r) and bit 1 (s): which window vars a LET directly in b sets.
static int window_lets(const rt_kir_phase *p, const rt_kir_block *b) {
    int set = 0;
    for (int32_t i = 0; i < b->n; i++) {
        const rt_kir_node *n = b->nodes[i];
        if (n->kind == RT_KIR_N_LET)
            set |= (strcmp(p->vars[n->var].name, "r") == 0 ? 1 : 0) |
                   (strcmp(p->vars[n->var].name, "s") == 0 ? 2 : 0);
    }
    return set;
}

// Counts, below b, vector loops over var "x" whose body sets both window vars r and s (the
// window points unrolled in the vector body: good), and loops over a window var or nested inside
// a vector loop (bad).
static void window_scan(const rt_kir_phase *p, const rt_kir_block *b, bool in_vec, int32_t *good,
                        int32_t *bad) {
    for (int32_t i = 0; i < b->n; i++) {
        const rt_kir_node *n = b->nodes[i];
        if (n->kind == RT_KIR_N_IF) {
            window_scan(p, &n->body, in_vec, good, bad);
            window_scan(p, &n->else_body, in_vec, good, bad);
        }
        if (n->kind != RT_KIR_N_LOOP)
            continue;
        const char *name = p->vars[n->var].name;
        if (in_vec || strcmp(name, "r") == 0 || strcmp(name, "s") == 0)
            (*bad)++;
        bool vec = n->loop_kind == RT_KIR_LOOP_VECTOR;
        if (vec && strcmp(name, "x") == 0 && window_lets(p, &n->body) == 3)
            (*good)++;
        window_scan(p, &n->body, in_vec || vec, good, bad);
    }
}

// Window reductions (depthwise conv, pooling): in every blocked candidate the window points are
// unrolled in the body of a vectorized loop along the output's x; no loop over r or s is left.
// With `paired`, some candidate computes two output rows per y (their numbers are checked in
// main's numeric cases).
static void window_case(const rt_device *dev, const char *spec, bool paired) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    rt_perf_options popt = {.top_k = 10};
    if (load(a, spec, &op, &err) != RT_OK ||
        rt_perf_construct(a, op, dev, &popt, &perf, &err) != RT_OK) {
        fprintf(stderr, "window: %s\n", err.msg);
        RT_EXPECT(0);
        rt_arena_free(a);
        return;
    }
    int32_t n_blocked = 0, n_paired = 0;
    for (int32_t i = 0; i < perf->n_cands; i++) {
        rt_lower_options lopt = {.rank = i};
        rt_kir_kernel *k = NULL;
        RT_EXPECT_EQ(rt_lower_cpu(a, op, dev, perf->model, &perf->cands[i], &lopt, &k, &err),
                     RT_OK);
        if (!k || k->n_phases != 1 || !strstr(k->phases[0].what, "blocked by the rTiles"))
            continue;
        n_blocked++;
        n_paired += strstr(k->phases[0].what, ", 2 output rows per y") != NULL;
        int32_t good = 0, bad = 0;
        window_scan(&k->phases[0], &k->phases[0].body, false, &good, &bad);
        RT_EXPECT(good >= 1);
        RT_EXPECT_EQ(bad, 0);
    }
    RT_EXPECT(n_blocked >= 1);
    RT_EXPECT(!paired || n_paired >= 1);
    rt_arena_free(a);
}

// Builds `Y(i) = FN(X(i))` over the N values x (float) for dev, runs the JIT winner and returns
// Y's data in the arena a, or NULL after recording the failure.
static const double *run_unary(rt_arena *a, const rt_device *dev, const char *fn, const double *x,
                               int32_t n) {
    rt_err err = {0};
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    rt_bindings *b = NULL;
    rt_cpu_report *rep = NULL;
    rt_perf_options popt = {.top_k = 1};
    rt_cpu_options copt = {.profile = true, .budget_ms = 1, .threads = 1};
    const char *spec =
        rt_arena_printf(a, "def un(float(%d) X) -> (Y) {\n Y(i) = %s(X(i))\n}", (int)n, fn);
    if (!spec || load(a, spec, &op, &err) != RT_OK ||
        rt_perf_construct(a, op, dev, &popt, &perf, &err) != RT_OK ||
        rt_bindings_new(a, op, 3, &b, &err) != RT_OK ||
        rt_bindings_set_data(b, "X", x, n, &err) != RT_OK ||
        rt_cpu_build_and_profile(a, op, dev, b, perf, &copt, &rep, &err) != RT_OK ||
        rt_cpu_run_winner(rep, b, &err) != RT_OK) {
        fprintf(stderr, "%s: %s\n", fn, err.msg);
        RT_EXPECT(0);
        return NULL;
    }
    const rt_tensor_data *y = rt_bindings_data(b, "Y");
    RT_EXPECT(y && y->layout.elems == n);
    return y && y->layout.elems == n ? y->data : NULL;
}

// True when got is within 2 ulp (of the float nearest want) of want.
static bool within_2ulp(float got, double want) {
    float wf = (float)want;
    return fabs((double)got - want) <= 2.0 * (double)(nextafterf(fabsf(wf), HUGE_VALF) - fabsf(wf));
}

// exp on the JIT path (the inline vector expf of emit-llvm.c): within 2 ulp of the correctly
// rounded expf from 2^-125 up, and exact where it must be: exp(0) = 1, inf above FLT_MAX and for
// inf, NaN for NaN; results under 2^-125 are 0 (flushed) or within 2 ulp (2^-148 as
// subnormals), and 0 below the subnormals.
static void exp_case(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 20);
    enum { N = 4099 };
    static double x[N];
    int32_t n = 0;
    static const double special[] = {
        0.0,       -0.0,   1.0,      -1.0,      88.72283, 88.7229, 89.5,       200.0,
        -87.33654, -87.34, -100.0,   -103.97,   -103.98,  -150.0,  0.34657359, -0.34657359,
        1e-8,      -1e-8,  HUGE_VAL, -HUGE_VAL, NAN,      -86.98,  -86.99,     -86.64};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
        x[n++] = special[i];
    while (n < N) // a sweep over [-110, 95)
        x[n] = -110.0 + 205.0 * (double)n / N, n++;
    const double *y = run_unary(a, dev, "exp", x, N);
    int32_t bad = 0;
    for (int32_t i = 0; y && i < N; i++) {
        float xi = (float)x[i], got = (float)y[i];
        double want = exp((double)xi);
        float wf = (float)want;
        bool ok;
        if (isnan(xi))
            ok = isnan(got);
        else if (want < 0x1p-125 && got == 0.0f)
            ok = true;
        else if (isinf(wf) || wf == 0.0f)
            ok = got == wf;
        else if (fabs(want) < 1.1754943508222875e-38)
            ok = fabs((double)got - want) <= ldexp(1.0, -148);
        else
            ok = within_2ulp(got, want);
        if (!ok && bad++ < 5)
            fprintf(stderr, "exp(%.9g): got %.9g, want %.9g\n", (double)xi, (double)got, want);
    }
    RT_EXPECT_EQ(bad, 0);
    RT_EXPECT(y && y[0] == 1.0);
    rt_arena_free(a);
}

// erf in f32 lanes (emit-llvm's rt_l_erff): within 2 ulp of erf in double and 1e-6 absolute,
// over a sweep across both branches (|x| = 0.927734375 is the switch), tiny, huge, inf and NaN.
static void erf_case(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 20);
    enum { N = 4099 };
    static double x[N];
    int32_t n = 0;
    static const double special[] = {0.0,         -0.0,   1e-30, -1e-30,   1e-8,     -0.927734375,
                                     0.927734375, 0.9278, 3.9,   4.5,      1e30,     -1e30,
                                     10.0,        -11.0,  NAN,   HUGE_VAL, -HUGE_VAL};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
        x[n++] = special[i];
    while (n < N) // a sweep over [-6, 6)
        x[n] = -6.0 + 12.0 * (double)n / N, n++;
    const double *y = run_unary(a, dev, "erf", x, N);
    int32_t bad = 0;
    for (int32_t i = 0; y && i < N; i++) {
        float xi = (float)x[i], got = (float)y[i];
        double want = erf((double)xi);
        bool ok =
            isnan(xi) ? isnan(got) : fabs((double)got - want) <= 1e-6 && within_2ulp(got, want);
        if (!ok && bad++ < 5)
            fprintf(stderr, "erf(%.9g): got %.9g, want %.9g\n", (double)xi, (double)got, want);
    }
    RT_EXPECT_EQ(bad, 0);
    RT_EXPECT(y && y[0] == 0.0 && y[12] == 1.0 && y[13] == -1.0);
    rt_arena_free(a);
}

int main(void) {
    rt_device dev;
    if (!rt_num_host(&dev))
        return 77;
    static const char *const specs[] = {
        "def relu(float(3, 7, 5, 19) I) -> (O) {\n O(n, c, h, w) = max(I(n, c, h, w), 0)\n}",
        "def relu1(float(1, 1, 1, 1) I) -> (O) {\n O(n, c, h, w) = max(I(n, c, h, w), 0)\n}",
        "def relu2(float(2, 97) I) -> (O) {\n O(n, w) = max(I(n, w), 0) * 2\n}",
        // Elementwise over a fused axis: one flat index where every access reads it as one
        // run (two inputs and a read free of the axis), per-row nests where not (a read of a
        // wider tensor, the index used as a value).
        "def add3(float(3, 5, 29) X, float(3, 5, 29) Y, float(2) S) -> (O) {\n"
        " O(a, b, c) = X(a, b, c) + Y(a, b, c) * S(1)\n}",
        "def crop(float(5, 40) X) -> (float(5, 37) O) {\n O(h, w) = X(h, w) * 2   where w in "
        "0:37\n}",
        "def addw(float(4, 37) X) -> (O) {\n O(h, w) = X(h, w) + w\n}",
        "def reduce_mean(float(3, 5, 67) I) -> (O) {\n O(b, r) +=! I(b, r, l) / 67\n}",
        "def reduce_mean1(float(1, 1, 1) I) -> (O) {\n O(b, r) +=! I(b, r, l)\n}",
        "def avgpool(float(2, 3, 23, 17) I) -> (float(2, 3, 11, 8) O) {\n"
        " O(n, c, y, x) +=! I(n, c, 2*y + r, 2*x + s) / 9   where r in 0:3, s in 0:3\n}",
        "def dwconv(float(2, 5, 13, 19) I pad 0, float(5, 3, 3) Wt) -> (float(2, 5, 13, 19) O) {\n"
        " O(n, c, y, x) +=! I(n, c, y + r - 1, x + s - 1) * Wt(c, r, s)\n}",
        "def maxpool(float(1, 3, 7, 31) I pad -1e30) -> (float(1, 3, 7, 31) O) {\n"
        " O(n, c, y, x) max=! I(n, c, y + r - 1, x + s - 1)   where r in 0:3, s in 0:3\n}",
        // Window reductions, the window points unrolled in the x loop: stride 1 and 2, pad
        // (zero and non-zero, where skipping the padded points would be wrong), sizes 1, '+='.
        "def dw5s2(float(1, 3, 23, 29) I pad 0, float(3, 5, 5) Wt) -> (float(1, 3, 12, 15) O) {\n"
        " O(n, c, y, x) +=! I(n, c, 2*y + r - 2, 2*x + s - 2) * Wt(c, r, s)\n}",
        "def dw1(float(1, 1, 1, 1) I pad 0, float(1, 3, 3) Wt) -> (float(1, 1, 1, 1) O) {\n"
        " O(n, c, y, x) +=! I(n, c, y + r - 1, x + s - 1) * Wt(c, r, s)\n}",
        "def padexp(float(2, 3, 11, 13) I pad 0.5) -> (float(2, 3, 11, 13) O) {\n"
        " O(n, c, y, x) +=! exp(I(n, c, y + r - 1, x + s - 1))   where r in 0:3, s in 0:3\n}",
        "def minpool(float(1, 2, 9, 41) I pad 1e30) -> (float(1, 2, 5, 21) O) {\n"
        " O(n, c, y, x) min=! I(n, c, 2*y + r - 1, 2*x + s - 1)   where r in 0:3, s in 0:3\n}",
        "def accpool(float(2, 3, 7, 11) I) -> (float(2, 3, 5, 9) O) {\n"
        " O(n, c, y, x) += I(n, c, y + r, x + s)   where r in 0:3, s in 0:3\n}",
        // Strided reads along rows longer than a vector, packed by phase into scratch: pad on
        // both sides and at the bottom, no pad, stride 3, '+=' (no recomputed outputs), and a
        // 1D window (its rows along c, and with no row dim at all).
        "def dw5s2w(float(2, 3, 23, 71) I pad 0, float(3, 5, 5) Wt) -> (float(2, 3, 12, 36) O) {\n"
        " O(n, c, y, x) +=! I(n, c, 2*y + r - 2, 2*x + s - 2) * Wt(c, r, s)\n}",
        "def avg2(float(2, 3, 11, 41) I) -> (float(2, 3, 5, 20) O) {\n"
        " O(n, c, y, x) +=! I(n, c, 2*y + r, 2*x + s) / 9   where r in 0:3, s in 0:3\n}",
        "def max3(float(1, 2, 10, 64) I pad -1e30) -> (float(1, 2, 4, 21) O) {\n"
        " O(n, c, y, x) max=! I(n, c, 3*y + r - 1, 3*x + s - 1)   where r in 0:3, s in 0:3\n}",
        "def acc2(float(1, 2, 7, 45) I) -> (float(1, 2, 3, 21) O) {\n"
        " O(n, c, y, x) += I(n, c, 2*y + r, 2*x + s)   where r in 0:3, s in 0:3\n}",
        "def conv1d(float(2, 4, 70) I pad 0, float(4, 5) Wt) -> (float(2, 4, 34) O) {\n"
        " O(n, c, x) +=! I(n, c, 2*x + s - 2) * Wt(c, s)\n}",
        "def pool1d(float(3, 70) I pad -1e30, float(4) S) -> (float(3, 4, 34) O) {\n"
        " O(n, c, x) max=! I(n, 2*x + s - 2) * S(c)   where s in 0:5\n}",
        // An empty window (a where-range of extent 0): the identity, scaled, or the caller's
        // values with '+=' (fuzz-gen found the window lowering without an accumulator).
        "def empty(float(2, 3, 9, 37) I pad 0) -> (float(2, 3, 5, 19) O) {\n"
        " O(n, c, y, x) +=! I(n, c, 2*y + r - 1, 2*x + s - 1) / 9   where r in 2:2, s in 0:3\n}",
        "def empty_acc(float(2, 3, 9, 37) I) -> (float(2, 3, 7, 35) O) {\n"
        " O(n, c, y, x) += I(n, c, y + r, x + s)   where r in 0:3, s in 1:1\n}",
        "examples/ragged_softmax.spec",
        "examples/softmax.spec",
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        numeric_case(&dev, specs[i], 10);
    structure_case(&dev);
    flat_case(&dev,
              "def add3(float(3, 5, 29) X, float(3, 5, 29) Y, float(2) S) -> (O) {\n"
              " O(a, b, c) = X(a, b, c) + Y(a, b, c) * S(1)\n}",
              "[a_b_c=", false);
    flat_case(&dev,
              "def crop(float(5, 40) X) -> (float(5, 37) O) {\n O(h, w) = X(h, w) * 2   where w in "
              "0:37\n}",
              NULL, false);
    flat_case(&dev, "def addw(float(4, 37) X) -> (O) {\n O(h, w) = X(h, w) + w\n}", NULL, false);
    // Far beyond the caches (input and output 4x the largest cache level of this host, which may
    // hold 300 MiB; only constructed and lowered, nothing allocated): flat tiles of whole
    // lines, stored non-temporally.
    int64_t cache_bytes = 0, image_bytes = 1008 * 42 * 42 * 4;
    for (int32_t l = 1; l < dev.n_levels; l++)
        if (dev.level[l].capacity_bytes > cache_bytes)
            cache_bytes = dev.level[l].capacity_bytes;
    char relu[160];
    snprintf(relu, sizeof relu,
             "def relu(float(%lld, 1008, 42, 42) I) -> (O) {\n O(n, c, h, w) = max(I(n, c, h, "
             "w), 0)\n}",
             (long long)(8 + 4 * cache_bytes / (2 * image_bytes)));
    flat_case(&dev, relu, "[n_c_h_w=", true);
    window_case(&dev,
                "def dwconv(float(2, 5, 13, 19) I pad 0, float(5, 3, 3) Wt) -> "
                "(float(2, 5, 13, 19) O) {\n"
                " O(n, c, y, x) +=! I(n, c, y + r - 1, x + s - 1) * Wt(c, r, s)\n}",
                true);
    window_case(&dev,
                "def dw5s2w(float(2, 3, 23, 71) I pad 0, float(3, 5, 5) Wt) -> "
                "(float(2, 3, 12, 36) O) {\n"
                " O(n, c, y, x) +=! I(n, c, 2*y + r - 2, 2*x + s - 2) * Wt(c, r, s)\n}",
                true);
    window_case(&dev,
                "def avgpool(float(2, 7, 23, 17) I) -> (float(2, 7, 11, 8) O) {\n"
                " O(n, c, y, x) +=! I(n, c, 2*y + r, 2*x + s) / 9   where r in 0:3, s in 0:3\n}",
                false);
    exp_case(&dev);
    erf_case(&dev);
    return rt_test_finish("test-cpu-general");
}
