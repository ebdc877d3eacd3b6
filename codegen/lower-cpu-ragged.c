// lower-cpu-ragged.c: ragged extents on the packed GEMM path of the CPU lowering
// (lower-cpu-gemm.c rt_lower_gemm). A token-flattened contraction (CORA's proj, a ragged FFN:
// C(b, i, n) (+)= A(b, i, k) * W(k, n) over packed (b:B, len(b), D) tensors; the model decides
// it, perfmodel.h rt_perf_gemm_tokens_of) is a plain GEMM over the rows r = start[1][b] + i of
// the packed layout (src/ref/layout.h): its M, sum(len), is read at run time from A's start
// array, and the plan's row blocks (of the expected M) become a loop over the actual ones.
// The n and k sides may be runs of dims that flatten, Q(b, i, h, d) (+)= X(b, i, m) * W(m, h, d)
// or O(b, i, n) (+)= A(b, i, h, d) * W(h, d, n): N (K) is the run's product and the strides below
// are those of the flat index (the same detection decides it for the model).
#include "lower-cpu-impl.h"

#include <string.h>

bool rt_gemm_detect_tokens(const rt_lower *l, int32_t si, rt_gemm *g) {
    const rt_stmt *s = &l->op->stmts[si];
    rt_perf_gemm_tokens tk;
    memset(g, 0, sizeof *g);
    g->stmt = si;
    g->batch = 1;
    if (!rt_perf_gemm_tokens_of(l->op, s, &tk) || l->start_buf[tk.ta][1] < 0)
        return false;
    g->alpha = tk.alpha;
    g->ta = tk.ta;
    g->tb = tk.tw;
    g->ra = tk.ra;
    g->rb = tk.rw;
    g->M = -1; // the plan's expected rows (rt_gemm_blocking)
    g->N = tk.N;
    g->K = tk.K;
    // Row r of A is at r * K, of C at r * N (layout.h: (start[1][b] + i) * D + d).
    g->am = tk.K, g->ak = 1, g->bk = tk.wk, g->bn = tk.wn, g->cm = tk.N;
    g->m_var = tk.i_var, g->n_var = tk.n_var, g->k_var = tk.k_var;
    g->tokens = true;
    g->tok_start_buf = l->start_buf[tk.ta][1];
    g->tok_rows_at = tk.batch; // start[1][B] = sum(len)
    g->tok_b_var = tk.b_var;
    g->tok_i_var = tk.i_var;
    return true;
}

rt_kir_block *rt_gemm_token_rows(rt_lower *l, const rt_gemm *g, rt_kir_block *body,
                                 rt_kir_expr *item, int64_t mt, int32_t vi0, int32_t vmc) {
    rt_arena *a = l->a;
    int32_t vm = rt_kir_add_var(a, l->p, "m_rows", RT_KIR_I64),
            vr0 = rt_kir_add_var(a, l->p, "rb0", RT_KIR_I64),
            vq = rt_kir_add_var(a, l->p, "rq", RT_KIR_I64);
    RT_LOWER_CHECK(l, vm >= 0 && vr0 >= 0 && vq >= 0);
    if (vm < 0 || vr0 < 0 || vq < 0)
        return body;
    rt_let(l, body, vm, rt_kir_load(a, l->k, g->tok_start_buf, rt_i(l, g->tok_rows_at)));
    rt_let(l, body, vr0, rt_b(l, RT_KIR_MOD, item, rt_i(l, mt)));
    // Row blocks rb0, rb0 + mt, ... below ceil(m_rows / mc): (that count - rb0 + mt - 1) / mt
    // iterations, never negative since rb0 < mt.
    rt_kir_expr *mt_now =
        rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_ADD, rt_v(l, vm), rt_i(l, g->mc - 1)), rt_i(l, g->mc));
    rt_kir_expr *n =
        rt_b(l, RT_KIR_DIV,
             rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_SUB, mt_now, rt_v(l, vr0)), rt_i(l, mt - 1)),
             rt_i(l, mt));
    rt_kir_node *lq = rt_kir_loop(a, body, vq, rt_i(l, 0), n, RT_KIR_LOOP_SERIAL);
    RT_LOWER_CHECK(l, lq);
    if (!lq)
        return body;
    rt_kir_block *rb = &lq->body;
    rt_let(l, rb, vi0,
           rt_b(l, RT_KIR_MUL,
                rt_b(l, RT_KIR_ADD, rt_v(l, vr0), rt_b(l, RT_KIR_MUL, rt_v(l, vq), rt_i(l, mt))),
                rt_i(l, g->mc)));
    rt_let(l, rb, vmc,
           rt_b(l, RT_KIR_MIN, rt_i(l, g->mc), rt_b(l, RT_KIR_SUB, rt_v(l, vm), rt_v(l, vi0))));
    return rb;
}

