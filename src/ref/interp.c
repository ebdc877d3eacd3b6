// interp.c: the reference interpreter — the numerical oracle every backend is checked against.
// Holds the packed ragged storage layout (layout.h: offset tables built from the bound lengths,
// O(rank) access), the bindings of sizes, lengths, trees and tensor data with the seeded input
// generator (bindings.h), a plain tree-walking evaluator of the op-spec IR (spec.h) with double
// accumulation, and level-by-level execution of recursive statements (CORTEX). Obviously correct first, fast enough second (a 64^3 matmul takes milliseconds).
#include "interp.h"
#include "rng.h"
#include "spec-eval.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// Largest tensor the interpreter lays out (elements); beyond it the run would not finish anyway.
#define RT_INTERP_MAX_ELEMS ((int64_t)1 << 32)

// Stream numbers: tensor t uses t, tree k uses RT_STREAM_TREE + k, the histogram sampling of
// length tensor t uses RT_STREAM_LENGTHS + t.
#define RT_STREAM_TREE    ((uint64_t)1 << 32)
#define RT_STREAM_LENGTHS ((uint64_t)2 << 32)

// ---------------------------------------------------------------------------------------------
// Evaluation of IR expressions
// ---------------------------------------------------------------------------------------------

typedef struct rt_eval {
    const rt_op *op;
    rt_bindings *b;
    const rt_stmt *stmt;     // NULL when evaluating a dim extent
    int64_t *vars;           // statement: index var values
    const int64_t *dims;     // dim extent: indices of the outer dims (RT_EXPR_DIMREF)
    const rt_tensor *tensor; // dim extent: the tensor (for messages)
    rt_err *err;
    rt_spec_eval se; // the shared integer evaluator (rt_eval_begin)
} rt_eval;

static rt_status rt_eval_num(rt_eval *ev, const rt_expr *e, double *out);
static rt_status rt_eval_int(rt_eval *ev, const rt_expr *e, int64_t *out);

static const char *rt_eval_print(rt_eval *ev, const rt_expr *e) {
    rt_buf buf;
    rt_buf_init(&buf, ev->b->arena);
    rt_expr_print(ev->op, ev->stmt, ev->tensor, e, &buf);
    return buf.data && !buf.oom ? buf.data : "expression";
}

// Whether the leaf/!leaf predicates of stmt on var v hold for its current value.
static rt_status rt_preds_hold(rt_eval *ev, int32_t v, bool *out) {
    *out = true;
    const rt_stmt *s = ev->stmt;
    for (int32_t i = 0; i < s->n_preds; i++) {
        const rt_pred *p = &s->preds[i];
        if (p->var != v)
            continue;
        if (strcmp(p->fn, "leaf") != 0)
            return rt_fail(ev->err, RT_ERR_SPEC, p->loc, "unknown predicate '%s'", p->fn);
        const rt_tree_data *t = ev->b->trees[p->tree];
        int64_t node = ev->vars[v];
        bool leaf = t && node >= 0 && node < t->n_nodes && t->n_children[node] == 0;
        if (leaf == p->negate) {
            *out = false;
            return RT_OK;
        }
    }
    return RT_OK;
}

// Range [lo, hi) of statement var v at the current values of the outer vars.
static rt_status rt_var_range(rt_eval *ev, int32_t v, int64_t *lo, int64_t *hi) {
    const rt_ivar *iv = &ev->stmt->vars[v];
    if (!iv->lo || !iv->hi)
        return rt_fail(ev->err, RT_ERR_SPEC, iv->loc, "index '%s' has no range", iv->name);
    RT_TRY(rt_eval_int(ev, iv->lo, lo));
    return rt_eval_int(ev, iv->hi, hi);
}

// Sum of e->args[0] over e->sum_vars[k..).
static rt_status rt_eval_sum(rt_eval *ev, const rt_expr *e, int32_t k, double *acc) {
    if (k == e->n_sum_vars) {
        double x;
        RT_TRY(rt_eval_num(ev, e->args[0], &x));
        *acc += x;
        return RT_OK;
    }
    int32_t v = e->sum_vars[k];
    int64_t lo, hi;
    RT_TRY(rt_var_range(ev, v, &lo, &hi));
    for (int64_t i = lo; i < hi; i++) {
        ev->vars[v] = i;
        bool ok;
        RT_TRY(rt_preds_hold(ev, v, &ok));
        if (ok)
            RT_TRY(rt_eval_sum(ev, e, k + 1, acc));
    }
    return RT_OK;
}

// Walks layout l with idx: the offset, or the first dim whose index is out of its extent.
static bool rt_layout_walk(const rt_layout *l, const int64_t *idx, int64_t *out_offset,
                           int32_t *out_bad_dim, int64_t *out_bad_extent) {
    int64_t pos = 0;
    for (int32_t k = 0; k < l->n_dims; k++) {
        int64_t base, extent;
        if (l->start[k]) {
            base = l->start[k][pos];
            extent = l->start[k][pos + 1] - base;
        } else {
            extent = l->extent[k];
            base = pos * extent;
        }
        if (idx[k] < 0 || idx[k] >= extent) {
            *out_bad_dim = k;
            *out_bad_extent = extent;
            return false;
        }
        pos = base + idx[k];
    }
    *out_offset = pos;
    return true;
}

bool rt_layout_offset(const rt_layout *l, const int64_t *idx, int64_t *out_offset) {
    int32_t bad_dim = 0;
    int64_t bad_extent;
    return rt_layout_walk(l, idx, out_offset, &bad_dim, &bad_extent);
}

// Value of a tensor read; pad tensors give their pad value outside the extent, a read at a
// missing tree child (-1) gives 0.
static rt_status rt_eval_read(rt_eval *ev, const rt_expr *e, double *out) {
    const rt_tensor *t = &ev->op->tensors[e->tensor];
    const rt_tensor_data *d = &ev->b->tensors[e->tensor];
    if (e->n_args != t->n_dims)
        return rt_fail(ev->err, RT_ERR_SPEC, e->loc, "%s takes %d indices (got %d)", t->name,
                       (int)t->n_dims, (int)e->n_args);
    if (!d->laid_out || !d->data)
        return rt_fail(ev->err, RT_ERR_SPEC, e->loc, "tensor '%s' has no data", t->name);
    int64_t idx[RT_MAX_DIMS];
    for (int32_t k = 0; k < e->n_args; k++) {
        RT_TRY(rt_eval_int(ev, e->args[k], &idx[k]));
        if (e->args[k]->kind == RT_EXPR_CHILD && idx[k] < 0) {
            *out = 0.0;
            return RT_OK;
        }
    }
    int64_t off, bad_extent;
    int32_t bad_dim = 0;
    if (rt_layout_walk(&d->layout, idx, &off, &bad_dim, &bad_extent)) {
        *out = d->data[off];
        return RT_OK;
    }
    if (t->has_pad) {
        *out = t->pad_value;
        return RT_OK;
    }
    const char *text = rt_eval_print(ev, e);
    if (bad_dim == 0)
        return rt_fail(ev->err, RT_ERR_SPEC, e->loc, "%s reads row %lld outside %s's extent %lld",
                       text, (long long)idx[0], t->name, (long long)bad_extent);
    return rt_fail(ev->err, RT_ERR_SPEC, e->loc,
                   "%s reads index %lld of dim %d outside %s's extent %lld there", text,
                   (long long)idx[bad_dim], (int)bad_dim, t->name, (long long)bad_extent);
}

static double rt_apply_fn(rt_fn fn, double x) {
    switch (fn) {
    case RT_FN_EXP:
        return exp(x);
    case RT_FN_LOG:
        return log(x);
    case RT_FN_SQRT:
        return sqrt(x);
    case RT_FN_RSQRT:
        return 1.0 / sqrt(x);
    case RT_FN_TANH:
        return tanh(x);
    case RT_FN_SIGMOID:
        return 1.0 / (1.0 + exp(-x));
    case RT_FN_ERF:
        return erf(x);
    case RT_FN_ABS:
        return fabs(x);
    default:
        return x;
    }
}

