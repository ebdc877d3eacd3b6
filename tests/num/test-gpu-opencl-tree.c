// test-gpu-opencl-tree.c: recursion over trees (CORTEX) through the GPU code generator on PoCL.
// For the v100 and mi50 tile programs, treernn and an unpredicated recursion are emitted in the
// OpenCL dialect — a leaf kernel, and a kernel launched once per level with the level as its
// int argument, one thread per element of a node's row — run on PoCL with the tree's level
// order, and checked by rt_gpu_check_run against the reference interpreter (outputs poisoned
// before the run, the tree's arrays read back unchanged), on trees of 1, 2, 3 nodes, a random
// tree of a prime number of nodes, a chain (depth N), a full binary tree and a DAG.
// RTGEN_DUMP_GPU=DIR keeps every emitted source.
#include "test.h"

#include "run-gpu.h"
#include "interp.h"
#include "tree-shapes.h"
#include "pocl-devices.h"

#include <stdio.h>
#include <string.h>

static const char *const acc_spec =
    "def acc(tree(N, 2) T, float(N, 5) x) -> (float(N, 5) h) {\n"
    "    h(n, i) = x(n, i) + 0.5 * h(T.child(n, 0), i) - 0.25 * h(T.child(n, 1), i)\n"
    "}\n";

typedef struct tcase {
    const char *spec; // a path, or the spec text when it has a '('
    const char *what;
    shape sh;
    int32_t n;
} tcase;

static int n_runs;

static void run_case(rt_gpu_runtime *rt, const rt_device *ocl, const rt_device *dev,
                     const tcase *tc, uint64_t seed) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    bool text = strchr(tc->spec, '(') != NULL;
    rt_size_binding sets[3] = {{"N", tc->n}, {"H", 37}, {"V", 11}};
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    rt_perf_options popt = {.top_k = 2};
    rt_tree_data *t = make_tree(a, tc->sh, tc->n, 2, seed);
    if ((text ? rt_spec_parse(a, tc->spec, "inline.spec", sets, 1, &op, &err)
              : rt_spec_load(a, tc->spec, sets, 3, &op, &err)) != RT_OK ||
        !t || rt_perf_construct(a, op, dev, &popt, &perf, &err) != RT_OK) {
        fprintf(stderr, "%s, %s: %s\n", tc->spec, tc->what, err.msg);
        RT_EXPECT(0);
        rt_arena_free(a);
        return;
    }
    for (int32_t rank = 1; rank <= perf->n_cands; rank++) {
        rt_gpu_candidate cand;
        rt_bindings *b = NULL;
        rt_gpu_check chk;
        rt_err_clear(&err);
        rt_status st =
            rt_gpu_emit_candidate(a, perf, rank, RT_GPU_TARGET_OPENCL, NULL, &cand, &err);
        const char *dump = getenv("RTGEN_DUMP_GPU");
        if (st == RT_OK && dump) {
            char fn[512];
            snprintf(fn, sizeof fn, "%s/%s-%d-%s-%d.cl", dump, op->name, (int)tc->n,
                     strrchr(dev->path, '/') + 1, (int)rank);
            FILE *f = fopen(fn, "w");
            if (f) {
                fputs(cand.source, f);
                fclose(f);
            }
        }
        if (st == RT_OK)
            st = rt_bindings_new(a, op, seed, &b, &err);
        if (st == RT_OK)
            st = rt_bindings_set_tree(b, "T", t, &err);
        if (st == RT_OK)
            st = rt_gpu_check_run(a, rt, ocl, &cand, b, &chk, &err);
        n_runs++;
        if (st != RT_OK) {
            char msg[1024];
            rt_err_format(&err, "test", true, msg, sizeof msg);
            fprintf(stderr, "%s, %s on %s, rank %d: %s\n%s\n", op->name, tc->what, dev->path,
                    (int)rank, msg, err.log ? err.log : "");
            RT_EXPECT(0);
            continue;
        }
        int32_t by_level = 0;
        for (int32_t i = 0; i < cand.kernel->n_phases; i++)
            by_level += cand.kernel->phases[i].by_level;
        bool ok = chk.n_outputs == op->n_outputs && chk.accepted;
        printf("%-8s %-22s N=%-4d levels %-3d %-10s rank %d: %d kernel(s), %d by level, nmse "
               "%.2e%s%s\n",
               op->name, tc->what, (int)tc->n, (int)t->n_levels, strrchr(dev->path, '/') + 1,
               (int)rank, (int)cand.kernel->n_phases, (int)by_level, chk.nmse,
               ok ? "" : "  MISMATCH: ", ok ? "" : chk.reason);
        RT_EXPECT(ok);
        RT_EXPECT(by_level >= 1);
    }
    rt_arena_free(a);
}

int main(void) {
    static const tcase cases[] = {
        {"examples/treernn.spec", "1 node", SHAPE_RANDOM, 1},
        {"examples/treernn.spec", "2 nodes", SHAPE_RANDOM, 2},
        {"examples/treernn.spec", "3 nodes (full)", SHAPE_FULL, 3},
        {"examples/treernn.spec", "random, 31 nodes", SHAPE_RANDOM, 31},
        {"examples/treernn.spec", "chain, 9 nodes", SHAPE_CHAIN0, 9},
        {"examples/treernn.spec", "full binary, 15 nodes", SHAPE_FULL, 15},
        {"examples/treernn.spec", "DAG, 7 nodes", SHAPE_DAG, 7},
        {acc_spec, "random, 41 nodes", SHAPE_RANDOM, 41},
    };
    rt_device ocl, devs[2];
    rt_arena *a = rt_arena_new(1 << 16);
    rt_gpu_runtime *rt = NULL;
    int rc = pocl_open(a, &ocl, devs, &rt);
    if (rc != 0) {
        rt_arena_free(a);
        return rc;
    }
    for (int32_t d = 0; d < 2; d++)
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
            run_case(rt, &ocl, &devs[d], &cases[i], 1 + i);
    printf("%d runs\n", n_runs);
    rt_arena_free(a);
    return rt_test_finish("test-gpu-opencl-tree");
}
