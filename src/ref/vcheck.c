// vcheck.c: the randomized check of a contraction (vcheck.h). The shape is read off the IR
// (two reads, a scale, var classes, range dependencies); each pass then walks the batch
// instances, per instance the N tuples as segments (all N vars but the last fixed, the last a
// range: a line of the reads, strided where the layout allows, element by element otherwise),
// and the rows (batch instance, M tuple) in the order of their enumeration, which is the same in
// every pass.
#include "vcheck.h"
#include "compare.h"
#include "rng.h"
#include "spec-eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Standard deviations the bound allows (vcheck.h), and the two vectors' seeds (independent
// splitmix64 streams, one per batch instance).
#define RT_VC_LAMBDA 8.0
static const uint64_t rt_vc_seeds[2] = {12345, 0x5eed0f7e57ull};

// ORDER RT_VC: the classes of a statement's index vars.
typedef enum rt_vc_class { RT_VC_BATCH, RT_VC_M, RT_VC_N, RT_VC_K, RT_VC_COUNT } rt_vc_class;

// A read with affine indices: A, B, or the statement's own output C.
typedef struct rt_vc_read {
    const rt_expr *e; // NULL for C
    int32_t tensor;
    int32_t n_dims;
    rt_affine idx[RT_MAX_DIMS];
    bool *linear; // [n_vars]: the offset is affine in that var (dims after its outermost dense)
} rt_vc_read;

struct rt_vcheck {
    rt_arena *a;
    const rt_op *op;
    rt_bindings *b;
    const rt_stmt *s;
    int32_t out;
    double alpha;
    rt_vc_read rd[3]; // A, B, C
    int32_t n_var[RT_VC_COUNT];
    int32_t *var[RT_VC_COUNT]; // in loop order
    bool k_dep_m;              // some K range depends on an M var
    int64_t n_inst, n_rows, n_reached;
    double interp_points, ref_points, out_points;
    // The reference (rt_vcheck_reference).
    bool have_ref;
    double *w[2];          // per row
    double *k_count;       // per row: the reduce length
    uint8_t *reached;      // per element of C, 1 where the statement writes (NULL: everywhere)
    const double *start;   // C's start values (b's data when the reference was taken)
    double unreached_init; // what '+=!' leaves where it does not reach
};

// One batch instance: its N tuples as segments and the two vectors over them.
typedef struct rt_vc_inst {
    int64_t index;
    int64_t n_t;     // N tuples
    int32_t n_seg;   // segments: lo, hi, t0 and the N vars but the last (seg_len each)
    int32_t seg_len; // 3 + n_var[RT_VC_N] - 1
    int64_t cap_seg, cap_t;
    int64_t *seg;
    double *t[2];
} rt_vc_inst;

// An evaluation context: the vars' values and the shared integer evaluator.
typedef struct rt_vc_ctx {
    const rt_vcheck *vc;
    int64_t *x; // [n_vars]
    rt_err *err;
    rt_spec_eval se;
} rt_vc_ctx;

// ---------------------------------------------------------------------------------------------
// The shape
// ---------------------------------------------------------------------------------------------

typedef struct rt_vc_shape {
    double alpha;
    int32_t n_reads;
    const rt_expr *reads[2];
    int32_t n_sums;
} rt_vc_shape;

// Collects the factors of a product: two reads, numeric constants (alpha), and for '=' one
// implicit sum around them.
static bool rt_vc_factors(const rt_op *op, const rt_expr *e, bool sum_ok, rt_vc_shape *sh) {
    int64_t v;
    switch (e->kind) {
    case RT_EXPR_NUM:
        sh->alpha *= e->num;
        return true;
    case RT_EXPR_SIZE:
        if (!rt_expr_const_int(op, e, &v))
            return false;
        sh->alpha *= (double)v;
        return true;
    case RT_EXPR_UNARY:
        sh->alpha = -sh->alpha;
        return e->uop == RT_UOP_NEG && rt_vc_factors(op, e->args[0], sum_ok, sh);
    case RT_EXPR_BINARY:
        if (e->bop == RT_BOP_MUL)
            return rt_vc_factors(op, e->args[0], sum_ok, sh) &&
                   rt_vc_factors(op, e->args[1], sum_ok, sh);
        if (e->bop != RT_BOP_DIV || e->args[1]->kind != RT_EXPR_NUM || e->args[1]->num == 0.0)
            return false;
        sh->alpha /= e->args[1]->num;
        return rt_vc_factors(op, e->args[0], sum_ok, sh);
    case RT_EXPR_READ:
        if (sh->n_reads == 2)
            return false;
        sh->reads[sh->n_reads++] = e;
        return true;
    case RT_EXPR_SUM:
        if (!sum_ok)
            return false;
        sh->n_sums++;
        return rt_vc_factors(op, e->args[0], false, sh);
    default:
        return false;
    }
}

// Marks in deps the index vars e mentions; false when e holds what a range of the check cannot
// evaluate (a tree child, a dim reference, a sum, a read of a floating tensor).
static bool rt_vc_deps(const rt_op *op, const rt_expr *e, bool *deps) {
    if (!e)
        return true;
    switch (e->kind) {
    case RT_EXPR_INDEX:
        deps[e->var] = true;
        return true;
    case RT_EXPR_CHILD:
    case RT_EXPR_DIMREF:
    case RT_EXPR_SUM:
        return false;
    case RT_EXPR_READ:
        if (!rt_dtype_is_int(op->tensors[e->tensor].dtype))
            return false;
        break;
    default:
        break;
    }
    for (int32_t i = 0; i < e->n_args; i++)
        if (!rt_vc_deps(op, e->args[i], deps))
            return false;
    return true;
}

