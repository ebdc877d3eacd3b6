// lower-expr.h: the one translator of op-spec expressions (spec.h rt_expr) into kernel-IR
// expressions (kir.h), shared by the CPU lowering (lower-cpu.c) and the GPU lowering
// (lower-gpu.c). A lowering fills an rt_lx context from its own state for the statement it is
// lowering, and a static rt_lx_ops for what differs between backends (how a tensor read becomes
// a load, the loop kind of a sum's innermost loop, the backend's name in messages).
#ifndef RT_LOWER_EXPR_H
#define RT_LOWER_EXPR_H

#include "rt.h"
#include "spec.h"
#include "kir.h"

typedef struct rt_lx rt_lx;

struct rt_lx_ops {
    const char *backend;             // "CPU", "GPU": in "... is not supported by the X backend"
    rt_kir_loop_kind sum_inner_loop; // kind of a sum's innermost loop (outer ones are serial)
    // Optional: a tensor read e (arity already checked) as a kernel-IR value in the tensor's
    // own type; it may call rt_lx_indices and rt_lx_load. NULL: rt_lx_indices + rt_lx_load.
    rt_status (*read)(rt_lx *x, const rt_expr *e, rt_kir_expr **out);
};

// Where and how the expressions of statement s are translated. Out of memory while building
// nodes sets oom (the lowering reports it); other errors come back as rt_status with err set.
struct rt_lx {
    const struct rt_lx_ops *ops;
    rt_arena *a;
    const rt_op *op;
    rt_kir_kernel *k;
    rt_kir_phase *ph;                  // the phase whose variables the expressions use
    const rt_stmt *s;                  // the statement (NULL: index variables are unbound)
    int32_t *var_of;                   // statement var -> phase var (-1: unbound); sums bind
    rt_kir_type ct;                    // compute type of the statement
    rt_kir_block *pre;                 // where sums inside expressions put their loops
    int32_t *data_buf;                 // per tensor: its data buffer
    int32_t (*start_buf)[RT_MAX_DIMS]; // per tensor and dim: start array buffer (-1: dense)
    int64_t (*extent)[RT_MAX_DIMS];    // per tensor and dim: dense extent (-1: ragged)
    // Per tensor (NULL: none): the scratch offset, in elements, of the one row of it that a
    // row-wise group keeps per thread (data_buf is then the scratch); -1: the tensor's own array.
    // Such a tensor's first indices (local_dims) are the group's row and are left out of its offsets.
    const int64_t *local_base;
    // Per tensor with a local_base (NULL: 1 each): how many leading dims (the group's rows,
    // rt_perf_cpu_row_depth) are left out of its offsets.
    const int32_t *local_dims;
    // Per tree parameter (NULL: none): its CHILD buffer (RT_KIR_TREE_CHILD), -1 when the kernel
    // has none. T.child(x, c) loads it; a read at a missing child (-1) is 0, as in the
    // interpreter.
    const int32_t *tree_child_buf;
    // A sum whose value the lowering has computed itself (NULL: none): that RT_EXPR_SUM node
    // becomes sum_value (the naive CPU kernel's row of sums, lower-cpu-naive.c).
    const rt_expr *sum_at;
    rt_kir_expr *sum_value;
    void *user; // the lowering's own state, for ops->read
    bool oom;
    rt_err *err;
};

