// lower-gpu.c: executes one ranked rProgram's GPU plan (perfmodel/gpu-plan.h, made once by the
// construction; decided nowhere here) as GPU-structured kernel IR (kir.h): blocks over the plan's
// grid dims, threads from its block tile divided by its register tile, and per thread a register
// tile STRIDED over the block's threads (thread t owns elements t, t + T, ... of each dim:
// coalesced accesses, few bank conflicts, as Roller/TVM schedule). The plan's modes:
//   staged   contractions (matmul, conv, depthwise conv, linear, ragged qkt / attn_v): every
//            input's data tile of a reduction step is copied cooperatively into shared memory
//            (halo reads of pad tensors give the pad value, tails are bounds-checked — ragged
//            ones by the lengths, with offsets through rt_layout's start arrays — rows padded
//            by the bank rule), accumulators stay in a register array, a fused '=' epilogue
//            (bias + GELU) is applied in the store; a ragged reduction range takes a run-time
//            number of steps, and a block whose tile starts past a ragged extent skips them;
//   regtile  other reductions (pooling, reduce_mean, ragged proj / vgemm): the same register
//            tile, inputs read from global memory, ragged bounds from the length tensors;
//   direct   everything else (elementwise, triangular ranges): each thread runs the group's
//            statements for each element of its register tile;
//   rows     row-wise groups (softmax, layernorm): a row's threads share it (lower-gpu-rows.c);
//   tree     a tree group, level by level (lower-tree.c).
// Grid dims of ragged (vloop) extents are grid y / z, sized at launch from the bound lengths
// (src/run/gpu-launch.c) — or, where the plan says so (gpu-plan.h work_list), the phase runs a
// work list: the host lists the non-empty blocks longest first (gpu-launch.c rt_gpu_work_list),
// the grid is the list's length, and each block reads its (x item, y, z) from its entry.
#include "lower-gpu-impl.h"
#include "spec-eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rt_status rt_gl_unsupported(rt_gl *l, rt_loc loc, const char *what) {
    return rt_fail(l->err, RT_ERR_BACKEND, loc, "%s is not supported by the GPU backend", what);
}

rt_status rt_gl_nomem(rt_gl *l) {
    return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
}

// Truncating division / modulo of non-negative integers, folding constants and 1.
rt_kir_expr *rt_gl_udiv(rt_arena *a, rt_kir_expr *x, int64_t d) {
    int64_t c;
    if (!x || d == 1)
        return x;
    if (rt_kir_is_int(x, &c) && c >= 0)
        return rt_kir_int(a, c / d);
    return rt_kir_bin(a, RT_KIR_UDIV, x, rt_kir_int(a, d));
}
rt_kir_expr *rt_gl_umod(rt_arena *a, rt_kir_expr *x, int64_t d) {
    int64_t c;
    if (!x)
        return NULL;
    if (d == 1)
        return rt_kir_int(a, 0);
    if (rt_kir_is_int(x, &c) && c >= 0)
        return rt_kir_int(a, c % d);
    return rt_kir_bin(a, RT_KIR_UMOD, x, rt_kir_int(a, d));
}

// Appends `var = value` (integer) and returns a reference to var.
rt_kir_expr *rt_gl_let(rt_gl *l, rt_kir_block *b, const char *name, rt_kir_expr *value) {
    int32_t v = rt_kir_add_var(l->a, l->ph, name, RT_KIR_I64);
    rt_kir_node *n = v >= 0 && value ? rt_kir_append(l->a, b, RT_KIR_N_LET) : NULL;
    if (!n) {
        l->oom = true;
        return NULL;
    }
    n->var = v;
    n->value = value;
    return rt_kir_var_ref(l->a, l->ph, v);
}

void rt_gl_store(rt_gl *l, rt_kir_block *b, int32_t buf, rt_kir_expr *idx, rt_kir_expr *value) {
    rt_kir_node *n = idx && value ? rt_kir_append(l->a, b, RT_KIR_N_STORE) : NULL;
    RT_GL_CHECK(l, n);
    if (n) {
        n->buf = buf;
        n->index = idx;
        n->value = rt_kir_cast(l->a, l->k->bufs[buf].type, value);
        RT_GL_CHECK(l, n->value);
    }
}

rt_kir_node *rt_gl_if(rt_gl *l, rt_kir_block *b, rt_kir_expr *cond) {
    rt_kir_node *n = cond ? rt_kir_append(l->a, b, RT_KIR_N_IF) : NULL;
    RT_GL_CHECK(l, n);
    if (n)
        n->cond = cond;
    return n;
}

// ---------------------------------------------------------------------------------------------
// Buffers: a data array per tensor and an int32 start array per ragged dim, in tensor order
// ---------------------------------------------------------------------------------------------

// The int32 arrays of every tree parameter a statement names (rt_kir_tree_field), after the
// tensors' buffers.
static rt_status rt_gl_tree_buffers(rt_gl *l, rt_gpu_kernel *gk) {
    const rt_op *op = l->op;
    RT_TRY(rt_tree_add_buffers(l->a, l->k, op, &l->tree_buf, &l->tree_child, l->err));
    for (int32_t t = 0; t < op->n_trees; t++)
        for (int32_t f = 0; f < RT_KIR_TREE_FIELD_COUNT; f++) {
            if (l->tree_buf[t][f] < 0)
                continue;
            rt_gpu_buffer *gb = &gk->bufs[gk->n_bufs++];
            gb->name = l->k->bufs[l->tree_buf[t][f]].name;
            gb->is_tree = true;
            gb->tensor = t;
            gb->dim = f;
            gb->dtype = RT_DTYPE_I32;
            gb->kir_buf = l->tree_buf[t][f];
        }
    return RT_OK;
}

static rt_status rt_gl_buffers(rt_gl *l, rt_gpu_kernel *gk) {
    const rt_op *op = l->op;
    RT_ALLOC(l->a, l->data_buf, op->n_tensors, l->err);
    RT_ALLOC(l->a, l->start_buf, op->n_tensors, l->err);
    RT_ALLOC(l->a, l->extent, op->n_tensors, l->err);
    RT_ALLOC(l->a, gk->bufs,
             op->n_tensors * (RT_MAX_DIMS + 1) + op->n_trees * RT_KIR_TREE_FIELD_COUNT +
                 op->n_stmts,
             l->err);
    for (int32_t t = 0; t < op->n_tensors; t++) {
        const rt_tensor *tn = &op->tensors[t];
        rt_kir_type ty;
        switch (tn->dtype) {
        case RT_DTYPE_F32:
        case RT_DTYPE_F16: // computed in float; the emitter converts at loads and stores
        case RT_DTYPE_BF16:
            ty = RT_KIR_F32;
            break;
        case RT_DTYPE_F64:
            ty = RT_KIR_F64;
            break;
        case RT_DTYPE_I32:
            ty = RT_KIR_I32;
            break;
        default:
            return rt_gl_unsupported(l, tn->loc,
                                     rt_arena_printf(l->a, "tensor '%s' of type %s", tn->name,
                                                     rt_dtype_name(tn->dtype)));
        }
        l->data_buf[t] = rt_kir_add_buf(l->a, l->k, rt_arena_printf(l->a, "t_%s", tn->name),
                                        RT_KIR_BUF_DATA, ty, t, -1);
        if (l->data_buf[t] < 0)
            return rt_gl_nomem(l);
        rt_gpu_buffer *gb = &gk->bufs[gk->n_bufs++];
        gb->name = l->k->bufs[l->data_buf[t]].name;
        gb->tensor = t;
        gb->dtype = tn->dtype;
        gb->kir_buf = l->data_buf[t];
        for (int32_t d = 0; d < RT_MAX_DIMS; d++)
            l->start_buf[t][d] = -1;
        for (int32_t d = 0; d < tn->n_dims; d++) {
            if (rt_expr_mentions_dimref(tn->dims[d].extent)) {
                l->extent[t][d] = -1;
                l->start_buf[t][d] = rt_kir_add_buf(
                    l->a, l->k, rt_arena_printf(l->a, "t_%s_start%d", tn->name, (int)d),
                    RT_KIR_BUF_START, RT_KIR_I32, t, d);
                if (l->start_buf[t][d] < 0)
                    return rt_gl_nomem(l);
                rt_gpu_buffer *sb = &gk->bufs[gk->n_bufs++];
                sb->name = l->k->bufs[l->start_buf[t][d]].name;
                sb->is_start = true;
                sb->tensor = t;
                sb->dim = d;
                sb->dtype = RT_DTYPE_I32;
                sb->kir_buf = l->start_buf[t][d];
            } else if (!tn->dims[d].extent ||
                       !rt_expr_const_int(op, tn->dims[d].extent, &l->extent[t][d])) {
                return rt_gl_unsupported(
                    l, tn->dims[d].loc,
                    rt_arena_printf(l->a, "a run-time extent of '%s'", tn->name));
            }
        }
    }
    return rt_gl_tree_buffers(l, gk);
}

