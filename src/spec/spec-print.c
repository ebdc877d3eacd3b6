// spec-print.c: prints the canonical IR of an op (after spec-check.c) as deterministic text:
// sizes, trees, tensors with roles and storage (dense extents and bytes, or ragged packed),
// statements with their loops, ranges, vloops, implicit sums, predicates and fused axes, and
// directives. This is what `rtgen --dry-run --ir-only` shows and what tests/golden/ir/ pins.
#include "spec-int.h"

#include <math.h>

// Dim names are printed only where a later dim's extent refers to them.
static bool dim_referenced(const rt_tensor *t, int32_t d) {
    for (int32_t k = d + 1; k < t->n_dims; k++) {
        const rt_expr *stack[64];
        int32_t n = 0;
        if (t->dims[k].extent)
            stack[n++] = t->dims[k].extent;
        while (n > 0) {
            const rt_expr *e = stack[--n];
            if (e->kind == RT_EXPR_DIMREF && e->dim == d)
                return true;
            for (int32_t i = 0; i < e->n_args && n < 64; i++)
                stack[n++] = e->args[i];
        }
    }
    return false;
}

static void print_shape(const rt_op *op, const rt_tensor *t, rt_buf *out) {
    rt_buf_printf(out, "%s(", rt_dtype_name(t->dtype));
    for (int32_t d = 0; d < t->n_dims; d++) {
        if (d)
            rt_buf_puts(out, ", ");
        if (t->dims[d].name && dim_referenced(t, d))
            rt_buf_printf(out, "%s:", t->dims[d].name);
        if (t->dims[d].extent)
            rt_expr_print(op, NULL, t, t->dims[d].extent, out);
        else
            rt_buf_puts(out, "?");
    }
    rt_buf_puts(out, ")");
}

static void print_storage(const rt_op *op, const rt_tensor *t, rt_buf *out) {
    if (t->ragged) {
        rt_buf_puts(out, "ragged (packed)");
        return;
    }
    rt_buf_puts(out, "dense ");
    int64_t bytes = rt_dtype_bytes(t->dtype);
    bool known = true;
    for (int32_t d = 0; d < t->n_dims; d++) {
        int64_t v;
        if (d)
            rt_buf_puts(out, " x ");
        if (rt_expr_const_int(op, t->dims[d].extent, &v)) {
            rt_buf_printf(out, "%lld", (long long)v);
            known = known && !__builtin_mul_overflow(bytes, v, &bytes);
        } else {
            rt_expr_print(op, NULL, t, t->dims[d].extent, out);
            known = false;
        }
    }
    if (known)
        rt_buf_printf(out, ", %lld bytes", (long long)bytes);
}

static const char *role_text(const rt_tensor *t) {
    switch (t->role) {
    case RT_ROLE_INPUT:
        return "input";
    case RT_ROLE_OUTPUT:
        return t->shape_given ? "output" : "output (inferred)";
    default:
        return "temporary (inferred)";
    }
}

static void print_sums(const rt_op *op, const rt_stmt *st, const rt_expr *e, rt_buf *out) {
    if (!e)
        return;
    if (e->kind == RT_EXPR_SUM) {
        rt_buf_puts(out, "    implicit sum over");
        for (int32_t i = 0; i < e->n_sum_vars; i++)
            rt_buf_printf(out, "%s%s", i ? ", " : " ", st->vars[e->sum_vars[i]].name);
        rt_buf_puts(out, ": ");
        rt_expr_print(op, st, NULL, e->args[0], out);
        rt_buf_puts(out, "\n");
    }
    for (int32_t i = 0; i < e->n_args; i++)
        print_sums(op, st, e->args[i], out);
}

static void print_var(const rt_op *op, const rt_stmt *st, int32_t v, const char *word,
                      rt_buf *out) {
    const rt_ivar *iv = &st->vars[v];
    rt_buf_printf(out, "    %s %s in ", word, iv->name);
    rt_expr_print(op, st, NULL, iv->lo, out);
    rt_buf_puts(out, ":");
    rt_expr_print(op, st, NULL, iv->hi, out);
    int64_t lo, hi;
    if (rt_expr_const_int(op, iv->lo, &lo) && rt_expr_const_int(op, iv->hi, &hi))
        rt_buf_printf(out, " (%lld)", (long long)(hi - lo));
    rt_buf_printf(out, " %s%s%s\n", iv->is_reduce ? "reduce" : "spatial",
                  iv->ragged ? " vloop" : "", iv->from_where ? " (where)" : "");
}

