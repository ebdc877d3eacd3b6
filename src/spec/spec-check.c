// spec-check.c: the op-spec checker. Third stage of the front end, after spec-parse.c:
// statement rules (one writer per tensor, no written parameters, reads after writes,
// recursion only at tree children, integer tensors read only in integer contexts, the
// accumulation type), the implicit sums of '=' statements, range inference for
// every index variable (from tensor extents, where-ranges, pad intersections), bounds proofs
// of non-trivial index expressions, output-shape inference, directive checks and the
// canonicalizing axis fusion (Roller §3.2, with CORA's ragged fused loops).
// Ranges are proved with a small symbolic prover over linear forms whose atoms are index
// variables, length-tensor reads and run-time sizes, plus interval bounds for floor division
// and modulo by a positive constant.
#include "spec-int.h"

#include <string.h>

typedef struct rt_checker {
    rt_arena *a;
    rt_op *op;
    rt_err *err;
    bool *shape_known; // per tensor: given, or inferred by an earlier statement
    rt_stmt *st;       // statement being checked
    int32_t *pos;      // per var: position in the loop order (loops, then '=' sum vars)
    rt_expr **acc;     // accesses of the statement: [0] the left side, then every read
    int32_t n_acc, cap_acc;
    int32_t nest;   // depth of nested division/modulo bounds (atom_bound)
    int32_t budget; // division/modulo bounds left to the current proof (atom_bound)
} rt_checker;

#define NOMEM(c) rt_fail((c)->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory")

static const char *print_expr(rt_checker *c, const rt_tensor *t, const rt_expr *e) {
    rt_buf b;
    rt_buf_init(&b, c->a);
    rt_expr_print(c->op, c->st, t, e, &b);
    return b.data && !b.oom ? b.data : "?";
}

// ---------------------------------------------------------------------------------------------
// Symbolic upper bounds over linear forms
// ---------------------------------------------------------------------------------------------

#define RT_LF_MAX 16

typedef struct rt_lf {
    int32_t n;
    const rt_expr *atom[RT_LF_MAX];
    int64_t coef[RT_LF_MAX];
    int64_t c0;
} rt_lf;

static bool atom_eq(const rt_expr *a, const rt_expr *b) {
    if (a->kind == RT_EXPR_INDEX && b->kind == RT_EXPR_INDEX)
        return a->var == b->var;
    return rt_expr_equal(a, b);
}

static bool lf_atom(rt_lf *f, const rt_expr *atom, int64_t coef) {
    for (int32_t i = 0; i < f->n; i++)
        if (atom_eq(f->atom[i], atom))
            return !__builtin_add_overflow(f->coef[i], coef, &f->coef[i]);
    if (f->n == RT_LF_MAX)
        return false;
    f->atom[f->n] = atom;
    f->coef[f->n++] = coef;
    return true;
}

// f += scale * e. False when e is not an integer expression or arithmetic overflows.
static bool lf_add(const rt_op *op, rt_lf *f, const rt_expr *e, int64_t scale) {
    int64_t c, t;
    if (!e || !e->is_int)
        return false;
    if (rt_expr_const_int(op, e, &c))
        return !__builtin_mul_overflow(scale, c, &t) && !__builtin_add_overflow(f->c0, t, &f->c0);
    if (e->kind == RT_EXPR_UNARY && e->uop == RT_UOP_NEG && scale != INT64_MIN)
        return lf_add(op, f, e->args[0], -scale);
    if (e->kind == RT_EXPR_BINARY && (e->bop == RT_BOP_ADD || e->bop == RT_BOP_SUB)) {
        if (e->bop == RT_BOP_SUB && scale == INT64_MIN)
            return false;
        return lf_add(op, f, e->args[0], scale) &&
               lf_add(op, f, e->args[1], e->bop == RT_BOP_ADD ? scale : -scale);
    }
    if (e->kind == RT_EXPR_BINARY && e->bop == RT_BOP_MUL) {
        if (rt_expr_const_int(op, e->args[0], &c))
            return !__builtin_mul_overflow(scale, c, &t) && lf_add(op, f, e->args[1], t);
        if (rt_expr_const_int(op, e->args[1], &c))
            return !__builtin_mul_overflow(scale, c, &t) && lf_add(op, f, e->args[0], t);
    }
    return lf_atom(f, e, scale); // index variable or an opaque term
}

static bool atom_bound(rt_checker *c, const rt_expr *a, bool upper, int64_t *out);

// Upper bound of f: eliminates index variables innermost first (v <= hi - 1, v >= lo), then
// bounds what remains (division/modulo atoms by their intervals, length reads and run-time
// sizes are >= 0). False when unknown.

