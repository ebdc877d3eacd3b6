// test-run-loop: the run layer's one candidate loop (src/run/run.h). First its rules on hooks of
// the test's own: compile once (with the threads asked for), prepare once, measure in rank order
// with the best median so far, the winner the lowest median among the accepted (the better rank
// on a tie, never a rejected one however fast), nothing measured when prepare says so. Then the
// CPU path (rt_cpu_build_and_profile, host JIT) and the OpenCL path (rt_gpu_build_and_profile on
// PoCL) on the same operator with every candidate corrupted: both walk the same steps of the
// loop, report every candidate "wrong" with a reason, no winner, and the same JSON fields per
// candidate. Last, the OpenCL compile on 1 and on 4 threads gives the same report, in the same
// order. The PoCL parts are skipped (the rest still runs) when no OpenCL device matches
// devices/pocl-cpu.ini.
#include "test.h"
#include "num-host.h"

#include "rtgen.h"
#include "run-gpu.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// The loop on hooks of the test's own
// ---------------------------------------------------------------------------------------------

enum { N_FAKE = 5 };

enum { N_RUNOFF = 8 };

typedef struct fake_loop {
    char trace[512]; // every step, in order
    int32_t compile_threads;
    bool measure; // what prepare answers
    bool accepted[N_RUNOFF];
    bool duplicate[N_RUNOFF];
    double median_ns[N_RUNOFF];
    double best_seen[N_RUNOFF]; // best_ns each measure was given
    double runoff_ns[N_RUNOFF]; // what the run-off hook answers per candidate (0: not timed)
} fake_loop;

static void fake_note(fake_loop *f, const char *what) {
    size_t n = strlen(f->trace);
    snprintf(f->trace + n, sizeof f->trace - n, "%s%s", n ? " " : "", what);
}

static rt_status fake_compile(void *ctx, int32_t n, int32_t threads, rt_err *err) {
    fake_loop *f = ctx;
    (void)err;
    char s[32];
    snprintf(s, sizeof s, "compile:%d", (int)n);
    fake_note(f, s);
    f->compile_threads = threads;
    return RT_OK;
}

static rt_status fake_prepare(void *ctx, bool *measure, rt_err *err) {
    fake_loop *f = ctx;
    (void)err;
    fake_note(f, "prepare");
    *measure = f->measure;
    return RT_OK;
}

static rt_status fake_measure(void *ctx, int32_t i, double best_ns, rt_run_measure *m,
                              rt_err *err) {
    fake_loop *f = ctx;
    (void)err;
    char s[32];
    snprintf(s, sizeof s, "measure:%d", (int)i);
    fake_note(f, s);
    f->best_seen[i] = best_ns;
    *m = (rt_run_measure){f->accepted[i], f->median_ns[i], f->duplicate[i]};
    return RT_OK;
}

// Notes "runoff:" and the contenders as given (rank order), answers runoff_ns of each.
static rt_status fake_runoff(void *ctx, const int32_t *cands, int32_t n, double *median_ns,
                             rt_err *err) {
    fake_loop *f = ctx;
    (void)err;
    char s[64] = "runoff:";
    for (int32_t j = 0; j < n; j++) {
        size_t l = strlen(s);
        snprintf(s + l, sizeof s - l, "%s%d", j ? "," : "", (int)cands[j]);
        median_ns[j] = f->runoff_ns[cands[j]];
    }
    fake_note(f, s);
    return RT_OK;
}

