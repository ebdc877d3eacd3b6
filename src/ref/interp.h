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

#endif
