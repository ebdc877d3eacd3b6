// lower-expr.c: translates op-spec expressions (spec.h rt_expr) of one statement into kernel-IR
// expressions (kir.h) for both lowerings, lower-cpu.c and lower-gpu.c. Integer expressions
// become i64 values, the others values of the statement's compute type; tensor reads become
// loads at rt_layout offsets (or whatever the backend's ops->read makes of them), and a sum
// inside an expression becomes an accumulator and its loops in the current pre-block.
#include "lower-expr.h"

static void rt_lx_check(rt_lx *x, const void *p) {
    if (!p)
        x->oom = true;
}

static rt_status rt_lx_unsupported(rt_lx *x, rt_loc loc, const char *what) {
    return rt_fail(x->err, RT_ERR_BACKEND, loc, "%s is not supported by the %s backend", what,
                   x->ops->backend);
}

static rt_status rt_lx_nomem(rt_lx *x) {
    return rt_fail(x->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
}

rt_kir_expr *rt_lx_offset(rt_lx *x, int32_t t, rt_kir_expr **idx, rt_kir_expr **valid) {
    rt_arena *a = x->a;
    rt_kir_expr *pos = rt_kir_int(a, 0), *ok = rt_kir_int(a, 1);
    const rt_tensor *tn = &x->op->tensors[t];
    int64_t local = x->local_base ? x->local_base[t] : -1;
    int32_t d0 = local < 0 ? 0 : x->local_dims ? x->local_dims[t] : 1;
    for (int32_t d = d0; d < tn->n_dims; d++) {
        if (x->start_buf[t][d] >= 0) {
            rt_kir_expr *st =
                rt_kir_cast(a, RT_KIR_I64, rt_kir_load(a, x->k, x->start_buf[t][d], pos));
            pos = rt_kir_bin(a, RT_KIR_ADD, st, idx[d]);
        } else {
            rt_kir_expr *ext = rt_kir_int(a, x->extent[t][d]);
            pos = rt_kir_bin(a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_MUL, pos, ext), idx[d]);
            if (valid)
                ok = rt_kir_bin(a, RT_KIR_AND, ok,
                                rt_kir_bin(a, RT_KIR_AND,
                                           rt_kir_bin(a, RT_KIR_GE, idx[d], rt_kir_int(a, 0)),
                                           rt_kir_bin(a, RT_KIR_LT, idx[d], ext)));
        }
    }
    if (local > 0)
        pos = rt_kir_bin(a, RT_KIR_ADD, pos, rt_kir_int(a, local));
    if (valid)
        *valid = ok;
    rt_lx_check(x, pos && ok ? pos : NULL);
    return pos;
}

rt_status rt_lx_indices(rt_lx *x, const rt_expr *e, rt_kir_expr **idx) {
    for (int32_t d = 0; d < e->n_args; d++)
        RT_TRY(rt_lx_int(x, e->args[d], &idx[d]));
    return RT_OK;
}

rt_status rt_lx_load(rt_lx *x, const rt_expr *e, rt_kir_expr **idx, rt_kir_expr **out) {
    rt_arena *a = x->a;
    const rt_tensor *tn = &x->op->tensors[e->tensor];
    if (tn->has_pad) {
        for (int32_t d = 0; d < tn->n_dims; d++)
            if (x->start_buf[e->tensor][d] >= 0)
                return rt_lx_unsupported(x, e->loc, "a padded read of a ragged tensor");
        rt_kir_expr *valid;
        rt_kir_expr *off = rt_lx_offset(x, e->tensor, idx, &valid);
        rt_kir_expr *safe = rt_kir_select(a, valid, off, rt_kir_int(a, 0));
        rt_kir_expr *v = rt_kir_load(a, x->k, x->data_buf[e->tensor], safe);
        rt_kir_expr *pad = NULL;
        if (v)
            pad = rt_kir_type_is_float(v->type)
                      ? rt_kir_flt(a, v->type, tn->pad_value)
                      : rt_kir_cast(a, v->type, rt_kir_int(a, (int64_t)tn->pad_value));
        *out = rt_kir_select(a, valid, v, pad);
    } else {
        *out = rt_kir_load(a, x->k, x->data_buf[e->tensor], rt_lx_offset(x, e->tensor, idx, NULL));
    }
    rt_lx_check(x, *out);
    return RT_OK;
}

