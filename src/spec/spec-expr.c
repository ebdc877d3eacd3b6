// spec-expr.c: helpers over the tensor-expression IR of spec.h — operator and function tables,
// printing in op-spec syntax, structural equality, copying and substitution, constant folding
// of size expressions and the integer-linear (affine) form the checker and the performance
// model use. Shared by the front end (parse, check, print) and by later layers.
#include "spec-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

// ORDER RT_BOP
static const char *const rt_bop_names[] = {
    "+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "&&", "||",
};
_Static_assert(sizeof rt_bop_names / sizeof rt_bop_names[0] == RT_BOP_COUNT, "ORDER RT_BOP");

// Binding strength for printing (higher binds tighter); matches the parser's table.
static const int rt_bop_prec[] = {5, 5, 6, 6, 6, 4, 4, 4, 4, 3, 3, 2, 1};
_Static_assert(sizeof rt_bop_prec / sizeof rt_bop_prec[0] == RT_BOP_COUNT, "ORDER RT_BOP");

// ORDER RT_FN
static const struct {
    const char *name;
    int32_t arity;
} rt_fn_table[] = {
    {"exp", 1},     {"log", 1}, {"sqrt", 1}, {"rsqrt", 1}, {"tanh", 1},
    {"sigmoid", 1}, {"erf", 1}, {"abs", 1},  {"max", 2},   {"min", 2},
};
_Static_assert(sizeof rt_fn_table / sizeof rt_fn_table[0] == RT_FN_COUNT, "ORDER RT_FN");

// ORDER RT_ASSIGN
static const char *const rt_assign_names[] = {"=", "+=!", "+=", "*=!", "max=!", "min=!"};
_Static_assert(sizeof rt_assign_names / sizeof rt_assign_names[0] == RT_ASSIGN_COUNT,
               "ORDER RT_ASSIGN");

const char *rt_bop_name(rt_bop op) {
    return (unsigned)op < RT_BOP_COUNT ? rt_bop_names[op] : "?";
}

const char *rt_fn_name(rt_fn fn) {
    return (unsigned)fn < RT_FN_COUNT ? rt_fn_table[fn].name : "?";
}

int32_t rt_fn_arity(rt_fn fn) {
    return (unsigned)fn < RT_FN_COUNT ? rt_fn_table[fn].arity : 0;
}

const char *rt_assign_name(rt_assign op) {
    return (unsigned)op < RT_ASSIGN_COUNT ? rt_assign_names[op] : "?";
}

bool rt_fn_from_name(const char *name, size_t len, rt_fn *out) {
    for (int i = 0; i < RT_FN_COUNT; i++) {
        if (strlen(rt_fn_table[i].name) == len && !memcmp(rt_fn_table[i].name, name, len)) {
            *out = (rt_fn)i;
            return true;
        }
    }
    return false;
}

rt_expr *rt_expr_new(rt_arena *a, rt_expr_kind kind, rt_loc loc) {
    rt_expr *e = rt_arena_alloc(a, sizeof *e);
    if (!e)
        return NULL;
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->loc = loc;
    return e;
}

static rt_expr *copy_rec(rt_arena *a, const rt_expr *e, rt_expr *const *dimargs, int32_t n_dim) {
    if (!e)
        return NULL;
    if (e->kind == RT_EXPR_DIMREF && dimargs && e->dim >= 0 && e->dim < n_dim)
        return copy_rec(a, dimargs[e->dim], NULL, 0);
    rt_expr *c = rt_arena_alloc(a, sizeof *c);
    if (!c)
        return NULL;
    *c = *e;
    if (e->n_args > 0) {
        c->args = rt_arena_calloc(a, (size_t)e->n_args, sizeof *c->args);
        if (!c->args)
            return NULL;
        for (int32_t i = 0; i < e->n_args; i++) {
            c->args[i] = copy_rec(a, e->args[i], dimargs, n_dim);
            if (!c->args[i])
                return NULL;
        }
    }
    if (e->n_sum_vars > 0) {
        c->sum_vars = rt_arena_calloc(a, (size_t)e->n_sum_vars, sizeof *c->sum_vars);
        if (!c->sum_vars)
            return NULL;
        memcpy(c->sum_vars, e->sum_vars, (size_t)e->n_sum_vars * sizeof *c->sum_vars);
    }
    return c;
}

rt_expr *rt_expr_copy(rt_arena *a, const rt_expr *e) {
    return copy_rec(a, e, NULL, 0);
}

rt_expr *rt_expr_subst_dimrefs(rt_arena *a, const rt_expr *e, rt_expr *const *args,
                               int32_t n_args) {
    return copy_rec(a, e, args, n_args);
}

