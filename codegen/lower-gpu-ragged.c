// lower-gpu-ragged.c: ragged extents in the GPU lowering's staged contractions (qkt, attn_v,
// vgemm; perfmodel/gpu-plan.c stages them): the copies' guards from each ragged dim's extent
// expression at the copied index, a ragged reduction's block-uniform range at the block's
// origin, the test that a block holds any element, and when a ragged step may run whole.
#include "lower-gpu-impl.h"
#include "spec-eval.h"

// Dim extent expression e of a ragged tensor (sizes, length-tensor reads, + - *, DIMREFs to
// outer dims) at the tensor indices idx; NULL where e has another form or memory runs out.
rt_kir_expr *rt_gl_extent_at(rt_gl *l, const rt_expr *e, rt_kir_expr **idx) {
    rt_arena *a = l->a;
    int64_t c;
    if (rt_expr_const_int(l->op, e, &c))
        return rt_kir_int(a, c);
    if (e->kind == RT_EXPR_DIMREF)
        return e->dim >= 0 && e->dim < RT_MAX_DIMS ? idx[e->dim] : NULL;
    if (e->kind == RT_EXPR_BINARY &&
        (e->bop == RT_BOP_ADD || e->bop == RT_BOP_SUB || e->bop == RT_BOP_MUL)) {
        rt_kir_expr *x = rt_gl_extent_at(l, e->args[0], idx);
        rt_kir_expr *y = x ? rt_gl_extent_at(l, e->args[1], idx) : NULL;
        rt_kir_bop op = e->bop == RT_BOP_ADD   ? RT_KIR_ADD
                        : e->bop == RT_BOP_SUB ? RT_KIR_SUB
                                               : RT_KIR_MUL;
        return y ? rt_kir_bin(a, op, x, y) : NULL;
    }
    if (e->kind != RT_EXPR_READ || e->n_args > RT_MAX_DIMS ||
        !rt_dtype_is_int(l->op->tensors[e->tensor].dtype))
        return NULL;
    rt_kir_expr *sub[RT_MAX_DIMS];
    for (int32_t d = 0; d < e->n_args; d++)
        if (!(sub[d] = rt_gl_extent_at(l, e->args[d], idx)))
            return NULL;
    rt_kir_expr *off = rt_gl_offset(l, e->tensor, sub, NULL);
    return off ? rt_kir_cast(a, RT_KIR_I64, rt_kir_load(a, l->k, l->data_buf[e->tensor], off))
               : NULL;
}

// *valid of a copy's element of tensor t at idx, narrowed to 0 <= idx < extent in each ragged
// dim (rt_gl_offset's condition covers the dense dims only).
rt_status rt_gl_ragged_valid(rt_gl *l, int32_t t, rt_kir_expr **idx, rt_kir_expr **valid) {
    rt_arena *a = l->a;
    const rt_tensor *tn = &l->op->tensors[t];
    for (int32_t d = 0; d < tn->n_dims; d++) {
        if (l->start_buf[t][d] < 0)
            continue;
        rt_kir_expr *ext = rt_gl_extent_at(l, tn->dims[d].extent, idx);
        if (!ext)
            return rt_gl_unsupported(l, tn->loc, "this ragged extent in a staged copy");
        *valid =
            rt_kir_bin(a, RT_KIR_AND, *valid,
                       rt_kir_bin(a, RT_KIR_AND, rt_kir_bin(a, RT_KIR_GE, idx[d], rt_kir_int(a, 0)),
                                  rt_kir_bin(a, RT_KIR_LT, idx[d], ext)));
    }
    return *valid ? RT_OK : rt_gl_nomem(l);
}

