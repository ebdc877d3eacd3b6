// spec-json.c: the canonical IR of an op as JSON (jansson), for `rtgen --json` reports and
// tools: sizes, tensors with dims and storage, trees, statements with loops, implicit sums and
// fused axes, and directives. Mirrors spec-print.c; jansson stays inside this file.
#include "spec-int.h"

#include <jansson.h>

static json_t *expr_json(const rt_op *op, const rt_stmt *st, const rt_tensor *t, const rt_expr *e) {
    rt_buf b;
    rt_arena *a = rt_arena_new(4096);
    if (!a)
        return json_null();
    rt_buf_init(&b, a);
    rt_expr_print(op, st, t, e, &b);
    json_t *j = b.oom || !b.data ? json_null() : json_string(b.data);
    rt_arena_free(a);
    return j;
}

static const char *role_name(rt_role r) {
    return r == RT_ROLE_INPUT ? "input" : r == RT_ROLE_OUTPUT ? "output" : "temporary";
}

static json_t *tensor_json(const rt_op *op, const rt_tensor *t) {
    json_t *dims = json_array();
    for (int32_t d = 0; d < t->n_dims; d++) {
        const rt_dim *dim = &t->dims[d];
        json_t *jd = json_object();
        json_object_set_new(jd, "name", dim->name ? json_string(dim->name) : json_null());
        json_object_set_new(jd, "extent", expr_json(op, NULL, t, dim->extent));
        int64_t v;
        if (rt_expr_const_int(op, dim->extent, &v))
            json_object_set_new(jd, "value", json_integer(v));
        json_object_set_new(jd, "ragged", json_boolean(dim->ragged));
        json_array_append_new(dims, jd);
    }
    json_t *j = json_object();
    json_object_set_new(j, "name", json_string(t->name));
    json_object_set_new(j, "dtype", json_string(rt_dtype_name(t->dtype)));
    json_object_set_new(j, "role", json_string(role_name(t->role)));
    json_object_set_new(j, "shape_given", json_boolean(t->shape_given));
    json_object_set_new(j, "dims", dims);
    json_object_set_new(j, "pad", t->has_pad ? json_real(t->pad_value) : json_null());
    json_object_set_new(j, "is_length", json_boolean(t->is_length));
    json_object_set_new(j, "is_index", json_boolean(t->is_index));
    json_object_set_new(j, "storage", json_string(t->ragged ? "ragged (packed)" : "dense"));
    return j;
}

static json_t *var_json(const rt_op *op, const rt_stmt *st, int32_t v) {
    const rt_ivar *iv = &st->vars[v];
    json_t *j = json_object();
    json_object_set_new(j, "name", json_string(iv->name));
    json_object_set_new(j, "lo", expr_json(op, st, NULL, iv->lo));
    json_object_set_new(j, "hi", expr_json(op, st, NULL, iv->hi));
    int64_t lo, hi;
    if (rt_expr_const_int(op, iv->lo, &lo) && rt_expr_const_int(op, iv->hi, &hi))
        json_object_set_new(j, "extent", json_integer(hi - lo));
    json_object_set_new(j, "ragged", json_boolean(iv->ragged));
    json_object_set_new(j, "reduce", json_boolean(iv->is_reduce));
    json_object_set_new(j, "from_where", json_boolean(iv->from_where));
    return j;
}

static void sums_json(const rt_op *op, const rt_stmt *st, const rt_expr *e, json_t *arr) {
    if (!e)
        return;
    if (e->kind == RT_EXPR_SUM) {
        json_t *vars = json_array();
        for (int32_t i = 0; i < e->n_sum_vars; i++)
            json_array_append_new(vars, json_string(st->vars[e->sum_vars[i]].name));
        json_t *j = json_object();
        json_object_set_new(j, "vars", vars);
        json_object_set_new(j, "over", expr_json(op, st, NULL, e->args[0]));
        json_array_append_new(arr, j);
    }
    for (int32_t i = 0; i < e->n_args; i++)
        sums_json(op, st, e->args[i], arr);
}