// A read with tree children among its indices (h(T.child(n, 0), j)): 0 where one of them is
// absent (-1), else the element; the load itself goes to a clamped index, so that it is safe to
// evaluate whatever the condition (selects evaluate both sides).
static rt_status rt_lx_read_at_child(rt_lx *x, const rt_expr *e, rt_kir_expr **out) {
    rt_arena *a = x->a;
    rt_kir_expr *idx[RT_MAX_DIMS], *ok = rt_kir_int(a, 1);
    RT_TRY(rt_lx_indices(x, e, idx));
    for (int32_t d = 0; d < e->n_args; d++) {
        if (e->args[d]->kind != RT_EXPR_CHILD)
            continue;
        ok = rt_kir_bin(a, RT_KIR_AND, ok, rt_kir_bin(a, RT_KIR_GE, idx[d], rt_kir_int(a, 0)));
        idx[d] = rt_kir_bin(a, RT_KIR_MAX, idx[d], rt_kir_int(a, 0));
    }
    rt_kir_expr *v;
    RT_TRY(rt_lx_load(x, e, idx, &v));
    rt_kir_expr *zero = NULL;
    if (v)
        zero = rt_kir_type_is_float(v->type) ? rt_kir_flt(a, v->type, 0.0)
                                             : rt_kir_cast(a, v->type, rt_kir_int(a, 0));
    *out = rt_kir_select(a, ok, v, zero);
    rt_lx_check(x, *out);
    return RT_OK;
}

// T.child(node, c): the child's id from the tree's CHILD buffer, -1 when absent or when node is
// not a node of the tree (a child of an absent child).
static rt_status rt_lx_child(rt_lx *x, const rt_expr *e, rt_kir_expr **out) {
    rt_arena *a = x->a;
    bool known = e->tree >= 0 && e->tree < x->op->n_trees;
    int32_t cb = x->tree_child_buf && known ? x->tree_child_buf[e->tree] : -1;
    if (cb < 0)
        return rt_lx_unsupported(x, e->loc, "a tree child outside a level-by-level statement");
    const rt_tree *tr = &x->op->trees[e->tree];
    const rt_size *n_nodes = &x->op->sizes[tr->n_sym];
    if (!n_nodes->bound)
        return rt_lx_unsupported(x, e->loc, "a tree whose node count is bound at run time");
    if (e->child < 0 || e->child >= tr->max_children || e->n_args != 1)
        return rt_fail(x->err, RT_ERR_SPEC, e->loc, "child %d of tree '%s' (expected 0..%d)",
                       (int)e->child, tr->name, (int)tr->max_children - 1);
    rt_kir_expr *node;
    RT_TRY(rt_lx_int(x, e->args[0], &node));
    // A node var ranging over 0 .. N needs no guard.
    const rt_expr *arg = e->args[0];
    int64_t lo = -1, hi = -1;
    bool in_range = arg->kind == RT_EXPR_INDEX && x->s && arg->var >= 0 &&
                    arg->var < x->s->n_vars && x->s->vars[arg->var].lo && x->s->vars[arg->var].hi &&
                    rt_expr_const_int(x->op, x->s->vars[arg->var].lo, &lo) &&
                    rt_expr_const_int(x->op, x->s->vars[arg->var].hi, &hi) && lo >= 0 &&
                    hi <= n_nodes->value;
    rt_kir_expr *ok = NULL, *at = node;
    if (!in_range) {
        ok = rt_kir_bin(a, RT_KIR_AND, rt_kir_bin(a, RT_KIR_GE, node, rt_kir_int(a, 0)),
                        rt_kir_bin(a, RT_KIR_LT, node, rt_kir_int(a, n_nodes->value)));
        at = rt_kir_select(a, ok, node, rt_kir_int(a, 0));
    }
    rt_kir_expr *off =
        rt_kir_bin(a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_MUL, at, rt_kir_int(a, tr->max_children)),
                   rt_kir_int(a, e->child));
    rt_kir_expr *id = rt_kir_cast(a, RT_KIR_I64, rt_kir_load(a, x->k, cb, off));
    *out = ok ? rt_kir_select(a, ok, id, rt_kir_int(a, -1)) : id;
    rt_lx_check(x, *out);
    return RT_OK;
}