static bool lf_max(rt_checker *c, rt_lf f, int64_t *out) {
    const rt_stmt *st = c->st;
    for (int iter = 0; iter < 64; iter++) {
        int32_t best = -1;
        for (int32_t i = 0; i < f.n; i++) {
            if (f.coef[i] == 0 || f.atom[i]->kind != RT_EXPR_INDEX)
                continue;
            int32_t v = f.atom[i]->var;
            if (v < 0 || v >= st->n_vars)
                return false;
            if (best < 0 || c->pos[v] > c->pos[f.atom[best]->var])
                best = i;
        }
        if (best < 0)
            break;
        const rt_ivar *iv = &st->vars[f.atom[best]->var];
        int64_t coef = f.coef[best];
        f.coef[best] = 0;
        if (!iv->lo || !iv->hi)
            return false;
        if (coef > 0) {
            if (!lf_add(c->op, &f, iv->hi, coef) || __builtin_sub_overflow(f.c0, coef, &f.c0))
                return false;
        } else if (!lf_add(c->op, &f, iv->lo, coef)) {
            return false;
        }
    }
    for (int32_t i = 0; i < f.n; i++) {
        if (f.coef[i] == 0)
            continue;
        const rt_expr *a = f.atom[i];
        int64_t bound, t;
        if (atom_bound(c, a, f.coef[i] > 0, &bound)) {
            if (__builtin_mul_overflow(f.coef[i], bound, &t) ||
                __builtin_add_overflow(f.c0, t, &f.c0))
                return false;
            continue;
        }
        bool nonneg =
            (a->kind == RT_EXPR_READ && a->tensor >= 0 && c->op->tensors[a->tensor].is_length) ||
            a->kind == RT_EXPR_SIZE;
        if (f.coef[i] > 0 || !nonneg)
            return false;
    }
    *out = f.c0;
    return true;
}

// Bounds of x over the statement's index variables: the largest value (upper) or the smallest.
static bool expr_bound(rt_checker *c, const rt_expr *x, bool upper, int64_t *out) {
    rt_lf f = {0};
    int64_t m;
    if (!lf_add(c->op, &f, x, upper ? 1 : -1) || !lf_max(c, f, &m))
        return false;
    if (!upper && m == INT64_MIN)
        return false;
    *out = upper ? m : -m;
    return true;
}

// Interval arithmetic for the atoms that are not linear: floor division and modulo by a
// positive constant (op-spec's affine indices allow both). With x in [lo, hi] and d > 0:
// x / d lies in [floor(lo/d), floor(hi/d)], and x % d in [0, d-1], or in [lo%d, hi%d] when
// [lo, hi] lies within one period. Operands may nest. Each proof may bound at most
// RT_LF_BUDGET such atoms, nested at most RT_LF_MAX_NEST deep, with operands of at most
// RT_LF_MAX_NODES nodes, so that its cost stays bounded whatever the input; past a limit a
// modulo keeps its [0, d-1] bound and a division is unknown.
#define RT_LF_MAX_NEST  12
#define RT_LF_BUDGET    256
#define RT_LF_MAX_NODES 256

// Counts the nodes of e into *left, stopping below zero: false when e has more than *left.
static bool expr_fits(const rt_expr *e, int32_t *left) {
    if (!e)
        return true;
    if (--*left < 0)
        return false;
    for (int32_t i = 0; i < e->n_args; i++)
        if (!expr_fits(e->args[i], left))
            return false;
    return true;
}

static bool atom_bound(rt_checker *c, const rt_expr *a, bool upper, int64_t *out) {
    int64_t d, lo, hi;
    if (a->kind != RT_EXPR_BINARY || (a->bop != RT_BOP_DIV && a->bop != RT_BOP_MOD) || !a->is_int ||
        !rt_expr_const_int(c->op, a->args[1], &d) || d <= 0)
        return false;
    int32_t left = RT_LF_MAX_NODES;
    if (c->nest >= RT_LF_MAX_NEST || c->budget <= 0 || !expr_fits(a->args[0], &left)) {
        *out = upper ? d - 1 : 0;
        return a->bop == RT_BOP_MOD;
    }
    c->budget--;
    c->nest++;
    bool ok;
    if (a->bop == RT_BOP_DIV) {
        ok = expr_bound(c, a->args[0], upper, out);
        if (ok)
            *out = rt_floor_div(*out, d);
    } else {
        *out = upper ? d - 1 : 0;
        ok = true;
        if (expr_bound(c, a->args[0], false, &lo) && expr_bound(c, a->args[0], true, &hi) &&
            lo <= hi && rt_floor_div(lo, d) == rt_floor_div(hi, d))
            *out = upper ? rt_floor_mod(hi, d) : rt_floor_mod(lo, d);
    }
    c->nest--;
    return ok;
}

// Proves a <= b + slack for every value of the statement's index variables.
static bool prove_le(rt_checker *c, const rt_expr *a, const rt_expr *b, int64_t slack) {
    rt_lf f = {0};
    int64_t m;
    c->budget = RT_LF_BUDGET;
    return lf_add(c->op, &f, a, 1) && lf_add(c->op, &f, b, -1) && lf_max(c, f, &m) && m <= slack;
}

static bool prove_nonneg(rt_checker *c, const rt_expr *a) {
    rt_lf f = {0};
    int64_t m;
    c->budget = RT_LF_BUDGET;
    return lf_add(c->op, &f, a, -1) && lf_max(c, f, &m) && m <= 0;
}

// ---------------------------------------------------------------------------------------------
// Statement structure
// ---------------------------------------------------------------------------------------------

static rt_status collect_reads(rt_checker *c, rt_expr *e) {
    if (!e)
        return RT_OK;
    if (e->kind == RT_EXPR_READ) {
        if (c->n_acc == c->cap_acc) {
            int32_t cap = c->cap_acc ? c->cap_acc * 2 : 16;
            rt_expr **n = rt_arena_calloc(c->a, (size_t)cap, sizeof *n);
            if (!n)
                return NOMEM(c);
            if (c->n_acc)
                memcpy(n, c->acc, (size_t)c->n_acc * sizeof *n);
            c->acc = n;
            c->cap_acc = cap;
        }
        c->acc[c->n_acc++] = e;
    }
    for (int32_t i = 0; i < e->n_args; i++)
        RT_TRY(collect_reads(c, e->args[i]));
    return RT_OK;
}

