// kir.c: construction helpers and the validator of the kernel IR (kir.h). The lowering
// (lower-cpu.c) builds kernels with these; the emitters (emit-c.c, emit-llvm.c) rely on the
// invariants rt_kir_validate checks. Integer constructors fold constants so that dense tensor
// offsets come out as plain affine expressions (m*1024 + k) in every target.
#include "kir.h"

#include <string.h>

// clang-format off
static const char *const rt_kir_type_names[RT_KIR_TYPE_COUNT] = {"i64", "i32", "f32", "f64"};
static const char *const rt_kir_type_ctypes[RT_KIR_TYPE_COUNT] = {
    "int64_t", "int32_t", "float", "double"};
static const char *const rt_kir_bop_names[RT_KIR_BOP_COUNT] = {
    "+", "-", "*", "/", "%", "min", "max", "<", "<=", ">", ">=", "==", "!=", "&&", "||",
    "/", "%"};
static const char *const rt_kir_loop_names[RT_KIR_LOOP_KIND_COUNT] = {
    "serial", "parallel", "vector", "unroll"};
static const char *const rt_kir_tree_field_names[RT_KIR_TREE_FIELD_COUNT] = {
    "child", "order", "level_begin", "n_levels"};
// clang-format on
_Static_assert(sizeof rt_kir_type_names / sizeof *rt_kir_type_names == RT_KIR_TYPE_COUNT,
               "ORDER RT_KIR_TYPE");
_Static_assert(sizeof rt_kir_tree_field_names / sizeof *rt_kir_tree_field_names ==
                   RT_KIR_TREE_FIELD_COUNT,
               "ORDER RT_KIR_TREE_FIELD");
_Static_assert(sizeof rt_kir_bop_names / sizeof *rt_kir_bop_names == RT_KIR_BOP_COUNT,
               "ORDER RT_KIR_BOP");

const char *rt_kir_type_name(rt_kir_type t) {
    return (unsigned)t < RT_KIR_TYPE_COUNT ? rt_kir_type_names[t] : "?";
}
const char *rt_kir_type_ctype(rt_kir_type t) {
    return (unsigned)t < RT_KIR_TYPE_COUNT ? rt_kir_type_ctypes[t] : "?";
}
const char *rt_kir_bop_name(rt_kir_bop op) {
    return (unsigned)op < RT_KIR_BOP_COUNT ? rt_kir_bop_names[op] : "?";
}
const char *rt_kir_tree_field_name(rt_kir_tree_field f) {
    return (unsigned)f < RT_KIR_TREE_FIELD_COUNT ? rt_kir_tree_field_names[f] : "?";
}
const char *rt_kir_loop_kind_name(rt_kir_loop_kind k) {
    return (unsigned)k < RT_KIR_LOOP_KIND_COUNT ? rt_kir_loop_names[k] : "?";
}
bool rt_kir_type_is_float(rt_kir_type t) {
    return t == RT_KIR_F32 || t == RT_KIR_F64;
}

rt_kir_kernel *rt_kir_kernel_new(rt_arena *a, const char *name) {
    rt_kir_kernel *k = rt_arena_calloc(a, 1, sizeof *k);
    if (!k)
        return NULL;
    k->name = rt_arena_strdup(a, name);
    if (!k->name || rt_kir_add_buf(a, k, "scratch", RT_KIR_BUF_SCRATCH, RT_KIR_F32, -1, -1) != 0)
        return NULL;
    return k;
}

// Grows an arena array of elem_bytes elements to hold n + 1.
static bool rt_kir_grow(rt_arena *a, void **items, int32_t n, int32_t *cap, size_t elem_bytes) {
    if (n < *cap)
        return true;
    int32_t ncap = *cap ? *cap * 2 : 8;
    void *p = rt_arena_calloc(a, (size_t)ncap, elem_bytes);
    if (!p)
        return false;
    if (*items)
        memcpy(p, *items, (size_t)n * elem_bytes);
    *items = p;
    *cap = ncap;
    return true;
}

int32_t rt_kir_add_buf(rt_arena *a, rt_kir_kernel *k, const char *name, rt_kir_buf_role role,
                       rt_kir_type type, int32_t tensor, int32_t dim) {
    if (!rt_kir_grow(a, (void **)&k->bufs, k->n_bufs, &k->cap_bufs, sizeof *k->bufs))
        return -1;
    rt_kir_buf *b = &k->bufs[k->n_bufs];
    b->name = rt_arena_strdup(a, name);
    if (!b->name)
        return -1;
    b->role = role;
    b->type = type;
    b->tensor = tensor;
    b->dim = dim;
    return k->n_bufs++;
}

rt_kir_phase *rt_kir_add_phase(rt_arena *a, rt_kir_kernel *k, const char *what, int64_t n_items) {
    if (!rt_kir_grow(a, (void **)&k->phases, k->n_phases, &k->cap_phases, sizeof *k->phases))
        return NULL;
    rt_kir_phase *p = &k->phases[k->n_phases];
    memset(p, 0, sizeof *p);
    p->name = rt_arena_printf(a, "p%d", (int)k->n_phases);
    p->what = rt_arena_strdup(a, what);
    p->n_items = n_items < 1 ? 1 : n_items;
    if (!p->name || !p->what)
        return NULL;
    p->item_var = rt_kir_add_var(a, p, "item", RT_KIR_I64);
    if (p->item_var < 0)
        return NULL;
    p->levels.level_var = -1;
    k->n_phases++;
    return p;
}

int32_t rt_kir_add_var(rt_arena *a, rt_kir_phase *p, const char *name, rt_kir_type type) {
    if (!rt_kir_grow(a, (void **)&p->vars, p->n_vars, &p->cap_vars, sizeof *p->vars))
        return -1;
    // Names are made unique inside the phase by a numeric suffix when needed.
    const char *base = name;
    char *unique = rt_arena_strdup(a, base);
    for (int32_t n = 1, clash = 1; unique && clash; n++) {
        clash = 0;
        for (int32_t i = 0; i < p->n_vars; i++)
            if (strcmp(p->vars[i].name, unique) == 0)
                clash = 1;
        if (clash)
            unique = rt_arena_printf(a, "%s_%d", base, (int)n);
    }
    if (!unique)
        return -1;
    p->vars[p->n_vars].name = unique;
    p->vars[p->n_vars].type = type;
    return p->n_vars++;
}

static rt_kir_expr *rt_kir_new(rt_arena *a, rt_kir_ekind kind, rt_kir_type type) {
    rt_kir_expr *e = rt_arena_calloc(a, 1, sizeof *e);
    if (e) {
        e->kind = kind;
        e->type = type;
    }
    return e;
}

