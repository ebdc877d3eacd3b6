// emit-c.c: prints a kernel IR (kir.h) as portable C11, compilable with
// `cc -O3 -march=native -fopenmp` into a shared object (the `--emit=c` target and the second
// half of the differential test against the LLVM JIT). Phases become functions with restrict
// buffer parameters; the entry runs them under one OpenMP parallel region with a per-thread
// scratch buffer. The micro-kernel is printed as fixed-size loops over an accumulator array
// that the C compiler keeps in vector registers. Output is deterministic.
#include "emit.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct rt_cemit {
    rt_buf *b;
    const rt_kir_kernel *k;
    const rt_kir_phase *p;
} rt_cemit;

static void rt_c_expr(rt_cemit *c, const rt_kir_expr *e);

static void rt_c_float(rt_cemit *c, rt_kir_type t, double v) {
    bool f32 = t == RT_KIR_F32;
    if (isinf(v)) {
        rt_buf_puts(c->b, v < 0 ? "(-INFINITY)" : "INFINITY");
        return;
    }
    if (isnan(v)) {
        rt_buf_puts(c->b, "NAN");
        return;
    }
    char tmp[64];
    snprintf(tmp, sizeof tmp, f32 ? "%.9g" : "%.17g", v);
    bool has_dot = strpbrk(tmp, ".eE") != NULL;
    rt_buf_printf(c->b, "%s%s%s%s", v < 0 ? "(" : "", tmp, has_dot ? "" : ".0",
                  f32 ? (v < 0 ? "f)" : "f") : (v < 0 ? ")" : ""));
}

static const char *rt_c_fn(rt_fn fn, bool f32) {
    switch (fn) {
    case RT_FN_EXP:
        return f32 ? "expf" : "exp";
    case RT_FN_LOG:
        return f32 ? "logf" : "log";
    case RT_FN_SQRT:
        return f32 ? "sqrtf" : "sqrt";
    case RT_FN_TANH:
        return f32 ? "tanhf" : "tanh";
    case RT_FN_ERF:
        return f32 ? "erff" : "erf";
    case RT_FN_ABS:
        return f32 ? "fabsf" : "fabs";
    default:
        return NULL;
    }
}

static void rt_c_expr(rt_cemit *c, const rt_kir_expr *e) {
    bool f32 = e->type == RT_KIR_F32;
    switch (e->kind) {
    case RT_KIR_E_INT:
        if (e->ival == INT64_MIN)
            rt_buf_puts(c->b, "INT64_MIN");
        else
            rt_buf_printf(c->b, e->ival < 0 ? "(%lld)" : "%lld", (long long)e->ival);
        return;
    case RT_KIR_E_FLT:
        rt_c_float(c, e->type, e->fval);
        return;
    case RT_KIR_E_VAR:
    case RT_KIR_E_FVAR:
        rt_buf_puts(c->b, c->p->vars[e->var].name);
        return;
    case RT_KIR_E_LOAD:
        rt_buf_printf(c->b, "%s[", c->k->bufs[e->buf].name);
        rt_c_expr(c, e->args[0]);
        rt_buf_puts(c->b, "]");
        return;
    case RT_KIR_E_NEG:
        rt_buf_puts(c->b, "(-");
        rt_c_expr(c, e->args[0]);
        rt_buf_puts(c->b, ")");
        return;
    case RT_KIR_E_CAST:
        rt_buf_printf(c->b, "((%s)", rt_kir_type_ctype(e->type));
        rt_c_expr(c, e->args[0]);
        rt_buf_puts(c->b, ")");
        return;
    case RT_KIR_E_SELECT:
        rt_buf_puts(c->b, "(");
        rt_c_expr(c, e->args[0]);
        rt_buf_puts(c->b, " ? ");
        rt_c_expr(c, e->args[1]);
        rt_buf_puts(c->b, " : ");
        rt_c_expr(c, e->args[2]);
        rt_buf_puts(c->b, ")");
        return;
    case RT_KIR_E_CALL: {
        const char *name = rt_c_fn(e->fn, f32);
        const char *one = f32 ? "1.0f" : "1.0";
        if (e->fn == RT_FN_RSQRT)
            rt_buf_printf(c->b, "(%s / %s(", one, f32 ? "sqrtf" : "sqrt");
        else if (e->fn == RT_FN_SIGMOID)
            rt_buf_printf(c->b, "(%s / (%s + %s(-", one, one, f32 ? "expf" : "exp");
        else
            rt_buf_printf(c->b, "%s(", name ? name : "?");
        rt_c_expr(c, e->args[0]);
        rt_buf_puts(c->b, e->fn == RT_FN_RSQRT ? "))" : e->fn == RT_FN_SIGMOID ? ")))" : ")");
        return;
    }
    case RT_KIR_E_BIN: {
        const rt_kir_expr *x = e->args[0], *y = e->args[1];
        bool fl = rt_kir_type_is_float(x->type);
        bool xf32 = x->type == RT_KIR_F32;
        const char *fn = NULL;
        switch (e->bop) {
        case RT_KIR_DIV:
            fn = fl ? NULL : "rt_floordiv";
            break;
        case RT_KIR_MOD:
            fn = fl ? (xf32 ? "fmodf" : "fmod") : "rt_floormod";
            break;
        case RT_KIR_MIN:
            fn = fl ? (xf32 ? "fminf" : "fmin") : "rt_imin";
            break;
        case RT_KIR_MAX:
            fn = fl ? (xf32 ? "fmaxf" : "fmax") : "rt_imax";
            break;
        default:
            break;
        }
        if (fn) {
            rt_buf_printf(c->b, "%s(", fn);
            rt_c_expr(c, x);
            rt_buf_puts(c->b, ", ");
            rt_c_expr(c, y);
            rt_buf_puts(c->b, ")");
            return;
        }
        bool cmp = e->bop >= RT_KIR_LT;
        rt_buf_puts(c->b, cmp ? "(int64_t)(" : "(");
        rt_c_expr(c, x);
        rt_buf_printf(c->b, " %s ", rt_kir_bop_name(e->bop));
        rt_c_expr(c, y);
        rt_buf_puts(c->b, ")");
        return;
    }
    default:
        rt_buf_puts(c->b, "?");
        return;
    }
}

