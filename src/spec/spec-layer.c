// spec-layer.c: the chain of a layer — a spec file of several defs, where a parameter of a later
// def names an output of an earlier one (an intermediate) or a layer input. Last stage of the
// front end for such files: after every def was parsed and checked on its own (spec-parse.c,
// spec-check.c), the defs are linked by name and the chain is checked: definition before use,
// one definition per output, and the same dtype and shape (dense extents by value, ragged extents
// by the length tensor and outer dims they read) wherever a layer tensor is named.
#include "spec-int.h"

#include <string.h>

bool rt_layer_extent_equal(const rt_op *oa, const rt_expr *a, const rt_op *ob, const rt_expr *b) {
    int64_t va, vb;
    if (rt_expr_const_int(oa, a, &va) && rt_expr_const_int(ob, b, &vb))
        return va == vb;
    if (a->kind != b->kind || a->n_args != b->n_args)
        return false;
    switch (a->kind) {
    case RT_EXPR_NUM:
        return a->num == b->num;
    case RT_EXPR_SIZE:
        return strcmp(oa->sizes[a->sym].name, ob->sizes[b->sym].name) == 0;
    case RT_EXPR_DIMREF:
        return a->dim == b->dim;
    case RT_EXPR_INDEX:
        return a->var == b->var;
    case RT_EXPR_READ:
        if (strcmp(oa->tensors[a->tensor].name, ob->tensors[b->tensor].name) != 0)
            return false;
        break;
    case RT_EXPR_UNARY:
        if (a->uop != b->uop)
            return false;
        break;
    case RT_EXPR_BINARY:
        if (a->bop != b->bop)
            return false;
        break;
    case RT_EXPR_CALL:
        if (a->fn != b->fn)
            return false;
        break;
    case RT_EXPR_COND:
        break;
    default: // children and sums never appear in extents
        return false;
    }
    for (int32_t i = 0; i < a->n_args; i++)
        if (!rt_layer_extent_equal(oa, a->args[i], ob, b->args[i]))
            return false;
    return true;
}

// Dim d's extent as written, with its value where it is a size symbol ("M = 512").
static const char *extent_text(rt_arena *a, const rt_op *op, const rt_tensor *t, int32_t d) {
    rt_buf b;
    rt_buf_init(&b, a);
    const rt_expr *e = t->dims[d].extent;
    rt_expr_print(op, NULL, t, e, &b);
    int64_t v;
    if (e->kind != RT_EXPR_NUM && rt_expr_const_int(op, e, &v))
        rt_buf_printf(&b, " = %lld", (long long)v);
    return b.data ? b.data : "?";
}

// Checks that tensor t of op k (a parameter) agrees with layer tensor lt: its dtype, rank and
// every dim's extent, each error at the parameter (or the dim) with where lt was declared.
static rt_status check_same(rt_arena *a, const rt_layer *l, int32_t k, int32_t t,
                            const rt_layer_tensor *lt, rt_err *err) {
    const rt_op *op = l->ops[k], *src = l->ops[lt->op];
    const rt_tensor *x = &op->tensors[t], *y = &src->tensors[lt->tensor];
    const char *where =
        rt_arena_printf(a, "def %s (%d:%d)", src->name, (int)y->loc.line, (int)y->loc.col);
    if (!where)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    if (x->dtype != y->dtype)
        return rt_fail(err, RT_ERR_SPEC, x->loc, "'%s' is %s here but %s in %s", x->name,
                       rt_dtype_name(x->dtype), rt_dtype_name(y->dtype), where);
    if (x->n_dims != y->n_dims)
        return rt_fail(err, RT_ERR_SPEC, x->loc, "'%s' has %d dims here but %d in %s", x->name,
                       (int)x->n_dims, (int)y->n_dims, where);
    for (int32_t d = 0; d < x->n_dims; d++) {
        if (rt_layer_extent_equal(op, x->dims[d].extent, src, y->dims[d].extent))
            continue;
        const char *xs = extent_text(a, op, x, d), *ys = extent_text(a, src, y, d);
        return rt_fail(err, RT_ERR_SPEC, x->dims[d].loc, "dim %d of '%s' is %s here but %s in %s",
                       (int)d, x->name, xs ? xs : "?", ys ? ys : "?", where);
    }
    return RT_OK;
}

// Index of the layer tensor called name among l->tensors[0..n), -1 when none.
static int32_t find_layer_tensor(const rt_layer *l, const char *name) {
    for (int32_t i = 0; i < l->n_tensors; i++)
        if (strcmp(l->tensors[i].name, name) == 0)
            return i;
    return -1;
}

