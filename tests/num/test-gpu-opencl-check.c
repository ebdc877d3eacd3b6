// test-gpu-opencl-check: the GPU check itself (rt_gpu_check_run on PoCL) rejects what it must,
// and rt_gpu_profile's timed path runs there.
// A candidate of a small elementwise op is emitted in OpenCL for the v100 tile program and its
// source mutated at the store of one output element (element 17): the element off by one, a
// NaN, the store skipped where the reference is 0 (what an output buffer that is not poisoned
// holds), an extra write into an input. Every output is compared: a wrong ninth output, and an
// output left without a buffer, are failures. The unmutated candidates pass, '+=' outputs keep
// their start values. rt_gpu_profile times with profiling events (a two-phase kernel as one
// sequence) and marks candidates that cannot launch, are wrong or do not compile. Contractions
// past the interpreter's limit (a GEMM, a ragged Q K^T) are checked with two random vectors
// and rejected for the same mutations. Exit 77 when
// no OpenCL device matches devices/pocl-cpu.ini.
#include "test.h"

#include "run-gpu.h"
#include "interp.h"

#include <stdio.h>
#include <string.h>

enum { ELEM = 17 };

typedef enum mutation {
    MUT_NONE,
    MUT_OFF_BY_ONE, // out[17] = value + 1
    MUT_NAN,        // out[17] = NaN
    MUT_SKIP,       // out[17] never written
    MUT_CLOBBER,    // after out[17], input[17] = 42
} mutation;

// The source with the store "OUT[IDX] = VALUE;" of buffer out rewritten for element ELEM as m
// says (input: the input buffer MUT_CLOBBER writes); NULL when there is no such store.
static const char *mutate(rt_arena *a, const char *src, const char *out, const char *input,
                          mutation m) {
    char *pat = rt_arena_printf(a, " %s[", out);
    const char *p = strstr(src, pat);
    if (!p)
        return NULL;
    const char *idx = p + strlen(pat), *eq = strstr(idx, "] = "), *end = eq ? strchr(eq, ';') : 0;
    if (!eq || !end)
        return NULL;
    int ni = (int)(eq - idx), nv = (int)(end - (eq + 4));
    const char *val = eq + 4, *text = "";
    switch (m) {
    case MUT_NONE:
        text = rt_arena_printf(a, "%s[%.*s] = %.*s;", out, ni, idx, nv, val);
        break;
    case MUT_OFF_BY_ONE:
        text = rt_arena_printf(a, "%s[%.*s] = (%.*s) == %d ? (%.*s) + 1.0f : (%.*s);", out, ni, idx,
                               ni, idx, ELEM, nv, val, nv, val);
        break;
    case MUT_NAN:
        text = rt_arena_printf(a, "%s[%.*s] = (%.*s) == %d ? (0.0f / 0.0f) : (%.*s);", out, ni, idx,
                               ni, idx, ELEM, nv, val);
        break;
    case MUT_SKIP:
        text = rt_arena_printf(a, "if ((%.*s) != %d) %s[%.*s] = %.*s;", ni, idx, ELEM, out, ni, idx,
                               nv, val);
        break;
    case MUT_CLOBBER:
        text = rt_arena_printf(a,
                               "%s[%.*s] = %.*s; if ((%.*s) == %d) ((__global float *)%s)[%.*s] = "
                               "42.0f;",
                               out, ni, idx, nv, val, ni, idx, ELEM, input, ni, idx);
        break;
    }
    return rt_arena_printf(a, "%.*s%s%s", (int)(p + 1 - src), src, text, end + 1);
}

typedef struct fixture {
    rt_device ocl, v100;
    rt_gpu_runtime *rt;
} fixture;