static void rt_c_block(rt_cemit *c, const rt_kir_block *b, int ind);

static void rt_c_ukernel(rt_cemit *c, const rt_kir_ukernel *u, int ind) {
    rt_buf *b = c->b;
    rt_buf_linef(b, ind, "{ // micro-kernel %dx%d: broadcast A, FMA with B rows, reduce over k",
                 u->mr, u->nr);
    rt_buf_printf(b, "%*sconst float *ua = %s + ", 4 * (ind + 1), "",
                  rt_kir_uk_a_in_place(u) ? c->k->bufs[u->a_buf].name : "scratch");
    rt_c_expr(c, u->a_off);
    rt_buf_puts(b, ";\n");
    // A in place (rows past m_valid clamped) and row tails read the valid rows.
    if (rt_kir_uk_a_in_place(u) || u->tail_acc > 0) {
        rt_buf_printf(b, "%*sconst int64_t uma = ", 4 * (ind + 1), "");
        rt_c_expr(c, u->m_valid);
        rt_buf_puts(b, ";\n");
    }
    if (u->a_ld_rt) { // A's row stride known at run time (a ragged entry's)
        rt_buf_printf(b, "%*sconst int64_t ulda = ", 4 * (ind + 1), "");
        rt_c_expr(c, u->a_ld_rt);
        rt_buf_puts(b, ";\n");
    }
    if (u->a_pf_next) { // where the next call's rows are: prefetched, one row per k step
        rt_buf_printf(b, "%*sconst int64_t upf = ", 4 * (ind + 1), "");
        rt_c_expr(c, u->a_pf_next);
        rt_buf_puts(b, ";\n");
    }
    rt_buf_printf(b, "%*sconst float *ub = %s + ", 4 * (ind + 1), "",
                  rt_kir_uk_b_in_place(u) ? c->k->bufs[u->b_buf].name : "scratch");
    rt_c_expr(c, u->b_off);
    rt_buf_puts(b, ";\n");
    rt_buf_linef(b, ind + 1, "float uacc[%d][%d];", u->mr, u->nr);
    rt_buf_linef(b, ind + 1, "memset(uacc, 0, sizeof uacc);");
    rt_buf_printf(b, "%*sconst int64_t ukc = ", 4 * (ind + 1), "");
    rt_c_expr(c, u->kc);
    rt_buf_puts(b, ";\n");
    rt_buf_linef(b, ind + 1, "for (int64_t uk = 0; uk < ukc; uk++) {");
    if (u->a_pf_next) {
        char ld[32] = "ulda";
        if (!u->a_ld_rt)
            snprintf(ld, sizeof ld, "%lld", (long long)u->a_ld);
        rt_buf_linef(b, ind + 2,
                     "__builtin_prefetch(&ua[upf + (upf ? uk %% %d * %s : 0) + uk], 0, 2);", u->mr,
                     ld);
    }
    if (u->tail_acc > 0) { // row tails: the valid rows rounded up (rt_perf_cpu_tail_rows)
        int q = (int)rt_perf_cpu_tail_quantum(u->mr);
        rt_buf_linef(b, ind + 2,
                     "for (int ui = 0; ui < (uma < %d ? (uma + %d) / %d * %d : %d); ui++) {", u->mr,
                     q - 1, q, q, u->mr);
    } else
        rt_buf_linef(b, ind + 2, "for (int ui = 0; ui < %d; ui++) {", u->mr);
    if (u->a_ld_rt)
        rt_buf_linef(b, ind + 3, "const float av = ua[(ui < uma ? ui : uma - 1) * ulda + uk];");
    else if (u->a_ld > 0)
        rt_buf_linef(b, ind + 3, "const float av = ua[(ui < uma ? ui : uma - 1) * %lld + uk];",
                     (long long)u->a_ld);
    else
        rt_buf_linef(b, ind + 3, "const float av = ua[uk * %d + ui];", u->mr);
    rt_buf_linef(b, ind + 3, "for (int uj = 0; uj < %d; uj++)", u->nr);
    if (u->b_sub > 0 && u->b_sub < u->nr) // b_sub-wide sub-panels of ukc k steps (kir.h)
        rt_buf_linef(b, ind + 4,
                     "uacc[ui][uj] += av * ub[(uj / %d) * ukc * %d + uk * %d + uj %% %d];",
                     u->b_sub, u->b_sub, u->b_sub, u->b_sub);
    else // B's rows nr apart in its panel, or b_ld apart in its tensor (kir.h)
        rt_buf_linef(b, ind + 4, "uacc[ui][uj] += av * ub[uk * %lld + uj];",
                     (long long)(u->b_ld > 0 ? u->b_ld : u->nr));
    rt_buf_linef(b, ind + 2, "}");
    rt_buf_linef(b, ind + 1, "}");
    rt_buf_printf(b, "%*sfloat *uc = %s + ", 4 * (ind + 1), "", c->k->bufs[u->c_buf].name);
    rt_c_expr(c, u->c_off);
    rt_buf_puts(b, ";\n");
    // C's row stride: the constant, or a run-time one bound to uldc (a ragged GEMM's entry).
    char ld[32] = "uldc";
    if (u->ldc_rt) {
        rt_buf_printf(b, "%*sconst int64_t uldc = ", 4 * (ind + 1), "");
        rt_c_expr(c, u->ldc_rt);
        rt_buf_puts(b, ";\n");
    } else {
        snprintf(ld, sizeof ld, "%lld", (long long)u->ldc);
    }
    rt_buf_printf(b, "%*sconst int64_t umv = ", 4 * (ind + 1), "");
    rt_c_expr(c, u->m_valid);
    rt_buf_puts(b, ", unv = ");
    rt_c_expr(c, u->n_valid);
    rt_buf_puts(b, ";\n");
    rt_buf_printf(b, "%*sif (", 4 * (ind + 1), "");
    if (u->epi && u->epi->n > 0) {
        // Fused epilogue on the last k block: the element's final value and coordinates, then
        // the fused statement (kir.h).
        const rt_kir_var *v = c->p->vars;
        rt_c_expr(c, u->epi_last);
        rt_buf_puts(b, ") {\n");
        rt_buf_linef(b, ind + 2, "for (int64_t ui = 0; ui < umv; ui++)");
        rt_buf_linef(b, ind + 3, "for (int64_t uj = 0; uj < unv; uj++) {");
        rt_buf_printf(b, "%*s%s = (", 4 * (ind + 4), "", v[u->epi_acc].name);
        rt_c_expr(c, u->accumulate);
        rt_buf_printf(b, " ? uc[ui * %s + uj] : 0.0f) + uacc[ui][uj];\n", ld);
        if (u->epi_keep_c)
            rt_buf_linef(b, ind + 4, "uc[ui * %s + uj] = %s;", ld, v[u->epi_acc].name);
        rt_buf_printf(b, "%*s%s = ", 4 * (ind + 4), "", v[u->epi_row].name);
        rt_c_expr(c, u->epi_row0);
        rt_buf_puts(b, " + ui;\n");
        rt_buf_printf(b, "%*s%s = ", 4 * (ind + 4), "", v[u->epi_col].name);
        rt_c_expr(c, u->epi_col0);
        rt_buf_puts(b, " + uj;\n");
        rt_c_block(c, u->epi, ind + 4);
        rt_buf_linef(b, ind + 3, "}");
        rt_buf_printf(b, "%*s} else if (", 4 * (ind + 1), "");
    }
    rt_c_expr(c, u->accumulate);
    rt_buf_puts(b, ") {\n");
    rt_buf_linef(b, ind + 2, "for (int64_t ui = 0; ui < umv; ui++)");
    rt_buf_linef(b, ind + 3, "for (int64_t uj = 0; uj < unv; uj++)");
    rt_buf_linef(b, ind + 4, "uc[ui * %s + uj] += uacc[ui][uj];", ld);
    rt_buf_linef(b, ind + 1, "} else {");
    rt_buf_linef(b, ind + 2, "for (int64_t ui = 0; ui < umv; ui++)");
    rt_buf_linef(b, ind + 3, "for (int64_t uj = 0; uj < unv; uj++)");
    rt_buf_linef(b, ind + 4, "uc[ui * %s + uj] = uacc[ui][uj];", ld);
    rt_buf_linef(b, ind + 1, "}");
    rt_buf_linef(b, ind, "}");
}

