// lower-gpu-rows.c: the rows mode of the GPU plan (perfmodel/gpu-plan.h) as kernel IR. A row-wise
// group (softmax: a max over the row, an exponential on it, a sum, a division) runs with
// row_threads threads on each row element of the thread's register tile (slot: which element,
// td: which thread of the row). For each element, in order:
//   a reduction   each thread folds its share of the row (the statement's innermost loop from
//                 lo + td in steps of row_threads; outer loops serial), writes its partial into
//                 the block's shared array at its thread index, and the row's threads combine
//                 the partials in a tree (halving strides, a barrier each); thread td 0 stores;
//   an '=' over the row: the innermost loop strided the same way;
//   an '=' of the row element alone: thread td 0.
// A barrier that orders global memory follows every statement: the next one reads what the row's
// threads wrote. Barriers stay outside every guard and data-dependent loop (a thread whose
// element lies outside the iteration space takes part with the identity), so every thread of a
// block reaches the same barriers.
#include "lower-gpu-impl.h"

// A barrier; global: it orders global memory accesses too.
static void rt_glr_barrier(rt_gl *l, rt_kir_block *b, bool global) {
    rt_kir_node *n = rt_kir_append(l->a, b, RT_KIR_N_BARRIER);
    RT_GL_CHECK(l, n);
    if (n)
        n->var = global ? 1 : 0;
}

// The innermost loop var of l->s after its first np (the row element's prefix), -1 none.
static int32_t rt_glr_inner(const rt_gl *l, int32_t np) {
    int32_t inner = -1;
    for (int32_t i = 0; i < l->s->n_loops; i++)
        if (l->s->loops[i] >= np)
            inner = l->s->loops[i];
    return inner;
}

// Loops over l->s's vars after the prefix np into b, the innermost (v) strided over the row's nt
// threads: v = lo + td + q * nt for q < ceil((hi - lo - td) / nt); the others serial, outside
// it. *body: the innermost body (NULL: oom).
static rt_status rt_glr_loops(rt_gl *l, rt_kir_block *b, int32_t np, int32_t v, rt_kir_expr *td,
                              int64_t nt, rt_kir_block **body) {
    rt_arena *a = l->a;
    for (int32_t i = 0; i < l->s->n_loops && b; i++) {
        int32_t w = l->s->loops[i];
        if (w >= np && w != v)
            RT_TRY(rt_gl_var_loop(l, b, w, &b));
    }
    if (!b)
        return rt_gl_nomem(l);
    rt_kir_expr *lo, *hi;
    RT_TRY(rt_gl_range(l, v, &lo, &hi));
    rt_kir_expr *n = rt_kir_bin(a, RT_KIR_MAX, rt_kir_bin(a, RT_KIR_SUB, hi, lo), rt_kir_int(a, 0));
    rt_kir_expr *trips = rt_gl_udiv(
        a, rt_kir_bin(a, RT_KIR_SUB, rt_kir_bin(a, RT_KIR_ADD, n, rt_kir_int(a, nt - 1)), td), nt);
    int32_t q = rt_kir_add_var(a, l->ph, "q", RT_KIR_I64);
    rt_kir_node *loop =
        q >= 0 && trips ? rt_kir_loop(a, b, q, rt_kir_int(a, 0), trips, RT_KIR_LOOP_SERIAL) : NULL;
    if (!loop)
        return rt_gl_nomem(l);
    rt_kir_expr *at =
        rt_kir_bin(a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_ADD, lo, td),
                   rt_kir_bin(a, RT_KIR_MUL, rt_kir_var_ref(a, l->ph, q), rt_kir_int(a, nt)));
    rt_kir_expr *r = rt_gl_let(l, &loop->body, l->s->vars[v].name, at);
    if (!r)
        return rt_gl_nomem(l);
    l->var_of[l->si][v] = r->var;
    *body = &loop->body;
    return RT_OK;
}

// The block's shared array of partials of type ct (one element per thread), made on first use.
static int32_t rt_glr_partials(rt_gl *l, const rt_gpu_phase_plan *pl, rt_kir_type ct, int32_t *bufs,
                               int64_t *smem_bytes) {
    int32_t *buf = &bufs[ct == RT_KIR_F64];
    if (*buf >= 0)
        return *buf;
    int32_t ph = l->k->n_phases - 1;
    *buf = rt_kir_add_buf(
        l->a, l->k, rt_arena_printf(l->a, "sh_part%s_p%d", ct == RT_KIR_F64 ? "64" : "", (int)ph),
        RT_KIR_BUF_SHARED, ct, -1, ph);
    if (*buf < 0) {
        l->oom = true;
        return -1;
    }
    l->k->bufs[*buf].elems = pl->threads;
    l->k->bufs[*buf].written = true;
    *smem_bytes += pl->threads * (ct == RT_KIR_F64 ? 8 : 4);
    return *buf;
}