static void print_stmt(const rt_op *op, int32_t si, rt_buf *out) {
    const rt_stmt *st = &op->stmts[si];
    rt_buf_printf(out, "stmt %d: %s(", si + 1, op->tensors[st->out].name);
    for (int32_t i = 0; i < st->n_lhs; i++)
        rt_buf_printf(out, "%s%s", i ? ", " : "", st->vars[st->lhs_vars[i]].name);
    rt_buf_printf(out, ") %s ", rt_assign_name(st->op));
    rt_expr_print(op, st, NULL, st->rhs, out);
    if (st->reduces)
        rt_buf_printf(out, "; accumulates in %s", rt_dtype_name(st->acc_dtype));
    rt_buf_puts(out, "\n");
    for (int32_t i = 0; i < st->n_preds; i++) {
        const rt_pred *p = &st->preds[i];
        rt_buf_printf(out, "    where %s%s(%s)\n", p->negate ? "!" : "", p->fn,
                      st->vars[p->var].name);
    }
    if (st->recursive)
        rt_buf_puts(out, "    recursive (reads its output at tree children)\n");
    for (int32_t k = 0; k < st->n_loops; k++)
        print_var(op, st, st->loops[k], "loop", out);
    for (int32_t v = 0; v < st->n_vars; v++)
        if (st->vars[v].is_reduce && st->op == RT_ASSIGN_SET)
            print_var(op, st, v, "sum", out);
    print_sums(op, st, st->rhs, out);
    rt_buf_puts(out, "    axes:");
    for (int32_t i = 0; i < st->n_axes; i++) {
        const rt_axis *ax = &st->axes[i];
        rt_buf_printf(out, "%s [%s] ", i ? "," : "", ax->name);
        if (ax->ragged)
            rt_buf_puts(out, "ragged");
        else if (ax->extent < 0)
            rt_buf_puts(out, "?");
        else
            rt_buf_printf(out, "%lld", (long long)ax->extent);
        if (ax->is_reduce)
            rt_buf_puts(out, " reduce");
    }
    rt_buf_puts(out, "\n");
}

void rt_op_print(const rt_op *op, rt_buf *out) {
    rt_buf_printf(out, "op %s (%s)\n", op->name, op->file);
    if (op->n_sizes) {
        rt_buf_puts(out, "sizes:");
        for (int32_t i = 0; i < op->n_sizes; i++) {
            const rt_size *s = &op->sizes[i];
            if (s->bound)
                rt_buf_printf(out, "%s %s = %lld%s", i ? "," : "", s->name, (long long)s->value,
                              s->overridden ? " (--set)" : "");
            else
                rt_buf_printf(out, "%s %s = ? (bound at run time)", i ? "," : "", s->name);
        }
        rt_buf_puts(out, "\n");
    }
    for (int32_t i = 0; i < op->n_trees; i++) {
        const rt_tree *t = &op->trees[i];
        rt_buf_printf(out, "tree %s: %s nodes, at most %d children\n", t->name,
                      op->sizes[t->n_sym].name, t->max_children);
    }
    for (int32_t i = 0; i < op->n_tensors; i++) {
        const rt_tensor *t = &op->tensors[i];
        rt_buf_printf(out, "tensor %s: ", t->name);
        print_shape(op, t, out);
        rt_buf_printf(out, " %s", role_text(t));
        if (t->is_length)
            rt_buf_puts(out, ", length");
        if (t->is_index)
            rt_buf_puts(out, ", gather index");
        if (t->has_pad) {
            rt_buf_puts(out, ", pad ");
            double v = t->pad_value;
            rt_num_print(v, v > -9e15 && v < 9e15 && v == floor(v), out);
        }
        rt_buf_puts(out, ", ");
        print_storage(op, t, out);
        rt_buf_puts(out, "\n");
    }
    for (int32_t i = 0; i < op->n_stmts; i++)
        print_stmt(op, i, out);
    for (int32_t i = 0; i < op->n_directives; i++) {
        const rt_directive *d = &op->directives[i];
        rt_buf_printf(out, "directive @%s(", d->name);
        for (int32_t k = 0; k < d->n_args; k++) {
            const rt_darg *a = &d->args[k];
            if (k)
                rt_buf_puts(out, ", ");
            if (a->ident)
                rt_buf_puts(out, a->ident);
            if (a->ident && a->has_value)
                rt_buf_puts(out, "=");
            if (!a->ident || a->has_value)
                rt_buf_printf(out, "%lld", (long long)a->value);
        }
        rt_buf_puts(out, ")\n");
    }
}
