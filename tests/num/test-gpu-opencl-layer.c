// test-gpu-opencl-layer.c: layers of several defs on GPU devices (layer.h rt_layer_gpu_run).
// On PoCL (devices/pocl-cpu.ini): every example layer, shrunk with --set-style size bindings,
// each def profiled as a single def (its top-1 checked and timed on one batch), then the layer
// run on device buffers for ragged batches holding a length 1 and the maximum, and for an
// all-equal batch: the run's check against the interpreter passes, the prelude is one buffer
// shared by the kernels, a corrupted output fails the check, and what a layer run refuses ('+=',
// a def without a winner) is refused with its message. With the argument "compile": the ffn
// layer emitted and compiled for v100, a100, h100 (NVRTC) and mi50 (hipRTC) with no spills
// (skipped where rtgen was built without the compiler).
#include "test.h"

#include "layer.h"
#include "pocl-devices.h"

#include <stdio.h>
#include <string.h>

typedef struct lcase {
    const char *spec;        // examples/layers/<spec>.spec
    rt_size_binding sets[6]; // the shrunk sizes (B first)
    int32_t n_sets;
    int32_t min_prelude; // distinct start arrays the layer needs at least
} lcase;

static const lcase cases[] = {
    {"ffn", {{"B", 5}, {"D", 16}, {"F", 24}}, 3, 1},
    {"cora_encoder", {{"B", 3}, {"M", 16}, {"H", 2}, {"D", 8}, {"F", 32}}, 5, 3},
    {"cora_encoder_causal", {{"B", 3}, {"M", 16}, {"H", 2}, {"D", 8}, {"F", 32}}, 5, 3},
    {"bert_encoder", {{"B", 3}, {"M", 24}, {"H", 3}, {"D", 8}, {"F", 48}}, 5, 3},
    {"bert_encoder_causal", {{"B", 3}, {"M", 24}, {"H", 3}, {"D", 8}, {"F", 48}}, 5, 3},
};

static void print_err(const char *what, const rt_err *err) {
    char msg[1024];
    rt_err_format(err, "test", true, msg, sizeof msg);
    fprintf(stderr, "%s: %s\n", what, msg);
}

static rt_status bind(rt_arena *a, const rt_layer *l, const int32_t *len, int32_t n,
                      rt_layer_bindings **out, rt_err *err) {
    RT_TRY(rt_layer_bindings_new(a, l, 5, out, err));
    RT_TRY(rt_bindings_set_lengths((*out)->ops[0], "len", len, n, err));
    return rt_layer_bindings_prepare(*out, err);
}

// Every def of l constructed for dev, its top-1 emitted, compiled and (profile) checked and
// timed on lb by the single-def GPU path.
static rt_status profile_defs(rt_arena *a, const rt_layer *l, const rt_device *dev,
                              rt_layer_bindings *lb, bool profile, rt_gpu_report **g, rt_err *err) {
    rt_gpu_target t;
    if (!rt_gpu_target_of_device(dev, &t))
        return rt_fail(err, RT_ERR_DEVICE, RT_NOLOC, "not a GPU device");
    for (int32_t k = 0; k < l->n_ops; k++) {
        rt_perf_result *res = NULL;
        rt_perf_options popt = {.top_k = 1};
        RT_TRY(rt_perf_construct(a, l->ops[k], dev, &popt, &res, err));
        RT_ALLOC(a, g[k], 1, err);
        rt_gpu_report_options o = {
            .target = t, .profile = profile, .b = lb->ops[k], .compile_threads = 2};
        RT_TRY(rt_gpu_build_and_profile(a, dev, res, &o, g[k], err));
    }
    return RT_OK;
}

static int n_runs;

