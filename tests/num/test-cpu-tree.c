// test-cpu-tree.c: recursion over trees (CORTEX) on the CPU backend. Each case binds one tree
// shape — 1, 2 and 3 nodes, a random tree of a prime number of nodes, chains down the first and
// down the second child (depth = N, one node per level), a full binary tree, a DAG (a node with
// two parents), a wide random tree — to an operator: treernn (leaf and inner statements, a
// missing second child), an unpredicated recursion (the leaves read absent children), a
// grandchild read on a 3-ary tree, a reduction ('+=!') over the children, a predicated group
// without recursion, and a statement after the recursion that reads its result. The top
// candidates are lowered level by level, JIT-compiled, run and checked against the reference
// interpreter (every candidate "ok", check "interpreter"); then the winner runs in-process
// through an rt_cpu_runner (which expands the levels itself) and is compared once more.
#include "test.h"
#include "num-host.h"
#include "tree-shapes.h"

#include "rtgen.h"
#include "compare.h"

#include <stdio.h>
#include <string.h>

static const char *const treernn = "examples/treernn.spec";

// No predicate: the leaves run it too, reading their absent children as 0.
static const char *const acc_spec =
    "def acc(tree(N, 2) T, float(N, 5) x) -> (float(N, 5) h) {\n"
    "    h(n, i) = x(n, i) + 0.5 * h(T.child(n, 0), i) - 0.25 * h(T.child(n, 1), i)\n"
    "}\n";
// A grandchild (the first child of the first child, absent or not) and the third child.
static const char *const gc_spec =
    "def gc(tree(N, 3) T, float(N, 4) x) -> (float(N, 4) h) {\n"
    "    h(n, i) = x(n, i) where leaf(n)\n"
    "    h(n, i) = x(n, i) * h(T.child(n, 2), i) + h(T.child(T.child(n, 0), 0), i) "
    "where !leaf(n)\n"
    "}\n";
// A reduction over k that reads the children: s(n) = sum_k x(n, k) + 8 (s(c0) / 4 - s(c1) / 2).
static const char *const rsum_spec =
    "def rsum(tree(N, 2) T, float(N, 8) x) -> (float(N) s) {\n"
    "    s(n) +=! x(n, k) + 0.25 * s(T.child(n, 0)) - 0.5 * s(T.child(n, 1))\n"
    "}\n";
// Predicates without recursion, then a GEMV recursion and a statement reading its result.
static const char *const post_spec =
    "def post(tree(N, 2) T, float(N, 6) x, float(6, 6) W) -> (float(N, 6) g, float(N, 6) h,\n"
    "                                                         float(N, 6) y) {\n"
    "    g(n, i) = x(n, i) where leaf(n)\n"
    "    g(n, i) = -2 * x(n, i) where !leaf(n)\n"
    "    h(n, i) = tanh(W(i, j) * g(n, j) / 3) where leaf(n)\n"
    "    h(n, i) = tanh(W(i, j) * (h(T.child(n, 0), j) + h(T.child(n, 1), j)) / 3) "
    "where !leaf(n)\n"
    "    y(n, i) = 2 * h(n, i) + g(n, i)\n"
    "}\n";

typedef struct tcase {
    const char *spec; // a path, or the spec text when it has a '('
    const char *what;
    shape sh;
    int32_t n; // nodes
    int32_t c; // children per node (the tree parameter's C)
} tcase;