// The int32 work list of each plan phase that runs one (gpu-plan.h work_list), after the other
// buffers: w_p<i>, read only.
static rt_status rt_gl_work_buffers(rt_gl *l, const rt_gpu_plan *plan, rt_gpu_kernel *gk) {
    RT_ALLOC(l->a, l->work_buf, rt_at_least_one((size_t)plan->n_phases), l->err);
    RT_ALLOC(l->a, l->work_kbuf, rt_at_least_one((size_t)plan->n_phases), l->err);
    for (int32_t i = 0; i < plan->n_phases; i++) {
        l->work_buf[i] = l->work_kbuf[i] = -1;
        if (!plan->phases[i].work_list)
            continue;
        int32_t kb = rt_kir_add_buf(l->a, l->k, rt_arena_printf(l->a, "w_p%d", (int)i),
                                    RT_KIR_BUF_START, RT_KIR_I32, -1, i);
        if (kb < 0)
            return rt_gl_nomem(l);
        l->work_buf[i] = gk->n_bufs;
        l->work_kbuf[i] = kb;
        rt_gpu_buffer *gb = &gk->bufs[gk->n_bufs++];
        *gb = (rt_gpu_buffer){.name = l->k->bufs[kb].name,
                              .is_work = true,
                              .tensor = -1,
                              .dim = i,
                              .dtype = RT_DTYPE_I32,
                              .kir_buf = kb};
    }
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Expressions (op-spec IR -> kernel IR) in the context of statement l->s
// ---------------------------------------------------------------------------------------------

// The staged read e is, -1 when none.
static int32_t rt_gl_find_stage(rt_gl *l, const rt_expr *e) {
    if (!l->staging || !l->plan)
        return -1;
    for (int32_t i = 0; i < l->plan->n_stage; i++)
        if (l->plan->stage[i].read == e || rt_expr_equal(l->plan->stage[i].read, e))
            return i;
    return -1;
}

// A tensor read (rt_lx_ops.read): the substituted value of an epilogue's read at the prefix
// vars, a staged read from its shared-memory tile, else a load from global memory.
static rt_status rt_gl_read(rt_lx *x, const rt_expr *e, rt_kir_expr **out) {
    rt_gl *l = x->user;
    rt_arena *a = l->a;
    if (e->tensor == l->subst_tensor && e->n_args == l->subst_n) {
        bool at_prefix = true;
        for (int32_t d = 0; d < e->n_args; d++)
            at_prefix = at_prefix && e->args[d]->kind == RT_EXPR_INDEX && e->args[d]->var == d;
        if (at_prefix) {
            *out = l->subst_value;
            return RT_OK;
        }
    }
    rt_kir_expr *idx[RT_MAX_DIMS];
    RT_TRY(rt_lx_indices(x, e, idx));
    int32_t si = rt_gl_find_stage(l, e);
    if (si < 0)
        return rt_lx_load(x, e, idx, out);
    const rt_gpu_stage *sg = &l->plan->stage[si];
    if (sg->frag >= 0 && l->frag_e && l->frag_buf[si] >= 0) {
        // the element's register-tile index along the fragment's dim (as rt_gl_bind decomposes)
        int64_t rstride = 1;
        for (int32_t d = l->plan->n_dims - 1; d > sg->frag; d--)
            rstride *= l->plan->dims[d].R;
        rt_kir_expr *j =
            rt_gl_umod(a, rt_gl_udiv(a, l->frag_e, rstride), l->plan->dims[sg->frag].R);
        *out = rt_kir_load(a, l->k, l->frag_buf[si], j);
        if (!*out)
            x->oom = true;
        return RT_OK;
    }
    rt_kir_expr *off = rt_kir_int(a, 0);
    for (int32_t d = 0; d < sg->n_dims; d++) {
        rt_kir_expr *rel =
            rt_kir_bin(a, RT_KIR_SUB, idx[d], rt_kir_var_ref(a, l->ph, l->lo_var[si][d]));
        off = rt_kir_bin(a, RT_KIR_ADD, off,
                         rt_kir_bin(a, RT_KIR_MUL, rel, rt_kir_int(a, sg->stride[d])));
    }
    *out = rt_kir_load(a, l->k, l->sh_buf[si], off);
    if (!*out)
        x->oom = true;
    return RT_OK;
}

static const struct rt_lx_ops rt_gl_lx_ops = {
    .backend = "GPU", .sum_inner_loop = RT_KIR_LOOP_SERIAL, .read = rt_gl_read};

// The expression context (lower-expr.h) of statement l->si; rt_gl_done hands its oom back.
static rt_lx rt_gl_ctx(rt_gl *l) {
    return (rt_lx){.ops = &rt_gl_lx_ops,
                   .a = l->a,
                   .op = l->op,
                   .k = l->k,
                   .ph = l->ph,
                   .s = l->s,
                   .var_of = l->s && l->var_of ? l->var_of[l->si] : NULL,
                   .ct = l->ct,
                   .pre = l->pre,
                   .data_buf = l->data_buf,
                   .start_buf = l->start_buf,
                   .extent = l->extent,
                   .tree_child_buf = l->tree_child,
                   .user = l,
                   .err = l->err};
}

static rt_status rt_gl_done(rt_gl *l, const rt_lx *x, rt_status st) {
    RT_GL_CHECK(l, !x->oom);
    return st;
}

// Flat offset of tensor t at idx (rt_layout); valid (may be NULL) gets the in-extent condition
// of the dense dims.
rt_kir_expr *rt_gl_offset(rt_gl *l, int32_t t, rt_kir_expr **idx, rt_kir_expr **valid) {
    rt_lx x = rt_gl_ctx(l);
    rt_kir_expr *pos = rt_lx_offset(&x, t, idx, valid);
    RT_GL_CHECK(l, !x.oom);
    return pos;
}

rt_status rt_gl_range(rt_gl *l, int32_t v, rt_kir_expr **lo, rt_kir_expr **hi) {
    rt_lx x = rt_gl_ctx(l);
    return rt_gl_done(l, &x, rt_lx_range(&x, v, lo, hi));
}

// A serial loop over statement var v in its range, binding it; returns the body (NULL: oom).
rt_status rt_gl_var_loop(rt_gl *l, rt_kir_block *b, int32_t v, rt_kir_block **body) {
    rt_kir_expr *lo, *hi;
    RT_TRY(rt_gl_range(l, v, &lo, &hi));
    int32_t pv = rt_kir_add_var(l->a, l->ph, l->s->vars[v].name, RT_KIR_I64);
    l->var_of[l->si][v] = pv;
    rt_kir_node *loop = pv >= 0 ? rt_kir_loop(l->a, b, pv, lo, hi, RT_KIR_LOOP_SERIAL) : NULL;
    RT_GL_CHECK(l, loop);
    *body = loop ? &loop->body : NULL;
    return RT_OK;
}

rt_status rt_gl_num(rt_gl *l, const rt_expr *e, rt_kir_expr **out) {
    rt_lx x = rt_gl_ctx(l);
    return rt_gl_done(l, &x, rt_lx_num(&x, e, out));
}

// ---------------------------------------------------------------------------------------------
// Accumulators
// ---------------------------------------------------------------------------------------------

rt_kir_expr *rt_gl_combine(rt_arena *a, rt_assign op, rt_kir_expr *cur, rt_kir_expr *x) {
    switch (op) {
    case RT_ASSIGN_MUL_INIT:
        return rt_kir_bin(a, RT_KIR_MUL, cur, x);
    case RT_ASSIGN_MAX_INIT:
        return rt_kir_bin(a, RT_KIR_MAX, cur, x);
    case RT_ASSIGN_MIN_INIT:
        return rt_kir_bin(a, RT_KIR_MIN, cur, x);
    default:
        return rt_kir_bin(a, RT_KIR_ADD, cur, x);
    }
}

// ---------------------------------------------------------------------------------------------
// Building a phase
// ---------------------------------------------------------------------------------------------

// Block coordinates: the grid x linear index `item` decomposed over the dense dims (inner dims
// fastest, optionally in grouped order over the two innermost), ragged dims from the vars
// gy[0] / gy[1] (grid y / z, or a work list's entry); thread coordinates from `thread` (the
// thread index; in rows mode its row slot) (inner dims fastest: coalesced).
static void rt_gl_coords(rt_gl *l, const rt_gpu_phase_plan *pl, rt_kir_block *b, rt_kir_expr *item,
                         const int32_t *gy, rt_kir_expr *thread) {
    rt_arena *a = l->a;
    int32_t xs[RT_GL_MAX_DIMS], nx = 0;
    for (int32_t d = 0; d < pl->n_dims; d++)
        if (pl->dims[d].grid == 0)
            xs[nx++] = d;
    rt_kir_expr *rest = item;
    if (pl->raster) {
        // the two innermost x dims with more than one block
        int32_t in = -1, out = -1;
        for (int32_t i = nx - 1; i >= 0; i--) {
            if (pl->dims[xs[i]].nb <= 1)
                continue;
            if (in < 0)
                in = i;
            else if (out < 0)
                out = i;
        }
        const rt_gpu_dim *go = &pl->dims[xs[out]], *gi = &pl->dims[xs[in]];
        const int64_t G = pl->raster;
        int64_t pair = go->nb * gi->nb, width = G * gi->nb;
        rt_kir_expr *L = rt_gl_let(l, b, "blk_pair", rt_gl_umod(a, rest, pair));
        rest = rt_gl_let(l, b, "blk_rest", rt_gl_udiv(a, rest, pair));
        rt_kir_expr *grp = rt_gl_let(l, b, "blk_group", rt_gl_udiv(a, L, width));
        rt_kir_expr *first =
            rt_gl_let(l, b, "blk_first", rt_kir_bin(a, RT_KIR_MUL, grp, rt_kir_int(a, G)));
        rt_kir_expr *gsz = rt_gl_let(
            l, b, "blk_gsize",
            rt_kir_bin(a, RT_KIR_MIN, rt_kir_bin(a, RT_KIR_SUB, rt_kir_int(a, go->nb), first),
                       rt_kir_int(a, G)));
        rt_kir_expr *inw = rt_gl_let(l, b, "blk_in_group", rt_gl_umod(a, L, width));
        rt_kir_expr *vo = rt_kir_bin(a, RT_KIR_ADD, first, rt_kir_bin(a, RT_KIR_UMOD, inw, gsz));
        rt_kir_expr *vi = rt_kir_bin(a, RT_KIR_UDIV, inw, gsz);
        rt_kir_expr *ro = rt_gl_let(l, b, "b_pair_o", vo), *ri = rt_gl_let(l, b, "b_pair_i", vi);
        RT_GL_CHECK(l, ro && ri);
        if (ro && ri) {
            l->bvar[xs[out]] = ro->var;
            l->bvar[xs[in]] = ri->var;
        }
        // the pair is peeled; the remaining x dims decompose rest below
        int32_t keep = 0;
        for (int32_t i = 0; i < nx; i++)
            if (i != in && i != out)
                xs[keep++] = xs[i];
        nx = keep;
    }
    for (int32_t i = nx - 1; i >= 0; i--) {
        const rt_gpu_dim *g = &pl->dims[xs[i]];
        rt_kir_expr *v = i == 0 ? rest : rt_gl_umod(a, rest, g->nb);
        rt_kir_expr *r = rt_gl_let(l, b, "b", v);
        if (r)
            l->bvar[xs[i]] = r->var;
        if (i > 0)
            rest = rt_gl_udiv(a, rest, g->nb);
    }
    for (int32_t d = 0; d < pl->n_dims; d++)
        if (pl->dims[d].grid > 0)
            l->bvar[d] = gy[pl->dims[d].grid - 1];
    rest = thread;
    int32_t outer_t = -1;
    for (int32_t d = 0; d < pl->n_dims; d++)
        if (pl->dims[d].nt > 1 && outer_t < 0)
            outer_t = d;
    for (int32_t d = pl->n_dims - 1; d >= 0; d--) {
        const rt_gpu_dim *g = &pl->dims[d];
        rt_kir_expr *v =
            g->nt == 1 ? rt_kir_int(a, 0) : (d == outer_t ? rest : rt_gl_umod(a, rest, g->nt));
        rt_kir_expr *r = rt_gl_let(l, b, "t", v);
        if (r)
            l->tvar[d] = r->var;
        if (g->nt > 1)
            rest = rt_gl_udiv(a, rest, g->nt);
    }
}

// Binds the tiling statement's LHS vars (and the prefix of the phase's other statements) to
// element e of the thread's register tile; *valid receives the in-range condition.
rt_status rt_gl_bind(rt_gl *l, const rt_gpu_phase_plan *pl, rt_kir_block *b, rt_kir_expr *e,
                     rt_kir_expr **valid) {
    rt_arena *a = l->a;
    const rt_stmt *ts = &l->op->stmts[pl->tstmt];
    int32_t si = l->si;
    const rt_stmt *ss = l->s;
    l->si = pl->tstmt;
    l->s = ts;
    rt_kir_expr *ok = rt_kir_int(a, 1);
    int64_t rstride = 1;
    for (int32_t d = pl->n_dims - 1; d >= 0; d--) {
        const rt_gpu_dim *g = &pl->dims[d];
        rt_kir_expr *j = rt_gl_umod(a, rt_gl_udiv(a, e, rstride), g->R);
        rstride *= g->R;
        // strided: t + j * nt; in chunks of 4: (j / 4) * nt * 4 + t * 4 + j % 4
        rt_kir_expr *tv = rt_kir_var_ref(a, l->ph, l->tvar[d]);
        rt_kir_expr *within =
            g->chunk4
                ? rt_kir_bin(
                      a, RT_KIR_ADD,
                      rt_kir_bin(a, RT_KIR_MUL, rt_gl_udiv(a, j, 4), rt_kir_int(a, g->nt * 4)),
                      rt_kir_bin(a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_MUL, tv, rt_kir_int(a, 4)),
                                 rt_gl_umod(a, j, 4)))
                : rt_kir_bin(a, RT_KIR_ADD, tv, rt_kir_bin(a, RT_KIR_MUL, j, rt_kir_int(a, g->nt)));
        rt_kir_expr *lin = rt_kir_bin(
            a, RT_KIR_ADD,
            rt_kir_bin(a, RT_KIR_MUL, rt_kir_var_ref(a, l->ph, l->bvar[d]), rt_kir_int(a, g->T1)),
            within);
        if (g->ragged) {
            rt_kir_expr *r = rt_gl_let(l, b, ts->vars[g->members[0]].name, lin);
            if (r)
                l->var_of[pl->tstmt][g->members[0]] = r->var;
            continue;
        }
        if (g->n_members > 1 || g->extent % g->T1 != 0)
            ok = rt_kir_bin(a, RT_KIR_AND, ok,
                            rt_kir_bin(a, RT_KIR_LT, lin, rt_kir_int(a, g->extent)));
        rt_kir_expr *rest = g->n_members > 1 ? rt_gl_let(l, b, "lin", lin) : lin;
        for (int32_t k = g->n_members - 1; k >= 0; k--) {
            rt_kir_expr *v = k == 0 ? rest : rt_gl_umod(a, rest, g->mext[k]);
            if (k > 0)
                rest = rt_gl_udiv(a, rest, g->mext[k]);
            v = rt_kir_bin(a, RT_KIR_ADD, v, rt_kir_int(a, g->mlo[k]));
            rt_kir_expr *r = rt_gl_let(l, b, ts->vars[g->members[k]].name, v);
            if (r)
                l->var_of[pl->tstmt][g->members[k]] = r->var;
        }
    }
    // ragged members: lo <= v < hi with the other vars bound
    rt_status st = RT_OK;
    for (int32_t d = 0; d < pl->n_dims && st == RT_OK; d++) {
        const rt_gpu_dim *g = &pl->dims[d];
        if (!g->ragged)
            continue;
        rt_kir_expr *lo, *hi;
        st = rt_gl_range(l, g->members[0], &lo, &hi);
        if (st != RT_OK)
            break;
        rt_kir_expr *v = rt_kir_var_ref(a, l->ph, l->var_of[pl->tstmt][g->members[0]]);
        ok = rt_kir_bin(a, RT_KIR_AND, ok,
                        rt_kir_bin(a, RT_KIR_AND, rt_kir_bin(a, RT_KIR_GE, v, lo),
                                   rt_kir_bin(a, RT_KIR_LT, v, hi)));
    }
    // the other statements of the phase share the prefix
    for (int32_t k = pl->first; k < pl->first + pl->n_stmts; k++)
        if (k != pl->tstmt)
            for (int32_t v = 0; v < ts->n_lhs && v < l->op->stmts[k].n_vars; v++)
                l->var_of[k][v] = l->var_of[pl->tstmt][v];
    l->si = si;
    l->s = ss;
    *valid = ok;
    RT_GL_CHECK(l, ok);
    return st;
}

