// emit-gpu.c: the one GPU emitter. It walks the GPU-structured kernel IR of lower-gpu.c and
// prints CUDA, HIP or OpenCL C; everything that differs between the three comes from the
// dialect table (dialect-*.c): kernel and address-space qualifiers, restrict, thread/block
// indices, barriers, launch bounds, math names, the 64-bit integer type. Text goes through
// rt_buf_linef and is deterministic. Below the emitter: the candidate helpers the driver calls —
// emit a ranked candidate and compile the top-K in-process (rt_gpu_compile_many) with resource
// usage (profile-gpu.c runs, checks and times them).
#include "gpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(RT_GPU_TARGET_COUNT == 3, "ORDER RT_GPU_TARGET: dialect list in emit-gpu.c");

const rt_gpu_dialect *rt_gpu_dialect_of(rt_gpu_target t) {
    switch (t) {
    case RT_GPU_TARGET_CUDA:
        return &rt_gpu_dialect_cuda;
    case RT_GPU_TARGET_HIP:
        return &rt_gpu_dialect_hip;
    case RT_GPU_TARGET_OPENCL:
        return &rt_gpu_dialect_opencl;
    default:
        return NULL;
    }
}

bool rt_gpu_target_from_name(const char *name, rt_gpu_target *out) {
    for (int32_t t = 0; t < RT_GPU_TARGET_COUNT; t++)
        if (name && strcmp(name, rt_gpu_dialect_of((rt_gpu_target)t)->target) == 0) {
            *out = (rt_gpu_target)t;
            return true;
        }
    return false;
}

bool rt_gpu_target_of_device(const rt_device *dev, rt_gpu_target *out) {
    switch (dev->devclass) {
    case RT_DEVCLASS_CUDA:
        *out = RT_GPU_TARGET_CUDA;
        return true;
    case RT_DEVCLASS_HIP:
        *out = RT_GPU_TARGET_HIP;
        return true;
    case RT_DEVCLASS_OPENCL:
        *out = RT_GPU_TARGET_OPENCL;
        return true;
    default:
        return false;
    }
}

// ---------------------------------------------------------------------------------------------
// Printing the kernel IR
// ---------------------------------------------------------------------------------------------

typedef struct rt_ge {
    const rt_gpu_kernel *gk;
    const rt_kir_kernel *k;
    const rt_kir_phase *p;
    const rt_gpu_dialect *d;
    rt_buf *b;
    bool bad;
} rt_ge;

static const char *rt_ge_itype(const rt_ge *g) {
    return g->gk->idx32 ? "int" : g->d->i64;
}

static const char *rt_ge_type(const rt_ge *g, rt_kir_type t) {
    switch (t) {
    case RT_KIR_I64:
        return rt_ge_itype(g);
    case RT_KIR_I32:
        return "int";
    case RT_KIR_F32:
        return "float";
    case RT_KIR_F64:
        return "double";
    default:
        return "?";
    }
}

// The element type in device memory of kir buffer buf: half / bfloat16 for a data buffer of
// such a tensor (the IR computes in float; rt_ld_* / rt_st_* of the prelude convert), else
// RT_DTYPE_COUNT (the buffer's own kir type).
static rt_dtype rt_ge_mem_dtype(const rt_gpu_kernel *gk, int32_t buf) {
    for (int32_t i = 0; i < gk->n_bufs; i++) {
        const rt_gpu_buffer *gb = &gk->bufs[i];
        if (gb->kir_buf == buf && !gb->is_start && !gb->is_tree &&
            (gb->dtype == RT_DTYPE_F16 || gb->dtype == RT_DTYPE_BF16))
            return gb->dtype;
    }
    return RT_DTYPE_COUNT;
}

static void rt_ge_float(rt_ge *g, rt_buf *b, rt_kir_type t, double v) {
    bool f32 = t == RT_KIR_F32;
    if (isinf(v)) {
        rt_buf_printf(b, "%s(%s%s)", v < 0 ? "-" : "", f32 ? "" : "(double)", g->d->inf);
        return;
    }
    if (isnan(v)) {
        rt_buf_puts(b, f32 ? "(0.0f / 0.0f)" : "(0.0 / 0.0)");
        return;
    }
    char s[64];
    for (int prec = f32 ? 6 : 15; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, v);
        if (f32 ? (float)strtod(s, NULL) == (float)v : strtod(s, NULL) == v)
            break;
    }
    rt_buf_puts(b, s);
    if (!strpbrk(s, ".e"))
        rt_buf_puts(b, ".0");
    if (f32)
        rt_buf_puts(b, "f");
}

