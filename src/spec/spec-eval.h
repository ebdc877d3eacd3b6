// spec-eval.h: the one integer evaluator of op-spec IR expressions (spec.h), shared by the
// interpreter (interp.c: index ranges, offsets, dim extents) and the GPU launch (src/run/gpu-launch.c:
// ragged grid extents from the bound lengths). It computes numbers, integer arithmetic with
// wrapping (no undefined behaviour on overflow), floor division and modulo, comparisons, the
// short-circuit && and ||, conditions, and min / max / abs; the leaves it cannot know (index
// variables, sizes, dim references, tree children, tensor reads) and every subexpression that is
// not integer go to the caller's leaf function.
#ifndef RT_SPEC_EVAL_H
#define RT_SPEC_EVAL_H

#include "rt.h"
#include "spec.h"

typedef struct rt_spec_eval rt_spec_eval;
struct rt_spec_eval {
    const rt_op *op;
    const rt_stmt *stmt;     // for messages: the statement whose vars e names (may be NULL)
    const rt_tensor *tensor; // for messages: the tensor whose dim extent e is (may be NULL)
    rt_arena *arena;         // for messages (NULL: the expression is not printed)
    rt_err *err;
    void *ctx; // the caller's
    // Index vars, sizes, dim references, children, reads, and what is not integer.
    rt_status (*leaf)(rt_spec_eval *ev, const rt_expr *e, int64_t *out);
    // The condition of a ?: that is not integer; NULL: evaluated as an integer.
    rt_status (*cond)(rt_spec_eval *ev, const rt_expr *e, bool *out);
};

// Value of integer expression e. Errors: RT_ERR_SPEC at e's location for an integer division or
// modulo by zero, a number that is not a valid integer, an unknown operator, and whatever the
// leaf function returns.
rt_status rt_spec_eval_int(rt_spec_eval *ev, const rt_expr *e, int64_t *out);
// v as an integer; RT_ERR_SPEC "<e> is not a valid integer (got v)" outside int64's range.
rt_status rt_spec_eval_to_int(rt_spec_eval *ev, const rt_expr *e, double v, int64_t *out);

// Does e or any of its subexpressions satisfy pred (ctx passed through)? False for NULL.
bool rt_expr_any(const rt_expr *e, bool (*pred)(const rt_expr *e, const void *ctx),
                 const void *ctx);

#endif
