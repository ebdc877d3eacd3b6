// interp.h: the reference interpreter — the numerical oracle every backend is checked against.
//
// Pipeline position: after rt_spec_parse. The CLI binds --lengths / --tree files and --seed
// into an rt_bindings (bindings.h), the interpreter computes every output, and each backend's
// results are compared against it (compare.h).
//
// Headers by topic: rng.h and tree.h (src/base), lengths.h, layout.h, bindings.h, compare.h
// and this one (src/ref). interp.c holds layouts, bindings, input generation and the
// interpreter; compare.c the comparison.
#ifndef RT_INTERP_H
#define RT_INTERP_H

#include "bindings.h"

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

// The useful arithmetic of op on b's bound sizes, lengths and trees (fixes them, as
// rt_bindings_count; lays out the data only where a range reads a tensor other than a length
// tensor): over every statement, the sum over its iteration points -- ragged, affine
// (triangular) and where-clause ranges and leaf/!leaf predicates as the interpreter runs them,
// no padding -- of one operation per operator or function call of its right-hand side (as the
// performance model counts them), one per accumulation ('+=!' and the like), a sum's body and
// one addition per point of its reduced vars; at least one per point (a copy). What a
// profile's GFLOP/s divide by the measured time. A var on which no inner range depends is
// counted by its trip count, not iterated, so a dense 4096^3 GEMM takes microseconds.
// Errors: those of rt_bindings_count, a var without a range (RT_ERR_SPEC).
rt_status rt_interp_flops(const rt_op *op, rt_bindings *b, double *out, rt_err *err);

// ---------------------------------------------------------------------------------------------
// Layers (spec.h rt_layer): the defs in order, each on its own bindings, data flowing by name
// ---------------------------------------------------------------------------------------------

typedef struct rt_layer_bindings {
    const rt_layer *layer;
    rt_bindings **ops; // [layer->n_ops]: def k's bindings (its intermediates owned by the layer)
} rt_layer_bindings;

rt_status rt_layer_bindings_new(rt_arena *a, const rt_layer *l, uint64_t seed,
                                rt_layer_bindings **out, rt_err *err);
// Binds the layer's length tensor name (as rt_bindings_set_lengths_file) in the first def that
// declares it; the other defs take those lengths at rt_layer_bindings_prepare. Errors: those of
// rt_bindings_set_lengths_file, RT_ERR_USAGE for a name that is not a layer input.
rt_status rt_layer_bindings_set_lengths_file(rt_layer_bindings *lb, const char *name,
                                             const rt_lengths_file *f, int64_t batch, rt_err *err);
// Prepares every def's bindings in order: each layer input (lengths included) is generated (or
// bound) once, in the first def that declares it, and every later def takes its values.
// Intermediates (parameters that an earlier def outputs) keep generated values of their own
// until rt_layer_interp_run. Idempotent per def.
rt_status rt_layer_bindings_prepare(rt_layer_bindings *lb, rt_err *err);
// What a layer run needs of lb without the reference, in a fraction of rt_layer_bindings_prepare's
// memory: every def's lengths and layouts, and values only for the layer's inputs (generated or
// bound once in the first def that declares them, copied into every later def); the other
// tensors have no data (NULL) until rt_layer_bindings_prepare or rt_layer_interp_run completes
// lb (with the same values). Idempotent. Errors: those of rt_layer_bindings_prepare.
rt_status rt_layer_bindings_prepare_inputs(rt_layer_bindings *lb, rt_err *err);
// Def k's bindings as rt_layer_bindings_prepare makes lb->ops[k], but in arena a of the caller's
// (a def profiled alone, its data released with a): lb's lengths and layer inputs, its own
// generated values for the rest. Prepares lb's inputs (rt_layer_bindings_prepare_inputs).
// Errors: those of rt_layer_bindings_prepare.
rt_status rt_layer_bindings_def(rt_arena *a, rt_layer_bindings *lb, int32_t k, rt_bindings **out,
                                rt_err *err);
// The layer's reference: prepares lb, then runs each def's interpreter (rt_interp_run) in file
// order, each intermediate taken from its producer's output before its reader runs. Every
// def's outputs are then in lb->ops[k]. Errors: those of rt_interp_run, with the def noted.
rt_status rt_layer_interp_run(rt_layer_bindings *lb, rt_err *err);

#endif
