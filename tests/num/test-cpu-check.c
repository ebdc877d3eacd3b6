// test-cpu-check.c: the CPU profile's checks reject what they must. Each check path — the
// interpreter, the random-vector check of a contraction and the naive kernel (forced with a
// small interp_max_points) — profiles an op whose candidates get one fault injected
// (rt_cpu_options.fault) into their checked run: one corrupted element, a NaN, an element never
// written, an input written by the kernel, an input wiped and the output computed from it, an
// error pattern the first random vector cannot see. Every candidate must come out "wrong" with
// its reason (or "crashed" or "timeout", with where it struck), no winner, and the runner must
// refuse to run any of them; without a fault every
// candidate passes, including an op whose outputs the statement writes only in part. Then the
// check of an output with no reference or no buffer, and the memory bound of a profile.
#include "test.h"
#include "num-host.h"

#include "rtgen.h"
#include "rtgen-int.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

// A GEMM (the packed path: its large-shape check is the random-vector one), ReLU (half its
// outputs are 0, so an element never written hides in a zero-filled buffer) and an op writing
// only part of its declared output.
static const char *const mm_spec = "def mm(float(37, 41) A, float(41, 43) B) -> (C) {\n"
                                   " C(m, n) +=! A(m, k) * B(k, n)\n}";
static const char *const relu_spec = "def relu2(float(33, 70) X) -> (Y) {\n"
                                     " Y(i, j) = max(X(i, j), 0) * 2\n}";
static const char *const part_spec = "def part(float(64, 9) X) -> (float(64, 9) Y) {\n"
                                     " Y(i, j) = X(i, j) * 2 where i in 0:40\n}";

typedef struct profiled {
    rt_arena *a;
    rt_op *op;
    rt_bindings *b;
    rt_cpu_report *rep;
} profiled;

// Profiles the top 2 of spec with fault f (run: profile at all); timeout_ms 0: the default.
static bool profile_for(const rt_device *dev, const char *spec, int64_t interp_max, rt_cpu_fault f,
                        bool run, double timeout_ms, profiled *p) {
    rt_err err = {0};
    rt_perf_result *perf = NULL;
    rt_perf_options popt = {.top_k = 2};
    rt_cpu_options copt = {.profile = run,
                           .budget_ms = 1,
                           .threads = 2,
                           .interp_max_points = interp_max,
                           .fault = f,
                           .timeout_ms = timeout_ms};
    p->a = rt_arena_new(1 << 20);
    p->rep = NULL;
    if (rt_spec_parse(p->a, spec, "inline.spec", NULL, 0, &p->op, &err) != RT_OK ||
        rt_perf_construct(p->a, p->op, dev, &popt, &perf, &err) != RT_OK ||
        rt_bindings_new(p->a, p->op, 7, &p->b, &err) != RT_OK ||
        rt_cpu_build_and_profile(p->a, p->op, dev, p->b, perf, &copt, &p->rep, &err) != RT_OK) {
        fprintf(stderr, "%.30s: %s\n", spec, err.msg);
        RT_EXPECT(0);
        rt_arena_free(p->a);
        return false;
    }
    return true;
}

static bool profile(const rt_device *dev, const char *spec, int64_t interp_max, rt_cpu_fault f,
                    bool run, profiled *p) {
    return profile_for(dev, spec, interp_max, f, run, 0, p);
}

// The runner refuses a report without a winner, and each candidate that did not pass.
static void expect_runner_refuses(profiled *p) {
    rt_err err = {0};
    rt_cpu_runner *rn = NULL;
    RT_EXPECT_EQ(rt_cpu_runner_new(p->rep, -1, p->b, &rn, &err), RT_ERR_BACKEND);
    RT_EXPECT(rn == NULL && strstr(err.msg, "has no winner to run") != NULL);
    for (int32_t i = 0; i < p->rep->n; i++) {
        rt_err_clear(&err);
        RT_EXPECT_EQ(rt_cpu_runner_new(p->rep, i, p->b, &rn, &err), RT_ERR_BACKEND);
        char want[128];
        snprintf(want, sizeof want,
                 "only a candidate whose check passed runs; candidate %d (%s) is wrong: ", (int)i,
                 p->rep->cands[i].name);
        RT_EXPECT(rn == NULL && strncmp(err.msg, want, strlen(want)) == 0);
    }
}