// One batch of lengths: the layer run, checked against the interpreter.
static void run_batch(rt_arena *a, rt_gpu_runtime *rt, const lcase *c, const rt_layer *l,
                      rt_gpu_report *const *g, const int32_t *len) {
    rt_err err = {0};
    rt_layer_bindings *lb = NULL;
    rt_layer_report *r = NULL;
    rt_layer_options opt = {.budget_ms = 1, .seed = 5, .check = true};
    rt_status st = bind(a, l, len, (int32_t)c->sets[0].value, &lb, &err);
    if (st == RT_OK)
        st = rt_layer_gpu_run(a, l, rt, (const rt_gpu_report *const *)g, lb, &opt, &r, &err);
    if (st != RT_OK)
        print_err(c->spec, &err);
    RT_EXPECT_EQ(st, RT_OK);
    if (st != RT_OK)
        return;
    n_runs++;
    printf("%-20s lengths %d %d %d ...: %s, %d prelude arrays (%lld bytes) for %d kernel "
           "buffers, layer %.1f us (%d reps)\n",
           c->spec, (int)len[0], (int)len[1], (int)len[2], r->correct ? "ok" : r->why,
           (int)r->n_prelude, (long long)r->prelude_bytes, (int)r->n_start_bufs,
           r->median_ns * 1e-3, (int)r->reps);
    for (int32_t k = 0; k < r->n_ops; k++)
        printf("    %-10s %-40s alone %10.1f us  in layer %10.1f us  max err %.2e\n",
               r->ops[k].op->name, r->ops[k].kernel, r->ops[k].profiled_ns * 1e-3,
               r->ops[k].layer_median_ns * 1e-3, r->ops[k].max_abs_err);
    RT_EXPECT(r->checked && r->correct && r->check && !strcmp(r->check, "interpreter"));
    for (int32_t k = 0; k < r->n_ops; k++)
        RT_EXPECT(r->ops[k].correct && r->ops[k].layer_median_ns > 0);
    RT_EXPECT(r->n_prelude >= c->min_prelude && r->n_start_bufs > r->n_prelude);
    RT_EXPECT(r->prelude_bytes >= (int64_t)(r->n_prelude * RT_GPU_VIEW_ALIGN_BYTES));
    RT_EXPECT(r->reps >= 5 && r->median_ns > 0 && r->n_launches >= l->n_ops);
    // A corrupted output of the last def fails the check, named.
    if (len[0] != 1)
        return;
    opt.test_corrupt = true;
    st = rt_layer_gpu_run(a, l, rt, (const rt_gpu_report *const *)g, lb, &opt, &r, &err);
    RT_EXPECT_EQ(st, RT_OK);
    char want[128];
    snprintf(want, sizeof want, "def %s: output ", l->ops[l->n_ops - 1]->name);
    RT_EXPECT(st == RT_OK && r->checked && !r->correct && r->why && strstr(r->why, want) &&
              strstr(r->why, "differs from the interpreter's"));
}

// A runtime of its own, in the case's arena: the runtime keeps its kernels keyed by binary, and
// the binaries live in that arena.
static void layer_case(const rt_device *ocl, const lcase *c) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_gpu_runtime *rt = NULL;
    char path[256];
    snprintf(path, sizeof path, "examples/layers/%s.spec", c->spec);
    rt_layer *l = NULL;
    rt_layer_bindings *lb = NULL;
    rt_gpu_report *g[16] = {0};
    int32_t n = (int32_t)c->sets[0].value;
    // Profiled on the ragged batch (1 and the maximum); run on it, on an all-equal one and (ffn)
    // on one whose longest sequence comes first.
    int32_t ragged[8] = {1, 9, 4, 7, 2}, equal[8] = {6, 6, 6, 6, 6}, desc[8] = {9, 1, 1, 3, 8};
    int32_t *prof = ragged;
    rt_status st = rt_gpu_runtime_open(a, ocl, &rt, &err);
    if (st == RT_OK)
        st = rt_spec_load_layer(a, path, c->sets, c->n_sets, &l, &err);
    if (st == RT_OK)
        st = bind(a, l, prof, n, &lb, &err);
    if (st == RT_OK)
        st = profile_defs(a, l, ocl, lb, true, g, &err);
    if (st != RT_OK)
        print_err(c->spec, &err);
    RT_EXPECT_EQ(st, RT_OK);
    if (st == RT_OK) {
        for (int32_t k = 0; k < l->n_ops; k++)
            RT_EXPECT(g[k]->winner >= 0);
        run_batch(a, rt, c, l, g, ragged);
        run_batch(a, rt, c, l, g, equal);
        if (c == &cases[0])
            run_batch(a, rt, c, l, g, desc);
    }
    rt_arena_free(a);
}

// What a layer run refuses: a def accumulating into its caller's values, a def without a winner.
static void refusals(rt_gpu_runtime *rt) {
    static const char *spec = "size B = 3\nsize D = 4\n"
                              "def f(int32(B) len, float(b:B, len(b), D) X) -> (Y) {\n"
                              "    Y(b, i, n) = X(b, i, n) * 2\n}\n"
                              "def g(int32(B) len, float(b:B, len(b), D) Y) -> (Z) {\n"
                              "    Z(b, i, n) += Y(b, i, n)\n}\n";
    rt_arena *a = rt_arena_new(1 << 16);
    rt_err err = {0};
    rt_layer *l = NULL;
    rt_layer_bindings *lb = NULL;
    rt_layer_report *r = NULL;
    int32_t len[3] = {1, 2, 3};
    rt_gpu_report none[2] = {{.winner = -1, .not_profiled = "--no-profile"},
                             {.winner = -1, .not_profiled = "--no-profile"}};
    const rt_gpu_report *g[2] = {&none[0], &none[1]};
    rt_layer_options opt = {.check = true};
    RT_EXPECT_EQ(rt_spec_parse_layer(a, spec, "acc.spec", NULL, 0, &l, &err), RT_OK);
    RT_EXPECT_EQ(bind(a, l, len, 3, &lb, &err), RT_OK);
    RT_EXPECT_EQ(rt_layer_gpu_run(a, l, rt, g, lb, &opt, &r, &err), RT_ERR_BACKEND);
    char msg[1024];
    rt_err_format(&err, "rtgen", false, msg, sizeof msg);
    RT_EXPECT_STR(msg, "acc.spec:7:5: error: def g accumulates into the caller's values "
                       "('+='), which a layer run does not support");
    l->n_ops = 1; // the first def alone: no winner
    rt_err_clear(&err);
    RT_EXPECT_EQ(rt_layer_gpu_run(a, l, rt, g, lb, &opt, &r, &err), RT_ERR_BACKEND);
    RT_EXPECT_STR(err.msg, "def f of layer acc has no winner to run: --no-profile");
    rt_arena_free(a);
}

