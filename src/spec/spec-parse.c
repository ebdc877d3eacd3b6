// spec-parse.c: the op-spec parser. Second stage of the front end: tokens (spec-lex.c) ->
// rt_op with sizes, tensors (parameters, outputs, temporaries), trees, statements with
// resolved names (index variables, size symbols, tensor reads, calls, tree children), where
// clauses and directives. Then spec-check.c infers ranges and shapes and fuses axes.
// Recursive descent with C precedence; nesting is bounded (RT_SPEC_MAX_DEPTH) so that no
// input can exhaust the stack. rt_spec_parse and rt_spec_load, the entry points, live here.
#include "spec-int.h"

#include <stdio.h>
#include <string.h>

typedef enum rt_pmode {
    RT_PMODE_EXTENT, // a dim extent: sizes, named outer dims, length tensors
    RT_PMODE_STMT,   // a statement's right side: new names become reduced index variables
    RT_PMODE_WHERE,  // a where-range bound: only existing names
} rt_pmode;

typedef struct rt_pending { // a read of a name not (yet) declared
    rt_expr *e;
    const char *name;
} rt_pending;

typedef struct rt_parser {
    rt_arena *a;
    rt_err *err;
    rt_op *op;
    rt_token *toks;
    int32_t n_toks, pos;
    int32_t cap_sizes, cap_tensors, cap_trees, cap_stmts, cap_dirs, cap_outputs;
    int32_t depth; // current recursion depth of the expression parser
    rt_pmode mode;
    rt_tensor *ext_tensor; // RT_PMODE_EXTENT: the tensor being declared
    int32_t ext_dim;       //   and the dim whose extent is parsed
    rt_stmt *st;           // RT_PMODE_STMT / RT_PMODE_WHERE
    int32_t cap_vars, cap_preds;
    rt_pending *pending;
    int32_t n_pending, cap_pending;
} rt_parser;

#define NOMEM(p) rt_fail((p)->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory")

static rt_status grow_raw(rt_parser *p, void *arr, int32_t n, int32_t *cap, size_t elem,
                          void **out) {
    if (*cap > INT32_MAX / 2)
        return NOMEM(p);
    int32_t nc = *cap ? *cap * 2 : 8;
    void *na = rt_arena_calloc(p->a, (size_t)nc, elem);
    if (!na)
        return NOMEM(p);
    if (n)
        memcpy(na, arr, (size_t)n * elem);
    *cap = nc;
    *out = na;
    return RT_OK;
}

// Makes room for element n of a growable array.
#define GROW(p, arr, n, cap)                                                                       \
    do {                                                                                           \
        if ((n) >= (cap)) {                                                                        \
            void *na_ = NULL;                                                                      \
            RT_TRY(grow_raw((p), (arr), (n), &(cap), sizeof *(arr), &na_));                        \
            (arr) = na_;                                                                           \
        }                                                                                          \
    } while (0)

// ---------------------------------------------------------------------------------------------
// Tokens
// ---------------------------------------------------------------------------------------------

static const rt_token *tok(const rt_parser *p) {
    return &p->toks[p->pos];
}

static const rt_token *peek(const rt_parser *p, int32_t k) {
    int32_t i = p->pos + k;
    return i < p->n_toks ? &p->toks[i] : &p->toks[p->n_toks - 1];
}

static rt_status check_tok(rt_parser *p) {
    const rt_token *t = tok(p);
    if (t->kind == RT_TOK_ERROR)
        return rt_fail(p->err, RT_ERR_SYNTAX, t->loc, "%s", t->msg);
    return RT_OK;
}

static rt_status advance(rt_parser *p) {
    if (p->pos < p->n_toks - 1)
        p->pos++;
    return check_tok(p);
}

static const char *describe(rt_parser *p, const rt_token *t) {
    const char *s = rt_tok_describe(p->a, t);
    return s ? s : "?";
}

static rt_status syntax(rt_parser *p, const char *expected) {
    return rt_fail(p->err, RT_ERR_SYNTAX, tok(p)->loc, "expected %s (got %s)", expected,
                   describe(p, tok(p)));
}

static bool at(const rt_parser *p, const char *s) {
    return rt_tok_is(tok(p), s);
}

static rt_status expect(rt_parser *p, const char *s) {
    if (!at(p, s)) {
        char q[32];
        snprintf(q, sizeof q, "'%s'", s);
        return syntax(p, q);
    }
    return advance(p);
}

static rt_status accept(rt_parser *p, const char *s, bool *found) {
    *found = at(p, s);
    return *found ? advance(p) : RT_OK;
}

static bool name_is(const char *name, const rt_token *t) {
    return name && strlen(name) == (size_t)t->len && !memcmp(name, t->text, (size_t)t->len);
}

static const char *tok_name(rt_parser *p, const rt_token *t) {
    return rt_arena_strndup(p->a, t->text, (size_t)t->len);
}

static int32_t find_size(const rt_op *op, const rt_token *t) {
    for (int32_t i = 0; i < op->n_sizes; i++)
        if (name_is(op->sizes[i].name, t))
            return i;
    return -1;
}

static int32_t find_tensor(const rt_op *op, const rt_token *t) {
    for (int32_t i = 0; i < op->n_tensors; i++)
        if (name_is(op->tensors[i].name, t))
            return i;
    return -1;
}

static int32_t find_tree(const rt_op *op, const rt_token *t) {
    for (int32_t i = 0; i < op->n_trees; i++)
        if (name_is(op->trees[i].name, t))
            return i;
    return -1;
}

static int32_t find_var(const rt_stmt *st, const rt_token *t) {
    for (int32_t i = 0; i < st->n_vars; i++)
        if (name_is(st->vars[i].name, t))
            return i;
    return -1;
}