static void rt_c_node(rt_cemit *c, const rt_kir_node *n, int ind) {
    rt_buf *b = c->b;
    const char *pad = "";
    switch (n->kind) {
    case RT_KIR_N_LOOP: {
        const char *v = c->p->vars[n->var].name;
        if (n->loop_kind == RT_KIR_LOOP_VECTOR)
            rt_buf_linef(b, ind, "#pragma GCC ivdep");
        else if (n->loop_kind == RT_KIR_LOOP_UNROLL)
            rt_buf_linef(b, ind, "#pragma GCC unroll 8");
        rt_buf_printf(b, "%*sfor (%s = ", 4 * ind, pad, v);
        rt_c_expr(c, n->lo);
        rt_buf_printf(b, "; %s < ", v);
        rt_c_expr(c, n->hi);
        rt_buf_printf(b, "; %s++) {%s\n", v,
                      n->loop_kind == RT_KIR_LOOP_PARALLEL ? " // parallel" : "");
        rt_c_block(c, &n->body, ind + 1);
        rt_buf_linef(b, ind, "}");
        return;
    }
    case RT_KIR_N_LET:
    case RT_KIR_N_FSET:
        rt_buf_printf(b, "%*s%s = ", 4 * ind, pad, c->p->vars[n->var].name);
        rt_c_expr(c, n->value);
        rt_buf_puts(b, ";\n");
        return;
    case RT_KIR_N_STORE:
        rt_buf_printf(b, "%*s%s[", 4 * ind, pad, c->k->bufs[n->buf].name);
        rt_c_expr(c, n->index);
        rt_buf_puts(b, "] = ");
        rt_c_expr(c, n->value);
        rt_buf_puts(b, ";\n");
        return;
    case RT_KIR_N_PREFETCH:
        rt_buf_printf(b, "%*s__builtin_prefetch(&%s[", 4 * ind, pad, c->k->bufs[n->buf].name);
        rt_c_expr(c, n->index);
        rt_buf_puts(b, "], 0, 2);\n");
        return;
    case RT_KIR_N_IF:
        rt_buf_printf(b, "%*sif (", 4 * ind, pad);
        rt_c_expr(c, n->cond);
        rt_buf_puts(b, ") {\n");
        rt_c_block(c, &n->body, ind + 1);
        if (n->else_body.n > 0) {
            rt_buf_linef(b, ind, "} else {");
            rt_c_block(c, &n->else_body, ind + 1);
        }
        rt_buf_linef(b, ind, "}");
        return;
    case RT_KIR_N_COPY:
        rt_buf_linef(b, ind, "// copy: %s", n->text ? n->text : "");
        rt_c_block(c, &n->body, ind);
        return;
    case RT_KIR_N_UKERNEL:
        rt_c_ukernel(c, &n->uk, ind);
        return;
    case RT_KIR_N_BARRIER:
        rt_buf_linef(b, ind, "// barrier (phase boundary)");
        return;
    case RT_KIR_N_COMMENT:
        rt_buf_linef(b, ind, "// %s", n->text ? n->text : "");
        return;
    default:
        return;
    }
}

