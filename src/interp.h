// interp.h: the reference interpreter and what it runs on — bound sizes, length tensors, trees
// and the data of every tensor — plus the seeded input generator, the length-file and tree-file
// readers, and the comparison helper the backends' numerical checks use.
//
// Pipeline position: after rt_spec_parse. The CLI binds --lengths / --tree files and --seed
// into an rt_bindings, the interpreter computes every output, and each backend's results are
// compared against it. The storage layout defined here (rt_layout) is THE layout of ragged
// tensors: the GPU/CPU backends and the prelude reuse it.
//
// Files: lengths.c (length files, histogram sampling), tree.c (tree files, linearization),
// interp.c (PRNG, layouts, bindings, input generation, interpreter, comparison).
#ifndef RT_INTERP_H
#define RT_INTERP_H

#include "rt.h"
#include "spec.h"

// ---------------------------------------------------------------------------------------------
// Seeded PRNG: splitmix64 (Steele, Lea & Flood, OOPSLA 2014; the seeder of xoshiro). The state
// advances by the golden-ratio constant 0x9e3779b97f4a7c15 and each output is the state
// passed through the splitmix64 finalizer. Same seed, same stream, on every platform.
// ---------------------------------------------------------------------------------------------

typedef struct rt_rng {
    uint64_t state;
} rt_rng;

void rt_rng_seed(rt_rng *r, uint64_t seed);
uint64_t rt_rng_next(rt_rng *r);
// Uniform in [0, n) without modulo bias (rejection); n == 0 returns 0.
uint64_t rt_rng_below(rt_rng *r, uint64_t n);
// Uniform in [0, 1) with 53 random bits.
double rt_rng_uniform(rt_rng *r);

// ---------------------------------------------------------------------------------------------
// Length files (--lengths NAME=FILE), lengths.c
//
// Two formats, told apart by the number of fields on the first non-empty line:
//   plain list  one non-negative integer per line (taken as is: exactly the tensor's extent
//               many entries are required);
//   histogram   'length count' per line (as /work/shared/data/seqlens/*.hist), count > 0;
//               sampled with replacement, weighted by count, into as many lengths as needed.
// '#' starts a comment anywhere on a line; blank lines are skipped. Lengths fit in int32.
// Errors (RT_ERR_SYNTAX) carry where = {path, line, col} of the offending field, e.g.
//   lens.txt:7:1  expected a non-negative integer (got "12a")
//   lens.hist:3:7 expected 'length count' (got 3 fields)
//   lens.hist:4:4 count must be positive (got 0)
//   lens.txt:2:1  length 99999999999 is too large (expected at most 2147483647)
//   lens.txt      lengths file has no entries              (line 0: no line)
//   lens.txt      expected 32 lengths for 'len' (got 7)     (from rt_lengths_take)
// ---------------------------------------------------------------------------------------------

typedef struct rt_lengths_file {
    const char *path;
    bool is_histogram;
    int64_t n;       // entries (list) or bins (histogram)
    int32_t *values; // list: the lengths in file order; histogram: the length of each bin
    int64_t *counts; // histogram only: count of each bin (> 0); NULL for a list
    int64_t total;   // histogram: sum of counts; list: n
} rt_lengths_file;

// Parses text (NUL-terminated) read from path (used in messages only).
rt_status rt_lengths_parse(rt_arena *a, const char *text, const char *path, rt_lengths_file **out,
                           rt_err *err);
// Reads path and calls rt_lengths_parse. Errors: RT_ERR_IO, or those of rt_lengths_parse.
rt_status rt_lengths_read(rt_arena *a, const char *path, rt_lengths_file **out, rt_err *err);
// Fills out_lengths[0..count) from f: a list must hold exactly count entries (name is the
// length tensor, for the message); a histogram is sampled count times with the seeded PRNG.
// Deterministic for a seed; every sampled length is a length present in the histogram.
rt_status rt_lengths_take(const rt_lengths_file *f, const char *name, int64_t count, uint64_t seed,
                          int32_t *out_lengths, rt_err *err);
// Turns an error of rt_lengths_parse/read/take on `OPTION NAME=PATH` into the option-style
// message the CLI prints (op-spec.md): where becomes no location, the message becomes
//   "--lengths len=lens.txt:7: expected a non-negative integer, got \"12a\""
// (":LINE" only when the error has a line; a trailing " (got X)" is written ", got X").
// Errors of other files (no path match) are left as they are. Also used for --tree.
void rt_file_error_to_option(rt_err *err, const char *option, const char *name, const char *path);

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

// ---------------------------------------------------------------------------------------------
// Storage layout of a tensor (dense or ragged), interp.c
//
// Every tensor is one flat array. For dims d0..d(n-1), a ragged dim's extent is evaluated with
// the indices of the outer dims it depends on; the stored elements are exactly the valid index
// tuples, in lexicographic (row-major) order, PACKED: no padding between slices (CORA).
//
// Offsets: let pos(-1) = 0 and, from the outermost dim inwards,
//     dense dim k:   pos(k) = pos(k-1) * extent[k] + i_k
//     ragged dim k:  pos(k) = start[k][pos(k-1)] + i_k
// pos(k) is the rank of the prefix (i0..ik) among the valid prefixes of length k+1 in
// lexicographic order; pos(n-1) is the element's offset. start[k] is the exclusive prefix sum
// of the extent of dim k over the prefixes of length k (n_rows[k] + 1 entries), so the extent
// of dim k under prefix p is start[k][p+1] - start[k][p] and every access is O(rank).
// Example: float(b:3, len(b), 2) X with len = {2, 0, 3}: n_rows = {1, 3, 5, 10},
// start[1] = {0, 2, 2, 5}; X(2, 1, 0) is at (start[1][2] + 1) * 2 + 0 = 6.
// ---------------------------------------------------------------------------------------------