void rt_gl_set_stmt(rt_gl *l, int32_t si) {
    l->si = si;
    l->s = &l->op->stmts[si];
    l->ct = l->op->tensors[l->s->out].dtype == RT_DTYPE_F64 ? RT_KIR_F64 : RT_KIR_F32;
}

// Output offset of statement l->s at its bound LHS vars.
rt_status rt_gl_out_offset(rt_gl *l, rt_kir_expr **out) {
    const rt_stmt *s = l->s;
    rt_kir_expr *idx[RT_MAX_DIMS];
    for (int32_t d = 0; d < s->n_lhs; d++) {
        int32_t v = s->lhs_vars[d];
        idx[d] = v >= 0 && v < s->n_vars && l->var_of[l->si][v] >= 0
                     ? rt_kir_var_ref(l->a, l->ph, l->var_of[l->si][v])
                     : NULL;
        if (!idx[d])
            return rt_fail(l->err, RT_ERR_SPEC, s->loc, "output index outside its loop");
    }
    *out = rt_gl_offset(l, s->out, idx, NULL);
    return RT_OK;
}

// Direct mode: statement l->s at its bound prefix; loops over its remaining vars.
static rt_status rt_gl_direct_stmt(rt_gl *l, rt_kir_block *b, int32_t n_prefix) {
    rt_arena *a = l->a;
    const rt_stmt *s = l->s;
    int32_t red[2 * RT_MAX_DIMS], nr = 0;
    for (int32_t i = 0; i < s->n_loops; i++) {
        int32_t v = s->loops[i];
        if (v < 0 || v >= s->n_vars)
            return rt_fail(l->err, RT_ERR_SPEC, s->loc, "loop over an unknown index variable");
        if (s->vars[v].is_reduce) {
            red[nr++] = v;
            continue;
        }
        if (v < n_prefix)
            continue;
        RT_TRY(rt_gl_var_loop(l, b, v, &b));
        if (!b)
            return rt_gl_nomem(l);
    }
    rt_kir_expr *off;
    RT_TRY(rt_gl_out_offset(l, &off));
    int32_t ob = l->data_buf[s->out];
    rt_kir_expr *value;
    if (nr == 0 && s->op == RT_ASSIGN_SET) {
        l->pre = b;
        RT_TRY(rt_gl_num(l, s->rhs, &value));
    } else {
        int32_t acc = rt_kir_add_var(a, l->ph, "acc", l->ct);
        rt_kir_node *init = acc >= 0 ? rt_kir_append(a, b, RT_KIR_N_FSET) : NULL;
        if (!init)
            return rt_gl_nomem(l);
        init->var = acc;
        init->value = s->op == RT_ASSIGN_ADD ? rt_kir_cast(a, l->ct, rt_kir_load(a, l->k, ob, off))
                                             : rt_kir_flt(a, l->ct, rt_assign_identity(s->op));
        rt_kir_block *inner = b;
        for (int32_t i = 0; i < nr && inner; i++)
            RT_TRY(rt_gl_var_loop(l, inner, red[i], &inner));
        if (!inner)
            return rt_gl_nomem(l);
        l->pre = inner;
        rt_kir_expr *x;
        RT_TRY(rt_gl_num(l, s->rhs, &x));
        rt_kir_node *upd = rt_kir_append(a, inner, RT_KIR_N_FSET);
        RT_GL_CHECK(l, upd);
        if (upd) {
            upd->var = acc;
            upd->value = rt_gl_combine(a, s->op, rt_kir_var_ref(a, l->ph, acc), x);
        }
        value = rt_kir_var_ref(a, l->ph, acc);
    }
    rt_gl_store(l, b, ob, off, value);
    return RT_OK;
}