static void rt_ge_expr(rt_ge *g, rt_buf *b, const rt_kir_expr *e) {
    const rt_gpu_dialect *d = g->d;
    if (!e) {
        g->bad = true;
        return;
    }
    switch (e->kind) {
    case RT_KIR_E_INT:
        if (e->ival > 2147483647LL || e->ival < -2147483647LL)
            rt_buf_printf(b, "((%s)%lldLL)", rt_ge_itype(g), (long long)e->ival);
        else if (e->ival < 0)
            rt_buf_printf(b, "(%lld)", (long long)e->ival);
        else
            rt_buf_printf(b, "%lld", (long long)e->ival);
        return;
    case RT_KIR_E_FLT:
        rt_ge_float(g, b, e->type, e->fval);
        return;
    case RT_KIR_E_VAR:
    case RT_KIR_E_FVAR:
        rt_buf_puts(b, g->p->vars[e->var].name);
        return;
    case RT_KIR_E_LOAD: {
        rt_dtype mt = rt_ge_mem_dtype(g->gk, e->buf);
        if (mt != RT_DTYPE_COUNT)
            rt_buf_printf(b, "%s(%s, ", mt == RT_DTYPE_F16 ? "rt_ld_f16" : "rt_ld_bf16",
                          g->k->bufs[e->buf].name);
        else
            rt_buf_printf(b, "%s[", g->k->bufs[e->buf].name);
        rt_ge_expr(g, b, e->args[0]);
        rt_buf_puts(b, mt != RT_DTYPE_COUNT ? ")" : "]");
        return;
    }
    case RT_KIR_E_NEG:
        rt_buf_puts(b, "(-");
        rt_ge_expr(g, b, e->args[0]);
        rt_buf_puts(b, ")");
        return;
    case RT_KIR_E_BIN: {
        const rt_kir_expr *x = e->args[0], *y = e->args[1];
        bool fl = rt_kir_type_is_float(x->type);
        const char *fn = NULL;
        const char *const *tab = x->type == RT_KIR_F64 ? d->fn_f64 : d->fn_f32;
        switch (e->bop) {
        case RT_KIR_MIN:
        case RT_KIR_MAX:
            if (fl) {
                fn = tab[e->bop == RT_KIR_MIN ? RT_FN_MIN : RT_FN_MAX];
                break;
            }
            rt_buf_puts(b, "((");
            rt_ge_expr(g, b, x);
            rt_buf_puts(b, e->bop == RT_KIR_MIN ? ") < (" : ") > (");
            rt_ge_expr(g, b, y);
            rt_buf_puts(b, ") ? (");
            rt_ge_expr(g, b, x);
            rt_buf_puts(b, ") : (");
            rt_ge_expr(g, b, y);
            rt_buf_puts(b, "))");
            return;
        case RT_KIR_DIV:
            if (!fl)
                fn = "rt_floordiv";
            break;
        case RT_KIR_MOD:
            fn = fl ? (x->type == RT_KIR_F64 ? "fmod" : d->fmod_f32) : "rt_floormod";
            break;
        default:
            break;
        }
        if (fn) {
            rt_buf_printf(b, "%s(", fn);
            rt_ge_expr(g, b, x);
            rt_buf_puts(b, ", ");
            rt_ge_expr(g, b, y);
            rt_buf_puts(b, ")");
            return;
        }
        rt_buf_puts(b, "(");
        rt_ge_expr(g, b, x);
        rt_buf_printf(b, " %s ", rt_kir_bop_name(e->bop));
        rt_ge_expr(g, b, y);
        rt_buf_puts(b, ")");
        return;
    }
    case RT_KIR_E_CALL: {
        const char *const *tab = e->type == RT_KIR_F64 ? d->fn_f64 : d->fn_f32;
        if (e->fn == RT_FN_SIGMOID || !tab[e->fn]) {
            bool f32 = e->type != RT_KIR_F64;
            rt_buf_printf(b, "(%s / (%s + %s(-(", f32 ? "1.0f" : "1.0", f32 ? "1.0f" : "1.0",
                          tab[RT_FN_EXP]);
            rt_ge_expr(g, b, e->args[0]);
            rt_buf_puts(b, "))))");
            return;
        }
        rt_buf_printf(b, "%s(", tab[e->fn]);
        rt_ge_expr(g, b, e->args[0]);
        rt_buf_puts(b, ")");
        return;
    }
    case RT_KIR_E_SELECT:
        rt_buf_puts(b, "(");
        rt_ge_expr(g, b, e->args[0]);
        rt_buf_puts(b, " ? ");
        rt_ge_expr(g, b, e->args[1]);
        rt_buf_puts(b, " : ");
        rt_ge_expr(g, b, e->args[2]);
        rt_buf_puts(b, ")");
        return;
    case RT_KIR_E_CAST:
        rt_buf_printf(b, "((%s)", rt_ge_type(g, e->type));
        rt_ge_expr(g, b, e->args[0]);
        rt_buf_puts(b, ")");
        return;
    default:
        g->bad = true;
        return;
    }
}

