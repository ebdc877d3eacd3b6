// lower-cpu-naive.c: the loop order of the naive kernel (the check oracle, rt_lower_options.naive)
// for a reduction statement. The plain nest runs the kept vars, then the reduced ones innermost
// into one accumulator per output element: a contraction C(m, n) +=! A(m, k) * B(k, n) then
// walks B down a column, one cache line per multiply-add (FFN1 of the CORA encoder layer,
// 22722 x 2048 x 512 at batch 64 of RACE, took 70 s as the reference). Where a kept var c is
// the unit-stride one of the output and of the reads that move with it, and the reduction's
// innermost var is not, the nest becomes
//     kept vars but c { for c: acc = identity;  reduced vars { for c: acc = acc + body } }
// with acc the output itself, or, for the one sum inside an '=' statement (Y = tanh(sum)), a row
// of sums in the phase's per-thread scratch followed by a pass over c that stores the right side
// with the sum read from the row (the epilogue). The innermost loop then walks B's and C's rows
// (the same FFN1: 3.4 s). Each element takes its terms strictly in the reduced vars' order, from
// the identity (or the caller's value with +=), in the output's type, through the plain nest's
// operation (acc + term, a fused multiply-add where the term is a product): one chain per
// element whatever the vectorizer does with the row loop. The plain nest's reduction loop is
// serial in the naive kernel (no vector hint, which would let LLVM split the sum into lane
// partial sums): there too each element is one chain in the reduced vars' order.
#include "lower-cpu-impl.h"

// The sums in e (RT_EXPR_SUM nodes), the last one in *last.
static int32_t rt_naive_sums(const rt_expr *e, const rt_expr **last) {
    int32_t n = e->kind == RT_EXPR_SUM;
    if (n)
        *last = e;
    for (int32_t i = 0; i < e->n_args; i++)
        n += rt_naive_sums(e->args[i], last);
    return n;
}

// How an access moves along var v: not at all, at unit stride, or otherwise (a longer or an
// unknown stride: a coefficient outside the affine form, or a dim with a ragged one inside it).
typedef enum { RT_NAIVE_STILL, RT_NAIVE_UNIT, RT_NAIVE_STRIDED } rt_naive_step;

// The step along v of tensor t at indices args (n of them): the flat stride is the sum over dims
// of v's coefficient times the extents of the dims inside (rt_lx_offset's layout).
static rt_naive_step rt_naive_step_of(const rt_lower *l, int32_t t, rt_expr *const *args, int32_t n,
                                      int32_t v) {
    int64_t stride = 0;
    for (int32_t d = 0; d < n; d++) {
        if (!rt_expr_uses_var(args[d], v))
            continue;
        rt_affine af;
        if (!rt_expr_affine(l->op, args[d], &af))
            return RT_NAIVE_STRIDED;
        int64_t c = 0;
        for (int32_t i = 0; i < af.n_terms; i++)
            if (af.var[i] == v)
                c += af.coef[i];
        for (int32_t e = d + 1; e < n && c != 0; e++) {
            if (l->extent[t][e] < 0)
                return RT_NAIVE_STRIDED;
            c *= l->extent[t][e];
        }
        stride += c;
    }
    return stride == 0 ? RT_NAIVE_STILL : stride == 1 ? RT_NAIVE_UNIT : RT_NAIVE_STRIDED;
}

typedef struct rt_naive_score {
    int32_t strided, unit;
} rt_naive_score;

static void rt_naive_reads(const rt_lower *l, const rt_expr *e, int32_t v, rt_naive_score *sc) {
    if (e->kind == RT_EXPR_READ) {
        rt_naive_step st = rt_naive_step_of(l, e->tensor, e->args, e->n_args, v);
        sc->strided += st == RT_NAIVE_STRIDED;
        sc->unit += st == RT_NAIVE_UNIT;
    }
    for (int32_t i = 0; i < e->n_args; i++)
        rt_naive_reads(l, e->args[i], v, sc);
}

// The accesses of a term `body` of statement l->s (its reads) and of its output with v innermost.
static rt_naive_score rt_naive_score_of(const rt_lower *l, const rt_expr *body, int32_t v) {
    const rt_stmt *s = l->s;
    rt_naive_score sc = {0, 0};
    rt_naive_reads(l, body, v, &sc);
    rt_expr out_idx[RT_MAX_DIMS], *out_args[RT_MAX_DIMS];
    for (int32_t d = 0; d < s->n_lhs; d++) {
        out_idx[d] = (rt_expr){.kind = RT_EXPR_INDEX, .is_int = true, .var = s->lhs_vars[d]};
        out_args[d] = &out_idx[d];
    }
    rt_naive_step st = rt_naive_step_of(l, s->out, out_args, s->n_lhs, v);
    sc.strided += st == RT_NAIVE_STRIDED;
    sc.unit += st == RT_NAIVE_UNIT;
    return sc;
}