static rt_status rt_eval_num(rt_eval *ev, const rt_expr *e, double *out) {
    if (e->is_int && e->kind != RT_EXPR_NUM) {
        int64_t v;
        RT_TRY(rt_eval_int(ev, e, &v));
        *out = (double)v;
        return RT_OK;
    }
    double x, y;
    switch (e->kind) {
    case RT_EXPR_NUM:
        *out = e->num;
        return RT_OK;
    case RT_EXPR_INDEX:
    case RT_EXPR_SIZE:
    case RT_EXPR_DIMREF:
    case RT_EXPR_CHILD: {
        int64_t v;
        RT_TRY(rt_eval_int(ev, e, &v));
        *out = (double)v;
        return RT_OK;
    }
    case RT_EXPR_READ:
        return rt_eval_read(ev, e, out);
    case RT_EXPR_UNARY:
        RT_TRY(rt_eval_num(ev, e->args[0], &x));
        *out = e->uop == RT_UOP_NEG ? -x : (double)(x == 0.0);
        return RT_OK;
    case RT_EXPR_BINARY:
        RT_TRY(rt_eval_num(ev, e->args[0], &x));
        if (e->bop == RT_BOP_AND || e->bop == RT_BOP_OR) {
            bool left = x != 0.0;
            if (left == (e->bop == RT_BOP_OR)) {
                *out = left;
                return RT_OK;
            }
            RT_TRY(rt_eval_num(ev, e->args[1], &y));
            *out = y != 0.0;
            return RT_OK;
        }
        RT_TRY(rt_eval_num(ev, e->args[1], &y));
        switch (e->bop) {
        case RT_BOP_ADD:
            *out = x + y;
            break;
        case RT_BOP_SUB:
            *out = x - y;
            break;
        case RT_BOP_MUL:
            *out = x * y;
            break;
        case RT_BOP_DIV:
            *out = x / y;
            break;
        case RT_BOP_MOD:
            *out = fmod(x, y);
            break;
        case RT_BOP_LT:
            *out = x < y;
            break;
        case RT_BOP_LE:
            *out = x <= y;
            break;
        case RT_BOP_GT:
            *out = x > y;
            break;
        case RT_BOP_GE:
            *out = x >= y;
            break;
        case RT_BOP_EQ:
            *out = x == y;
            break;
        case RT_BOP_NE:
            *out = x != y;
            break;
        default:
            return rt_fail(ev->err, RT_ERR_SPEC, e->loc, "unknown operator");
        }
        return RT_OK;
    case RT_EXPR_COND:
        RT_TRY(rt_eval_num(ev, e->args[0], &x));
        return rt_eval_num(ev, e->args[x != 0.0 ? 1 : 2], out);
    case RT_EXPR_CALL:
        if (e->n_args < 1)
            return rt_fail(ev->err, RT_ERR_SPEC, e->loc, "%s takes arguments", rt_fn_name(e->fn));
        RT_TRY(rt_eval_num(ev, e->args[0], &x));
        for (int32_t i = 1; i < e->n_args; i++) {
            RT_TRY(rt_eval_num(ev, e->args[i], &y));
            x = e->fn == RT_FN_MIN ? fmin(x, y) : fmax(x, y);
        }
        *out = e->n_args == 1 ? rt_apply_fn(e->fn, x) : x;
        return RT_OK;
    case RT_EXPR_SUM:
        *out = 0.0;
        if (!ev->stmt)
            return rt_fail(ev->err, RT_ERR_SPEC, e->loc, "reduction outside a statement");
        return rt_eval_sum(ev, e, 0, out);
    default:
        return rt_fail(ev->err, RT_ERR_SPEC, e->loc, "unknown expression kind %d", (int)e->kind);
    }
}

// The leaves of an integer expression and what is not integer (rt_spec_eval.leaf).
static rt_status rt_eval_leaf(rt_spec_eval *se, const rt_expr *e, int64_t *out) {
    rt_eval *ev = se->ctx;
    int64_t x;
    double v;
    switch (e->kind) {
    case RT_EXPR_INDEX:
        if (!ev->vars || !ev->stmt || e->var < 0 || e->var >= ev->stmt->n_vars)
            return rt_fail(ev->err, RT_ERR_SPEC, e->loc, "index variable outside a statement");
        *out = ev->vars[e->var];
        return RT_OK;
    case RT_EXPR_SIZE:
        if (e->sym < 0 || e->sym >= ev->op->n_sizes || !ev->b->size_bound[e->sym])
            return rt_fail(ev->err, RT_ERR_SPEC, e->loc, "size '%s' is not bound",
                           e->sym >= 0 && e->sym < ev->op->n_sizes ? ev->op->sizes[e->sym].name
                                                                   : "?");
        *out = ev->b->sizes[e->sym];
        return RT_OK;
    case RT_EXPR_DIMREF:
        if (!ev->dims)
            return rt_fail(ev->err, RT_ERR_SPEC, e->loc, "dimension reference outside a shape");
        *out = ev->dims[e->dim];
        return RT_OK;
    case RT_EXPR_CHILD: {
        RT_TRY(rt_eval_int(ev, e->args[0], &x));
        const rt_tree_data *t = ev->b->trees[e->tree];
        if (!t || x < 0 || x >= t->n_nodes || e->child < 0 || e->child >= t->max_children)
            *out = -1;
        else
            *out = t->child[x * t->max_children + e->child];
        return RT_OK;
    }
    default:
        break;
    }
    // Reads of integer tensors, sums, and mixed expressions: evaluate in double, convert.
    if (e->kind == RT_EXPR_READ)
        RT_TRY(rt_eval_read(ev, e, &v));
    else {
        // rt_eval_num would come back here for is_int nodes: evaluate a copy without the flag.
        rt_expr plain = *e;
        plain.is_int = false;
        RT_TRY(rt_eval_num(ev, &plain, &v));
    }
    return rt_spec_eval_to_int(se, e, v, out);
}

// A condition, compared as a number (rt_spec_eval.cond).
static rt_status rt_eval_cond(rt_spec_eval *se, const rt_expr *e, bool *out) {
    double v;
    RT_TRY(rt_eval_num(se->ctx, e, &v));
    *out = v != 0.0;
    return RT_OK;
}

static rt_status rt_eval_int(rt_eval *ev, const rt_expr *e, int64_t *out) {
    return rt_spec_eval_int(&ev->se, e, out);
}

// Points ev's shared evaluator at ev (after the other members are set).
static void rt_eval_begin(rt_eval *ev) {
    ev->se = (rt_spec_eval){.op = ev->op,
                            .stmt = ev->stmt,
                            .tensor = ev->tensor,
                            .arena = ev->b->arena,
                            .err = ev->err,
                            .ctx = ev,
                            .leaf = rt_eval_leaf,
                            .cond = rt_eval_cond};
}

// ---------------------------------------------------------------------------------------------
// Layouts
// ---------------------------------------------------------------------------------------------

// Extent of dim k of tensor ti under the outer indices outer[0..k).
static rt_status rt_dim_extent(rt_bindings *b, int32_t ti, int32_t k, const int64_t *outer,
                               int64_t *out, rt_err *err) {
    const rt_tensor *t = &b->op->tensors[ti];
    rt_eval ev = {b->op, b, NULL, NULL, outer, t, err, {0}};
    rt_eval_begin(&ev);
    const rt_dim *d = &t->dims[k];
    if (!d->extent)
        return rt_fail(err, RT_ERR_SPEC, d->loc, "dim %d of %s has no extent", (int)k, t->name);
    RT_TRY(rt_eval_int(&ev, d->extent, out));
    if (*out < 0)
        return rt_fail(err, RT_ERR_SPEC, d->loc, "extent of dim %d of %s is negative (got %lld)",
                       (int)k, t->name, (long long)*out);
    return RT_OK;
}