// The top-1 candidate of spec for v100, emitted in OpenCL.
static bool emit(rt_arena *a, const fixture *f, const char *spec, rt_gpu_candidate *out) {
    rt_err err = {0};
    rt_op *op;
    rt_perf_result *perf;
    rt_perf_options popt = {.top_k = 1};
    if (rt_spec_parse(a, spec, "check.spec", NULL, 0, &op, &err) != RT_OK ||
        rt_perf_construct(a, op, &f->v100, &popt, &perf, &err) != RT_OK ||
        rt_gpu_emit_candidate(a, perf, 1, RT_GPU_TARGET_OPENCL, NULL, out, &err) != RT_OK) {
        fprintf(stderr, "emit: %s\n", err.msg);
        return false;
    }
    return true;
}

// Runs candidate c (source replaced by src when not NULL) on fresh bindings (seed 1; set, when
// not NULL, is called on them first) and checks the verdict: accepted, or rejected with a reason
// containing want.
// Returns the check that ran ("interpreter", "random-vector"; NULL when none ran).
static const char *expect_check(rt_arena *a, const fixture *f, const rt_gpu_candidate *c,
                                const char *src, void (*set)(rt_bindings *), const char *what,
                                const char *want) {
    rt_gpu_candidate m = *c;
    if (src)
        m.source = src;
    rt_bindings *b = NULL;
    rt_err err = {0};
    rt_gpu_check chk;
    rt_status st = rt_bindings_new(a, c->kernel->op, 1, &b, &err);
    if (st == RT_OK && set)
        set(b);
    if (st == RT_OK)
        st = rt_gpu_check_run(a, f->rt, &f->ocl, &m, b, &chk, &err);
    RT_EXPECT_EQ(st, RT_OK);
    if (st != RT_OK) {
        fprintf(stderr, "%s: %s\n%s\n", what, err.msg, err.log ? err.log : "");
        return NULL;
    }
    printf("%-26s %s check in %.0f us: %s%s\n", what, chk.check, chk.check_ns / 1e3,
           chk.accepted ? "accepted" : "rejected: ", chk.reason ? chk.reason : "");
    RT_EXPECT_EQ(chk.n_outputs, c->kernel->op->n_outputs);
    if (!want) {
        RT_EXPECT(chk.accepted && !chk.reason);
        return chk.check;
    }
    RT_EXPECT(!chk.accepted);
    RT_EXPECT(chk.reason && strstr(chk.reason, want));
    if (!chk.reason || !strstr(chk.reason, want))
        fprintf(stderr, "  %s: expected a reason with \"%s\"\n", what, want);
    return chk.check;
}

// x(17) = 0.5, y(17) = -1: z(17) = 2 x + y = 0, what an unpoisoned output buffer holds.
static void zero_at_17(rt_bindings *b) {
    double x[1000], y[1000];
    for (int i = 0; i < 1000; i++) {
        x[i] = 0.25 + i % 7;
        y[i] = 1.0 - i % 5;
    }
    x[ELEM] = 0.5;
    y[ELEM] = -1.0;
    rt_err err = {0};
    RT_EXPECT_EQ(rt_bindings_set_data(b, "x", x, 1000, &err), RT_OK);
    RT_EXPECT_EQ(rt_bindings_set_data(b, "y", y, 1000, &err), RT_OK);
}

// qkt's lengths: 0, 1 and primes, 10.6M points.
static void qkt_lengths(rt_bindings *b) {
    static const int32_t len[4] = {0, 1, 257, 131};
    rt_err err = {0};
    RT_EXPECT_EQ(rt_bindings_set_lengths(b, "len", len, 4, &err), RT_OK);
}