rt_kir_expr *rt_kir_int(rt_arena *a, int64_t v) {
    rt_kir_expr *e = rt_kir_new(a, RT_KIR_E_INT, RT_KIR_I64);
    if (e)
        e->ival = v;
    return e;
}

rt_kir_expr *rt_kir_flt(rt_arena *a, rt_kir_type t, double v) {
    rt_kir_expr *e = rt_kir_new(a, RT_KIR_E_FLT, t);
    if (e)
        e->fval = v;
    return e;
}

rt_kir_expr *rt_kir_var_ref(rt_arena *a, const rt_kir_phase *p, int32_t var) {
    if (var < 0 || var >= p->n_vars)
        return NULL;
    rt_kir_type t = p->vars[var].type;
    rt_kir_expr *e = rt_kir_new(a, t == RT_KIR_I64 ? RT_KIR_E_VAR : RT_KIR_E_FVAR, t);
    if (e)
        e->var = var;
    return e;
}

rt_kir_expr *rt_kir_load(rt_arena *a, const rt_kir_kernel *k, int32_t buf, rt_kir_expr *index) {
    if (!index || buf < 0 || buf >= k->n_bufs)
        return NULL;
    rt_kir_expr *e = rt_kir_new(a, RT_KIR_E_LOAD, k->bufs[buf].type);
    if (e) {
        e->buf = buf;
        e->args[0] = index;
    }
    return e;
}

bool rt_kir_is_int(const rt_kir_expr *e, int64_t *out) {
    if (e && e->kind == RT_KIR_E_INT) {
        if (out)
            *out = e->ival;
        return true;
    }
    return false;
}

static bool rt_kir_is_cmp(rt_kir_bop op) {
    return op >= RT_KIR_LT && op <= RT_KIR_OR;
}

rt_kir_expr *rt_kir_bin(rt_arena *a, rt_kir_bop op, rt_kir_expr *x, rt_kir_expr *y) {
    if (!x || !y)
        return NULL;
    int64_t cx = 0, cy = 0;
    bool kx = rt_kir_is_int(x, &cx), ky = rt_kir_is_int(y, &cy);
    if (x->type == RT_KIR_I64 && y->type == RT_KIR_I64) {
        if (kx && ky) {
            switch (op) {
            case RT_KIR_ADD:
                return rt_kir_int(a, (int64_t)((uint64_t)cx + (uint64_t)cy));
            case RT_KIR_SUB:
                return rt_kir_int(a, (int64_t)((uint64_t)cx - (uint64_t)cy));
            case RT_KIR_MUL:
                return rt_kir_int(a, (int64_t)((uint64_t)cx * (uint64_t)cy));
            case RT_KIR_DIV:
                if (cy > 0)
                    return rt_kir_int(a, rt_floor_div(cx, cy));
                break;
            case RT_KIR_MOD:
                if (cy > 0)
                    return rt_kir_int(a, rt_floor_mod(cx, cy));
                break;
            case RT_KIR_MIN:
                return rt_kir_int(a, cx < cy ? cx : cy);
            case RT_KIR_MAX:
                return rt_kir_int(a, cx > cy ? cx : cy);
            case RT_KIR_LT:
                return rt_kir_int(a, cx < cy);
            case RT_KIR_LE:
                return rt_kir_int(a, cx <= cy);
            case RT_KIR_GT:
                return rt_kir_int(a, cx > cy);
            case RT_KIR_GE:
                return rt_kir_int(a, cx >= cy);
            case RT_KIR_EQ:
                return rt_kir_int(a, cx == cy);
            case RT_KIR_NE:
                return rt_kir_int(a, cx != cy);
            case RT_KIR_AND:
                return rt_kir_int(a, cx && cy);
            case RT_KIR_OR:
                return rt_kir_int(a, cx || cy);
            default:
                break;
            }
        }
        if (op == RT_KIR_ADD && kx && cx == 0)
            return y;
        if ((op == RT_KIR_ADD || op == RT_KIR_SUB) && ky && cy == 0)
            return x;
        if (op == RT_KIR_MUL && kx && cx == 1)
            return y;
        if ((op == RT_KIR_MUL || op == RT_KIR_DIV) && ky && cy == 1)
            return x;
        if (op == RT_KIR_MUL && ((kx && cx == 0) || (ky && cy == 0)))
            return rt_kir_int(a, 0);
        if (op == RT_KIR_AND && kx && cx != 0)
            return y;
        if (op == RT_KIR_AND && ky && cy != 0)
            return x;
    }
    rt_kir_expr *e = rt_kir_new(a, RT_KIR_E_BIN, rt_kir_is_cmp(op) ? RT_KIR_I64 : x->type);
    if (e) {
        e->bop = op;
        e->args[0] = x;
        e->args[1] = y;
    }
    return e;
}

rt_kir_expr *rt_kir_neg(rt_arena *a, rt_kir_expr *x) {
    if (!x)
        return NULL;
    int64_t c;
    if (rt_kir_is_int(x, &c))
        return rt_kir_int(a, (int64_t)(0 - (uint64_t)c));
    rt_kir_expr *e = rt_kir_new(a, RT_KIR_E_NEG, x->type);
    if (e)
        e->args[0] = x;
    return e;
}

rt_kir_expr *rt_kir_call(rt_arena *a, rt_fn fn, rt_kir_expr *x, rt_kir_expr *y) {
    if (!x || ((fn == RT_FN_MAX || fn == RT_FN_MIN) && !y))
        return NULL;
    if (fn == RT_FN_MAX || fn == RT_FN_MIN)
        return rt_kir_bin(a, fn == RT_FN_MAX ? RT_KIR_MAX : RT_KIR_MIN, x, y);
    rt_kir_expr *e = rt_kir_new(a, RT_KIR_E_CALL, x->type);
    if (e) {
        e->fn = fn;
        e->args[0] = x;
    }
    return e;
}

rt_kir_expr *rt_kir_select(rt_arena *a, rt_kir_expr *c, rt_kir_expr *x, rt_kir_expr *y) {
    if (!c || !x || !y)
        return NULL;
    int64_t k;
    if (rt_kir_is_int(c, &k))
        return k ? x : y;
    rt_kir_expr *e = rt_kir_new(a, RT_KIR_E_SELECT, x->type);
    if (e) {
        e->args[0] = c;
        e->args[1] = x;
        e->args[2] = y;
    }
    return e;
}