// A new tensor or tree name must not clash with a size, a tensor or a tree.
static rt_status check_fresh(rt_parser *p, const rt_token *t) {
    if (find_size(p->op, t) >= 0)
        return rt_fail(p->err, RT_ERR_SPEC, t->loc, "'%.*s' is already a size", t->len, t->text);
    if (find_tensor(p->op, t) >= 0)
        return rt_fail(p->err, RT_ERR_SPEC, t->loc, "duplicate tensor '%.*s'", t->len, t->text);
    if (find_tree(p->op, t) >= 0)
        return rt_fail(p->err, RT_ERR_SPEC, t->loc, "'%.*s' is already a tree", t->len, t->text);
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Expressions
// ---------------------------------------------------------------------------------------------

static rt_status parse_expr(rt_parser *p, rt_expr **out, int32_t *height);

static rt_status new_node(rt_parser *p, rt_expr_kind kind, rt_loc loc, int32_t n_args,
                          rt_expr **out) {
    rt_expr *e = rt_expr_new(p->a, kind, loc);
    if (!e)
        return NOMEM(p);
    if (n_args > 0) {
        e->args = rt_arena_calloc(p->a, (size_t)n_args, sizeof *e->args);
        if (!e->args)
            return NOMEM(p);
    }
    e->n_args = n_args;
    *out = e;
    return RT_OK;
}

static rt_status check_height(rt_parser *p, rt_loc loc, int32_t height) {
    if (height > RT_SPEC_MAX_DEPTH)
        return rt_fail(p->err, RT_ERR_SYNTAX, loc, "expression nested too deeply");
    return RT_OK;
}

// '(' [expr {',' expr}] ')' into a growable list.
static rt_status parse_args(rt_parser *p, rt_expr ***out_args, int32_t *out_n, int32_t *height) {
    rt_expr **args = NULL;
    int32_t n = 0, cap = 0, h = 0;
    RT_TRY(expect(p, "("));
    if (!at(p, ")")) {
        for (;;) {
            rt_expr *e = NULL;
            int32_t eh = 0;
            RT_TRY(parse_expr(p, &e, &eh));
            GROW(p, args, n, cap);
            args[n++] = e;
            h = eh > h ? eh : h;
            bool more;
            RT_TRY(accept(p, ",", &more));
            if (!more)
                break;
        }
    }
    if (!at(p, ")"))
        return syntax(p, n ? "',' or ')'" : "')'");
    RT_TRY(advance(p));
    *out_args = args;
    *out_n = n;
    *height = h + 1;
    return RT_OK;
}

static rt_status add_var(rt_parser *p, const rt_token *t, bool reduce, int32_t *out) {
    rt_stmt *st = p->st;
    GROW(p, st->vars, st->n_vars, p->cap_vars);
    rt_ivar *v = &st->vars[st->n_vars];
    v->name = tok_name(p, t);
    if (!v->name)
        return NOMEM(p);
    v->loc = t->loc;
    v->is_reduce = reduce;
    *out = st->n_vars++;
    return RT_OK;
}

// extent: 'len(b)' where len is an earlier int32 rank-1 parameter and b a named outer dim.
static rt_status parse_length_read(rt_parser *p, rt_expr **out) {
    const rt_token *name = tok(p);
    const rt_tensor *t = p->ext_tensor;
    int32_t lt = find_tensor(p->op, name);
    if (lt < 0 || p->op->tensors[lt].role != RT_ROLE_INPUT)
        return rt_fail(p->err, RT_ERR_SPEC, name->loc,
                       "'%.*s' is not a length tensor (expected an earlier int32 parameter)",
                       name->len, name->text);
    rt_tensor *len = &p->op->tensors[lt];
    if (len->dtype != RT_DTYPE_I32 || len->n_dims != 1)
        return rt_fail(p->err, RT_ERR_SPEC, name->loc,
                       "length tensor '%s' must be int32 of rank 1 (got %s of rank %d)", len->name,
                       rt_dtype_name(len->dtype), len->n_dims);
    RT_TRY(advance(p));
    RT_TRY(expect(p, "("));
    const rt_token *arg = tok(p);
    if (arg->kind != RT_TOK_IDENT)
        return syntax(p, "a named outer dimension");
    int32_t dim = -1;
    for (int32_t i = 0; i < p->ext_dim; i++)
        if (name_is(t->dims[i].name, arg))
            dim = i;
    if (dim < 0)
        return rt_fail(p->err, RT_ERR_SPEC, name->loc,
                       "extent '%.*s(%.*s)': '%.*s' is not a named outer dimension of this tensor",
                       name->len, name->text, arg->len, arg->text, arg->len, arg->text);
    RT_TRY(advance(p));
    RT_TRY(expect(p, ")"));
    rt_expr *e = NULL, *ref = NULL;
    RT_TRY(new_node(p, RT_EXPR_READ, name->loc, 1, &e));
    RT_TRY(new_node(p, RT_EXPR_DIMREF, arg->loc, 0, &ref));
    ref->dim = dim;
    ref->is_int = true;
    e->tensor = lt;
    e->is_int = true;
    e->args[0] = ref;
    len->is_length = true;
    *out = e;
    return RT_OK;
}

// T.child(e, INT)
static rt_status parse_child(rt_parser *p, rt_expr **out, int32_t *height) {
    const rt_token *name = tok(p);
    int32_t tree = find_tree(p->op, name);
    if (tree < 0)
        return rt_fail(p->err, RT_ERR_SPEC, name->loc, "'%.*s' is not a tree", name->len,
                       name->text);
    RT_TRY(advance(p));
    RT_TRY(advance(p)); // '.'
    if (!at(p, "child")) {
        if (tok(p)->kind == RT_TOK_IDENT)
            return rt_fail(p->err, RT_ERR_SPEC, tok(p)->loc,
                           "unknown tree method '%.*s' (expected child)", tok(p)->len,
                           tok(p)->text);
        return syntax(p, "'child'");
    }
    RT_TRY(advance(p));
    RT_TRY(expect(p, "("));
    rt_expr *node = NULL, *e = NULL;
    int32_t h = 0;
    RT_TRY(parse_expr(p, &node, &h));
    if (!node->is_int)
        return rt_fail(p->err, RT_ERR_SPEC, node->loc, "tree node must be an integer expression");
    RT_TRY(expect(p, ","));
    if (tok(p)->kind != RT_TOK_INT)
        return syntax(p, "a child number");
    int64_t c = tok(p)->ival;
    int32_t max = p->op->trees[tree].max_children;
    if (c >= max)
        return rt_fail(p->err, RT_ERR_SPEC, tok(p)->loc,
                       "child %lld of tree '%s' out of range (expected 0 to %d)", (long long)c,
                       p->op->trees[tree].name, max - 1);
    RT_TRY(advance(p));
    RT_TRY(expect(p, ")"));
    RT_TRY(new_node(p, RT_EXPR_CHILD, name->loc, 1, &e));
    e->tree = tree;
    e->child = (int32_t)c;
    e->args[0] = node;
    e->is_int = true;
    *height = h + 1;
    RT_TRY(check_height(p, e->loc, *height));
    *out = e;
    return RT_OK;
}

// NAME '(' args ')' in a statement or where-range: function call or tensor read.
static rt_status parse_call(rt_parser *p, rt_expr **out, int32_t *height) {
    const rt_token *name = tok(p);
    rt_fn fn;
    bool is_fn = rt_fn_from_name(name->text, (size_t)name->len, &fn);
    int32_t t = find_tensor(p->op, name);
    if (!is_fn && t < 0) {
        if (name_is("leaf", name))
            return rt_fail(p->err, RT_ERR_SPEC, name->loc,
                           "'leaf' is a predicate; use it in a where clause");
        if (find_tree(p->op, name) >= 0)
            return rt_fail(p->err, RT_ERR_SPEC, name->loc, "'%.*s' is a tree; use %.*s.child(n, c)",
                           name->len, name->text, name->len, name->text);
        if (find_size(p->op, name) >= 0)
            return rt_fail(p->err, RT_ERR_SPEC, name->loc,
                           "'%.*s' is a size, not a tensor or function", name->len, name->text);
        if (p->mode != RT_PMODE_STMT)
            return rt_fail(p->err, RT_ERR_SPEC, name->loc, "unknown tensor or function '%.*s'",
                           name->len, name->text);
    }
    RT_TRY(advance(p));
    rt_expr **args = NULL;
    int32_t n = 0, h = 0;
    RT_TRY(parse_args(p, &args, &n, &h));
    rt_expr *e = NULL;
    RT_TRY(new_node(p, is_fn ? RT_EXPR_CALL : RT_EXPR_READ, name->loc, 0, &e));
    e->args = args;
    e->n_args = n;
    *height = h;
    RT_TRY(check_height(p, e->loc, h));
    if (is_fn) {
        e->fn = fn;
        if (n != rt_fn_arity(fn))
            return rt_fail(p->err, RT_ERR_SPEC, name->loc,
                           "wrong number of arguments to '%s' (expected %d, got %d)",
                           rt_fn_name(fn), rt_fn_arity(fn), n);
        e->is_int = fn == RT_FN_ABS || fn == RT_FN_MAX || fn == RT_FN_MIN;
        for (int32_t i = 0; i < n; i++)
            e->is_int = e->is_int && args[i]->is_int;
    } else if (t >= 0) {
        e->tensor = t;
        e->is_int = rt_dtype_is_int(p->op->tensors[t].dtype);
    } else {
        e->tensor = -1; // resolved when written later (an error either way, see parse_body)
        GROW(p, p->pending, p->n_pending, p->cap_pending);
        p->pending[p->n_pending].e = e;
        p->pending[p->n_pending++].name = tok_name(p, name);
    }
    *out = e;
    return RT_OK;
}

static rt_status parse_name(rt_parser *p, rt_expr **out, int32_t *height) {
    const rt_token *name = tok(p);
    *height = 1;
    if (p->mode == RT_PMODE_EXTENT) {
        if (rt_tok_is(peek(p, 1), "("))
            return parse_length_read(p, out);
        int32_t dim = -1, any = -1;
        for (int32_t i = 0; i < p->ext_tensor->n_dims + 1 && i < RT_MAX_DIMS; i++)
            if (name_is(p->ext_tensor->dims[i].name, name))
                any = i, dim = i < p->ext_dim ? i : -1;
        rt_expr *e = NULL;
        if (dim >= 0) {
            RT_TRY(new_node(p, RT_EXPR_DIMREF, name->loc, 0, &e));
            e->dim = dim;
        } else if (any < 0 && find_size(p->op, name) >= 0) {
            RT_TRY(new_node(p, RT_EXPR_SIZE, name->loc, 0, &e));
            e->sym = find_size(p->op, name);
        } else if (any >= 0) {
            return rt_fail(p->err, RT_ERR_SPEC, name->loc,
                           "'%.*s' is not a named outer dimension of this tensor", name->len,
                           name->text);
        } else {
            return rt_fail(p->err, RT_ERR_SPEC, name->loc,
                           "'%.*s' is not a size or a named outer dimension", name->len,
                           name->text);
        }
        e->is_int = true;
        *out = e;
        return advance(p);
    }
    if (rt_tok_is(peek(p, 1), "."))
        return parse_child(p, out, height);
    if (rt_tok_is(peek(p, 1), "("))
        return parse_call(p, out, height);
    rt_expr *e = NULL;
    int32_t v = find_var(p->st, name);
    if (v >= 0) {
        RT_TRY(new_node(p, RT_EXPR_INDEX, name->loc, 0, &e));
        e->var = v;
    } else if (find_size(p->op, name) >= 0) {
        RT_TRY(new_node(p, RT_EXPR_SIZE, name->loc, 0, &e));
        e->sym = find_size(p->op, name);
    } else if (find_tensor(p->op, name) >= 0) {
        return rt_fail(p->err, RT_ERR_SPEC, name->loc, "tensor '%.*s' needs indices", name->len,
                       name->text);
    } else if (find_tree(p->op, name) >= 0) {
        return rt_fail(p->err, RT_ERR_SPEC, name->loc, "'%.*s' is a tree, not a value", name->len,
                       name->text);
    } else if (p->mode == RT_PMODE_WHERE) {
        return rt_fail(p->err, RT_ERR_SPEC, name->loc, "unknown name '%.*s' in where-range",
                       name->len, name->text);
    } else {
        RT_TRY(add_var(p, name, true, &v));
        RT_TRY(new_node(p, RT_EXPR_INDEX, name->loc, 0, &e));
        e->var = v;
    }
    e->is_int = true;
    *out = e;
    return advance(p);
}

static rt_status parse_primary(rt_parser *p, rt_expr **out, int32_t *height) {
    const rt_token *t = tok(p);
    rt_expr *e = NULL;
    switch (t->kind) {
    case RT_TOK_INT:
        if (t->ival > ((int64_t)1 << 53))
            return rt_fail(p->err, RT_ERR_SYNTAX, t->loc,
                           "integer literal %lld is too large for an expression (expected at "
                           "most %lld)",
                           (long long)t->ival, (long long)((int64_t)1 << 53));
        RT_TRY(new_node(p, RT_EXPR_NUM, t->loc, 0, &e));
        e->num = (double)t->ival;
        e->is_int = true;
        *out = e;
        *height = 1;
        return advance(p);
    case RT_TOK_REAL:
        RT_TRY(new_node(p, RT_EXPR_NUM, t->loc, 0, &e));
        e->num = t->rval;
        *out = e;
        *height = 1;
        return advance(p);
    case RT_TOK_IDENT:
        return parse_name(p, out, height);
    default:
        if (at(p, "(")) {
            RT_TRY(advance(p));
            RT_TRY(parse_expr(p, out, height));
            return expect(p, ")");
        }
        return syntax(p, "an expression");
    }
}

static rt_status enter(rt_parser *p) {
    if (++p->depth > RT_SPEC_MAX_DEPTH)
        return rt_fail(p->err, RT_ERR_SYNTAX, tok(p)->loc, "expression nested too deeply");
    return RT_OK;
}

static rt_status parse_unary(rt_parser *p, rt_expr **out, int32_t *height) {
    if (!at(p, "-") && !at(p, "!"))
        return parse_primary(p, out, height);
    RT_TRY(enter(p));
    rt_loc loc = tok(p)->loc;
    bool neg = at(p, "-");
    RT_TRY(advance(p));
    rt_expr *arg = NULL, *e = NULL;
    int32_t h = 0;
    RT_TRY(parse_unary(p, &arg, &h));
    RT_TRY(new_node(p, RT_EXPR_UNARY, loc, 1, &e));
    e->uop = neg ? RT_UOP_NEG : RT_UOP_NOT;
    e->args[0] = arg;
    e->is_int = neg ? arg->is_int : true;
    *height = h + 1;
    RT_TRY(check_height(p, loc, *height));
    *out = e;
    p->depth--;
    return RT_OK;
}

// Binary operators and their binding strength (ORDER RT_BOP; same table as spec-expr.c).
static bool binop(const rt_token *t, rt_bop *op, int *prec) {
    static const struct {
        const char *s;
        rt_bop op;
        int prec;
    } tab[] = {
        {"||", RT_BOP_OR, 1}, {"&&", RT_BOP_AND, 2}, {"==", RT_BOP_EQ, 3}, {"!=", RT_BOP_NE, 3},
        {"<", RT_BOP_LT, 4},  {"<=", RT_BOP_LE, 4},  {">", RT_BOP_GT, 4},  {">=", RT_BOP_GE, 4},
        {"+", RT_BOP_ADD, 5}, {"-", RT_BOP_SUB, 5},  {"*", RT_BOP_MUL, 6}, {"/", RT_BOP_DIV, 6},
        {"%", RT_BOP_MOD, 6},
    };
    if (t->kind != RT_TOK_PUNCT)
        return false;
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        if (rt_tok_is(t, tab[i].s)) {
            *op = tab[i].op;
            *prec = tab[i].prec;
            return true;
        }
    }
    return false;
}