static bool rt_vc_mentions(const rt_affine *idx, int32_t n_dims, int32_t v) {
    for (int32_t d = 0; d < n_dims; d++)
        for (int32_t i = 0; i < idx[d].n_terms; i++)
            if (idx[d].var[i] == v)
                return true;
    return false;
}

// The classes a range of a var of class c may depend on (a bit per class).
static const unsigned rt_vc_may_depend[RT_VC_COUNT] = {
    [RT_VC_BATCH] = 1u << RT_VC_BATCH,
    [RT_VC_M] = 1u << RT_VC_BATCH | 1u << RT_VC_M,
    [RT_VC_N] = 1u << RT_VC_BATCH | 1u << RT_VC_N,
    [RT_VC_K] = 1u << RT_VC_BATCH | 1u << RT_VC_M,
};

// The reads' affine indices, the vars' classes in loop order and whether every range depends
// only on what its class may. Fills vc when not NULL (arena a). *why: what is not covered.
static bool rt_vc_analyse(rt_arena *a, const rt_op *op, rt_vcheck *vc, const char **why) {
    *why = NULL;
    if (op->n_stmts != 1 || op->n_trees > 0) {
        *why = "not one statement (an epilogue or several outputs)";
        return false;
    }
    const rt_stmt *s = &op->stmts[0];
    if (s->recursive || s->n_preds > 0 || s->n_vars > 4 * RT_MAX_DIMS) {
        *why = "a recursive or predicated statement";
        return false;
    }
    if (s->op != RT_ASSIGN_ADD_INIT && s->op != RT_ASSIGN_ADD && s->op != RT_ASSIGN_SET) {
        *why = "not a sum (the statement is not '+=!', '+=' or '=')";
        return false;
    }
    if (rt_dtype_is_int(op->tensors[s->out].dtype)) {
        *why = "an integer output";
        return false;
    }
    rt_vc_shape sh = {.alpha = 1.0};
    if (!rt_vc_factors(op, s->rhs, s->op == RT_ASSIGN_SET, &sh) || sh.n_reads != 2 ||
        sh.n_sums > 1) {
        *why = "the right-hand side is not a scaled product of two reads";
        return false;
    }
    rt_affine idx[2][RT_MAX_DIMS];
    for (int32_t r = 0; r < 2; r++) {
        const rt_expr *e = sh.reads[r];
        const rt_tensor *t = &op->tensors[e->tensor];
        if (rt_dtype_is_int(t->dtype) || e->tensor == s->out || e->n_args != t->n_dims) {
            *why = "a read of an integer tensor or of the output";
            return false;
        }
        for (int32_t d = 0; d < e->n_args; d++) {
            if (!rt_expr_affine(op, e->args[d], &idx[r][d])) {
                *why = "a read whose index is not affine (a gather)";
                return false;
            }
        }
    }
    // Classes, in loop order: LHS vars as the loops list them, then the reduce vars.
    int32_t order[4 * RT_MAX_DIMS], n_order = 0, cls[4 * RT_MAX_DIMS], pos[4 * RT_MAX_DIMS];
    for (int32_t k = 0; k < s->n_loops; k++)
        if (!s->vars[s->loops[k]].is_reduce)
            order[n_order++] = s->loops[k];
    for (int32_t v = 0; v < s->n_vars; v++)
        if (s->vars[v].is_reduce)
            order[n_order++] = v;
    if (n_order != s->n_vars) {
        *why = "an index var outside the loop nest";
        return false;
    }
    for (int32_t k = 0; k < n_order; k++) {
        int32_t v = order[k];
        bool in_a = rt_vc_mentions(idx[0], sh.reads[0]->n_args, v);
        bool in_b = rt_vc_mentions(idx[1], sh.reads[1]->n_args, v);
        cls[v] = s->vars[v].is_reduce ? RT_VC_K
                 : in_a == in_b       ? RT_VC_BATCH
                 : in_a               ? RT_VC_M
                                      : RT_VC_N;
        pos[v] = k;
    }
    bool k_dep_m = false;
    for (int32_t v = 0; v < s->n_vars; v++) {
        bool deps[4 * RT_MAX_DIMS] = {false};
        if (!rt_vc_deps(op, s->vars[v].lo, deps) || !rt_vc_deps(op, s->vars[v].hi, deps)) {
            *why = "a range that is not an integer expression of sizes, vars and lengths";
            return false;
        }
        for (int32_t u = 0; u < s->n_vars; u++) {
            if (!deps[u])
                continue;
            if (!(rt_vc_may_depend[cls[v]] & 1u << cls[u]) ||
                (cls[u] == cls[v] && pos[u] >= pos[v])) {
                *why = "a range that ties N to M or K (a mask across the output)";
                return false;
            }
            k_dep_m = k_dep_m || (cls[v] == RT_VC_K && cls[u] == RT_VC_M);
        }
    }
    if (!vc)
        return true;
    vc->s = s;
    vc->out = s->out;
    vc->alpha = sh.alpha;
    vc->k_dep_m = k_dep_m;
    for (int32_t c = 0; c < RT_VC_COUNT; c++) {
        vc->var[c] = rt_arena_calloc(a, rt_at_least_one((size_t)s->n_vars), sizeof(int32_t));
        if (!vc->var[c])
            return false;
    }
    for (int32_t k = 0; k < n_order; k++) {
        int32_t v = order[k];
        vc->var[cls[v]][vc->n_var[cls[v]]++] = v;
    }
    for (int32_t r = 0; r < 3; r++) {
        rt_vc_read *rd = &vc->rd[r];
        rd->e = r < 2 ? sh.reads[r] : NULL;
        rd->tensor = r < 2 ? sh.reads[r]->tensor : s->out;
        rd->n_dims = r < 2 ? sh.reads[r]->n_args : s->n_lhs;
        for (int32_t d = 0; d < rd->n_dims; d++)
            rd->idx[d] =
                r < 2 ? idx[r][d] : (rt_affine){.n_terms = 1, .var = {s->lhs_vars[d]}, .coef = {1}};
    }
    return true;
}