// The expression as a string (for rt_buf_linef).
static const char *rt_ge_str(rt_ge *g, const rt_kir_expr *e) {
    rt_buf t;
    rt_buf_init(&t, g->b->arena);
    rt_ge_expr(g, &t, e);
    if (t.oom)
        g->bad = true;
    return t.oom ? "" : t.data;
}

static void rt_ge_block(rt_ge *g, const rt_kir_block *blk, int ind);

// A serial loop of more constant trips than this is unrolled RT_GE_SERIAL_UNROLL times, not
// left to the compiler: NVRTC 13 unrolled softmax's 1024-trip loop Y = e / s (an IEEE division
// is a long branchy sequence) in full and took 46 s to compile that one kernel, 0.5 s unrolled
// 4 times. Shorter loops (the golden kernels' are at most 48 trips) keep the compiler's choice.
#define RT_GE_SERIAL_MAX_TRIPS 64
#define RT_GE_SERIAL_UNROLL    4

static bool rt_ge_long_serial(const rt_kir_node *n) {
    int64_t lo, hi;
    return n->loop_kind == RT_KIR_LOOP_SERIAL && rt_kir_is_int(n->lo, &lo) &&
           rt_kir_is_int(n->hi, &hi) && hi - lo > RT_GE_SERIAL_MAX_TRIPS;
}

// One side of a RT_KIR_N_MOVE4: a 128-bit access where the stride is 1 on a data or shared
// buffer, else element by element.
// 16-bit float buffers go element by element (converting).
static bool rt_ge_vec_side(const rt_ge *g, int32_t buf, int64_t stride) {
    rt_kir_buf_role r = g->k->bufs[buf].role;
    return stride == 1 && (r == RT_KIR_BUF_DATA || r == RT_KIR_BUF_SHARED) &&
           rt_ge_mem_dtype(g->gk, buf) == RT_DTYPE_COUNT;
}

// Element `idx + off` of buf as a float expression, and a store of `val` to it.
static const char *rt_ge_elem_ld(const rt_ge *g, int32_t buf, const char *idx, int64_t off) {
    rt_dtype mt = rt_ge_mem_dtype(g->gk, buf);
    const char *name = g->k->bufs[buf].name;
    if (mt == RT_DTYPE_COUNT)
        return rt_arena_printf(g->b->arena, "%s[%s + %lld]", name, idx, (long long)off);
    return rt_arena_printf(g->b->arena, "%s(%s, %s + %lld)",
                           mt == RT_DTYPE_F16 ? "rt_ld_f16" : "rt_ld_bf16", name, idx,
                           (long long)off);
}
static void rt_ge_elem_st(rt_ge *g, int ind, int32_t buf, const char *idx, const char *val) {
    rt_dtype mt = rt_ge_mem_dtype(g->gk, buf);
    const char *name = g->k->bufs[buf].name;
    if (mt == RT_DTYPE_COUNT)
        rt_buf_linef(g->b, ind, "%s[%s] = %s;", name, idx, val);
    else
        rt_buf_linef(g->b, ind, "%s(%s, %s, %s);", mt == RT_DTYPE_F16 ? "rt_st_f16" : "rt_st_bf16",
                     name, idx, val);
}