// Profiles spec on one check path with fault f: every candidate is wrong, with want in its
// reason. Returns the largest error of the check over the candidates.
static double expect_wrong(const rt_device *dev, const char *spec, int64_t interp_max,
                           const char *check, rt_cpu_fault f, const char *want) {
    profiled p;
    if (!profile(dev, spec, interp_max, f, true, &p))
        return 0;
    double worst = 0;
    RT_EXPECT(p.rep->profiled);
    RT_EXPECT_EQ(p.rep->winner, -1);
    for (int32_t i = 0; i < p.rep->n; i++) {
        const rt_cpu_cand *c = &p.rep->cands[i];
        RT_EXPECT_STR(c->check, check);
        RT_EXPECT_EQ(c->status, RT_CPU_CAND_WRONG);
        bool has = c->reason && strstr(c->reason, want);
        if (!has)
            fprintf(stderr, "%s, fault %d: reason \"%s\" lacks \"%s\"\n", check, (int)f,
                    c->reason ? c->reason : "(none)", want);
        RT_EXPECT(has);
        worst = fmax(worst, c->max_abs_err);
    }
    expect_runner_refuses(&p);
    rt_arena_free(p.a);
    return worst;
}

// Without a fault every candidate passes on that path.
static void expect_ok(const rt_device *dev, const char *spec, int64_t interp_max,
                      const char *check) {
    profiled p;
    if (!profile(dev, spec, interp_max, RT_CPU_FAULT_NONE, true, &p))
        return;
    RT_EXPECT(p.rep->winner >= 0);
    for (int32_t i = 0; i < p.rep->n; i++) {
        RT_EXPECT_STR(p.rep->cands[i].check, check);
        RT_EXPECT_EQ(p.rep->cands[i].status, RT_CPU_CAND_OK);
        RT_EXPECT(p.rep->cands[i].reason == NULL);
        RT_EXPECT(p.rep->cands[i].check_ns > 0); // the check's own time, reported
    }
    rt_arena_free(p.a);
}

// The faults every path must reject.
static void every_path_fault(const rt_device *dev, const char *spec, int64_t interp_max,
                             const char *check, const char *element_wrong) {
    expect_ok(dev, spec, interp_max, check);
    expect_wrong(dev, spec, interp_max, check, RT_CPU_FAULT_CORRUPT, element_wrong);
    expect_wrong(dev, spec, interp_max, check, RT_CPU_FAULT_NAN, element_wrong);
    expect_wrong(dev, spec, interp_max, check, RT_CPU_FAULT_UNWRITTEN, element_wrong);
    expect_wrong(dev, spec, interp_max, check, RT_CPU_FAULT_CLOBBER, "the kernel wrote into input");
}

static void test_paths(const rt_device *dev) {
    // Interpreter and naive kernel: the element is named; on ReLU the element left unwritten is
    // one whose right value is 0, which only the poison reveals.
    every_path_fault(dev, mm_spec, 0, "interpreter", "C[");
    every_path_fault(dev, relu_spec, 0, "interpreter", "Y[");
    every_path_fault(dev, relu_spec, 1, "naive-kernel", "Y[");
    expect_wrong(dev, relu_spec, 0, "interpreter", RT_CPU_FAULT_UNWRITTEN,
                 "(the poison it started with: never written?)");
    expect_wrong(dev, relu_spec, 1, "naive-kernel", RT_CPU_FAULT_UNWRITTEN,
                 "(the poison it started with: never written?)");
    // Random vectors: the row found off.
    every_path_fault(dev, mm_spec, 1, "random-vector", "C t differs from alpha A (B t)");
    // A wiped input with the output computed from it: consistent for a check that reads the
    // inputs back from the kernel's buffers; the check computes A (B t) from the bound inputs.
    double err = expect_wrong(dev, mm_spec, 1, "random-vector", RT_CPU_FAULT_ZERO,
                              "C t differs from alpha A (B t)");
    RT_EXPECT(err > 1.0);
    // An error the first vector cannot see: the second one does.
    expect_wrong(dev, mm_spec, 1, "random-vector", RT_CPU_FAULT_BLIND, "for random vector 2");
    // Elements the op does not write hold the poison in the reference too.
    expect_ok(dev, part_spec, 0, "interpreter");
    expect_ok(dev, part_spec, 1, "naive-kernel");
}