// Reduction l->s of the row element (valid: in the iteration space) across the row's threads.
static rt_status rt_glr_reduce(rt_gl *l, const rt_gpu_phase_plan *pl, rt_kir_block *b, int32_t np,
                               rt_kir_expr *valid, rt_kir_expr *td, int32_t *bufs,
                               int64_t *smem_bytes) {
    rt_arena *a = l->a;
    const rt_stmt *s = l->s;
    int64_t nt = pl->row_threads;
    int32_t acc = rt_kir_add_var(a, l->ph, "acc", l->ct);
    rt_kir_node *init = acc >= 0 ? rt_kir_append(a, b, RT_KIR_N_FSET) : NULL;
    rt_kir_node *in = rt_gl_if(l, b, valid);
    int32_t sh = rt_glr_partials(l, pl, l->ct, bufs, smem_bytes);
    if (!init || !in || sh < 0)
        return rt_gl_nomem(l);
    init->var = acc;
    init->value = rt_kir_flt(a, l->ct, rt_assign_identity(s->op));
    rt_kir_block *inner;
    RT_TRY(rt_glr_loops(l, &in->body, np, rt_glr_inner(l, np), td, nt, &inner));
    l->pre = inner;
    rt_kir_expr *x;
    RT_TRY(rt_gl_num(l, s->rhs, &x));
    rt_kir_node *upd = rt_kir_append(a, inner, RT_KIR_N_FSET);
    if (!upd)
        return rt_gl_nomem(l);
    upd->var = acc;
    upd->value = rt_gl_combine(a, s->op, rt_kir_var_ref(a, l->ph, acc), x);
    // the tree over the row's partials: sh[tid] is this thread's, its row's are adjacent
    rt_kir_expr *tid = rt_kir_var_ref(a, l->ph, l->ph->thread_var);
    rt_gl_store(l, b, sh, tid, rt_kir_var_ref(a, l->ph, acc));
    rt_glr_barrier(l, b, false);
    int64_t half = 1;
    while (half * 2 < nt)
        half *= 2;
    for (; half >= 1; half /= 2) {
        rt_kir_expr *ok =
            rt_kir_bin(a, RT_KIR_AND, rt_kir_bin(a, RT_KIR_LT, td, rt_kir_int(a, half)),
                       rt_kir_bin(a, RT_KIR_LT, rt_kir_bin(a, RT_KIR_ADD, td, rt_kir_int(a, half)),
                                  rt_kir_int(a, nt)));
        rt_kir_node *step = rt_gl_if(l, b, ok);
        if (!step)
            return rt_gl_nomem(l);
        rt_kir_expr *other = rt_kir_bin(a, RT_KIR_ADD, tid, rt_kir_int(a, half));
        rt_gl_store(l, &step->body, sh, tid,
                    rt_gl_combine(a, s->op, rt_kir_load(a, l->k, sh, tid),
                                  rt_kir_load(a, l->k, sh, other)));
        rt_glr_barrier(l, b, false);
    }
    rt_kir_node *first = rt_gl_if(
        l, b, rt_kir_bin(a, RT_KIR_AND, valid, rt_kir_bin(a, RT_KIR_EQ, td, rt_kir_int(a, 0))));
    if (!first)
        return rt_gl_nomem(l);
    rt_kir_expr *off;
    RT_TRY(rt_gl_out_offset(l, &off));
    rt_gl_store(l, &first->body, l->data_buf[s->out], off, rt_kir_load(a, l->k, sh, tid));
    return RT_OK;
}

// An '=' statement l->s at the row element: over its row strided, or by thread td 0.
static rt_status rt_glr_set(rt_gl *l, const rt_gpu_phase_plan *pl, rt_kir_block *b, int32_t np,
                            rt_kir_expr *valid, rt_kir_expr *td) {
    rt_arena *a = l->a;
    int32_t v = rt_glr_inner(l, np);
    rt_kir_expr *cond =
        v >= 0 ? valid
               : rt_kir_bin(a, RT_KIR_AND, valid, rt_kir_bin(a, RT_KIR_EQ, td, rt_kir_int(a, 0)));
    rt_kir_node *in = rt_gl_if(l, b, cond);
    if (!in)
        return rt_gl_nomem(l);
    rt_kir_block *inner = &in->body;
    if (v >= 0)
        RT_TRY(rt_glr_loops(l, inner, np, v, td, pl->row_threads, &inner));
    l->pre = inner;
    rt_kir_expr *off, *x;
    RT_TRY(rt_gl_out_offset(l, &off));
    RT_TRY(rt_gl_num(l, l->s->rhs, &x));
    rt_gl_store(l, inner, l->data_buf[l->s->out], off, x);
    return RT_OK;
}

rt_status rt_gl_rows(rt_gl *l, const rt_gpu_phase_plan *pl, rt_kir_block *b, rt_kir_expr *td,
                     int64_t *smem_bytes) {
    rt_arena *a = l->a;
    const rt_op *op = l->op;
    if (!td)
        return rt_gl_nomem(l);
    int32_t ev = rt_kir_add_var(a, l->ph, "e", RT_KIR_I64);
    rt_kir_node *el = ev >= 0 ? rt_kir_loop(a, b, ev, rt_kir_int(a, 0), rt_kir_int(a, pl->Rtot),
                                            pl->unroll ? RT_KIR_LOOP_UNROLL : RT_KIR_LOOP_SERIAL)
                              : NULL;
    if (!el)
        return rt_gl_nomem(l);
    rt_kir_expr *valid;
    rt_gl_set_stmt(l, pl->tstmt);
    RT_TRY(rt_gl_bind(l, pl, &el->body, rt_kir_var_ref(a, l->ph, ev), &valid));
    if (l->work_live && valid)
        valid = rt_kir_bin(a, RT_KIR_AND, l->work_live, valid);
    valid = rt_gl_let(l, &el->body, "in_row", valid);
    if (!valid)
        return rt_gl_nomem(l);
    int32_t np = op->stmts[pl->tstmt].n_lhs, bufs[2] = {-1, -1};
    for (int32_t i = 0; i < pl->n_stmts; i++) {
        rt_gl_set_stmt(l, pl->first + i);
        if (l->s->n_loops > l->s->n_lhs)
            RT_TRY(rt_glr_reduce(l, pl, &el->body, np, valid, td, bufs, smem_bytes));
        else
            RT_TRY(rt_glr_set(l, pl, &el->body, np, valid, td));
        rt_glr_barrier(l, &el->body, true);
    }
    return l->oom ? rt_gl_nomem(l) : RT_OK;
}