static void rt_ge_move4(rt_ge *g, const rt_kir_node *n, int ind) {
    static const char *const comp[4] = {"x", "y", "z", "w"};
    rt_buf *b = g->b;
    const rt_gpu_dialect *d = g->d;
    const char *dst = g->k->bufs[n->buf].name, *src = g->k->bufs[n->src_buf].name;
    const char *di = rt_ge_str(g, n->index), *si = rt_ge_str(g, n->src_index);
    rt_buf_linef(b, ind, "{");
    if (rt_ge_vec_side(g, n->src_buf, n->src_stride)) {
        if (d->vec_fns)
            rt_buf_linef(b, ind + 1, "%s rt_v = vload4(0, &%s[%s]);", d->vec4, src, si);
        else
            rt_buf_linef(b, ind + 1, "%s rt_v = *(const %s *)(&%s[%s]);", d->vec4, d->vec4, src,
                         si);
    } else {
        rt_buf_linef(b, ind + 1, "%s rt_v;", d->vec4);
        for (int32_t i = 0; i < 4; i++)
            rt_buf_linef(b, ind + 1, "rt_v.%s = %s;", comp[i],
                         rt_ge_elem_ld(g, n->src_buf, si, i * n->src_stride));
    }
    if (rt_ge_vec_side(g, n->buf, n->stride)) {
        if (d->vec_fns)
            rt_buf_linef(b, ind + 1, "vstore4(rt_v, 0, &%s[%s]);", dst, di);
        else
            rt_buf_linef(b, ind + 1, "*(%s *)(&%s[%s]) = rt_v;", d->vec4, dst, di);
    } else {
        for (int32_t i = 0; i < 4; i++)
            rt_ge_elem_st(g, ind + 1, n->buf,
                          rt_arena_printf(b->arena, "%s + %lld", di, (long long)(i * n->stride)),
                          rt_arena_printf(b->arena, "rt_v.%s", comp[i]));
    }
    rt_buf_linef(b, ind, "}");
}

static void rt_ge_node(rt_ge *g, const rt_kir_node *n, int ind) {
    rt_buf *b = g->b;
    const rt_kir_phase *p = g->p;
    switch (n->kind) {
    case RT_KIR_N_LOOP: {
        const char *v = p->vars[n->var].name;
        if (n->loop_kind == RT_KIR_LOOP_UNROLL)
            rt_buf_linef(b, ind, "%s", g->d->unroll);
        else if (rt_ge_long_serial(n))
            rt_buf_linef(b, ind, "%s %d", g->d->unroll, RT_GE_SERIAL_UNROLL);
        rt_buf_linef(b, ind, "for (%s = %s; %s < %s; ++%s) {", v, rt_ge_str(g, n->lo), v,
                     rt_ge_str(g, n->hi), v);
        rt_ge_block(g, &n->body, ind + 1);
        rt_buf_linef(b, ind, "}");
        return;
    }
    case RT_KIR_N_LET:
    case RT_KIR_N_FSET:
        rt_buf_linef(b, ind, "%s = %s;", p->vars[n->var].name, rt_ge_str(g, n->value));
        return;
    case RT_KIR_N_STORE:
        rt_ge_elem_st(g, ind, n->buf, rt_ge_str(g, n->index), rt_ge_str(g, n->value));
        return;
    case RT_KIR_N_IF:
        rt_buf_linef(b, ind, "if (%s) {", rt_ge_str(g, n->cond));
        rt_ge_block(g, &n->body, ind + 1);
        if (n->else_body.n > 0) {
            rt_buf_linef(b, ind, "} else {");
            rt_ge_block(g, &n->else_body, ind + 1);
        }
        rt_buf_linef(b, ind, "}");
        return;
    case RT_KIR_N_COPY:
        rt_buf_linef(b, ind, "// copy: %s", n->text ? n->text : "");
        rt_ge_block(g, &n->body, ind);
        return;
    case RT_KIR_N_BARRIER:
        rt_buf_linef(b, ind, "%s", n->var == 1 ? g->d->barrier_global : g->d->barrier);
        return;
    case RT_KIR_N_COMMENT:
        rt_buf_linef(b, ind, "// %s", n->text ? n->text : "");
        return;
    case RT_KIR_N_MOVE4:
        rt_ge_move4(g, n, ind);
        return;
    case RT_KIR_N_PREFETCH: // a CPU cache hint
        rt_buf_linef(b, ind, "// prefetch %s[%s]", g->k->bufs[n->buf].name, rt_ge_str(g, n->index));
        return;
    default:
        g->bad = true; // micro-kernels are a CPU construct
        return;
    }
}