static void test_loop_rules(void) {
    const rt_run_hooks hooks = {"fake", fake_compile, fake_prepare, fake_measure, NULL};
    // Rank 2 is rejected however fast; ranks 3 and 4 tie: the better rank (3) wins.
    fake_loop f = {.measure = true,
                   .accepted = {true, false, true, true, false},
                   .median_ns = {30, 10, 20, 20, 5}};
    rt_run_options o = {.compile_threads = 3};
    int32_t winner = 99;
    rt_err err = {0};
    RT_EXPECT_EQ(rt_run_candidates(&hooks, &f, N_FAKE, &o, &winner, &err), RT_OK);
    RT_EXPECT_EQ(winner, 2);
    RT_EXPECT_STR(f.trace, "compile:5 prepare measure:0 measure:1 measure:2 measure:3 measure:4");
    RT_EXPECT_EQ(f.compile_threads, 3);
    RT_EXPECT(isinf(f.best_seen[0]));
    RT_EXPECT(f.best_seen[1] == 30 && f.best_seen[2] == 30 && f.best_seen[3] == 20 &&
              f.best_seen[4] == 20);
    // Default threads: 2. Nothing accepted: no winner.
    fake_loop none = {.measure = true, .median_ns = {1, 2, 3, 4, 5}};
    RT_EXPECT_EQ(rt_run_candidates(&hooks, &none, N_FAKE, NULL, &winner, &err), RT_OK);
    RT_EXPECT_EQ(winner, -1);
    RT_EXPECT_EQ(none.compile_threads, 2);
    // prepare says nothing runs: no measure, no winner.
    fake_loop off = {.measure = false, .accepted = {true}, .median_ns = {1}};
    RT_EXPECT_EQ(rt_run_candidates(&hooks, &off, N_FAKE, NULL, &winner, &err), RT_OK);
    RT_EXPECT_EQ(winner, -1);
    RT_EXPECT_STR(off.trace, "compile:5 prepare");
    // Compile only (no measure hook): prepare is not called either.
    const rt_run_hooks compile_only = {"fake", fake_compile, fake_prepare, NULL, NULL};
    fake_loop co = {.measure = true};
    RT_EXPECT_EQ(rt_run_candidates(&compile_only, &co, N_FAKE, NULL, &winner, &err), RT_OK);
    RT_EXPECT_STR(co.trace, "compile:5");
    RT_EXPECT_EQ(rt_run_candidates(&hooks, &co, -1, NULL, &winner, &err), RT_ERR_USAGE);
}

// Notes the loop's whole-batch steps other than compile and prepare ("step:runoff").
static void on_step_fake(void *obs, const char *step, int32_t i) {
    char s[32];
    if (i < 0 && strcmp(step, "compile") != 0 && strcmp(step, "prepare") != 0) {
        snprintf(s, sizeof s, "step:%s", step);
        fake_note(obs, s);
    }
}

// The run-off: the accepted candidates within 30% of the best median, at most the 4 closest,
// no duplicate of an earlier one's code, are timed again in rank order; its lowest median wins
// (the better rank on a tie), one it did not time (0) cannot; fewer than two: no run-off.
static void test_runoff_rules(void) {
    const rt_run_hooks hooks = {"fake", fake_compile, fake_prepare, fake_measure, fake_runoff};
    rt_err err = {0};
    int32_t winner = 99;
    rt_run_options o = {.on_step = on_step_fake, .obs = NULL};
    // Best 100 (rank 1). Within 130: ranks 0 (120), 1, 3 (125), 5 (110), 6 (101), 7 (100, a
    // duplicate); rank 2 (131) is out, rank 4 rejected. The 4 closest: 1, 6, 5, 0 -> rank order.
    fake_loop f = {.measure = true,
                   .accepted = {true, true, true, true, false, true, true, true},
                   .duplicate = {false, false, false, false, false, false, false, true},
                   .median_ns = {120, 100, 131, 125, 50, 110, 101, 100},
                   .runoff_ns = {90, 95, 1, 1, 1, 90, 0, 1}};
    o.obs = &f;
    RT_EXPECT_EQ(rt_run_candidates(&hooks, &f, N_RUNOFF, &o, &winner, &err), RT_OK);
    RT_EXPECT_STR(f.trace, "compile:8 prepare measure:0 measure:1 measure:2 measure:3 measure:4 "
                           "measure:5 measure:6 measure:7 step:runoff runoff:0,1,5,6");
    RT_EXPECT_EQ(winner, 0); // 90 ties with rank 5: the better rank; rank 6 was not timed
    // One contender within the margin: no run-off, the first medians decide.
    fake_loop one = {.measure = true,
                     .accepted = {true, true, true},
                     .median_ns = {200, 100, 140},
                     .runoff_ns = {1, 1, 1}};
    o.obs = &one;
    RT_EXPECT_EQ(rt_run_candidates(&hooks, &one, 3, &o, &winner, &err), RT_OK);
    RT_EXPECT_EQ(winner, 1);
    RT_EXPECT(strstr(one.trace, "runoff") == NULL);
    // A run-off that timed none (every median 0): the first medians decide.
    fake_loop none = {.measure = true, .accepted = {true, true}, .median_ns = {105, 100}};
    o.obs = &none;
    RT_EXPECT_EQ(rt_run_candidates(&hooks, &none, 2, &o, &winner, &err), RT_OK);
    RT_EXPECT_STR(none.trace, "compile:2 prepare measure:0 measure:1 step:runoff runoff:0,1");
    RT_EXPECT_EQ(winner, 1);
}