typedef struct rt_layout_build {
    rt_bindings *b;
    int32_t ti;
    int32_t last_ragged;
    bool fill;                    // second pass: write start[][]
    int64_t running[RT_MAX_DIMS]; // elements handed out so far at each ragged level
    int64_t idx[RT_MAX_DIMS];
    rt_err *err;
} rt_layout_build;

// The extent of the last ragged level k + 1 does not read index k (scores' j in 0:len[b] under
// i): one evaluation for all `extent` rows under this prefix, their starts an arithmetic series.
// What visiting each row would compute, without an expression evaluation per row.
static rt_status rt_layout_fill_last(rt_layout_build *lb, rt_layout *l, int32_t k, int64_t base,
                                     int64_t extent) {
    int64_t row, total;
    lb->idx[k] = 0;
    RT_TRY(rt_dim_extent(lb->b, lb->ti, k + 1, lb->idx, &row, lb->err));
    int64_t *running = &lb->running[k + 1];
    if (__builtin_mul_overflow(row, extent, &total) || total > RT_INTERP_MAX_ELEMS - *running)
        return rt_fail(lb->err, RT_ERR_SPEC, lb->b->op->tensors[lb->ti].loc,
                       "tensor %s is too large to interpret (more than %lld elements)",
                       lb->b->op->tensors[lb->ti].name, (long long)RT_INTERP_MAX_ELEMS);
    if (lb->fill)
        for (int64_t i = 0; i < extent; i++)
            l->start[k + 1][base + i] = *running + i * row;
    *running += total;
    return RT_OK;
}

// The slope (+1 or -1) of extent e in index k when e is k plus or minus, or minus k, a term that
// does not read k (a causal row's j in 0:i + 1, an upper triangle's N - i); 0 otherwise.
static int32_t rt_layout_unit_slope(const rt_expr *e, int32_t k) {
    if (e->kind != RT_EXPR_BINARY || (e->bop != RT_BOP_ADD && e->bop != RT_BOP_SUB))
        return 0;
    const rt_expr *x = e->args[0], *y = e->args[1];
    bool xk = x->kind == RT_EXPR_DIMREF && x->dim == k;
    bool yk = y->kind == RT_EXPR_DIMREF && y->dim == k;
    if (xk && !rt_expr_mentions_dim(y, k))
        return 1;
    if (yk && !rt_expr_mentions_dim(x, k))
        return e->bop == RT_BOP_ADD ? 1 : -1;
    return 0;
}

// The extent of the last ragged level k + 1 is index k's plus a term of the outer indices
// (rt_layout_unit_slope): row i has e0 + slope * i elements, from two evaluations instead of
// one per row (a causal layer's prelude evaluated i + 1 for each of its rows). False (nothing
// done) when a row would be negative: the row-by-row visit then reports it where it lies.
static rt_status rt_layout_fill_affine(rt_layout_build *lb, rt_layout *l, int32_t k, int64_t base,
                                       int64_t extent, int32_t slope, bool *done) {
    int64_t e0;
    lb->idx[k] = 0;
    RT_TRY(rt_dim_extent(lb->b, lb->ti, k + 1, lb->idx, &e0, lb->err));
    int64_t last = e0 + slope * (extent - 1);
    *done = false;
    if (last < 0 || last > RT_INTERP_MAX_ELEMS)
        return RT_OK;
    int64_t *running = &lb->running[k + 1];
    for (int64_t i = 0; i < extent; i++) {
        int64_t row = e0 + slope * i;
        if (row > RT_INTERP_MAX_ELEMS - *running)
            return rt_fail(lb->err, RT_ERR_SPEC, lb->b->op->tensors[lb->ti].loc,
                           "tensor %s is too large to interpret (more than %lld elements)",
                           lb->b->op->tensors[lb->ti].name, (long long)RT_INTERP_MAX_ELEMS);
        if (lb->fill)
            l->start[k + 1][base + i] = *running;
        *running += row;
    }
    *done = true;
    return RT_OK;
}

// Visits the prefixes of length k in lexicographic order (pos = rank of the prefix of length k).
static rt_status rt_layout_visit(rt_layout_build *lb, rt_layout *l, int32_t k, int64_t pos) {
    if (k > lb->last_ragged)
        return RT_OK;
    int64_t extent = l->extent[k], base;
    if (extent < 0) {
        RT_TRY(rt_dim_extent(lb->b, lb->ti, k, lb->idx, &extent, lb->err));
        base = lb->running[k];
        if (lb->fill)
            l->start[k][pos] = base;
        if (extent > RT_INTERP_MAX_ELEMS - lb->running[k])
            return rt_fail(lb->err, RT_ERR_SPEC, lb->b->op->tensors[lb->ti].loc,
                           "tensor %s is too large to interpret (more than %lld elements)",
                           lb->b->op->tensors[lb->ti].name, (long long)RT_INTERP_MAX_ELEMS);
        lb->running[k] += extent;
    } else {
        base = pos * extent;
    }
    if (k == lb->last_ragged) // the elements of the last ragged level hold no start array
        return RT_OK;
    const rt_expr *inner = lb->b->op->tensors[lb->ti].dims[k + 1].extent;
    if (k + 1 == lb->last_ragged && extent > 0 && !rt_expr_mentions_dim(inner, k))
        return rt_layout_fill_last(lb, l, k, base, extent);
    int32_t slope = k + 1 == lb->last_ragged && extent > 0 ? rt_layout_unit_slope(inner, k) : 0;
    if (slope != 0) {
        bool done;
        RT_TRY(rt_layout_fill_affine(lb, l, k, base, extent, slope, &done));
        if (done)
            return RT_OK;
    }
    for (int64_t i = 0; i < extent; i++) {
        lb->idx[k] = i;
        RT_TRY(rt_layout_visit(lb, l, k + 1, base + i));
    }
    return RT_OK;
}

rt_status rt_layout_compute(rt_bindings *b, int32_t ti, rt_layout *l, rt_err *err) {
    const rt_tensor *t = &b->op->tensors[ti];
    memset(l, 0, sizeof *l);
    l->n_dims = t->n_dims;
    l->n_rows[0] = 1;
    rt_layout_build lb = {.b = b, .ti = ti, .last_ragged = -1, .err = err};
    for (int32_t k = 0; k < t->n_dims; k++) {
        if (rt_expr_mentions_dimref(t->dims[k].extent)) {
            l->extent[k] = -1;
            lb.last_ragged = k;
        } else {
            RT_TRY(rt_dim_extent(b, ti, k, NULL, &l->extent[k], err));
        }
    }
    // Bound the enumeration: the dense extents alone must not exceed the limit.
    int64_t dense = 1;
    for (int32_t k = 0; k < t->n_dims; k++)
        if (l->extent[k] >= 0 &&
            (__builtin_mul_overflow(dense, l->extent[k], &dense) || dense > RT_INTERP_MAX_ELEMS))
            return rt_fail(err, RT_ERR_SPEC, t->loc,
                           "tensor %s is too large to interpret (more than %lld elements)", t->name,
                           (long long)RT_INTERP_MAX_ELEMS);
    // First visit: the element count of every ragged level (n_rows).
    RT_TRY(rt_layout_visit(&lb, l, 0, 0));
    for (int32_t k = 0; k < t->n_dims; k++) {
        int64_t rows;
        if (l->extent[k] < 0)
            rows = lb.running[k];
        else if (__builtin_mul_overflow(l->n_rows[k], l->extent[k], &rows) ||
                 rows > RT_INTERP_MAX_ELEMS)
            return rt_fail(err, RT_ERR_SPEC, t->loc,
                           "tensor %s is too large to interpret (more than %lld elements)", t->name,
                           (long long)RT_INTERP_MAX_ELEMS);
        l->n_rows[k + 1] = rows;
    }
    if (lb.last_ragged >= 0) {
        for (int32_t k = 0; k <= lb.last_ragged; k++) {
            if (l->extent[k] < 0)
                RT_ALLOC(b->arena, l->start[k], l->n_rows[k] + 1, err);
            lb.running[k] = 0;
        }
        lb.fill = true;
        RT_TRY(rt_layout_visit(&lb, l, 0, 0));
        for (int32_t k = 0; k <= lb.last_ragged; k++)
            if (l->start[k])
                l->start[k][l->n_rows[k]] = lb.running[k];
    }
    l->elems = l->n_rows[t->n_dims];
    return RT_OK;
}