typedef struct rt_layout {
    int32_t n_dims;
    int64_t extent[RT_MAX_DIMS];     // dense dim: its extent; ragged dim: -1
    int64_t *start[RT_MAX_DIMS];     // ragged dim k: [n_rows[k] + 1]; NULL for dense dims
    int64_t n_rows[RT_MAX_DIMS + 1]; // n_rows[k]: valid prefixes of length k; [0] = 1
    int64_t elems;                   // stored elements = n_rows[n_dims]
} rt_layout;

// Offset of the element at idx[0..n_dims); false when some index is outside its extent.
bool rt_layout_offset(const rt_layout *l, const int64_t *idx, int64_t *out_offset);

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
// Data of the tensor called name (NULL when unknown).
rt_tensor_data *rt_bindings_data(rt_bindings *b, const char *name);
// Stored elements of tensor t (valid after prepare).
int64_t rt_tensor_elems(const rt_bindings *b, int32_t t);
// Offset of t(idx...) in its data; false when outside the extent.
bool rt_tensor_offset(const rt_bindings *b, int32_t t, const int64_t *idx, int64_t *out_offset);
// One line per output: name, dtype, stored elements, sum, min, max, first values (--interpret).
void rt_bindings_print_outputs(const rt_bindings *b, rt_buf *out);

// ---------------------------------------------------------------------------------------------
// The interpreter
// ---------------------------------------------------------------------------------------------

// Executes op's statements in order with double accumulation, storing with rounding to each
// tensor's dtype (prepares b first if needed). Recursive statements over a tree run node by
// node in level order (children first), each node taking the statement whose leaf/!leaf
// predicate holds. Reads of a pad tensor outside its extent give the pad value, reads at a
// missing tree child give 0. Errors: RT_ERR_SPEC at the read for an index outside a tensor's
// extent (gathers: `Emb(word(n), i) reads row 12000 outside Emb's extent 10000`), integer
// division by zero, a negative extent.
rt_status rt_interp_run(const rt_op *op, rt_bindings *b, rt_err *err);

// ---------------------------------------------------------------------------------------------
// Comparison of a backend's result with the reference
// ---------------------------------------------------------------------------------------------

typedef struct rt_compare_result {
    int64_t n_elems;
    double max_abs_err;  // max |got - ref|
    double max_rel_err;  // max |got - ref| / max(|ref|, RT_COMPARE_REL_FLOOR)
    double nmse;         // sum (got - ref)^2 / sum ref^2 (sum (got - ref)^2 when ref is all 0)
    double ref_max_abs;  // max |ref| over the finite reference values
    int64_t worst_index; // element with the largest absolute error (-1 when all exact)
    int64_t n_nonfinite; // elements where exactly one side is NaN/inf or the infs differ
    double err2, ref2;   // running sums behind nmse (rt_compare_add)
} rt_compare_result;

#define RT_COMPARE_REL_FLOOR 1e-6

// Equal non-finite values (both NaN, same inf) count as exact; other non-finite mismatches
// make the errors infinite and are counted.
void rt_compare_data(const double *ref, const double *got, int64_t n, rt_compare_result *out);

// The same measures one element at a time, for outputs read in place from typed buffers:
// rt_compare_begin, then rt_compare_add per element in index order, then rt_compare_end (nmse).
void rt_compare_begin(rt_compare_result *r);
void rt_compare_add(rt_compare_result *r, double ref, double got);
void rt_compare_end(rt_compare_result *r);

// The acceptance rule of every numerical check: the CPU profile, the GPU and OpenCL checks and
// the tests all decide through this table (rt_tolerance_of) and rt_compare_accept. An output of
// element type t is accepted when all three hold:
//   - no non-finite mismatch (a NaN or inf where the reference has another value),
//   - max |got - ref| <= abs_tol * (1 + max |ref|),
//   - nmse <= nmse_tol.
// Both error bounds must hold: the NMSE alone lets a few badly wrong elements through on a large
// output, the max error alone a uniformly perturbed one. The random-vector check of a
// contraction (C t against A (B t)) accepts max |C t - A (B t)| <= vec_tol * max(1, max |A (B t)|).
typedef struct rt_tolerance {
    double abs_tol;  // of (1 + max |ref|); 0: exact
    double nmse_tol; // 0: exact
    double vec_tol;  // random-vector check
} rt_tolerance;

// The row of element type t (the stored type of the output: float, double, half, ...).
const rt_tolerance *rt_tolerance_of(rt_dtype t);
// Whether a comparison of an output of element type t passes (see rt_tolerance).
bool rt_compare_accept(const rt_compare_result *r, rt_dtype t);

#endif