static json_t *stmt_json(const rt_op *op, const rt_stmt *st) {
    json_t *j = json_object();
    rt_arena *a = rt_arena_new(4096);
    if (a) {
        rt_buf b;
        rt_buf_init(&b, a);
        rt_buf_printf(&b, "%s(", op->tensors[st->out].name);
        for (int32_t i = 0; i < st->n_lhs; i++)
            rt_buf_printf(&b, "%s%s", i ? ", " : "", st->vars[st->lhs_vars[i]].name);
        rt_buf_printf(&b, ") %s ", rt_assign_name(st->op));
        rt_expr_print(op, st, NULL, st->rhs, &b);
        if (!b.oom && b.data)
            json_object_set_new(j, "text", json_string(b.data));
        rt_arena_free(a);
    }
    json_object_set_new(j, "tensor", json_string(op->tensors[st->out].name));
    json_object_set_new(j, "op", json_string(rt_assign_name(st->op)));
    json_object_set_new(j, "recursive", json_boolean(st->recursive));
    json_object_set_new(j, "reduces", json_boolean(st->reduces));
    json_object_set_new(j, "acc_dtype", json_string(rt_dtype_name(st->acc_dtype)));
    json_t *loops = json_array();
    for (int32_t k = 0; k < st->n_loops; k++)
        json_array_append_new(loops, var_json(op, st, st->loops[k]));
    json_object_set_new(j, "loops", loops);
    json_t *sv = json_array();
    for (int32_t v = 0; v < st->n_vars; v++)
        if (st->vars[v].is_reduce && st->op == RT_ASSIGN_SET)
            json_array_append_new(sv, var_json(op, st, v));
    json_object_set_new(j, "sum_vars", sv);
    json_t *sums = json_array();
    sums_json(op, st, st->rhs, sums);
    json_object_set_new(j, "sums", sums);
    json_t *preds = json_array();
    for (int32_t i = 0; i < st->n_preds; i++) {
        json_t *p = json_object();
        json_object_set_new(p, "fn", json_string(st->preds[i].fn));
        json_object_set_new(p, "var", json_string(st->vars[st->preds[i].var].name));
        json_object_set_new(p, "negate", json_boolean(st->preds[i].negate));
        json_array_append_new(preds, p);
    }
    json_object_set_new(j, "predicates", preds);
    json_t *axes = json_array();
    for (int32_t i = 0; i < st->n_axes; i++) {
        const rt_axis *ax = &st->axes[i];
        json_t *ja = json_object(), *mem = json_array();
        for (int32_t m = 0; m < ax->n_members; m++)
            json_array_append_new(mem, json_string(st->vars[ax->members[m]].name));
        json_object_set_new(ja, "name", json_string(ax->name));
        json_object_set_new(ja, "members", mem);
        json_object_set_new(ja, "extent", json_integer(ax->extent));
        json_object_set_new(ja, "ragged", json_boolean(ax->ragged));
        json_object_set_new(ja, "reduce", json_boolean(ax->is_reduce));
        json_array_append_new(axes, ja);
    }
    json_object_set_new(j, "axes", axes);
    return j;
}

void *rt_op_to_json(const rt_op *op) {
    json_t *j = json_object();
    json_object_set_new(j, "name", json_string(op->name));
    json_object_set_new(j, "file", json_string(op->file));
    json_t *sizes = json_array();
    for (int32_t i = 0; i < op->n_sizes; i++) {
        json_t *s = json_object();
        json_object_set_new(s, "name", json_string(op->sizes[i].name));
        json_object_set_new(s, "value",
                            op->sizes[i].bound ? json_integer(op->sizes[i].value) : json_null());
        json_object_set_new(s, "bound", json_boolean(op->sizes[i].bound));
        json_object_set_new(s, "overridden", json_boolean(op->sizes[i].overridden));
        json_array_append_new(sizes, s);
    }
    json_object_set_new(j, "sizes", sizes);
    json_t *tensors = json_array();
    for (int32_t i = 0; i < op->n_tensors; i++)
        json_array_append_new(tensors, tensor_json(op, &op->tensors[i]));
    json_object_set_new(j, "tensors", tensors);
    json_t *trees = json_array();
    for (int32_t i = 0; i < op->n_trees; i++) {
        json_t *t = json_object();
        json_object_set_new(t, "name", json_string(op->trees[i].name));
        json_object_set_new(t, "nodes", json_string(op->sizes[op->trees[i].n_sym].name));
        json_object_set_new(t, "max_children", json_integer(op->trees[i].max_children));
        json_array_append_new(trees, t);
    }
    json_object_set_new(j, "trees", trees);
    json_t *stmts = json_array();
    for (int32_t i = 0; i < op->n_stmts; i++)
        json_array_append_new(stmts, stmt_json(op, &op->stmts[i]));
    json_object_set_new(j, "statements", stmts);
    json_t *dirs = json_array();
    for (int32_t i = 0; i < op->n_directives; i++) {
        const rt_directive *d = &op->directives[i];
        json_t *jd = json_object(), *args = json_array();
        for (int32_t k = 0; k < d->n_args; k++) {
            const rt_darg *a = &d->args[k];
            if (!a->ident)
                json_array_append_new(args, json_integer(a->value));
            else if (!a->has_value)
                json_array_append_new(args, json_string(a->ident));
            else
                json_array_append_new(args, json_pack("{sI}", a->ident, (json_int_t)a->value));
        }
        json_object_set_new(jd, "name", json_string(d->name));
        json_object_set_new(jd, "args", args);
        json_array_append_new(dirs, jd);
    }
    json_object_set_new(j, "directives", dirs);
    return j;
}