static bool rt_tok_reads(const rt_expr *e, int32_t t) {
    if (!e)
        return false;
    if (e->kind == RT_EXPR_READ && e->tensor == t)
        return true;
    for (int32_t i = 0; i < e->n_args; i++)
        if (rt_tok_reads(e->args[i], t))
            return true;
    return false;
}

// Does e read t only as t(b, i, n), never read y, hold no sum or tree construct, and read
// nothing else through b or i (those reads would need the (b, i) the flat row stands for)?
static bool rt_tok_epi_reads_ok(const rt_expr *e, int32_t t, int32_t y, const int32_t *bin) {
    if (e->kind == RT_EXPR_SUM || e->kind == RT_EXPR_CHILD)
        return false;
    if (e->kind == RT_EXPR_READ && e->tensor == y)
        return false;
    if (e->kind == RT_EXPR_READ && e->tensor == t) {
        if (e->n_args != 3)
            return false;
        for (int32_t d = 0; d < 3; d++)
            if (e->args[d]->kind != RT_EXPR_INDEX || e->args[d]->var != bin[d])
                return false;
        return true;
    }
    if (e->kind == RT_EXPR_READ)
        return !rt_expr_uses_var(e, bin[0]) && !rt_expr_uses_var(e, bin[1]);
    for (int32_t i = 0; i < e->n_args; i++)
        if (e->args[i] && !rt_tok_epi_reads_ok(e->args[i], t, y, bin))
            return false;
    return true;
}

bool rt_gemm_epi_detect_tokens(const rt_lower *l, const rt_gemm *g, rt_gemm_epi *epi) {
    const rt_op *op = l->op;
    const rt_stmt *s = &op->stmts[g->stmt];
    int32_t si = g->stmt + 1, t = s->out;
    epi->stmt = -1;
    epi->p = epi->q = epi->b0 = -1;
    if (si >= op->n_stmts)
        return false;
    const rt_stmt *s2 = &op->stmts[si];
    const rt_tensor *tt = &op->tensors[t];
    if (s2->op != RT_ASSIGN_SET || s2->n_preds > 0 || s2->recursive || s2->reduces ||
        s2->out == t || s2->n_vars != 3 || s2->n_loops != 3 || s2->n_lhs != 3)
        return false;
    // Y laid out as t: (b:B, len(b), N) of the same length tensor, so that its row r is t's.
    const rt_tensor *ty = &op->tensors[s2->out];
    if (ty->n_dims != 3 || ty->dtype != RT_DTYPE_F32 || ty->has_pad || !ty->dims[1].ragged ||
        !rt_expr_equal(ty->dims[1].extent, tt->dims[1].extent) ||
        l->extent[s2->out][0] != l->extent[t][0] || l->extent[s2->out][2] != g->N)
        return false;
    const int32_t *bin = s2->lhs_vars;
    const rt_ivar *vb = &s2->vars[bin[0]], *vi = &s2->vars[bin[1]], *vn = &s2->vars[bin[2]];
    int64_t lo, hi;
    const rt_expr *ih = vi->hi;
    if (!vb->lo || !vb->hi || !rt_expr_const_int(op, vb->lo, &lo) || lo != 0 ||
        !rt_expr_const_int(op, vb->hi, &hi) || hi != l->extent[t][0] || !vn->lo || !vn->hi ||
        !rt_expr_const_int(op, vn->lo, &lo) || lo != 0 || !rt_expr_const_int(op, vn->hi, &hi) ||
        hi != g->N || !vi->lo || !rt_expr_const_int(op, vi->lo, &lo) || lo != 0 || !ih ||
        ih->kind != RT_EXPR_READ || ih->n_args != 1 || ih->args[0]->kind != RT_EXPR_INDEX ||
        ih->args[0]->var != bin[0] || !rt_tok_epi_reads_ok(s2->rhs, t, s2->out, bin))
        return false;
    const rt_expr *th = s->vars[g->tok_i_var].hi;
    if (!th || th->kind != RT_EXPR_READ || th->tensor != ih->tensor)
        return false;
    epi->keep_c = tt->role == RT_ROLE_OUTPUT;
    for (int32_t j = si + 1; j < op->n_stmts; j++)
        epi->keep_c = epi->keep_c || op->stmts[j].out == t || rt_tok_reads(op->stmts[j].rhs, t);
    epi->stmt = si;
    epi->p = bin[1];
    epi->q = bin[2];
    epi->b0 = bin[0];
    return true;
}