static rt_status parse_binary(rt_parser *p, int min_prec, rt_expr **out, int32_t *height) {
    rt_expr *lhs = NULL;
    int32_t lh = 0;
    RT_TRY(parse_unary(p, &lhs, &lh));
    rt_bop op;
    int prec;
    while (binop(tok(p), &op, &prec) && prec >= min_prec) {
        rt_loc loc = tok(p)->loc;
        RT_TRY(advance(p));
        rt_expr *rhs = NULL, *e = NULL;
        int32_t rh = 0;
        RT_TRY(enter(p));
        RT_TRY(parse_binary(p, prec + 1, &rhs, &rh));
        p->depth--;
        RT_TRY(new_node(p, RT_EXPR_BINARY, lhs->loc, 2, &e));
        (void)loc;
        e->bop = op;
        e->args[0] = lhs;
        e->args[1] = rhs;
        e->is_int = op >= RT_BOP_LT || (lhs->is_int && rhs->is_int);
        lh = 1 + (lh > rh ? lh : rh);
        RT_TRY(check_height(p, loc, lh));
        lhs = e;
    }
    *out = lhs;
    *height = lh;
    return RT_OK;
}

static rt_status parse_expr(rt_parser *p, rt_expr **out, int32_t *height) {
    RT_TRY(enter(p));
    rt_expr *c = NULL;
    int32_t h = 0;
    RT_TRY(parse_binary(p, 1, &c, &h));
    if (at(p, "?")) {
        rt_loc loc = tok(p)->loc;
        RT_TRY(advance(p));
        rt_expr *a = NULL, *b = NULL, *e = NULL;
        int32_t ha = 0, hb = 0;
        RT_TRY(parse_expr(p, &a, &ha));
        RT_TRY(expect(p, ":"));
        RT_TRY(parse_expr(p, &b, &hb));
        RT_TRY(new_node(p, RT_EXPR_COND, c->loc, 3, &e));
        e->args[0] = c;
        e->args[1] = a;
        e->args[2] = b;
        e->is_int = a->is_int && b->is_int;
        h = 1 + (h > ha ? (h > hb ? h : hb) : (ha > hb ? ha : hb));
        RT_TRY(check_height(p, loc, h));
        c = e;
    }
    *out = c;
    *height = h;
    p->depth--;
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Declarations
// ---------------------------------------------------------------------------------------------

static rt_status parse_size(rt_parser *p) {
    rt_op *op = p->op;
    RT_TRY(advance(p)); // 'size'
    const rt_token *name = tok(p);
    if (name->kind != RT_TOK_IDENT)
        return syntax(p, "a size name");
    if (find_size(op, name) >= 0)
        return rt_fail(p->err, RT_ERR_SPEC, name->loc, "duplicate size '%.*s'", name->len,
                       name->text);
    RT_TRY(advance(p));
    RT_TRY(expect(p, "="));
    const rt_token *val = tok(p);
    if (val->kind != RT_TOK_INT)
        return syntax(p, "an integer");
    if (val->ival <= 0)
        return rt_fail(p->err, RT_ERR_SPEC, val->loc, "size '%.*s' must be positive (got %lld)",
                       name->len, name->text, (long long)val->ival);
    GROW(p, op->sizes, op->n_sizes, p->cap_sizes);
    rt_size *s = &op->sizes[op->n_sizes++];
    s->name = tok_name(p, name);
    s->loc = name->loc;
    s->value = val->ival;
    s->bound = true;
    return advance(p);
}

// Applies the --set bindings to the sizes declared so far: after the 'size' lines, and again
// (final) after the parameters, whose trees declare their node counts (a bound node count makes
// the generated tree that large, and a bound tree must agree with it). A binding for no size is
// an error only in the final pass.
static rt_status apply_bindings(rt_parser *p, const rt_size_binding *set, int32_t n_set,
                                bool final) {
    rt_op *op = p->op;
    for (int32_t i = 0; i < n_set; i++) {
        int32_t k = -1;
        for (int32_t j = 0; j < op->n_sizes; j++)
            if (set[i].name && !strcmp(op->sizes[j].name, set[i].name))
                k = j;
        if (k < 0 && !final)
            continue;
        if (k < 0)
            return rt_fail(p->err, RT_ERR_USAGE, RT_NOLOC, "--set %s=%lld: no size '%s' in %s",
                           set[i].name ? set[i].name : "", (long long)set[i].value,
                           set[i].name ? set[i].name : "", op->file);
        if (set[i].value <= 0)
            return rt_fail(p->err, RT_ERR_USAGE, RT_NOLOC,
                           "--set %s=%lld: size '%s' must be positive (got %lld)", set[i].name,
                           (long long)set[i].value, set[i].name, (long long)set[i].value);
        op->sizes[k].value = set[i].value;
        op->sizes[k].bound = true;
        op->sizes[k].overridden = true;
    }
    return RT_OK;
}

// Checks that a parsed extent is an integer expression of sizes, outer dims and length reads.
static rt_status check_extent(rt_parser *p, const rt_expr *e, const rt_token *first, int32_t n_toks,
                              bool *ragged) {
    bool ok = e->is_int;
    switch (e->kind) {
    case RT_EXPR_NUM:
    case RT_EXPR_SIZE:
        break;
    case RT_EXPR_DIMREF:
    case RT_EXPR_READ:
        *ragged = true;
        return RT_OK;
    case RT_EXPR_UNARY:
        ok = ok && e->uop == RT_UOP_NEG;
        break;
    case RT_EXPR_BINARY:
        ok = ok && e->bop <= RT_BOP_MOD;
        break;
    default:
        ok = false;
        break;
    }
    if (!ok) {
        const char *end = first[n_toks - 1].text + first[n_toks - 1].len;
        return rt_fail(p->err, RT_ERR_SPEC, first->loc,
                       "extent '%.*s' must be an integer expression of sizes and outer dimensions",
                       (int)(end - first->text), first->text);
    }
    for (int32_t i = 0; i < e->n_args; i++)
        RT_TRY(check_extent(p, e->args[i], first, n_toks, ragged));
    return RT_OK;
}

// '(' dim {',' dim} ')' into t.
static rt_status parse_dims(rt_parser *p, rt_tensor *t) {
    RT_TRY(expect(p, "("));
    for (;;) {
        if (t->n_dims == RT_MAX_DIMS)
            return rt_fail(p->err, RT_ERR_SPEC, tok(p)->loc,
                           "too many dimensions (expected at most %d)", RT_MAX_DIMS);
        rt_dim *d = &t->dims[t->n_dims];
        d->loc = tok(p)->loc;
        if (tok(p)->kind == RT_TOK_IDENT && rt_tok_is(peek(p, 1), ":")) {
            const rt_token *name = tok(p);
            if (find_size(p->op, name) >= 0)
                return rt_fail(p->err, RT_ERR_SPEC, name->loc,
                               "dimension name '%.*s' is already a size", name->len, name->text);
            for (int32_t i = 0; i < t->n_dims; i++)
                if (name_is(t->dims[i].name, name))
                    return rt_fail(p->err, RT_ERR_SPEC, name->loc,
                                   "duplicate dimension name '%.*s'", name->len, name->text);
            d->name = tok_name(p, name);
            RT_TRY(advance(p));
            RT_TRY(advance(p));
        }
        int32_t first = p->pos, h;
        p->mode = RT_PMODE_EXTENT;
        p->ext_tensor = t;
        p->ext_dim = t->n_dims;
        RT_TRY(parse_expr(p, &d->extent, &h));
        bool ragged = false;
        RT_TRY(check_extent(p, d->extent, &p->toks[first], p->pos - first, &ragged));
        int64_t v;
        if (rt_expr_const_int(p->op, d->extent, &v) && v <= 0) {
            const rt_token *f = &p->toks[first], *l = &p->toks[p->pos - 1];
            return rt_fail(p->err, RT_ERR_SPEC, f->loc, "extent '%.*s' must be positive (got %lld)",
                           (int)(l->text + l->len - f->text), f->text, (long long)v);
        }
        d->ragged = ragged;
        t->ragged = t->ragged || ragged;
        t->n_dims++;
        bool more;
        RT_TRY(accept(p, ",", &more));
        if (!more)
            break;
    }
    if (!at(p, ")"))
        return syntax(p, "',' or ')'");
    return advance(p);
}

static rt_status push_tensor(rt_parser *p, const rt_tensor *t, int32_t *out) {
    rt_op *op = p->op;
    GROW(p, op->tensors, op->n_tensors, p->cap_tensors);
    op->tensors[op->n_tensors] = *t;
    *out = op->n_tensors++;
    return RT_OK;
}

static rt_status parse_dtype(rt_parser *p, rt_dtype *out) {
    const rt_token *t = tok(p);
    if (t->kind != RT_TOK_IDENT)
        return syntax(p, "a data type");
    if (!rt_dtype_from_name(t->text, (size_t)t->len, out))
        return rt_fail(p->err, RT_ERR_SYNTAX, t->loc,
                       "unknown data type '%.*s' (expected float, half, bfloat16, double, int32 "
                       "or int8)",
                       t->len, t->text);
    return advance(p);
}

static rt_status parse_tree_param(rt_parser *p) {
    rt_op *op = p->op;
    rt_loc loc = tok(p)->loc;
    RT_TRY(advance(p)); // 'tree'
    RT_TRY(expect(p, "("));
    const rt_token *n = tok(p);
    if (n->kind != RT_TOK_IDENT)
        return syntax(p, "a node-count name");
    if (find_size(op, n) >= 0 || find_tensor(op, n) >= 0 || find_tree(op, n) >= 0)
        return rt_fail(p->err, RT_ERR_SPEC, n->loc,
                       "tree node count must be a fresh name ('%.*s' is already declared)", n->len,
                       n->text);
    RT_TRY(advance(p));
    RT_TRY(expect(p, ","));
    const rt_token *c = tok(p);
    if (c->kind != RT_TOK_INT)
        return syntax(p, "an integer");
    if (c->ival < 1 || c->ival > 1024)
        return rt_fail(p->err, RT_ERR_SPEC, c->loc,
                       "tree children must be between 1 and 1024 (got %lld)", (long long)c->ival);
    RT_TRY(advance(p));
    RT_TRY(expect(p, ")"));
    const rt_token *name = tok(p);
    if (name->kind != RT_TOK_IDENT)
        return syntax(p, "a tree name");
    RT_TRY(check_fresh(p, name));
    if (n->len == name->len && !memcmp(n->text, name->text, (size_t)n->len))
        return rt_fail(p->err, RT_ERR_SPEC, name->loc, "'%.*s' is already a size", name->len,
                       name->text);
    GROW(p, op->sizes, op->n_sizes, p->cap_sizes);
    rt_size *s = &op->sizes[op->n_sizes];
    s->name = tok_name(p, n);
    s->loc = n->loc;
    s->bound = false;
    GROW(p, op->trees, op->n_trees, p->cap_trees);
    rt_tree *t = &op->trees[op->n_trees++];
    t->name = tok_name(p, name);
    t->loc = loc;
    t->n_sym = op->n_sizes++;
    t->max_children = (int32_t)c->ival;
    return advance(p);
}

static rt_status parse_param(rt_parser *p) {
    if (at(p, "tree") && rt_tok_is(peek(p, 1), "("))
        return parse_tree_param(p);
    rt_tensor t = {0};
    t.loc = tok(p)->loc;
    t.role = RT_ROLE_INPUT;
    t.writer = -1;
    RT_TRY(parse_dtype(p, &t.dtype));
    RT_TRY(parse_dims(p, &t));
    const rt_token *name = tok(p);
    if (name->kind != RT_TOK_IDENT)
        return syntax(p, "a tensor name");
    RT_TRY(check_fresh(p, name));
    t.name = tok_name(p, name);
    t.loc = name->loc;
    RT_TRY(advance(p));
    if (at(p, "pad")) {
        RT_TRY(advance(p));
        bool neg;
        RT_TRY(accept(p, "-", &neg));
        if (tok(p)->kind == RT_TOK_INT)
            t.pad_value = (double)tok(p)->ival;
        else if (tok(p)->kind == RT_TOK_REAL)
            t.pad_value = tok(p)->rval;
        else
            return syntax(p, "a pad value");
        t.pad_value = neg ? -t.pad_value : t.pad_value;
        t.has_pad = true;
        RT_TRY(advance(p));
    }
    int32_t idx = 0;
    return push_tensor(p, &t, &idx);
}

static rt_status parse_output(rt_parser *p) {
    rt_op *op = p->op;
    rt_tensor t = {0};
    t.role = RT_ROLE_OUTPUT;
    t.writer = -1;
    t.dtype = RT_DTYPE_F32;
    if (tok(p)->kind != RT_TOK_IDENT)
        return syntax(p, "an output");
    if (rt_tok_is(peek(p, 1), "(")) {
        RT_TRY(parse_dtype(p, &t.dtype));
        RT_TRY(parse_dims(p, &t));
        t.shape_given = true;
    }
    const rt_token *name = tok(p);
    if (name->kind != RT_TOK_IDENT)
        return syntax(p, "an output name");
    int32_t prev = find_tensor(op, name);
    if (prev >= 0 && op->tensors[prev].role == RT_ROLE_INPUT)
        return rt_fail(p->err, RT_ERR_SPEC, name->loc, "output '%.*s' is also a parameter",
                       name->len, name->text);
    RT_TRY(check_fresh(p, name));
    t.name = tok_name(p, name);
    t.loc = name->loc;
    RT_TRY(advance(p));
    int32_t idx = 0;
    RT_TRY(push_tensor(p, &t, &idx));
    GROW(p, op->outputs, op->n_outputs, p->cap_outputs);
    op->outputs[op->n_outputs++] = idx;
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Statements and directives
// ---------------------------------------------------------------------------------------------

static rt_status parse_where_item(rt_parser *p) {
    rt_stmt *st = p->st;
    bool neg;
    rt_loc loc = tok(p)->loc;
    RT_TRY(accept(p, "!", &neg));
    const rt_token *name = tok(p);
    if (name->kind != RT_TOK_IDENT)
        return syntax(p, neg ? "a predicate" : "a where-range or a predicate");
    if (!neg && rt_tok_is(peek(p, 1), "in")) {
        int32_t v = find_var(st, name);
        if (v < 0)
            return rt_fail(p->err, RT_ERR_SPEC, name->loc,
                           "where-range for '%.*s', which the statement does not use", name->len,
                           name->text);
        if (st->vars[v].from_where)
            return rt_fail(p->err, RT_ERR_SPEC, name->loc, "duplicate where-range for '%.*s'",
                           name->len, name->text);
        RT_TRY(advance(p));
        RT_TRY(advance(p));
        p->mode = RT_PMODE_WHERE;
        rt_expr *lo = NULL, *hi = NULL;
        int32_t h = 0;
        RT_TRY(parse_expr(p, &lo, &h));
        RT_TRY(expect(p, ":"));
        RT_TRY(parse_expr(p, &hi, &h));
        if (!lo->is_int || !hi->is_int)
            return rt_fail(p->err, RT_ERR_SPEC, (lo->is_int ? hi : lo)->loc,
                           "where-range bounds must be integer expressions");
        st->vars[v].lo = lo;
        st->vars[v].hi = hi;
        st->vars[v].from_where = true;
        st->vars[v].loc = name->loc;
        return RT_OK;
    }
    if (!rt_tok_is(peek(p, 1), "(")) {
        RT_TRY(advance(p));
        return syntax(p, neg ? "'('" : "'in' or '('");
    }
    if (!name_is("leaf", name))
        return rt_fail(p->err, RT_ERR_SPEC, name->loc, "unknown predicate '%.*s' (expected leaf)",
                       name->len, name->text);
    RT_TRY(advance(p));
    RT_TRY(expect(p, "("));
    const rt_token *arg = tok(p);
    if (arg->kind != RT_TOK_IDENT)
        return syntax(p, "an index variable");
    int32_t v = find_var(st, arg);
    if (v < 0)
        return rt_fail(p->err, RT_ERR_SPEC, arg->loc,
                       "'%.*s' is not an index variable of this statement", arg->len, arg->text);
    if (p->op->n_trees != 1)
        return rt_fail(p->err, RT_ERR_SPEC, loc,
                       p->op->n_trees ? "leaf(%.*s) is ambiguous"
                                      : "leaf(%.*s) needs a tree parameter",
                       arg->len, arg->text);
    RT_TRY(advance(p));
    RT_TRY(expect(p, ")"));
    GROW(p, st->preds, st->n_preds, p->cap_preds);
    rt_pred *pr = &st->preds[st->n_preds++];
    pr->loc = loc;
    pr->fn = "leaf";
    pr->tree = 0;
    pr->var = v;
    pr->negate = neg;
    return RT_OK;
}

static rt_status parse_stmt(rt_parser *p) {
    rt_op *op = p->op;
    rt_stmt st = {0};
    p->st = &st;
    p->cap_vars = 0;
    p->cap_preds = 0;
    const rt_token *name = tok(p);
    st.loc = name->loc;
    if (find_size(op, name) >= 0)
        return rt_fail(p->err, RT_ERR_SPEC, name->loc, "'%.*s' is a size, not a tensor", name->len,
                       name->text);
    if (find_tree(op, name) >= 0)
        return rt_fail(p->err, RT_ERR_SPEC, name->loc, "'%.*s' is a tree, not a tensor", name->len,
                       name->text);
    int32_t t = find_tensor(op, name);
    if (t >= 0 && op->tensors[t].role == RT_ROLE_INPUT)
        return rt_fail(p->err, RT_ERR_SPEC, name->loc, "parameter '%.*s' cannot be written",
                       name->len, name->text);
    if (t < 0) {
        for (int32_t i = 0; i < p->n_pending; i++)
            if (name_is(p->pending[i].name, name))
                return rt_fail(p->err, RT_ERR_SPEC, p->pending[i].e->loc,
                               "'%.*s' is read before it is written", name->len, name->text);
        rt_tensor tmp = {0};
        tmp.name = tok_name(p, name);
        tmp.loc = name->loc;
        tmp.role = RT_ROLE_TEMP;
        tmp.dtype = RT_DTYPE_F32;
        tmp.writer = -1;
        RT_TRY(push_tensor(p, &tmp, &t));
    }
    st.out = t;
    RT_TRY(advance(p));
    RT_TRY(expect(p, "("));
    for (;;) {
        const rt_token *v = tok(p);
        if (v->kind != RT_TOK_IDENT)
            return syntax(p, "an index variable");
        if (find_size(op, v) >= 0)
            return rt_fail(p->err, RT_ERR_SPEC, v->loc, "'%.*s' is a size, not an index variable",
                           v->len, v->text);
        if (find_var(&st, v) >= 0)
            return rt_fail(p->err, RT_ERR_SPEC, v->loc,
                           "index '%.*s' appears twice on the left side", v->len, v->text);
        if (st.n_lhs == RT_MAX_DIMS)
            return rt_fail(p->err, RT_ERR_SPEC, v->loc, "too many indices (expected at most %d)",
                           RT_MAX_DIMS);
        int32_t var = 0;
        RT_TRY(add_var(p, v, false, &var));
        st.lhs_vars[st.n_lhs++] = var;
        RT_TRY(advance(p));
        bool more;
        RT_TRY(accept(p, ",", &more));
        if (!more)
            break;
    }
    if (!at(p, ")"))
        return syntax(p, "',' or ')'");
    RT_TRY(advance(p));
    rt_tensor *out = &op->tensors[t];
    if (out->n_dims && out->n_dims != st.n_lhs)
        return rt_fail(p->err, RT_ERR_SPEC, name->loc,
                       "wrong number of indices for '%s' (expected %d, got %d)", out->name,
                       out->n_dims, st.n_lhs);
    out->n_dims = st.n_lhs;
    static const char *const ops[] = {"=", "+=!", "+=", "*=!", "max=!", "min=!"}; // ORDER RT_ASSIGN
    int32_t k = 0;
    while (k < RT_ASSIGN_COUNT && !at(p, ops[k]))
        k++;
    if (k == RT_ASSIGN_COUNT)
        return syntax(p, "an assignment operator");
    st.op = (rt_assign)k;
    RT_TRY(advance(p));
    p->mode = RT_PMODE_STMT;
    int32_t h = 0;
    RT_TRY(parse_expr(p, &st.rhs, &h));
    if (at(p, "where")) {
        RT_TRY(advance(p));
        for (;;) {
            RT_TRY(parse_where_item(p));
            bool more;
            RT_TRY(accept(p, ",", &more));
            if (!more)
                break;
        }
    }
    GROW(p, op->stmts, op->n_stmts, p->cap_stmts);
    op->stmts[op->n_stmts++] = st;
    p->st = NULL;
    return RT_OK;
}

static rt_status parse_directive(rt_parser *p) {
    rt_op *op = p->op;
    rt_directive d = {0};
    d.loc = tok(p)->loc;
    RT_TRY(advance(p)); // '@'
    if (tok(p)->kind != RT_TOK_IDENT)
        return syntax(p, "a directive name");
    d.name = tok_name(p, tok(p));
    RT_TRY(advance(p));
    RT_TRY(expect(p, "("));
    int32_t cap = 0;
    while (!at(p, ")")) {
        if (d.n_args) {
            if (!at(p, ","))
                return syntax(p, "',' or ')'");
            RT_TRY(advance(p));
        }
        GROW(p, d.args, d.n_args, cap);
        rt_darg *arg = &d.args[d.n_args];
        arg->loc = tok(p)->loc;
        bool neg = false;
        if (tok(p)->kind == RT_TOK_IDENT) {
            arg->ident = tok_name(p, tok(p));
            RT_TRY(advance(p));
            if (!at(p, "="))
                goto next;
            arg->has_value = true;
            RT_TRY(advance(p));
        }
        RT_TRY(accept(p, "-", &neg));
        if (tok(p)->kind != RT_TOK_INT)
            return syntax(p, "an integer");
        arg->value = neg ? -tok(p)->ival : tok(p)->ival;
        RT_TRY(advance(p));
    next:
        d.n_args++;
    }
    RT_TRY(advance(p));
    GROW(p, op->directives, op->n_directives, p->cap_dirs);
    op->directives[op->n_directives++] = d;
    return RT_OK;
}

// The 'size' lines at the head of a file, into p->op's sizes.
static rt_status parse_sizes(rt_parser *p, const rt_size_binding *set, int32_t n_set) {
    RT_TRY(check_tok(p));
    while (at(p, "size"))
        RT_TRY(parse_size(p));
    RT_TRY(apply_bindings(p, set, n_set, false));
    if (!at(p, "def"))
        return syntax(p, p->op->n_sizes ? "'size' or 'def'" : "'def'");
    return RT_OK;
}

// One 'def' at the current token into p->op (whose sizes are set), up to its closing '}'.
static rt_status parse_def(rt_parser *p, const rt_size_binding *set, int32_t n_set) {
    rt_op *op = p->op;
    op->loc = tok(p)->loc;
    RT_TRY(advance(p));
    if (tok(p)->kind != RT_TOK_IDENT)
        return syntax(p, "an operator name");
    op->name = tok_name(p, tok(p));
    RT_TRY(advance(p));
    RT_TRY(expect(p, "("));
    for (;;) {
        RT_TRY(parse_param(p));
        bool more;
        RT_TRY(accept(p, ",", &more));
        if (!more)
            break;
    }
    if (!at(p, ")"))
        return syntax(p, "',' or ')'");
    RT_TRY(apply_bindings(p, set, n_set, true));
    RT_TRY(advance(p));
    RT_TRY(expect(p, "->"));
    RT_TRY(expect(p, "("));
    for (;;) {
        RT_TRY(parse_output(p));
        bool more;
        RT_TRY(accept(p, ",", &more));
        if (!more)
            break;
    }
    if (!at(p, ")"))
        return syntax(p, "',' or ')'");
    RT_TRY(advance(p));
    RT_TRY(expect(p, "{"));
    while (!at(p, "}")) {
        if (at(p, "@"))
            RT_TRY(parse_directive(p));
        else if (tok(p)->kind == RT_TOK_IDENT)
            RT_TRY(parse_stmt(p));
        else if (tok(p)->kind == RT_TOK_EOF)
            return syntax(p, "'}'");
        else
            return syntax(p, "a statement or '}'");
    }
    if (p->n_pending)
        return rt_fail(p->err, RT_ERR_SPEC, p->pending[0].e->loc, "unknown tensor or function '%s'",
                       p->pending[0].name);
    return advance(p);
}

static rt_status parse_file(rt_parser *p, const rt_size_binding *set, int32_t n_set) {
    RT_TRY(parse_sizes(p, set, n_set));
    RT_TRY(parse_def(p, set, n_set));
    if (tok(p)->kind != RT_TOK_EOF)
        return syntax(p, "end of file");
    return RT_OK;
}

rt_status rt_spec_parse(rt_arena *a, const char *text, const char *path, const rt_size_binding *set,
                        int32_t n_set, rt_op **out, rt_err *err) {
    // The op and every location in it keep the path: an arena copy, so that a caller's buffer
    // may go (bench-model's was a stack array, read after it returned).
    path = rt_arena_strdup(a, path ? path : "<input>");
    if (!path)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_parser p = {.a = a, .err = err};
    p.op = rt_arena_calloc(a, 1, sizeof *p.op);
    if (!p.op || !text)
        return p.op ? rt_fail(err, RT_ERR_IO, rt_loc_make(path, 0, 0), "no text")
                    : rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    p.op->file = path;
    RT_TRY(rt_spec_lex(a, text, path, &p.toks, &p.n_toks, err));
    RT_TRY(parse_file(&p, set, n_set));
    RT_TRY(rt_spec_check(a, p.op, err));
    *out = p.op;
    return RT_OK;
}

// A NUL byte before the end of the file's text is an error at its position.
static rt_status check_text(const char *path, const char *text, size_t len, rt_err *err) {
    size_t nul = strlen(text);
    if (nul == len)
        return RT_OK;
    int32_t line = 1, col = 1;
    for (size_t i = 0; i < nul; i++, col++)
        if (text[i] == '\n')
            line++, col = 0;
    return rt_fail(err, RT_ERR_SYNTAX, rt_loc_make(path, line, col),
                   "unexpected byte 0x00 (expected text)");
}

// A parser for the next def of a layer: a fresh op holding a copy of the file's sizes (a def may
// add sizes of its own: a tree's node count), at the same token.
static rt_status layer_next_parser(const rt_parser *head, rt_parser *p) {
    *p = (rt_parser){.a = head->a,
                     .err = head->err,
                     .toks = head->toks,
                     .n_toks = head->n_toks,
                     .pos = head->pos};
    p->op = rt_arena_calloc(head->a, 1, sizeof *p->op);
    if (!p->op)
        return NOMEM(p);
    *p->op = (rt_op){.file = head->op->file, .n_sizes = head->op->n_sizes};
    if (head->op->n_sizes) {
        p->op->sizes = rt_arena_calloc(head->a, (size_t)head->op->n_sizes, sizeof(rt_size));
        if (!p->op->sizes)
            return NOMEM(p);
        memcpy(p->op->sizes, head->op->sizes, (size_t)head->op->n_sizes * sizeof(rt_size));
    }
    p->cap_sizes = head->op->n_sizes;
    return RT_OK;
}

rt_status rt_spec_parse_layer(rt_arena *a, const char *text, const char *path,
                              const rt_size_binding *set, int32_t n_set, rt_layer **out,
                              rt_err *err) {
    path = rt_arena_strdup(a, path ? path : "<input>"); // kept by the layer (rt_spec_parse)
    if (!path)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_parser head = {.a = a, .err = err};
    rt_layer *l = rt_arena_calloc(a, 1, sizeof *l);
    head.op = rt_arena_calloc(a, 1, sizeof *head.op);
    if (!l || !head.op)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    if (!text)
        return rt_fail(err, RT_ERR_IO, rt_loc_make(path, 0, 0), "no text");
    head.op->file = path;
    l->file = path;
    RT_TRY(rt_spec_lex(a, text, path, &head.toks, &head.n_toks, err));
    RT_TRY(parse_sizes(&head, set, n_set));
    int32_t cap = 0;
    do {
        rt_parser p;
        RT_TRY(layer_next_parser(&head, &p));
        RT_TRY(parse_def(&p, set, n_set));
        head.pos = p.pos;
        // As in a file of one def, a stray token is reported before the def is checked.
        if (!at(&head, "def") && tok(&head)->kind != RT_TOK_EOF)
            return syntax(&head, l->n_ops ? "'def' or end of file" : "end of file");
        RT_TRY(rt_spec_check(a, p.op, err));
        GROW(&head, l->ops, l->n_ops, cap);
        l->ops[l->n_ops++] = p.op;
    } while (at(&head, "def"));
    RT_TRY(rt_spec_layer_link(a, l, err));
    *out = l;
    return RT_OK;
}

rt_status rt_spec_load_layer(rt_arena *a, const char *path, const rt_size_binding *set,
                             int32_t n_set, rt_layer **out, rt_err *err) {
    char *text;
    size_t len;
    RT_TRY(rt_read_file(a, path, &text, &len, err));
    RT_TRY(check_text(path, text, len, err));
    return rt_spec_parse_layer(a, text, path, set, n_set, out, err);
}

rt_status rt_spec_load(rt_arena *a, const char *path, const rt_size_binding *set, int32_t n_set,
                       rt_op **out, rt_err *err) {
    char *text;
    size_t len;
    RT_TRY(rt_read_file(a, path, &text, &len, err));
    RT_TRY(check_text(path, text, len, err));
    return rt_spec_parse(a, text, path, set, n_set, out, err);
}
