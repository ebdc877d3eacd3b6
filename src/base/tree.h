// tree.h: tree and DAG data of recursive operators (CORTEX) — the tree-file reader, random
// seeded trees and the level-by-level linearization that the interpreter and the generated
// kernels both follow. tree.c. Data only: no op-spec types, so every layer may use it.
#ifndef RT_TREE_H
#define RT_TREE_H

#include "rt.h"

// ---------------------------------------------------------------------------------------------
// Trees and DAGs (--tree T=FILE), tree.c
//
// File format: one node per line `id child0 child1 ...`; '-' in a child slot means no child
// there; trailing slots may be left out; '#' comments, blank lines skipped. The ids are
// 0..N-1, each exactly once, in any order (N = the number of node lines); children are valid
// ids; at most C children per node; no cycles (a node may have several parents: a DAG).
// Linearization (CORTEX): height(leaf) = 0, height(n) = 1 + max height of its children; nodes
// are grouped by height into levels, ascending, ids ascending inside a level. Computing the
// levels in order computes every child before its parents.
// ---------------------------------------------------------------------------------------------

typedef struct rt_tree_data {
    int32_t n_nodes;
    int32_t max_children; // C
    int32_t *child;       // [n_nodes * max_children]: child c of node n at n*C + c, -1 absent
    int32_t *n_children;  // [n_nodes]: present children (0: leaf)
    int32_t *height;      // [n_nodes]
    int32_t n_levels;     // max height + 1 (0 for an empty tree)
    int32_t *order;       // [n_nodes]: node ids sorted by (height, id)
    int32_t *level_begin; // [n_levels + 1]: level h is order[level_begin[h] .. level_begin[h+1])
} rt_tree_data;

// Parses a tree file for a tree(N, max_children) parameter. Errors: RT_ERR_SYNTAX with
// {path, line, col}: bad id, id out of range, duplicate id, too many children, cycle, no nodes.
rt_status rt_tree_parse(rt_arena *a, const char *text, const char *path, int32_t max_children,
                        rt_tree_data **out, rt_err *err);
rt_status rt_tree_read(rt_arena *a, const char *path, int32_t max_children, rt_tree_data **out,
                       rt_err *err);
// Builds and linearizes a tree from child[n * max_children + c] (-1 absent), copied. Errors:
// RT_ERR_SPEC for an out-of-range child or a cycle (no location).
rt_status rt_tree_build(rt_arena *a, int32_t n_nodes, int32_t max_children, const int32_t *child,
                        rt_tree_data **out, rt_err *err);
// A random tree of n_nodes (>= 1) nodes, node 0 the root: node i > 0 gets a parent drawn
// uniformly among nodes < i that still have a free child slot, in the parent's first free
// slot. Seeded, so reproducible.
rt_status rt_tree_random(rt_arena *a, int32_t n_nodes, int32_t max_children, uint64_t seed,
                         rt_tree_data **out, rt_err *err);

#endif