static void test_axpy(rt_arena *a, const fixture *f) {
    rt_gpu_candidate c;
    if (!emit(a, f,
              "size N = 1000\ndef axpy(float(N) x, float(N) y) -> (z) {\n"
              "    z(i) = 2 * x(i) + y(i)\n}\n",
              &c)) {
        RT_EXPECT(0);
        return;
    }
    const char *same = mutate(a, c.source, "t_z", "t_x", MUT_NONE);
    RT_EXPECT(same && strcmp(same, c.source) == 0); // the store was found and parsed back
    expect_check(a, f, &c, NULL, NULL, "axpy", NULL);
    expect_check(a, f, &c, NULL, zero_at_17, "axpy, z(17) = 0", NULL);
    expect_check(a, f, &c, mutate(a, c.source, "t_z", "t_x", MUT_OFF_BY_ONE), NULL,
                 "axpy, z(17) off by one", "output 'z': max error 1 above");
    expect_check(a, f, &c, mutate(a, c.source, "t_z", "t_x", MUT_NAN), NULL, "axpy, z(17) NaN",
                 "output 'z': 1 of 1000 elements non-finite where the reference differs (first: "
                 "element 17 is nan");
    expect_check(a, f, &c, mutate(a, c.source, "t_z", "t_x", MUT_SKIP), zero_at_17,
                 "axpy, z(17) never written",
                 "output 'z': 1 of 1000 elements non-finite where the reference differs (first: "
                 "element 17 is nan, expected 0)");
    expect_check(a, f, &c, mutate(a, c.source, "t_z", "t_x", MUT_CLOBBER), NULL,
                 "axpy, writes x(17)", "the kernel changed input 'x': element 17 is 42 (was ");
}

// Contractions past the interpreter's limit take the random-vector check (src/ref/vcheck.h): a
// GEMM of 5.2M points and a ragged Q K^T of 10.6M (lengths 0, 1, 257, 131) pass as emitted and
// are rejected with element 17 off by one, NaN, never written (the poison), or an input written
// (the ragged op: off by one and never written).
static void test_vector(rt_arena *a, const fixture *f) {
    static const struct {
        const char *name, *spec, *out, *in;
    } ops[] = {{"mm",
                "size M = 160\nsize N = 170\nsize K = 190\n"
                "def mm(float(M, K) A, float(K, N) B) -> (C) {\n"
                "    C(m, n) +=! A(m, k) * B(k, n)\n}\n",
                "t_C", "t_A"},
               {"qkt",
                "size B = 4\nsize H = 2\nsize D = 64\n"
                "def qkt(int32(B) len, float(b:B, len(b), H, D) Q, "
                "float(b:B, len(b), H, D) K) -> (S) {\n"
                "    S(b, h, i, j) +=! Q(b, i, h, d) * K(b, j, h, d) * 0.125\n}\n",
                "t_S", "t_Q"}};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        rt_gpu_candidate c;
        if (!emit(a, f, ops[i].spec, &c)) {
            RT_EXPECT(0);
            continue;
        }
        void (*set)(rt_bindings *) = i == 1 ? qkt_lengths : NULL;
        const char *o = ops[i].out, *in = ops[i].in, *name = ops[i].name;
        const char *check = expect_check(a, f, &c, NULL, set, name, NULL);
        RT_EXPECT(check && strcmp(check, "random-vector") == 0);
        static const char *const what[4] = {"off by one", "NaN", "never written", "writes input"};
        static const mutation muts[4] = {MUT_OFF_BY_ONE, MUT_NAN, MUT_SKIP, MUT_CLOBBER};
        char want_in[64];
        snprintf(want_in, sizeof want_in, "the kernel changed input '%s': element 17", in + 2);
        const char *want[4] = {"C t differs from alpha A (B t) by",
                               "t differs from alpha A (B t): not finite",
                               "t differs from alpha A (B t): not finite", want_in};
        for (int m = 0; m < 4; m++) {
            if (i == 1 && (m == 1 || m == 3))
                continue; // each build is seconds on PoCL: the ragged op, two mutations
            const char *src = mutate(a, c.source, o, in, muts[m]);
            RT_EXPECT(src != NULL);
            if (!src)
                continue;
            char label[64];
            snprintf(label, sizeof label, "%s, 17 %s", name, what[m]);
            const char *w = want[m];
            if (m == 0 && i == 1)
                w = "S t differs from alpha A (B t) by";
            expect_check(a, f, &c, src, set, label, w);
        }
    }
}