// Marks integer tensors read inside index expressions as gathers.
static void mark_gathers(rt_op *op, const rt_expr *e, bool in_index) {
    if (!e)
        return;
    if (e->kind == RT_EXPR_READ && in_index && e->tensor >= 0 &&
        rt_dtype_is_int(op->tensors[e->tensor].dtype))
        op->tensors[e->tensor].is_index = true;
    bool idx = in_index || e->kind == RT_EXPR_READ || e->kind == RT_EXPR_CHILD;
    for (int32_t i = 0; i < e->n_args; i++)
        mark_gathers(op, e->args[i], idx);
}

// op-spec: "integer tensors may only be indexed as lengths or read in integer contexts unless
// cast". There is no cast, so a read of an integer tensor must sit in an integer context: an
// index (of a read or a tree child), an operand of a comparison, of '&&', '||', '!' or the
// condition of '?:', or anywhere in the right side of a statement whose output is an integer
// tensor. Integer arithmetic (+ - * / %, unary -, abs, max, min, the branches of '?:') keeps
// the context it sits in; every other function is a float context. Where-ranges and extents
// are integer contexts and are not walked here.
static rt_status check_int_reads(rt_checker *c, const rt_expr *e, bool int_ctx) {
    if (!e)
        return RT_OK;
    const rt_op *op = c->op;
    bool sub = int_ctx; // context of the arguments
    switch (e->kind) {
    case RT_EXPR_READ:
        if (!int_ctx && e->tensor >= 0 && rt_dtype_is_int(op->tensors[e->tensor].dtype))
            return rt_fail(c->err, RT_ERR_SPEC, e->loc,
                           "%s tensor '%s' read in a float context; integer tensors may only be "
                           "used as indices, lengths or in comparisons",
                           rt_dtype_name(op->tensors[e->tensor].dtype),
                           op->tensors[e->tensor].name);
        sub = true;
        break;
    case RT_EXPR_CHILD:
        sub = true;
        break;
    case RT_EXPR_UNARY:
        sub = e->uop == RT_UOP_NOT || int_ctx;
        break;
    case RT_EXPR_BINARY:
        sub = e->bop >= RT_BOP_LT || int_ctx;
        break;
    case RT_EXPR_CALL:
        sub = int_ctx && (e->fn == RT_FN_ABS || e->fn == RT_FN_MAX || e->fn == RT_FN_MIN);
        break;
    case RT_EXPR_COND:
        RT_TRY(check_int_reads(c, e->args[0], true));
        RT_TRY(check_int_reads(c, e->args[1], int_ctx));
        return check_int_reads(c, e->args[2], int_ctx);
    default:
        break;
    }
    for (int32_t i = 0; i < e->n_args; i++)
        RT_TRY(check_int_reads(c, e->args[i], sub));
    return RT_OK;
}

static rt_status check_writer(rt_checker *c, int32_t si) {
    rt_op *op = c->op;
    rt_stmt *st = c->st;
    rt_tensor *out = &op->tensors[st->out];
    if (out->writer >= 0) {
        const rt_stmt *first = &op->stmts[out->writer];
        if (!st->n_preds || !first->n_preds)
            return rt_fail(c->err, RT_ERR_SPEC, st->loc,
                           "'%s' is already written by the statement at line %d", out->name,
                           first->loc.line);
    } else {
        out->writer = si;
    }
    if (st->op == RT_ASSIGN_ADD && out->role != RT_ROLE_OUTPUT)
        return rt_fail(c->err, RT_ERR_SPEC, st->loc,
                       "'+=' accumulates into the caller's values; '%s' is not an output",
                       out->name);
    return RT_OK;
}

static rt_status check_reads(rt_checker *c) {
    rt_op *op = c->op;
    rt_stmt *st = c->st;
    for (int32_t k = 1; k < c->n_acc; k++) {
        rt_expr *e = c->acc[k];
        rt_tensor *t = &op->tensors[e->tensor];
        if (e->tensor == st->out) {
            if (e->n_args < 1 || e->args[0]->kind != RT_EXPR_CHILD)
                return rt_fail(c->err, RT_ERR_SPEC, e->loc,
                               "'%s' reads its own output; only reads at a tree child "
                               "(T.child(n, c)) are allowed",
                               t->name);
            st->recursive = true;
        } else if (t->role != RT_ROLE_INPUT && t->writer < 0) {
            return rt_fail(c->err, RT_ERR_SPEC, e->loc, "'%s' is read before it is written",
                           t->name);
        }
        if (e->n_args != t->n_dims)
            return rt_fail(c->err, RT_ERR_SPEC, e->loc,
                           "wrong number of indices for '%s' (expected %d, got %d)", t->name,
                           t->n_dims, e->n_args);
        for (int32_t i = 0; i < e->n_args; i++)
            if (!e->args[i]->is_int)
                return rt_fail(c->err, RT_ERR_SPEC, e->args[i]->loc,
                               "index %d of '%s' must be an integer expression", i + 1, t->name);
    }
    return RT_OK;
}

