// test-perfmodel-ops.h: hand-built canonical IR of a few operators (matmul, conv2d, relu,
// reduce_mean, a ragged projection) for the perfmodel tests, so they exercise the model without
// depending on the op-spec front end. Shapes are parameters; the IR is what rt_spec_parse gives
// for the matching examples/*.spec (one rt_axis per loop, or fused where the spec fuses).
#ifndef RT_TEST_PERFMODEL_OPS_H
#define RT_TEST_PERFMODEL_OPS_H

#include "perfmodel.h"

#include <stdarg.h>
#include <string.h>

static inline rt_expr *tp_num(rt_arena *a, int64_t v) {
    rt_expr *e = rt_arena_calloc(a, 1, sizeof *e);
    e->kind = RT_EXPR_NUM;
    e->is_int = true;
    e->num = (double)v;
    return e;
}

static inline rt_expr *tp_idx(rt_arena *a, int32_t var) {
    rt_expr *e = rt_arena_calloc(a, 1, sizeof *e);
    e->kind = RT_EXPR_INDEX;
    e->is_int = true;
    e->var = var;
    return e;
}

static inline rt_expr *tp_bin(rt_arena *a, rt_bop op, rt_expr *l, rt_expr *r) {
    rt_expr *e = rt_arena_calloc(a, 1, sizeof *e);
    e->kind = RT_EXPR_BINARY;
    e->bop = op;
    e->n_args = 2;
    e->args = rt_arena_calloc(a, 2, sizeof *e->args);
    e->args[0] = l;
    e->args[1] = r;
    e->is_int = l->is_int && r->is_int;
    return e;
}

// c * var + ... as an expression: tp_lin(a, c0, n, var0, coef0, var1, coef1, ...)
static inline rt_expr *tp_lin(rt_arena *a, int64_t c0, int n, ...) {
    va_list ap;
    va_start(ap, n);
    rt_expr *e = NULL;
    for (int i = 0; i < n; i++) {
        int32_t v = va_arg(ap, int32_t);
        int64_t c = va_arg(ap, int64_t);
        rt_expr *t = c == 1 ? tp_idx(a, v) : tp_bin(a, RT_BOP_MUL, tp_num(a, c), tp_idx(a, v));
        e = e ? tp_bin(a, RT_BOP_ADD, e, t) : t;
    }
    va_end(ap);
    if (c0 != 0 || !e)
        e = e ? tp_bin(a, RT_BOP_ADD, e, tp_num(a, c0)) : tp_num(a, c0);
    return e;
}

static inline rt_expr *tp_read(rt_arena *a, int32_t tensor, int n, rt_expr **args) {
    rt_expr *e = rt_arena_calloc(a, 1, sizeof *e);
    e->kind = RT_EXPR_READ;
    e->tensor = tensor;
    e->n_args = n;
    e->args = rt_arena_calloc(a, (size_t)n, sizeof *e->args);
    memcpy(e->args, args, sizeof *args * (size_t)n);
    return e;
}

static inline void tp_tensor(rt_arena *a, rt_tensor *t, const char *name, rt_dtype dt, rt_role role,
                             int n, const int64_t *dims) {
    t->name = name;
    t->dtype = dt;
    t->role = role;
    t->n_dims = n;
    t->writer = role == RT_ROLE_INPUT ? -1 : 0;
    for (int d = 0; d < n; d++)
        t->dims[d].extent = tp_num(a, dims[d]);
}

// A statement over n_vars vars with constant ranges [0, ext[v]); the first n_lhs are the LHS.
static inline rt_stmt *tp_stmt(rt_arena *a, rt_op *op, int n_vars, const char *const *names,
                               const int64_t *ext, int n_lhs) {
    op->n_stmts = 1;
    op->stmts = rt_arena_calloc(a, 1, sizeof *op->stmts);
    rt_stmt *st = &op->stmts[0];
    st->n_vars = n_vars;
    st->vars = rt_arena_calloc(a, (size_t)n_vars, sizeof *st->vars);
    st->n_loops = n_vars;
    st->loops = rt_arena_calloc(a, (size_t)n_vars, sizeof *st->loops);
    st->n_axes = n_vars;
    st->axes = rt_arena_calloc(a, (size_t)n_vars, sizeof *st->axes);
    st->n_lhs = n_lhs;
    for (int v = 0; v < n_vars; v++) {
        st->vars[v].name = names[v];
        st->vars[v].is_reduce = v >= n_lhs;
        st->vars[v].lo = tp_num(a, 0);
        st->vars[v].hi = tp_num(a, ext[v]);
        st->loops[v] = v;
        st->axes[v].name = names[v];
        st->axes[v].n_members = 1;
        st->axes[v].members[0] = v;
        st->axes[v].is_reduce = v >= n_lhs;
        st->axes[v].extent = ext[v];
        if (v < n_lhs)
            st->lhs_vars[v] = v;
    }
    st->op = RT_ASSIGN_ADD_INIT;
    return st;
}