// The ffn layer emitted and compiled for the CUDA and HIP devices: every def's top-1 compiled
// with no spills; the layer is not run (no device here), and says so.
static int compile_only(void) {
    static const char *devs[] = {"v100", "a100", "h100", "mi50"};
    int compiled = 0;
    for (size_t d = 0; d < sizeof devs / sizeof *devs; d++)
        for (size_t ci = 0; ci < 2; ci++) { // ffn, and cora_encoder's ragged defs (work lists)
            rt_arena *a = rt_arena_new(1 << 20);
            rt_err err = {0};
            rt_device dev;
            char path[128], spec[128];
            snprintf(path, sizeof path, "devices/%s.ini", devs[d]);
            snprintf(spec, sizeof spec, "examples/layers/%s.spec", cases[ci].spec);
            rt_layer *l = NULL;
            rt_layer_bindings *lb = NULL;
            rt_gpu_report *g[16] = {0};
            int32_t len[5] = {1, 9, 4, 7, 2};
            rt_status st = rt_hal_load_device(path, &dev, &err);
            if (st == RT_OK)
                st = rt_spec_load_layer(a, spec, cases[ci].sets, cases[ci].n_sets, &l, &err);
            if (st == RT_OK && l->n_ops > 16)
                st = rt_fail(&err, RT_ERR_USAGE, RT_NOLOC, "more than 16 defs");
            if (st == RT_OK)
                st = bind(a, l, len, (int32_t)cases[ci].sets[0].value, &lb, &err);
            if (st == RT_OK)
                st = profile_defs(a, l, &dev, lb, false, g, &err);
            if (st != RT_OK)
                print_err(devs[d], &err);
            RT_EXPECT_EQ(st, RT_OK);
            for (int32_t k = 0; st == RT_OK && k < l->n_ops; k++) {
                const rt_gpu_candidate *c = &g[k]->cands[0];
                if (!c->compiled && strstr(c->compile_err.msg, "not built with")) {
                    printf("%-5s %-10s not compiled: %s\n", devs[d], l->ops[k]->name,
                           c->compile_err.msg);
                    continue;
                }
                bool work = false;
                for (int32_t p = 0; p < c->kernel->n_phases; p++)
                    work = work || c->kernel->phases[p].work;
                printf("%-5s %-10s %-6s regs %3d, spill %lld bytes%s%s\n", devs[d], l->ops[k]->name,
                       c->compiled_arch, (int)c->regs, (long long)c->spill_bytes,
                       work ? ", work list" : "", c->compiled ? "" : "  NOT COMPILED");
                RT_EXPECT(c->compiled && c->spill_bytes == 0 && g[k]->winner < 0);
                RT_EXPECT(g[k]->not_profiled && strstr(g[k]->not_profiled, "--no-profile"));
                compiled += c->compiled;
            }
            rt_arena_free(a);
        }
    if (compiled == 0) {
        printf("skip: no GPU compiler built in\n");
        return 77;
    }
    return rt_test_finish("test-gpu-opencl-layer");
}

// No argument: ffn, cora_encoder_causal and bert_encoder (every kind of def of the example
// layers: projections, masked and unmasked scores and softmax, attention, layernorms, FFN; the
// other two differ from these only in sizes or the mask), which CI's time allows; "all": every
// example layer; "compile": compile_only.
int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "compile"))
        return compile_only();
    bool all = argc > 1 && !strcmp(argv[1], "all");
    rt_device ocl, devs[2];
    rt_arena *a = rt_arena_new(1 << 16);
    rt_gpu_runtime *rt = NULL;
    int rc = pocl_open(a, &ocl, devs, &rt);
    if (rc != 0) {
        rt_arena_free(a);
        return rc;
    }
    int32_t n_cases = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (all || i == 0 || !strcmp(cases[i].spec, "cora_encoder_causal") ||
            !strcmp(cases[i].spec, "bert_encoder")) {
            layer_case(&ocl, &cases[i]);
            n_cases++;
        }
    refusals(rt);
    RT_EXPECT(n_runs == 2 * n_cases + 1);
    rt_arena_free(a);
    return rt_test_finish("test-gpu-opencl-layer");
}
