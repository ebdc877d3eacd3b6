// bindings.h: what an op runs on — bound sizes, length tensors, trees and the data of every
// tensor — and the seeded input generator. interp.c (bindings section).
//
// Pipeline position: after rt_spec_parse. The CLI binds --lengths / --tree files and --seed
// into an rt_bindings; the interpreter (interp.h) and the backends' checks run on it.
#ifndef RT_BINDINGS_H
#define RT_BINDINGS_H

#include "rt.h"
#include "spec.h"
#include "layout.h"
#include "lengths.h"
#include "tree.h"

// ---------------------------------------------------------------------------------------------
// Bindings: sizes, lengths, trees and data of one op (all in the arena)
// ---------------------------------------------------------------------------------------------

typedef struct rt_tensor_data {
    rt_layout layout; // valid once rt_bindings_prepare ran (length tensors: once bound)
    double *data;     // layout.elems values, each rounded to the tensor's dtype
    bool laid_out;
    bool bound; // values given by the caller rather than generated
} rt_tensor_data;

// Nodes of the tree generated for a tree parameter whose node count nothing binds.
#define RT_TREE_DEFAULT_NODES 15

typedef struct rt_bindings {
    rt_arena *arena;
    const rt_op *op;
    uint64_t seed;              // input generation (default 1)
    int64_t max_length;         // generated lengths: uniform in [0, max_length] (default 16)
    int32_t default_tree_nodes; // generated trees when the node count is unbound (default
                                // RT_TREE_DEFAULT_NODES)
    int64_t *sizes;             // [op->n_sizes] values; tree node counts are set at binding
    bool *size_bound;           // [op->n_sizes]
    rt_tensor_data *tensors;    // [op->n_tensors]
    rt_tree_data **trees;       // [op->n_trees], NULL until bound or generated
    bool shaped;                // trees, sizes and lengths fixed (rt_bindings_count, prepare)
    bool prepared;
} rt_bindings;

rt_status rt_bindings_new(rt_arena *a, const rt_op *op, uint64_t seed, rt_bindings **out,
                          rt_err *err);
// Index of the tensor (or tree) called name, -1 when there is none.
int32_t rt_op_tensor_index(const rt_op *op, const char *name);
int32_t rt_op_tree_index(const rt_op *op, const char *name);
// Binds an is_length tensor's values (n must equal its extent; length tensors are dense and
// their extents may use only sizes already bound, trees first). Errors: RT_ERR_USAGE for an
// unknown name or a tensor that is not a length tensor, RT_ERR_SPEC for a count mismatch or a
// negative length.
rt_status rt_bindings_set_lengths(rt_bindings *b, const char *name, const int32_t *lengths,
                                  int64_t n, rt_err *err);
// Binds a length tensor from a length file: the sample count is batch, or the tensor's extent
// when batch is 0 (a batch that differs from the extent is RT_ERR_USAGE).
rt_status rt_bindings_set_lengths_file(rt_bindings *b, const char *name, const rt_lengths_file *f,
                                       int64_t batch, rt_err *err);
// Binds a tree parameter; sets its node-count size (an already bound size must agree).
rt_status rt_bindings_set_tree(rt_bindings *b, const char *name, rt_tree_data *t, rt_err *err);
// The CLI's --lengths NAME=PATH and --tree NAME=PATH in one call each: read the file (a tree
// with the parameter's C), bind it (batch as in rt_bindings_set_lengths_file). Errors come back
// in the option form of rt_file_error_to_option, e.g.
//   "--lengths len=lens.txt:7: expected a non-negative integer, got \"12a\""
// (where: no location), so the CLI prints them as "rtgen: error: ...".
rt_status rt_bindings_load_lengths(rt_bindings *b, const char *name, const char *path,
                                   int64_t batch, rt_err *err);
rt_status rt_bindings_load_tree(rt_bindings *b, const char *name, const char *path, rt_err *err);
// Generates what is not bound (trees, lengths, input data, the caller's values of outputs
// written with '+='), builds every tensor's layout and allocates outputs and temporaries
// (zero). Inputs: float types uniform in [-1, 1); gather (is_index) tensors uniform in
// [0, extent of the dim they index); other integer tensors uniform in [-4, 4]; each tensor from
// its own stream seeded by (seed, tensor index). Idempotent.
rt_status rt_bindings_prepare(rt_bindings *b, rt_err *err);
// Fixes what every layout reads, as rt_bindings_prepare would: generates the trees and length
// tensors nothing bound (lengths uniform in [0, max_length]), checks every size is bound. No
// other tensor is laid out or allocated. Lengths and trees cannot be bound afterwards.
// Errors: an unbound size, a tree of a bad node count (RT_ERR_SPEC).
rt_status rt_bindings_shape(rt_bindings *b, rt_err *err);
// The stored element count of every tensor, out[op->n_tensors], before any tensor's data is
// allocated (for sizing what a run will need): trees and lengths are generated as
// rt_bindings_prepare would, ragged layouts built, dense tensors counted in double (so one too
// large to lay out still gets its count). Lengths and trees cannot be bound afterwards. Errors: those of
// rt_bindings_prepare's layouts (an unbound size, a negative extent, a ragged tensor too large).
rt_status rt_bindings_count(rt_bindings *b, double *out, rt_err *err);
// Overwrites a tensor's data (prepares b first when needed, so bind lengths and trees before):
// n must equal its stored element count; values are rounded to the dtype. Errors: RT_ERR_USAGE.
rt_status rt_bindings_set_data(rt_bindings *b, const char *name, const double *values, int64_t n,
                               rt_err *err);
// Builds the layout of tensor ti into *out (start arrays in b's arena) from b's sizes and
// lengths (bound or generated: call rt_bindings_count or rt_bindings_prepare first): what the
// prelude of a ragged tensor computes. Errors: an unbound size, a negative extent, too large.
rt_status rt_layout_compute(rt_bindings *b, int32_t ti, rt_layout *out, rt_err *err);
// Data of the tensor called name (NULL when unknown).
rt_tensor_data *rt_bindings_data(rt_bindings *b, const char *name);
// Stored elements of tensor t (valid after prepare).
int64_t rt_tensor_elems(const rt_bindings *b, int32_t t);
// Offset of t(idx...) in its data; false when outside the extent.
bool rt_tensor_offset(const rt_bindings *b, int32_t t, const int64_t *idx, int64_t *out_offset);
// One line per output: name, dtype, stored elements, sum, min, max, first values (--interpret).
void rt_bindings_print_outputs(const rt_bindings *b, rt_buf *out);

#endif