bool rt_expr_uses_var(const rt_expr *e, int32_t v) {
    if (!e)
        return false;
    if (e->kind == RT_EXPR_INDEX && e->var == v)
        return true;
    for (int32_t i = 0; i < e->n_args; i++)
        if (rt_expr_uses_var(e->args[i], v))
            return true;
    return false;
}

int32_t rt_expr_count_var(const rt_expr *e, int32_t v) {
    if (!e)
        return 0;
    int32_t n = e->kind == RT_EXPR_INDEX && e->var == v;
    for (int32_t i = 0; i < e->n_args; i++)
        n += rt_expr_count_var(e->args[i], v);
    return n;
}

bool rt_expr_has_kind(const rt_expr *e, rt_expr_kind k) {
    if (!e)
        return false;
    if (e->kind == k)
        return true;
    for (int32_t i = 0; i < e->n_args; i++)
        if (rt_expr_has_kind(e->args[i], k))
            return true;
    return false;
}

bool rt_expr_equal(const rt_expr *a, const rt_expr *b) {
    if (a == b)
        return true;
    if (!a || !b || a->kind != b->kind || a->n_args != b->n_args)
        return false;
    switch (a->kind) {
    case RT_EXPR_NUM:
        if (a->num != b->num || a->is_int != b->is_int)
            return false;
        break;
    case RT_EXPR_INDEX:
        if (a->var != b->var)
            return false;
        break;
    case RT_EXPR_SIZE:
        if (a->sym != b->sym)
            return false;
        break;
    case RT_EXPR_DIMREF:
        if (a->dim != b->dim)
            return false;
        break;
    case RT_EXPR_READ:
        if (a->tensor != b->tensor)
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
    case RT_EXPR_CHILD:
        if (a->tree != b->tree || a->child != b->child)
            return false;
        break;
    case RT_EXPR_SUM:
        if (a->n_sum_vars != b->n_sum_vars ||
            (a->n_sum_vars &&
             memcmp(a->sum_vars, b->sum_vars, (size_t)a->n_sum_vars * sizeof *a->sum_vars)))
            return false;
        break;
    default:
        break;
    }
    for (int32_t i = 0; i < a->n_args; i++)
        if (!rt_expr_equal(a->args[i], b->args[i]))
            return false;
    return true;
}

// Checked int64 arithmetic: false on overflow or division by zero.
static bool checked_bop(rt_bop op, int64_t x, int64_t y, int64_t *out) {
    switch (op) {
    case RT_BOP_ADD:
        return !__builtin_add_overflow(x, y, out);
    case RT_BOP_SUB:
        return !__builtin_sub_overflow(x, y, out);
    case RT_BOP_MUL:
        return !__builtin_mul_overflow(x, y, out);
    case RT_BOP_DIV:
        if (y <= 0 || (x == INT64_MIN))
            return false;
        *out = rt_floor_div(x, y);
        return true;
    case RT_BOP_MOD:
        if (y <= 0 || (x == INT64_MIN))
            return false;
        *out = rt_floor_mod(x, y);
        return true;
    default:
        return false;
    }
}

bool rt_expr_const_int(const rt_op *op, const rt_expr *e, int64_t *out) {
    if (!e)
        return false;
    switch (e->kind) {
    case RT_EXPR_NUM:
        if (!e->is_int || !(e->num >= -9.0e15 && e->num <= 9.0e15))
            return false;
        *out = (int64_t)e->num;
        return true;
    case RT_EXPR_SIZE:
        if (!op || e->sym < 0 || e->sym >= op->n_sizes || !op->sizes[e->sym].bound)
            return false;
        *out = op->sizes[e->sym].value;
        return true;
    case RT_EXPR_UNARY: {
        int64_t x;
        if (e->uop != RT_UOP_NEG || !rt_expr_const_int(op, e->args[0], &x) || x == INT64_MIN)
            return false;
        *out = -x;
        return true;
    }
    case RT_EXPR_BINARY: {
        int64_t x, y;
        if (!rt_expr_const_int(op, e->args[0], &x) || !rt_expr_const_int(op, e->args[1], &y))
            return false;
        return checked_bop(e->bop, x, y, out);
    }
    default:
        return false;
    }
}