// Longest row of sums kept in scratch (elements): a sum's row longer than this keeps the plain
// nest rather than growing the phase's per-thread scratch without bound.
#define RT_NAIVE_ROW_MAX ((int64_t)1 << 16)

// Whether statement l->s can run the reordered nest, and its sum: the statement's own (+=!,
// += with the reduced vars red[0..nr), accumulating into its output, of the compute type, no sum
// inside its right side), or the one sum inside an '=' statement's right side (over its own
// vars, no sum inside it; its row goes to the phase's f32 scratch, the epilogue applied after).
static bool rt_naive_form(const rt_lower *l, const int32_t *red, int32_t nr, rt_naive_order *o) {
    const rt_stmt *s = l->s;
    const rt_expr *sum = NULL, *inner = NULL;
    int32_t n_sums = rt_naive_sums(s->rhs, &sum);
    if (!l->naive || s->recursive || s->n_preds > 0 || l->data_buf[s->out] <= 0)
        return false;
    if (s->op == RT_ASSIGN_ADD_INIT || s->op == RT_ASSIGN_ADD) {
        *o = (rt_naive_order){-1, NULL, s->rhs, red, nr};
        return nr > 0 && n_sums == 0 && l->k->bufs[l->data_buf[s->out]].type == l->ct;
    }
    if (s->op != RT_ASSIGN_SET || n_sums != 1 || sum->n_args != 1 ||
        rt_naive_sums(sum->args[0], &inner) != 0 || sum->n_sum_vars < 1 || l->ct != RT_KIR_F32 ||
        l->k->bufs[0].type != RT_KIR_F32)
        return false;
    *o = (rt_naive_order){-1, sum, sum->args[0], sum->sum_vars, sum->n_sum_vars};
    return true;
}

bool rt_naive_plan(const rt_lower *l, const int32_t *kept, int32_t nk, int32_t first,
                   const int32_t *red, int32_t nr, rt_naive_order *o) {
    const rt_stmt *s = l->s;
    if (!rt_naive_form(l, red, nr, o))
        return false;
    rt_naive_score best = rt_naive_score_of(l, o->body, o->red[o->nr - 1]);
    for (int32_t i = first; i < nk; i++) {
        int32_t c = kept[i];
        bool legal = true;
        for (int32_t w = 0; w < s->n_vars && legal; w++)
            legal = w == c ||
                    (!rt_expr_uses_var(s->vars[w].lo, c) && !rt_expr_uses_var(s->vars[w].hi, c));
        int64_t lo, hi;
        if (legal && o->sum)
            legal = rt_var_range(l, c, &lo, &hi) && hi - lo <= RT_NAIVE_ROW_MAX;
        if (!legal)
            continue;
        rt_naive_score sc = rt_naive_score_of(l, o->body, c);
        if (sc.strided < best.strided || (sc.strided == best.strided && sc.unit > best.unit) ||
            (o->c >= 0 && sc.strided == best.strided && sc.unit == best.unit)) {
            best = sc;
            o->c = c;
        }
    }
    return o->c >= 0;
}

// A loop over statement var v (bound to a new phase var) appended to blk; NULL when out of
// memory (l->oom set) or on an error in its range (*st set).
static rt_kir_node *rt_naive_loop(rt_lower *l, rt_kir_block *blk, int32_t v, rt_kir_loop_kind kind,
                                  rt_status *st) {
    rt_kir_expr *lo, *hi;
    *st = rt_tr_loops_range(l, v, &lo, &hi);
    if (*st != RT_OK)
        return NULL;
    l->var_of[v] = rt_kir_add_var(l->a, l->p, l->s->vars[v].name, RT_KIR_I64);
    rt_kir_node *loop =
        l->var_of[v] >= 0 ? rt_kir_loop(l->a, blk, l->var_of[v], lo, hi, kind) : NULL;
    RT_LOWER_CHECK(l, loop);
    return loop;
}

