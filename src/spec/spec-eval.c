// spec-eval.c: the integer evaluator of op-spec IR expressions (spec-eval.h).
#include "spec-eval.h"

static const char *rt_spec_eval_print(rt_spec_eval *ev, const rt_expr *e) {
    if (!ev->arena)
        return "expression";
    rt_buf buf;
    rt_buf_init(&buf, ev->arena);
    rt_expr_print(ev->op, ev->stmt, ev->tensor, e, &buf);
    return buf.data && !buf.oom ? buf.data : "expression";
}

rt_status rt_spec_eval_to_int(rt_spec_eval *ev, const rt_expr *e, double v, int64_t *out) {
    if (!(v > -9.2e18 && v < 9.2e18))
        return rt_fail(ev->err, RT_ERR_SPEC, e->loc, "%s is not a valid integer (got %g)",
                       rt_spec_eval_print(ev, e), v);
    *out = (int64_t)v;
    return RT_OK;
}

// Wrapping integer arithmetic (no undefined behaviour on overflow).
static int64_t rt_wrap_add(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a + (uint64_t)b);
}
static int64_t rt_wrap_sub(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a - (uint64_t)b);
}
static int64_t rt_wrap_mul(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a * (uint64_t)b);
}

// x op y for a binary operator other than && and ||.
static rt_status rt_spec_eval_bop(rt_spec_eval *ev, const rt_expr *e, int64_t x, int64_t y,
                                  int64_t *out) {
    switch (e->bop) {
    case RT_BOP_ADD:
        *out = rt_wrap_add(x, y);
        return RT_OK;
    case RT_BOP_SUB:
        *out = rt_wrap_sub(x, y);
        return RT_OK;
    case RT_BOP_MUL:
        *out = rt_wrap_mul(x, y);
        return RT_OK;
    case RT_BOP_DIV:
    case RT_BOP_MOD:
        if (y == 0)
            return rt_fail(ev->err, RT_ERR_SPEC, e->loc, "integer division by zero in %s",
                           rt_spec_eval_print(ev, e));
        if (y == -1)
            *out = e->bop == RT_BOP_DIV ? rt_wrap_sub(0, x) : 0;
        else
            *out = e->bop == RT_BOP_DIV ? rt_floor_div(x, y) : rt_floor_mod(x, y);
        return RT_OK;
    case RT_BOP_LT:
        *out = x < y;
        return RT_OK;
    case RT_BOP_LE:
        *out = x <= y;
        return RT_OK;
    case RT_BOP_GT:
        *out = x > y;
        return RT_OK;
    case RT_BOP_GE:
        *out = x >= y;
        return RT_OK;
    case RT_BOP_EQ:
        *out = x == y;
        return RT_OK;
    case RT_BOP_NE:
        *out = x != y;
        return RT_OK;
    default:
        return rt_fail(ev->err, RT_ERR_SPEC, e->loc, "unknown operator");
    }
}

rt_status rt_spec_eval_int(rt_spec_eval *ev, const rt_expr *e, int64_t *out) {
    int64_t x, y;
    switch (e->kind) {
    case RT_EXPR_NUM:
        return rt_spec_eval_to_int(ev, e, e->num, out);
    case RT_EXPR_UNARY:
        RT_TRY(rt_spec_eval_int(ev, e->args[0], &x));
        *out = e->uop == RT_UOP_NEG ? rt_wrap_sub(0, x) : x == 0;
        return RT_OK;
    case RT_EXPR_BINARY:
        if (!e->args[0]->is_int || !e->args[1]->is_int)
            break; // the caller compares or combines them as numbers
        RT_TRY(rt_spec_eval_int(ev, e->args[0], &x));
        if (e->bop == RT_BOP_AND || e->bop == RT_BOP_OR) {
            bool left = x != 0;
            if (left == (e->bop == RT_BOP_OR)) {
                *out = left;
                return RT_OK;
            }
            RT_TRY(rt_spec_eval_int(ev, e->args[1], &y));
            *out = y != 0;
            return RT_OK;
        }
        RT_TRY(rt_spec_eval_int(ev, e->args[1], &y));
        return rt_spec_eval_bop(ev, e, x, y, out);
    case RT_EXPR_COND: {
        bool c;
        if (ev->cond) {
            RT_TRY(ev->cond(ev, e->args[0], &c));
        } else {
            RT_TRY(rt_spec_eval_int(ev, e->args[0], &x));
            c = x != 0;
        }
        return rt_spec_eval_int(ev, e->args[c ? 1 : 2], out);
    }
    case RT_EXPR_CALL: {
        bool all_int = rt_expr_int_call(e);
        if (!all_int)
            break;
        RT_TRY(rt_spec_eval_int(ev, e->args[0], &x));
        if (e->fn == RT_FN_ABS) {
            *out = x < 0 ? rt_wrap_sub(0, x) : x;
            return RT_OK;
        }
        for (int32_t i = 1; i < e->n_args; i++) {
            RT_TRY(rt_spec_eval_int(ev, e->args[i], &y));
            x = (e->fn == RT_FN_MIN) == (y < x) ? y : x;
        }
        *out = x;
        return RT_OK;
    }
    default:
        break;
    }
    return ev->leaf(ev, e, out);
}

bool rt_expr_any(const rt_expr *e, bool (*pred)(const rt_expr *e, const void *ctx),
                 const void *ctx) {
    if (!e)
        return false;
    if (pred(e, ctx))
        return true;
    for (int32_t i = 0; i < e->n_args; i++)
        if (rt_expr_any(e->args[i], pred, ctx))
            return true;
    return false;
}