static void run_case(const rt_device *dev, const tcase *tc, uint64_t seed) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    bool text = strchr(tc->spec, '(') != NULL;
    // treernn small: H = 19 (a vector tail), V = 11.
    rt_size_binding sets[3] = {{"N", tc->n}, {"H", 19}, {"V", 11}};
    int32_t n_sets = text ? 1 : 3;
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    rt_bindings *b = NULL, *b2 = NULL;
    rt_cpu_report *rep = NULL;
    rt_perf_options popt = {.top_k = 2};
    rt_cpu_options copt = {.profile = true, .budget_ms = 2, .threads = 2};
    rt_tree_data *t = make_tree(a, tc->sh, tc->n, tc->c, seed);
    if ((text ? rt_spec_parse(a, tc->spec, "inline.spec", sets, n_sets, &op, &err)
              : rt_spec_load(a, tc->spec, sets, n_sets, &op, &err)) != RT_OK ||
        !t || rt_perf_construct(a, op, dev, &popt, &perf, &err) != RT_OK ||
        rt_bindings_new(a, op, seed, &b, &err) != RT_OK ||
        rt_bindings_set_tree(b, "T", t, &err) != RT_OK ||
        rt_cpu_build_and_profile(a, op, dev, b, perf, &copt, &rep, &err) != RT_OK) {
        char msg[1024];
        rt_err_format(&err, "test", true, msg, sizeof msg);
        fprintf(stderr, "%s, %s: %s\n", tc->spec, tc->what, msg);
        RT_EXPECT(0);
        rt_arena_free(a);
        return;
    }
    bool all_ok = true;
    for (int32_t i = 0; i < rep->n; i++) {
        const rt_cpu_cand *cd = &rep->cands[i];
        if (cd->status != RT_CPU_CAND_OK)
            fprintf(stderr, "%s, %s: candidate %d: %s: %s\n", op->name, tc->what, (int)i,
                    rt_cpu_cand_status_name(cd->status), cd->reason ? cd->reason : "");
        all_ok = all_ok && cd->status == RT_CPU_CAND_OK;
        RT_EXPECT_EQ(cd->status, RT_CPU_CAND_OK);
        RT_EXPECT_STR(cd->check, "interpreter");
    }
    printf("%-8s %-26s N=%-4d levels %-4d %s\n", op->name, tc->what, (int)tc->n,
           (int)b->trees[0]->n_levels, all_ok ? "ok" : "WRONG");
    // The winner in-process on a second binding of the same tree and seed.
    if (rt_bindings_new(a, op, seed, &b2, &err) == RT_OK &&
        rt_bindings_set_tree(b2, "T", t, &err) == RT_OK &&
        rt_cpu_run_winner(rep, b2, &err) == RT_OK) {
        for (int32_t k = 0; k < op->n_outputs; k++) {
            int32_t o = op->outputs[k];
            rt_compare_result cr;
            rt_compare_data(b->tensors[o].data, b2->tensors[o].data, b->tensors[o].layout.elems,
                            &cr);
            if (!rt_compare_accept(&cr, op->tensors[o].dtype))
                fprintf(stderr, "%s, %s: the winner in-process: %s off by %g\n", op->name, tc->what,
                        op->tensors[o].name, cr.max_abs_err);
            RT_EXPECT(rt_compare_accept(&cr, op->tensors[o].dtype));
        }
    } else {
        fprintf(stderr, "%s, %s: run winner: %s\n", op->name, tc->what, err.msg);
        RT_EXPECT(0);
    }
    rt_arena_free(a);
}

int main(void) {
    rt_device dev;
    if (!rt_num_host(&dev))
        return 77;
    static const tcase cases[] = {
        {treernn, "1 node (a leaf)", SHAPE_RANDOM, 1, 2},
        {treernn, "2 nodes (one child)", SHAPE_RANDOM, 2, 2},
        {treernn, "3 nodes (full)", SHAPE_FULL, 3, 2},
        {treernn, "random, 13 nodes", SHAPE_RANDOM, 13, 2},
        {treernn, "chain by child 0", SHAPE_CHAIN0, 11, 2},
        {treernn, "chain by child 1", SHAPE_CHAIN1, 7, 2},
        {treernn, "full binary, 31 nodes", SHAPE_FULL, 31, 2},
        {treernn, "DAG, 9 nodes", SHAPE_DAG, 9, 2},
        {treernn, "random, 257 nodes", SHAPE_RANDOM, 257, 2},
        {acc_spec, "random, 23 nodes", SHAPE_RANDOM, 23, 2},
        {acc_spec, "chain by child 1", SHAPE_CHAIN1, 6, 2},
        {gc_spec, "random 3-ary, 29 nodes", SHAPE_RANDOM, 29, 3},
        {gc_spec, "full 3-ary, 13 nodes", SHAPE_FULL, 13, 3},
        {rsum_spec, "random, 17 nodes", SHAPE_RANDOM, 17, 2},
        {rsum_spec, "DAG, 12 nodes", SHAPE_DAG, 12, 2},
        {post_spec, "random, 19 nodes", SHAPE_RANDOM, 19, 2},
        {post_spec, "1 node", SHAPE_RANDOM, 1, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(&dev, &cases[i], 3 + i);
    return rt_test_finish("test-cpu-tree");
}
