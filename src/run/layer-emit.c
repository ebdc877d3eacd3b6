// layer-emit.c: a layer's entry point as C (layer-emit.h). The text has four parts: the
// kernels' declarations, one "rows" function per distinct ragged structure (the prelude's start
// arrays and the element counts of ragged tensors, from the length tensors, as
// rt_layout_compute makes them: layout.h), the element-count helpers of the layer's inputs and
// outputs, and the entry point, which validates the lengths, computes each start array once,
// allocates the intermediates and the defs' temporaries, runs the kernels in file order on one
// args array each (their buffers in the kernel's order, kir.h) and frees what it allocated.
#include "layer-emit.h"
#include "layer.h"
#include "rtgen-int.h"

#include <ctype.h>
#include <string.h>

// One rows function: dims 0..dim of tensor `tensor` of def `op` (the same structure as every
// other user of it: rt_layer_same_structure).
typedef struct rt_lay_rows {
    int32_t op, tensor, dim;
    int32_t prelude; // its start array's number in the prelude (s<N>), -1: only counted
} rt_lay_rows;

typedef struct rt_lay {
    rt_arena *a;
    const rt_layer *l;
    const rt_kir_kernel **k; // [n_ops] the kernels called
    const char *fn;          // entry point's name
    const char **name;       // [n_tensors] the layer tensor's C name
    const char **ctype;      // [n_tensors] its element type in C
    const char *lens_params; // "const int32_t *len, ..." ("void" when none)
    const char *lens_args;   // "len, ..."
    rt_lay_rows *rows;
    int32_t n_rows, n_prelude;
    rt_err *err;
} rt_lay;

static const char *const rt_lay_c_keywords[] = {
    "auto",    "break",  "case",     "char",   "const",    "continue", "default",
    "do",      "double", "else",     "enum",   "extern",   "float",    "for",
    "goto",    "if",     "inline",   "int",    "long",     "register", "restrict",
    "return",  "short",  "signed",   "sizeof", "static",   "struct",   "switch",
    "typedef", "union",  "unsigned", "void",   "volatile", "while",    "args",
    "done",    "rc",     "free",     "malloc", "int64_t",  "int32_t",  "NULL"};