rt_kir_expr *rt_kir_cast(rt_arena *a, rt_kir_type t, rt_kir_expr *x) {
    if (!x)
        return NULL;
    if (x->type == t)
        return x;
    if (x->kind == RT_KIR_E_INT && rt_kir_type_is_float(t))
        return rt_kir_flt(a, t, (double)x->ival);
    if (x->kind == RT_KIR_E_FLT && rt_kir_type_is_float(t))
        return rt_kir_flt(a, t, x->fval);
    rt_kir_expr *e = rt_kir_new(a, RT_KIR_E_CAST, t);
    if (e)
        e->args[0] = x;
    return e;
}

rt_kir_node *rt_kir_append(rt_arena *a, rt_kir_block *b, rt_kir_nkind kind) {
    if (!rt_kir_grow(a, (void **)&b->nodes, b->n, &b->cap, sizeof *b->nodes))
        return NULL;
    rt_kir_node *n = rt_arena_calloc(a, 1, sizeof *n);
    if (!n)
        return NULL;
    n->kind = kind;
    b->nodes[b->n++] = n;
    return n;
}

rt_kir_node *rt_kir_loop(rt_arena *a, rt_kir_block *b, int32_t var, rt_kir_expr *lo,
                         rt_kir_expr *hi, rt_kir_loop_kind kind) {
    if (!lo || !hi || var < 0)
        return NULL;
    rt_kir_node *n = rt_kir_append(a, b, RT_KIR_N_LOOP);
    if (n) {
        n->var = var;
        n->lo = lo;
        n->hi = hi;
        n->loop_kind = kind;
    }
    return n;
}

// ---------------------------------------------------------------------------------------------
// Reciprocals of loop-invariant divisors
// ---------------------------------------------------------------------------------------------

typedef struct rt_kir_hoist {
    rt_arena *a;
    rt_kir_kernel *k;
    rt_kir_phase *p;
    bool *var_set;     // [n_vars]: set inside the current vector loop
    bool *buf_set;     // [n_bufs]: stored inside the current vector loop
    rt_kir_block *pre; // FSETs of the reciprocals, run before the loop
    bool oom;
} rt_kir_hoist;

static void rt_kir_mark_sets(rt_kir_hoist *h, const rt_kir_block *b);

static void rt_kir_mark_node(rt_kir_hoist *h, const rt_kir_node *n) {
    switch (n->kind) {
    case RT_KIR_N_LOOP:
    case RT_KIR_N_LET:
    case RT_KIR_N_FSET:
        h->var_set[n->var] = true;
        break;
    case RT_KIR_N_STORE:
        h->buf_set[n->buf] = true;
        break;
    case RT_KIR_N_UKERNEL:
        h->buf_set[n->uk.c_buf] = true;
        h->buf_set[0] = true; // the packed panels live in the scratch
        if (n->uk.epi) {
            h->var_set[n->uk.epi_acc] = h->var_set[n->uk.epi_row] = true;
            h->var_set[n->uk.epi_col] = true;
            rt_kir_mark_sets(h, n->uk.epi);
        }
        break;
    default:
        break;
    }
    rt_kir_mark_sets(h, &n->body);
    rt_kir_mark_sets(h, &n->else_body);
}

static void rt_kir_mark_sets(rt_kir_hoist *h, const rt_kir_block *b) {
    for (int32_t i = 0; i < b->n; i++)
        rt_kir_mark_node(h, b->nodes[i]);
}

static bool rt_kir_invariant(const rt_kir_hoist *h, const rt_kir_expr *e) {
    if (!e)
        return true;
    if ((e->kind == RT_KIR_E_VAR || e->kind == RT_KIR_E_FVAR) && h->var_set[e->var])
        return false;
    if (e->kind == RT_KIR_E_LOAD && h->buf_set[e->buf])
        return false;
    for (int32_t i = 0; i < 3; i++)
        if (!rt_kir_invariant(h, e->args[i]))
            return false;
    return true;
}

// Rewrites the divisions of *ep in place, appending one FSET per hoisted divisor to h->pre.
static void rt_kir_hoist_expr(rt_kir_hoist *h, rt_kir_expr **ep) {
    rt_kir_expr *e = *ep;
    if (!e)
        return;
    for (int32_t i = 0; i < 3; i++)
        rt_kir_hoist_expr(h, &e->args[i]);
    if (e->kind != RT_KIR_E_BIN || e->bop != RT_KIR_DIV || !rt_kir_type_is_float(e->type) ||
        !rt_kir_invariant(h, e->args[1]))
        return;
    int32_t v =
        rt_kir_add_var(h->a, h->p, rt_arena_printf(h->a, "rcp%d", (int)h->p->n_vars), e->type);
    rt_kir_node *set = v >= 0 ? rt_kir_append(h->a, h->pre, RT_KIR_N_FSET) : NULL;
    rt_kir_expr *one = rt_kir_flt(h->a, e->type, 1.0);
    rt_kir_expr *r = one ? rt_kir_bin(h->a, RT_KIR_DIV, one, e->args[1]) : NULL;
    rt_kir_expr *x = e->args[0], *ref = rt_kir_var_ref(h->a, h->p, v);
    rt_kir_expr *mul = ref ? rt_kir_bin(h->a, RT_KIR_MUL, x, ref) : NULL;
    if (!set || !r || !mul) {
        h->oom = true;
        return;
    }
    set->var = v;
    set->value = r;
    *ep = mul;
}

static void rt_kir_hoist_in(rt_kir_hoist *h, rt_kir_block *b) {
    for (int32_t i = 0; i < b->n; i++) {
        rt_kir_node *n = b->nodes[i];
        switch (n->kind) {
        case RT_KIR_N_LET:
        case RT_KIR_N_FSET:
        case RT_KIR_N_STORE:
            rt_kir_hoist_expr(h, &n->value);
            break;
        case RT_KIR_N_IF:
            rt_kir_hoist_expr(h, &n->cond);
            break;
        default:
            break;
        }
        rt_kir_hoist_in(h, &n->body);
        rt_kir_hoist_in(h, &n->else_body);
    }
}