bool rt_vcheck_covers(const rt_op *op, const char **why) {
    return rt_vc_analyse(NULL, op, NULL, why);
}

// ---------------------------------------------------------------------------------------------
// Ranges, offsets, lines
// ---------------------------------------------------------------------------------------------

static rt_status rt_vc_leaf(rt_spec_eval *se, const rt_expr *e, int64_t *out) {
    rt_vc_ctx *c = se->ctx;
    const rt_bindings *b = c->vc->b;
    if (e->kind == RT_EXPR_INDEX) {
        *out = c->x[e->var];
        return RT_OK;
    }
    if (e->kind == RT_EXPR_SIZE && e->sym >= 0 && e->sym < c->vc->op->n_sizes &&
        b->size_bound[e->sym]) {
        *out = b->sizes[e->sym];
        return RT_OK;
    }
    if (e->kind == RT_EXPR_READ) {
        const rt_tensor *t = &c->vc->op->tensors[e->tensor];
        const rt_tensor_data *d = &b->tensors[e->tensor];
        int64_t idx[RT_MAX_DIMS], off;
        for (int32_t k = 0; k < e->n_args && k < RT_MAX_DIMS; k++)
            RT_TRY(rt_spec_eval_int(se, e->args[k], &idx[k]));
        if (d->data && e->n_args == t->n_dims && rt_layout_offset(&d->layout, idx, &off))
            return rt_spec_eval_to_int(se, e, d->data[off], out);
        if (t->has_pad)
            return rt_spec_eval_to_int(se, e, t->pad_value, out);
        return rt_fail(c->err, RT_ERR_SPEC, e->loc, "a range reads %s outside its extent", t->name);
    }
    return rt_fail(c->err, RT_ERR_SPEC, e->loc, "a range the random-vector check cannot evaluate");
}

static void rt_vc_ctx_init(rt_vc_ctx *c, const rt_vcheck *vc, int64_t *x, rt_err *err) {
    c->vc = vc;
    c->x = x;
    c->err = err;
    c->se = (rt_spec_eval){
        .op = vc->op, .stmt = vc->s, .arena = vc->a, .err = err, .ctx = c, .leaf = rt_vc_leaf};
}

static rt_status rt_vc_range(rt_vc_ctx *c, int32_t v, int64_t *lo, int64_t *hi) {
    const rt_ivar *iv = &c->vc->s->vars[v];
    if (!iv->lo || !iv->hi)
        return rt_fail(c->err, RT_ERR_SPEC, iv->loc, "index '%s' has no range", iv->name);
    RT_TRY(rt_spec_eval_int(&c->se, iv->lo, lo));
    return rt_spec_eval_int(&c->se, iv->hi, hi);
}

// An odometer over vars[0..n), each var's range evaluated when the vars outside it move:
//   for (rt_vc_first(c, &it, vars, n); it.ok; rt_vc_next(c, &it)) ...; then RT_TRY(it.st).
typedef struct rt_vc_iter {
    const int32_t *vars;
    int32_t n;
    bool ok;      // at a point
    rt_status st; // a range's error ends the walk
    int64_t hi[4 * RT_MAX_DIMS];
} rt_vc_iter;

// From vars[0..k) as they are, the first point of vars[k..n) (carrying into the outer vars past
// empty ranges); it->ok false when there is none.
static void rt_vc_settle(rt_vc_ctx *c, rt_vc_iter *it, int32_t k) {
    it->ok = false;
    for (;;) {
        if (k == it->n) {
            it->ok = true;
            return;
        }
        int64_t lo;
        it->st = rt_vc_range(c, it->vars[k], &lo, &it->hi[k]);
        if (it->st != RT_OK)
            return;
        if (lo < it->hi[k]) {
            c->x[it->vars[k++]] = lo;
            continue;
        }
        for (;;) {
            if (k == 0)
                return;
            k--;
            if (++c->x[it->vars[k]] < it->hi[k])
                break;
        }
        k++;
    }
}

static void rt_vc_first(rt_vc_ctx *c, rt_vc_iter *it, const int32_t *vars, int32_t n) {
    it->vars = vars;
    it->n = n;
    it->st = RT_OK;
    rt_vc_settle(c, it, 0);
}

static void rt_vc_next(rt_vc_ctx *c, rt_vc_iter *it) {
    int32_t k = it->n;
    for (;;) {
        if (k == 0) {
            it->ok = false;
            return;
        }
        k--;
        if (++c->x[it->vars[k]] < it->hi[k])
            break;
    }
    rt_vc_settle(c, it, k + 1);
}

static bool rt_vc_offset(const rt_vcheck *vc, const rt_vc_read *r, const int64_t *x, int64_t *off) {
    int64_t idx[RT_MAX_DIMS];
    for (int32_t d = 0; d < r->n_dims; d++) {
        const rt_affine *f = &r->idx[d];
        int64_t v = f->c0;
        for (int32_t i = 0; i < f->n_terms; i++)
            v += f->coef[i] * x[f->var[i]];
        idx[d] = v;
    }
    return rt_layout_offset(&vc->b->tensors[r->tensor].layout, idx, off);
}

