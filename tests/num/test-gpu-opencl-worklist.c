// test-gpu-opencl-worklist.c: ragged contractions that run a work list (gpu-plan.h work_list:
// the non-empty blocks, longest first, listed on the host) on PoCL against the reference
// interpreter — qkt, causal masked_qkt, attn_v (a ragged reduction) and vgemm (three length tensors), the top-1
// v100 tile programs — on lengths with 0, 1, primes, all equal, and one long among many short;
// and qkt on the padded grid (rt_gpu_lower_options.padded_grid). Each run prints the blocks
// launched (both forms for qkt).
//   test-gpu-opencl-worklist             the checks
//   test-gpu-opencl-worklist measure H DIR   qkt (B 32, H heads, D 64) on batches sampled from
//                                            DIR/squad.hist and DIR/race.hist: blocks and
//                                            kernel times of both forms in the same run
#include "test.h"

#include "run-gpu.h"
#include "pocl-devices.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Blocks the launches of candidate c's phases have on bindings b.
static int64_t launched_blocks(const rt_gpu_candidate *c, rt_bindings *b) {
    int64_t n = 0;
    rt_err err = {0};
    for (int32_t p = 0; p < c->kernel->n_phases; p++) {
        rt_gpu_launch L;
        RT_EXPECT_EQ(rt_gpu_phase_launch(c->kernel, p, b, &L, &err), RT_OK);
        n += (int64_t)L.grid[0] * L.grid[1] * L.grid[2];
    }
    return n;
}

// Compiles every phase of c once for the runs that follow.
static rt_status compile(rt_gpu_runtime *rt, const rt_device *ocl, rt_gpu_candidate *c,
                         rt_err *err) {
    rt_arena *a = rt_gpu_runtime_arena(rt);
    RT_ALLOC(a, c->bins, c->kernel->n_phases, err);
    for (int32_t p = 0; p < c->kernel->n_phases; p++) {
        rt_gpu_compile_options o = {.threads_per_block = c->kernel->phases[p].threads};
        RT_TRY(rt_gpu_compile(a, ocl, c->source, c->kernel->phases[p].kernel_name, &o, &c->bins[p],
                              err));
    }
    c->compiled = true;
    return RT_OK;
}

static bool has_work(const rt_gpu_candidate *c) {
    for (int32_t p = 0; p < c->kernel->n_phases; p++)
        if (c->kernel->phases[p].work)
            return true;
    return false;
}

// Binds every length tensor of op to lens (n values) or, with hist, to a sample of it.
static rt_status bind(rt_arena *a, const rt_op *op, const int32_t *lens, int64_t n,
                      const char *hist, rt_bindings **b, rt_err *err) {
    RT_TRY(rt_bindings_new(a, op, 3, b, err));
    for (int32_t t = 0; t < op->n_tensors; t++)
        if (op->tensors[t].is_length)
            RT_TRY(hist ? rt_bindings_load_lengths(*b, op->tensors[t].name, hist, 0, err)
                        : rt_bindings_set_lengths(*b, op->tensors[t].name, lens, n, err));
    return rt_bindings_prepare(*b, err);
}

static int n_checked;