static inline rt_op *tp_op(rt_arena *a, const char *name, int n_tensors) {
    rt_op *op = rt_arena_calloc(a, 1, sizeof *op);
    op->name = name;
    op->file = name;
    op->n_tensors = n_tensors;
    op->tensors = rt_arena_calloc(a, (size_t)n_tensors, sizeof *op->tensors);
    return op;
}

// C(m, n) +=! A(m, k) * B(k, n)
static inline rt_op *tp_matmul(rt_arena *a, int64_t M, int64_t N, int64_t K, rt_dtype dt) {
    rt_op *op = tp_op(a, "matmul", 3);
    tp_tensor(a, &op->tensors[0], "A", dt, RT_ROLE_INPUT, 2, (int64_t[]){M, K});
    tp_tensor(a, &op->tensors[1], "B", dt, RT_ROLE_INPUT, 2, (int64_t[]){K, N});
    tp_tensor(a, &op->tensors[2], "C", dt, RT_ROLE_OUTPUT, 2, (int64_t[]){M, N});
    rt_stmt *st = tp_stmt(a, op, 3, (const char *const[]){"m", "n", "k"}, (int64_t[]){M, N, K}, 2);
    st->out = 2;
    rt_expr *ra = tp_read(a, 0, 2, (rt_expr *[]){tp_idx(a, 0), tp_idx(a, 2)});
    rt_expr *rb = tp_read(a, 1, 2, (rt_expr *[]){tp_idx(a, 2), tp_idx(a, 1)});
    st->rhs = tp_bin(a, RT_BOP_MUL, ra, rb);
    return op;
}

// O(n, f, y, x) +=! I(n, c, S*y + r - P, S*x + s - P) * Wt(f, c, r, s), I with pad 0.
static inline rt_op *tp_conv(rt_arena *a, int64_t N, int64_t C, int64_t H, int64_t F, int64_t R,
                             int64_t S, int64_t P) {
    int64_t OH = (H + 2 * P - R) / S + 1;
    rt_op *op = tp_op(a, "conv2d", 3);
    tp_tensor(a, &op->tensors[0], "I", RT_DTYPE_F32, RT_ROLE_INPUT, 4, (int64_t[]){N, C, H, H});
    op->tensors[0].has_pad = true;
    tp_tensor(a, &op->tensors[1], "Wt", RT_DTYPE_F32, RT_ROLE_INPUT, 4, (int64_t[]){F, C, R, R});
    tp_tensor(a, &op->tensors[2], "O", RT_DTYPE_F32, RT_ROLE_OUTPUT, 4, (int64_t[]){N, F, OH, OH});
    // vars: n f y x c r s
    rt_stmt *st = tp_stmt(a, op, 7, (const char *const[]){"n", "f", "y", "x", "c", "r", "s"},
                          (int64_t[]){N, F, OH, OH, C, R, R}, 4);
    st->out = 2;
    rt_expr *ri = tp_read(a, 0, 4,
                          (rt_expr *[]){tp_idx(a, 0), tp_idx(a, 4),
                                        tp_lin(a, -P, 2, 2, (int64_t)S, 5, (int64_t)1),
                                        tp_lin(a, -P, 2, 3, (int64_t)S, 6, (int64_t)1)});
    rt_expr *rw =
        tp_read(a, 1, 4, (rt_expr *[]){tp_idx(a, 1), tp_idx(a, 4), tp_idx(a, 5), tp_idx(a, 6)});
    st->rhs = tp_bin(a, RT_BOP_MUL, ri, rw);
    return op;
}