// Value of read r at x: its element, the pad value outside the extent, or NaN there (strict:
// the interpreter's error) when the tensor has no pad.
static rt_status rt_vc_value(const rt_vc_ctx *c, const rt_vc_read *r, bool strict, double *out) {
    int64_t off;
    const rt_tensor *t = &c->vc->op->tensors[r->tensor];
    if (rt_vc_offset(c->vc, r, c->x, &off)) {
        *out = c->vc->b->tensors[r->tensor].data[off];
        return RT_OK;
    }
    if (t->has_pad) {
        *out = t->pad_value;
        return RT_OK;
    }
    *out = (double)NAN;
    if (!strict)
        return RT_OK;
    if (!r->e)
        return rt_fail(c->err, RT_ERR_SPEC, c->vc->s->loc, "statement writes %s outside its extent",
                       t->name);
    return rt_fail(c->err, RT_ERR_SPEC, r->e->loc, "a read of %s outside its extent", t->name);
}

// The offsets of read r along var v over [lo, hi) (v < 0: the one point x): *strided true with
// off0 and stride when the offset is affine in v and both ends are inside the extent (then every
// point between is), else false (read element by element).
static bool rt_vc_line(const rt_vc_ctx *c, const rt_vc_read *r, int32_t v, int64_t lo, int64_t hi,
                       int64_t *off0, int64_t *stride) {
    *stride = 0;
    if (v < 0)
        return rt_vc_offset(c->vc, r, c->x, off0);
    if (!r->linear[v])
        return false;
    int64_t off1;
    c->x[v] = hi - 1;
    bool ok = rt_vc_offset(c->vc, r, c->x, &off1);
    c->x[v] = lo;
    if (!ok || !rt_vc_offset(c->vc, r, c->x, off0))
        return false;
    if (hi - lo >= 2) {
        int64_t o;
        c->x[v] = lo + 1;
        ok = rt_vc_offset(c->vc, r, c->x, &o);
        c->x[v] = lo;
        *stride = o - *off0;
        return ok && *off0 + *stride * (hi - 1 - lo) == off1;
    }
    return true;
}

// Whether read r's offset is affine in var v: every dim after the outermost dim that v indexes
// is dense.
static bool rt_vc_linear_in(const rt_vcheck *vc, const rt_vc_read *r, int32_t v) {
    const rt_layout *l = &vc->b->tensors[r->tensor].layout;
    int32_t d0 = -1;
    for (int32_t d = 0; d < r->n_dims && d0 < 0; d++)
        for (int32_t i = 0; i < r->idx[d].n_terms; i++)
            if (r->idx[d].var[i] == v)
                d0 = d;
    for (int32_t d = d0 + 1; d0 >= 0 && d < r->n_dims; d++)
        if (l->start[d])
            return false;
    return true;
}

// ---------------------------------------------------------------------------------------------
// Batch instances and their N segments
// ---------------------------------------------------------------------------------------------

void rt_vcheck_vector(int32_t v, int64_t batch, int64_t n, double *t) {
    rt_rng r;
    rt_rng_stream(&r, rt_vc_seeds[v & 1], (uint64_t)batch);
    for (int64_t i = 0; i < n; i++)
        t[i] = rt_rng_uniform(&r) * 2 - 1;
}

static void rt_vc_inst_free(rt_vc_inst *in) {
    free(in->seg);
    free(in->t[0]);
    free(in->t[1]);
}