static rt_status rt_layout_make(rt_bindings *b, int32_t ti, rt_err *err) {
    RT_TRY(rt_layout_compute(b, ti, &b->tensors[ti].layout, err));
    b->tensors[ti].laid_out = true;
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Bindings
// ---------------------------------------------------------------------------------------------

int32_t rt_op_tensor_index(const rt_op *op, const char *name) {
    for (int32_t i = 0; i < op->n_tensors; i++)
        if (strcmp(op->tensors[i].name, name) == 0)
            return i;
    return -1;
}

int32_t rt_op_tree_index(const rt_op *op, const char *name) {
    for (int32_t i = 0; i < op->n_trees; i++)
        if (strcmp(op->trees[i].name, name) == 0)
            return i;
    return -1;
}

rt_status rt_bindings_new(rt_arena *a, const rt_op *op, uint64_t seed, rt_bindings **out,
                          rt_err *err) {
    rt_bindings *b;
    RT_ALLOC(a, b, 1, err);
    b->arena = a;
    b->op = op;
    b->seed = seed;
    b->max_length = 16;
    b->default_tree_nodes = RT_TREE_DEFAULT_NODES;
    RT_ALLOC(a, b->sizes, op->n_sizes, err);
    RT_ALLOC(a, b->size_bound, op->n_sizes, err);
    RT_ALLOC(a, b->tensors, op->n_tensors, err);
    RT_ALLOC(a, b->trees, op->n_trees, err);
    for (int32_t i = 0; i < op->n_sizes; i++) {
        b->sizes[i] = op->sizes[i].value;
        b->size_bound[i] = op->sizes[i].bound;
    }
    *out = b;
    return RT_OK;
}

static rt_status rt_alloc_data(rt_bindings *b, int32_t ti, rt_err *err) {
    rt_tensor_data *d = &b->tensors[ti];
    if (!d->data)
        RT_ALLOC(b->arena, d->data, d->layout.elems, err);
    return RT_OK;
}

static rt_status rt_length_tensor(rt_bindings *b, const char *name, int32_t *out_ti, rt_err *err) {
    int32_t ti = rt_op_tensor_index(b->op, name);
    if (ti < 0 || !b->op->tensors[ti].is_length)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "'%s' is not a length tensor of %s", name,
                       b->op->name);
    if (b->prepared || b->shaped)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "lengths of '%s' bound after the inputs were generated", name);
    if (!b->tensors[ti].laid_out) {
        const rt_tensor *t = &b->op->tensors[ti];
        for (int32_t k = 0; k < t->n_dims; k++)
            if (rt_expr_mentions_dimref(t->dims[k].extent))
                return rt_fail(err, RT_ERR_SPEC, t->dims[k].loc,
                               "length tensor %s cannot be ragged itself", t->name);
        RT_TRY(rt_layout_make(b, ti, err));
        RT_TRY(rt_alloc_data(b, ti, err));
    }
    *out_ti = ti;
    return RT_OK;
}

rt_status rt_bindings_set_lengths(rt_bindings *b, const char *name, const int32_t *lengths,
                                  int64_t n, rt_err *err) {
    int32_t ti;
    RT_TRY(rt_length_tensor(b, name, &ti, err));
    rt_tensor_data *d = &b->tensors[ti];
    if (n != d->layout.elems)
        return rt_fail(err, RT_ERR_SPEC, RT_NOLOC, "expected %lld lengths for '%s' (got %lld)",
                       (long long)d->layout.elems, name, (long long)n);
    for (int64_t i = 0; i < n; i++) {
        if (lengths[i] < 0)
            return rt_fail(err, RT_ERR_SPEC, RT_NOLOC, "length %lld of '%s' is negative (got %d)",
                           (long long)i, name, (int)lengths[i]);
        d->data[i] = lengths[i];
    }
    d->bound = true;
    return RT_OK;
}

rt_status rt_bindings_set_lengths_file(rt_bindings *b, const char *name, const rt_lengths_file *f,
                                       int64_t batch, rt_err *err) {
    int32_t ti;
    RT_TRY(rt_length_tensor(b, name, &ti, err));
    int64_t count = b->tensors[ti].layout.elems;
    if (batch != 0 && batch != count)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "--batch=%lld does not match the %lld entries of '%s'", (long long)batch,
                       (long long)count, name);
    int32_t *lengths;
    RT_ALLOC(b->arena, lengths, count, err);
    rt_rng rng;
    rt_rng_stream(&rng, b->seed, RT_STREAM_LENGTHS + (uint64_t)ti);
    RT_TRY(rt_lengths_take(f, name, count, rt_rng_next(&rng), lengths, err));
    return rt_bindings_set_lengths(b, name, lengths, count, err);
}

rt_status rt_bindings_set_tree(rt_bindings *b, const char *name, rt_tree_data *t, rt_err *err) {
    int32_t k = rt_op_tree_index(b->op, name);
    if (k < 0)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "'%s' is not a tree parameter of %s", name,
                       b->op->name);
    if (b->prepared || b->shaped)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "tree '%s' bound after the inputs were generated", name);
    const rt_tree *tr = &b->op->trees[k];
    if (t->max_children > tr->max_children)
        return rt_fail(err, RT_ERR_SPEC, RT_NOLOC,
                       "tree '%s' allows at most %d children per node (got %d)", name,
                       (int)tr->max_children, (int)t->max_children);
    if (t->max_children != tr->max_children) {
        // Widen to C slots so child(n, c) indexing uses the parameter's C.
        int32_t *child;
        RT_ALLOC(b->arena, child, (int64_t)t->n_nodes * tr->max_children, err);
        for (int32_t v = 0; v < t->n_nodes; v++)
            for (int32_t c = 0; c < tr->max_children; c++)
                child[(int64_t)v * tr->max_children + c] =
                    c < t->max_children ? t->child[(int64_t)v * t->max_children + c] : -1;
        RT_TRY(rt_tree_build(b->arena, t->n_nodes, tr->max_children, child, &t, err));
    }
    if (tr->n_sym >= 0 && tr->n_sym < b->op->n_sizes) {
        if (b->size_bound[tr->n_sym] && b->sizes[tr->n_sym] != t->n_nodes)
            return rt_fail(err, RT_ERR_SPEC, RT_NOLOC, "tree '%s' has %d nodes but size %s is %lld",
                           name, (int)t->n_nodes, b->op->sizes[tr->n_sym].name,
                           (long long)b->sizes[tr->n_sym]);
        b->sizes[tr->n_sym] = t->n_nodes;
        b->size_bound[tr->n_sym] = true;
    }
    b->trees[k] = t;
    return RT_OK;
}

// Rewrites an error of the file behind `option name=path` into the option form.
static rt_status rt_option_error(rt_status st, rt_err *err, const char *option, const char *name,
                                 const char *path) {
    if (st != RT_OK && err->where.file == NULL && err->status == st) {
        char msg[2 * sizeof err->msg];
        snprintf(msg, sizeof msg, "%s %s=%s: %s", option, name, path, err->msg);
        size_t n = strlen(msg) < sizeof err->msg ? strlen(msg) : sizeof err->msg - 1;
        memcpy(err->msg, msg, n); // truncates like the other messages
        err->msg[n] = '\0';
        return st;
    }
    rt_file_error_to_option(err, option, name, path);
    return st;
}