// A candidate that crashes or hangs in its checked run: its status, and where it struck.
static void test_crash_hang(const rt_device *dev) {
    for (int32_t hang = 0; hang < 2; hang++) {
        profiled p;
        if (!profile_for(dev, mm_spec, 0, hang ? RT_CPU_FAULT_HANG : RT_CPU_FAULT_CRASH, true,
                         hang ? 300 : 0, &p))
            continue;
        char want[128];
        if (hang)
            snprintf(want, sizeof want, "killed after 300 ms in its first (checked) run");
        else
            snprintf(want, sizeof want, "killed by signal %d (%s) in its first (checked) run",
                     SIGABRT, strsignal(SIGABRT));
        RT_EXPECT_EQ(p.rep->winner, -1);
        for (int32_t i = 0; i < p.rep->n; i++) {
            const rt_cpu_cand *c = &p.rep->cands[i];
            RT_EXPECT_EQ(c->status, hang ? RT_CPU_CAND_TIMEOUT : RT_CPU_CAND_CRASHED);
            RT_EXPECT_EQ(c->signal, hang ? 0 : SIGABRT);
            RT_EXPECT_STR(c->reason, want);
        }
        rt_err err = {0};
        rt_cpu_runner *rn = NULL;
        RT_EXPECT_EQ(rt_cpu_runner_new(p.rep, 0, p.b, &rn, &err), RT_ERR_BACKEND);
        RT_EXPECT(strstr(err.msg, want) != NULL);
        rt_arena_free(p.a);
    }
}

// A report that was not profiled has no winner, and its candidates do not run.
static void test_not_profiled(const rt_device *dev) {
    profiled p;
    if (!profile(dev, mm_spec, 0, RT_CPU_FAULT_NONE, false, &p))
        return;
    RT_EXPECT(!p.rep->profiled);
    rt_err err = {0};
    rt_cpu_runner *rn = NULL;
    RT_EXPECT_EQ(rt_cpu_runner_new(p.rep, -1, p.b, &rn, &err), RT_ERR_BACKEND);
    RT_EXPECT_STR(err.msg, "mm has no winner to run: its candidates were not profiled");
    rt_err_clear(&err);
    RT_EXPECT_EQ(rt_cpu_runner_new(p.rep, 0, p.b, &rn, &err), RT_ERR_BACKEND);
    char want[256];
    snprintf(want, sizeof want,
             "only a candidate whose check passed runs; candidate 0 (%s) is not profiled",
             p.rep->cands[0].name);
    RT_EXPECT_STR(err.msg, want);
    rt_err_clear(&err);
    RT_EXPECT_EQ(rt_cpu_run_winner(p.rep, p.b, &err), RT_ERR_BACKEND);
    rt_arena_free(p.a);
}

// An output the check cannot compare is a failure: no reference, or no buffer in the kernel.
static void test_uncompared_output(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_err err = {0};
    rt_op *op = NULL;
    rt_bindings *b = NULL;
    RT_EXPECT_EQ(rt_spec_parse(a, relu_spec, "inline.spec", NULL, 0, &op, &err), RT_OK);
    RT_EXPECT_EQ(rt_bindings_new(a, op, 1, &b, &err), RT_OK);
    RT_EXPECT_EQ(rt_bindings_prepare(b, &err), RT_OK);
    if (!op || !b->prepared) {
        rt_arena_free(a);
        return;
    }
    int32_t tx = rt_op_tensor_index(op, "X"), ty = rt_op_tensor_index(op, "Y");
    static float x[33 * 70], y[33 * 70];
    for (int32_t e = 0; e < 33 * 70; e++) {
        x[e] = (float)b->tensors[tx].data[e];
        y[e] = fmaxf(x[e], 0.0f) * 2;
    }
    rt_kir_buf bufs[3] = {
        {.name = "scratch"},
        {.name = "X", .role = RT_KIR_BUF_DATA, .type = RT_KIR_F32, .tensor = tx},
        {.name = "Y", .role = RT_KIR_BUF_DATA, .type = RT_KIR_F32, .tensor = ty, .written = true}};
    rt_kir_kernel k = {.name = "k", .n_bufs = 3, .bufs = bufs};
    void *args[3] = {NULL, x, y};
    size_t bytes[3] = {0, sizeof x, sizeof y};
    double *ref[2] = {NULL, NULL};
    rt_cpu_data d = {.n_bufs = 3, .args = args, .bytes = bytes, .ref = ref, .check = "interpreter"};
    rt_cpu_shared *sh = calloc(1, sizeof *sh);
    if (!sh) {
        rt_arena_free(a);
        return;
    }
    RT_EXPECT(!rt_cpu_check_candidate(op, &k, &d, b, sh));
    RT_EXPECT_STR(sh->why, "output Y has no reference to compare with");
    // With a reference it passes; without Y's buffer it cannot.
    static double yref[33 * 70];
    for (int32_t e = 0; e < 33 * 70; e++)
        yref[e] = (double)y[e];
    ref[ty] = yref;
    memset(sh, 0, sizeof *sh);
    RT_EXPECT(rt_cpu_check_candidate(op, &k, &d, b, sh));
    k.n_bufs = 2;
    memset(sh, 0, sizeof *sh);
    RT_EXPECT(!rt_cpu_check_candidate(op, &k, &d, b, sh));
    RT_EXPECT_STR(sh->why, "output Y is not among the kernel's buffers: nothing to compare");
    free(sh);
    rt_arena_free(a);
}