static void rt_ge_block(rt_ge *g, const rt_kir_block *blk, int ind) {
    for (int32_t i = 0; i < blk->n; i++)
        rt_ge_node(g, blk->nodes[i], ind);
}

static void rt_ge_phase(rt_ge *g, int32_t pi) {
    const rt_gpu_dialect *d = g->d;
    const rt_kir_kernel *k = g->k;
    const rt_kir_phase *p = &k->phases[pi];
    const rt_gpu_phase *gp = &g->gk->phases[pi];
    rt_buf *b = g->b;
    g->p = p;
    char bounds[96];
    snprintf(bounds, sizeof bounds, d->bounds_fmt, (int)p->threads);
    rt_buf_linef(b, 0, "// %s", p->what);
    if (d->bounds_after_void)
        rt_buf_linef(b, 0, "%s void %s", d->kernel_qual, bounds);
    else
        rt_buf_linef(b, 0, "%s %s void", d->kernel_qual, bounds);
    rt_buf_printf(b, "%s(", gp->kernel_name);
    bool first = true;
    for (int32_t i = 0; i < g->gk->n_bufs; i++) {
        const rt_gpu_buffer *gb = &g->gk->bufs[i];
        const rt_kir_buf *kb = &k->bufs[gb->kir_buf];
        rt_dtype mt = rt_ge_mem_dtype(g->gk, gb->kir_buf);
        const char *ty = mt == RT_DTYPE_F16    ? d->f16_type
                         : mt == RT_DTYPE_BF16 ? d->bf16_type
                                               : rt_ge_type(g, kb->type);
        rt_buf_printf(b, "%s%s%s%s *%s %s", first ? "" : ",\n    ", d->global_qual,
                      kb->written ? "" : "const ", ty, d->restrict_kw, kb->name);
        first = false;
    }
    if (p->levels.on) // the level of this launch: one launch per level (rt_gpu_phase_steps)
        rt_buf_printf(b, "%sint rt_level", first ? "" : ",\n    ");
    rt_buf_puts(b, ") {\n");
    if (gp->body) { // the matrix-instruction GEMM (lower-gpu-mma.c)
        rt_buf_puts(b, gp->body);
        rt_buf_linef(b, 0, "}");
        rt_buf_linef(b, 0, "%s", "");
        return;
    }
    for (int32_t i = 0; i < k->n_bufs; i++) {
        const rt_kir_buf *kb = &k->bufs[i];
        if (kb->dim != pi)
            continue;
        if (kb->role == RT_KIR_BUF_SHARED)
            rt_buf_linef(b, 1, "%s %s %s[%lld]%s%s;", d->shared_qual, rt_ge_type(g, kb->type),
                         kb->name, (long long)kb->elems, kb->align16 ? " " : "",
                         kb->align16 ? d->align16 : "");
        else if (kb->role == RT_KIR_BUF_LOCAL)
            rt_buf_linef(b, 1, "%s %s[%lld];", rt_ge_type(g, kb->type), kb->name,
                         (long long)kb->elems);
    }
    // variables, grouped by type, in order of creation
    for (int32_t t = 0; t < RT_KIR_TYPE_COUNT; t++) {
        bool any = false;
        for (int32_t v = 0; v < p->n_vars; v++) {
            if ((int32_t)p->vars[v].type != t)
                continue;
            rt_buf_printf(b, "%s%s",
                          any ? ", "
                              : rt_arena_printf(b->arena, "    %s ", rt_ge_type(g, (rt_kir_type)t)),
                          p->vars[v].name);
            any = true;
        }
        if (any)
            rt_buf_puts(b, ";\n");
    }
    rt_buf_linef(b, 1, "%s = %s;", p->vars[p->item_var].name, d->block_idx[0]);
    rt_buf_linef(b, 1, "%s = %s;", p->vars[p->thread_var].name, d->thread_idx);
    for (int32_t i = 0; i < 2; i++)
        if (p->grid_var[i] >= 0)
            rt_buf_linef(b, 1, "%s = %s;", p->vars[p->grid_var[i]].name, d->block_idx[1 + i]);
    if (p->levels.on)
        rt_buf_linef(b, 1, "%s = rt_level;", p->vars[p->levels.level_var].name);
    rt_ge_block(g, &p->body, 1);
    rt_buf_linef(b, 0, "}");
    rt_buf_linef(b, 0, "%s", "");
}