rt_status rt_bindings_load_lengths(rt_bindings *b, const char *name, const char *path,
                                   int64_t batch, rt_err *err) {
    rt_lengths_file *f;
    rt_status st = rt_lengths_read(b->arena, path, &f, err);
    if (st == RT_OK)
        st = rt_bindings_set_lengths_file(b, name, f, batch, err);
    return rt_option_error(st, err, "--lengths", name, path);
}

rt_status rt_bindings_load_tree(rt_bindings *b, const char *name, const char *path, rt_err *err) {
    int32_t k = rt_op_tree_index(b->op, name);
    rt_status st;
    if (k < 0) {
        st = rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "'%s' is not a tree parameter of %s", name,
                     b->op->name);
    } else {
        rt_tree_data *t;
        st = rt_tree_read(b->arena, path, b->op->trees[k].max_children, &t, err);
        if (st == RT_OK)
            st = rt_bindings_set_tree(b, name, t, err);
    }
    return rt_option_error(st, err, "--tree", name, path);
}

// Smallest dense extent of a dim that tensor ti is read at as a gather index (1 if none).
static void rt_gather_bound(const rt_bindings *b, const rt_expr *e, int32_t ti, int64_t *bound,
                            bool *found) {
    if (!e)
        return;
    if (e->kind == RT_EXPR_READ) {
        const rt_tensor_data *d = &b->tensors[e->tensor];
        for (int32_t k = 0; k < e->n_args && k < d->layout.n_dims; k++) {
            const rt_expr *a = e->args[k];
            if (a->kind == RT_EXPR_READ && a->tensor == ti && d->layout.extent[k] >= 0) {
                if (!*found || d->layout.extent[k] < *bound)
                    *bound = d->layout.extent[k];
                *found = true;
            }
        }
    }
    for (int32_t i = 0; i < e->n_args; i++)
        rt_gather_bound(b, e->args[i], ti, bound, found);
}

static void rt_generate(rt_bindings *b, int32_t ti) {
    const rt_tensor *t = &b->op->tensors[ti];
    rt_tensor_data *d = &b->tensors[ti];
    rt_rng rng;
    rt_rng_stream(&rng, b->seed, (uint64_t)ti);
    if (!rt_dtype_is_int(t->dtype)) {
        for (int64_t i = 0; i < d->layout.elems; i++)
            d->data[i] = rt_dtype_round(t->dtype, 2.0 * rt_rng_uniform(&rng) - 1.0);
        return;
    }
    int64_t lo = -4, n = 9;
    if (t->is_length) {
        lo = 0;
        n = b->max_length + 1;
    } else if (t->is_index) {
        bool found = false;
        int64_t bound = 1;
        for (int32_t s = 0; s < b->op->n_stmts; s++)
            rt_gather_bound(b, b->op->stmts[s].rhs, ti, &bound, &found);
        lo = 0;
        n = bound > 0 ? bound : 1;
    }
    for (int64_t i = 0; i < d->layout.elems; i++)
        d->data[i] =
            rt_dtype_round(t->dtype, (double)(lo + (int64_t)rt_rng_below(&rng, (uint64_t)n)));
}

// The first half of rt_bindings_prepare: trees, sizes and length tensors, which every layout
// reads. Lengths cannot be bound once it ran.
rt_status rt_bindings_shape(rt_bindings *b, rt_err *err) {
    if (b->shaped)
        return RT_OK;
    const rt_op *op = b->op;
    for (int32_t k = 0; k < op->n_trees; k++) {
        if (b->trees[k])
            continue;
        const rt_tree *tr = &op->trees[k];
        int64_t n = b->default_tree_nodes;
        if (tr->n_sym >= 0 && tr->n_sym < op->n_sizes && b->size_bound[tr->n_sym])
            n = b->sizes[tr->n_sym];
        if (n < 0 || n > INT32_MAX)
            return rt_fail(err, RT_ERR_SPEC, tr->loc, "tree '%s' cannot have %lld nodes", tr->name,
                           (long long)n);
        rt_rng rng;
        rt_rng_stream(&rng, b->seed, RT_STREAM_TREE + (uint64_t)k);
        rt_tree_data *t;
        RT_TRY(rt_tree_random(b->arena, (int32_t)n, tr->max_children, rt_rng_next(&rng), &t, err));
        RT_TRY(rt_bindings_set_tree(b, tr->name, t, err));
    }
    for (int32_t i = 0; i < op->n_sizes; i++)
        if (!b->size_bound[i])
            return rt_fail(err, RT_ERR_SPEC, op->sizes[i].loc, "size '%s' is not bound",
                           op->sizes[i].name);
    // Length tensors first: the layouts of the ragged tensors read them.
    for (int32_t ti = 0; ti < op->n_tensors; ti++) {
        if (!op->tensors[ti].is_length || b->tensors[ti].bound)
            continue;
        int32_t same;
        RT_TRY(rt_length_tensor(b, op->tensors[ti].name, &same, err));
        rt_generate(b, ti);
    }
    b->shaped = true;
    return RT_OK;
}

rt_status rt_bindings_count(rt_bindings *b, double *out, rt_err *err) {
    RT_TRY(rt_bindings_shape(b, err));
    const rt_op *op = b->op;
    for (int32_t ti = 0; ti < op->n_tensors; ti++) {
        const rt_tensor *t = &op->tensors[ti];
        bool ragged = false;
        for (int32_t k = 0; k < t->n_dims; k++)
            ragged = ragged || rt_expr_mentions_dimref(t->dims[k].extent);
        if (b->tensors[ti].laid_out || ragged) {
            if (!b->tensors[ti].laid_out)
                RT_TRY(rt_layout_make(b, ti, err));
            out[ti] = (double)b->tensors[ti].layout.elems;
            continue;
        }
        double n = 1;
        for (int32_t k = 0; k < t->n_dims; k++) {
            int64_t extent;
            RT_TRY(rt_dim_extent(b, ti, k, NULL, &extent, err));
            n *= (double)extent;
        }
        out[ti] = n;
    }
    return RT_OK;
}

rt_status rt_bindings_prepare(rt_bindings *b, rt_err *err) {
    if (b->prepared)
        return RT_OK;
    RT_TRY(rt_bindings_shape(b, err));
    const rt_op *op = b->op;
    for (int32_t ti = 0; ti < op->n_tensors; ti++) {
        if (!b->tensors[ti].laid_out)
            RT_TRY(rt_layout_make(b, ti, err));
        RT_TRY(rt_alloc_data(b, ti, err));
    }
    for (int32_t ti = 0; ti < op->n_tensors; ti++) {
        const rt_tensor *t = &op->tensors[ti];
        if (t->is_length || b->tensors[ti].bound)
            continue;
        bool accumulates = false;
        for (int32_t s = 0; s < op->n_stmts; s++)
            accumulates |= op->stmts[s].out == ti && op->stmts[s].op == RT_ASSIGN_ADD;
        if (t->role == RT_ROLE_INPUT || accumulates)
            rt_generate(b, ti);
    }
    b->prepared = true;
    return RT_OK;
}

rt_status rt_bindings_set_data(rt_bindings *b, const char *name, const double *values, int64_t n,
                               rt_err *err) {
    RT_TRY(rt_bindings_prepare(b, err));
    int32_t ti = rt_op_tensor_index(b->op, name);
    if (ti < 0)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "no tensor named '%s' in %s", name,
                       b->op->name);
    rt_tensor_data *d = &b->tensors[ti];
    if (n != d->layout.elems)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "expected %lld values for '%s' (got %lld)",
                       (long long)d->layout.elems, name, (long long)n);
    for (int64_t i = 0; i < n; i++)
        d->data[i] = rt_dtype_round(b->op->tensors[ti].dtype, values[i]);
    d->bound = true;
    return RT_OK;
}

rt_tensor_data *rt_bindings_data(rt_bindings *b, const char *name) {
    int32_t ti = rt_op_tensor_index(b->op, name);
    return ti < 0 ? NULL : &b->tensors[ti];
}

