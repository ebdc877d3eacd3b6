// lower-tree.c: the statement groups that recurse over a tree (CORTEX), as both lowerings
// (lower-cpu.c, lower-gpu.c) run them. The host linearizes the tree (src/tree.c: level order,
// leaves first); a group's statements then run on that order, leaf statements at level 0 and
// inner statements level by level, so that every child is computed before its parents read it.
// This file finds the groups, checks that their shape allows that order and says which
// statements run where; the phases themselves are each lowering's own.
#include "lower-expr.h"

#include <string.h>

bool rt_tree_stmt(const rt_op *op, int32_t si) {
    return op->stmts[si].recursive || op->stmts[si].n_preds > 0;
}

static bool rt_tree_mentions(const rt_expr *e, int32_t t) {
    if (!e)
        return false;
    if (e->kind == RT_EXPR_CHILD && e->tree == t)
        return true;
    for (int32_t i = 0; i < e->n_args; i++)
        if (rt_tree_mentions(e->args[i], t))
            return true;
    return false;
}

bool rt_tree_used(const rt_op *op, int32_t t) {
    for (int32_t si = 0; si < op->n_stmts; si++) {
        const rt_stmt *s = &op->stmts[si];
        for (int32_t p = 0; p < s->n_preds; p++)
            if (s->preds[p].tree == t)
                return true;
        if (rt_tree_mentions(s->rhs, t))
            return true;
    }
    return false;
}

static rt_status rt_tree_unsupported(rt_err *err, rt_loc loc, const char *backend,
                                     const char *what) {
    return rt_fail(err, RT_ERR_BACKEND, loc, "%s is not supported by the %s backend", what,
                   backend);
}

// The first child expression of e naming a tree other than *tree (setting *tree when it is
// still -1), NULL when every child of e names *tree.
static const rt_expr *rt_tree_other(const rt_expr *e, int32_t *tree) {
    if (!e)
        return NULL;
    if (e->kind == RT_EXPR_CHILD) {
        if (*tree < 0)
            *tree = e->tree;
        else if (e->tree != *tree)
            return e;
    }
    for (int32_t i = 0; i < e->n_args; i++) {
        const rt_expr *o = rt_tree_other(e->args[i], tree);
        if (o)
            return o;
    }
    return NULL;
}

// Whether index expression x is a child (or a child of a child ...) of node var v.
static bool rt_tree_below(const rt_expr *x, int32_t v) {
    while (x->kind == RT_EXPR_CHILD && x->n_args == 1)
        x = x->args[0];
    return x != NULL && x->kind == RT_EXPR_INDEX && x->var == v;
}

// The first read of tensor t in e that is not at a child of node var v, NULL when none.
static const rt_expr *rt_tree_bad_read(const rt_expr *e, int32_t t, int32_t v) {
    if (!e)
        return NULL;
    if (e->kind == RT_EXPR_READ && e->tensor == t &&
        (e->n_args < 1 || e->args[0]->kind != RT_EXPR_CHILD || !rt_tree_below(e->args[0], v)))
        return e;
    for (int32_t i = 0; i < e->n_args; i++) {
        const rt_expr *r = rt_tree_bad_read(e->args[i], t, v);
        if (r)
            return r;
    }
    return NULL;
}

// Checks statement s of a group over tree *tree (-1: not known yet) and says where it runs.
static rt_status rt_tree_check_stmt(const rt_op *op, const rt_stmt *s, const char *backend,
                                    int32_t *tree, bool *at_leaves, bool *at_inner, rt_err *err) {
    if (s->n_lhs < 1 || s->n_loops < 1 || s->loops[0] != s->lhs_vars[0])
        return rt_tree_unsupported(err, s->loc, backend,
                                   "a tree statement whose first loop is not its node index");
    int32_t v = s->lhs_vars[0];
    *at_leaves = *at_inner = true;
    for (int32_t p = 0; p < s->n_preds; p++) {
        const rt_pred *pr = &s->preds[p];
        if (pr->var != v)
            return rt_tree_unsupported(err, pr->loc, backend,
                                       "a leaf predicate on another index than the first");
        if (*tree >= 0 && pr->tree != *tree)
            return rt_tree_unsupported(err, pr->loc, backend, "two trees in one recursion");
        *tree = pr->tree;
        if (pr->negate)
            *at_leaves = false;
        else
            *at_inner = false;
    }
    const rt_expr *other = rt_tree_other(s->rhs, tree);
    if (other)
        return rt_tree_unsupported(err, other->loc, backend, "two trees in one recursion");
    if (*tree < 0)
        return rt_tree_unsupported(err, s->loc, backend, "a tree statement without a tree");
    const rt_size *n = &op->sizes[op->trees[*tree].n_sym];
    const rt_ivar *iv = &s->vars[v];
    int64_t lo, hi;
    if (!n->bound)
        return rt_tree_unsupported(err, op->trees[*tree].loc, backend,
                                   "a tree whose node count is bound at run time");
    if (!iv->lo || !iv->hi || !rt_expr_const_int(op, iv->lo, &lo) ||
        !rt_expr_const_int(op, iv->hi, &hi) || lo != 0 || hi != n->value)
        return rt_tree_unsupported(err, iv->loc, backend,
                                   "a node index over part of the tree's nodes");
    const rt_expr *bad = rt_tree_bad_read(s->rhs, s->out, v);
    if (bad)
        return rt_tree_unsupported(err, bad->loc, backend,
                                   "a recursive read at a child of another node than the "
                                   "statement's own");
    return RT_OK;
}