rt_status rt_lx_read(rt_lx *x, const rt_expr *e, rt_kir_expr **out) {
    const rt_tensor *tn = &x->op->tensors[e->tensor];
    if (e->n_args != tn->n_dims)
        return rt_fail(x->err, RT_ERR_SPEC, e->loc, "%s takes %d indices (got %d)", tn->name,
                       (int)tn->n_dims, (int)e->n_args);
    for (int32_t d = 0; d < e->n_args; d++)
        if (e->args[d]->kind == RT_EXPR_CHILD)
            return rt_lx_read_at_child(x, e, out);
    if (x->ops->read)
        return x->ops->read(x, e, out);
    rt_kir_expr *idx[RT_MAX_DIMS];
    RT_TRY(rt_lx_indices(x, e, idx));
    return rt_lx_load(x, e, idx, out);
}

static rt_status rt_lx_var(rt_lx *x, const rt_expr *e, rt_kir_expr **out) {
    if (!x->s || e->var < 0 || e->var >= x->s->n_vars || x->var_of[e->var] < 0)
        return rt_fail(x->err, RT_ERR_SPEC, e->loc, "index variable outside its loop");
    *out = rt_kir_var_ref(x->a, x->ph, x->var_of[e->var]);
    rt_lx_check(x, *out);
    return RT_OK;
}

static rt_status rt_lx_truth(rt_lx *x, const rt_expr *e, rt_kir_expr **out) {
    rt_kir_expr *v;
    if (e->is_int) {
        RT_TRY(rt_lx_int(x, e, &v));
        *out = rt_kir_bin(x->a, RT_KIR_NE, v, rt_kir_int(x->a, 0));
    } else {
        RT_TRY(rt_lx_num(x, e, &v));
        *out = rt_kir_bin(x->a, RT_KIR_NE, v, rt_kir_flt(x->a, v->type, 0.0));
    }
    rt_lx_check(x, *out);
    return RT_OK;
}

static rt_kir_bop rt_lx_bop(rt_bop op) {
    static const rt_kir_bop map[RT_BOP_COUNT] = {
        RT_KIR_ADD, RT_KIR_SUB, RT_KIR_MUL, RT_KIR_DIV, RT_KIR_MOD, RT_KIR_LT, RT_KIR_LE,
        RT_KIR_GT,  RT_KIR_GE,  RT_KIR_EQ,  RT_KIR_NE,  RT_KIR_AND, RT_KIR_OR};
    return (unsigned)op < RT_BOP_COUNT ? map[op] : RT_KIR_ADD;
}