// ---------------------------------------------------------------------------------------------
// The CPU and the OpenCL path through the same loop
// ---------------------------------------------------------------------------------------------

static const char *const spec = "def relu2(float(33, 70) X) -> (Y) {\n"
                                " Y(i, j) = max(X(i, j), 0) * 2\n}";

static void on_step(void *obs, const char *step, int32_t i) {
    char s[32];
    if (i >= 0)
        snprintf(s, sizeof s, "%s:%d", step, (int)i);
    else
        snprintf(s, sizeof s, "%s", step);
    fake_note(obs, s);
}

// relu2 parsed, its top 3 constructed for dev and its data bound; false (the error printed
// after what) when a step failed.
static bool relu2_setup(rt_arena *a, const rt_device *dev, const char *what, rt_op **op,
                        rt_perf_result **perf, rt_bindings **b) {
    rt_err err = {0};
    rt_perf_options popt = {.top_k = 3};
    if (rt_spec_parse(a, spec, "inline.spec", NULL, 0, op, &err) != RT_OK ||
        rt_perf_construct(a, *op, dev, &popt, perf, &err) != RT_OK ||
        rt_bindings_new(a, *op, 1, b, &err) != RT_OK) {
        fprintf(stderr, "%s: %s\n", what, err.msg);
        RT_EXPECT(0);
        return false;
    }
    return true;
}

// relu2's top 3 built and profiled on the host with copt (its steps noted in copt->obs).
static bool cpu_report(rt_arena *a, const rt_device *host, const rt_cpu_options *copt,
                       const char *what, rt_cpu_report **rep) {
    rt_err err = {0};
    rt_op *op;
    rt_perf_result *perf;
    rt_bindings *b;
    if (!relu2_setup(a, host, what, &op, &perf, &b))
        return false;
    if (rt_cpu_build_and_profile(a, op, host, b, perf, copt, rep, &err) != RT_OK) {
        fprintf(stderr, "%s: %s\n", what, err.msg);
        RT_EXPECT(0);
        return false;
    }
    return true;
}

// The loop's steps for n candidates that are all measured.
static const char *expected_steps(rt_arena *a, int32_t n) {
    rt_buf b;
    rt_buf_init(&b, a);
    rt_buf_printf(&b, "compile prepare");
    for (int32_t i = 0; i < n; i++)
        rt_buf_printf(&b, " measure:%d", (int)i);
    return b.data;
}

// Every candidate object of a report's JSON array: status "wrong", not the winner, a reason
// naming the output, the rank and the predicted time.
static void expect_all_wrong_json(json_t *arr, int32_t n, const char *what) {
    RT_EXPECT(json_is_array(arr) && (int32_t)json_array_size(arr) == n);
    for (size_t i = 0; arr && i < json_array_size(arr); i++) {
        json_t *o = json_array_get(arr, i);
        RT_EXPECT_STR(json_string_value(json_object_get(o, "status")), "wrong");
        RT_EXPECT(json_is_false(json_object_get(o, "winner")));
        RT_EXPECT(json_is_integer(json_object_get(o, "rank")));
        RT_EXPECT(json_is_real(json_object_get(o, "predicted_ns")));
        const char *why = json_string_value(json_object_get(o, "reason"));
        RT_EXPECT(why && strstr(why, "Y") != NULL);
        if (!why || !strstr(why, "Y"))
            fprintf(stderr, "%s candidate %d: reason %s\n", what, (int)i, why ? why : "(none)");
    }
}

