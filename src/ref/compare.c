// compare.c: a backend's result against the reference (max absolute and relative error, NMSE,
// non-finite mismatches) and the tolerance table every numerical check decides by.
#include "compare.h"

#include <math.h>
#include <string.h>

void rt_compare_begin(rt_compare_result *r) {
    memset(r, 0, sizeof *r);
    r->worst_index = -1;
}

void rt_compare_add(rt_compare_result *r, double ref, double got) {
    int64_t i = r->n_elems++;
    double abs_err, rel_err;
    if (!isfinite(ref) || !isfinite(got)) {
        if ((isnan(ref) && isnan(got)) || ref == got)
            return;
        r->n_nonfinite++;
        abs_err = rel_err = HUGE_VAL;
    } else {
        abs_err = fabs(got - ref);
        rel_err = abs_err / fmax(fabs(ref), RT_COMPARE_REL_FLOOR);
        r->err2 += abs_err * abs_err;
        r->ref2 += ref * ref;
        r->ref_max_abs = fmax(r->ref_max_abs, fabs(ref));
    }
    if (abs_err > r->max_abs_err) {
        r->max_abs_err = abs_err;
        r->worst_index = i;
    }
    r->max_rel_err = fmax(r->max_rel_err, rel_err);
}

void rt_compare_end(rt_compare_result *r) {
    r->nmse = r->n_nonfinite ? HUGE_VAL : r->ref2 > 0.0 ? r->err2 / r->ref2 : r->err2;
}

void rt_compare_data(const double *ref, const double *got, int64_t n, rt_compare_result *out) {
    rt_compare_begin(out);
    for (int64_t i = 0; i < n; i++)
        rt_compare_add(out, ref[i], got[i]);
    rt_compare_end(out);
}

// ORDER RT_DTYPE. Floating types: the max error is a few hundred ulps of the largest reference
// value (sums of thousands of products in another order, the JIT's polynomial exp), the NMSE a
// few ulps squared; integers must match exactly.
// clang-format off
static const rt_tolerance rt_tolerance_table[RT_DTYPE_COUNT] = {
    [RT_DTYPE_F32]  = {1e-3, 1e-8,  1e-4},
    [RT_DTYPE_F16]  = {1e-2, 1e-5,  1e-2},
    [RT_DTYPE_BF16] = {4e-2, 1e-4,  4e-2},
    [RT_DTYPE_F64]  = {1e-9, 1e-20, 1e-12},
    [RT_DTYPE_I32]  = {0,    0,     0},
    [RT_DTYPE_I8]   = {0,    0,     0},
};
// clang-format on
_Static_assert(sizeof rt_tolerance_table / sizeof *rt_tolerance_table == RT_DTYPE_COUNT,
               "ORDER RT_DTYPE");

const rt_tolerance *rt_tolerance_of(rt_dtype t) {
    return &rt_tolerance_table[(unsigned)t < RT_DTYPE_COUNT ? t : RT_DTYPE_F32];
}

bool rt_compare_accept(const rt_compare_result *r, rt_dtype t) {
    const rt_tolerance *tol = rt_tolerance_of(t);
    return r->n_nonfinite == 0 && r->max_abs_err <= tol->abs_tol * (1.0 + r->ref_max_abs) &&
           r->nmse <= tol->nmse_tol;
}
