// tree-shapes.h: the tree shapes the recursion tests bind (test-cpu-tree.c,
// test-gpu-opencl-tree.c), built for n nodes and c children per node.
#ifndef RT_TEST_TREE_SHAPES_H
#define RT_TEST_TREE_SHAPES_H

#include "test.h"

#include "interp.h"

typedef enum shape {
    SHAPE_RANDOM,
    SHAPE_CHAIN0, // node v's child 0 is v + 1
    SHAPE_CHAIN1, // node v's child 1 is v + 1 (child 0 absent)
    SHAPE_FULL,   // node v's children are c v + 1 .. c v + c
    SHAPE_DAG,    // node v's children are v + 1 and v + 2: every inner node below 1 has 2 parents
} shape;

static inline rt_tree_data *make_tree(rt_arena *a, shape sh, int32_t n, int32_t c, uint64_t seed) {
    rt_err err = {0};
    rt_tree_data *t = NULL;
    if (sh == SHAPE_RANDOM) {
        RT_EXPECT_EQ(rt_tree_random(a, n, c, seed, &t, &err), RT_OK);
        return t;
    }
    int32_t *child = rt_arena_calloc(a, (size_t)n * (size_t)c, sizeof *child);
    for (int32_t v = 0; v < n; v++)
        for (int32_t k = 0; k < c; k++) {
            int32_t ch = -1;
            if (sh == SHAPE_CHAIN0 && k == 0)
                ch = v + 1;
            else if (sh == SHAPE_CHAIN1 && k == 1)
                ch = v + 1;
            else if (sh == SHAPE_FULL)
                ch = c * v + 1 + k;
            else if (sh == SHAPE_DAG && k < 2)
                ch = v + 1 + k;
            child[(int64_t)v * c + k] = ch < n ? ch : -1;
        }
    RT_EXPECT_EQ(rt_tree_build(a, n, c, child, &t, &err), RT_OK);
    return t;
}

#endif