// The output of a def after k called name: its def, and its tensor in *out_t; -1 when none.
static int32_t later_output(const rt_layer *l, int32_t k, const char *name, int32_t *out_t) {
    for (int32_t j = k + 1; j < l->n_ops; j++)
        for (int32_t o = 0; o < l->ops[j]->n_outputs; o++)
            if (!strcmp(l->ops[j]->tensors[l->ops[j]->outputs[o]].name, name)) {
                *out_t = l->ops[j]->outputs[o];
                return j;
            }
    return -1;
}

// Links the parameters of def k: to an earlier def's output, or to a layer input.
static rt_status link_params(rt_arena *a, rt_layer *l, int32_t k, rt_err *err) {
    const rt_op *op = l->ops[k];
    if (op->n_trees && l->n_ops > 1)
        return rt_fail(err, RT_ERR_SPEC, op->trees[0].loc,
                       "tree parameters are not allowed in a layer of several defs");
    for (int32_t t = 0; t < op->n_tensors; t++) {
        const rt_tensor *x = &op->tensors[t];
        if (x->role != RT_ROLE_INPUT)
            continue;
        int32_t i = find_layer_tensor(l, x->name), lt;
        if (i >= 0) {
            RT_TRY(check_same(a, l, k, t, &l->tensors[i], err));
            l->tensors[i].is_output = false; // read by a later def: an intermediate
            l->tensor_of[k][t] = i;
            continue;
        }
        int32_t j = later_output(l, k, x->name, &lt);
        if (j >= 0) {
            rt_loc at = l->ops[j]->tensors[lt].loc;
            return rt_fail(err, RT_ERR_SPEC, x->loc,
                           "'%s' is used before its definition (def %s outputs it at %d:%d)",
                           x->name, l->ops[j]->name, (int)at.line, (int)at.col);
        }
        l->tensors[l->n_tensors] = (rt_layer_tensor){x->name, k, t, true, false};
        l->tensor_of[k][t] = l->n_tensors++;
    }
    return RT_OK;
}

// Links the outputs of def k: each a new layer tensor, defined once.
static rt_status link_outputs(rt_layer *l, int32_t k, rt_err *err) {
    const rt_op *op = l->ops[k];
    for (int32_t o = 0; o < op->n_outputs; o++) {
        int32_t t = op->outputs[o];
        const rt_tensor *x = &op->tensors[t];
        int32_t i = find_layer_tensor(l, x->name);
        // Only an earlier def's output can be found: an earlier parameter of this name was
        // already reported as used before its definition (link_params).
        if (i >= 0) {
            const rt_layer_tensor *lt = &l->tensors[i];
            rt_loc at = l->ops[lt->op]->tensors[lt->tensor].loc;
            return rt_fail(err, RT_ERR_SPEC, x->loc,
                           "output '%s' is defined twice (first by def %s at %d:%d)", x->name,
                           l->ops[lt->op]->name, (int)at.line, (int)at.col);
        }
        l->tensors[l->n_tensors] = (rt_layer_tensor){x->name, k, t, false, true};
        l->tensor_of[k][t] = l->n_tensors++;
    }
    return RT_OK;
}

rt_status rt_spec_layer_link(rt_arena *a, rt_layer *l, rt_err *err) {
    int32_t cap = 0;
    for (int32_t k = 0; k < l->n_ops; k++)
        cap += l->ops[k]->n_tensors;
    l->tensors = rt_arena_calloc(a, (size_t)cap + 1, sizeof *l->tensors);
    l->tensor_of = rt_arena_calloc(a, (size_t)l->n_ops + 1, sizeof *l->tensor_of);
    if (!l->tensors || !l->tensor_of)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    for (int32_t k = 0; k < l->n_ops; k++) {
        l->tensor_of[k] = rt_arena_calloc(a, (size_t)l->ops[k]->n_tensors + 1, sizeof(int32_t));
        if (!l->tensor_of[k])
            return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        for (int32_t t = 0; t < l->ops[k]->n_tensors; t++)
            l->tensor_of[k][t] = -1;
    }
    l->n_tensors = 0;
    for (int32_t k = 0; k < l->n_ops; k++) {
        RT_TRY(link_params(a, l, k, err));
        RT_TRY(link_outputs(l, k, err));
    }
    const char *base = strrchr(l->file, '/');
    base = base ? base + 1 : l->file;
    size_t n = strlen(base);
    if (n > 5 && !strcmp(base + n - 5, ".spec"))
        n -= 5;
    l->name = rt_arena_strndup(a, base, n);
    if (!l->name)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    return RT_OK;
}
