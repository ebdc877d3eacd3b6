// compare.h: comparison of a backend's result with the reference and the one tolerance table
// every numerical check decides by. compare.c.
#ifndef RT_COMPARE_H
#define RT_COMPARE_H

#include "rt.h"

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