// Adds scale * (linear form of e) to out. False when e is not affine.
static bool affine_rec(const rt_op *op, const rt_expr *e, int64_t scale, rt_affine *out) {
    int64_t c;
    if (rt_expr_const_int(op, e, &c)) {
        int64_t t;
        return !__builtin_mul_overflow(scale, c, &t) &&
               !__builtin_add_overflow(out->c0, t, &out->c0);
    }
    switch (e->kind) {
    case RT_EXPR_INDEX: {
        for (int32_t i = 0; i < out->n_terms; i++) {
            if (out->var[i] == e->var)
                return !__builtin_add_overflow(out->coef[i], scale, &out->coef[i]);
        }
        if (out->n_terms == RT_MAX_DIMS)
            return false;
        out->var[out->n_terms] = e->var;
        out->coef[out->n_terms++] = scale;
        return true;
    }
    case RT_EXPR_UNARY:
        if (e->uop != RT_UOP_NEG || scale == INT64_MIN)
            return false;
        return affine_rec(op, e->args[0], -scale, out);
    case RT_EXPR_BINARY:
        if (e->bop == RT_BOP_ADD || e->bop == RT_BOP_SUB) {
            if (!affine_rec(op, e->args[0], scale, out))
                return false;
            if (e->bop == RT_BOP_SUB && scale == INT64_MIN)
                return false;
            return affine_rec(op, e->args[1], e->bop == RT_BOP_ADD ? scale : -scale, out);
        }
        if (e->bop == RT_BOP_MUL) {
            int64_t t;
            if (rt_expr_const_int(op, e->args[0], &c))
                return !__builtin_mul_overflow(scale, c, &t) && affine_rec(op, e->args[1], t, out);
            if (rt_expr_const_int(op, e->args[1], &c))
                return !__builtin_mul_overflow(scale, c, &t) && affine_rec(op, e->args[0], t, out);
        }
        return false;
    default:
        return false;
    }
}

bool rt_expr_product_factors(const rt_expr *e, const rt_expr **reads, int32_t *n, double *alpha) {
    if (e->kind == RT_EXPR_NUM) {
        *alpha *= e->num;
        return true;
    }
    if (e->kind == RT_EXPR_READ) {
        if (*n >= 2)
            return false;
        reads[(*n)++] = e;
        return true;
    }
    if (e->kind == RT_EXPR_BINARY && e->bop == RT_BOP_MUL)
        return rt_expr_product_factors(e->args[0], reads, n, alpha) &&
               rt_expr_product_factors(e->args[1], reads, n, alpha);
    if (e->kind == RT_EXPR_BINARY && e->bop == RT_BOP_DIV && e->args[1]->kind == RT_EXPR_NUM &&
        e->args[1]->num != 0) {
        *alpha /= e->args[1]->num;
        return rt_expr_product_factors(e->args[0], reads, n, alpha);
    }
    return false;
}

bool rt_expr_affine(const rt_op *op, const rt_expr *e, rt_affine *out) {
    memset(out, 0, sizeof *out);
    if (!e || !affine_rec(op, e, 1, out))
        return false;
    // Drop terms that cancelled out.
    int32_t n = 0;
    for (int32_t i = 0; i < out->n_terms; i++) {
        if (out->coef[i] != 0) {
            out->var[n] = out->var[i];
            out->coef[n++] = out->coef[i];
        }
    }
    out->n_terms = n;
    return true;
}

void rt_num_print(double v, bool is_int, rt_buf *out) {
    if (is_int) {
        rt_buf_printf(out, "%lld", (long long)v);
        return;
    }
    char s[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, v);
        if (strtod(s, NULL) == v)
            break;
    }
    rt_buf_puts(out, s);
    if (!strpbrk(s, ".eni")) // keep it a real literal when read back
        rt_buf_puts(out, ".0");
}

// Atoms print without spaces around '*', '/', '%' ("2*y + r - 1").
static bool is_atom(const rt_expr *e) {
    return e->kind == RT_EXPR_NUM || e->kind == RT_EXPR_INDEX || e->kind == RT_EXPR_SIZE ||
           e->kind == RT_EXPR_DIMREF;
}

static int expr_prec(const rt_expr *e) {
    switch (e->kind) {
    case RT_EXPR_COND:
        return 0;
    case RT_EXPR_BINARY:
        return rt_bop_prec[e->bop];
    case RT_EXPR_UNARY:
        return 7;
    case RT_EXPR_SUM:
        return expr_prec(e->args[0]);
    case RT_EXPR_NUM:
        return e->num < 0 ? 7 : 8;
    default:
        return 8;
    }
}