static void test_cpu_path(rt_arena *a, const rt_device *host) {
    fake_loop steps = {0};
    rt_cpu_options copt = {.profile = true,
                           .budget_ms = 1,
                           .threads = 2,
                           .fault = RT_CPU_FAULT_CORRUPT,
                           .on_step = on_step,
                           .obs = &steps};
    rt_cpu_report *rep = NULL;
    if (!cpu_report(a, host, &copt, "cpu", &rep))
        return;
    printf("cpu steps:    %s\n", steps.trace);
    RT_EXPECT_STR(steps.trace, expected_steps(a, rep->n));
    RT_EXPECT_EQ(rep->winner, -1);
    for (int32_t i = 0; i < rep->n; i++)
        RT_EXPECT_STR(rt_cpu_cand_status_name(rep->cands[i].status), "wrong");
    json_t *arr = rt_cpu_report_to_json(rep);
    expect_all_wrong_json(arr, rep->n, "cpu");
    json_decref(arr);
}

// The CPU run-off on real kernels (relu2's top 3, all correct): when it ran (two candidates
// within the margin, nearly always for three variants of an elementwise op), its contenders are
// correct, unique, in rank order, timed over all turns, the winner is the one of them with the
// lowest run-off median, and exactly they carry runoff_median_ns in the JSON.
static void test_cpu_runoff(rt_arena *a, const rt_device *host) {
    fake_loop steps = {0};
    rt_cpu_options copt = {
        .profile = true, .budget_ms = 2, .threads = 2, .on_step = on_step, .obs = &steps};
    rt_cpu_report *rep = NULL;
    if (!cpu_report(a, host, &copt, "cpu run-off", &rep))
        return;
    printf("cpu run-off:  %d contenders, %d turns; steps %s\n", (int)rep->n_runoff,
           (int)rep->runoff_turns, steps.trace);
    RT_EXPECT(rep->winner >= 0);
    RT_EXPECT((strstr(steps.trace, " runoff") != NULL) == (rep->n_runoff > 0));
    if (rep->n_runoff > 0) {
        RT_EXPECT(rep->n_runoff >= 2 && rep->n_runoff <= 4);
        RT_EXPECT_EQ(rep->runoff_turns, 5);
        double low = (double)INFINITY;
        int32_t fastest = -1;
        for (int32_t j = 0; j < rep->n_runoff; j++) {
            const rt_cpu_cand *c = &rep->cands[rep->runoff[j]];
            RT_EXPECT(j == 0 || rep->runoff[j] > rep->runoff[j - 1]);
            RT_EXPECT(c->status == RT_CPU_CAND_OK && c->same_as < 0 && c->runoff_ns > 0);
            if (c->runoff_ns < low)
                low = c->runoff_ns, fastest = rep->runoff[j];
        }
        RT_EXPECT_EQ(rep->winner, fastest);
    }
    json_t *arr = rt_cpu_report_to_json(rep);
    for (int32_t i = 0; i < rep->n; i++) {
        bool in = false;
        for (int32_t j = 0; j < rep->n_runoff; j++)
            in = in || rep->runoff[j] == i;
        json_t *v = json_object_get(json_array_get(arr, (size_t)i), "runoff_median_ns");
        RT_EXPECT(in ? json_real_value(v) == rep->cands[i].runoff_ns : v == NULL);
    }
    json_decref(arr);
}