static void rt_c_block(rt_cemit *c, const rt_kir_block *b, int ind) {
    for (int32_t i = 0; i < b->n; i++)
        rt_c_node(c, b->nodes[i], ind);
}

// The ORDER buffer of a level-by-level phase's tree (the phase's items index it).
static int32_t rt_c_order_buf(const rt_kir_kernel *k, const rt_kir_phase *p) {
    for (int32_t i = 1; i < k->n_bufs; i++)
        if (k->bufs[i].role == RT_KIR_BUF_TREE && k->bufs[i].tensor == p->levels.tree &&
            k->bufs[i].dim == RT_KIR_TREE_ORDER)
            return i;
    return p->levels.begin_buf;
}

// The entry's loop over phase i: its items once, or (by level) its items level by level, the
// end of each omp for the barrier between levels.
static void rt_c_entry_phase(rt_buf *b, const rt_kir_kernel *k, int32_t i) {
    const rt_kir_phase *p = &k->phases[i];
    if (!p->levels.on) {
        rt_buf_linef(b, 2, "#pragma omp for schedule(static)");
        rt_buf_linef(b, 2, "for (int64_t i = 0; i < %lld; i++)", (long long)p->n_items);
        rt_buf_linef(b, 3, "%s_%s(args, i, i + 1, scratch);", k->name, p->name);
        return;
    }
    const char *begin = k->bufs[p->levels.begin_buf].name;
    rt_buf_linef(b, 2, "{");
    rt_buf_linef(b, 3, "const int32_t *%s = (const int32_t *)args[%d];", begin,
                 (int)p->levels.begin_buf);
    if (p->levels.last < 0)
        rt_buf_linef(b, 3, "int64_t last = ((const int32_t *)args[%d])[0]; // %s",
                     (int)p->levels.count_buf, k->bufs[p->levels.count_buf].name);
    else
        rt_buf_linef(b, 3, "int64_t last = %d;", (int)p->levels.last);
    rt_buf_linef(b, 3, "for (int64_t h = %d; h < last; h++) {", (int)p->levels.first);
    rt_buf_linef(b, 4, "#pragma omp for schedule(static)");
    rt_buf_linef(b, 4, "for (int64_t i = %s[h]; i < %s[h + 1]; i++)", begin, begin);
    rt_buf_linef(b, 5, "%s_%s(args, i, i + 1, scratch);", k->name, p->name);
    rt_buf_linef(b, 3, "}");
    rt_buf_linef(b, 2, "}");
}