static rt_status rt_gl_copies(rt_gl *l, const rt_gpu_phase_plan *pl, rt_kir_block *b,
                              const int32_t *base_var, const int64_t *T, bool interior) {
    rt_arena *a = l->a;
    for (int32_t i = 0; i < pl->n_stage; i++) {
        const rt_gpu_stage *sg = &pl->stage[i];
        rt_gpu_stage gi = *sg; // the read as this copy moves it
        gi.full = interior ? sg->ifull : sg->full;
        gi.gvec = interior ? sg->igvec : sg->gvec;
        const rt_gpu_stage *g = &gi;
        const rt_tensor *tn = &l->op->tensors[g->read->tensor];
        rt_kir_node *cp = rt_kir_append(a, b, RT_KIR_N_COPY);
        if (!cp)
            return rt_gl_nomem(l);
        cp->text = rt_arena_printf(a, "%s data tile -> %s (%lld elements)", tn->name,
                                   l->k->bufs[l->sh_buf[i]].name, (long long)g->elems);
        rt_kir_block *cb = &cp->body;
        for (int32_t d = 0; d < g->n_dims; d++) {
            rt_kir_expr *lo = rt_kir_int(a, g->aff[d].c0);
            for (int32_t t = 0; t < g->aff[d].n_terms; t++) {
                int32_t v = g->aff[d].var[t];
                int64_t c = g->aff[d].coef[t];
                rt_kir_expr *bv = rt_kir_var_ref(a, l->ph, base_var[v]);
                if (c < 0)
                    bv = rt_kir_bin(a, RT_KIR_ADD, bv, rt_kir_int(a, T[v] - 1));
                lo = rt_kir_bin(a, RT_KIR_ADD, lo, rt_kir_bin(a, RT_KIR_MUL, bv, rt_kir_int(a, c)));
            }
            rt_kir_expr *r = rt_gl_let(l, cb, rt_arena_printf(a, "lo_%s%d", tn->name, (int)d), lo);
            if (r)
                l->lo_var[i][d] = r->var;
        }
        // a 128-bit copy (gvec) moves 4 elements of the tensor's innermost dim per item
        int64_t vw = g->gvec ? 4 : 1, total = 1;
        for (int32_t d = 0; d < g->n_dims; d++)
            total *= g->span[d];
        total /= vw;
        int64_t rounds = rt_ceil_div(total, pl->threads);
        int32_t cv = rt_kir_add_var(a, l->ph, "c", RT_KIR_I64);
        // not a ragged tensor's: each round's guard and start-array loads hold registers (an
        // unrolled 32-round qkt copy spilled 2 KiB on sm_90)
        bool ragged = false;
        for (int32_t d = 0; d < tn->n_dims; d++)
            ragged = ragged || l->start_buf[g->read->tensor][d] >= 0;
        rt_kir_loop_kind ck =
            rounds <= RT_GL_MAX_UNROLLED_COPY && !ragged ? RT_KIR_LOOP_UNROLL : RT_KIR_LOOP_SERIAL;
        rt_kir_node *loop =
            cv >= 0 ? rt_kir_loop(a, cb, cv, rt_kir_int(a, 0), rt_kir_int(a, rounds), ck) : NULL;
        if (!loop)
            return rt_gl_nomem(l);
        rt_kir_block *lb = &loop->body;
        rt_kir_expr *li = rt_kir_bin(
            a, RT_KIR_ADD,
            rt_kir_bin(a, RT_KIR_MUL, rt_kir_var_ref(a, l->ph, cv), rt_kir_int(a, pl->threads)),
            rt_kir_var_ref(a, l->ph, l->ph->thread_var));
        rt_kir_expr *lv = rt_gl_let(l, lb, "l", li);
        if (total % pl->threads != 0) {
            rt_kir_node *in = rt_gl_if(l, lb, rt_kir_bin(a, RT_KIR_LT, lv, rt_kir_int(a, total)));
            if (!in)
                return rt_gl_nomem(l);
            lb = &in->body;
        }
        rt_kir_expr *gidx[RT_MAX_DIMS], *soff = rt_kir_int(a, 0), *rest = lv;
        for (int32_t d = g->n_dims - 1; d >= 0; d--) {
            int64_t sp = d == g->n_dims - 1 ? g->span[d] / vw : g->span[d];
            rt_kir_expr *o = d == 0 ? rest : rt_gl_umod(a, rest, sp);
            if (d > 0)
                rest = rt_gl_udiv(a, rest, sp);
            if (d == g->n_dims - 1 && vw > 1)
                o = rt_kir_bin(a, RT_KIR_MUL, o, rt_kir_int(a, vw));
            rt_kir_expr *ov = rt_gl_let(l, lb, "o", o);
            gidx[d] = rt_kir_bin(a, RT_KIR_ADD, rt_kir_var_ref(a, l->ph, l->lo_var[i][d]), ov);
            soff = rt_kir_bin(a, RT_KIR_ADD, soff,
                              rt_kir_bin(a, RT_KIR_MUL, ov, rt_kir_int(a, g->stride[d])));
        }
        rt_kir_expr *valid;
        rt_kir_expr *off = rt_gl_offset(l, g->read->tensor, gidx, g->full ? NULL : &valid);
        if (g->gvec) { // 4 elements of a full tile, 16-byte aligned (gpu-plan.c rt_gp_vec4_read)
            rt_kir_node *mv = off && soff ? rt_kir_append(a, lb, RT_KIR_N_MOVE4) : NULL;
            if (!mv)
                return rt_gl_nomem(l);
            mv->buf = l->sh_buf[i];
            mv->index = soff;
            mv->stride = g->stride[g->n_dims - 1];
            mv->src_buf = l->data_buf[g->read->tensor];
            mv->src_index = off;
            mv->src_stride = 1;
            continue;
        }
        if (g->full) { // the plan proved every data tile inside the tensor: no guard
            rt_gl_store(l, lb, l->sh_buf[i], soff,
                        rt_kir_load(a, l->k, l->data_buf[g->read->tensor], off));
            continue;
        }
        RT_TRY(rt_gl_ragged_valid(l, g->read->tensor, gidx, &valid));
        rt_kir_expr *safe = rt_kir_select(a, valid, off, rt_kir_int(a, 0));
        rt_kir_expr *v = rt_kir_load(a, l->k, l->data_buf[g->read->tensor], safe);
        rt_kir_expr *val = rt_kir_select(
            a, valid, v, rt_kir_flt(a, RT_KIR_F32, tn->has_pad ? tn->pad_value : 0.0));
        rt_gl_store(l, lb, l->sh_buf[i], soff, val);
    }
    return RT_OK;
}

// One reduction step into the accumulators acc: a loop over the register tile's Rtot elements
// (unrolled when the plan says so), each adding the statement's right-hand side at its element;
// guarded: only elements inside the iteration space (a staged step reads shared tiles that
// were padded instead).
static rt_status rt_gl_acc_step(rt_gl *l, const rt_gpu_phase_plan *pl, rt_kir_block *inner,
                                int32_t acc, bool guarded) {
    rt_arena *a = l->a;
    rt_kir_loop_kind ek = pl->unroll ? RT_KIR_LOOP_UNROLL : RT_KIR_LOOP_SERIAL;
    int32_t ev = rt_kir_add_var(a, l->ph, "e", RT_KIR_I64);
    rt_kir_node *el =
        ev >= 0 ? rt_kir_loop(a, inner, ev, rt_kir_int(a, 0), rt_kir_int(a, pl->Rtot), ek) : NULL;
    if (!el)
        return rt_gl_nomem(l);
    rt_kir_expr *ok;
    RT_TRY(rt_gl_bind(l, pl, &el->body, rt_kir_var_ref(a, l->ph, ev), &ok));
    rt_gl_set_stmt(l, pl->tstmt);
    rt_kir_block *body = &el->body;
    if (guarded) {
        rt_kir_node *in = rt_gl_if(l, body, ok);
        if (!in)
            return rt_gl_nomem(l);
        body = &in->body;
    }
    l->pre = body;
    rt_kir_expr *x;
    l->frag_e = l->staging && pl->vec4 ? rt_kir_var_ref(a, l->ph, ev) : NULL;
    rt_status st = rt_gl_num(l, l->s->rhs, &x);
    l->frag_e = NULL;
    RT_TRY(st);
    rt_kir_expr *ei = rt_kir_var_ref(a, l->ph, ev);
    rt_gl_store(l, body, acc, ei, rt_gl_combine(a, l->s->op, rt_kir_load(a, l->k, acc, ei), x));
    return RT_OK;
}

// vec4 plans: each staged read's register fragment of the current reduction iteration, read
// from its shared tile 4 floats at a time: element j of the fragment's dim (chunk4) is at
// (j / 4) * nt * 4 + t * 4 + j % 4 of the shared row, the other dims at the bound reduction
// vars. rt_gl_read then takes the read from the fragment.
static rt_status rt_gl_fragments(rt_gl *l, const rt_gpu_phase_plan *pl, rt_kir_block *b) {
    rt_arena *a = l->a;
    int32_t ti = pl->tstmt, pi = l->k->n_phases - 1;
    for (int32_t i = 0; i < pl->n_stage; i++) {
        const rt_gpu_stage *sg = &pl->stage[i];
        const rt_gpu_dim *gd = &pl->dims[sg->frag];
        const char *tname = l->op->tensors[sg->read->tensor].name;
        int32_t fb =
            l->frag_buf[i] >= 0
                ? l->frag_buf[i]
                : rt_kir_add_buf(a, l->k, rt_arena_printf(a, "frag_%s_p%d", tname, (int)pi),
                                 RT_KIR_BUF_LOCAL, RT_KIR_F32, -1, pi);
        int32_t qv = rt_kir_add_var(a, l->ph, "q", RT_KIR_I64);
        if (fb < 0 || qv < 0)
            return rt_gl_nomem(l);
        l->k->bufs[fb].elems = gd->R;
        l->k->bufs[fb].written = true;
        l->frag_buf[i] = fb;
        rt_kir_expr *off = rt_kir_int(a, 0);
        for (int32_t d = 0; d < sg->n_dims; d++) {
            if (d == sg->vdim)
                continue;
            rt_kir_expr *idx = rt_kir_bin(
                a, RT_KIR_ADD, rt_kir_var_ref(a, l->ph, l->var_of[ti][sg->aff[d].var[0]]),
                rt_kir_int(a, sg->aff[d].c0));
            rt_kir_expr *rel =
                rt_kir_bin(a, RT_KIR_SUB, idx, rt_kir_var_ref(a, l->ph, l->lo_var[i][d]));
            off = rt_kir_bin(a, RT_KIR_ADD, off,
                             rt_kir_bin(a, RT_KIR_MUL, rel, rt_kir_int(a, sg->stride[d])));
        }
        rt_kir_expr *q = rt_kir_var_ref(a, l->ph, qv);
        off = rt_kir_bin(
            a, RT_KIR_ADD, off,
            rt_kir_bin(a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_MUL, q, rt_kir_int(a, gd->nt * 4)),
                       rt_kir_bin(a, RT_KIR_MUL, rt_kir_var_ref(a, l->ph, l->tvar[sg->frag]),
                                  rt_kir_int(a, 4))));
        rt_kir_node *loop =
            rt_kir_loop(a, b, qv, rt_kir_int(a, 0), rt_kir_int(a, gd->R / 4), RT_KIR_LOOP_UNROLL);
        rt_kir_node *mv = loop && off ? rt_kir_append(a, &loop->body, RT_KIR_N_MOVE4) : NULL;
        if (!mv)
            return rt_gl_nomem(l);
        mv->buf = fb;
        mv->index = rt_kir_bin(a, RT_KIR_MUL, rt_kir_var_ref(a, l->ph, qv), rt_kir_int(a, 4));
        mv->stride = 1;
        mv->src_buf = l->sh_buf[i];
        mv->src_index = off;
        mv->src_stride = 1;
    }
    return RT_OK;
}