// name as a C identifier of the entry point's scope: a keyword, a name the entry uses itself or
// one starting with rt_ gets a trailing '_'; other characters than [A-Za-z0-9_] become '_'.
static const char *rt_lay_ident(rt_arena *a, const char *name) {
    char *s = rt_arena_printf(a, "%s%s", isdigit((unsigned char)name[0]) ? "_" : "", name);
    if (!s)
        return NULL;
    for (char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_')
            *p = '_';
    bool clash = strncmp(s, "rt_", 3) == 0 || strncmp(s, "tmp_", 4) == 0 ||
                 (s[0] == 's' && isdigit((unsigned char)s[1])) || strncmp(s, "n_", 2) == 0;
    for (size_t i = 0; i < sizeof rt_lay_c_keywords / sizeof *rt_lay_c_keywords; i++)
        clash = clash || strcmp(s, rt_lay_c_keywords[i]) == 0;
    return clash ? rt_arena_printf(a, "%s_", s) : s;
}

// Extent e of def op's tensor as a C int64_t expression of the loop indices i0.. of the outer
// dims, bound sizes and the length tensors' parameters.
static rt_status rt_lay_extent(rt_lay *c, int32_t k, const rt_expr *e, rt_buf *b) {
    const rt_op *op = c->l->ops[k];
    switch (e->kind) {
    case RT_EXPR_NUM:
        if (!e->is_int)
            break;
        rt_buf_printf(b, "%lld", (long long)e->num);
        return RT_OK;
    case RT_EXPR_SIZE:
        if (!op->sizes[e->sym].bound)
            break;
        rt_buf_printf(b, "%lld", (long long)op->sizes[e->sym].value);
        return RT_OK;
    case RT_EXPR_DIMREF:
        rt_buf_printf(b, "i%d", (int)e->dim);
        return RT_OK;
    case RT_EXPR_READ: {
        int32_t i = c->l->tensor_of[k][e->tensor];
        if (i < 0 || !op->tensors[e->tensor].is_length || e->n_args != 1)
            break;
        rt_buf_printf(b, "(int64_t)%s[", c->name[i]);
        RT_TRY(rt_lay_extent(c, k, e->args[0], b));
        rt_buf_puts(b, "]");
        return RT_OK;
    }
    case RT_EXPR_UNARY:
        rt_buf_puts(b, e->uop == RT_UOP_NEG ? "(-" : "(!");
        RT_TRY(rt_lay_extent(c, k, e->args[0], b));
        rt_buf_puts(b, ")");
        return RT_OK;
    case RT_EXPR_BINARY:
    case RT_EXPR_CALL: {
        bool call = e->kind == RT_EXPR_CALL;
        if (call && e->fn != RT_FN_MAX && e->fn != RT_FN_MIN)
            break;
        const char *f = call ? (e->fn == RT_FN_MAX ? "rt_lay_imax" : "rt_lay_imin")
                        : e->bop == RT_BOP_DIV ? "rt_lay_floordiv"
                        : e->bop == RT_BOP_MOD ? "rt_lay_floormod"
                                               : NULL;
        rt_buf_printf(b, "%s(", f ? f : "");
        RT_TRY(rt_lay_extent(c, k, e->args[0], b));
        if (f)
            rt_buf_puts(b, ", ");
        else
            rt_buf_printf(b, " %s ", rt_bop_name(e->bop));
        RT_TRY(rt_lay_extent(c, k, e->args[1], b));
        rt_buf_puts(b, ")");
        return RT_OK;
    }
    case RT_EXPR_COND:
        rt_buf_puts(b, "(");
        for (int32_t j = 0; j < 3; j++) {
            RT_TRY(rt_lay_extent(c, k, e->args[j], b));
            rt_buf_puts(b, j == 0 ? " ? " : j == 1 ? " : " : ")");
        }
        return RT_OK;
    default:
        break;
    }
    return rt_fail(c->err, RT_ERR_BACKEND, e->loc,
                   "this extent cannot be computed in the layer's C entry point");
}

// The rows function of (op k, tensor t, dim d): found among those made, else added.
static rt_status rt_lay_rows_of(rt_lay *c, int32_t k, int32_t t, int32_t d, int32_t *out) {
    const rt_op *op = c->l->ops[k];
    for (int32_t r = 0; r < c->n_rows; r++) {
        const rt_lay_rows *x = &c->rows[r];
        const rt_op *xo = c->l->ops[x->op];
        if (x->dim == d &&
            rt_layer_same_structure(xo, &xo->tensors[x->tensor], op, &op->tensors[t], d)) {
            *out = r;
            return RT_OK;
        }
    }
    c->rows[c->n_rows] = (rt_lay_rows){k, t, d, -1};
    *out = c->n_rows++;
    return RT_OK;
}

// Prints dims of tensor t of op in spec syntax: "(b:B, len(b), 64)".
static void rt_lay_dims(const rt_op *op, const rt_tensor *t, rt_buf *b) {
    rt_buf_puts(b, "(");
    for (int32_t d = 0; d < t->n_dims; d++) {
        rt_buf_printf(b, "%s%s%s", d ? ", " : "", t->dims[d].name ? t->dims[d].name : "",
                      t->dims[d].name ? ":" : "");
        rt_expr_print(op, NULL, t, t->dims[d].extent, b);
    }
    rt_buf_puts(b, ")");
}

// rows function r: the prefixes of dims 0..dim in lexicographic order (layout.h); fills
// s[0..n_prefix] with the start array of dim `dim` when s is not NULL.
static rt_status rt_lay_rows_fn(rt_lay *c, int32_t r, rt_buf *b) {
    const rt_lay_rows *x = &c->rows[r];
    const rt_op *op = c->l->ops[x->op];
    const rt_tensor *t = &op->tensors[x->tensor];
    rt_buf_printf(b, "// dims 0..%d of %s ", (int)x->dim, t->name);
    rt_lay_dims(op, t, b);
    rt_buf_printf(b, " in def %s: returns the rows of dim %d (-1: a negative extent),\n", op->name,
                  (int)x->dim);
    rt_buf_linef(b, 0,
                 "// *n_prefix the rows of dim %d; s[p] (when s is not NULL) is the first "
                 "row of prefix p.",
                 (int)x->dim - 1);
    rt_buf_linef(b, 0, "static int64_t rt_lay_rows%d(%s, int64_t *s, int64_t *n_prefix) {", (int)r,
                 c->lens_params);
    rt_buf_linef(b, 1, "int64_t c = 0, r = 0;");
    for (int32_t d = 0; d < x->dim; d++) {
        rt_buf_printf(b, "%*sfor (int64_t i%d = 0; i%d < ", 4 * (1 + (int)d), "", (int)d, (int)d);
        RT_TRY(rt_lay_extent(c, x->op, t->dims[d].extent, b));
        rt_buf_printf(b, "; i%d++) {\n", (int)d);
    }
    int in = 1 + x->dim;
    rt_buf_printf(b, "%*sint64_t e = ", 4 * in, "");
    RT_TRY(rt_lay_extent(c, x->op, t->dims[x->dim].extent, b));
    rt_buf_puts(b, ";\n");
    rt_buf_linef(b, in, "if (e < 0)");
    rt_buf_linef(b, in + 1, "return -1;");
    rt_buf_linef(b, in, "if (s)");
    rt_buf_linef(b, in + 1, "s[c] = r;");
    rt_buf_linef(b, in, "c++;");
    rt_buf_linef(b, in, "r += e;");
    for (int32_t d = x->dim - 1; d >= 0; d--)
        rt_buf_linef(b, 1 + d, "}");
    rt_buf_linef(b, 1, "if (s)");
    rt_buf_linef(b, 2, "s[c] = r;");
    rt_buf_linef(b, 1, "if (n_prefix)");
    rt_buf_linef(b, 2, "*n_prefix = c;");
    rt_buf_linef(b, 1, "return r;");
    rt_buf_linef(b, 0, "}");
    rt_buf_puts(b, "\n");
    return RT_OK;
}

// The element count of tensor t of def k as a C expression ("rt_lay_rows0(len, NULL, NULL) *
// 64", or a constant), negative when a length is.
static rt_status rt_lay_elems(rt_lay *c, int32_t k, int32_t t, const char **out) {
    const rt_op *op = c->l->ops[k];
    const rt_tensor *tn = &op->tensors[t];
    int32_t last = -1;
    for (int32_t d = 0; d < tn->n_dims; d++)
        if (tn->dims[d].ragged)
            last = d;
    int64_t dense = 1;
    for (int32_t d = last + 1; d < tn->n_dims; d++) {
        int64_t e;
        if (!rt_expr_const_int(op, tn->dims[d].extent, &e))
            return rt_fail(c->err, RT_ERR_BACKEND, tn->dims[d].loc,
                           "this extent cannot be computed in the layer's C entry point");
        dense *= e;
    }
    if (last < 0) {
        *out = rt_arena_printf(c->a, "%lld", (long long)dense);
        return *out ? RT_OK : rt_fail(c->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    }
    int32_t r;
    RT_TRY(rt_lay_rows_of(c, k, t, last, &r));
    *out = dense == 1 ? rt_arena_printf(c->a, "rt_lay_rows%d(%s, NULL, NULL)", (int)r, c->lens_args)
                      : rt_arena_printf(c->a, "rt_lay_rows%d(%s, NULL, NULL) * %lld", (int)r,
                                        c->lens_args, (long long)dense);
    return *out ? RT_OK : rt_fail(c->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
}

// The kernel buffer of k that a kernel reads or writes for layer tensor i: its element type.
static rt_status rt_lay_types(rt_lay *c) {
    const rt_layer *l = c->l;
    for (int32_t k = 0; k < l->n_ops; k++) {
        const rt_kir_kernel *kk = c->k[k];
        for (int32_t j = 1; j < kk->n_bufs; j++) {
            const rt_kir_buf *bf = &kk->bufs[j];
            if (bf->role == RT_KIR_BUF_START)
                continue;
            if (bf->role != RT_KIR_BUF_DATA)
                return rt_fail(c->err, RT_ERR_BACKEND, RT_NOLOC,
                               "def %s: the kernel %s reads a buffer (%s) that the layer's C entry "
                               "point cannot provide",
                               l->ops[k]->name, kk->name, bf->name);
            int32_t i = l->tensor_of[k][bf->tensor];
            const char *ty = rt_kir_type_ctype(bf->type);
            if (i < 0)
                continue;
            if (c->ctype[i] && strcmp(c->ctype[i], ty) != 0)
                return rt_fail(c->err, RT_ERR_BACKEND, RT_NOLOC,
                               "the kernels disagree on the element type of '%s' (%s in def %s, "
                               "%s before)",
                               l->tensors[i].name, ty, l->ops[k]->name, c->ctype[i]);
            c->ctype[i] = ty;
        }
    }
    for (int32_t i = 0; i < l->n_tensors; i++)
        if (!c->ctype[i]) // read by no kernel: its declared type (f32, f64, i32 on a CPU)
            c->ctype[i] =
                l->ops[l->tensors[i].op]->tensors[l->tensors[i].tensor].dtype == RT_DTYPE_I32
                    ? "int32_t"
                : l->ops[l->tensors[i].op]->tensors[l->tensors[i].tensor].dtype == RT_DTYPE_F64
                    ? "double"
                    : "float";
    return RT_OK;
}

static bool rt_lay_is_length(const rt_layer *l, int32_t i) {
    return l->tensors[i].is_input &&
           l->ops[l->tensors[i].op]->tensors[l->tensors[i].tensor].is_length;
}

// Names, the length parameters, the prelude (every START buffer of every kernel).
static rt_status rt_lay_setup(rt_lay *c) {
    const rt_layer *l = c->l;
    RT_ALLOC(c->a, c->name, l->n_tensors, c->err);
    RT_ALLOC(c->a, c->ctype, l->n_tensors, c->err);
    rt_buf p, q;
    rt_buf_init(&p, c->a);
    rt_buf_init(&q, c->a);
    for (int32_t i = 0; i < l->n_tensors; i++) {
        if (!(c->name[i] = rt_lay_ident(c->a, l->tensors[i].name)))
            return rt_fail(c->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        if (rt_lay_is_length(l, i)) {
            rt_buf_printf(&p, "%sconst int32_t *%s", p.len ? ", " : "", c->name[i]);
            rt_buf_printf(&q, "%s%s", q.len ? ", " : "", c->name[i]);
        }
    }
    c->lens_params = p.len ? p.data : "void";
    c->lens_args = q.len ? q.data : "";
    RT_TRY(rt_lay_types(c));
    int32_t cap = 0;
    for (int32_t k = 0; k < l->n_ops; k++)
        cap += (l->ops[k]->n_tensors + 1) * (RT_MAX_DIMS + 1);
    RT_ALLOC(c->a, c->rows, cap, c->err);
    for (int32_t k = 0; k < l->n_ops; k++) {
        const rt_kir_kernel *kk = c->k[k];
        for (int32_t j = 1; j < kk->n_bufs; j++) {
            if (kk->bufs[j].role != RT_KIR_BUF_START)
                continue;
            int32_t r;
            RT_TRY(rt_lay_rows_of(c, k, kk->bufs[j].tensor, kk->bufs[j].dim, &r));
            if (c->rows[r].prelude < 0)
                c->rows[r].prelude = c->n_prelude++;
        }
    }
    return p.oom || q.oom ? rt_fail(c->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory") : RT_OK;
}

// The C name of buffer j of def k's kernel in the entry point.
static const char *rt_lay_arg(rt_lay *c, int32_t k, int32_t j) {
    const rt_kir_buf *bf = &c->k[k]->bufs[j];
    const rt_op *op = c->l->ops[k];
    if (bf->role == RT_KIR_BUF_START) {
        for (int32_t r = 0; r < c->n_rows; r++) {
            const rt_lay_rows *x = &c->rows[r];
            const rt_op *xo = c->l->ops[x->op];
            if (x->prelude >= 0 && x->dim == bf->dim &&
                rt_layer_same_structure(xo, &xo->tensors[x->tensor], op, &op->tensors[bf->tensor],
                                        bf->dim))
                return rt_arena_printf(c->a, "s%d", (int)x->prelude);
        }
        return NULL; // not reached: setup made one for each
    }
    int32_t i = c->l->tensor_of[k][bf->tensor];
    if (i >= 0)
        return c->l->tensors[i].is_input ? rt_arena_printf(c->a, "(void *)%s", c->name[i])
                                         : c->name[i];
    return rt_arena_printf(c->a, "tmp_%s_%s", rt_lay_ident(c->a, op->name),
                           rt_lay_ident(c->a, op->tensors[bf->tensor].name));
}

// One buffer the entry point owns: a start array, an intermediate or a def's temporary.
typedef struct rt_lay_own {
    const char *name, *ctype, *elems; // elems: a C expression (for s<N>: its n_prefix + 1)
} rt_lay_own;

static rt_status rt_lay_owned(rt_lay *c, rt_lay_own **out, int32_t *n_out) {
    const rt_layer *l = c->l;
    int32_t cap = c->n_prelude + l->n_tensors, n = 0;
    for (int32_t k = 0; k < l->n_ops; k++)
        cap += c->k[k]->n_bufs;
    rt_lay_own *o;
    RT_ALLOC(c->a, o, cap, c->err);
    for (int32_t r = 0; r < c->n_rows; r++)
        if (c->rows[r].prelude >= 0)
            o[n++] = (rt_lay_own){rt_arena_printf(c->a, "s%d", (int)c->rows[r].prelude), "int64_t",
                                  rt_arena_printf(c->a, "n_s%d + 1", (int)c->rows[r].prelude)};
    for (int32_t i = 0; i < l->n_tensors; i++) {
        if (l->tensors[i].is_input || l->tensors[i].is_output)
            continue;
        o[n] = (rt_lay_own){c->name[i], c->ctype[i], NULL};
        RT_TRY(rt_lay_elems(c, l->tensors[i].op, l->tensors[i].tensor, &o[n++].elems));
    }
    for (int32_t k = 0; k < l->n_ops; k++)
        for (int32_t j = 1; j < c->k[k]->n_bufs; j++) {
            const rt_kir_buf *bf = &c->k[k]->bufs[j];
            if (bf->role != RT_KIR_BUF_DATA || l->tensor_of[k][bf->tensor] >= 0)
                continue;
            const char *name = rt_lay_arg(c, k, j);
            bool seen = false;
            for (int32_t x = 0; x < n; x++)
                seen = seen || strcmp(o[x].name, name) == 0;
            if (seen) // a second buffer of the same temporary
                continue;
            o[n] = (rt_lay_own){name, rt_kir_type_ctype(bf->type), NULL};
            RT_TRY(rt_lay_elems(c, k, bf->tensor, &o[n++].elems));
        }
    *out = o;
    *n_out = n;
    return RT_OK;
}

// The entry point's parameter list: the layer's inputs in order, then its outputs.
static void rt_lay_params(const rt_lay *c, rt_buf *b) {
    const rt_layer *l = c->l;
    int32_t n = 0;
    for (int32_t pass = 0; pass < 2; pass++)
        for (int32_t i = 0; i < l->n_tensors; i++)
            if (pass == 0 ? l->tensors[i].is_input : l->tensors[i].is_output)
                rt_buf_printf(b, "%s%s%s *%s", n++ ? ", " : "", pass == 0 ? "const " : "",
                              c->ctype[i], c->name[i]);
    if (!n)
        rt_buf_puts(b, "void");
}

// The entry point: lengths checked, counts, allocations, the prelude, the kernels, the frees.
static rt_status rt_lay_entry(rt_lay *c, rt_buf *b) {
    const rt_layer *l = c->l;
    rt_lay_own *o = NULL;
    int32_t n_own = 0;
    RT_TRY(rt_lay_owned(c, &o, &n_own));
    rt_buf_printf(b, "int %s(", c->fn);
    rt_lay_params(c, b);
    rt_buf_puts(b, ") {\n");
    rt_buf_linef(b, 1, "// Every length is >= 0.");
    for (int32_t i = 0; i < l->n_tensors; i++) {
        if (!rt_lay_is_length(l, i))
            continue;
        const char *n;
        RT_TRY(rt_lay_elems(c, l->tensors[i].op, l->tensors[i].tensor, &n));
        rt_buf_linef(b, 1, "for (int64_t i = 0; i < %s; i++)", n);
        rt_buf_linef(b, 2, "if (%s[i] < 0)", c->name[i]);
        rt_buf_linef(b, 3, "return -1;");
    }
    rt_buf_linef(b, 1, "// The element counts of the buffers owned here (negative: an extent is).");
    for (int32_t r = 0; r < c->n_rows; r++)
        if (c->rows[r].prelude >= 0)
            rt_buf_linef(b, 1, "int64_t n_s%d = 0;", (int)c->rows[r].prelude);
    for (int32_t j = c->n_prelude; j < n_own; j++)
        rt_buf_linef(b, 1, "int64_t n_%s = %s;", o[j].name, o[j].elems);
    const char *sep = "    if (";
    for (int32_t r = 0; r < c->n_rows; r++)
        if (c->rows[r].prelude >= 0) {
            rt_buf_printf(b, "%srt_lay_rows%d(%s, NULL, &n_s%d) < 0", sep, (int)r, c->lens_args,
                          (int)c->rows[r].prelude);
            sep = " ||\n        ";
        }
    for (int32_t j = c->n_prelude; j < n_own; j++) {
        rt_buf_printf(b, "%sn_%s < 0", sep, o[j].name);
        sep = " ||\n        ";
    }
    if (n_own)
        rt_buf_puts(b, ")\n        return -1;\n");
    rt_buf_linef(b, 1, "int rc = 0;");
    for (int32_t j = 0; j < n_own; j++)
        rt_buf_linef(b, 1, "%s *%s = rt_lay_alloc(%s%s, sizeof(%s));", o[j].ctype, o[j].name,
                     j < c->n_prelude ? "" : "n_", j < c->n_prelude ? o[j].elems : o[j].name,
                     o[j].ctype);
    for (int32_t j = 0; j < n_own; j++)
        rt_buf_printf(b, "%s!%s", j ? " || " : "    if (", o[j].name);
    if (n_own)
        rt_buf_puts(b, ") {\n        rc = -2;\n        goto done;\n    }\n");
    rt_buf_linef(b, 1, "// The prelude: each start array once, read by every kernel below.");
    for (int32_t r = 0; r < c->n_rows; r++)
        if (c->rows[r].prelude >= 0)
            rt_buf_linef(b, 1, "rt_lay_rows%d(%s, s%d, NULL);", (int)r, c->lens_args,
                         (int)c->rows[r].prelude);
    for (int32_t k = 0; k < l->n_ops; k++) {
        const rt_op *op = l->ops[k];
        rt_buf_printf(b, "    // %d. %s ->", (int)k + 1, op->name);
        for (int32_t j = 0; j < op->n_outputs; j++)
            rt_buf_printf(b, " %s", op->tensors[op->outputs[j]].name);
        rt_buf_puts(b, "\n    {\n        void *args[] = {NULL");
        for (int32_t j = 1; j < c->k[k]->n_bufs; j++)
            rt_buf_printf(b, ", %s", rt_lay_arg(c, k, j));
        rt_buf_puts(b, "};\n");
        rt_buf_linef(b, 2, "%s(args);", c->k[k]->name);
        rt_buf_linef(b, 1, "}");
    }
    if (n_own)
        rt_buf_linef(b, 0, "done:");
    for (int32_t j = 0; j < n_own; j++)
        rt_buf_linef(b, 1, "free(%s);", o[j].name);
    rt_buf_linef(b, 1, "return rc;");
    rt_buf_linef(b, 0, "}");
    return RT_OK;
}

// The plan line of a kernel's header ("plan: ..."), or "".
static const char *rt_lay_plan(rt_arena *a, const rt_kir_kernel *k) {
    const char *h = k->header ? strstr(k->header, "plan: ") : NULL;
    if (!h)
        return "";
    const char *nl = strchr(h, '\n');
    return rt_arena_printf(a, " (%.*s)", (int)(nl ? nl - h : (ptrdiff_t)strlen(h)), h);
}

// The opening comment of both files: what runs, on what, and how to build it.
static void rt_lay_comment(rt_lay *c, rt_cpu_report *const *cpu, const int32_t *pick, rt_buf *b) {
    const rt_layer *l = c->l;
    rt_buf_linef(b, 0,
                 "// rtgen %s: layer %s (%s), %d defs run in order by %s():", RT_VERSION_STRING,
                 l->name, l->file, (int)l->n_ops, c->fn);
    for (int32_t k = 0; k < l->n_ops; k++) {
        const rt_op *op = l->ops[k];
        rt_buf_printf(b, "//   %d. %s ->", (int)k + 1, op->name);
        for (int32_t j = 0; j < op->n_outputs; j++)
            rt_buf_printf(b, " %s", op->tensors[op->outputs[j]].name);
        rt_buf_printf(b, ": %s in %s.c, %s%s\n", c->k[k]->name, op->name,
                      cpu[k]->winner == pick[k] ? "the profiled winner"
                                                : "the model's top-1, not profiled",
                      rt_lay_plan(c->a, c->k[k]));
    }
    rt_buf_puts(b, "// sizes:");
    const rt_op *op0 = l->ops[0];
    for (int32_t s = 0; s < op0->n_sizes; s++)
        if (op0->sizes[s].bound)
            rt_buf_printf(b, " %s=%lld", op0->sizes[s].name, (long long)op0->sizes[s].value);
    rt_buf_puts(b, "\n");
    int32_t n_inter = 0;
    for (int32_t i = 0; i < l->n_tensors; i++)
        n_inter += !l->tensors[i].is_input && !l->tensors[i].is_output;
    rt_buf_linef(b, 0,
                 "// The prelude (%d start array%s of the packed ragged rows) is computed once per "
                 "call from the lengths",
                 (int)c->n_prelude, c->n_prelude == 1 ? "" : "s");
    rt_buf_linef(b, 0,
                 "// and shared by every kernel; the %d intermediate%s and the defs' temporaries "
                 "are allocated and freed here.",
                 (int)n_inter, n_inter == 1 ? "" : "s");
    rt_buf_printf(b, "// Build: cc -O2 -fopenmp -c %s.c", l->name);
    for (int32_t k = 0; k < l->n_ops; k++)
        rt_buf_printf(b, " %s.c", l->ops[k]->name);
    rt_buf_puts(b, "; link with -fopenmp -lm\n");
}

// The header: the entry point and the element counts of its tensors.
static void rt_lay_header(rt_lay *c, rt_buf *b) {
    const rt_layer *l = c->l;
    char *guard = rt_arena_printf(c->a, "%s_H", c->fn);
    for (char *p = guard; p && *p; p++)
        *p = (char)toupper((unsigned char)*p);
    rt_buf_linef(b, 0, "#ifndef %s", guard ? guard : "RT_LAYER_H");
    rt_buf_linef(b, 0, "#define %s", guard ? guard : "RT_LAYER_H");
    rt_buf_puts(b, "\n#include <stdint.h>\n\n");
    rt_buf_linef(b, 0, "// Tensors, row-major; a ragged dim's rows are packed, without padding:");
    for (int32_t pass = 0; pass < 2; pass++)
        for (int32_t i = 0; i < l->n_tensors; i++) {
            const rt_layer_tensor *lt = &l->tensors[i];
            if (pass == 0 ? !lt->is_input : !lt->is_output)
                continue;
            const rt_op *op = l->ops[lt->op];
            rt_buf_printf(b, "//   %-8s %s %s ", c->name[i], pass == 0 ? "input " : "output",
                          c->ctype[i]);
            rt_lay_dims(op, &op->tensors[lt->tensor], b);
            if (rt_lay_is_length(l, i))
                rt_buf_puts(b, ", lengths (each >= 0)\n");
            else
                rt_buf_printf(b, ", %s_elems_%s(%s) elements\n", c->fn, c->name[i], c->lens_args);
        }
    rt_buf_linef(b, 0,
                 "// Returns 0; -1 when a length (or an extent) is negative, -2 when out "
                 "of memory (outputs unwritten).");
    rt_buf_printf(b, "int %s(", c->fn);
    rt_lay_params(c, b);
    rt_buf_puts(b, ");\n\n");
    rt_buf_linef(b, 0, "// The element count of each input and output for these lengths.");
    for (int32_t i = 0; i < l->n_tensors; i++)
        if ((l->tensors[i].is_input || l->tensors[i].is_output) && !rt_lay_is_length(l, i))
            rt_buf_linef(b, 0, "int64_t %s_elems_%s(%s);", c->fn, c->name[i], c->lens_params);
    rt_buf_linef(b, 0, "\n#endif");
}

static const char rt_lay_helpers[] =
    "static inline int64_t rt_lay_floordiv(int64_t a, int64_t b) {\n"
    "    if (b == 0)\n        return 0;\n"
    "    int64_t q = a / b;\n"
    "    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;\n}\n"
    "static inline int64_t rt_lay_floormod(int64_t a, int64_t b) {\n"
    "    return a - rt_lay_floordiv(a, b) * b;\n}\n"
    "static inline int64_t rt_lay_imin(int64_t a, int64_t b) {\n"
    "    return a < b ? a : b;\n}\n"
    "static inline int64_t rt_lay_imax(int64_t a, int64_t b) {\n"
    "    return a > b ? a : b;\n}\n\n"
    "// n elements (at least one) of elem_bytes each, 64-byte aligned.\n"
    "static void *rt_lay_alloc(int64_t n, size_t elem_bytes) {\n"
    "    size_t bytes = (size_t)(n > 0 ? n : 1) * elem_bytes;\n"
    "    return aligned_alloc(64, (bytes + 63) / 64 * 64);\n}\n\n";

// The .c file: comment, includes, kernels, rows functions, element counts, entry point.
static rt_status rt_lay_source(rt_lay *c, rt_cpu_report *const *cpu, const int32_t *pick,
                               rt_buf *b) {
    const rt_layer *l = c->l;
    rt_lay_comment(c, cpu, pick, b);
    rt_buf_printf(b,
                  "#include \"%s.h\"\n\n#include <stddef.h>\n#include <stdint.h>\n"
                  "#include <stdlib.h>\n\n",
                  l->name);
    rt_buf_linef(b, 0,
                 "// The kernels (emit-c): one OpenMP parallel region each, buffers in "
                 "args[1..], args[0] unused.");
    for (int32_t k = 0; k < l->n_ops; k++)
        rt_buf_linef(b, 0, "void %s(void **args);", c->k[k]->name);
    rt_buf_puts(b, "\n");
    rt_buf_puts(b, rt_lay_helpers);
    // Element counts first: they may add rows functions.
    rt_buf counts;
    rt_buf_init(&counts, c->a);
    for (int32_t i = 0; i < l->n_tensors; i++) {
        if (!(l->tensors[i].is_input || l->tensors[i].is_output) || rt_lay_is_length(l, i))
            continue;
        const char *n;
        RT_TRY(rt_lay_elems(c, l->tensors[i].op, l->tensors[i].tensor, &n));
        rt_buf_linef(&counts, 0, "int64_t %s_elems_%s(%s) {", c->fn, c->name[i], c->lens_params);
        for (int32_t j = 0; j < l->n_tensors && !strstr(n, "rt_lay_rows"); j++)
            if (rt_lay_is_length(l, j)) // a dense tensor: the lengths unused
                rt_buf_linef(&counts, 1, "(void)%s;", c->name[j]);
        rt_buf_linef(&counts, 1, "return %s;", n);
        rt_buf_linef(&counts, 0, "}\n");
    }
    rt_buf entry;
    rt_buf_init(&entry, c->a);
    RT_TRY(rt_lay_entry(c, &entry));
    for (int32_t r = 0; r < c->n_rows; r++)
        RT_TRY(rt_lay_rows_fn(c, r, b));
    rt_buf_puts(b, counts.data ? counts.data : "");
    rt_buf_puts(b, entry.data ? entry.data : "");
    return counts.oom || entry.oom ? rt_fail(c->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory")
                                   : RT_OK;
}

rt_status rt_layer_emit_check_names(const rt_layer *l, rt_err *err) {
    for (int32_t k = 0; k < l->n_ops; k++)
        if (strcmp(l->ops[k]->name, l->name) == 0)
            return rt_fail(err, RT_ERR_SPEC, l->ops[k]->loc,
                           "def %s has the layer's name: its kernel %s.c would overwrite the "
                           "layer's entry point %s.c; rename the def or the file",
                           l->ops[k]->name, l->ops[k]->name, l->name);
    return RT_OK;
}

rt_status rt_layer_emit_c(rt_arena *a, const rt_layer *l, rt_cpu_report *const *cpu,
                          const int32_t *pick, rt_layer_c *out, rt_err *err) {
    RT_TRY(rt_layer_emit_check_names(l, err));
    rt_lay c = {.a = a, .l = l, .err = err};
    int32_t *pk;
    RT_ALLOC(a, pk, l->n_ops, err);
    RT_ALLOC(a, c.k, l->n_ops, err);
    for (int32_t k = 0; k < l->n_ops; k++) {
        pk[k] = pick ? pick[k] : cpu[k]->winner >= 0 ? cpu[k]->winner : 0;
        if (!(c.k[k] = rt_cpu_report_kernel(cpu[k], pk[k])))
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "def %s has no candidate %d to call",
                           l->ops[k]->name, (int)pk[k]);
    }
    const char *id = rt_lay_ident(a, l->name);
    c.fn = id ? rt_arena_printf(a, "rt_layer_%s", id[0] == '_' ? id + 1 : id) : NULL;
    if (!c.fn)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    RT_TRY(rt_lay_setup(&c));
    rt_buf src, hdr;
    rt_buf_init(&src, a);
    rt_buf_init(&hdr, a);
    RT_TRY(rt_lay_source(&c, cpu, pk, &src));
    rt_lay_comment(&c, cpu, pk, &hdr);
    rt_lay_header(&c, &hdr);
    if (src.oom || hdr.oom)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    *out = (rt_layer_c){c.fn, rt_arena_printf(a, "%s.c", l->name), src.data,
                        rt_arena_printf(a, "%s.h", l->name), hdr.data};
    return out->c_name && out->h_name ? RT_OK
                                      : rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
}