static void rt_c_phase(rt_cemit *c, const rt_kir_phase *p) {
    rt_buf *b = c->b;
    const rt_kir_kernel *k = c->k;
    c->p = p;
    if (p->levels.on)
        rt_buf_linef(b, 0,
                     "// phase %s: %s (work items: positions in the level order, item k is node "
                     "%s[k])",
                     p->name, p->what, k->bufs[rt_c_order_buf(k, p)].name);
    else
        rt_buf_linef(b, 0, "// phase %s: %s (%lld work items)", p->name, p->what,
                     (long long)p->n_items);
    rt_buf_printf(b, "static void %s_%s_body(", k->name, p->name);
    for (int32_t i = 0; i < k->n_bufs; i++) {
        const rt_kir_buf *bf = &k->bufs[i];
        rt_buf_printf(b, "%s%s *restrict %s",
                      bf->written || bf->role == RT_KIR_BUF_SCRATCH ? "" : "const ",
                      rt_kir_type_ctype(bf->type), bf->name);
        rt_buf_puts(b, ", ");
    }
    rt_buf_puts(b, "int64_t lo, int64_t hi) {\n");
    for (int32_t v = 0; v < p->n_vars; v++)
        rt_buf_linef(b, 1, "%s %s;", rt_kir_type_ctype(p->vars[v].type), p->vars[v].name);
    rt_buf_linef(b, 1, "(void)scratch;");
    const char *item = p->vars[p->item_var].name;
    rt_buf_linef(b, 1, "for (%s = lo; %s < hi; %s++) {", item, item, item);
    rt_c_block(c, &p->body, 2);
    rt_buf_linef(b, 1, "}");
    rt_buf_linef(b, 0, "}");
    rt_buf_puts(b, "\n");
    rt_buf_linef(b, 0, "void %s_%s(void **args, int64_t lo, int64_t hi, float *scratch) {", k->name,
                 p->name);
    rt_buf_printf(b, "    %s_%s_body(scratch", k->name, p->name);
    for (int32_t i = 1; i < k->n_bufs; i++)
        rt_buf_printf(b, ", (%s *)args[%d]", rt_kir_type_ctype(k->bufs[i].type), (int)i);
    rt_buf_puts(b, ", lo, hi);\n}\n\n");
}