// The reduction steps of a staged phase over steps [first, ...) of red[0..nr) — first applies
// to the plan's split_var (NULL: 0) — each step: the cooperative copies of the staged reads'
// data tiles into shared memory, a barrier, the step's loops over the shared tiles into the
// accumulators acc, a barrier. interior: an edge split's interior (rt_gpu_phase_plan.split),
// whose steps are the full ones (split_steps of split_var) and whose step loops are exact.
static rt_status rt_gl_steps(rt_gl *l, const rt_gpu_phase_plan *pl, rt_kir_block *b,
                             const int32_t *red, int32_t nr, int32_t acc, int32_t *base_var,
                             int64_t *T, bool interior, rt_kir_expr *first) {
    rt_arena *a = l->a;
    int32_t ti = pl->tstmt;
    const rt_stmt *s = l->s;
    rt_kir_block *inner = b;
    bool exact = pl->red_exact || interior || rt_gl_ragged_exact(l, pl, red, nr);
    int64_t lo_r[2 * RT_MAX_DIMS];
    rt_kir_expr *hi_r[2 * RT_MAX_DIMS];
    for (int32_t i = 0; i < nr; i++) {
        int32_t v = red[i];
        int64_t hi;
        rt_kir_expr *steps;
        rt_expr_const_int(l->op, s->vars[v].lo, &lo_r[i]);
        if (rt_expr_const_int(l->op, s->vars[v].hi, &hi)) {
            hi_r[i] = rt_kir_int(a, hi);
            steps = rt_kir_int(a, interior && v == pl->split_var
                                      ? pl->split_steps
                                      : rt_ceil_div(hi - lo_r[i], pl->red_T1[v]));
        } else { // a ragged range, the same for the block (gpu-plan.c rt_gp_stage_tiles)
            bool uniform;
            rt_kir_expr *lo;
            RT_TRY(rt_gl_range_at_origin(l, pl, base_var, v, &uniform, &lo, &hi_r[i]));
            if (!uniform)
                return rt_gl_unsupported(l, s->loc, "a ragged reduction that varies in a block");
            hi_r[i] = rt_gl_let(l, inner, rt_arena_printf(a, "end_%s", s->vars[v].name), hi_r[i]);
            steps = hi_r[i] ? rt_gl_udiv(a,
                                         rt_kir_bin(a, RT_KIR_ADD, hi_r[i],
                                                    rt_kir_int(a, pl->red_T1[v] - 1 - lo_r[i])),
                                         pl->red_T1[v])
                            : NULL;
        }
        rt_kir_expr *from = first && v == pl->split_var ? first : rt_kir_int(a, 0);
        int32_t cv =
            rt_kir_add_var(a, l->ph, rt_arena_printf(a, "step_%s", s->vars[v].name), RT_KIR_I64);
        rt_kir_node *loop =
            cv >= 0 && steps ? rt_kir_loop(a, inner, cv, from, steps, RT_KIR_LOOP_SERIAL) : NULL;
        if (!loop)
            return rt_gl_nomem(l);
        inner = &loop->body;
        rt_kir_expr *r0 =
            rt_gl_let(l, inner, rt_arena_printf(a, "base_%s", s->vars[v].name),
                      rt_kir_bin(a, RT_KIR_ADD,
                                 rt_kir_bin(a, RT_KIR_MUL, rt_kir_var_ref(a, l->ph, cv),
                                            rt_kir_int(a, pl->red_T1[v])),
                                 rt_kir_int(a, lo_r[i])));
        if (!r0)
            return rt_gl_nomem(l);
        base_var[v] = r0->var;
        T[v] = pl->red_T1[v];
    }
    RT_TRY(rt_gl_copies(l, pl, inner, base_var, T, interior));
    RT_GL_CHECK(l, rt_kir_append(a, inner, RT_KIR_N_BARRIER));
    rt_kir_block *after = inner;
    for (int32_t i = 0; i < nr; i++) {
        int32_t v = red[i];
        int32_t rv = rt_kir_add_var(a, l->ph, s->vars[v].name, RT_KIR_I64);
        int64_t T1 = pl->red_T1[v];
        // exact steps (the plan's red_exact, an interior's full steps): T1 iterations, no
        // bound; the innermost unrolled by the plan's step_unroll (gpu-plan.h): fully, or in
        // chunks of a divisor of its trips under a serial loop over the chunks
        int64_t f = exact && i == nr - 1 && v == pl->step_var ? pl->step_unroll : 1;
        rt_kir_expr *from = rt_kir_var_ref(a, l->ph, base_var[v]);
        if (f > 1 && f < T1) {
            int32_t uv = rt_kir_add_var(a, l->ph, rt_arena_printf(a, "chunk_%s", s->vars[v].name),
                                        RT_KIR_I64);
            rt_kir_node *outer = uv >= 0 ? rt_kir_loop(a, inner, uv, rt_kir_int(a, 0),
                                                       rt_kir_int(a, T1 / f), RT_KIR_LOOP_SERIAL)
                                         : NULL;
            if (!outer)
                return rt_gl_nomem(l);
            inner = &outer->body;
            from = rt_kir_bin(
                a, RT_KIR_ADD, from,
                rt_kir_bin(a, RT_KIR_MUL, rt_kir_var_ref(a, l->ph, uv), rt_kir_int(a, f)));
            T1 = f;
        }
        rt_kir_expr *end = rt_kir_bin(a, RT_KIR_ADD, from, rt_kir_int(a, T1));
        if (!exact)
            end = rt_kir_bin(a, RT_KIR_MIN, end, hi_r[i]);
        rt_kir_node *loop = rv >= 0 ? rt_kir_loop(a, inner, rv, from, end,
                                                  f > 1 ? RT_KIR_LOOP_UNROLL : RT_KIR_LOOP_SERIAL)
                                    : NULL;
        if (!loop)
            return rt_gl_nomem(l);
        l->var_of[ti][v] = rv;
        inner = &loop->body;
    }
    if (pl->vec4)
        RT_TRY(rt_gl_fragments(l, pl, inner));
    l->staging = true;
    RT_TRY(rt_gl_acc_step(l, pl, inner, acc, false));
    l->staging = false;
    RT_GL_CHECK(l, rt_kir_append(a, after, RT_KIR_N_BARRIER));
    return RT_OK;
}

// The staged reduction of a register-tile phase (rt_gl_steps), its shared arrays; with an edge
// split (the plan's split), `interior` is whether the block's tile lies inside every extent:
//   if (interior) { full steps, interior copies }
//   [else] { every step (interior blocks: from split_steps on), guarded copies }
// — the else where no reduction range has a partial step (split_var -1).
static rt_status rt_gl_staged_reduce(rt_gl *l, const rt_gpu_phase_plan *pl, rt_kir_block *b,
                                     const int32_t *red, int32_t nr, int32_t acc) {
    rt_arena *a = l->a;
    const rt_stmt *s = l->s;
    int32_t base_var[64];
    int64_t T[64];
    rt_kir_expr *interior = rt_kir_int(a, 1);
    for (int32_t d = 0; d < pl->n_dims; d++) {
        const rt_gpu_dim *g = &pl->dims[d];
        int32_t v = g->members[0];
        rt_kir_expr *bv =
            rt_gl_let(l, b, rt_arena_printf(a, "base_%s", s->vars[v].name),
                      rt_kir_bin(a, RT_KIR_ADD,
                                 rt_kir_bin(a, RT_KIR_MUL, rt_kir_var_ref(a, l->ph, l->bvar[d]),
                                            rt_kir_int(a, g->T1)),
                                 rt_kir_int(a, g->mlo[0])));
        if (!bv)
            return rt_gl_nomem(l);
        base_var[v] = bv->var;
        T[v] = g->T1;
        if (pl->split && g->nb_full < g->nb)
            interior = rt_kir_bin(a, RT_KIR_AND, interior,
                                  rt_kir_bin(a, RT_KIR_LT, rt_kir_var_ref(a, l->ph, l->bvar[d]),
                                             rt_kir_int(a, g->nb_full)));
    }
    for (int32_t i = 0; i < pl->n_stage; i++) {
        const rt_gpu_stage *g = &pl->stage[i];
        l->sh_buf[i] =
            rt_kir_add_buf(a, l->k,
                           rt_arena_printf(a, "sh_%s_p%d", l->op->tensors[g->read->tensor].name,
                                           (int)(l->k->n_phases - 1)),
                           RT_KIR_BUF_SHARED, RT_KIR_F32, -1, l->k->n_phases - 1);
        if (l->sh_buf[i] < 0)
            return rt_gl_nomem(l);
        l->k->bufs[l->sh_buf[i]].elems = g->elems;
        l->k->bufs[l->sh_buf[i]].written = true;
        l->k->bufs[l->sh_buf[i]].align16 = pl->vec4;
        l->frag_buf[i] = -1;
    }
    // A block whose tile starts past a ragged extent (grid y / z run to the longest) has no
    // element to compute: it skips the copies and steps (a block-uniform test). A work list
    // holds the non-empty blocks only: no test.
    rt_kir_expr *live = NULL;
    if (!pl->work_list)
        RT_TRY(rt_gl_block_live(l, pl, base_var, &live));
    rt_kir_block *body = b;
    if (live) {
        rt_kir_node *lv = rt_gl_if(l, b, live);
        if (!lv)
            return rt_gl_nomem(l);
        body = &lv->body;
    }
    if (!pl->split)
        return rt_gl_steps(l, pl, body, red, nr, acc, base_var, T, false, NULL);
    int64_t always = 0;
    bool all = rt_kir_is_int(interior, &always) && always; // no spatial edge: one path
    rt_kir_expr *in_var = all ? interior : rt_gl_let(l, body, "interior", interior);
    rt_kir_node *in = all ? NULL : rt_gl_if(l, body, in_var);
    if (!all && !in)
        return rt_gl_nomem(l);
    RT_TRY(rt_gl_steps(l, pl, all ? body : &in->body, red, nr, acc, base_var, T, true, NULL));
    if (pl->split_var < 0) // the edge blocks: every step, guarded
        return all ? RT_OK
                   : rt_gl_steps(l, pl, &in->else_body, red, nr, acc, base_var, T, false, NULL);
    // the partial step of every block and the full steps of the edge blocks, guarded
    rt_kir_expr *first =
        all ? rt_kir_int(a, pl->split_steps)
            : rt_kir_select(a, in_var, rt_kir_int(a, pl->split_steps), rt_kir_int(a, 0));
    return rt_gl_steps(l, pl, body, red, nr, acc, base_var, T, false, first);
}