static void print_rec(const rt_op *op, const rt_stmt *stmt, const rt_tensor *tensor,
                      const rt_expr *e, int min_prec, rt_buf *out) {
    if (!e) {
        rt_buf_puts(out, "?");
        return;
    }
    bool paren = expr_prec(e) < min_prec;
    if (paren)
        rt_buf_puts(out, "(");
    switch (e->kind) {
    case RT_EXPR_NUM:
        rt_num_print(e->num, e->is_int, out);
        break;
    case RT_EXPR_INDEX:
        if (stmt && e->var >= 0 && e->var < stmt->n_vars)
            rt_buf_puts(out, stmt->vars[e->var].name);
        else
            rt_buf_printf(out, "$%d", e->var);
        break;
    case RT_EXPR_SIZE:
        if (op && e->sym >= 0 && e->sym < op->n_sizes)
            rt_buf_puts(out, op->sizes[e->sym].name);
        else
            rt_buf_printf(out, "$size%d", e->sym);
        break;
    case RT_EXPR_DIMREF:
        if (tensor && e->dim >= 0 && e->dim < tensor->n_dims && tensor->dims[e->dim].name)
            rt_buf_puts(out, tensor->dims[e->dim].name);
        else
            rt_buf_printf(out, "#%d", e->dim);
        break;
    case RT_EXPR_READ:
    case RT_EXPR_CALL:
        if (e->kind == RT_EXPR_CALL)
            rt_buf_puts(out, rt_fn_name(e->fn));
        else if (op && e->tensor >= 0 && e->tensor < op->n_tensors)
            rt_buf_puts(out, op->tensors[e->tensor].name);
        else
            rt_buf_puts(out, "?");
        rt_buf_puts(out, "(");
        for (int32_t i = 0; i < e->n_args; i++) {
            if (i)
                rt_buf_puts(out, ", ");
            print_rec(op, stmt, tensor, e->args[i], 0, out);
        }
        rt_buf_puts(out, ")");
        break;
    case RT_EXPR_UNARY:
        rt_buf_puts(out, e->uop == RT_UOP_NEG ? "-" : "!");
        print_rec(op, stmt, tensor, e->args[0], 7, out);
        break;
    case RT_EXPR_BINARY: {
        int p = rt_bop_prec[e->bop];
        bool tight = p == 6 && is_atom(e->args[0]) && is_atom(e->args[1]);
        print_rec(op, stmt, tensor, e->args[0], p, out);
        rt_buf_printf(out, tight ? "%s" : " %s ", rt_bop_name(e->bop));
        print_rec(op, stmt, tensor, e->args[1], p + 1, out);
        break;
    }
    case RT_EXPR_COND:
        print_rec(op, stmt, tensor, e->args[0], 1, out);
        rt_buf_puts(out, " ? ");
        print_rec(op, stmt, tensor, e->args[1], 0, out);
        rt_buf_puts(out, " : ");
        print_rec(op, stmt, tensor, e->args[2], 0, out);
        break;
    case RT_EXPR_CHILD:
        if (op && e->tree >= 0 && e->tree < op->n_trees)
            rt_buf_puts(out, op->trees[e->tree].name);
        else
            rt_buf_puts(out, "?");
        rt_buf_puts(out, ".child(");
        print_rec(op, stmt, tensor, e->args[0], 0, out);
        rt_buf_printf(out, ", %d)", e->child);
        break;
    case RT_EXPR_SUM: // implicit in op-spec: prints as written
        print_rec(op, stmt, tensor, e->args[0], paren ? 0 : min_prec, out);
        break;
    default:
        rt_buf_puts(out, "?");
        break;
    }
    if (paren)
        rt_buf_puts(out, ")");
}

void rt_expr_print(const rt_op *op, const rt_stmt *stmt, const rt_tensor *tensor, const rt_expr *e,
                   rt_buf *out) {
    print_rec(op, stmt, tensor, e, 0, out);
}

bool rt_expr_mentions_dimref(const rt_expr *e) {
    return rt_expr_mentions_dim(e, -1);
}

bool rt_expr_mentions_dim(const rt_expr *e, int32_t dim) {
    if (!e)
        return false;
    if (e->kind == RT_EXPR_DIMREF && (dim < 0 || e->dim == dim))
        return true;
    for (int32_t i = 0; i < e->n_args; i++)
        if (rt_expr_mentions_dim(e->args[i], dim))
            return true;
    return false;
}

double rt_assign_identity(rt_assign op) {
    switch (op) {
    case RT_ASSIGN_MUL_INIT:
        return 1.0;
    case RT_ASSIGN_MAX_INIT:
        return -HUGE_VAL;
    case RT_ASSIGN_MIN_INIT:
        return HUGE_VAL;
    default:
        return 0.0;
    }
}

bool rt_expr_int_call(const rt_expr *e) {
    bool all_int = e->kind == RT_EXPR_CALL && e->n_args >= 1 &&
                   (e->fn == RT_FN_MAX || e->fn == RT_FN_MIN || e->fn == RT_FN_ABS);
    for (int32_t i = 0; all_int && i < e->n_args; i++)
        all_int = e->args[i]->is_int;
    return all_int;
}