rt_status rt_lx_int(rt_lx *x, const rt_expr *e, rt_kir_expr **out) {
    rt_arena *a = x->a;
    rt_kir_expr *u, *w;
    switch (e->kind) {
    case RT_EXPR_NUM:
        *out = rt_kir_int(a, (int64_t)e->num);
        break;
    case RT_EXPR_INDEX:
        return rt_lx_var(x, e, out);
    case RT_EXPR_SIZE: {
        const rt_size *sz = e->sym >= 0 && e->sym < x->op->n_sizes ? &x->op->sizes[e->sym] : NULL;
        if (!sz || !sz->bound)
            return rt_lx_unsupported(x, e->loc, "a size bound at run time");
        *out = rt_kir_int(a, sz->value);
        break;
    }
    case RT_EXPR_CHILD:
        return rt_lx_child(x, e, out);
    case RT_EXPR_READ:
        if (!rt_dtype_is_int(x->op->tensors[e->tensor].dtype))
            goto via_float;
        RT_TRY(rt_lx_read(x, e, &u));
        *out = rt_kir_cast(a, RT_KIR_I64, u);
        break;
    case RT_EXPR_UNARY:
        RT_TRY(rt_lx_int(x, e->args[0], &u));
        *out =
            e->uop == RT_UOP_NEG ? rt_kir_neg(a, u) : rt_kir_bin(a, RT_KIR_EQ, u, rt_kir_int(a, 0));
        break;
    case RT_EXPR_BINARY:
        if (!e->args[0]->is_int || !e->args[1]->is_int)
            goto via_float;
        RT_TRY(rt_lx_int(x, e->args[0], &u));
        RT_TRY(rt_lx_int(x, e->args[1], &w));
        *out = rt_kir_bin(a, rt_lx_bop(e->bop), u, w);
        break;
    case RT_EXPR_COND: {
        rt_kir_expr *c;
        RT_TRY(rt_lx_truth(x, e->args[0], &c));
        RT_TRY(rt_lx_int(x, e->args[1], &u));
        RT_TRY(rt_lx_int(x, e->args[2], &w));
        *out = rt_kir_select(a, c, u, w);
        break;
    }
    case RT_EXPR_CALL: {
        bool all_int = rt_expr_int_call(e);
        if (!all_int)
            goto via_float;
        RT_TRY(rt_lx_int(x, e->args[0], &u));
        if (e->fn == RT_FN_ABS) {
            *out = rt_kir_bin(a, RT_KIR_MAX, u, rt_kir_neg(a, u));
            break;
        }
        for (int32_t i = 1; i < e->n_args; i++) {
            RT_TRY(rt_lx_int(x, e->args[i], &w));
            u = rt_kir_bin(a, e->fn == RT_FN_MIN ? RT_KIR_MIN : RT_KIR_MAX, u, w);
        }
        *out = u;
        break;
    }
    default:
        goto via_float;
    }
    rt_lx_check(x, *out);
    return RT_OK;
via_float : {
    rt_expr plain = *e;
    plain.is_int = false;
    RT_TRY(rt_lx_num(x, &plain, &u));
    *out = rt_kir_cast(a, RT_KIR_I64, u);
    rt_lx_check(x, *out);
    return RT_OK;
}
}

rt_status rt_lx_range(rt_lx *x, int32_t v, rt_kir_expr **lo, rt_kir_expr **hi) {
    const rt_ivar *iv = &x->s->vars[v];
    if (!iv->lo || !iv->hi)
        return rt_fail(x->err, RT_ERR_SPEC, iv->loc, "index '%s' has no range", iv->name);
    RT_TRY(rt_lx_int(x, iv->lo, lo));
    return rt_lx_int(x, iv->hi, hi);
}

// A reduction inside an expression: a compute-type accumulator zeroed in x->pre, its loops
// (binding the summed vars) there too, the summand translated inside them.
static rt_status rt_lx_sum(rt_lx *x, const rt_expr *e, rt_kir_expr **out) {
    rt_arena *a = x->a;
    int32_t acc = rt_kir_add_var(a, x->ph, "sum", x->ct);
    rt_kir_node *init = acc >= 0 ? rt_kir_append(a, x->pre, RT_KIR_N_FSET) : NULL;
    if (!init)
        return rt_lx_nomem(x);
    init->var = acc;
    init->value = rt_kir_flt(a, x->ct, 0.0);
    rt_kir_block *saved = x->pre, *blk = x->pre;
    for (int32_t i = 0; i < e->n_sum_vars; i++) {
        int32_t v = e->sum_vars[i];
        if (v < 0 || v >= x->s->n_vars)
            return rt_fail(x->err, RT_ERR_SPEC, e->loc, "reduction over an unknown index");
        rt_kir_expr *lo, *hi;
        RT_TRY(rt_lx_range(x, v, &lo, &hi));
        int32_t pv = rt_kir_add_var(a, x->ph, x->s->vars[v].name, RT_KIR_I64);
        x->var_of[v] = pv;
        rt_kir_loop_kind kind =
            i == e->n_sum_vars - 1 ? x->ops->sum_inner_loop : RT_KIR_LOOP_SERIAL;
        rt_kir_node *loop = pv >= 0 ? rt_kir_loop(a, blk, pv, lo, hi, kind) : NULL;
        if (!loop)
            return rt_lx_nomem(x);
        blk = &loop->body;
    }
    x->pre = blk;
    rt_kir_expr *v;
    rt_status st = rt_lx_num(x, e->args[0], &v);
    x->pre = saved;
    RT_TRY(st);
    rt_kir_node *add = rt_kir_append(a, blk, RT_KIR_N_FSET);
    rt_lx_check(x, add);
    if (add) {
        add->var = acc;
        add->value = rt_kir_bin(a, RT_KIR_ADD, rt_kir_var_ref(a, x->ph, acc), v);
    }
    *out = rt_kir_var_ref(a, x->ph, acc);
    rt_lx_check(x, *out);
    return RT_OK;
}