rt_status rt_emit_c(rt_arena *a, const rt_kir_kernel *k, const char **out_text, rt_err *err) {
    RT_TRY(rt_kir_validate(k, err));
    rt_buf buf;
    rt_buf_init(&buf, a);
    rt_buf *b = &buf;
    rt_cemit c = {b, k, NULL};
    // Header comment: spec, device, rTiles, predicted time.
    rt_kir_header_comment(k, "// ", b);
    rt_buf_puts(b,
                "// Build: cc -O3 -march=native -fopenmp -shared -fPIC -o kernel.so kernel.c -lm\n"
                "#include <math.h>\n#include <stdint.h>\n#include <stdlib.h>\n"
                "#include <string.h>\n\n");
    rt_buf_puts(b, "static inline int64_t rt_floordiv(int64_t a, int64_t b) {\n"
                   "    if (b == 0)\n        return 0;\n"
                   "    int64_t q = a / b;\n"
                   "    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;\n}\n"
                   "static inline int64_t rt_floormod(int64_t a, int64_t b) {\n"
                   "    return a - rt_floordiv(a, b) * b;\n}\n"
                   "static inline int64_t rt_imin(int64_t a, int64_t b) {\n"
                   "    return a < b ? a : b;\n}\n"
                   "static inline int64_t rt_imax(int64_t a, int64_t b) {\n"
                   "    return a > b ? a : b;\n}\n\n");
    rt_buf_linef(b, 0, "// Buffers (args[i]): scratch is per thread (%lld bytes)",
                 (long long)k->scratch_bytes);
    for (int32_t i = 1; i < k->n_bufs; i++)
        rt_buf_linef(b, 0, "//   args[%d] %s %s%s", (int)i, rt_kir_type_name(k->bufs[i].type),
                     k->bufs[i].name,
                     k->bufs[i].role == RT_KIR_BUF_START  ? " (ragged starts)"
                     : k->bufs[i].role == RT_KIR_BUF_TREE ? " (tree, linearized on the host)"
                                                          : "");
    rt_buf_puts(b, "\n");
    for (int32_t i = 0; i < k->n_phases; i++)
        rt_c_phase(&c, &k->phases[i]);
    bool levels = false;
    for (int32_t i = 0; i < k->n_phases; i++)
        levels = levels || k->phases[i].levels.on;
    rt_buf_linef(b, 0, "// Runs every phase in order%s; the end of an omp for is the barrier.",
                 levels ? " (a phase by level: its levels in order)" : "");
    rt_buf_linef(b, 0, "void %s(void **args) {", k->name);
    rt_buf_linef(b, 1, "#pragma omp parallel");
    rt_buf_linef(b, 1, "{");
    if (k->scratch_bytes > 0)
        rt_buf_linef(b, 2, "float *scratch = aligned_alloc(64, %lld);",
                     (long long)rt_round_up(k->scratch_bytes, 64));
    else
        rt_buf_linef(b, 2, "float *scratch = NULL;");
    for (int32_t i = 0; i < k->n_phases; i++)
        rt_c_entry_phase(b, k, i);
    rt_buf_linef(b, 2, "free(scratch);");
    rt_buf_linef(b, 1, "}");
    rt_buf_linef(b, 0, "}");
    if (b->oom)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    *out_text = b->data;
    return RT_OK;
}