// Nine outputs: the ninth is compared like the first. Two equal outputs, the second's buffer
// relabelled as the first's: y2 then has no buffer, which fails.
static void test_outputs(rt_arena *a, const fixture *f) {
    rt_buf spec;
    rt_buf_init(&spec, a);
    rt_buf_puts(&spec, "size N = 300\ndef nine(float(N) x) -> (y1");
    for (int k = 2; k <= 9; k++)
        rt_buf_printf(&spec, ", y%d", k);
    rt_buf_puts(&spec, ") {\n");
    for (int k = 1; k <= 9; k++)
        rt_buf_printf(&spec, "    y%d(i) = x(i) + %d\n", k, k);
    rt_buf_puts(&spec, "}\n");
    rt_gpu_candidate c;
    if (!emit(a, f, spec.data, &c)) {
        RT_EXPECT(0);
        return;
    }
    expect_check(a, f, &c, NULL, NULL, "nine", NULL);
    expect_check(a, f, &c, mutate(a, c.source, "t_y9", "t_x", MUT_OFF_BY_ONE), NULL,
                 "nine, y9(17) off by one", "output 'y9': max error 1 above");

    if (!emit(a, f,
              "size N = 300\ndef two(float(N) x) -> (y1, y2) {\n"
              "    y1(i) = x(i) + 1\n    y2(i) = x(i) + 1\n}\n",
              &c)) {
        RT_EXPECT(0);
        return;
    }
    expect_check(a, f, &c, NULL, NULL, "two", NULL);
    rt_gpu_kernel k = *c.kernel;
    rt_gpu_buffer *bufs = rt_arena_calloc(a, (size_t)k.n_bufs, sizeof *bufs);
    memcpy(bufs, k.bufs, (size_t)k.n_bufs * sizeof *bufs);
    int32_t y1 = k.op->outputs[0], y2 = k.op->outputs[1], relabelled = 0;
    for (int32_t i = 0; i < k.n_bufs; i++)
        if (!bufs[i].is_start && bufs[i].tensor == y2) {
            bufs[i].tensor = y1;
            relabelled++;
        }
    RT_EXPECT_EQ(relabelled, 1);
    k.bufs = bufs;
    c.kernel = &k;
    expect_check(a, f, &c, NULL, NULL, "two, y2 without a buffer",
                 "output 'y2' has no buffer in the kernel, so it was not compared");
}

// s is src with the first occurrence of from replaced by to; NULL when from is not there.
static const char *replace(rt_arena *a, const char *src, const char *from, const char *to) {
    const char *p = strstr(src, from);
    if (!p)
        return NULL;
    return rt_arena_printf(a, "%.*s%s%s", (int)(p - src), src, to, p + strlen(from));
}