// The plain reduction of a register-tile phase: loops over the reduction vars reading global
// memory into the accumulators acc.
static rt_status rt_gl_plain_reduce(rt_gl *l, const rt_gpu_phase_plan *pl, rt_kir_block *b,
                                    const int32_t *red, int32_t nr, int32_t acc) {
    rt_kir_block *inner = b;
    for (int32_t i = 0; i < nr && inner; i++)
        RT_TRY(rt_gl_var_loop(l, inner, red[i], &inner));
    if (!inner)
        return rt_gl_nomem(l);
    return rt_gl_acc_step(l, pl, inner, acc, true);
}

// Register-tile phases (regtile, staged): accumulators in a per-thread array, reductions
// outermost, the register tile innermost (unrolled), then the store with the epilogue.
static rt_status rt_gl_regtile(rt_gl *l, const rt_gpu_phase_plan *pl, rt_kir_block *b) {
    rt_arena *a = l->a;
    int32_t ti = pl->tstmt;
    rt_gl_set_stmt(l, ti);
    const rt_stmt *s = l->s;
    rt_kir_type ct = l->ct;
    int32_t acc = rt_kir_add_buf(a, l->k, rt_arena_printf(a, "acc_p%d", (int)(l->k->n_phases - 1)),
                                 RT_KIR_BUF_LOCAL, ct, -1, l->k->n_phases - 1);
    if (acc < 0)
        return rt_gl_nomem(l);
    l->k->bufs[acc].elems = pl->Rtot;
    int32_t ob = l->data_buf[s->out];
    rt_kir_loop_kind ek = pl->unroll ? RT_KIR_LOOP_UNROLL : RT_KIR_LOOP_SERIAL;
    // bind element 0: block-uniform vars for the reduction ranges
    rt_kir_expr *valid;
    RT_TRY(rt_gl_bind(l, pl, b, rt_kir_int(a, 0), &valid));
    // init
    int32_t ev = rt_kir_add_var(a, l->ph, "e", RT_KIR_I64);
    rt_kir_node *il =
        ev >= 0 ? rt_kir_loop(a, b, ev, rt_kir_int(a, 0), rt_kir_int(a, pl->Rtot), ek) : NULL;
    if (!il)
        return rt_gl_nomem(l);
    rt_gl_store(l, &il->body, acc, rt_kir_var_ref(a, l->ph, ev),
                rt_kir_flt(a, ct, rt_assign_identity(s->op)));
    // reductions: staged steps or plain loops
    int32_t red[2 * RT_MAX_DIMS], nr = 0;
    for (int32_t i = 0; i < s->n_loops; i++)
        if (s->loops[i] >= 0 && s->loops[i] < s->n_vars && s->vars[s->loops[i]].is_reduce)
            red[nr++] = s->loops[i];
    if (pl->mode == RT_GPU_STAGED)
        RT_TRY(rt_gl_staged_reduce(l, pl, b, red, nr, acc));
    else
        RT_TRY(rt_gl_plain_reduce(l, pl, b, red, nr, acc));
    // store (+ epilogue)
    int32_t ev3 = rt_kir_add_var(a, l->ph, "e", RT_KIR_I64);
    rt_kir_node *sl =
        ev3 >= 0 ? rt_kir_loop(a, b, ev3, rt_kir_int(a, 0), rt_kir_int(a, pl->Rtot), ek) : NULL;
    if (!sl)
        return rt_gl_nomem(l);
    rt_kir_expr *ok;
    RT_TRY(rt_gl_bind(l, pl, &sl->body, rt_kir_var_ref(a, l->ph, ev3), &ok));
    rt_gl_set_stmt(l, ti);
    int64_t always = 0;
    rt_kir_node *in = rt_kir_is_int(ok, &always) && always ? sl : rt_gl_if(l, &sl->body, ok);
    if (!in)
        return rt_gl_nomem(l);
    rt_kir_expr *val = rt_kir_load(a, l->k, acc, rt_kir_var_ref(a, l->ph, ev3));
    if (pl->epi < 0 || l->op->tensors[s->out].role != RT_ROLE_TEMP) {
        rt_kir_expr *off;
        RT_TRY(rt_gl_out_offset(l, &off));
        rt_gl_store(l, &in->body, ob, off, val);
    }
    if (pl->epi >= 0) {
        // the accumulator goes to a float local that the epilogue reads in place of s->out
        int32_t fv = rt_kir_add_var(a, l->ph, "t_acc", ct);
        rt_kir_node *fs = fv >= 0 ? rt_kir_append(a, &in->body, RT_KIR_N_FSET) : NULL;
        if (!fs)
            return rt_gl_nomem(l);
        fs->var = fv;
        fs->value = val;
        rt_gl_set_stmt(l, pl->epi);
        l->subst_tensor = s->out;
        l->subst_n = s->n_lhs;
        l->subst_value = rt_kir_cast(a, l->ct, rt_kir_var_ref(a, l->ph, fv));
        l->pre = &in->body;
        rt_kir_expr *y, *off;
        RT_TRY(rt_gl_num(l, l->s->rhs, &y));
        RT_TRY(rt_gl_out_offset(l, &off));
        rt_gl_store(l, &in->body, l->data_buf[l->s->out], off, y);
        l->subst_tensor = -1;
    }
    return RT_OK;
}

// Binds tree statement l->s's LHS vars after the node var to element e of its row (innermost
// fastest); the condition that e is in the row goes to *ok.
static void rt_gl_tree_bind(rt_gl *l, rt_kir_block *b, rt_kir_expr *e, rt_kir_expr **ok) {
    rt_arena *a = l->a;
    const rt_stmt *s = l->s;
    *ok = rt_kir_bin(a, RT_KIR_LT, e, rt_kir_int(a, rt_gpu_plan_tree_row(l->op, s)));
    rt_kir_expr *rest = e;
    for (int32_t d = s->n_lhs - 1; d >= 1; d--) {
        int32_t v = s->lhs_vars[d];
        int64_t lo = 0, hi = 0;
        rt_expr_const_int(l->op, s->vars[v].lo, &lo);
        rt_expr_const_int(l->op, s->vars[v].hi, &hi);
        int64_t ext = hi > lo ? hi - lo : 1;
        rt_kir_expr *x = d == 1 ? rest : rt_gl_umod(a, rest, ext);
        rt_kir_expr *r =
            rt_gl_let(l, b, s->vars[v].name, rt_kir_bin(a, RT_KIR_ADD, x, rt_kir_int(a, lo)));
        if (r)
            l->var_of[l->si][v] = r->var;
        if (d > 1)
            rest = rt_gl_udiv(a, rest, ext);
    }
}

// A level-by-level phase (lower-tree.c, rt_kir_levels): the statements of a tree group at its
// leaves (level 0) or at its inner nodes, launched once per level with the level as a scalar
// argument. Thread g of a launch takes position begin[level] + g / E of the tree's level order
// and element g % E of that node's row (E: the longest row among the statements), and runs
// each statement there in order, its sums serial in the thread.
static rt_status rt_gl_tree_phase(rt_gl *l, const rt_gpu_phase_plan *pl, const rt_tree_group *g,
                                  bool inner, rt_gpu_phase *gp, const char *name) {
    rt_arena *a = l->a;
    const rt_op *op = l->op;
    int64_t E = pl->row, T = pl->threads;
    int64_t n_nodes = op->sizes[op->trees[g->tree].n_sym].value;
    const char *what = rt_tree_group_what(a, op, g, inner);
    l->ph = what ? rt_kir_add_phase(a, l->k, what, rt_ceil_div(n_nodes * E, T)) : NULL;
    if (!l->ph)
        return rt_gl_nomem(l);
    l->ph->name = name;
    l->ph->threads = (int32_t)T;
    l->ph->thread_var = rt_kir_add_var(a, l->ph, "tid", RT_KIR_I64);
    l->ph->grid_var[0] = l->ph->grid_var[1] = -1;
    const int32_t *tb = l->tree_buf[g->tree];
    l->ph->levels = (rt_kir_levels){.on = true,
                                    .tree = g->tree,
                                    .first = inner ? 1 : 0,
                                    .last = inner ? -1 : 1,
                                    .begin_buf = tb[RT_KIR_TREE_LEVEL_BEGIN],
                                    .count_buf = tb[RT_KIR_TREE_N_LEVELS],
                                    .level_var = rt_kir_add_var(a, l->ph, "level", RT_KIR_I64)};
    if (l->ph->thread_var < 0 || l->ph->levels.level_var < 0)
        return rt_gl_nomem(l);
    l->plan = pl;
    l->work_live = NULL;
    for (int32_t i = 0; i < op->n_stmts; i++)
        for (int32_t v = 0; v < op->stmts[i].n_vars; v++)
            l->var_of[i][v] = -1;
    rt_kir_block *b = &l->ph->body;
    rt_kir_expr *level = rt_kir_var_ref(a, l->ph, l->ph->levels.level_var);
    int32_t bb = tb[RT_KIR_TREE_LEVEL_BEGIN];
    rt_kir_expr *lb =
        rt_gl_let(l, b, "level_begin", rt_kir_cast(a, RT_KIR_I64, rt_kir_load(a, l->k, bb, level)));
    rt_kir_expr *le = rt_gl_let(
        l, b, "level_end",
        rt_kir_cast(a, RT_KIR_I64,
                    rt_kir_load(a, l->k, bb, rt_kir_bin(a, RT_KIR_ADD, level, rt_kir_int(a, 1)))));
    rt_kir_expr *gid =
        rt_gl_let(l, b, "gid",
                  rt_kir_bin(a, RT_KIR_ADD,
                             rt_kir_bin(a, RT_KIR_MUL, rt_kir_var_ref(a, l->ph, l->ph->item_var),
                                        rt_kir_int(a, T)),
                             rt_kir_var_ref(a, l->ph, l->ph->thread_var)));
    rt_kir_expr *pos = rt_gl_let(l, b, "pos", rt_kir_bin(a, RT_KIR_ADD, lb, rt_gl_udiv(a, gid, E)));
    rt_kir_node *in = rt_gl_if(l, b, rt_kir_bin(a, RT_KIR_LT, pos, le));
    if (!in || l->oom)
        return rt_gl_nomem(l);
    const rt_stmt *s0 = &op->stmts[g->stmts[0]];
    rt_kir_expr *node =
        rt_gl_let(l, &in->body, s0->vars[s0->lhs_vars[0]].name,
                  rt_kir_cast(a, RT_KIR_I64, rt_kir_load(a, l->k, tb[RT_KIR_TREE_ORDER], pos)));
    rt_kir_expr *e = rt_gl_let(l, &in->body, "e", rt_gl_umod(a, gid, E));
    for (int32_t i = 0; i < g->n_stmts && node && e; i++) {
        if (!(inner ? g->at_inner[i] : g->at_leaves[i]))
            continue;
        rt_gl_set_stmt(l, g->stmts[i]);
        l->var_of[l->si][l->s->lhs_vars[0]] = node->var;
        rt_kir_expr *ok;
        rt_gl_tree_bind(l, &in->body, e, &ok);
        rt_kir_node *row = rt_gl_if(l, &in->body, ok);
        if (!row)
            return rt_gl_nomem(l);
        RT_TRY(rt_gl_direct_stmt(l, &row->body, l->s->n_lhs));
    }
    if (l->oom)
        return rt_gl_nomem(l);
    gp->kernel_name = name;
    gp->grid_x = l->ph->n_items;
    gp->threads = (int32_t)T;
    gp->what = l->ph->what;
    gp->by_level = true;
    gp->row = E;
    return RT_OK;
}