// Walks the block; each vector loop gets the FSETs of its divisors in an IF (lo < hi) placed
// right before it, so that a loop that runs no iteration evaluates no divisor either.
static void rt_kir_hoist_block(rt_kir_hoist *h, rt_kir_block *b) {
    for (int32_t i = 0; i < b->n && !h->oom; i++) {
        rt_kir_node *n = b->nodes[i];
        if (n->kind != RT_KIR_N_LOOP || n->loop_kind != RT_KIR_LOOP_VECTOR) {
            if (n->kind != RT_KIR_N_UKERNEL) {
                rt_kir_hoist_block(h, &n->body);
                rt_kir_hoist_block(h, &n->else_body);
            }
            continue;
        }
        rt_kir_expr *cond = rt_kir_bin(h->a, RT_KIR_LT, n->lo, n->hi);
        int64_t always = 0;
        bool known = cond && rt_kir_is_int(cond, &always);
        if (!cond) {
            h->oom = true;
            return;
        }
        if (known && !always)
            continue; // the loop never runs: its divisions stay as they are
        // Fresh sets per loop: the phase's variables grow with each hoisted reciprocal.
        h->var_set = rt_arena_calloc(h->a, rt_at_least_one((size_t)h->p->n_vars), 1);
        h->buf_set = rt_arena_calloc(h->a, rt_at_least_one((size_t)h->k->n_bufs), 1);
        if (!h->var_set || !h->buf_set) {
            h->oom = true;
            return;
        }
        rt_kir_mark_node(h, n);
        rt_kir_block pre = {0};
        h->pre = &pre;
        rt_kir_hoist_in(h, &n->body);
        if (pre.n == 0 || h->oom)
            continue;
        rt_kir_node *guard = known ? NULL : rt_arena_calloc(h->a, 1, sizeof *guard);
        if (!known && !guard) {
            h->oom = true;
            return;
        }
        rt_kir_node **add = known ? pre.nodes : &guard;
        int32_t n_add = known ? pre.n : 1;
        if (guard) {
            guard->kind = RT_KIR_N_IF;
            guard->cond = cond;
            guard->body = pre;
        }
        for (int32_t j = 0; j < n_add; j++)
            if (!rt_kir_grow(h->a, (void **)&b->nodes, b->n + j, &b->cap, sizeof *b->nodes)) {
                h->oom = true;
                return;
            }
        memmove(&b->nodes[i + n_add], &b->nodes[i], (size_t)(b->n - i) * sizeof *b->nodes);
        memcpy(&b->nodes[i], add, (size_t)n_add * sizeof *b->nodes);
        b->n += n_add;
        i += n_add; // past the loop
    }
}

