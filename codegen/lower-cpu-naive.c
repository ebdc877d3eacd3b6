// lower-cpu-naive.c: the loop order of the naive kernel (the check oracle, rt_lower_options.naive)
// for a reduction statement. The plain nest runs the kept vars, then the reduced ones innermost
// into one accumulator per output element: a contraction C(m, n) +=! A(m, k) * B(k, n) then
// walks B down a column, one cache line per multiply-add (FFN1 of an encoder layer at batch 64
// took 80 s as the reference). Where a kept var c is the unit-stride one of the output and of
// the reads that move with it, and the reduction's innermost var is not, the nest becomes
//     kept vars but c { for c: out = identity;  reduced vars { for c: out = out + body } }
// accumulating into the output itself: each element still takes its terms in the reduced vars'
// order from the same identity in the same type through the same operation, so the results are
// bitwise those of the plain nest, and the innermost loop walks B's and C's rows.
#include "lower-cpu-impl.h"

// Whether e mentions statement var v.
static bool rt_naive_mentions(const rt_expr *e, int32_t v) {
    if (!e)
        return false;
    if (e->kind == RT_EXPR_INDEX && e->var == v)
        return true;
    for (int32_t i = 0; i < e->n_args; i++)
        if (rt_naive_mentions(e->args[i], v))
            return true;
    return false;
}

// Whether e holds a sum (the reordered nest has no place for its loops).
static bool rt_naive_has_sum(const rt_expr *e) {
    if (e->kind == RT_EXPR_SUM)
        return true;
    for (int32_t i = 0; i < e->n_args; i++)
        if (rt_naive_has_sum(e->args[i]))
            return true;
    return false;
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
        if (!rt_naive_mentions(args[d], v))
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

// The accesses of statement l->s (its reads and its output) with v innermost.
static rt_naive_score rt_naive_score_of(const rt_lower *l, int32_t v) {
    const rt_stmt *s = l->s;
    rt_naive_score sc = {0, 0};
    rt_naive_reads(l, s->rhs, v, &sc);
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

// The kept var (among kept[first..nk)) to run innermost, under the reduced vars red[0..nr), or
// -1 to keep the plain nest: a sum (+=!, +=) whose accumulator is its output's type, with no
// sum inside its right side, whose c's range is mentioned by no other var's range (c's loop
// goes inside theirs; its own range mentions outer kept vars only, bound outside either way),
// and where c innermost has fewer strided accesses than the reduction's innermost var (or as
// many and more unit-stride ones). Ties go to the later kept var.
int32_t rt_naive_inner_var(const rt_lower *l, const int32_t *kept, int32_t nk, int32_t first,
                           const int32_t *red, int32_t nr) {
    const rt_stmt *s = l->s;
    if (!l->naive || nr == 0 || (s->op != RT_ASSIGN_ADD_INIT && s->op != RT_ASSIGN_ADD) ||
        s->recursive || s->n_preds > 0 || rt_naive_has_sum(s->rhs) || l->data_buf[s->out] <= 0 ||
        l->k->bufs[l->data_buf[s->out]].type != l->ct)
        return -1;
    rt_naive_score best = rt_naive_score_of(l, red[nr - 1]);
    int32_t pick = -1;
    for (int32_t i = first; i < nk; i++) {
        int32_t c = kept[i];
        bool legal = true;
        for (int32_t w = 0; w < s->n_vars && legal; w++)
            legal = w == c ||
                    (!rt_naive_mentions(s->vars[w].lo, c) && !rt_naive_mentions(s->vars[w].hi, c));
        if (!legal)
            continue;
        rt_naive_score sc = rt_naive_score_of(l, c);
        if (sc.strided < best.strided || (sc.strided == best.strided && sc.unit > best.unit) ||
            (pick >= 0 && sc.strided == best.strided && sc.unit == best.unit)) {
            best = sc;
            pick = c;
        }
    }
    return pick;
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

// The element loops of statement l->s under blk, where the kept vars but c are bound: the
// output's row set to the identity (+=!), then the reduced vars red[0..nr) in order, each point
// adding its term to every element of the row along c (rt_naive_inner_var).
rt_status rt_lower_naive_rows(rt_lower *l, rt_kir_block *blk, int32_t c, const int32_t *red,
                              int32_t nr) {
    rt_arena *a = l->a;
    const rt_stmt *s = l->s;
    int32_t ob = l->data_buf[s->out];
    rt_status st = RT_OK;
    rt_kir_expr *off;
    if (s->op == RT_ASSIGN_ADD_INIT) {
        rt_kir_node *zero = rt_naive_loop(l, blk, c, RT_KIR_LOOP_VECTOR, &st);
        if (!zero)
            return st;
        RT_TRY(rt_lower_out_offset(l, &off));
        rt_lower_store_out(l, &zero->body, off, rt_kir_flt(a, l->ct, rt_assign_identity(s->op)));
    }
    rt_kir_block *inner = blk;
    for (int32_t i = 0; i < nr; i++) {
        rt_kir_node *loop = rt_naive_loop(l, inner, red[i], RT_KIR_LOOP_SERIAL, &st);
        if (!loop)
            return st;
        inner = &loop->body;
    }
    rt_kir_node *row = rt_naive_loop(l, inner, c, RT_KIR_LOOP_VECTOR, &st);
    if (!row)
        return st;
    RT_TRY(rt_lower_out_offset(l, &off));
    l->pre = &row->body;
    rt_kir_expr *x;
    RT_TRY(rt_tr_num(l, s->rhs, &x));
    // acc + x as the plain nest's accumulator takes it (rt_lower_element), acc the element.
    rt_kir_expr *cur = rt_kir_cast(a, l->ct, rt_kir_load(a, l->k, ob, off));
    rt_lower_store_out(l, &row->body, off, rt_kir_bin(a, rt_assign_bop(s->op), cur, x));
    return RT_OK;
}