// A work-list phase's opening (gpu-plan.h work_list): block `item` runs entry item of list
// w = {count, (x item, y, z) per entry} when item < count; the body goes into *body, and
// *x, gy[] hold the entry's coordinates.
// A phase whose body has barriers (live non-NULL: rows mode) takes no branch around them:
// *live gets the condition item < count, and a block past the list reads entry coordinates 0
// (its body guards every statement by *live).
static rt_status rt_gl_work_entry(rt_gl *l, int32_t wb, rt_kir_block **body, rt_kir_expr **x,
                                  int32_t *gy, rt_kir_expr **live) {
    rt_arena *a = l->a;
    rt_kir_block *b = &l->ph->body;
    rt_kir_expr *item = rt_kir_var_ref(a, l->ph, l->ph->item_var);
    rt_kir_expr *n = rt_gl_let(
        l, b, "work_n", rt_kir_cast(a, RT_KIR_I64, rt_kir_load(a, l->k, wb, rt_kir_int(a, 0))));
    rt_kir_expr *in_list = n ? rt_kir_bin(a, RT_KIR_LT, item, n) : NULL;
    rt_kir_node *in = NULL;
    if (live) {
        *live = rt_gl_let(l, b, "work_live", in_list);
        if (!*live)
            return rt_gl_nomem(l);
    } else if (!(in = in_list ? rt_gl_if(l, b, in_list) : NULL)) {
        return rt_gl_nomem(l);
    }
    rt_kir_block *ib = in ? &in->body : b;
    rt_kir_expr *at = rt_gl_let(l, ib, "work_at",
                                rt_kir_bin(a, RT_KIR_ADD, rt_kir_int(a, 1),
                                           rt_kir_bin(a, RT_KIR_MUL, item, rt_kir_int(a, 3))));
    const char *names[3] = {"blk_x", "blk_y", "blk_z"};
    rt_kir_expr *c[3] = {NULL, NULL, NULL};
    for (int32_t i = 0; i < 3 && at; i++) {
        rt_kir_expr *v =
            rt_kir_cast(a, RT_KIR_I64,
                        rt_kir_load(a, l->k, wb, rt_kir_bin(a, RT_KIR_ADD, at, rt_kir_int(a, i))));
        if (live)
            v = rt_kir_select(a, *live, v, rt_kir_int(a, 0));
        c[i] = rt_gl_let(l, ib, names[i], v);
    }
    if (!c[0] || !c[1] || !c[2])
        return rt_gl_nomem(l);
    *x = c[0];
    gy[0] = c[1]->var;
    gy[1] = c[2]->var;
    *body = ib;
    return RT_OK;
}

static rt_status rt_gl_phase(rt_gl *l, const rt_gpu_phase_plan *pl, int32_t pi, rt_gpu_phase *gp,
                             const char *name) {
    rt_arena *a = l->a;
    const rt_op *op = l->op;
    int64_t nx = 1;
    for (int32_t d = 0; d < pl->n_dims; d++)
        if (pl->dims[d].grid == 0)
            nx *= pl->dims[d].nb;
    rt_buf what;
    rt_buf_init(&what, a);
    rt_buf_printf(&what, "%s:", rt_gpu_mode_name(pl->mode));
    for (int32_t i = 0; i < pl->n_stmts; i++) {
        const rt_stmt *s = &op->stmts[pl->first + i];
        rt_buf_printf(&what, " %s%s", op->tensors[s->out].name,
                      pl->first + i == pl->epi ? " (epilogue)" : "");
    }
    if (pl->work_list)
        rt_buf_puts(&what, "; runs a work list: one block per non-empty tile, longest first");
    if (what.oom)
        return rt_gl_nomem(l);
    l->ph = rt_kir_add_phase(a, l->k, what.data, nx);
    if (!l->ph)
        return rt_gl_nomem(l);
    l->ph->name = name;
    l->ph->threads = (int32_t)pl->threads;
    l->ph->thread_var = rt_kir_add_var(a, l->ph, "tid", RT_KIR_I64);
    l->ph->grid_var[0] = l->ph->grid_var[1] = -1;
    gp->work_buf = -1;
    if (!pl->work_list) {
        l->ph->grid_var[0] = rt_kir_add_var(a, l->ph, "blk_y", RT_KIR_I64);
        l->ph->grid_var[1] = rt_kir_add_var(a, l->ph, "blk_z", RT_KIR_I64);
    }
    if (l->ph->thread_var < 0 ||
        (!pl->work_list && (l->ph->grid_var[0] < 0 || l->ph->grid_var[1] < 0)))
        return rt_gl_nomem(l);
    l->plan = pl;
    for (int32_t i = 0; i < op->n_stmts; i++)
        for (int32_t v = 0; v < op->stmts[i].n_vars; v++)
            l->var_of[i][v] = -1;
    rt_kir_block *b = &l->ph->body;
    rt_kir_expr *item = rt_kir_var_ref(a, l->ph, l->ph->item_var);
    int32_t gy[2] = {l->ph->grid_var[0], l->ph->grid_var[1]};
    if (pl->work_list) {
        if (pi < 0 || l->work_buf[pi] < 0)
            return rt_fail(l->err, RT_ERR_BACKEND, RT_NOLOC, "phase %d has no work list buffer",
                           (int)pi);
        gp->work = pl;
        gp->work_buf = l->work_buf[pi];
        RT_TRY(rt_gl_work_entry(l, l->work_kbuf[pi], &b, &item, gy,
                                pl->mode == RT_GPU_ROWS ? &l->work_live : NULL));
    }
    rt_kir_expr *thread = rt_kir_var_ref(a, l->ph, l->ph->thread_var), *td = NULL;
    if (pl->mode == RT_GPU_ROWS) { // thread = slot * row_threads + td: a row's threads adjacent
        td = rt_gl_let(l, b, "td", rt_gl_umod(a, thread, pl->row_threads));
        thread = rt_gl_let(l, b, "slot", rt_gl_udiv(a, thread, pl->row_threads));
    }
    if (!pl->mma.on)
        rt_gl_coords(l, pl, b, item, gy, thread);
    if (pl->mma.on) { // matrix instructions: the body is lower-gpu-mma.c's
        RT_TRY(rt_gpu_mma_body(a, op, pl, l->k, l->data_buf, &gp->body, l->err));
        gp->mma_sync = pl->mma.inst == RT_GPU_MMA_SYNC;
        gp->mfma = pl->mma.inst == RT_GPU_MMA_MFMA;
    } else if (pl->mode == RT_GPU_ROWS) {
        RT_TRY(rt_gl_rows(l, pl, b, td, &gp->smem_bytes));
    } else if (pl->mode == RT_GPU_DIRECT) {
        int32_t ev = rt_kir_add_var(a, l->ph, "e", RT_KIR_I64);
        rt_kir_node *el = ev >= 0
                              ? rt_kir_loop(a, b, ev, rt_kir_int(a, 0), rt_kir_int(a, pl->Rtot),
                                            pl->unroll ? RT_KIR_LOOP_UNROLL : RT_KIR_LOOP_SERIAL)
                              : NULL;
        if (!el)
            return rt_gl_nomem(l);
        rt_kir_expr *ok;
        rt_gl_set_stmt(l, pl->tstmt);
        RT_TRY(rt_gl_bind(l, pl, &el->body, rt_kir_var_ref(a, l->ph, ev), &ok));
        rt_kir_node *in = rt_gl_if(l, &el->body, ok);
        if (!in)
            return rt_gl_nomem(l);
        int32_t np = op->stmts[pl->tstmt].n_lhs;
        for (int32_t i = 0; i < pl->n_stmts; i++) {
            rt_gl_set_stmt(l, pl->first + i);
            RT_TRY(rt_gl_direct_stmt(l, &in->body, np));
        }
    } else {
        RT_TRY(rt_gl_regtile(l, pl, b));
    }
    if (l->oom)
        return rt_gl_nomem(l);
    gp->kernel_name = name;
    gp->grid_x = nx;
    gp->threads = (int32_t)pl->threads;
    gp->staged = pl->mode == RT_GPU_STAGED;
    gp->what = l->ph->what;
    for (int32_t i = 0; i < pl->n_stage; i++)
        gp->smem_bytes += pl->stage[i].elems * 4;
    gp->smem_bytes += pl->mma.on ? pl->mma.smem_bytes : 0;
    for (int32_t d = 0; d < pl->n_dims; d++) {
        const rt_gpu_dim *g = &pl->dims[d];
        if (g->grid > 0) {
            rt_gpu_ragged_grid *r = &gp->ragged[g->grid - 1];
            r->stmt = pl->tstmt;
            r->var = g->members[0];
            r->tile = g->T1;
            gp->n_ragged = g->grid > gp->n_ragged ? g->grid : gp->n_ragged;
        }
    }
    return RT_OK;
}