// rtgen's OpenCL path for the top 3 on PoCL: profiled with every candidate corrupted, or (with
// profile false) compiled on `threads` threads; the JSON report as text in *json.
static bool ocl_report(rt_arena *a, const rt_device *ocl, bool profile, int32_t threads,
                       fake_loop *steps, rt_gpu_report *g, const char **json) {
    rt_err err = {0};
    rt_op *op;
    rt_perf_result *perf;
    rt_bindings *b;
    if (!relu2_setup(a, ocl, "opencl", &op, &perf, &b))
        return false;
    rt_gpu_report_options o = {.target = RT_GPU_TARGET_OPENCL,
                               .profile = profile,
                               .b = b,
                               .test_fault = profile ? "corrupt" : NULL,
                               .compile_threads = threads,
                               .on_step = on_step,
                               .obs = steps};
    if (rt_gpu_build_and_profile(a, ocl, perf, &o, g, &err) != RT_OK) {
        fprintf(stderr, "opencl: %s\n%s\n", err.msg, err.log ? err.log : "");
        RT_EXPECT(0);
        return false;
    }
    json_t *arr = rt_gpu_report_to_json(g, perf);
    char *text = json_dumps(arr, JSON_INDENT(1));
    *json = text ? rt_arena_strdup(a, text) : NULL;
    free(text);
    json_decref(arr);
    return *json != NULL;
}

static void test_opencl_path(rt_arena *a, const rt_device *ocl) {
    fake_loop steps = {0};
    rt_gpu_report g;
    const char *json;
    if (!ocl_report(a, ocl, true, 2, &steps, &g, &json))
        return;
    printf("opencl steps: %s\n", steps.trace);
    RT_EXPECT_STR(steps.trace, expected_steps(a, g.n));
    RT_EXPECT(g.not_profiled == NULL);
    RT_EXPECT_EQ(g.winner, -1);
    for (int32_t i = 0; i < g.n; i++)
        RT_EXPECT_STR(g.status[i], "wrong");
    json_t *arr = json_loads(json, 0, NULL);
    expect_all_wrong_json(arr, g.n, "opencl");
    json_decref(arr);

    // Compiled on 1 and on 4 threads: the same report, in the same order.
    fake_loop s1 = {0}, s4 = {0};
    rt_gpu_report g1, g4;
    const char *j1, *j4;
    if (!ocl_report(a, ocl, false, 1, &s1, &g1, &j1) ||
        !ocl_report(a, ocl, false, 4, &s4, &g4, &j4))
        return;
    RT_EXPECT_STR(s1.trace, "compile prepare"); // prepare: not profiled (--no-profile)
    RT_EXPECT_STR(g1.not_profiled, "--no-profile");
    RT_EXPECT_EQ(g1.n, 3);
    RT_EXPECT_STR(j1, j4);
    for (int32_t i = 0; i < g1.n && i < g4.n; i++) {
        RT_EXPECT_EQ(g1.cands[i].rank, i + 1);
        RT_EXPECT_EQ(g4.cands[i].rank, i + 1);
        RT_EXPECT_STR(g1.status[i], "compiled");
        RT_EXPECT_STR(g1.cands[i].source, g4.cands[i].source);
        for (int32_t p = 0; p < g1.cands[i].kernel->n_phases; p++)
            RT_EXPECT_STR(g1.cands[i].bins[p]->kernel_name, g4.cands[i].bins[p]->kernel_name);
    }
}

int main(void) {
    test_loop_rules();
    test_runoff_rules();
    rt_arena *a = rt_arena_new(1 << 20);
    rt_device host;
    if (rt_num_host(&host)) {
        test_cpu_path(a, &host);
        test_cpu_runoff(a, &host);
    } else
        RT_EXPECT(0);
    rt_device ocl;
    rt_err err = {0};
    rt_gpu_runtime *rt = NULL;
    RT_EXPECT_EQ(rt_hal_load_device("devices/pocl-cpu.ini", &ocl, &err), RT_OK);
    if (rt_gpu_runtime_open(a, &ocl, &rt, &err) == RT_OK)
        test_opencl_path(a, &ocl);
    else if (rt_gpu_err_is_absent(&err))
        printf("test-run-loop: no OpenCL device (%s): the OpenCL path is not run\n", err.msg);
    else
        RT_EXPECT(0);
    rt_arena_free(a);
    return rt_test_finish("test-run-loop");
}