// The store of value at index of the phase's scratch, in blk.
static void rt_naive_scratch_store(rt_lower *l, rt_kir_block *blk, rt_kir_expr *index,
                                   rt_kir_expr *value) {
    rt_kir_node *st = rt_kir_append(l->a, blk, RT_KIR_N_STORE);
    RT_LOWER_CHECK(l, st && index && value);
    if (st) {
        st->buf = 0;
        st->index = index;
        st->value = value;
    }
}

// Where the element at c of the row accumulates: the output (its offset), or with a sum inside
// the statement, element c - lo of the row at `base` of the phase's scratch.
static rt_status rt_naive_acc_at(rt_lower *l, const rt_naive_order *o, int64_t base,
                                 rt_kir_expr **at) {
    if (!o->sum)
        return rt_lower_out_offset(l, at);
    rt_kir_expr *lo, *hi;
    RT_TRY(rt_tr_loops_range(l, o->c, &lo, &hi));
    *at = rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_SUB, rt_v(l, l->var_of[o->c]), lo), rt_i(l, base));
    return RT_OK;
}

// The element loops of statement l->s under blk, where the kept vars but o->c are bound: the
// row set to the identity (+=! and sums), then the reduced vars in order, each point adding its
// term to every element of the row along c (rt_naive_plan); with a sum inside the statement,
// last the pass that applies the rest of the right side to the row (the sum read from it).
rt_status rt_lower_naive_rows(rt_lower *l, rt_kir_block *blk, const rt_naive_order *o) {
    rt_arena *a = l->a;
    const rt_stmt *s = l->s;
    int32_t ab = o->sum ? 0 : l->data_buf[s->out];
    int64_t base = 0;
    if (o->sum) {
        int64_t lo, hi;
        rt_var_range(l, o->c, &lo, &hi);
        base = rt_round_up(l->p->scratch_bytes, 64) / 4;
        l->p->scratch_bytes = (base + rt_round_up(hi - lo, 16)) * 4;
        if (l->p->scratch_bytes > l->k->scratch_bytes)
            l->k->scratch_bytes = l->p->scratch_bytes;
    }
    rt_status st = RT_OK;
    rt_kir_expr *at;
    if (o->sum || s->op == RT_ASSIGN_ADD_INIT) {
        rt_kir_node *zero = rt_naive_loop(l, blk, o->c, RT_KIR_LOOP_VECTOR, &st);
        if (!zero)
            return st;
        RT_TRY(rt_naive_acc_at(l, o, base, &at));
        rt_kir_expr *id = rt_kir_flt(a, l->ct, o->sum ? 0.0 : rt_assign_identity(s->op));
        if (o->sum)
            rt_naive_scratch_store(l, &zero->body, at, id);
        else
            rt_lower_store_out(l, &zero->body, at, id);
    }
    rt_kir_block *inner = blk;
    for (int32_t i = 0; i < o->nr; i++) {
        rt_kir_node *loop = rt_naive_loop(l, inner, o->red[i], RT_KIR_LOOP_SERIAL, &st);
        if (!loop)
            return st;
        inner = &loop->body;
    }
    rt_kir_node *row = rt_naive_loop(l, inner, o->c, RT_KIR_LOOP_VECTOR, &st);
    if (!row)
        return st;
    RT_TRY(rt_naive_acc_at(l, o, base, &at));
    l->pre = &row->body;
    rt_kir_expr *x;
    RT_TRY(rt_tr_num(l, o->body, &x));
    // acc + x as the plain nest's accumulator takes it (rt_lower_element, rt_lx_sum).
    rt_kir_expr *cur = rt_kir_cast(a, l->ct, rt_kir_load(a, l->k, ab, at));
    rt_kir_expr *sum = rt_kir_bin(a, o->sum ? RT_KIR_ADD : rt_assign_bop(s->op), cur, x);
    if (!o->sum) {
        rt_lower_store_out(l, &row->body, at, sum);
        return RT_OK;
    }
    rt_naive_scratch_store(l, &row->body, at, sum);
    rt_kir_node *epi = rt_naive_loop(l, blk, o->c, RT_KIR_LOOP_VECTOR, &st);
    if (!epi)
        return st;
    RT_TRY(rt_naive_acc_at(l, o, base, &at));
    rt_kir_expr *off, *value;
    RT_TRY(rt_lower_out_offset(l, &off));
    l->pre = &epi->body;
    l->sum_at = o->sum;
    l->sum_value = rt_kir_load(a, l->k, 0, at);
    st = rt_tr_num(l, s->rhs, &value);
    l->sum_at = NULL;
    RT_TRY(st);
    rt_lower_store_out(l, &epi->body, off, value);
    return RT_OK;
}