int64_t rt_tensor_elems(const rt_bindings *b, int32_t t) {
    return b->tensors[t].laid_out ? b->tensors[t].layout.elems : 0;
}

bool rt_tensor_offset(const rt_bindings *b, int32_t t, const int64_t *idx, int64_t *out_offset) {
    return b->tensors[t].laid_out && rt_layout_offset(&b->tensors[t].layout, idx, out_offset);
}

void rt_bindings_print_outputs(const rt_bindings *b, rt_buf *out) {
    for (int32_t k = 0; k < b->op->n_outputs; k++) {
        int32_t ti = b->op->outputs[k];
        const rt_tensor *t = &b->op->tensors[ti];
        const rt_tensor_data *d = &b->tensors[ti];
        double sum = 0.0, lo = HUGE_VAL, hi = -HUGE_VAL;
        for (int64_t i = 0; i < d->layout.elems; i++) {
            sum += d->data[i];
            lo = fmin(lo, d->data[i]);
            hi = fmax(hi, d->data[i]);
        }
        rt_buf_printf(out, "%s %s elems=%lld sum=%.9g min=%.9g max=%.9g first:", t->name,
                      rt_dtype_name(t->dtype), (long long)d->layout.elems, sum,
                      d->layout.elems ? lo : 0.0, d->layout.elems ? hi : 0.0);
        for (int64_t i = 0; i < d->layout.elems && i < 4; i++)
            rt_buf_printf(out, " %.9g", d->data[i]);
        rt_buf_puts(out, "\n");
    }
}

// ---------------------------------------------------------------------------------------------
// The interpreter
// ---------------------------------------------------------------------------------------------

typedef struct rt_run {
    rt_eval ev;
    const rt_stmt *s;
    int32_t n_outer, n_red;
    int32_t *outer, *red; // loops[] split: kept vars (outer->inner), then reduced vars
    int32_t fixed_var;    // recursion: this var runs only over fixed_val (-1: none)
    int64_t fixed_val;
    double acc;
} rt_run;

// Loops over vars[k..n) of list, calling body at the innermost level.
static rt_status rt_run_loops(rt_run *r, const int32_t *list, int32_t n, int32_t k,
                              rt_status (*body)(rt_run *r)) {
    if (k == n)
        return body(r);
    int32_t v = list[k];
    int64_t lo, hi;
    RT_TRY(rt_var_range(&r->ev, v, &lo, &hi));
    if (v == r->fixed_var) {
        if (r->fixed_val < lo || r->fixed_val >= hi)
            return RT_OK;
        lo = r->fixed_val;
        hi = lo + 1;
    }
    for (int64_t i = lo; i < hi; i++) {
        r->ev.vars[v] = i;
        bool ok;
        RT_TRY(rt_preds_hold(&r->ev, v, &ok));
        if (ok)
            RT_TRY(rt_run_loops(r, list, n, k + 1, body));
    }
    return RT_OK;
}

static rt_status rt_run_reduce_body(rt_run *r) {
    double x;
    RT_TRY(rt_eval_num(&r->ev, r->s->rhs, &x));
    switch (r->s->op) {
    case RT_ASSIGN_MUL_INIT:
        r->acc *= x;
        break;
    case RT_ASSIGN_MAX_INIT:
        r->acc = fmax(r->acc, x);
        break;
    case RT_ASSIGN_MIN_INIT:
        r->acc = fmin(r->acc, x);
        break;
    default:
        r->acc += x;
        break;
    }
    return RT_OK;
}

// One element of the output: evaluate (or reduce) and store rounded.
static rt_status rt_run_element(rt_run *r) {
    const rt_stmt *s = r->s;
    const rt_op *op = r->ev.op;
    rt_tensor_data *d = &r->ev.b->tensors[s->out];
    int64_t idx[RT_MAX_DIMS], off, bad_extent;
    int32_t bad_dim = 0;
    for (int32_t k = 0; k < s->n_lhs; k++)
        idx[k] = r->ev.vars[s->lhs_vars[k]];
    if (s->n_lhs != d->layout.n_dims ||
        !rt_layout_walk(&d->layout, idx, &off, &bad_dim, &bad_extent))
        return rt_fail(r->ev.err, RT_ERR_SPEC, s->loc,
                       "statement writes %s outside its extent (index %lld of dim %d)",
                       op->tensors[s->out].name, (long long)(s->n_lhs ? idx[bad_dim] : 0),
                       (int)bad_dim);
    double v;
    if (r->n_red == 0 && s->op == RT_ASSIGN_SET) {
        RT_TRY(rt_eval_num(&r->ev, s->rhs, &v));
    } else {
        // '+=' starts from the caller's value; '=' with reduced loops (the parser puts them in
        // RT_EXPR_SUM instead) sums from 0 like '+=!'.
        r->acc = s->op == RT_ASSIGN_ADD ? d->data[off] : rt_assign_identity(s->op);
        RT_TRY(rt_run_loops(r, r->red, r->n_red, 0, rt_run_reduce_body));
        v = r->acc;
    }
    d->data[off] = rt_dtype_round(op->tensors[s->out].dtype, v);
    return RT_OK;
}

// Runs statement s (with var fixed_var pinned to fixed_val when >= 0).
static rt_status rt_run_stmt(const rt_op *op, rt_bindings *b, const rt_stmt *s, int32_t fixed_var,
                             int64_t fixed_val, rt_err *err) {
    rt_run r;
    memset(&r, 0, sizeof r);
    r.ev = (rt_eval){op, b, s, NULL, NULL, NULL, err, {0}};
    rt_eval_begin(&r.ev);
    r.s = s;
    r.fixed_var = fixed_var;
    r.fixed_val = fixed_val;
    RT_ALLOC(b->arena, r.ev.vars, s->n_vars, err);
    RT_ALLOC(b->arena, r.outer, s->n_loops, err);
    RT_ALLOC(b->arena, r.red, s->n_loops, err);
    for (int32_t k = 0; k < s->n_loops; k++) {
        int32_t v = s->loops[k];
        if (v < 0 || v >= s->n_vars)
            return rt_fail(err, RT_ERR_SPEC, s->loc, "loop over an unknown index variable");
        if (s->vars[v].is_reduce)
            r.red[r.n_red++] = v;
        else
            r.outer[r.n_outer++] = v;
    }
    return rt_run_loops(&r, r.outer, r.n_outer, 0, rt_run_element);
}

// The node var and tree of a recursive statement: from its first tree predicate, else from
// the first T.child(n, c) with an index-var argument. False when there is none.
static bool rt_find_child_var(const rt_expr *e, int32_t *var, int32_t *tree) {
    if (!e)
        return false;
    if (e->kind == RT_EXPR_CHILD && e->n_args > 0 && e->args[0]->kind == RT_EXPR_INDEX) {
        *var = e->args[0]->var;
        *tree = e->tree;
        return true;
    }
    for (int32_t i = 0; i < e->n_args; i++)
        if (rt_find_child_var(e->args[i], var, tree))
            return true;
    return false;
}

static bool rt_node_var(const rt_stmt *s, int32_t *var, int32_t *tree) {
    if (s->n_preds > 0) {
        *var = s->preds[0].var;
        *tree = s->preds[0].tree;
        return true;
    }
    return rt_find_child_var(s->rhs, var, tree);
}