// Deepest call argument (or the whole right side) holding every use of v.
static void find_sum_slot(rt_expr **slot, int32_t v, int32_t total, rt_expr ***best) {
    rt_expr *e = *slot;
    for (int32_t i = 0; i < e->n_args; i++) {
        if (rt_expr_count_var(e->args[i], v) != total)
            continue;
        if (e->kind == RT_EXPR_CALL)
            *best = &e->args[i];
        find_sum_slot(&e->args[i], v, total, best);
    }
}

static rt_status wrap_sums(rt_checker *c) {
    rt_stmt *st = c->st;
    if (st->op != RT_ASSIGN_SET)
        return RT_OK;
    for (int32_t v = 0; v < st->n_vars; v++) {
        if (!st->vars[v].is_reduce)
            continue;
        int32_t total = rt_expr_count_var(st->rhs, v);
        rt_expr **best = &st->rhs;
        find_sum_slot(&st->rhs, v, total, &best);
        rt_expr *s = *best;
        if (s->kind != RT_EXPR_SUM) {
            s = rt_expr_new(c->a, RT_EXPR_SUM, (*best)->loc);
            if (!s || !(s->args = rt_arena_calloc(c->a, 1, sizeof *s->args)))
                return NOMEM(c);
            s->n_args = 1;
            s->args[0] = *best;
            s->is_int = (*best)->is_int;
            *best = s;
        }
        int32_t *vars = rt_arena_calloc(c->a, (size_t)s->n_sum_vars + 1, sizeof *vars);
        if (!vars)
            return NOMEM(c);
        if (s->n_sum_vars)
            memcpy(vars, s->sum_vars, (size_t)s->n_sum_vars * sizeof *vars);
        vars[s->n_sum_vars++] = v;
        s->sum_vars = vars;
    }
    return RT_OK;
}