static rt_status rt_gpu_emit_text(rt_arena *a, const rt_gpu_kernel *k, const rt_gpu_dialect *d,
                                  const char **out_text, rt_err *err) {
    RT_TRY(rt_kir_validate(k->kir, err));
    for (int32_t i = 0; i < k->kir->n_phases; i++)
        if (k->kir->phases[i].threads < 1)
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "kernel %s, phase %d is not a GPU phase",
                           k->kir->name, (int)i);
    rt_buf b;
    rt_buf_init(&b, a);
    rt_ge g = {.gk = k, .k = k->kir, .d = d, .b = &b};
    // header comment
    rt_buf_linef(&b, 0, "// %s kernel generated by rtgen", d->target);
    const char *h = k->header ? k->header : "";
    while (*h) {
        const char *nl = strchr(h, '\n');
        size_t n = nl ? (size_t)(nl - h) : strlen(h);
        rt_buf_puts(&b, "// ");
        rt_buf_putn(&b, h, n);
        rt_buf_puts(&b, "\n");
        h += n + (nl ? 1 : 0);
    }
    rt_buf_puts(&b, d->prelude);
    bool has16[2] = {false, false};
    for (int32_t i = 0; i < k->n_bufs; i++) {
        rt_dtype mt = rt_ge_mem_dtype(k, k->bufs[i].kir_buf);
        has16[0] |= mt == RT_DTYPE_F16;
        has16[1] |= mt == RT_DTYPE_BF16;
    }
    if (has16[0])
        rt_buf_puts(&b, d->f16_prelude);
    if (has16[1])
        rt_buf_puts(&b, d->bf16_prelude);
    bool mma = false, mma_sync = false, mfma = false;
    for (int32_t i = 0; i < k->n_phases; i++) {
        mma |= k->phases[i].body != NULL;
        mma_sync |= k->phases[i].mma_sync;
        mfma |= k->phases[i].mfma;
    }
    if (mma && d != (mfma ? &rt_gpu_dialect_hip : &rt_gpu_dialect_cuda))
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       "kernel %s runs on matrix instructions (%s), which only the %s target "
                       "prints (got %s)",
                       k->kir->name, mfma ? "MFMA" : "WMMA", mfma ? "hip" : "cuda", d->target);
    if (mma && !mfma)
        rt_buf_puts(&b, "#include <mma.h>\n#include <cuda_pipeline.h>\nusing namespace nvcuda;\n");
    if (mma_sync)
        rt_buf_puts(&b, rt_gpu_mma_sync_prelude);
    if (mfma)
        rt_buf_puts(&b, rt_gpu_mfma_prelude);
    const char *it = k->idx32 ? "int" : d->i64;
    rt_buf_linef(&b, 0, "%s %s rt_floordiv(%s a, %s b) {", d->fn_qual, it, it, it);
    rt_buf_linef(&b, 1, "%s q = a / b;", it);
    rt_buf_linef(&b, 1, "return (a %% b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;");
    rt_buf_linef(&b, 0, "}");
    rt_buf_linef(&b, 0, "%s %s rt_floormod(%s a, %s b) {", d->fn_qual, it, it, it);
    rt_buf_linef(&b, 1, "return a - rt_floordiv(a, b) * b;");
    rt_buf_linef(&b, 0, "}");
    rt_buf_linef(&b, 0, "%s", "");
    for (int32_t i = 0; i < k->kir->n_phases; i++)
        rt_ge_phase(&g, i);
    if (b.oom)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    if (g.bad)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       "kernel %s has a construct the GPU emitter cannot print", k->kir->name);
    *out_text = b.data;
    return RT_OK;
}

const char *rt_gpu_candidate_line(rt_arena *a, const rt_device *dev, const rt_rprog *p,
                                  int32_t rank) {
    return rt_arena_printf(a,
                           "candidate %d: predicted %.2f us, bottleneck %s, threads %lld, "
                           "blocks %lld\n",
                           (int)rank, p->predicted_ns / 1000.0,
                           p->bottleneck >= 0 && p->bottleneck < dev->n_levels
                               ? dev->level[p->bottleneck].name
                               : "compute",
                           (long long)p->threads_per_block, (long long)p->blocks);
}

rt_status rt_gpu_emit(rt_arena *a, const rt_gpu_kernel *k, const rt_gpu_dialect *d,
                      const char **out_text, rt_err *err) {
    return rt_arena_status(a, rt_gpu_emit_text(a, k, d, out_text, err), err);
}