rt_status rt_lx_num(rt_lx *x, const rt_expr *e, rt_kir_expr **out) {
    rt_arena *a = x->a;
    rt_kir_type ct = x->ct;
    rt_kir_expr *u, *w;
    if (e->is_int && e->kind != RT_EXPR_NUM) {
        RT_TRY(rt_lx_int(x, e, &u));
        *out = rt_kir_cast(a, ct, u);
        rt_lx_check(x, *out);
        return RT_OK;
    }
    switch (e->kind) {
    case RT_EXPR_NUM:
        *out = rt_kir_flt(a, ct, e->num);
        break;
    case RT_EXPR_INDEX:
    case RT_EXPR_SIZE:
    case RT_EXPR_CHILD:
    case RT_EXPR_DIMREF:
        RT_TRY(rt_lx_int(x, e, &u));
        *out = rt_kir_cast(a, ct, u);
        break;
    case RT_EXPR_READ:
        RT_TRY(rt_lx_read(x, e, &u));
        *out = rt_kir_cast(a, ct, u);
        break;
    case RT_EXPR_UNARY:
        RT_TRY(rt_lx_num(x, e->args[0], &u));
        *out = e->uop == RT_UOP_NEG
                   ? rt_kir_neg(a, u)
                   : rt_kir_cast(a, ct, rt_kir_bin(a, RT_KIR_EQ, u, rt_kir_flt(a, ct, 0.0)));
        break;
    case RT_EXPR_BINARY:
        if (e->bop == RT_BOP_AND || e->bop == RT_BOP_OR) {
            RT_TRY(rt_lx_truth(x, e->args[0], &u));
            RT_TRY(rt_lx_truth(x, e->args[1], &w));
            *out = rt_kir_cast(a, ct, rt_kir_bin(a, rt_lx_bop(e->bop), u, w));
            break;
        }
        RT_TRY(rt_lx_num(x, e->args[0], &u));
        RT_TRY(rt_lx_num(x, e->args[1], &w));
        *out = rt_kir_bin(a, rt_lx_bop(e->bop), u, w);
        if (*out && !rt_kir_type_is_float((*out)->type))
            *out = rt_kir_cast(a, ct, *out);
        break;
    case RT_EXPR_COND: {
        rt_kir_expr *c;
        RT_TRY(rt_lx_truth(x, e->args[0], &c));
        RT_TRY(rt_lx_num(x, e->args[1], &u));
        RT_TRY(rt_lx_num(x, e->args[2], &w));
        *out = rt_kir_select(a, c, u, w);
        break;
    }
    case RT_EXPR_CALL:
        if (e->n_args < 1)
            return rt_fail(x->err, RT_ERR_SPEC, e->loc, "%s takes arguments", rt_fn_name(e->fn));
        RT_TRY(rt_lx_num(x, e->args[0], &u));
        if (e->n_args == 1) {
            *out = e->fn == RT_FN_MAX || e->fn == RT_FN_MIN ? u : rt_kir_call(a, e->fn, u, NULL);
            break;
        }
        for (int32_t i = 1; i < e->n_args; i++) {
            RT_TRY(rt_lx_num(x, e->args[i], &w));
            u = rt_kir_call(a, e->fn == RT_FN_MIN ? RT_FN_MIN : RT_FN_MAX, u, w);
        }
        *out = u;
        break;
    case RT_EXPR_SUM:
        if (e == x->sum_at) {
            *out = x->sum_value;
            break;
        }
        return rt_lx_sum(x, e, out);
    default:
        return rt_lx_unsupported(x, e->loc, "this expression");
    }
    rt_lx_check(x, *out);
    return RT_OK;
}