static rt_status build_loops(rt_checker *c) {
    rt_stmt *st = c->st;
    st->loops = rt_arena_calloc(c->a, (size_t)st->n_vars + 1, sizeof *st->loops);
    c->pos = rt_arena_calloc(c->a, (size_t)st->n_vars + 1, sizeof *c->pos);
    if (!st->loops || !c->pos)
        return NOMEM(c);
    int32_t n = 0;
    for (int32_t v = 0; v < st->n_vars; v++) {
        if (!st->vars[v].is_reduce || st->op != RT_ASSIGN_SET) {
            c->pos[v] = n;
            st->loops[n++] = v;
        }
    }
    st->n_loops = n;
    for (int32_t v = 0, k = n; v < st->n_vars; v++)
        if (st->vars[v].is_reduce && st->op == RT_ASSIGN_SET)
            c->pos[v] = k++;
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Range inference
// ---------------------------------------------------------------------------------------------

typedef struct rt_cand {
    rt_expr *hi;           // extent with the access's arguments substituted
    const rt_expr *access; // the read (or the left side)
    int32_t order;         // position in the access list
    bool pad;              // from a tensor with 'pad'
    bool dep;              // depends on index variables or length reads (ragged)
    bool is_const;
    int64_t value;
} rt_cand;

static const char *range_text(rt_checker *c, const rt_cand *k) {
    if (k->is_const)
        return rt_arena_printf(c->a, "%lld", (long long)k->value);
    return print_expr(c, NULL, k->hi);
}

static rt_status conflict(rt_checker *c, int32_t v, const rt_cand *x, const rt_cand *y) {
    if (x->order > y->order) {
        const rt_cand *t = x;
        x = y;
        y = t;
    }
    return rt_fail(c->err, RT_ERR_SPEC, y->access->loc,
                   "index '%s' ranges over %s in %s but %s in %s", c->st->vars[v].name,
                   range_text(c, x), print_expr(c, NULL, x->access), range_text(c, y),
                   print_expr(c, NULL, y->access));
}

static rt_status collect_cands(rt_checker *c, int32_t v, rt_cand **out, int32_t *n_out) {
    rt_op *op = c->op;
    int32_t n = 0;
    for (int32_t k = 0; k < c->n_acc; k++)
        for (int32_t d = 0; d < c->acc[k]->n_args; d++)
            n++;
    rt_cand *cs = rt_arena_calloc(c->a, (size_t)n + 1, sizeof *cs);
    if (!cs)
        return NOMEM(c);
    n = 0;
    for (int32_t k = 0; k < c->n_acc; k++) {
        const rt_expr *e = c->acc[k];
        const rt_tensor *t = &op->tensors[e->tensor];
        if (!c->shape_known[e->tensor])
            continue;
        for (int32_t d = 0; d < e->n_args && d < t->n_dims; d++) {
            const rt_expr *arg = e->args[d];
            if (arg->kind != RT_EXPR_INDEX || arg->var != v)
                continue;
            rt_cand *k2 = &cs[n++];
            k2->hi = rt_expr_subst_dimrefs(c->a, t->dims[d].extent, e->args, e->n_args);
            if (!k2->hi)
                return NOMEM(c);
            k2->access = e;
            k2->order = k;
            k2->pad = t->has_pad;
            k2->dep =
                rt_expr_has_kind(k2->hi, RT_EXPR_INDEX) || rt_expr_has_kind(k2->hi, RT_EXPR_READ);
            k2->is_const = rt_expr_const_int(op, k2->hi, &k2->value);
        }
    }
    *out = cs;
    *n_out = n;
    return RT_OK;
}

static bool same_range(const rt_cand *x, const rt_cand *y) {
    if (x->is_const && y->is_const)
        return x->value == y->value;
    return rt_expr_equal(x->hi, y->hi);
}

// Picks the range of v from its candidates (dense ones must agree, ragged ones must agree,
// pad candidates only count when nothing else does). Proofs come later (prove_ranges).
static rt_status infer_range(rt_checker *c, int32_t v) {
    rt_ivar *iv = &c->st->vars[v];
    if (iv->from_where)
        return RT_OK;
    rt_cand *cs;
    int32_t n;
    RT_TRY(collect_cands(c, v, &cs, &n));
    bool any_plain = false;
    for (int32_t i = 0; i < n; i++)
        any_plain = any_plain || !cs[i].pad;
    const rt_cand *dense = NULL, *ragged = NULL;
    for (int32_t i = 0; i < n; i++) {
        const rt_cand *k = &cs[i];
        if (k->pad && any_plain)
            continue;
        const rt_cand **first = k->dep ? &ragged : &dense;
        if (!*first) {
            *first = k;
        } else if (!same_range(*first, k)) {
            if (!k->pad)
                return conflict(c, v, *first, k);
            if (!k->dep && k->is_const && (*first)->is_const && k->value < (*first)->value)
                *first = k; // pad only: the intersection
        }
    }
    const rt_cand *pick = ragged ? ragged : dense;
    if (!pick)
        return rt_fail(c->err, RT_ERR_SPEC, iv->loc,
                       "cannot infer the range of index '%s'; add a where-range", iv->name);
    iv->lo = rt_expr_new(c->a, RT_EXPR_NUM, iv->loc);
    if (!iv->lo)
        return NOMEM(c);
    iv->lo->is_int = true;
    iv->hi = pick->hi;
    return RT_OK;
}

static rt_status check_deps(rt_checker *c) {
    rt_stmt *st = c->st;
    for (int32_t v = 0; v < st->n_vars; v++) {
        rt_ivar *iv = &st->vars[v];
        iv->ragged =
            rt_expr_has_kind(iv->lo, RT_EXPR_INDEX) || rt_expr_has_kind(iv->hi, RT_EXPR_INDEX) ||
            rt_expr_has_kind(iv->lo, RT_EXPR_READ) || rt_expr_has_kind(iv->hi, RT_EXPR_READ);
        // A where-range of sizes and constants that ends before it starts is a mistake (one that
        // depends on an outer var, as 0:i + 1, may be empty on some rows: that is its shape).
        if (iv->from_where && !iv->ragged && prove_le(c, iv->hi, iv->lo, -1)) // hi < lo
            return rt_fail(c->err, RT_ERR_SPEC, iv->loc,
                           "where-range of '%s' ends before it starts (%s:%s)", iv->name,
                           print_expr(c, NULL, iv->lo), print_expr(c, NULL, iv->hi));
        for (int32_t u = 0; u < st->n_vars; u++) {
            if ((rt_expr_uses_var(iv->lo, u) || rt_expr_uses_var(iv->hi, u)) &&
                c->pos[u] >= c->pos[v])
                return rt_fail(c->err, RT_ERR_SPEC, iv->loc,
                               "range of '%s' depends on '%s', which is not an outer loop",
                               iv->name, st->vars[u].name);
        }
    }
    return RT_OK;
}

// Proves what infer_range assumed: a ragged pick fits in every dense extent, and a where-range
// fits in every extent it indexes directly.
static rt_status prove_ranges(rt_checker *c) {
    rt_stmt *st = c->st;
    for (int32_t v = 0; v < st->n_vars; v++) {
        rt_ivar *iv = &st->vars[v];
        rt_cand *cs;
        int32_t n;
        RT_TRY(collect_cands(c, v, &cs, &n));
        for (int32_t i = 0; i < n; i++) {
            rt_cand *k = &cs[i];
            if (k->pad)
                continue;
            if (iv->from_where) {
                if (!prove_nonneg(c, iv->lo) || !prove_le(c, iv->hi, k->hi, 0))
                    return rt_fail(c->err, RT_ERR_SPEC, k->access->loc,
                                   "where-range of '%s' exceeds the extent in %s (expected "
                                   "within 0:%s, got %s:%s)",
                                   iv->name, print_expr(c, NULL, k->access), range_text(c, k),
                                   print_expr(c, NULL, iv->lo), print_expr(c, NULL, iv->hi));
            } else if (iv->hi != k->hi && !rt_expr_equal(iv->hi, k->hi) &&
                       !prove_le(c, iv->hi, k->hi, 0)) {
                const rt_cand *pick = NULL;
                for (int32_t j = 0; j < n; j++)
                    if (cs[j].hi == iv->hi || rt_expr_equal(cs[j].hi, iv->hi))
                        pick = pick ? pick : &cs[j];
                if (pick)
                    return conflict(c, v, pick, k);
                return rt_fail(c->err, RT_ERR_SPEC, k->access->loc,
                               "index '%s' may exceed the extent in %s", iv->name,
                               print_expr(c, NULL, k->access));
            }
        }
    }
    return RT_OK;
}

// Every affine index expression that is not a plain variable must stay within the extent,
// unless the tensor has 'pad'. Gathers and tree children are checked at run time.
static rt_status check_bounds(rt_checker *c) {
    rt_op *op = c->op;
    for (int32_t k = 1; k < c->n_acc; k++) {
        const rt_expr *e = c->acc[k];
        const rt_tensor *t = &op->tensors[e->tensor];
        if (t->has_pad || !c->shape_known[e->tensor])
            continue;
        for (int32_t d = 0; d < e->n_args; d++) {
            const rt_expr *arg = e->args[d];
            if (arg->kind == RT_EXPR_INDEX || rt_expr_has_kind(arg, RT_EXPR_READ) ||
                rt_expr_has_kind(arg, RT_EXPR_CHILD))
                continue;
            rt_expr *ext = rt_expr_subst_dimrefs(c->a, t->dims[d].extent, e->args, e->n_args);
            if (!ext)
                return NOMEM(c);
            if (prove_nonneg(c, arg) && prove_le(c, arg, ext, -1))
                continue;
            rt_buf b;
            rt_buf_init(&b, c->a);
            rt_buf_printf(&b, "%s(", t->name);
            for (int32_t i = 0; i <= d; i++) {
                if (i)
                    rt_buf_puts(&b, ", ");
                rt_expr_print(op, c->st, NULL, e->args[i], &b);
            }
            rt_buf_puts(&b, d + 1 < e->n_args ? ", ...)" : ")");
            return rt_fail(c->err, RT_ERR_SPEC, e->loc,
                           "%s can read outside %s's extent; declare '%s pad 0' or add a "
                           "where-range",
                           b.oom ? "?" : b.data, t->name, t->name);
        }
    }
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Output shapes
// ---------------------------------------------------------------------------------------------

// Copy of a range bound with the outer left-side variables turned into DIMREFs.
static rt_status to_dimrefs(rt_checker *c, const rt_expr *e, int32_t p, const rt_tensor *t,
                            rt_expr **out) {
    const rt_stmt *st = c->st;
    rt_expr *r = rt_expr_copy(c->a, e);
    if (!r)
        return NOMEM(c);
    if (e->kind == RT_EXPR_INDEX) {
        for (int32_t q = 0; q < p; q++) {
            if (st->lhs_vars[q] == e->var) {
                r->kind = RT_EXPR_DIMREF;
                r->dim = q;
                *out = r;
                return RT_OK;
            }
        }
        return rt_fail(c->err, RT_ERR_SPEC, st->loc,
                       "cannot infer the shape of '%s': the extent of '%s' depends on '%s', "
                       "which is not an outer index of it",
                       t->name, st->vars[st->lhs_vars[p]].name, st->vars[e->var].name);
    }
    for (int32_t i = 0; i < e->n_args; i++)
        RT_TRY(to_dimrefs(c, e->args[i], p, t, &r->args[i]));
    *out = r;
    return RT_OK;
}

static bool reads_double(const rt_op *op, const rt_expr *e) {
    if (!e)
        return false;
    if (e->kind == RT_EXPR_READ && op->tensors[e->tensor].dtype == RT_DTYPE_F64)
        return true;
    for (int32_t i = 0; i < e->n_args; i++)
        if (reads_double(op, e->args[i]))
            return true;
    return false;
}

static rt_status infer_shape(rt_checker *c) {
    rt_stmt *st = c->st;
    rt_tensor *t = &c->op->tensors[st->out];
    if (c->shape_known[st->out])
        return RT_OK;
    t->n_dims = st->n_lhs;
    t->ragged = false;
    for (int32_t p = 0; p < st->n_lhs; p++) {
        const rt_ivar *iv = &st->vars[st->lhs_vars[p]];
        rt_dim *d = &t->dims[p];
        d->name = iv->name;
        d->loc = iv->loc;
        RT_TRY(to_dimrefs(c, iv->hi, p, t, &d->extent));
        d->ragged = rt_expr_has_kind(d->extent, RT_EXPR_DIMREF) ||
                    rt_expr_has_kind(d->extent, RT_EXPR_READ);
        t->ragged = t->ragged || d->ragged;
    }
    t->dtype = reads_double(c->op, st->rhs) ? RT_DTYPE_F64 : RT_DTYPE_F32;
    c->shape_known[st->out] = true;
    return RT_OK;
}

// op-spec: "mixed precision accumulates in the output's type (a half output of +=! over half
// inputs accumulates in float ...)". A reduction into half or bfloat16 accumulates in float;
// whether the device can is for the back end to check against the device file.
static void set_acc_dtype(rt_checker *c) {
    rt_stmt *st = c->st;
    rt_dtype out = c->op->tensors[st->out].dtype;
    st->reduces = st->op != RT_ASSIGN_SET;
    for (int32_t v = 0; v < st->n_vars; v++)
        st->reduces = st->reduces || st->vars[v].is_reduce;
    st->acc_dtype =
        st->reduces && (out == RT_DTYPE_F16 || out == RT_DTYPE_BF16) ? RT_DTYPE_F32 : out;
}

// ---------------------------------------------------------------------------------------------
// Axis fusion (Roller §3.2 canonical form)
// ---------------------------------------------------------------------------------------------

// In access e, u and v are both absent, or plain arguments at adjacent positions (u first).
static bool adjacent_in(const rt_expr *e, int32_t u, int32_t v) {
    int32_t pu = -1, pv = -1, nu = 0, nv = 0;
    for (int32_t d = 0; d < e->n_args; d++) {
        nu += rt_expr_count_var(e->args[d], u);
        nv += rt_expr_count_var(e->args[d], v);
        if (e->args[d]->kind == RT_EXPR_INDEX && e->args[d]->var == u)
            pu = d;
        if (e->args[d]->kind == RT_EXPR_INDEX && e->args[d]->var == v)
            pv = d;
    }
    if (nu == 0 && nv == 0)
        return true;
    return nu == 1 && nv == 1 && pu >= 0 && pv == pu + 1;
}

// True when v's range only depends on vars in members[0..n).
static bool deps_within(const rt_stmt *st, int32_t v, const int32_t *members, int32_t n) {
    const rt_ivar *iv = &st->vars[v];
    for (int32_t u = 0; u < st->n_vars; u++) {
        if (!rt_expr_uses_var(iv->lo, u) && !rt_expr_uses_var(iv->hi, u))
            continue;
        bool in = false;
        for (int32_t i = 0; i < n; i++)
            in = in || members[i] == u;
        if (!in)
            return false;
    }
    return true;
}

static rt_status fuse_axes(rt_checker *c) {
    rt_stmt *st = c->st;
    st->axes = rt_arena_calloc(c->a, (size_t)st->n_loops + 1, sizeof *st->axes);
    if (!st->axes)
        return NOMEM(c);
    st->n_axes = 0;
    for (int32_t k = 0; k < st->n_loops; k++) {
        int32_t v = st->loops[k];
        rt_axis *ax = st->n_axes ? &st->axes[st->n_axes - 1] : NULL;
        bool fuse = ax && ax->n_members < RT_MAX_DIMS && ax->is_reduce == st->vars[v].is_reduce;
        if (fuse) {
            int32_t u = ax->members[ax->n_members - 1];
            for (int32_t i = 0; i < c->n_acc && fuse; i++)
                fuse = adjacent_in(c->acc[i], u, v);
            fuse = fuse && deps_within(st, ax->members[0], NULL, 0) &&
                   deps_within(st, v, ax->members, ax->n_members);
        }
        if (!fuse) {
            ax = &st->axes[st->n_axes++];
            ax->is_reduce = st->vars[v].is_reduce;
        }
        ax->members[ax->n_members++] = v;
    }
    for (int32_t i = 0; i < st->n_axes; i++) {
        rt_axis *ax = &st->axes[i];
        rt_buf b;
        rt_buf_init(&b, c->a);
        ax->extent = 1;
        for (int32_t m = 0; m < ax->n_members; m++) {
            const rt_ivar *iv = &st->vars[ax->members[m]];
            rt_buf_printf(&b, "%s%s", m ? "." : "", iv->name);
            ax->ragged = ax->ragged || iv->ragged;
            int64_t lo, hi;
            if (ax->extent >= 0 && rt_expr_const_int(c->op, iv->lo, &lo) &&
                rt_expr_const_int(c->op, iv->hi, &hi) && !__builtin_sub_overflow(hi, lo, &hi) &&
                hi >= 0 && !__builtin_mul_overflow(ax->extent, hi, &ax->extent))
                continue;
            ax->extent = -1;
        }
        if (ax->ragged)
            ax->extent = -1;
        ax->name = b.oom ? "?" : b.data;
    }
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Directives
// ---------------------------------------------------------------------------------------------

static bool var_exists(const rt_op *op, const char *name) {
    for (int32_t s = 0; s < op->n_stmts; s++)
        for (int32_t v = 0; v < op->stmts[s].n_vars; v++)
            if (!strcmp(op->stmts[s].vars[v].name, name))
                return true;
    return false;
}

static rt_status check_directive(rt_checker *c, const rt_directive *d) {
    // Argument kinds: v = index variable, t = tensor, n = positive integer, d = dimension,
    // o = order policy, l = level name; tile takes key=value pairs after its level.
    static const struct {
        const char *name, *args;
    } tab[] = {
        {"pad_loop", "vn"}, {"pad_storage", "tdn"}, {"bulk_pad", "vvn"},
        {"split", "vn"},    {"order", "vo"},        {"tile", "l"},
    };
    const char *spec = NULL;
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strcmp(tab[i].name, d->name))
            spec = tab[i].args;
    if (!spec)
        return rt_fail(c->err, RT_ERR_SPEC, d->loc,
                       "unknown directive '@%s' (expected pad_loop, pad_storage, bulk_pad, "
                       "split, order or tile)",
                       d->name);
    bool tile = !strcmp(d->name, "tile");
    int32_t want = (int32_t)strlen(spec);
    if (tile ? d->n_args < 1 : d->n_args != want)
        return rt_fail(c->err, RT_ERR_SPEC, d->loc, "@%s takes %s%d argument%s (got %d)", d->name,
                       tile ? "at least " : "", want, want == 1 ? "" : "s", d->n_args);
    int32_t tensor = -1;
    for (int32_t i = 0; i < d->n_args; i++) {
        const rt_darg *a = &d->args[i];
        char kind = i < want ? spec[i] : 'k';
        bool ident = a->ident && !a->has_value, num = !a->ident;
        switch (kind) {
        case 'v':
            if (!ident)
                return rt_fail(c->err, RT_ERR_SPEC, a->loc,
                               "@%s: argument %d must be an index variable", d->name, i + 1);
            if (!var_exists(c->op, a->ident))
                return rt_fail(c->err, RT_ERR_SPEC, a->loc,
                               "@%s: no index variable '%s' in any statement", d->name, a->ident);
            break;
        case 't':
            for (int32_t t = 0; ident && t < c->op->n_tensors; t++)
                if (!strcmp(c->op->tensors[t].name, a->ident))
                    tensor = t;
            if (tensor < 0)
                return rt_fail(c->err, RT_ERR_SPEC, a->loc, "@%s: argument %d must be a tensor",
                               d->name, i + 1);
            break;
        case 'd':
            if (!num || a->value < 0 || a->value >= c->op->tensors[tensor].n_dims)
                return rt_fail(c->err, RT_ERR_SPEC, a->loc,
                               "@%s: argument %d must be a dimension of '%s' (expected 0 to %d)",
                               d->name, i + 1, c->op->tensors[tensor].name,
                               c->op->tensors[tensor].n_dims - 1);
            break;
        case 'n':
            if (!num || a->value <= 0)
                return rt_fail(c->err, RT_ERR_SPEC, a->loc,
                               "@%s: argument %d must be a positive integer", d->name, i + 1);
            break;
        case 'o':
            if (!ident || (strcmp(a->ident, "longest_first") &&
                           strcmp(a->ident, "shortest_first") && strcmp(a->ident, "given")))
                return rt_fail(c->err, RT_ERR_SPEC, a->loc,
                               "@%s: argument %d must be longest_first, shortest_first or given",
                               d->name, i + 1);
            break;
        case 'l':
            if (!ident)
                return rt_fail(c->err, RT_ERR_SPEC, a->loc,
                               "@%s: argument %d must be a memory level name", d->name, i + 1);
            break;
        default: // tile key=value
            if (!a->ident || !a->has_value || a->value <= 0)
                return rt_fail(c->err, RT_ERR_SPEC, a->loc,
                               "@%s: argument %d must be VAR=SIZE with a positive size", d->name,
                               i + 1);
            if (!var_exists(c->op, a->ident))
                return rt_fail(c->err, RT_ERR_SPEC, a->loc,
                               "@%s: no index variable '%s' in any statement", d->name, a->ident);
            break;
        }
    }
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------------

static rt_status check_stmt(rt_checker *c, int32_t si) {
    rt_op *op = c->op;
    rt_stmt *st = &op->stmts[si];
    c->st = st;
    c->n_acc = 0;
    // The left side as an access, so that a known shape constrains ranges like a read.
    rt_expr *lhs = rt_expr_new(c->a, RT_EXPR_READ, st->loc);
    if (!lhs || !(lhs->args = rt_arena_calloc(c->a, (size_t)st->n_lhs, sizeof *lhs->args)))
        return NOMEM(c);
    lhs->tensor = st->out;
    lhs->n_args = st->n_lhs;
    for (int32_t i = 0; i < st->n_lhs; i++) {
        if (!(lhs->args[i] = rt_expr_new(c->a, RT_EXPR_INDEX, st->vars[st->lhs_vars[i]].loc)))
            return NOMEM(c);
        lhs->args[i]->var = st->lhs_vars[i];
        lhs->args[i]->is_int = true;
    }
    RT_TRY(collect_reads(c, lhs));
    RT_TRY(collect_reads(c, st->rhs));
    for (int32_t v = 0; v < st->n_vars; v++) {
        RT_TRY(collect_reads(c, st->vars[v].lo));
        RT_TRY(collect_reads(c, st->vars[v].hi));
    }
    RT_TRY(check_writer(c, si));
    RT_TRY(check_reads(c));
    RT_TRY(check_int_reads(c, st->rhs,
                           c->shape_known[st->out] && rt_dtype_is_int(op->tensors[st->out].dtype)));
    mark_gathers(op, st->rhs, false);
    RT_TRY(wrap_sums(c));
    RT_TRY(build_loops(c));
    for (int32_t v = 0; v < st->n_vars; v++)
        RT_TRY(infer_range(c, v));
    RT_TRY(check_deps(c));
    RT_TRY(prove_ranges(c));
    RT_TRY(check_bounds(c));
    RT_TRY(infer_shape(c));
    set_acc_dtype(c);
    return fuse_axes(c);
}

rt_status rt_spec_check(rt_arena *a, rt_op *op, rt_err *err) {
    rt_checker c = {.a = a, .op = op, .err = err};
    c.shape_known = rt_arena_calloc(a, (size_t)op->n_tensors + 1, sizeof *c.shape_known);
    if (!c.shape_known)
        return NOMEM(&c);
    for (int32_t t = 0; t < op->n_tensors; t++)
        c.shape_known[t] = op->tensors[t].role == RT_ROLE_INPUT || op->tensors[t].shape_given;
    for (int32_t s = 0; s < op->n_stmts; s++)
        RT_TRY(check_stmt(&c, s));
    c.st = NULL;
    for (int32_t i = 0; i < op->n_outputs; i++) {
        const rt_tensor *t = &op->tensors[op->outputs[i]];
        if (t->writer < 0)
            return rt_fail(err, RT_ERR_SPEC, t->loc, "output '%s' is never written", t->name);
    }
    for (int32_t i = 0; i < op->n_directives; i++)
        RT_TRY(check_directive(&c, &op->directives[i]));
    return RT_OK;
}