// The N segments of the instance at c->x (batch vars set); with vectors, both vectors over them.
static rt_status rt_vc_inst_build(rt_vc_ctx *c, rt_vc_inst *in, bool vectors) {
    const rt_vcheck *vc = c->vc;
    int32_t nn = vc->n_var[RT_VC_N];
    const int32_t *nv = vc->var[RT_VC_N];
    in->seg_len = 3 + (nn > 0 ? nn - 1 : 0);
    in->n_seg = 0;
    in->n_t = 0;
    rt_vc_iter it;
    for (rt_vc_first(c, &it, nv, nn > 0 ? nn - 1 : 0); it.ok; rt_vc_next(c, &it)) {
        int64_t lo = 0, hi = 1;
        if (nn > 0)
            RT_TRY(rt_vc_range(c, nv[nn - 1], &lo, &hi));
        if (hi <= lo)
            continue;
        if (in->n_seg + 1 > in->cap_seg) {
            int64_t cap = 2 * in->cap_seg + 16;
            int64_t *p = realloc(in->seg, (size_t)(cap * in->seg_len) * sizeof *p);
            if (!p)
                return rt_fail(c->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
            in->seg = p;
            in->cap_seg = cap;
        }
        int64_t *sg = in->seg + (int64_t)in->n_seg++ * in->seg_len;
        sg[0] = lo;
        sg[1] = hi;
        sg[2] = in->n_t;
        for (int32_t k = 0; k + 1 < nn; k++)
            sg[3 + k] = c->x[nv[k]];
        in->n_t += hi - lo;
    }
    RT_TRY(it.st);
    if (!vectors)
        return RT_OK;
    if (in->n_t > in->cap_t) {
        for (int32_t v = 0; v < 2; v++) {
            free(in->t[v]);
            in->t[v] = malloc((size_t)in->n_t * sizeof(double));
            if (!in->t[v])
                return rt_fail(c->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        }
        in->cap_t = in->n_t;
    }
    for (int32_t v = 0; v < 2; v++)
        rt_vcheck_vector(v, in->index, in->n_t, in->t[v]);
    return RT_OK;
}

// Sets the N vars of segment g (all but the last); returns the last var (-1: none).
static int32_t rt_vc_seg_set(const rt_vc_ctx *c, const rt_vc_inst *in, int32_t g) {
    const rt_vcheck *vc = c->vc;
    int32_t nn = vc->n_var[RT_VC_N];
    const int64_t *sg = in->seg + (int64_t)g * in->seg_len;
    for (int32_t k = 0; k + 1 < nn; k++)
        c->x[vc->var[RT_VC_N][k]] = sg[3 + k];
    return nn > 0 ? vc->var[RT_VC_N][nn - 1] : -1;
}

// The reduce length of the row at c->x (batch and M vars set).
static rt_status rt_vc_k_count(rt_vc_ctx *c, double *out) {
    *out = 1;
    for (int32_t k = 0; k < c->vc->n_var[RT_VC_K]; k++) {
        int64_t lo, hi;
        RT_TRY(rt_vc_range(c, c->vc->var[RT_VC_K][k], &lo, &hi));
        *out *= hi > lo ? (double)(hi - lo) : 0.0;
    }
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// The walk over batch instances
// ---------------------------------------------------------------------------------------------

typedef rt_status (*rt_vc_inst_fn)(rt_vc_ctx *c, rt_vc_inst *in, void *ctx);

static rt_status rt_vc_walk(rt_vc_ctx *c, rt_vc_inst *in, bool vectors, rt_vc_inst_fn fn,
                            void *ctx) {
    rt_vc_iter it;
    int64_t index = 0;
    for (rt_vc_first(c, &it, c->vc->var[RT_VC_BATCH], c->vc->n_var[RT_VC_BATCH]); it.ok;
         rt_vc_next(c, &it)) {
        in->index = index++;
        RT_TRY(rt_vc_inst_build(c, in, vectors));
        RT_TRY(fn(c, in, ctx));
    }
    RT_TRY(it.st);
    return RT_OK;
}

// fn on every batch instance in enumeration order (with both vectors when vectors).
static rt_status rt_vc_each_inst(const rt_vcheck *vc, bool vectors, rt_vc_inst_fn fn, void *ctx,
                                 rt_err *err) {
    int64_t *x = calloc(rt_at_least_one((size_t)vc->s->n_vars), sizeof *x);
    if (!x)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_vc_ctx c;
    rt_vc_ctx_init(&c, vc, x, err);
    rt_vc_inst in;
    memset(&in, 0, sizeof in);
    rt_status st = rt_vc_walk(&c, &in, vectors, fn, ctx);
    rt_vc_inst_free(&in);
    free(x);
    return st;
}

// ---------------------------------------------------------------------------------------------
// The plan: counts
// ---------------------------------------------------------------------------------------------

static rt_status rt_vc_count_inst(rt_vc_ctx *c, rt_vc_inst *in, void *ctx) {
    rt_vcheck *vc = ctx;
    double kc = 0, k_max = 0;
    if (!vc->k_dep_m)
        RT_TRY(rt_vc_k_count(c, &kc));
    rt_vc_iter it;
    int64_t rows = 0;
    for (rt_vc_first(c, &it, vc->var[RT_VC_M], vc->n_var[RT_VC_M]); it.ok; rt_vc_next(c, &it)) {
        if (vc->k_dep_m)
            RT_TRY(rt_vc_k_count(c, &kc));
        rows++;
        vc->interp_points += (double)in->n_t * kc;
        vc->ref_points += 2 * kc;
        k_max = fmax(k_max, kc);
    }
    RT_TRY(it.st);
    vc->n_inst++;
    vc->n_rows += rows;
    vc->n_reached += rows * in->n_t;
    vc->ref_points += 2 * k_max * (double)in->n_t + (double)in->n_t;
    return RT_OK;
}

rt_status rt_vcheck_plan(rt_arena *a, const rt_op *op, rt_bindings *b, rt_vcheck **out,
                         const char **why, rt_err *err) {
    *out = NULL;
    rt_vcheck *vc;
    RT_ALLOC(a, vc, 1, err);
    vc->a = a;
    vc->op = op;
    vc->b = b;
    if (!rt_vc_analyse(a, op, vc, why))
        return *why ? RT_OK : rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    RT_TRY(rt_bindings_prepare(b, err));
    for (int32_t r = 0; r < 3; r++) {
        RT_ALLOC(a, vc->rd[r].linear, vc->s->n_vars, err);
        for (int32_t v = 0; v < vc->s->n_vars; v++)
            vc->rd[r].linear[v] = rt_vc_linear_in(vc, &vc->rd[r], v);
    }
    RT_TRY(rt_vc_each_inst(vc, false, rt_vc_count_inst, vc, err));
    int64_t elems = rt_tensor_elems(b, vc->out);
    vc->out_points = 2 * (double)vc->n_reached + (vc->n_reached != elems ? (double)elems : 0);
    if (vc->s->op == RT_ASSIGN_ADD)
        vc->ref_points += 2 * (double)vc->n_reached;
    *out = vc;
    return RT_OK;
}

double rt_vcheck_interp_points(const rt_vcheck *vc) {
    return vc->interp_points;
}

double rt_vcheck_ref_points(const rt_vcheck *vc) {
    return vc->ref_points;
}

double rt_vcheck_out_points(const rt_vcheck *vc) {
    return vc->out_points;
}

bool rt_vcheck_preferred(const rt_vcheck *vc, double limit_points) {
    double limit = limit_points > 0 ? limit_points : (double)(1 << 22);
    return vc && vc->interp_points > limit && vc->ref_points + vc->out_points <= vc->interp_points;
}

// ---------------------------------------------------------------------------------------------
// The reference: alpha A (B t) (+ C0 t) per row
// ---------------------------------------------------------------------------------------------

typedef struct rt_vc_ref {
    rt_vcheck *vc;
    int64_t row;
    int64_t cap_z;
    double *z[2];
    int64_t blo[4 * RT_MAX_DIMS], bspan[4 * RT_MAX_DIMS], bstride[4 * RT_MAX_DIMS];
} rt_vc_ref;

// sum_i v_i t_i over both vectors for read r along var last over [lo, hi), t from t0.
static rt_status rt_vc_dot(rt_vc_ctx *c, const rt_vc_read *r, int32_t last, int64_t lo, int64_t hi,
                           const double *t0, const double *t1, bool strict, double *s0,
                           double *s1) {
    int64_t off, stride;
    const double *d = c->vc->b->tensors[r->tensor].data;
    if (rt_vc_line(c, r, last, lo, hi, &off, &stride)) {
        for (int64_t i = 0; i < hi - lo; i++) {
            double v = d[off + i * stride];
            *s0 += v * t0[i];
            *s1 += v * t1[i];
        }
        return RT_OK;
    }
    for (int64_t i = 0; i < hi - lo; i++) {
        double v;
        if (last >= 0)
            c->x[last] = lo + i;
        RT_TRY(rt_vc_value(c, r, strict, &v));
        *s0 += v * t0[i];
        *s1 += v * t1[i];
    }
    return RT_OK;
}

// The bounding box of the K points over every row of the instance (row-major strides).
static rt_status rt_vc_box(rt_vc_ctx *c, rt_vc_ref *R, int64_t *box_n) {
    const rt_vcheck *vc = c->vc;
    int32_t nk = vc->n_var[RT_VC_K];
    int64_t bhi[4 * RT_MAX_DIMS];
    for (int32_t k = 0; k < nk; k++) {
        R->blo[k] = INT64_MAX;
        bhi[k] = INT64_MIN;
    }
    rt_vc_iter it;
    for (rt_vc_first(c, &it, vc->var[RT_VC_M], vc->k_dep_m ? vc->n_var[RT_VC_M] : 0); it.ok;
         rt_vc_next(c, &it)) {
        int64_t lo[4 * RT_MAX_DIMS], hi[4 * RT_MAX_DIMS];
        bool empty = false;
        for (int32_t k = 0; k < nk; k++) {
            RT_TRY(rt_vc_range(c, vc->var[RT_VC_K][k], &lo[k], &hi[k]));
            empty = empty || hi[k] <= lo[k];
        }
        for (int32_t k = 0; k < nk && !empty; k++) {
            R->blo[k] = lo[k] < R->blo[k] ? lo[k] : R->blo[k];
            bhi[k] = hi[k] > bhi[k] ? hi[k] : bhi[k];
        }
    }
    RT_TRY(it.st);
    double n = 1;
    for (int32_t k = nk - 1; k >= 0; k--) {
        R->bspan[k] = bhi[k] > R->blo[k] ? bhi[k] - R->blo[k] : 0;
        R->bstride[k] = (int64_t)n;
        n *= (double)R->bspan[k];
    }
    if (n > 1e12)
        return rt_fail(c->err, RT_ERR_NOMEM, RT_NOLOC, "a reduce box of %.3g points", n);
    *box_n = (int64_t)n;
    return RT_OK;
}

// z = B t over the box of the instance.
static rt_status rt_vc_z(rt_vc_ctx *c, rt_vc_inst *in, rt_vc_ref *R, int64_t box_n) {
    const rt_vcheck *vc = c->vc;
    int32_t nk = vc->n_var[RT_VC_K];
    for (int64_t q = 0; q < box_n; q++) {
        int64_t rem = q;
        for (int32_t k = nk - 1; k >= 0; k--) {
            c->x[vc->var[RT_VC_K][k]] = R->blo[k] + rem % R->bspan[k];
            rem /= R->bspan[k];
        }
        double s0 = 0, s1 = 0;
        for (int32_t g = 0; g < in->n_seg; g++) {
            int32_t last = rt_vc_seg_set(c, in, g);
            const int64_t *sg = in->seg + (int64_t)g * in->seg_len;
            RT_TRY(rt_vc_dot(c, &vc->rd[1], last, sg[0], sg[1], in->t[0] + sg[2], in->t[1] + sg[2],
                             false, &s0, &s1));
        }
        R->z[0][q] = s0;
        R->z[1][q] = s1;
    }
    return RT_OK;
}

// One row's alpha A z (+ C0 t), its reduce length, and the elements it reaches.
static rt_status rt_vc_ref_row(rt_vc_ctx *c, rt_vc_inst *in, rt_vc_ref *R) {
    rt_vcheck *vc = R->vc;
    int32_t nk = vc->n_var[RT_VC_K];
    const int32_t *kv = vc->var[RT_VC_K];
    int64_t r = R->row++;
    double a0 = 0, a1 = 0, kc = 0;
    rt_vc_iter it;
    for (rt_vc_first(c, &it, kv, nk > 0 ? nk - 1 : 0); it.ok; rt_vc_next(c, &it)) {
        int64_t lo = 0, hi = 1, zi = 0;
        if (nk > 0)
            RT_TRY(rt_vc_range(c, kv[nk - 1], &lo, &hi));
        if (hi <= lo)
            continue;
        for (int32_t k = 0; k + 1 < nk; k++)
            zi += (c->x[kv[k]] - R->blo[k]) * R->bstride[k];
        if (nk > 0)
            zi += lo - R->blo[nk - 1];
        RT_TRY(rt_vc_dot(c, &vc->rd[0], nk > 0 ? kv[nk - 1] : -1, lo, hi, R->z[0] + zi,
                         R->z[1] + zi, true, &a0, &a1));
        kc += (double)(hi - lo);
    }
    RT_TRY(it.st);
    a0 *= vc->alpha;
    a1 *= vc->alpha;
    for (int32_t g = 0; g < in->n_seg; g++) {
        int32_t last = rt_vc_seg_set(c, in, g);
        const int64_t *sg = in->seg + (int64_t)g * in->seg_len;
        if (vc->s->op == RT_ASSIGN_ADD)
            RT_TRY(rt_vc_dot(c, &vc->rd[2], last, sg[0], sg[1], in->t[0] + sg[2], in->t[1] + sg[2],
                             true, &a0, &a1));
        for (int64_t i = 0; vc->reached && i < sg[1] - sg[0]; i++) {
            int64_t off;
            if (last >= 0)
                c->x[last] = sg[0] + i;
            if (!rt_vc_offset(vc, &vc->rd[2], c->x, &off))
                return rt_fail(c->err, RT_ERR_SPEC, vc->s->loc,
                               "statement writes %s outside its extent",
                               vc->op->tensors[vc->out].name);
            vc->reached[off] = 1;
        }
    }
    vc->w[0][r] = a0;
    vc->w[1][r] = a1;
    vc->k_count[r] = kc;
    return RT_OK;
}

static rt_status rt_vc_ref_inst(rt_vc_ctx *c, rt_vc_inst *in, void *ctx) {
    rt_vc_ref *R = ctx;
    int64_t box_n = 0;
    RT_TRY(rt_vc_box(c, R, &box_n));
    if (box_n > R->cap_z) {
        for (int32_t v = 0; v < 2; v++) {
            free(R->z[v]);
            R->z[v] = malloc((size_t)box_n * sizeof(double));
            if (!R->z[v])
                return rt_fail(c->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        }
        R->cap_z = box_n;
    }
    RT_TRY(rt_vc_z(c, in, R, box_n));
    rt_vc_iter it;
    for (rt_vc_first(c, &it, R->vc->var[RT_VC_M], R->vc->n_var[RT_VC_M]); it.ok; rt_vc_next(c, &it))
        RT_TRY(rt_vc_ref_row(c, in, R));
    RT_TRY(it.st);
    return RT_OK;
}

rt_status rt_vcheck_reference(rt_vcheck *vc, rt_err *err) {
    const rt_tensor_data *cd = &vc->b->tensors[vc->out];
    int64_t elems = cd->layout.elems;
    RT_ALLOC(vc->a, vc->w[0], vc->n_rows, err);
    RT_ALLOC(vc->a, vc->w[1], vc->n_rows, err);
    RT_ALLOC(vc->a, vc->k_count, vc->n_rows, err);
    vc->reached = NULL;
    if (vc->n_reached != elems)
        RT_ALLOC(vc->a, vc->reached, elems, err);
    vc->start = cd->data;
    vc->unreached_init =
        rt_dtype_round(vc->op->tensors[vc->out].dtype, rt_assign_identity(vc->s->op));
    rt_vc_ref R;
    memset(&R, 0, sizeof R);
    R.vc = vc;
    rt_status st = rt_vc_each_inst(vc, true, rt_vc_ref_inst, &R, err);
    free(R.z[0]);
    free(R.z[1]);
    RT_TRY(st);
    for (int64_t r = 0; r < vc->n_rows; r++)
        if (!isfinite(vc->w[0][r]) || !isfinite(vc->w[1][r]))
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                           "the random-vector reference of %s is not finite at row %lld (an "
                           "input that is not finite, or a read outside an extent)",
                           vc->op->tensors[vc->out].name, (long long)r);
    vc->have_ref = true;
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// One output against the reference
// ---------------------------------------------------------------------------------------------

typedef struct rt_vc_out {
    const void *data;
    bool f32;
    int64_t row;
    double rel_base, u_acc, u_out; // the tolerance's terms (vcheck.h)
    double err2, ref2;
    rt_vcheck_result *r;
} rt_vc_out;

static double rt_vc_get(const rt_vc_out *O, int64_t e) {
    return O->f32 ? (double)((const float *)O->data)[e] : ((const double *)O->data)[e];
}

// The unit roundoff of type t.
static double rt_vc_unit(rt_dtype t) {
    switch (t) {
    case RT_DTYPE_F64:
        return 0x1p-53;
    case RT_DTYPE_F16:
        return 0x1p-11;
    case RT_DTYPE_BF16:
        return 0x1p-8;
    default:
        return 0x1p-24;
    }
}

// Row r's y (C t) and s (sum of (t C)^2) for vector v against its reference.
static void rt_vc_judge(rt_vc_out *O, const rt_vcheck *vc, int64_t r, int32_t v, double y,
                        double s) {
    rt_vcheck_result *res = O->r;
    double w = vc->w[v][r];
    double rel = fmax(O->rel_base, 2 * (O->u_acc * sqrt(vc->k_count[r]) + O->u_out));
    double allowed = RT_VC_LAMBDA * rel * sqrt(s);
    double err = isfinite(y) ? fabs(y - w) : (double)INFINITY;
    double ratio = err <= allowed ? (allowed > 0 ? err / allowed : 0.0) : (double)INFINITY;
    if (err > allowed && allowed > 0)
        ratio = err / allowed;
    if (!isfinite(y))
        res->n_nonfinite++;
    res->max_abs_err = fmax(res->max_abs_err, err);
    res->max_rel_err = fmax(res->max_rel_err, err / fmax(fabs(w), RT_COMPARE_REL_FLOOR));
    O->err2 += err * err;
    O->ref2 += w * w;
    if (ratio > res->max_err_ratio || res->worst_row < 0) {
        res->max_err_ratio = fmax(res->max_err_ratio, ratio);
        res->worst_row = r;
        res->worst_vector = v;
        res->worst_y = y;
        res->worst_w = w;
        res->worst_allowed = allowed;
    }
}

static rt_status rt_vc_out_inst(rt_vc_ctx *c, rt_vc_inst *in, void *ctx) {
    rt_vc_out *O = ctx;
    const rt_vcheck *vc = c->vc;
    rt_vc_iter it;
    for (rt_vc_first(c, &it, vc->var[RT_VC_M], vc->n_var[RT_VC_M]); it.ok; rt_vc_next(c, &it)) {
        double y0 = 0, y1 = 0, s0 = 0, s1 = 0;
        for (int32_t g = 0; g < in->n_seg; g++) {
            int32_t last = rt_vc_seg_set(c, in, g);
            const int64_t *sg = in->seg + (int64_t)g * in->seg_len;
            const double *t0 = in->t[0] + sg[2], *t1 = in->t[1] + sg[2];
            int64_t off, stride, n = sg[1] - sg[0];
            bool strided = rt_vc_line(c, &vc->rd[2], last, sg[0], sg[1], &off, &stride);
            for (int64_t i = 0; i < n; i++) {
                if (!strided) {
                    if (last >= 0)
                        c->x[last] = sg[0] + i;
                    if (!rt_vc_offset(vc, &vc->rd[2], c->x, &off))
                        return rt_fail(c->err, RT_ERR_SPEC, vc->s->loc,
                                       "statement writes %s outside its extent",
                                       vc->op->tensors[vc->out].name);
                }
                double e = rt_vc_get(O, strided ? off + i * stride : off);
                double p0 = e * t0[i], p1 = e * t1[i];
                y0 += p0;
                y1 += p1;
                s0 += p0 * p0;
                s1 += p1 * p1;
            }
        }
        rt_vc_judge(O, vc, O->row, 0, y0, s0);
        rt_vc_judge(O, vc, O->row, 1, y1, s1);
        O->row++;
    }
    RT_TRY(it.st);
    return RT_OK;
}

rt_status rt_vcheck_output(const rt_vcheck *vc, const void *data, rt_dtype type,
                           rt_vcheck_result *out, rt_err *err) {
    memset(out, 0, sizeof *out);
    out->worst_row = -1;
    out->unreached_bad = -1;
    if (!vc->have_ref)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "rt_vcheck_output before rt_vcheck_reference");
    rt_dtype ct = vc->op->tensors[vc->out].dtype;
    rt_vc_out O = {.data = data,
                   .f32 = type == RT_DTYPE_F32,
                   .rel_base = sqrt(rt_tolerance_of(ct)->nmse_tol),
                   .u_acc = rt_vc_unit(vc->s->acc_dtype),
                   .u_out = rt_vc_unit(ct),
                   .r = out};
    RT_TRY(rt_vc_each_inst(vc, true, rt_vc_out_inst, &O, err));
    out->nmse = O.ref2 > 0 ? O.err2 / O.ref2 : O.err2;
    int64_t elems = vc->b->tensors[vc->out].layout.elems;
    for (int64_t e = 0; vc->reached && e < elems; e++) {
        if (vc->reached[e])
            continue;
        double want = vc->s->op == RT_ASSIGN_ADD_INIT ? vc->unreached_init
                      : vc->start                     ? vc->start[e]
                                                      : 0.0;
        double got = rt_vc_get(&O, e);
        if (got == want || (isnan(got) && isnan(want)))
            continue;
        out->unreached_bad = e;
        out->unreached_value = got;
        out->unreached_want = want;
        break;
    }
    out->accepted = out->n_nonfinite == 0 && out->max_err_ratio <= 1.0 && out->unreached_bad < 0;
    return RT_OK;
}

void rt_vcheck_explain(const rt_vcheck *vc, const rt_vcheck_result *r, char *buf, size_t size) {
    const char *name = vc->op->tensors[vc->out].name;
    if (r->unreached_bad >= 0 && (r->n_nonfinite == 0 && r->max_err_ratio <= 1.0))
        snprintf(buf, size, "%s[%lld] is %.9g where the statement writes nothing (expected %.9g)",
                 name, (long long)r->unreached_bad, r->unreached_value, r->unreached_want);
    else if (r->n_nonfinite > 0)
        snprintf(buf, size,
                 "%s t differs from alpha A (B t): not finite in %lld rows (row %lld for random "
                 "vector %d; a NaN, or an element never written)",
                 name, (long long)r->n_nonfinite, (long long)r->worst_row,
                 (int)r->worst_vector + 1);
    else
        snprintf(buf, size,
                 "%s t differs from alpha A (B t) by %.3g at row %lld for random vector %d "
                 "(allowed %.3g; %.9g, expected %.9g)",
                 name, fabs(r->worst_y - r->worst_w), (long long)r->worst_row,
                 (int)r->worst_vector + 1, r->worst_allowed, r->worst_y, r->worst_w);
}