// Whether the steps of ragged reduction ranges may run whole (T1 iterations, unrolled): the
// statement is a product of reads, all staged and none padded, so a step's elements past the
// range read the zeros the guarded copies put there and add nothing; every constant range is
// a whole number of steps.
bool rt_gl_ragged_exact(const rt_gl *l, const rt_gpu_phase_plan *pl, const int32_t *red,
                        int32_t nr) {
    const rt_stmt *s = l->s;
    const rt_expr *reads[2];
    int32_t n = 0;
    double alpha = 1;
    if ((s->op != RT_ASSIGN_ADD_INIT && s->op != RT_ASSIGN_ADD) ||
        !rt_expr_product_factors(s->rhs, reads, &n, &alpha))
        return false;
    for (int32_t i = 0; i < n; i++) {
        bool staged = false;
        for (int32_t k = 0; k < pl->n_stage; k++)
            staged = staged || rt_expr_equal(pl->stage[k].read, reads[i]);
        if (!staged || l->op->tensors[reads[i]->tensor].has_pad)
            return false;
    }
    for (int32_t i = 0; i < nr; i++) {
        int64_t lo, hi;
        if (rt_expr_const_int(l->op, s->vars[red[i]].lo, &lo) &&
            rt_expr_const_int(l->op, s->vars[red[i]].hi, &hi) && (hi - lo) % pl->red_T1[red[i]])
            return false;
    }
    return true;
}

static bool rt_gl_is_var(const rt_expr *e, const void *ctx) {
    return e->kind == RT_EXPR_INDEX && e->var == *(const int32_t *)ctx;
}

// The range of var v of the tiling statement with the vars of the block-uniform dims of phase
// pl (single member, block tile 1) at their block origins base_var[]; *uniform false (and
// *lo, *hi unset) when the range reads another var.
rt_status rt_gl_range_at_origin(rt_gl *l, const rt_gpu_phase_plan *pl, const int32_t *base_var,
                                int32_t v, bool *uniform, rt_kir_expr **lo, rt_kir_expr **hi) {
    const rt_stmt *s = l->s;
    bool at_origin[64] = {false};
    for (int32_t d = 0; d < pl->n_dims; d++)
        if (pl->dims[d].n_members == 1 && pl->dims[d].T1 == 1 && !pl->dims[d].ragged &&
            pl->dims[d].members[0] < 64)
            at_origin[pl->dims[d].members[0]] = true;
    *uniform = false;
    for (int32_t u = 0; u < s->n_vars; u++)
        if ((u >= 64 || !at_origin[u]) && (rt_expr_any(s->vars[v].hi, rt_gl_is_var, &u) ||
                                           rt_expr_any(s->vars[v].lo, rt_gl_is_var, &u)))
            return RT_OK;
    int32_t saved[64];
    for (int32_t u = 0; u < s->n_vars && u < 64; u++) {
        saved[u] = l->var_of[l->si][u];
        if (at_origin[u])
            l->var_of[l->si][u] = base_var[u];
    }
    rt_status st = rt_gl_range(l, v, lo, hi);
    for (int32_t u = 0; u < s->n_vars && u < 64; u++)
        l->var_of[l->si][u] = saved[u];
    *uniform = st == RT_OK;
    return st;
}

// Whether the block whose tile origins are base_var[] holds any element of the ragged dims of
// phase pl: origin < extent for each, the extent at the block's origin; *live NULL (no test)
// where there is no ragged dim or an extent reads a var that varies within the block.
rt_status rt_gl_block_live(rt_gl *l, const rt_gpu_phase_plan *pl, const int32_t *base_var,
                           rt_kir_expr **live) {
    rt_arena *a = l->a;
    *live = NULL;
    rt_kir_expr *cond = rt_kir_int(a, 1);
    for (int32_t d = 0; d < pl->n_dims; d++) {
        const rt_gpu_dim *g = &pl->dims[d];
        if (!g->ragged)
            continue;
        int32_t v = g->members[0];
        bool uniform;
        rt_kir_expr *lo, *hi;
        RT_TRY(rt_gl_range_at_origin(l, pl, base_var, v, &uniform, &lo, &hi));
        if (!uniform)
            return RT_OK;
        cond = rt_kir_bin(a, RT_KIR_AND, cond,
                          rt_kir_bin(a, RT_KIR_LT, rt_kir_var_ref(a, l->ph, base_var[v]), hi));
    }
    int64_t always = 0;
    if (!cond)
        return rt_gl_nomem(l);
    *live = rt_kir_is_int(cond, &always) && always ? NULL : cond;
    return RT_OK;
}