static void check(rt_gpu_runtime *rt, const rt_device *ocl, const rt_device *dev, const char *spec,
                  const char *sets_text, int nf) {
    static const int32_t zero[] = {0, 0, 0, 0, 0, 0, 0};
    static const int32_t ones[] = {1, 0, 1, 1, 0, 1, 1};
    static const int32_t primes[] = {2, 3, 5, 7, 11, 37, 41};
    static const int32_t equal[] = {23, 23, 23, 23, 23, 23, 23};
    static const int32_t skew[] = {3, 1, 2, 97, 1, 2, 3};
    static const struct {
        const char *name;
        const int32_t *len;
    } sets[] = {
        {"zero", zero}, {"ones", ones}, {"primes", primes}, {"equal", equal}, {"one long", skew}};
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_size_binding sz[4];
    int32_t nsz = 0;
    char *text = rt_arena_strdup(a, sets_text);
    for (char *tok = strtok(text, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        *eq = 0;
        sz[nsz++] = (rt_size_binding){.name = tok, .value = atoll(eq + 1)};
    }
    char path[128];
    snprintf(path, sizeof path, "examples/%s.spec", spec);
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    rt_perf_options popt = {.top_k = 1};
    RT_EXPECT_EQ(rt_spec_load(a, path, sz, nsz, &op, &err), RT_OK);
    RT_EXPECT_EQ(rt_perf_construct(a, op, dev, &popt, &perf, &err), RT_OK);
    rt_gpu_candidate c[2];
    rt_gpu_lower_options padded = {.rank = 1, .padded_grid = true};
    RT_EXPECT_EQ(rt_gpu_emit_candidate(a, perf, 1, RT_GPU_TARGET_OPENCL, NULL, &c[0], &err), RT_OK);
    RT_EXPECT_EQ(rt_gpu_emit_candidate(a, perf, 1, RT_GPU_TARGET_OPENCL, &padded, &c[1], &err),
                 RT_OK);
    RT_EXPECT(has_work(&c[0]) && !has_work(&c[1]));
    RT_EXPECT_EQ(compile(rt, ocl, &c[0], &err), RT_OK);
    if (nf > 1)
        RT_EXPECT_EQ(compile(rt, ocl, &c[1], &err), RT_OK);
    for (size_t l = 0; l < sizeof sets / sizeof *sets; l++) {
        int64_t blocks[2] = {0, 0};
        bool ok[2] = {false, false};
        for (int f = 0; f < nf; f++) {
            rt_bindings *b = NULL;
            rt_gpu_check chk;
            rt_err_clear(&err);
            rt_status st = bind(a, op, sets[l].len, 7, NULL, &b, &err);
            if (st == RT_OK)
                st = rt_gpu_check_run(a, rt, ocl, &c[f], b, &chk, &err);
            if (st != RT_OK) {
                fprintf(stderr, "%s %s %s: %s\n", spec, sets[l].name, f ? "padded" : "list",
                        err.msg);
                RT_EXPECT(0);
                continue;
            }
            blocks[f] = launched_blocks(&c[f], b);
            ok[f] = chk.accepted;
            if (!chk.accepted)
                fprintf(stderr, "%s %s %s: %s\n", spec, sets[l].name, f ? "padded" : "list",
                        chk.reason);
            RT_EXPECT(chk.accepted);
            n_checked++;
        }
        printf("%-8s %-5s %-9s work list: %4lld blocks %s", spec, strrchr(dev->path, '/') + 1,
               sets[l].name, (long long)blocks[0], ok[0] ? "ok" : "WRONG");
        if (nf > 1)
            printf(", padded grid: %4lld blocks %s", (long long)blocks[1], ok[1] ? "ok" : "WRONG");
        printf("\n");
        RT_EXPECT(nf < 2 || blocks[0] <= blocks[1]);
    }
    rt_arena_free(a);
}

// qkt on a batch sampled from each histogram: blocks and kernel times of both forms.
static void measure(rt_gpu_runtime *rt, const rt_device *ocl, const rt_device *dev,
                    const char *heads, const char *dir) {
    static const char *hists[] = {"squad", "race"};
    for (size_t h = 0; h < 2; h++) {
        rt_arena *a = rt_arena_new(1 << 20);
        rt_err err = {0};
        rt_size_binding sz[] = {{"B", 32}, {"H", atoll(heads)}, {"D", 64}};
        rt_op *op = NULL;
        rt_perf_result *perf = NULL;
        rt_perf_options popt = {.top_k = 1};
        char hist[128];
        snprintf(hist, sizeof hist, "%s/%s.hist", dir, hists[h]);
        RT_EXPECT_EQ(rt_spec_load(a, "examples/qkt.spec", sz, 3, &op, &err), RT_OK);
        RT_EXPECT_EQ(rt_perf_construct(a, op, dev, &popt, &perf, &err), RT_OK);
        rt_gpu_candidate c[2];
        rt_gpu_lower_options padded = {.rank = 1, .padded_grid = true};
        RT_EXPECT_EQ(rt_gpu_emit_candidate(a, perf, 1, RT_GPU_TARGET_OPENCL, NULL, &c[0], &err),
                     RT_OK);
        RT_EXPECT_EQ(rt_gpu_emit_candidate(a, perf, 1, RT_GPU_TARGET_OPENCL, &padded, &c[1], &err),
                     RT_OK);
        rt_bindings *b = NULL;
        rt_gpu_result res[2];
        int32_t win = -1;
        rt_gpu_time_options to = rt_gpu_time_defaults;
        to.min_reps = 7;
        to.budget_ns = 2e9;
        if (bind(a, op, NULL, 0, hist, &b, &err) != RT_OK ||
            rt_gpu_profile(a, rt, ocl, c, 2, b, &to, res, &win, &err) != RT_OK) {
            fprintf(stderr, "measure %s: %s\n", hists[h], err.msg);
            RT_EXPECT(0);
            rt_arena_free(a);
            continue;
        }
        int64_t longest = 0, sum = 0;
        int32_t ti = rt_op_tensor_index(op, "len");
        for (int64_t i = 0; i < 32; i++) {
            int64_t v = (int64_t)b->tensors[ti].data[i];
            longest = v > longest ? v : longest;
            sum += v;
        }
        for (int f = 0; f < 2; f++) {
            bool ok = res[f].status == RT_GPU_CAND_OK;
            printf("qkt %s B=32 H=%s D=64 (lengths: mean %.1f, longest %lld) on %s tiles, "
                   "%-11s: %6lld blocks, ",
                   hists[h], heads, (double)sum / 32, (long long)longest,
                   strrchr(dev->path, '/') + 1, f ? "padded grid" : "work list",
                   (long long)launched_blocks(&c[f], b));
            if (ok)
                printf("kernel min %.3f ms, median %.3f ms (%d reps)\n", res[f].timing.min_ns / 1e6,
                       res[f].timing.median_ns / 1e6, (int)res[f].timing.reps);
            else
                printf("%s: %s\n", rt_gpu_cand_status_name(res[f].status),
                       res[f].reason ? res[f].reason : "");
            RT_EXPECT(ok);
        }
        if (res[0].status == RT_GPU_CAND_OK && res[1].status == RT_GPU_CAND_OK)
            printf("qkt %s: padded / work list median time %.2fx\n", hists[h],
                   res[1].timing.median_ns / res[0].timing.median_ns);
        rt_arena_free(a);
    }
}

int main(int argc, char **argv) {
    rt_device ocl, devs[2];
    rt_arena *a = rt_arena_new(1 << 16);
    rt_gpu_runtime *rt = NULL;
    int rc = pocl_open(a, &ocl, devs, &rt);
    if (rc != 0) {
        rt_arena_free(a);
        return rc;
    }
    if (argc > 3 && strcmp(argv[1], "measure") == 0) {
        measure(rt, &ocl, &devs[0], argv[2], argv[3]);
    } else {
        // v100's tile programs (PoCL compiles each kernel once; CI's time allows five)
        check(rt, &ocl, &devs[0], "qkt", "B=7,H=2,D=5", 2);
        check(rt, &ocl, &devs[0], "masked_qkt", "B=7,H=2,D=5", 1);
        check(rt, &ocl, &devs[0], "attn_v", "B=7,H=2,D=3", 1);
        check(rt, &ocl, &devs[0], "vgemm", "B=7", 1);
        RT_EXPECT_EQ(n_checked, 25);
    }
    rt_arena_free(a);
    return rt_test_finish("test-gpu-opencl-worklist");
}
