// vcheck.h: the randomized check of a contraction -- C t against alpha A (B t) (+ C0 t for
// '+='), for two independent random vectors t, per batch instance -- over the op IR and the
// bound data, so that an operator too large for the interpreter is still checked, in time
// linear in its operands and output. vcheck.c. Used by every backend's check (the CPU's
// profiling child, the GPU's read-back); the interpreter (interp.h) stays the oracle wherever
// the op is small or not of this shape.
//
// Shape covered: one statement, no trees, '+=!', '+=' or '=' (an implicit sum), whose
// right-hand side is a product of exactly two reads of floating tensors with affine indices and
// of numeric constants (the scale alpha). Each LHS index var that indexes both reads (or
// neither) is a batch var, one that indexes only the first read an M var, only the second an N
// var; the reduce vars are K. Ranges may be ragged or affine (triangular) as long as every
// N and batch range depends only on batch vars (and outer N vars), every M range on batch
// and outer M vars, and every K range on batch and M vars: then, per batch instance b and M
// tuple m, sum_n C(b,m,n) t(n) = alpha sum_k A(b,m,k) (sum_n B(b,k,n) t(n)) (+ sum_n C0 t).
// Anything else (gathers, several statements, an epilogue, masks that tie N to M) is not
// covered: rt_vcheck_plan says why and the caller uses the interpreter.
//
// Acceptance (the one tolerance table of compare.h): per row r (a batch instance and M tuple)
//   |y_r - w_r| <= 8 * rel(K_r) * sqrt(sum_n t_n^2 C_rn^2),   y = C t, w = alpha A (B t) (+ C0 t)
//   rel(K) = max(sqrt(nmse_tol), 2 (u_acc sqrt(K) + u_out)),
// with C the candidate's output. Why: an output the elementwise rule accepts has errors e with
// sum e^2 <= nmse_tol * sum C^2 (sqrt(nmse_tol) relative, RMS), and a sum of K products rounded
// in any order errs by about u_acc sqrt(K) of its size (rounding errors behave as a random walk,
// Higham & Mary 2019), plus one rounding of the store (u_out); since t is independent of the
// kernel, y - w = sum_n t_n e_n is a sum of independent bounded terms (Hoeffding: beyond 8
// standard deviations with probability below 1e-13). A single wrong element d at column n moves
// y_r by d t_n and the bound by at most 8 rel |d t_n| < |d t_n|, so it cannot hide behind its
// own size; an error pattern orthogonal to one t is caught by the other. What the vector
// check cannot promise is the elementwise rule's max-error bound: an element wrong by less than
// about 8 rel of its row's norm may pass -- the price of a check linear in the data.
// Every element of C that the statement does not reach must hold what the interpreter leaves
// there (the start value, or 0 for '+=!'), exactly.
#ifndef RT_VCHECK_H
#define RT_VCHECK_H

#include "bindings.h"

typedef struct rt_vcheck rt_vcheck;

// Whether op's statement has the covered shape (no data needed); *why says why not.
bool rt_vcheck_covers(const rt_op *op, const char **why);

// Plans the check of op on b (prepared here): *out NULL when op is not covered (*why says why),
// else its cost figures filled. Errors: those of rt_bindings_prepare, and a range the
// interpreter would reject (RT_ERR_SPEC).
rt_status rt_vcheck_plan(rt_arena *a, const rt_op *op, rt_bindings *b, rt_vcheck **out,
                         const char **why, rt_err *err);
// The interpreter's innermost iterations for this op (its FLOPs / 2), and the vector check's:
// the reference once (rt_vcheck_reference) and one output (rt_vcheck_output), both vectors.
double rt_vcheck_interp_points(const rt_vcheck *vc);
double rt_vcheck_ref_points(const rt_vcheck *vc);
double rt_vcheck_out_points(const rt_vcheck *vc);
// Whether the vector check is the one to run: the interpreter would take more than limit
// points (0: 1 << 22) and the vector check, its reference and one output, no more (a point of
// the interpreter's tree walk costs ten or more of the check's strided loops).
bool rt_vcheck_preferred(const rt_vcheck *vc, double limit_points);

// alpha A (B t) (+ C0 t) per row for both vectors, from b's data as it is now: the untouched
// inputs, and for '+=' and '=' the start values of C (what a kernel's buffer starts with).
// Errors: a read outside a tensor's extent that the interpreter would report (RT_ERR_SPEC);
// RT_ERR_BACKEND when an input is not finite (the check then does not apply: use the
// interpreter).
rt_status rt_vcheck_reference(rt_vcheck *vc, rt_err *err);

typedef struct rt_vcheck_result {
    bool accepted;
    double max_abs_err;   // max over rows and vectors of |y - w|
    double max_rel_err;   // max of |y - w| / max(|w|, RT_COMPARE_REL_FLOOR)
    double max_err_ratio; // max of |y - w| / the row's bound (> 1: rejected)
    double nmse;          // sum (y - w)^2 / sum w^2 over rows and vectors
    int64_t worst_row;    // row of max_err_ratio (-1: none)
    int32_t worst_vector; // 0 or 1
    double worst_y, worst_w, worst_allowed;
    int64_t n_nonfinite;    // rows whose y is not finite
    int64_t unreached_bad;  // first element the statement does not reach whose value changed (-1)
    double unreached_value; // its value and what it must hold
    double unreached_want;
} rt_vcheck_result;

// The candidate's output C (data: its stored elements in C's layout, as float for RT_DTYPE_F32,
// else double) against the reference. Needs rt_vcheck_reference first.
rt_status rt_vcheck_output(const rt_vcheck *vc, const void *data, rt_dtype type,
                           rt_vcheck_result *out, rt_err *err);
// Why r was rejected, in one line (buf of size bytes).
void rt_vcheck_explain(const rt_vcheck *vc, const rt_vcheck_result *r, char *buf, size_t size);

// Entries [0, n) of vector v (0 or 1) for batch instance `batch` (in enumeration order): the
// values the check multiplies the first n N tuples of that instance by (tests build faults
// with them).
void rt_vcheck_vector(int32_t v, int64_t batch, int64_t n, double *t);

#endif