rt_status rt_interp_run(const rt_op *op, rt_bindings *b, rt_err *err) {
    if (b->op != op)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "bindings belong to another operator");
    RT_TRY(rt_bindings_prepare(b, err));
    bool *done;
    RT_ALLOC(b->arena, done, op->n_stmts, err);
    for (int32_t si = 0; si < op->n_stmts; si++) {
        if (done[si])
            continue;
        const rt_stmt *s = &op->stmts[si];
        // The group of statements writing the same tensor; recursive when any of them is.
        bool recursive = false;
        for (int32_t sj = si; sj < op->n_stmts; sj++)
            recursive |= op->stmts[sj].out == s->out && op->stmts[sj].recursive;
        int32_t node_var, tree;
        if (!recursive || !rt_node_var(s, &node_var, &tree) || !b->trees[tree]) {
            done[si] = true;
            if (s->op != RT_ASSIGN_SET && s->op != RT_ASSIGN_ADD) {
                // Elements no iteration reaches (e.g. masked entries) hold the initial value.
                rt_tensor_data *d = &b->tensors[s->out];
                double init = rt_dtype_round(op->tensors[s->out].dtype, rt_assign_identity(s->op));
                for (int64_t i = 0; i < d->layout.elems; i++)
                    d->data[i] = init;
            }
            RT_TRY(rt_run_stmt(op, b, s, -1, 0, err));
            continue;
        }
        // CORTEX: node by node in level order (children first); each statement of the group
        // runs for the node under its own node variable, its predicates choosing.
        const rt_tree_data *t = b->trees[tree];
        for (int32_t sj = si; sj < op->n_stmts; sj++)
            done[sj] |= op->stmts[sj].out == s->out;
        for (int32_t k = 0; k < t->n_nodes; k++) {
            for (int32_t sj = si; sj < op->n_stmts; sj++) {
                const rt_stmt *g = &op->stmts[sj];
                int32_t g_var, g_tree;
                if (g->out != s->out)
                    continue;
                if (!rt_node_var(g, &g_var, &g_tree))
                    g_var = g->n_lhs > 0 ? g->lhs_vars[0] : -1; // the node dim comes first
                RT_TRY(rt_run_stmt(op, b, g, g_var, t->order[k], err));
            }
        }
    }
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Useful arithmetic: the statements' points on the bound data
// ---------------------------------------------------------------------------------------------

// Whether a range of a reduced var of an RT_EXPR_SUM inside e depends on var v.
static bool rt_sums_use_var(const rt_stmt *s, const rt_expr *e, int32_t v) {
    if (!e)
        return false;
    if (e->kind == RT_EXPR_SUM)
        for (int32_t i = 0; i < e->n_sum_vars; i++) {
            const rt_ivar *iv = &s->vars[e->sum_vars[i]];
            if (rt_expr_uses_var(iv->lo, v) || rt_expr_uses_var(iv->hi, v))
                return true;
        }
    for (int32_t i = 0; i < e->n_args; i++)
        if (rt_sums_use_var(s, e->args[i], v))
            return true;
    return false;
}

// Whether the points under list[k] (the ranges of list[k+1..n) and of the sums in body) or a
// predicate depend on the value of var list[k]; when they do not, its range multiplies them.
static bool rt_var_free(const rt_stmt *s, const int32_t *list, int32_t n, int32_t k,
                        const rt_expr *body) {
    int32_t v = list[k];
    for (int32_t i = 0; i < s->n_preds; i++)
        if (s->preds[i].var == v)
            return false;
    for (int32_t j = k + 1; j < n; j++) {
        const rt_ivar *iv = &s->vars[list[j]];
        if (rt_expr_uses_var(iv->lo, v) || rt_expr_uses_var(iv->hi, v))
            return false;
    }
    return !rt_sums_use_var(s, body, v);
}

// Whether e reads a tensor that has no data yet (a range over other than length tensors).
static bool rt_expr_reads_unlaid(const rt_bindings *b, const rt_expr *e) {
    if (!e)
        return false;
    if (e->kind == RT_EXPR_READ && !b->tensors[e->tensor].laid_out)
        return true;
    for (int32_t i = 0; i < e->n_args; i++)
        if (rt_expr_reads_unlaid(b, e->args[i]))
            return true;
    return false;
}

static bool rt_ranges_read_unlaid(const rt_op *op, const rt_bindings *b) {
    for (int32_t si = 0; si < op->n_stmts; si++)
        for (int32_t v = 0; v < op->stmts[si].n_vars; v++) {
            const rt_ivar *iv = &op->stmts[si].vars[v];
            if (rt_expr_reads_unlaid(b, iv->lo) || rt_expr_reads_unlaid(b, iv->hi))
                return true;
        }
    return false;
}

static rt_status rt_count_expr(rt_eval *ev, const rt_expr *e, double *out);

// Arithmetic of one point of the innermost loop: body's, plus one per point for an
// accumulation (acc), at least min_flops (rt_count_loops's leaf).
typedef struct rt_count_body {
    const rt_expr *e;
    double acc, min_flops;
} rt_count_body;

// Sum over the points of vars list[k..n) (predicates holding) of body's arithmetic; a var on
// which nothing inside depends is not iterated: its trip count multiplies the rest.
static rt_status rt_count_loops(rt_eval *ev, const int32_t *list, int32_t n, int32_t k,
                                const rt_count_body *body, double *out) {
    *out = 0.0;
    if (k == n) {
        RT_TRY(rt_count_expr(ev, body->e, out));
        *out = fmax(*out + body->acc, body->min_flops);
        return RT_OK;
    }
    int32_t v = list[k];
    int64_t lo, hi;
    RT_TRY(rt_var_range(ev, v, &lo, &hi));
    if (hi <= lo)
        return RT_OK;
    if (rt_var_free(ev->stmt, list, n, k, body->e)) {
        ev->vars[v] = lo;
        RT_TRY(rt_count_loops(ev, list, n, k + 1, body, out));
        *out *= (double)(hi - lo);
        return RT_OK;
    }
    for (int64_t i = lo; i < hi; i++) {
        ev->vars[v] = i;
        bool ok;
        RT_TRY(rt_preds_hold(ev, v, &ok));
        double x = 0.0;
        if (ok)
            RT_TRY(rt_count_loops(ev, list, n, k + 1, body, &x));
        *out += x;
    }
    return RT_OK;
}

// Arithmetic of e at the current vars: one per operator and function call (as the performance
// model counts them), a sum's body and one addition per point of its reduced vars.
static rt_status rt_count_expr(rt_eval *ev, const rt_expr *e, double *out) {
    *out = 0.0;
    if (!e || e->kind == RT_EXPR_READ || e->kind == RT_EXPR_NUM || e->kind == RT_EXPR_INDEX ||
        e->kind == RT_EXPR_SIZE || e->kind == RT_EXPR_DIMREF || e->kind == RT_EXPR_CHILD)
        return RT_OK;
    if (e->kind == RT_EXPR_SUM) {
        rt_count_body body = {e->n_args > 0 ? e->args[0] : NULL, 1.0, 0.0};
        return rt_count_loops(ev, e->sum_vars, e->n_sum_vars, 0, &body, out);
    }
    *out = 1.0;
    for (int32_t i = 0; i < e->n_args; i++) {
        double x;
        RT_TRY(rt_count_expr(ev, e->args[i], &x));
        *out += x;
    }
    return RT_OK;
}

rt_status rt_interp_flops(const rt_op *op, rt_bindings *b, double *out, rt_err *err) {
    *out = 0.0;
    if (b->op != op)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "bindings belong to another operator");
    // Sizes, trees and lengths fix the points; the other tensors' data only where a range
    // reads one.
    RT_TRY(rt_bindings_shape(b, err));
    if (rt_ranges_read_unlaid(op, b))
        RT_TRY(rt_bindings_prepare(b, err));
    for (int32_t si = 0; si < op->n_stmts; si++) {
        const rt_stmt *s = &op->stmts[si];
        rt_eval ev = {op, b, s, NULL, NULL, NULL, err, {0}};
        rt_eval_begin(&ev);
        RT_ALLOC(b->arena, ev.vars, s->n_vars > 0 ? s->n_vars : 1, err);
        for (int32_t k = 0; k < s->n_loops; k++)
            if (s->loops[k] < 0 || s->loops[k] >= s->n_vars)
                return rt_fail(err, RT_ERR_SPEC, s->loc, "loop over an unknown index variable");
        // Every point does at least one operation (a copy: its store), as in the model.
        rt_count_body body = {s->rhs, s->op != RT_ASSIGN_SET ? 1.0 : 0.0, 1.0};
        double x;
        RT_TRY(rt_count_loops(&ev, s->loops, s->n_loops, 0, &body, &x));
        *out += x;
    }
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Layers: the defs of a file in order, on data that flows from def to def
// ---------------------------------------------------------------------------------------------