// O(n, c, h, w) = max(I(n, c, h, w), 0), the four axes fused into one (n.c.h.w).
static inline rt_op *tp_relu(rt_arena *a, const int64_t dims[4]) {
    rt_op *op = tp_op(a, "relu", 2);
    tp_tensor(a, &op->tensors[0], "I", RT_DTYPE_F32, RT_ROLE_INPUT, 4, dims);
    tp_tensor(a, &op->tensors[1], "O", RT_DTYPE_F32, RT_ROLE_OUTPUT, 4, dims);
    rt_stmt *st = tp_stmt(a, op, 4, (const char *const[]){"n", "c", "h", "w"}, dims, 4);
    st->out = 1;
    st->op = RT_ASSIGN_SET;
    st->n_axes = 1;
    st->axes[0].name = "n.c.h.w";
    st->axes[0].n_members = 4;
    st->axes[0].extent = dims[0] * dims[1] * dims[2] * dims[3];
    for (int k = 0; k < 4; k++)
        st->axes[0].members[k] = k;
    rt_expr *call = rt_arena_calloc(a, 1, sizeof *call);
    call->kind = RT_EXPR_CALL;
    call->fn = RT_FN_MAX;
    call->n_args = 2;
    call->args = rt_arena_calloc(a, 2, sizeof *call->args);
    call->args[0] =
        tp_read(a, 0, 4, (rt_expr *[]){tp_idx(a, 0), tp_idx(a, 1), tp_idx(a, 2), tp_idx(a, 3)});
    call->args[1] = tp_num(a, 0);
    st->rhs = call;
    return op;
}

// O(b, r) +=! I(b, r, l) / L, (b, r) fused.
static inline rt_op *tp_reduce_mean(rt_arena *a, int64_t B, int64_t R, int64_t L) {
    rt_op *op = tp_op(a, "reduce_mean", 2);
    tp_tensor(a, &op->tensors[0], "I", RT_DTYPE_F32, RT_ROLE_INPUT, 3, (int64_t[]){B, R, L});
    tp_tensor(a, &op->tensors[1], "O", RT_DTYPE_F32, RT_ROLE_OUTPUT, 2, (int64_t[]){B, R});
    rt_stmt *st = tp_stmt(a, op, 3, (const char *const[]){"b", "r", "l"}, (int64_t[]){B, R, L}, 2);
    st->out = 1;
    st->n_axes = 2;
    st->axes[0].name = "b.r";
    st->axes[0].n_members = 2;
    st->axes[0].members[0] = 0;
    st->axes[0].members[1] = 1;
    st->axes[0].extent = B * R;
    st->axes[1].name = "l";
    st->axes[1].n_members = 1;
    st->axes[1].members[0] = 2;
    st->axes[1].is_reduce = true;
    st->axes[1].extent = L;
    rt_expr *ri = tp_read(a, 0, 3, (rt_expr *[]){tp_idx(a, 0), tp_idx(a, 1), tp_idx(a, 2)});
    st->rhs = tp_bin(a, RT_BOP_DIV, ri, tp_num(a, L));
    return op;
}

// Y(b, i, n) +=! X(b, i, k) * Wt(k, n) with i in 0:len(b) — b pinned, i a vloop.
static inline rt_op *tp_ragged_proj(rt_arena *a, int64_t B, int64_t D) {
    rt_op *op = tp_op(a, "proj", 4);
    tp_tensor(a, &op->tensors[0], "len", RT_DTYPE_I32, RT_ROLE_INPUT, 1, (int64_t[]){B});
    op->tensors[0].is_length = true;
    tp_tensor(a, &op->tensors[1], "X", RT_DTYPE_F32, RT_ROLE_INPUT, 3, (int64_t[]){B, 1, D});
    tp_tensor(a, &op->tensors[2], "Wt", RT_DTYPE_F32, RT_ROLE_INPUT, 2, (int64_t[]){D, D});
    tp_tensor(a, &op->tensors[3], "Y", RT_DTYPE_F32, RT_ROLE_OUTPUT, 3, (int64_t[]){B, 1, D});
    // ragged dim 1 of X and Y: extent len(b)
    rt_expr *lenb = tp_read(a, 0, 1, (rt_expr *[]){tp_idx(a, 0)});
    op->tensors[1].dims[1].extent = lenb;
    op->tensors[1].dims[1].ragged = true;
    op->tensors[3].dims[1].extent = lenb;
    op->tensors[3].dims[1].ragged = true;
    rt_stmt *st =
        tp_stmt(a, op, 4, (const char *const[]){"b", "i", "n", "k"}, (int64_t[]){B, 1, D, D}, 3);
    st->out = 3;
    st->vars[1].hi = lenb;
    st->vars[1].ragged = true;
    st->axes[1].ragged = true;
    st->axes[1].extent = -1;
    rt_expr *rx = tp_read(a, 1, 3, (rt_expr *[]){tp_idx(a, 0), tp_idx(a, 1), tp_idx(a, 3)});
    rt_expr *rw = tp_read(a, 2, 2, (rt_expr *[]){tp_idx(a, 3), tp_idx(a, 2)});
    st->rhs = tp_bin(a, RT_BOP_MUL, rx, rw);
    return op;
}

#endif