bool rt_kir_hoist_reciprocals(rt_arena *a, rt_kir_kernel *k) {
    for (int32_t pi = 0; pi < k->n_phases; pi++) {
        rt_kir_phase *p = &k->phases[pi];
        rt_kir_hoist h = {.a = a, .k = k, .p = p};
        rt_kir_hoist_block(&h, &p->body);
        if (h.oom)
            return false;
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// Fusion of adjacent vector loops
// ---------------------------------------------------------------------------------------------

// Are x and y the same expression, var vx of x standing for var vy of y?
static bool rt_kir_same(const rt_kir_expr *x, const rt_kir_expr *y, int32_t vx, int32_t vy) {
    if (!x || !y)
        return x == y;
    if (x->kind != y->kind || x->type != y->type)
        return false;
    switch (x->kind) {
    case RT_KIR_E_INT:
        return x->ival == y->ival;
    case RT_KIR_E_FLT:
        return x->fval == y->fval;
    case RT_KIR_E_VAR:
        return x->var == y->var ? x->var != vx && y->var != vy : x->var == vx && y->var == vy;
    case RT_KIR_E_FVAR:
        return x->var == y->var;
    case RT_KIR_E_LOAD:
        if (x->buf != y->buf)
            return false;
        break;
    case RT_KIR_E_BIN:
        if (x->bop != y->bop)
            return false;
        break;
    case RT_KIR_E_CALL:
        if (x->fn != y->fn)
            return false;
        break;
    default:
        break;
    }
    for (int32_t i = 0; i < 3; i++)
        if (!rt_kir_same(x->args[i], y->args[i], vx, vy))
            return false;
    return true;
}

// e rebuilt bottom-up where leaf(a, node, ctx) replaces a node: it returns the node itself to
// keep it (its operands are then visited), a replacement, or NULL when out of memory. Shared
// where nothing changes; NULL when out of memory.
typedef rt_kir_expr *(*rt_kir_leaf_fn)(rt_arena *a, rt_kir_expr *e, const void *ctx);
static rt_kir_expr *rt_kir_subst(rt_arena *a, rt_kir_expr *e, rt_kir_leaf_fn leaf,
                                 const void *ctx) {
    if (!e)
        return NULL;
    rt_kir_expr *l = leaf(a, e, ctx);
    if (l != e)
        return l;
    rt_kir_expr *args[3] = {NULL, NULL, NULL};
    bool changed = false;
    for (int32_t i = 0; i < 3; i++) {
        if (!e->args[i])
            continue;
        args[i] = rt_kir_subst(a, e->args[i], leaf, ctx);
        if (!args[i])
            return NULL;
        changed = changed || args[i] != e->args[i];
    }
    if (!changed)
        return e;
    rt_kir_expr *r = rt_arena_alloc(a, sizeof *r);
    if (!r)
        return NULL;
    *r = *e;
    memcpy(r->args, args, sizeof args);
    return r;
}

// A use of var ft[0] as var ft[1].
static rt_kir_expr *rt_kir_rename_leaf(rt_arena *a, rt_kir_expr *e, const void *ctx) {
    const int32_t *ft = ctx;
    if (e->kind != RT_KIR_E_VAR || e->var != ft[0])
        return e;
    rt_kir_expr *r = rt_kir_new(a, RT_KIR_E_VAR, e->type);
    if (r)
        r->var = ft[1];
    return r;
}

// e with var `from` read as var `to` (shared where nothing changes); NULL when out of memory.
static rt_kir_expr *rt_kir_rename(rt_arena *a, rt_kir_expr *e, int32_t from, int32_t to) {
    int32_t ft[2] = {from, to};
    return rt_kir_subst(a, e, rt_kir_rename_leaf, ft);
}

// What a loop body or a run of nodes reads and writes: vars set (LET, FSET), buffers stored,
// and whether it is flat (only LET, FSET and plain STORE nodes).
typedef struct rt_kir_rw {
    bool *var_set, *var_read, *buf_set, *buf_read;
    bool flat;
} rt_kir_rw;

static void rt_kir_rw_expr(rt_kir_rw *rw, const rt_kir_expr *e) {
    if (!e)
        return;
    if (e->kind == RT_KIR_E_VAR || e->kind == RT_KIR_E_FVAR)
        rw->var_read[e->var] = true;
    if (e->kind == RT_KIR_E_LOAD)
        rw->buf_read[e->buf] = true;
    for (int32_t i = 0; i < 3; i++)
        rt_kir_rw_expr(rw, e->args[i]);
}

static void rt_kir_rw_node(rt_kir_rw *rw, const rt_kir_node *n) {
    switch (n->kind) {
    case RT_KIR_N_LET:
    case RT_KIR_N_FSET:
        rw->var_set[n->var] = true;
        rt_kir_rw_expr(rw, n->value);
        return;
    case RT_KIR_N_STORE:
        rw->buf_set[n->buf] = true;
        rt_kir_rw_expr(rw, n->index);
        rt_kir_rw_expr(rw, n->value);
        rw->flat = rw->flat && !n->stream;
        return;
    default:
        rw->flat = false;
        return;
    }
}

static bool rt_kir_rw_new(rt_arena *a, const rt_kir_kernel *k, const rt_kir_phase *p,
                          rt_kir_rw *rw) {
    size_t nv = rt_at_least_one((size_t)p->n_vars), nb = rt_at_least_one((size_t)k->n_bufs);
    rw->var_set = rt_arena_calloc(a, nv, 1);
    rw->var_read = rt_arena_calloc(a, nv, 1);
    rw->buf_set = rt_arena_calloc(a, nb, 1);
    rw->buf_read = rt_arena_calloc(a, nb, 1);
    rw->flat = true;
    return rw->var_set && rw->var_read && rw->buf_set && rw->buf_read;
}

// Every load of buf in e indexed as the store st of loop var va (e's loop var vb)?
static bool rt_kir_loads_as(const rt_kir_expr *e, int32_t buf, const rt_kir_node *st, int32_t va,
                            int32_t vb) {
    if (!e)
        return true;
    if (e->kind == RT_KIR_E_LOAD && e->buf == buf && !rt_kir_same(st->index, e->args[0], va, vb))
        return false;
    for (int32_t i = 0; i < 3; i++)
        if (!rt_kir_loads_as(e->args[i], buf, st, va, vb))
            return false;
    return true;
}

// Can vector loop B (after the nodes mid[0..n_mid)) join vector loop A? Both flat over the same
// range; the nodes between set only vars that neither loop uses and read nothing A sets or
// stores (they move before A); B reads what A stores only at the element A stored in the same
// iteration and stores nothing A touches; neither reads a var the other sets.
static bool rt_kir_can_fuse(rt_arena *a, const rt_kir_kernel *k, const rt_kir_phase *p,
                            const rt_kir_node *A, rt_kir_node *const *mid, int32_t n_mid,
                            const rt_kir_node *B) {
    if (B->kind != RT_KIR_N_LOOP || B->loop_kind != RT_KIR_LOOP_VECTOR ||
        !rt_kir_same(A->lo, B->lo, -1, -1) || !rt_kir_same(A->hi, B->hi, -1, -1))
        return false;
    rt_kir_rw ra, rb, rm, bounds;
    if (!rt_kir_rw_new(a, k, p, &ra) || !rt_kir_rw_new(a, k, p, &rb) ||
        !rt_kir_rw_new(a, k, p, &rm) || !rt_kir_rw_new(a, k, p, &bounds))
        return false;
    for (int32_t i = 0; i < A->body.n; i++)
        rt_kir_rw_node(&ra, A->body.nodes[i]);
    for (int32_t i = 0; i < B->body.n; i++)
        rt_kir_rw_node(&rb, B->body.nodes[i]);
    for (int32_t i = 0; i < n_mid; i++) {
        if (mid[i]->kind != RT_KIR_N_LET && mid[i]->kind != RT_KIR_N_FSET)
            return false;
        rt_kir_rw_node(&rm, mid[i]);
    }
    // B's bounds, the same expressions as A's, are evaluated after A and the nodes between.
    rt_kir_rw_expr(&bounds, A->lo);
    rt_kir_rw_expr(&bounds, A->hi);
    if (!ra.flat || !rb.flat)
        return false;
    for (int32_t v = 0; v < p->n_vars; v++) {
        bool a_set = ra.var_set[v] && v != A->var, b_set = rb.var_set[v] && v != B->var;
        if (bounds.var_read[v] && (ra.var_set[v] || rm.var_set[v]))
            return false;
        if ((a_set && (rb.var_read[v] || b_set || rm.var_read[v] || rm.var_set[v])) ||
            (b_set && ra.var_read[v]) ||
            (rm.var_set[v] && (ra.var_read[v] || v == A->var || v == B->var)) ||
            (rm.var_read[v] && v == A->var))
            return false;
    }
    for (int32_t bf = 0; bf < k->n_bufs; bf++) {
        if ((rb.buf_set[bf] && (ra.buf_set[bf] || ra.buf_read[bf])) ||
            (bounds.buf_read[bf] && ra.buf_set[bf]))
            return false;
        if (rm.buf_read[bf] && ra.buf_set[bf])
            return false;
        if (!ra.buf_set[bf] || !rb.buf_read[bf])
            continue;
        // B reads what A stores: one store in A, every load in B at the same element.
        const rt_kir_node *st = NULL;
        for (int32_t i = 0; i < A->body.n; i++) {
            const rt_kir_node *n = A->body.nodes[i];
            if (n->kind == RT_KIR_N_STORE && n->buf == bf) {
                if (st)
                    return false;
                st = n;
            }
        }
        for (int32_t i = 0; i < B->body.n; i++) {
            const rt_kir_node *n = B->body.nodes[i];
            if (!rt_kir_loads_as(n->value, bf, st, A->var, B->var) ||
                (n->kind == RT_KIR_N_STORE && !rt_kir_loads_as(n->index, bf, st, A->var, B->var)))
                return false;
        }
    }
    return true;
}

typedef struct rt_kir_fwd {
    int32_t buf;
    rt_kir_expr *ref;
} rt_kir_fwd;

static rt_kir_expr *rt_kir_forward_leaf(rt_arena *a, rt_kir_expr *e, const void *ctx) {
    (void)a;
    const rt_kir_fwd *f = ctx;
    return e->kind == RT_KIR_E_LOAD && e->buf == f->buf ? f->ref : e;
}

// e with every load of buf replaced by ref (shared where nothing changes); NULL when out of
// memory.
static rt_kir_expr *rt_kir_forward(rt_arena *a, rt_kir_expr *e, int32_t buf, rt_kir_expr *ref) {
    rt_kir_fwd f = {buf, ref};
    return rt_kir_subst(a, e, rt_kir_forward_leaf, &f);
}

static bool rt_kir_loads_buf(const rt_kir_expr *e, int32_t buf) {
    if (!e)
        return false;
    if (e->kind == RT_KIR_E_LOAD && e->buf == buf)
        return true;
    for (int32_t i = 0; i < 3; i++)
        if (rt_kir_loads_buf(e->args[i], buf))
            return true;
    return false;
}

// Loop A is about to take in B's body, which loads what A stores at the element A stores
// (rt_kir_can_fuse): the stored value goes to a float var set before the store, and *ref
// reads it, for B's loads to be replaced with (rt_kir_forward). Without it the loads stay
// after the store, and where the two index expressions are not provably equal (ragged rows:
// each reloads its row's start) the loop vectorizer checks at run time that they do not
// overlap, finds them equal and runs the fused loop scalar. *ref is NULL where A does not
// store buf in its first n_a nodes (nothing to forward); false when out of memory.
static bool rt_kir_forward_store(rt_arena *a, const rt_kir_kernel *k, rt_kir_phase *p,
                                 rt_kir_node *A, int32_t n_a, int32_t buf, rt_kir_expr **ref) {
    *ref = NULL;
    for (int32_t i = 0; i < n_a; i++) {
        rt_kir_node *st = A->body.nodes[i];
        if (st->kind != RT_KIR_N_STORE || st->buf != buf)
            continue;
        int32_t v = rt_kir_add_var(a, p, "fwd", k->bufs[buf].type);
        rt_kir_node *set = v >= 0 ? rt_kir_append(a, &A->body, RT_KIR_N_FSET) : NULL;
        *ref = set ? rt_kir_var_ref(a, p, v) : NULL;
        if (!*ref)
            return false;
        set->var = v;
        set->value = st->value;
        st->value = *ref;
        memmove(&A->body.nodes[i + 1], &A->body.nodes[i],
                (size_t)(A->body.n - 1 - i) * sizeof *A->body.nodes);
        A->body.nodes[i] = set;
        return true;
    }
    return true;
}

static bool rt_kir_fuse_block(rt_arena *a, const rt_kir_kernel *k, rt_kir_phase *p,
                              rt_kir_block *b) {
    for (int32_t i = 0; i < b->n; i++) {
        rt_kir_node *A = b->nodes[i];
        if (A->kind != RT_KIR_N_LOOP || A->loop_kind != RT_KIR_LOOP_VECTOR) {
            if (A->kind != RT_KIR_N_UKERNEL && (!rt_kir_fuse_block(a, k, p, &A->body) ||
                                                !rt_kir_fuse_block(a, k, p, &A->else_body)))
                return false;
            continue;
        }
        for (;;) {
            int32_t j = i + 1;
            while (j < b->n &&
                   (b->nodes[j]->kind == RT_KIR_N_LET || b->nodes[j]->kind == RT_KIR_N_FSET))
                j++;
            if (j >= b->n || !rt_kir_can_fuse(a, k, p, A, &b->nodes[i + 1], j - i - 1, b->nodes[j]))
                break;
            const rt_kir_node *B = b->nodes[j];
            int32_t n_a = A->body.n;
            for (int32_t q = 0; q < B->body.n; q++) {
                const rt_kir_node *n = B->body.nodes[q];
                rt_kir_node *c = rt_kir_append(a, &A->body, n->kind);
                if (!c)
                    return false;
                *c = *n;
                c->value = rt_kir_rename(a, n->value, B->var, A->var);
                if (n->kind == RT_KIR_N_STORE)
                    c->index = rt_kir_rename(a, n->index, B->var, A->var);
                if (!c->value || !c->index != !n->index)
                    return false;
            }
            // B's loads of what A stores read the stored value (B's own stores go to other
            // buffers: rt_kir_can_fuse).
            for (int32_t bf = 0, ins = 0; bf < k->n_bufs; bf++) {
                bool loaded = false;
                for (int32_t q = n_a + ins; q < A->body.n; q++)
                    loaded = loaded || rt_kir_loads_buf(A->body.nodes[q]->value, bf) ||
                             rt_kir_loads_buf(A->body.nodes[q]->index, bf);
                rt_kir_expr *ref = NULL;
                if (loaded && !rt_kir_forward_store(a, k, p, A, n_a + ins, bf, &ref))
                    return false;
                ins += ref != NULL;
                for (int32_t q = n_a + ins; ref && q < A->body.n; q++) {
                    rt_kir_node *c = A->body.nodes[q];
                    c->value = rt_kir_forward(a, c->value, bf, ref);
                    if (c->kind == RT_KIR_N_STORE)
                        c->index = rt_kir_forward(a, c->index, bf, ref);
                    if (!c->value || (c->kind == RT_KIR_N_STORE && !c->index))
                        return false;
                }
            }
            // The nodes between move before A, which takes B's place; B goes.
            int32_t n_mid = j - i - 1;
            memmove(&b->nodes[i], &b->nodes[i + 1], (size_t)n_mid * sizeof *b->nodes);
            b->nodes[j - 1] = A;
            memmove(&b->nodes[j], &b->nodes[j + 1], (size_t)(b->n - j - 1) * sizeof *b->nodes);
            b->n--;
            i = j - 1;
        }
    }
    return true;
}

bool rt_kir_fuse_loops(rt_arena *a, rt_kir_kernel *k) {
    for (int32_t pi = 0; pi < k->n_phases; pi++)
        if (!rt_kir_fuse_block(a, k, &k->phases[pi], &k->phases[pi].body))
            return false;
    return true;
}

// ---------------------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------------------

typedef struct rt_kir_check {
    const rt_kir_kernel *k;
    const rt_kir_phase *p;
    rt_err *err;
} rt_kir_check;

static rt_status rt_kir_bad(rt_kir_check *c, const char *what) {
    return rt_fail(c->err, RT_ERR_BACKEND, RT_NOLOC, "kernel %s, phase %s: %s", c->k->name,
                   c->p->name, what);
}

static rt_status rt_kir_check_expr(rt_kir_check *c, const rt_kir_expr *e, bool want_int) {
    if (!e)
        return rt_kir_bad(c, "missing expression");
    if (want_int && e->type != RT_KIR_I64)
        return rt_kir_bad(c, "expected an i64 expression");
    switch (e->kind) {
    case RT_KIR_E_INT:
    case RT_KIR_E_FLT:
        return RT_OK;
    case RT_KIR_E_VAR:
    case RT_KIR_E_FVAR:
        if (e->var < 0 || e->var >= c->p->n_vars || c->p->vars[e->var].type != e->type)
            return rt_kir_bad(c, "variable out of range or of another type");
        return RT_OK;
    case RT_KIR_E_LOAD:
        if (e->buf < 0 || e->buf >= c->k->n_bufs || c->k->bufs[e->buf].type != e->type)
            return rt_kir_bad(c, "load from an unknown buffer");
        return rt_kir_check_expr(c, e->args[0], true);
    case RT_KIR_E_NEG:
    case RT_KIR_E_CALL:
        if (e->kind == RT_KIR_E_CALL && !rt_kir_type_is_float(e->type))
            return rt_kir_bad(c, "math function on an integer");
        return rt_kir_check_expr(c, e->args[0], false);
    case RT_KIR_E_CAST:
        return rt_kir_check_expr(c, e->args[0], false);
    case RT_KIR_E_BIN:
        RT_TRY(rt_kir_check_expr(c, e->args[0], false));
        RT_TRY(rt_kir_check_expr(c, e->args[1], false));
        if (e->args[0]->type != e->args[1]->type)
            return rt_kir_bad(c, "binary operands of different types");
        if ((e->bop == RT_KIR_AND || e->bop == RT_KIR_OR) && e->args[0]->type != RT_KIR_I64)
            return rt_kir_bad(c, "logical operator on floats");
        return RT_OK;
    case RT_KIR_E_SELECT:
        RT_TRY(rt_kir_check_expr(c, e->args[0], true));
        RT_TRY(rt_kir_check_expr(c, e->args[1], false));
        RT_TRY(rt_kir_check_expr(c, e->args[2], false));
        if (e->args[1]->type != e->type || e->args[2]->type != e->type)
            return rt_kir_bad(c, "select arms of different types");
        return RT_OK;
    default:
        return rt_kir_bad(c, "unknown expression kind");
    }
}

static rt_status rt_kir_check_block(rt_kir_check *c, const rt_kir_block *b);

static rt_status rt_kir_check_node(rt_kir_check *c, const rt_kir_node *n) {
    const rt_kir_phase *p = c->p;
    switch (n->kind) {
    case RT_KIR_N_LOOP:
        if (n->var < 0 || n->var >= p->n_vars || p->vars[n->var].type != RT_KIR_I64)
            return rt_kir_bad(c, "loop over a non-integer variable");
        RT_TRY(rt_kir_check_expr(c, n->lo, true));
        RT_TRY(rt_kir_check_expr(c, n->hi, true));
        return rt_kir_check_block(c, &n->body);
    case RT_KIR_N_LET:
    case RT_KIR_N_FSET:
        if (n->var < 0 || n->var >= p->n_vars)
            return rt_kir_bad(c, "assignment to an unknown variable");
        RT_TRY(rt_kir_check_expr(c, n->value, false));
        if (n->value->type != p->vars[n->var].type)
            return rt_kir_bad(c, "assignment of another type");
        return RT_OK;
    case RT_KIR_N_STORE:
        if (n->buf < 0 || n->buf >= c->k->n_bufs)
            return rt_kir_bad(c, "store to an unknown buffer");
        RT_TRY(rt_kir_check_expr(c, n->index, true));
        RT_TRY(rt_kir_check_expr(c, n->value, false));
        if (n->value->type != c->k->bufs[n->buf].type)
            return rt_kir_bad(c, "store of another type than the buffer's");
        if (n->stream && c->k->bufs[n->buf].type != RT_KIR_F32)
            return rt_kir_bad(c, "streaming store to a buffer that is not f32");
        return RT_OK;
    case RT_KIR_N_PREFETCH:
        if (n->buf < 0 || n->buf >= c->k->n_bufs)
            return rt_kir_bad(c, "prefetch of an unknown buffer");
        return rt_kir_check_expr(c, n->index, true);
    case RT_KIR_N_MOVE4:
        for (int32_t i = 0; i < 2; i++) {
            int32_t bf = i ? n->src_buf : n->buf;
            int64_t st = i ? n->src_stride : n->stride;
            if (bf < 0 || bf >= c->k->n_bufs || c->k->bufs[bf].type != RT_KIR_F32 || st < 1)
                return rt_kir_bad(c, "4-element move between buffers that are not f32");
            if (st == 1 && c->k->bufs[bf].role == RT_KIR_BUF_SHARED && !c->k->bufs[bf].align16)
                return rt_kir_bad(c, "128-bit access to a shared array not 16-byte aligned");
        }
        RT_TRY(rt_kir_check_expr(c, n->index, true));
        return rt_kir_check_expr(c, n->src_index, true);
    case RT_KIR_N_IF:
        RT_TRY(rt_kir_check_expr(c, n->cond, true));
        RT_TRY(rt_kir_check_block(c, &n->body));
        return rt_kir_check_block(c, &n->else_body);
    case RT_KIR_N_COPY: {
        const rt_kir_tpack *t = n->tpack;
        int32_t nb = c->k->n_bufs;
        if (t && (t->src < 0 || t->src >= nb || t->dst < 0 || t->dst >= nb ||
                  c->k->bufs[t->src].type != RT_KIR_F32 || c->k->bufs[t->dst].type != RT_KIR_F32 ||
                  !t->base || !t->s_row || !t->rows || !t->kcur || !t->dst0 || t->dst_ld < 16 ||
                  t->dst_ld % 16 != 0))
            return rt_kir_bad(c, "transposing pack (expected two f32 buffers, its five "
                                 "expressions and a row step of whole 16-float rows)");
        return rt_kir_check_block(c, &n->body);
    }
    case RT_KIR_N_UKERNEL: {
        const rt_kir_ukernel *u = &n->uk;
        bool vl_ok = u->vl >= 1 && u->vl <= 64 && (u->vl & (u->vl - 1)) == 0;
        if (!vl_ok || u->mr < 1 || u->nr < u->vl || u->nr % u->vl != 0 ||
            u->nr / u->vl > RT_KIR_UK_MAX_NV || u->mr * (u->nr / u->vl) > RT_KIR_UK_MAX_ACC)
            return rt_kir_bad(c, "micro-kernel shape (expected vl a power of two, mr >= 1, nr a "
                                 "multiple of vl, at most 4 B vectors and 32 accumulators)");
        if (u->b_sub != 0 && (u->b_sub < u->vl || u->b_sub % u->vl != 0 || u->nr % u->b_sub != 0))
            return rt_kir_bad(c, "micro-kernel B sub-panel width (expected 0, or a multiple of vl "
                                 "that divides nr)");
        if (u->c_buf < 0 || u->c_buf >= c->k->n_bufs || c->k->bufs[u->c_buf].type != RT_KIR_F32)
            return rt_kir_bad(c, "micro-kernel output is not an f32 buffer");
        if (u->a_ld < 0 || (rt_kir_uk_a_in_place(u) && (u->a_buf < 1 || u->a_buf >= c->k->n_bufs ||
                                                        c->k->bufs[u->a_buf].type != RT_KIR_F32)))
            return rt_kir_bad(c, "micro-kernel A read in place is not an f32 data buffer");
        if (u->a_ld_rt)
            RT_TRY(rt_kir_check_expr(c, u->a_ld_rt, true));
        if (u->a_pf_next) {
            if (!rt_kir_uk_a_in_place(u))
                return rt_kir_bad(c, "micro-kernel prefetch of the next rows of an A not in place");
            RT_TRY(rt_kir_check_expr(c, u->a_pf_next, true));
        }
        if (u->b_ld < 0 ||
            (rt_kir_uk_b_in_place(u) && (u->b_buf < 1 || u->b_buf >= c->k->n_bufs ||
                                         c->k->bufs[u->b_buf].type != RT_KIR_F32 || u->b_sub != 0)))
            return rt_kir_bad(c, "micro-kernel B read in place is not an f32 data buffer of "
                                 "nr-wide rows");
        RT_TRY(rt_kir_check_expr(c, u->kc, true));
        RT_TRY(rt_kir_check_expr(c, u->a_off, true));
        RT_TRY(rt_kir_check_expr(c, u->b_off, true));
        RT_TRY(rt_kir_check_expr(c, u->c_off, true));
        if (u->ldc_rt)
            RT_TRY(rt_kir_check_expr(c, u->ldc_rt, true));
        RT_TRY(rt_kir_check_expr(c, u->m_valid, true));
        RT_TRY(rt_kir_check_expr(c, u->n_valid, true));
        RT_TRY(rt_kir_check_expr(c, u->accumulate, true));
        if (!u->epi || u->epi->n == 0)
            return RT_OK;
        if (u->epi_acc < 0 || u->epi_acc >= p->n_vars || p->vars[u->epi_acc].type != RT_KIR_F32 ||
            u->epi_row < 0 || u->epi_row >= p->n_vars || p->vars[u->epi_row].type != RT_KIR_I64 ||
            u->epi_col < 0 || u->epi_col >= p->n_vars || p->vars[u->epi_col].type != RT_KIR_I64)
            return rt_kir_bad(c,
                              "micro-kernel epilogue variables (expected f32 acc, i64 row, col)");
        RT_TRY(rt_kir_check_expr(c, u->epi_row0, true));
        RT_TRY(rt_kir_check_expr(c, u->epi_col0, true));
        RT_TRY(rt_kir_check_expr(c, u->epi_last, true));
        if (u->epi_pf_buf >= 0) {
            if (u->epi_pf_buf >= c->k->n_bufs || c->k->bufs[u->epi_pf_buf].role != RT_KIR_BUF_DATA)
                return rt_kir_bad(c, "micro-kernel epilogue prefetch of an unknown buffer");
            RT_TRY(rt_kir_check_expr(c, u->epi_pf_off, true));
        }
        return rt_kir_check_block(c, u->epi);
    }
    case RT_KIR_N_BARRIER:
    case RT_KIR_N_COMMENT:
        return RT_OK;
    default:
        return rt_kir_bad(c, "unknown node kind");
    }
}

static rt_status rt_kir_check_block(rt_kir_check *c, const rt_kir_block *b) {
    for (int32_t i = 0; i < b->n; i++)
        RT_TRY(rt_kir_check_node(c, b->nodes[i]));
    return RT_OK;
}

// A level-by-level phase names TREE buffers of its tree with the right fields, a level range,
// and (GPU phases only) its level variable.
static rt_status rt_kir_check_levels(rt_kir_check *c) {
    const rt_kir_levels *lv = &c->p->levels;
    if (!lv->on)
        return lv->level_var < 0 ? RT_OK : rt_kir_bad(c, "a level variable in a plain phase");
    const rt_kir_kernel *k = c->k;
    int32_t bufs[2] = {lv->begin_buf, lv->count_buf};
    rt_kir_tree_field want[2] = {RT_KIR_TREE_LEVEL_BEGIN, RT_KIR_TREE_N_LEVELS};
    for (int32_t i = 0; i < 2; i++)
        if (bufs[i] < 1 || bufs[i] >= k->n_bufs || k->bufs[bufs[i]].role != RT_KIR_BUF_TREE ||
            k->bufs[bufs[i]].tensor != lv->tree || k->bufs[bufs[i]].dim != (int32_t)want[i] ||
            k->bufs[bufs[i]].type != RT_KIR_I32)
            return rt_kir_bad(c, "level-by-level phase without its tree's level arrays");
    if (lv->first < 0 || (lv->last >= 0 && lv->last <= lv->first))
        return rt_kir_bad(c, "level-by-level phase with an empty level range");
    bool gpu = c->p->threads > 0;
    if (gpu != (lv->level_var >= 0) ||
        (gpu && (lv->level_var >= c->p->n_vars || c->p->vars[lv->level_var].type != RT_KIR_I64)))
        return rt_kir_bad(c, "level variable (expected an i64 var on GPU phases only)");
    return RT_OK;
}

rt_status rt_kir_validate(const rt_kir_kernel *k, rt_err *err) {
    if (!k || k->n_bufs < 1 || k->bufs[0].role != RT_KIR_BUF_SCRATCH)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "kernel without its scratch buffer");
    for (int32_t i = 0; i < k->n_phases; i++) {
        rt_kir_check c = {k, &k->phases[i], err};
        if (k->phases[i].n_items < 1)
            return rt_kir_bad(&c, "phase without work items");
        RT_TRY(rt_kir_check_levels(&c));
        RT_TRY(rt_kir_check_block(&c, &k->phases[i].body));
    }
    return RT_OK;
}

void rt_kir_header_comment(const rt_kir_kernel *k, const char *prefix, rt_buf *b) {
    const char *h = k->header ? k->header : "";
    size_t np = strlen(prefix);
    while (*h) {
        const char *nl = strchr(h, '\n');
        size_t n = nl ? (size_t)(nl - h) : strlen(h);
        rt_buf_putn(b, prefix, n ? np : np - (np > 0 && prefix[np - 1] == ' '));
        rt_buf_putn(b, h, n);
        rt_buf_puts(b, "\n");
        h += n + (nl ? 1 : 0);
    }
}