rt_status rt_layer_bindings_new(rt_arena *a, const rt_layer *l, uint64_t seed,
                                rt_layer_bindings **out, rt_err *err) {
    rt_layer_bindings *lb;
    RT_ALLOC(a, lb, 1, err);
    RT_ALLOC(a, lb->ops, l->n_ops, err);
    lb->layer = l;
    for (int32_t k = 0; k < l->n_ops; k++)
        RT_TRY(rt_bindings_new(a, l->ops[k], seed, &lb->ops[k], err));
    *out = lb;
    return RT_OK;
}

// The bindings and tensor of the def where layer tensor i is made.
static rt_tensor_data *rt_layer_origin(rt_layer_bindings *lb, int32_t i) {
    const rt_layer_tensor *lt = &lb->layer->tensors[i];
    return &lb->ops[lt->op]->tensors[lt->tensor];
}

rt_status rt_layer_bindings_set_lengths_file(rt_layer_bindings *lb, const char *name,
                                             const rt_lengths_file *f, int64_t batch, rt_err *err) {
    const rt_layer *l = lb->layer;
    for (int32_t i = 0; i < l->n_tensors; i++) {
        const rt_layer_tensor *lt = &l->tensors[i];
        if (lt->is_input && !strcmp(lt->name, name))
            return rt_bindings_set_lengths_file(lb->ops[lt->op], name, f, batch, err);
    }
    return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "'%s' is not a length tensor of %s", name, l->name);
}

// Copies the data of def k's parameter t from where its layer tensor is made.
static rt_status rt_layer_take(rt_layer_bindings *lb, int32_t k, int32_t t, rt_err *err) {
    const rt_tensor_data *src = rt_layer_origin(lb, lb->layer->tensor_of[k][t]);
    return rt_bindings_set_data(lb->ops[k], lb->layer->ops[k]->tensors[t].name, src->data,
                                src->layout.elems, err);
}

// Def k's length tensors from the def where each is made (the first def's lengths, bound or
// generated, are every def's).
static rt_status rt_layer_take_lengths(rt_layer_bindings *lb, int32_t k, rt_bindings *dst, bool all,
                                       rt_err *err) {
    const rt_layer *l = lb->layer;
    const rt_op *op = l->ops[k];
    for (int32_t t = 0; t < op->n_tensors; t++) {
        int32_t i = l->tensor_of[k][t];
        if (i < 0 || !op->tensors[t].is_length || (!all && l->tensors[i].op == k))
            continue;
        const rt_tensor_data *src = rt_layer_origin(lb, i);
        int32_t *v;
        RT_ALLOC(dst->arena, v, src->layout.elems, err);
        for (int64_t e = 0; e < src->layout.elems; e++)
            v[e] = (int32_t)src->data[e];
        RT_TRY(rt_bindings_set_lengths(dst, op->tensors[t].name, v, src->layout.elems, err));
    }
    return RT_OK;
}

rt_status rt_layer_bindings_prepare(rt_layer_bindings *lb, rt_err *err) {
    const rt_layer *l = lb->layer;
    for (int32_t k = 0; k < l->n_ops; k++) {
        const rt_op *op = l->ops[k];
        if (lb->ops[k]->prepared)
            continue;
        // Length tensors first (the layouts read them), unless prepare_inputs took them.
        if (!lb->ops[k]->shaped)
            RT_TRY(rt_layer_take_lengths(lb, k, lb->ops[k], false, err));
        RT_TRY(rt_bindings_prepare(lb->ops[k], err));
        for (int32_t t = 0; t < op->n_tensors; t++) {
            int32_t i = l->tensor_of[k][t];
            if (i >= 0 && l->tensors[i].is_input && !op->tensors[t].is_length &&
                l->tensors[i].op != k)
                RT_TRY(rt_layer_take(lb, k, t, err));
        }
    }
    return RT_OK;
}

rt_status rt_layer_bindings_prepare_inputs(rt_layer_bindings *lb, rt_err *err) {
    const rt_layer *l = lb->layer;
    for (int32_t k = 0; k < l->n_ops; k++) {
        const rt_op *op = l->ops[k];
        rt_bindings *b = lb->ops[k];
        if (b->prepared)
            continue;
        if (!b->shaped)
            RT_TRY(rt_layer_take_lengths(lb, k, b, false, err));
        RT_TRY(rt_bindings_shape(b, err));
        for (int32_t t = 0; t < op->n_tensors; t++) {
            if (!b->tensors[t].laid_out)
                RT_TRY(rt_layout_make(b, t, err));
            int32_t i = l->tensor_of[k][t];
            rt_tensor_data *d = &b->tensors[t];
            if (i < 0 || !l->tensors[i].is_input || op->tensors[t].is_length || d->data)
                continue;
            RT_TRY(rt_alloc_data(b, t, err));
            if (l->tensors[i].op == k) {
                rt_generate(b, t);
                continue;
            }
            const rt_tensor_data *src = rt_layer_origin(lb, i);
            if (src->layout.elems != d->layout.elems)
                return rt_fail(
                    err, RT_ERR_USAGE, RT_NOLOC, "expected %lld values for '%s' (got %lld)",
                    (long long)d->layout.elems, op->tensors[t].name, (long long)src->layout.elems);
            for (int64_t e = 0; e < d->layout.elems; e++)
                d->data[e] = rt_dtype_round(op->tensors[t].dtype, src->data[e]);
            d->bound = true;
        }
    }
    return RT_OK;
}

rt_status rt_layer_bindings_def(rt_arena *a, rt_layer_bindings *lb, int32_t k, rt_bindings **out,
                                rt_err *err) {
    RT_TRY(rt_layer_bindings_prepare_inputs(lb, err));
    const rt_layer *l = lb->layer;
    const rt_op *op = l->ops[k];
    const rt_bindings *src = lb->ops[k];
    rt_bindings *b;
    RT_TRY(rt_bindings_new(a, op, src->seed, &b, err));
    b->max_length = src->max_length;
    b->default_tree_nodes = src->default_tree_nodes;
    for (int32_t i = 0; i < op->n_sizes; i++) {
        b->sizes[i] = src->sizes[i];
        b->size_bound[i] = src->size_bound[i];
    }
    for (int32_t t = 0; t < op->n_trees; t++)
        b->trees[t] = src->trees[t];
    RT_TRY(rt_layer_take_lengths(lb, k, b, true, err));
    RT_TRY(rt_bindings_prepare(b, err));
    for (int32_t t = 0; t < op->n_tensors; t++) {
        int32_t i = l->tensor_of[k][t];
        if (i < 0 || !l->tensors[i].is_input || op->tensors[t].is_length)
            continue;
        memcpy(b->tensors[t].data, src->tensors[t].data,
               (size_t)src->tensors[t].layout.elems * sizeof(double));
        b->tensors[t].bound = true;
    }
    *out = b;
    return RT_OK;
}

rt_status rt_layer_interp_run(rt_layer_bindings *lb, rt_err *err) {
    const rt_layer *l = lb->layer;
    RT_TRY(rt_layer_bindings_prepare(lb, err));
    for (int32_t k = 0; k < l->n_ops; k++) {
        const rt_op *op = l->ops[k];
        for (int32_t t = 0; t < op->n_tensors; t++) {
            int32_t i = l->tensor_of[k][t];
            if (i >= 0 && op->tensors[t].role == RT_ROLE_INPUT && !l->tensors[i].is_input)
                RT_TRY(rt_layer_take(lb, k, t, err));
        }
        rt_status st = rt_interp_run(op, lb->ops[k], err);
        if (st != RT_OK) {
            rt_err_note(err, "in def %s of layer %s", op->name, l->name);
            return st;
        }
    }
    return RT_OK;
}