// Value of e in the compute type x->ct.
rt_status rt_lx_num(rt_lx *x, const rt_expr *e, rt_kir_expr **out);
// Value of e as an i64 (non-integer expressions are computed in x->ct and truncated).
rt_status rt_lx_int(rt_lx *x, const rt_expr *e, rt_kir_expr **out);
// Bounds [lo, hi) of statement var v. Errors: RT_ERR_SPEC when v has no range.
rt_status rt_lx_range(rt_lx *x, int32_t v, rt_kir_expr **lo, rt_kir_expr **hi);
// A tensor read in the tensor's own type. Errors: RT_ERR_SPEC on a wrong number of indices.
rt_status rt_lx_read(rt_lx *x, const rt_expr *e, rt_kir_expr **out);
// The i64 index expressions of read e, one per dim (e->n_args <= RT_MAX_DIMS).
rt_status rt_lx_indices(rt_lx *x, const rt_expr *e, rt_kir_expr **idx);
// Load of read e from its data buffer at idx; pad tensors give their pad value outside their
// extents. Errors: RT_ERR_SPEC for a padded read of a ragged tensor.
rt_status rt_lx_load(rt_lx *x, const rt_expr *e, rt_kir_expr **idx, rt_kir_expr **out);
// Flat offset of tensor t at idx (rt_layout: dense pos * extent + i, ragged start[pos] + i;
// a row kept in scratch, local_base[t] + the offset of idx[1..] within the row); valid (may be
// NULL) receives the in-extent condition of the dense dims. NULL (and oom set) when out of
// memory.
rt_kir_expr *rt_lx_offset(rt_lx *x, int32_t t, rt_kir_expr **idx, rt_kir_expr **valid);

// ---------------------------------------------------------------------------------------------
// Recursion over trees (CORTEX), lower-tree.c: what both lowerings run level by level
// ---------------------------------------------------------------------------------------------

#define RT_TREE_GROUP_MAX 16

// The statements that write one tensor at the nodes of a tree, node by node in the interpreter
// (rt_interp_run): statements that read their output at tree children (recursive) or carry
// leaf / !leaf predicates, on their first index (the node var, over all N nodes). The lowerings
// run them on the tree's level order (rt_kir_levels): the leaf statements at level 0, which
// holds exactly the leaves, the inner statements level by level from 1 up, every node of a level
// in parallel. Each statement of a node runs in statement order, as in the interpreter.
typedef struct rt_tree_group {
    int32_t tensor;  // the tensor written
    int32_t tree;    // the tree parameter
    bool recursive;  // some statement reads the tensor at a child
    int32_t n_stmts; // statements in order
    int32_t stmts[RT_TREE_GROUP_MAX];
    bool at_leaves[RT_TREE_GROUP_MAX]; // statement i runs at the leaves (level 0)
    bool at_inner[RT_TREE_GROUP_MAX];  // and at inner nodes (levels >= 1)
} rt_tree_group;

// Whether statement si belongs to a tree group (recursive, or with predicates).
bool rt_tree_stmt(const rt_op *op, int32_t si);
// Whether some statement names tree parameter t (a child or a predicate): its arrays are needed.
bool rt_tree_used(const rt_op *op, int32_t t);
// Adds to k the int32 arrays of every tree parameter a statement names ("tree_T_child",
// "tree_T_order", ...: rt_kir_tree_field), after the tensors' buffers: (*tree_buf)[t][f] is the
// buffer of field f of tree t (-1: tree unused), (*tree_child)[t] its CHILD buffer.
rt_status rt_tree_add_buffers(rt_arena *a, rt_kir_kernel *k, const rt_op *op,
                              int32_t (**tree_buf)[RT_KIR_TREE_FIELD_COUNT], int32_t **tree_child,
                              rt_err *err);
// The group of the tree statement si and every later statement writing the same tensor.
// Errors: RT_ERR_BACKEND "... is not supported by the <backend> backend" at the construct the
// level-by-level lowering cannot run: a node index that is not the first index of the output
// and the first loop or does not range over every node, a predicate on another index or tree,
// children of two trees in one group, a read of the output at a child of another node than the
// statement's own, more statements than RT_TREE_GROUP_MAX, a predicated reduction that starts
// from its identity outside recursion (the interpreter fills the elements its predicate skips).
rt_status rt_tree_group_plan(const rt_op *op, int32_t si, const char *backend, rt_tree_group *out,
                             rt_err *err);
// One line about a group's statements at leaves (inner false) or inner nodes, e.g.
// "statement 1 (h, where !leaf(n)) level by level over T's levels 1.., children first".
const char *rt_tree_group_what(rt_arena *a, const rt_op *op, const rt_tree_group *g, bool inner);

#endif