// A profile that cannot fit in memory is refused before anything is allocated, with the bytes
// it needs; rt_bindings_count agrees with the layouts a prepare builds (ragged included).
static void test_fits(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_err err = {0};
    rt_op *op = NULL;
    rt_bindings *b = NULL;
    rt_size_binding big[3] = {{"M", 100000}, {"N", 100000}, {"K", 100000}};
    RT_EXPECT_EQ(rt_spec_load(a, "examples/matmul.spec", big, 3, &op, &err), RT_OK);
    RT_EXPECT_EQ(rt_bindings_new(a, op, 1, &b, &err), RT_OK);
    if (!b) {
        rt_arena_free(a);
        return;
    }
    // A, B, C: 1e10 elements each; 8 + 4 bytes per input element, 8 + 3 x 4 per output
    // element, 8 for the reference: 520 GB.
    RT_EXPECT_EQ(rt_cpu_profile_fits(a, op, b, NULL, NULL, &err), RT_ERR_NOFIT);
    const char *want = "profiling matmul needs 520.0 GB (inputs, outputs and reference) but ";
    RT_EXPECT(strncmp(err.msg, want, strlen(want)) == 0);
    RT_EXPECT(strstr(err.msg, " are available; use --no-profile or shrink it with --set"));
    RT_EXPECT(!b->prepared);
    for (int32_t t = 0; t < op->n_tensors; t++)
        RT_EXPECT(b->tensors[t].data == NULL);

    rt_bindings *rb = NULL, *pb = NULL;
    RT_EXPECT_EQ(rt_spec_load(a, "examples/proj.spec", NULL, 0, &op, &err), RT_OK);
    RT_EXPECT_EQ(rt_bindings_new(a, op, 3, &rb, &err), RT_OK);
    RT_EXPECT_EQ(rt_bindings_new(a, op, 3, &pb, &err), RT_OK);
    double elems[8];
    RT_EXPECT(op->n_tensors <= 8);
    RT_EXPECT_EQ(rt_bindings_count(rb, elems, &err), RT_OK);
    RT_EXPECT_EQ(rt_bindings_prepare(pb, &err), RT_OK);
    for (int32_t t = 0; t < op->n_tensors && t < 8; t++)
        RT_EXPECT_EQ((int64_t)elems[t], pb->tensors[t].layout.elems);
    RT_EXPECT_EQ(rt_cpu_profile_fits(a, op, rb, NULL, NULL, &err), RT_OK);
    // Lengths and trees are fixed once counted.
    int32_t lens[32] = {0};
    RT_EXPECT_EQ(rt_bindings_set_lengths(rb, "len", lens, 32, &err), RT_ERR_USAGE);
    rt_bindings *tb = NULL;
    rt_tree_data *tree = NULL;
    RT_EXPECT_EQ(rt_spec_load(a, "examples/treernn.spec", NULL, 0, &op, &err), RT_OK);
    RT_EXPECT_EQ(rt_bindings_new(a, op, 3, &tb, &err), RT_OK);
    RT_EXPECT_EQ(rt_bindings_count(tb, elems, &err), RT_OK);
    RT_EXPECT_EQ(rt_tree_random(a, 7, 2, 1, &tree, &err), RT_OK);
    rt_err_clear(&err);
    RT_EXPECT_EQ(rt_bindings_set_tree(tb, "T", tree, &err), RT_ERR_USAGE);
    RT_EXPECT_STR(err.msg, "tree 'T' bound after the inputs were generated");
    rt_arena_free(a);
}

int main(void) {
    rt_device dev;
    if (!rt_num_host(&dev))
        return 77;
    test_uncompared_output();
    test_fits();
    test_not_profiled(&dev);
    test_crash_hang(&dev);
    test_paths(&dev);
    return rt_test_finish("test-cpu-check");
}