// rt_gpu_profile on PoCL with a tiny timing budget (no warm-up, 1 to 2 repetitions): the timed
// path runs and says how it timed (profiling events); a two-phase kernel is checked and timed as
// one sequence; a candidate that cannot be launched, a wrong one and one that does not compile
// are marked with their reasons while the others go on, and the winner is the right one.
static void test_profile(rt_arena *a, const fixture *f) {
    rt_gpu_time_options tiny = {.warmup = 0, .min_reps = 1, .max_reps = 2, .budget_ns = 0};
    rt_gpu_candidate two;
    if (!emit(a, f,
              "def two(float(64, 32) X) -> (Y) {\n    s(d) +=! X(n, d)\n"
              "    Y(n, d) = X(n, d) / (1 + s(d) * s(d))\n}\n",
              &two)) {
        RT_EXPECT(0);
        return;
    }
    RT_EXPECT_EQ(two.kernel->n_phases, 2);
    rt_bindings *b = NULL;
    rt_err err = {0};
    rt_gpu_result res[4];
    int32_t winner = -2;
    RT_EXPECT_EQ(rt_bindings_new(a, two.kernel->op, 1, &b, &err), RT_OK);
    RT_EXPECT_EQ(rt_gpu_profile(a, f->rt, &f->ocl, &two, 1, b, &tiny, res, &winner, &err), RT_OK);
    printf("two (%d phases): %s, kernel median %.0f ns over %d, %s\n", (int)two.kernel->n_phases,
           rt_gpu_cand_status_name(res[0].status), res[0].timing.median_ns, (int)res[0].timing.reps,
           res[0].timing.method ? res[0].timing.method : "-");
    RT_EXPECT_EQ(res[0].status, RT_GPU_CAND_OK);
    RT_EXPECT_EQ(winner, 0);
    RT_EXPECT(res[0].timing.reps >= 1 && res[0].timing.reps <= 2);
    RT_EXPECT(res[0].timing.method && strstr(res[0].timing.method, "OpenCL profiling events"));

    rt_gpu_candidate axpy;
    if (!emit(a, f,
              "size N = 1000\ndef axpy(float(N) x, float(N) y) -> (z) {\n"
              "    z(i) = 2 * x(i) + y(i)\n}\n",
              &axpy)) {
        RT_EXPECT(0);
        return;
    }
    rt_gpu_candidate cands[4] = {axpy, axpy, axpy, axpy};
    char want_wg[64];
    snprintf(want_wg, sizeof want_wg, "reqd_work_group_size(%d, 1, 1)",
             (int)axpy.kernel->phases[0].threads);
    cands[0].source = replace(a, axpy.source, want_wg, "reqd_work_group_size(1, 1, 1)");
    cands[1].source = mutate(a, axpy.source, "t_z", "t_x", MUT_OFF_BY_ONE);
    cands[2].source = replace(a, axpy.source, "__kernel", "__kernel not OpenCL");
    for (int i = 0; i < 3; i++)
        RT_EXPECT(cands[i].source != NULL);
    if (!cands[0].source || !cands[1].source || !cands[2].source)
        return;
    RT_EXPECT_EQ(rt_bindings_new(a, axpy.kernel->op, 1, &b, &err), RT_OK);
    RT_EXPECT_EQ(rt_gpu_profile(a, f->rt, &f->ocl, cands, 4, b, &tiny, res, &winner, &err), RT_OK);
    for (int i = 0; i < 4; i++)
        printf("axpy candidate %d: %s%s%s\n", i, rt_gpu_cand_status_name(res[i].status),
               res[i].reason ? ": " : "", res[i].reason ? res[i].reason : "");
    RT_EXPECT_EQ(res[0].status, RT_GPU_CAND_RUN_FAILED);
    RT_EXPECT(res[0].reason && strstr(res[0].reason, "CL_INVALID_WORK_GROUP_SIZE"));
    RT_EXPECT_EQ(res[1].status, RT_GPU_CAND_WRONG);
    RT_EXPECT(res[1].reason && strstr(res[1].reason, "output 'z': max error 1 above"));
    RT_EXPECT_EQ(res[2].status, RT_GPU_CAND_COMPILE_FAILED);
    RT_EXPECT(res[2].reason && strstr(res[2].reason, "clBuildProgram failed"));
    RT_EXPECT_EQ(res[3].status, RT_GPU_CAND_OK);
    RT_EXPECT_EQ(winner, 3);

    // Candidates of different operators cannot share one reference.
    rt_gpu_candidate mixed[2] = {axpy, two};
    RT_EXPECT_EQ(rt_gpu_profile(a, f->rt, &f->ocl, mixed, 2, b, &tiny, res, &winner, &err),
                 RT_ERR_USAGE);
}

int main(void) {
    fixture f = {0};
    rt_err err = {0};
    if (rt_hal_load_device("devices/pocl-cpu.ini", &f.ocl, &err) != RT_OK ||
        rt_hal_load_device("devices/v100.ini", &f.v100, &err) != RT_OK) {
        fprintf(stderr, "devices: %s\n", err.msg);
        return 1;
    }
    rt_arena *a = rt_arena_new(1 << 20);
    if (rt_gpu_runtime_open(a, &f.ocl, &f.rt, &err) != RT_OK) {
        printf("skip: %s\n", err.msg);
        rt_arena_free(a);
        return rt_gpu_err_is_absent(&err) ? 77 : 1;
    }
    test_axpy(a, &f);
    test_outputs(a, &f);
    test_vector(a, &f);
    test_profile(a, &f);
    rt_arena_free(a);
    return rt_test_finish("test-gpu-opencl-check");
}