rt_status rt_tree_group_plan(const rt_op *op, int32_t si, const char *backend, rt_tree_group *out,
                             rt_err *err) {
    memset(out, 0, sizeof *out);
    out->tensor = op->stmts[si].out;
    out->tree = -1;
    for (int32_t j = si; j < op->n_stmts; j++) {
        const rt_stmt *s = &op->stmts[j];
        if (s->out != out->tensor)
            continue;
        if (out->n_stmts == RT_TREE_GROUP_MAX)
            return rt_tree_unsupported(err, s->loc, backend,
                                       "a tree recursion of more than 16 statements");
        int32_t i = out->n_stmts++;
        out->stmts[i] = j;
        out->recursive = out->recursive || s->recursive;
        RT_TRY(rt_tree_check_stmt(op, s, backend, &out->tree, &out->at_leaves[i], &out->at_inner[i],
                                  err));
    }
    for (int32_t i = 0; i < out->n_stmts && !out->recursive; i++) {
        const rt_stmt *s = &op->stmts[out->stmts[i]];
        if (s->op != RT_ASSIGN_SET && s->op != RT_ASSIGN_ADD)
            return rt_tree_unsupported(err, s->loc, backend,
                                       "a predicated reduction that starts from its identity "
                                       "outside a recursion");
    }
    return RT_OK;
}

const char *rt_tree_group_what(rt_arena *a, const rt_op *op, const rt_tree_group *g, bool inner) {
    rt_buf b;
    rt_buf_init(&b, a);
    int32_t n = 0;
    for (int32_t i = 0; i < g->n_stmts; i++)
        n += inner ? g->at_inner[i] : g->at_leaves[i];
    rt_buf_printf(&b, "statement%s", n > 1 ? "s" : "");
    for (int32_t i = 0, k = 0; i < g->n_stmts; i++) {
        if (!(inner ? g->at_inner[i] : g->at_leaves[i]))
            continue;
        const rt_stmt *s = &op->stmts[g->stmts[i]];
        rt_buf_printf(&b, "%s %d", k++ ? "," : "", (int)g->stmts[i]);
        for (int32_t p = 0; p < s->n_preds; p++)
            rt_buf_printf(&b, " (where %sleaf(%s))", s->preds[p].negate ? "!" : "",
                          s->vars[s->preds[p].var].name);
    }
    const char *tree = op->trees[g->tree].name;
    if (inner)
        rt_buf_printf(&b,
                      " of %s, level by level over %s's levels 1.. (children first), the nodes "
                      "of a level in parallel",
                      op->tensors[g->tensor].name, tree);
    else
        rt_buf_printf(&b, " of %s at the leaves of %s (its level 0), in parallel",
                      op->tensors[g->tensor].name, tree);
    return b.oom ? NULL : b.data;
}

rt_status rt_tree_add_buffers(rt_arena *a, rt_kir_kernel *k, const rt_op *op,
                              int32_t (**tree_buf)[RT_KIR_TREE_FIELD_COUNT], int32_t **tree_child,
                              rt_err *err) {
    int32_t(*bufs)[RT_KIR_TREE_FIELD_COUNT];
    int32_t *child;
    RT_ALLOC(a, bufs, op->n_trees, err);
    RT_ALLOC(a, child, op->n_trees, err);
    for (int32_t t = 0; t < op->n_trees; t++) {
        bool used = rt_tree_used(op, t);
        for (int32_t f = 0; f < RT_KIR_TREE_FIELD_COUNT; f++) {
            bufs[t][f] = -1;
            if (!used)
                continue;
            const char *name = rt_arena_printf(a, "tree_%s_%s", op->trees[t].name,
                                               rt_kir_tree_field_name((rt_kir_tree_field)f));
            bufs[t][f] = name ? rt_kir_add_buf(a, k, name, RT_KIR_BUF_TREE, RT_KIR_I32, t, f) : -1;
            if (bufs[t][f] < 0)
                return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        }
        child[t] = bufs[t][RT_KIR_TREE_CHILD];
    }
    *tree_buf = bufs;
    *tree_child = child;
    return RT_OK;
}