// The kernels of the plan's phases: one each, a tree group's one at its leaves and one for its
// inner nodes (where it has statements there).
static rt_status rt_gl_kernels(rt_gl *l, const rt_gpu_plan *plan, rt_gpu_kernel *gk) {
    const rt_op *op = l->op;
    int32_t n = 0, cap = 2 * plan->n_phases;
    rt_tree_group *groups;
    RT_ALLOC(l->a, groups, plan->n_phases, l->err);
    for (int32_t i = 0; i < plan->n_phases; i++) {
        const rt_gpu_phase_plan *ph = &plan->phases[i];
        if (ph->mode != RT_GPU_TREE) {
            n++;
            continue;
        }
        RT_TRY(rt_tree_group_plan(op, ph->first, "GPU", &groups[i], l->err));
        if (groups[i].n_stmts != ph->n_stmts)
            return rt_fail(l->err, RT_ERR_BACKEND, op->stmts[ph->first].loc,
                           "tree group of %d statements planned as %d", (int)groups[i].n_stmts,
                           (int)ph->n_stmts);
        for (int32_t inner = 0; inner < 2; inner++) {
            bool any = false;
            for (int32_t k = 0; k < groups[i].n_stmts; k++)
                any = any || (inner ? groups[i].at_inner[k] : groups[i].at_leaves[k]);
            n += any;
        }
    }
    RT_ALLOC(l->a, gk->phases, rt_at_least_one((size_t)cap), l->err);
    for (int32_t i = 0; i < plan->n_phases; i++) {
        const rt_gpu_phase_plan *ph = &plan->phases[i];
        for (int32_t inner = 0; inner < (ph->mode == RT_GPU_TREE ? 2 : 1); inner++) {
            bool any = ph->mode != RT_GPU_TREE;
            for (int32_t k = 0; !any && k < groups[i].n_stmts; k++)
                any = inner ? groups[i].at_inner[k] : groups[i].at_leaves[k];
            if (!any)
                continue;
            int32_t ki = gk->n_phases;
            const char *name =
                n == 1 ? l->k->name : rt_arena_printf(l->a, "%s_p%d", l->k->name, (int)ki);
            if (!name)
                return rt_gl_nomem(l);
            if (ph->mode == RT_GPU_TREE)
                RT_TRY(rt_gl_tree_phase(l, ph, &groups[i], inner, &gk->phases[ki], name));
            else
                RT_TRY(rt_gl_phase(l, ph, i, &gk->phases[ki], name));
            gk->n_phases++;
        }
    }
    return RT_OK;
}

// The comment text opening the source: spec, device, rTile per level, predicted time.
static const char *rt_gl_header(rt_gl *l, const rt_gpu_lower_options *opt,
                                const rt_gpu_plan *plan) {
    rt_arena *a = l->a;
    const rt_op *op = l->op;
    const rt_device *dev = l->dev;
    rt_buf b;
    rt_buf_init(&b, a);
    rt_buf_printf(&b, "rtgen %s: op %s from %s\n", RT_VERSION_STRING, op->name,
                  opt->spec_path ? opt->spec_path : (op->file ? op->file : "?"));
    rt_buf_printf(&b, "device: %s (class %s, arch %s)\n", dev->name,
                  rt_devclass_name(dev->devclass), dev->arch);
    if (l->p && l->m) {
        const rt_perf_model *m = l->m;
        const rt_rprog *p = l->p;
        const char *line = rt_gpu_candidate_line(a, dev, p, opt->rank);
        RT_GL_CHECK(l, line);
        rt_buf_puts(&b, line ? line : "");
        rt_buf_puts(&b, "axes:");
        for (int32_t x = 0; x < m->n_axes; x++)
            rt_buf_printf(&b, " %s%s", m->axes[x].name, m->axes[x].is_reduce ? "(r)" : "");
        rt_buf_puts(&b, "\n");
        for (int32_t lv = 1; lv < p->n_levels && lv < dev->n_levels; lv++) {
            rt_buf_printf(&b, "rTile %s: [", dev->level[lv].name);
            for (int32_t x = 0; x < m->n_axes; x++)
                rt_buf_printf(&b, "%s%lld", x ? ", " : "", (long long)p->tile[lv].shape[x]);
            rt_buf_puts(&b, "]\n");
        }
    } else {
        rt_buf_puts(&b, "naive program: one element per thread\n");
    }
    for (int32_t i = 0; i < plan->n_phases; i++) { // the plan, as the JSON report prints it
        rt_buf_puts(&b, "plan ");
        rt_gpu_plan_print_phase(op, plan, i, &b);
        rt_buf_puts(&b, "\n");
    }
    for (int32_t i = 0; i < l->k->n_phases; i++)
        rt_buf_printf(&b, "kernel %d: %s\n", (int)i, l->k->phases[i].what);
    return b.oom ? NULL : b.data;
}

static rt_status rt_gpu_lower_kernel(rt_arena *a, const rt_op *op, const rt_device *dev,
                                     const rt_perf_model *m, const rt_rprog *p,
                                     const rt_gpu_lower_options *opt, rt_gpu_kernel **out,
                                     rt_err *err) {
    rt_gpu_lower_options defaults = {.rank = 1};
    if (!opt)
        opt = &defaults;
    if (dev->devclass == RT_DEVCLASS_CPU)
        return rt_fail(err, RT_ERR_DEVICE, dev->origin,
                       "device '%s' is not a GPU (expected class cuda, hip or opencl, got cpu)",
                       dev->name);
    if (p && !m)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "an rProgram needs its model");
    rt_gl l = {
        .a = a, .op = op, .dev = dev, .m = p ? m : NULL, .p = p, .err = err, .subst_tensor = -1};
    rt_gpu_kernel *gk;
    RT_ALLOC(a, gk, 1, err);
    gk->op = op;
    gk->dev = dev;
    gk->prog = p;
    // name: rt_<op>_<block tile>_<register tile>
    rt_buf nm;
    rt_buf_init(&nm, a);
    rt_buf_printf(&nm, "rt_%s", op->name);
    if (p && m) {
        for (int32_t lv = 1; lv < p->n_levels && lv < dev->n_levels; lv++) {
            rt_buf_puts(&nm, "_");
            for (int32_t x = 0; x < m->n_axes; x++)
                rt_buf_printf(&nm, "%s%lld", x ? "x" : "", (long long)p->tile[lv].shape[x]);
        }
        for (int32_t i = 0; p->gpu && i < p->gpu->n_phases; i++) // cp.async stages (gpu-mma.c)
            if (p->gpu->phases[i].mma.on && p->gpu->phases[i].mma.stages > 1)
                rt_buf_printf(&nm, p->gpu->phases[i].mma.stages == 2 ? "_db" : "_s%d",
                              (int)p->gpu->phases[i].mma.stages);
    } else {
        rt_buf_puts(&nm, "_naive");
    }
    if (opt->padded_grid)
        rt_buf_puts(&nm, "_padded");
    if (nm.oom)
        return rt_gl_nomem(&l);
    l.k = rt_kir_kernel_new(a, nm.data);
    if (!l.k)
        return rt_gl_nomem(&l);
    gk->kir = l.k;
    RT_TRY(rt_gl_buffers(&l, gk));
    RT_ALLOC(a, l.var_of, op->n_stmts, err);
    for (int32_t i = 0; i < op->n_stmts; i++)
        RT_ALLOC(a, l.var_of[i], op->stmts[i].n_vars, err);
    // The plan the construction made (gpu-plan.c); the same function plans a naive program or
    // an rProgram made elsewhere.
    const rt_gpu_plan *plan = p ? p->gpu : NULL;
    if (!plan)
        RT_TRY(rt_gpu_plan_make(a, op, dev, l.m, p, &plan, err));
    if (opt->padded_grid) { // the plan without its work lists (gpu.h)
        rt_gpu_plan *padded;
        rt_gpu_phase_plan *ph;
        RT_ALLOC(a, padded, 1, err);
        RT_ALLOC(a, ph, rt_at_least_one((size_t)plan->n_phases), err);
        *padded = *plan;
        for (int32_t i = 0; i < plan->n_phases; i++) {
            ph[i] = plan->phases[i];
            ph[i].work_list = false;
        }
        padded->phases = ph;
        plan = padded;
    }
    RT_TRY(rt_gl_work_buffers(&l, plan, gk));
    RT_TRY(rt_gl_kernels(&l, plan, gk));
    // written buffers and 32-bit index math
    bool idx32 = true;
    for (int32_t i = 0; i < gk->n_bufs; i++) {
        rt_gpu_buffer *gb = &gk->bufs[i];
        if (gb->is_work) // read only; 1 + 3 int32 per block of the phase
            continue;
        if (gb->is_tree) { // read only; an int32 array of at most the tree's N * C entries
            int64_t n_nodes = op->sizes[op->trees[gb->tensor].n_sym].value;
            if (n_nodes * op->trees[gb->tensor].max_children >= ((int64_t)1 << 31))
                idx32 = false;
            continue;
        }
        const rt_tensor *tn = &op->tensors[gb->tensor];
        gb->written = !gb->is_start && tn->role != RT_ROLE_INPUT;
        l.k->bufs[gb->kir_buf].written = gb->written;
        int64_t elems = 1;
        for (int32_t d = 0; d < tn->n_dims; d++)
            elems = l.extent[gb->tensor][d] < 0 || elems > ((int64_t)1 << 40)
                        ? elems
                        : elems * l.extent[gb->tensor][d];
        if (elems >= ((int64_t)1 << 31))
            idx32 = false;
    }
    for (int32_t i = 0; i < gk->n_phases; i++)
        if (gk->phases[i].grid_x * gk->phases[i].threads >= ((int64_t)1 << 31))
            idx32 = false;
    gk->idx32 = idx32;
    gk->header = rt_gl_header(&l, opt, plan);
    if (!gk->header)
        return rt_gl_nomem(&l);
    l.k->header = gk->header;
    RT_TRY(rt_kir_validate(l.k, err));
    *out = gk;
    return RT_OK;
}

rt_status rt_gpu_lower(rt_arena *a, const rt_op *op, const rt_device *dev, const rt_perf_model *m,
                       const rt_rprog *p, const rt_gpu_lower_options *opt, rt_gpu_kernel **out,
                       rt_err *err) {
    return rt_arena_status(a, rt_gpu_lower_kernel(a, op, dev, m, p, opt, out, err), err);
}
