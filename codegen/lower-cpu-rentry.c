// lower-cpu-rentry.c: a contraction over a ragged batch whose every entry is its own GEMM
// (perfmodel.h rt_perf_gemm_rentry_of: attention scores and attention x V over len(b) x len(b)
// per batch entry and head, the variable-size batched GEMM) on the packed micro-kernel. The
// batch vars become a work list of GEMMs with their actual extents: entry e's M, N and K are
// read from the length tensors at run time, its A, B and C are strided matrices whose base
// offsets and row strides come from the layout (src/ref/layout.h: start arrays, the lengths).
// A work unit is one entry's block of mc rows (A's pack at the entry's strides, masked edge
// panels, C stored at a run-time row stride, alpha folded into A's pack); the units, in entry
// order, get a cost (their multiply-adds plus their packing), and work item i of the plan's n
// runs the units whose first cost falls in [i W / n, (i + 1) W / n) of the total W. B is packed
// once per entry, k block (equal depths) and run of b_cols columns by each item that owns some
// of the entry's units, and reused by all of them (rt_perf_cpu_rentry_b_cols); where the plan
// reads B in place (re_b_in_place: attention x V's V over short sentences) the micro-kernels
// load its rows from the tensor instead.
// The pool gives each thread a contiguous run of items (hal-cpu.c), so every thread gets an
// equal share of the cost, within one unit, at any thread count.
// Causal attention (rt_perf_gemm_rentry.tri: j in 0:i + 1, the triangle stored packed, row i
// holding i + 1 entries): scores run each row panel's column panels only up to its last row
// and store through the micro-kernel's epilogue, masked per row at the row's packed offset
// (one k block); attention x V packs P's rows with zeros past i + 1 (rt_gemm_tri_pack_a), runs
// the k blocks up to the row block's last row and each panel's micro-kernel over its own k
// steps. B is packed only up to the last owned row's range; the units' costs are triangular
// (rt_re_tri_start) and each item finds its units by a walk over the entry's row blocks.
#include "lower-cpu-impl.h"

#include <string.h>

bool rt_gemm_detect_rentry(const rt_lower *l, int32_t si, rt_gemm *g) {
    memset(g, 0, sizeof *g);
    g->stmt = si;
    g->batch = 1;
    rt_perf_gemm_rentry *r = &g->re;
    if (!rt_perf_gemm_rentry_of(l->op, &l->op->stmts[si], r))
        return false;
    for (int32_t i = 0; i < 3; i++)
        if (r->len[i] >= 0 && l->data_buf[r->len[i]] < 0)
            return false;
    g->rentry = true;
    g->alpha = r->alpha;
    g->ra = r->ra, g->rb = r->rb;
    g->ta = r->ra->tensor, g->tb = r->rb->tensor;
    g->m_var = r->m_var, g->n_var = r->n_var, g->k_var = r->k_var;
    g->batch = r->entries;
    g->M = g->N = g->K = -1; // the plan's (the longest entry's); each entry's at run time
    return true;
}

// A fresh i64 phase var bound to v in blk; a constant stays a constant (no var).
static rt_kir_expr *rt_re_let(rt_lower *l, rt_kir_block *blk, const char *name, rt_kir_expr *v) {
    int64_t c;
    if (!v || rt_kir_is_int(v, &c))
        return v;
    int32_t var = rt_kir_add_var(l->a, l->p, name, RT_KIR_I64);
    RT_LOWER_CHECK(l, var >= 0);
    if (var < 0)
        return NULL;
    rt_let(l, blk, var, v);
    return rt_v(l, var);
}

// An i64 var named name, assigned v in blk (a running sum: assigned again later).
static int32_t rt_re_var(rt_lower *l, rt_kir_block *blk, const char *name, rt_kir_expr *v) {
    int32_t var = rt_kir_add_var(l->a, l->p, name, RT_KIR_I64);
    RT_LOWER_CHECK(l, var >= 0);
    if (var >= 0 && v)
        rt_let(l, blk, var, v);
    return var;
}

// The entry's extents in blk (the batch vars bound): M, N, K (constants or len(b) loads).
typedef struct rt_re_entry {
    rt_kir_expr *ext[3]; // M, N, K
    rt_kir_expr *cost;   // the entry's units' total cost
    rt_kir_expr *kp;     // K + 1 (an empty K still costs its stores)
    rt_kir_expr *idx;    // the entry's index
} rt_re_entry;

// Cost of a unit of `rows` rows: its multiply-adds and A's pack (rows x (N + 1) x (K + 1)),
// B's pack and a constant: never zero, so that every unit has an owner.
static rt_kir_expr *rt_re_unit_cost(rt_lower *l, const rt_re_entry *en, rt_kir_expr *rows) {
    rt_kir_expr *nk = rt_b(l, RT_KIR_MUL, rt_b(l, RT_KIR_ADD, en->ext[1], rt_i(l, 1)), en->kp);
    return rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rows, nk), rt_b(l, RT_KIR_ADD, nk, rt_i(l, 64)));
}

// Binds the batch vars to entry e in blk and gives its M, N, K (constants or len(b) loads).
static void rt_re_bind_ext(rt_lower *l, const rt_gemm *g, rt_kir_block *blk, rt_kir_expr *e,
                           rt_kir_expr **ext) {
    const rt_perf_gemm_rentry *r = &g->re;
    rt_gemm_unflatten(l, blk, e, r->batch_var, r->n_batch);
    static const char *const names[3] = {"m_len", "n_len", "k_len"};
    for (int32_t i = 0; i < 3; i++) {
        rt_kir_expr *x = rt_i(l, r->ext[i]);
        if (r->tri && i == r->tri) // the causal var: up to the last row's range, M + tri_c - 1
            x = rt_b(l, RT_KIR_MAX, rt_i(l, 0), rt_b(l, RT_KIR_ADD, ext[0], rt_i(l, r->tri_c - 1)));
        else if (r->len[i] >= 0)
            x = rt_kir_cast(
                l->a, RT_KIR_I64,
                rt_kir_load(l->a, l->k, l->data_buf[r->len[i]], rt_v(l, l->var_of[r->len_b[i]])));
        ext[i] = rt_re_let(l, blk, names[i], x);
    }
}

// A causal entry's units differ: row block q's cost is X (sum over its rows i of i + 2) + P,
// X the other var's extent + 1 (K of scores, N of attention x V), P the B pack's share and a
// constant, so that unit q starts at X F(q mc) + q P, F(n) = n (n - 1) / 2 + 2 n (its rows'
// multiply-adds, about; never zero).
static rt_kir_expr *rt_re_tri_start(rt_lower *l, const rt_gemm *g, const rt_re_entry *en,
                                    rt_kir_expr *q) {
    rt_kir_expr *x = rt_b(l, RT_KIR_ADD, en->ext[g->re.tri == 1 ? 2 : 1], rt_i(l, 1));
    rt_kir_expr *t = rt_b(l, RT_KIR_ADD, en->ext[g->re.tri], rt_i(l, 1));
    rt_kir_expr *n = rt_b(l, RT_KIR_MIN, rt_b(l, RT_KIR_MUL, q, rt_i(l, g->mc)), en->ext[0]);
    rt_kir_expr *f = rt_b(
        l, RT_KIR_ADD,
        rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_MUL, n, rt_b(l, RT_KIR_SUB, n, rt_i(l, 1))), rt_i(l, 2)),
        rt_b(l, RT_KIR_MUL, n, rt_i(l, 2)));
    rt_kir_expr *p = rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, t, x), rt_i(l, 64));
    return rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, x, f), rt_b(l, RT_KIR_MUL, q, p));
}

static void rt_re_bind_entry(rt_lower *l, const rt_gemm *g, rt_kir_block *blk, rt_kir_expr *e,
                             rt_re_entry *en) {
    en->idx = e;
    rt_re_bind_ext(l, g, blk, e, en->ext);
    en->kp = rt_b(l, RT_KIR_ADD, en->ext[2], rt_i(l, 1));
    if (g->re.tri) { // rt_re_tri_start at the entry's end
        en->cost = rt_re_let(
            l, blk, "e_cost",
            rt_re_tri_start(l, g, en,
                            rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_ADD, en->ext[0], rt_i(l, g->mc - 1)),
                                 rt_i(l, g->mc))));
        return;
    }
    // The sum of the units' costs: all M rows, and per row block the rest.
    rt_kir_expr *nb =
        rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_ADD, en->ext[0], rt_i(l, g->mc - 1)), rt_i(l, g->mc));
    rt_kir_expr *nk = rt_b(l, RT_KIR_MUL, rt_b(l, RT_KIR_ADD, en->ext[1], rt_i(l, 1)), en->kp);
    en->cost = rt_re_let(l, blk, "e_cost",
                         rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, en->ext[0], nk),
                              rt_b(l, RT_KIR_MUL, nb, rt_b(l, RT_KIR_ADD, nk, rt_i(l, 64)))));
}

// Tensor t as the entry's matrix: its offset at the GEMM vars 0 (the batch vars bound) and the
// stride of each of rv, kv (the product of the extents inside its dim, which only the batch
// vars decide: rt_perf_gemm_rentry_of checked the layout).
static void rt_re_matrix(rt_lower *l, const rt_gemm *g, rt_kir_block *blk, int32_t t,
                         const int32_t *vars, int32_t rv, int32_t kv, rt_kir_expr **base,
                         rt_kir_expr **s_row, rt_kir_expr **s_k) {
    const rt_tensor *tn = &l->op->tensors[t];
    rt_kir_expr *idx[RT_MAX_DIMS], *inner = rt_i(l, 1);
    *s_row = *s_k = rt_i(l, 0);
    for (int32_t d = tn->n_dims - 1; d >= 0; d--) {
        bool batch = vars[d] != g->m_var && vars[d] != g->n_var && vars[d] != g->k_var;
        idx[d] = batch ? rt_v(l, l->var_of[vars[d]]) : rt_i(l, 0);
        if (vars[d] == rv)
            *s_row = inner;
        if (vars[d] == kv)
            *s_k = inner;
        rt_kir_expr *ext = rt_i(l, l->extent[t][d]);
        if (tn->dims[d].ragged) { // len(x) with dim x indexed by a batch var
            const rt_expr *e = tn->dims[d].extent;
            ext = rt_kir_cast(l->a, RT_KIR_I64,
                              rt_kir_load(l->a, l->k, l->data_buf[e->tensor],
                                          rt_v(l, l->var_of[vars[e->args[0]->dim]])));
        }
        inner = rt_b(l, RT_KIR_MUL, inner, ext);
    }
    *base = rt_re_let(l, blk, "base", rt_tr_offset(l, t, idx, NULL));
    *s_row = rt_re_let(l, blk, "ld", *s_row);
    *s_k = kv >= 0 ? rt_re_let(l, blk, "ldk", *s_k) : *s_k;
}

static int64_t rt_re_const(rt_kir_expr *e) {
    int64_t c = 0;
    return e && rt_kir_is_int(e, &c) ? c : 0;
}

// Where a unit works: the entry's matrices and extents, the unit's first row and rows.
typedef struct rt_re_unit {
    rt_re_entry en;
    rt_kir_expr *a0, *am, *ak, *b0, *bn, *bk, *c0, *ldc;
    int32_t vi0, vmc;
    rt_kir_expr *p0; // the k block's first step
    int32_t b_sub;   // B's sub-panel width (rt_perf_cpu_rentry_b_sub; 0: nr-wide panels)
    bool b_t16;      // B packed per panel by 16 x 16 transposes (rt_gemm_pack_t16)
    bool a_in_place; // the plan's re_a_in_place: A read by the micro-kernel, alpha in B's pack
    bool b_in_place; // the plan's re_b_in_place: B's rows read by the micro-kernel, no B pack
    int64_t a_elems;
    // Small entries (rt_re_next_fits): the next entry's A and B as rows of contiguous elements
    // (per matrix: its buffer, first element, row stride, rows, elements per row; rows NULL:
    // none), whose lines the row panels of this entry prefetch (rt_re_prefetch_next_entry).
    int32_t nxb[2];
    rt_kir_expr *nx0[2], *nxs[2], *nxr[2], *nxl[2];
} rt_re_unit;

// A loop over [lo, hi) in blk with a fresh var; NULL (oom set) when out of memory.
static rt_kir_node *rt_re_loop(rt_lower *l, rt_kir_block *blk, const char *name, int32_t *var,
                               rt_kir_expr *lo, rt_kir_expr *hi) {
    *var = rt_kir_add_var(l->a, l->p, name, RT_KIR_I64);
    rt_kir_node *n = *var >= 0 ? rt_kir_loop(l->a, blk, *var, lo, hi, RT_KIR_LOOP_SERIAL) : NULL;
    RT_LOWER_CHECK(l, n);
    return n;
}

// An if (cond) node in blk; its body (NULL: out of memory).
static rt_kir_block *rt_re_if(rt_lower *l, rt_kir_block *blk, rt_kir_expr *cond) {
    rt_kir_node *n = rt_kir_append(l->a, blk, RT_KIR_N_IF);
    RT_LOWER_CHECK(l, n && cond);
    if (!n)
        return NULL;
    n->cond = cond;
    return &n->body;
}

static rt_kir_expr *rt_re_ceil(rt_lower *l, rt_kir_expr *x, int64_t d) {
    return rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_ADD, x, rt_i(l, d - 1)), rt_i(l, d));
}

// Do two entries' A and B (the plan's longest) fit in half of L2?
static bool rt_re_small(const rt_lower *l, const rt_gemm *g) {
    int64_t l2 = 0;
    const rt_device *dev = l->dev;
    if (dev && dev->n_levels >= 4)
        l2 = dev->level[dev->n_levels - 3].capacity_bytes;
    if (l2 <= 0)
        l2 = 1 << 20;
    return 4 * 2 * (g->M + g->N) * g->K <= l2 / 2;
}

// Entries small enough that the next one's A and B, prefetched while this one runs, fit in
// half of L2 beside this one's: attention's per-head GEMMs, whose rows of A and B lie 2 KiB
// apart (Q and K read as (b, i, h, d)) and would otherwise be fetched from memory by the packs
// one line at a time (on a Zen 3 core, qkt over 512 entries of 60 x 60 x 64: 3 of the 7 ms).
// Not for a warm operator (the plan's re_warm): the next entry's lines are in the last-level
// cache, and the prefetches only took fill buffers.
static bool rt_re_next_fits(const rt_lower *l, const rt_gemm *g) {
    return !g->warm && rt_re_small(l, g);
}

// The next entry's matrix i (tensor t, its vars, row var rv over rows, column var cv over K) as
// rows of contiguous elements: where cv is contiguous, its rows along rv (rows x K); where rv
// is, along cv (K x rows).
static void rt_re_next_operand(rt_lower *l, const rt_gemm *g, rt_kir_block *blk, int32_t t,
                               const int32_t *vars, int32_t rv, int32_t cv, rt_kir_expr *rows,
                               rt_kir_expr *K, rt_re_unit *u, int32_t i) {
    rt_kir_expr *s_row, *s_k;
    rt_re_matrix(l, g, blk, t, vars, rv, cv, &u->nx0[i], &s_row, &s_k);
    u->nxb[i] = l->data_buf[t];
    u->nxr[i] = NULL;
    if (rt_re_const(s_k) == 1)
        u->nxs[i] = s_row, u->nxr[i] = rows, u->nxl[i] = K;
    else if (rt_re_const(s_row) == 1)
        u->nxs[i] = s_k, u->nxr[i] = K, u->nxl[i] = rows;
}

// The next entry (the last one's is itself) bound in blk, then the current one again.
static void rt_re_bind_next(rt_lower *l, const rt_gemm *g, rt_kir_block *blk, rt_re_unit *u,
                            const int32_t *va, const int32_t *vb) {
    rt_kir_expr *ext[3];
    rt_kir_expr *e1 =
        rt_b(l, RT_KIR_MIN, rt_b(l, RT_KIR_ADD, u->en.idx, rt_i(l, 1)), rt_i(l, g->batch - 1));
    rt_re_bind_ext(l, g, blk, e1, ext);
    if (g->re.tri != 2) // causal P's rows are not equally long: not prefetched
        rt_re_next_operand(l, g, blk, g->ta, va, g->m_var, g->k_var, ext[0], ext[2], u, 0);
    rt_re_next_operand(l, g, blk, g->tb, vb, g->n_var, g->k_var, ext[1], ext[2], u, 1);
    rt_gemm_unflatten(l, blk, u->en.idx, g->re.batch_var, g->re.n_batch);
}

// Row panel ir of the entry's row block (while its first column block runs) prefetches its
// share of the next entry's rows of A and B, every line of each. (C's lines too, for the
// micro-kernels' stores, ran slower: 6.2-6.7 ms against 6.0-6.2 for qkt above.)
static void rt_re_prefetch_next_entry(rt_lower *l, const rt_gemm *g, rt_kir_block *blk,
                                      const rt_re_unit *u, int32_t vip) {
    // The entry's row panels: this one's index among them and their number.
    rt_kir_expr *pi =
        rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_DIV, rt_v(l, u->vi0), rt_i(l, g->mr)), rt_v(l, vip));
    rt_kir_expr *np = rt_b(l, RT_KIR_MAX, rt_i(l, 1), rt_re_ceil(l, u->en.ext[0], g->mr));
    for (int32_t i = 0; i < 2; i++) {
        if (!u->nxr[i])
            continue;
        rt_kir_expr *share = rt_b(
            l, RT_KIR_DIV, rt_b(l, RT_KIR_SUB, rt_b(l, RT_KIR_ADD, u->nxr[i], np), rt_i(l, 1)), np);
        rt_kir_expr *r0 = rt_b(l, RT_KIR_MUL, pi, share);
        int32_t vr, vq = rt_kir_add_var(l->a, l->p, "pf_line", RT_KIR_I64);
        RT_LOWER_CHECK(l, vq >= 0);
        rt_kir_node *lr =
            vq >= 0 ? rt_re_loop(l, blk, "pf_row", &vr, r0,
                                 rt_b(l, RT_KIR_MIN, u->nxr[i], rt_b(l, RT_KIR_ADD, r0, share)))
                    : NULL;
        rt_kir_expr *off = NULL;
        rt_kir_node *pf = lr ? rt_prefetch_lines(l, &lr->body, vq, u->nxl[i], &off) : NULL;
        if (!pf)
            return;
        pf->buf = u->nxb[i];
        pf->index = rt_b(l, RT_KIR_ADD, u->nx0[i],
                         rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, vr), u->nxs[i]), off));
        RT_LOWER_CHECK(l, pf->index);
    }
}

// While row panel ir of a column block runs, its share of the next column block's packed
// panels (the first block after the last: the next row block's) is prefetched: the panels of B
// the thread reuses across its row blocks are L3-resident (rt_perf_cpu_rentry_b_cols), and
// without it the first row panel of every block would wait on them.
static void rt_re_prefetch_next_b(rt_lower *l, const rt_gemm *g, rt_kir_block *blk,
                                  const rt_re_unit *u, int32_t vip, int32_t vkc, rt_kir_expr *bcol,
                                  int32_t vwc) {
    int64_t wide = rt_round_up(g->nc, g->nr);
    rt_kir_expr *span = rt_b(l, RT_KIR_MUL, rt_re_ceil(l, rt_v(l, vwc), g->nc), rt_i(l, g->nc));
    rt_kir_expr *nxt = rt_b(l, RT_KIR_MOD, rt_b(l, RT_KIR_ADD, bcol, rt_i(l, g->nc)), span);
    rt_kir_expr *panels =
        rt_b(l, RT_KIR_MUL, rt_re_ceil(l, rt_b(l, RT_KIR_SUB, rt_v(l, vwc), nxt), g->nr),
             rt_i(l, g->nr));
    rt_kir_expr *len =
        rt_b(l, RT_KIR_MUL, rt_b(l, RT_KIR_MIN, rt_i(l, wide), panels), rt_v(l, vkc));
    rt_kir_expr *share =
        rt_b(l, RT_KIR_DIV,
             rt_b(l, RT_KIR_SUB, rt_b(l, RT_KIR_ADD, len, rt_re_ceil(l, rt_v(l, u->vmc), g->mr)),
                  rt_i(l, 1)),
             rt_b(l, RT_KIR_MAX, rt_i(l, 1), rt_re_ceil(l, rt_v(l, u->vmc), g->mr)));
    rt_kir_expr *start = rt_b(l, RT_KIR_MUL, rt_v(l, vip), share);
    rt_kir_expr *cnt = rt_b(l, RT_KIR_MAX, rt_i(l, 0),
                            rt_b(l, RT_KIR_MIN, share, rt_b(l, RT_KIR_SUB, len, start)));
    int32_t vq = rt_kir_add_var(l->a, l->p, "pf_line", RT_KIR_I64);
    RT_LOWER_CHECK(l, vq >= 0);
    rt_kir_expr *off = NULL;
    rt_kir_node *pf = vq >= 0 ? rt_prefetch_lines(l, blk, vq, cnt, &off) : NULL;
    if (!pf)
        return;
    pf->buf = 0; // the scratch
    pf->index = rt_b(l, RT_KIR_ADD, rt_i(l, u->a_elems),
                     rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, nxt, rt_v(l, vkc)),
                          rt_b(l, RT_KIR_ADD, start, off)));
    RT_LOWER_CHECK(l, pf->index);
}

// Scores' C is the packed triangle: the micro-kernel's tile goes out through its epilogue
// (kir.h), element (i, j) stored where j < i + tri_c, at c0 + i tri_c + i (i - 1) / 2 + j (the
// layout's offset of row i within the entry). One k block: the epilogue runs on it, C is never
// read.
static void rt_re_tri_store(rt_lower *l, const rt_gemm *g, rt_kir_ukernel *uk, const rt_re_unit *u,
                            rt_kir_expr *row0, rt_kir_expr *col0) {
    rt_arena *a = l->a;
    uk->epi = rt_arena_calloc(a, 1, sizeof *uk->epi);
    uk->epi_acc = rt_kir_add_var(a, l->p, "cval", RT_KIR_F32);
    uk->epi_row = rt_kir_add_var(a, l->p, "ci", RT_KIR_I64);
    uk->epi_col = rt_kir_add_var(a, l->p, "cj", RT_KIR_I64);
    RT_LOWER_CHECK(l, uk->epi && uk->epi_acc >= 0 && uk->epi_row >= 0 && uk->epi_col >= 0);
    if (!uk->epi || uk->epi_acc < 0 || uk->epi_row < 0 || uk->epi_col < 0)
        return;
    uk->epi_row0 = row0;
    uk->epi_col0 = col0;
    uk->epi_last = rt_i(l, 1);
    uk->epi_keep_c = false;
    uk->accumulate = rt_i(l, 0);
    rt_kir_expr *i = rt_v(l, uk->epi_row), *j = rt_v(l, uk->epi_col);
    rt_kir_block *in =
        rt_re_if(l, uk->epi, rt_b(l, RT_KIR_LT, j, rt_b(l, RT_KIR_ADD, i, rt_i(l, g->re.tri_c))));
    rt_kir_node *st = in ? rt_kir_append(a, in, RT_KIR_N_STORE) : NULL;
    RT_LOWER_CHECK(l, st);
    if (!st)
        return;
    rt_kir_expr *tri =
        rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_MUL, i, rt_b(l, RT_KIR_SUB, i, rt_i(l, 1))), rt_i(l, 2));
    st->buf = uk->c_buf;
    st->index =
        rt_b(l, RT_KIR_ADD, u->c0,
             rt_b(l, RT_KIR_ADD,
                  rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, i, rt_i(l, g->re.tri_c)), tri), j));
    st->value = rt_v(l, uk->epi_acc);
    RT_LOWER_CHECK(l, st->index);
}

// The micro-kernels of one B block: row panels outside, column panels inside (as
// rt_lower_gemm), C at the entry's run-time row stride.
static void rt_re_tiles(rt_lower *l, const rt_gemm *g, rt_kir_block *blk, const rt_re_unit *u,
                        int32_t vpk, int32_t vkc, int32_t vj0, int32_t vnc, rt_kir_expr *bcol,
                        int32_t vnc_run) {
    const rt_stmt *s = &l->op->stmts[g->stmt];
    int32_t vip, vjp;
    rt_kir_node *li =
        rt_re_loop(l, blk, "ir", &vip, rt_i(l, 0), rt_re_ceil(l, rt_v(l, u->vmc), g->mr));
    // (With one column block in the run the next is this one: nothing to prefetch.)
    rt_kir_block *more =
        li && !u->b_in_place
            ? rt_re_if(l, &li->body, rt_b(l, RT_KIR_GT, rt_v(l, vnc_run), rt_i(l, g->nc)))
            : NULL;
    if (more)
        rt_re_prefetch_next_b(l, g, more, u, vip, vkc, bcol, vnc_run);
    if (li && (u->nxr[0] || u->nxr[1])) {
        rt_kir_block *first = rt_re_if(l, &li->body, rt_b(l, RT_KIR_EQ, bcol, rt_i(l, 0)));
        if (first)
            rt_re_prefetch_next_entry(l, g, first, u, vip);
    }
    rt_kir_expr *rows = rt_b(l, RT_KIR_MUL, rt_v(l, vip), rt_i(l, g->mr));
    rt_kir_expr *jr_hi = rt_re_ceil(l, rt_v(l, vnc), g->nr), *kc = rt_v(l, vkc);
    if (li && g->re.tri) {
        // The panel's last row's range end (row i: [0, i + tri_c)), less the block's start.
        rt_kir_expr *last = rt_b(
            l, RT_KIR_ADD, rt_v(l, u->vi0),
            rt_b(l, RT_KIR_SUB,
                 rt_b(l, RT_KIR_MIN, rt_b(l, RT_KIR_ADD, rows, rt_i(l, g->mr)), rt_v(l, u->vmc)),
                 rt_i(l, 1)));
        rt_kir_expr *end = rt_b(l, RT_KIR_ADD, last, rt_i(l, g->re.tri_c));
        if (g->re.tri == 1) { // scores: the column panels up to the panel's last row
            rt_kir_expr *w =
                rt_b(l, RT_KIR_MIN, rt_v(l, vnc),
                     rt_b(l, RT_KIR_MAX, rt_i(l, 0), rt_b(l, RT_KIR_SUB, end, rt_v(l, vj0))));
            jr_hi = rt_re_let(l, &li->body, "jr_hi", rt_re_ceil(l, w, g->nr));
        } else { // attention x V: the panel's k steps in the block (zeros past them)
            rt_kir_expr *kn =
                rt_re_let(l, &li->body, "uk_kn",
                          rt_b(l, RT_KIR_MIN, rt_v(l, vkc),
                               rt_b(l, RT_KIR_MAX, rt_i(l, 0), rt_b(l, RT_KIR_SUB, end, u->p0))));
            if (!u->b_sub) // sub-panels are kc apart: they keep the block's depth
                kc = kn;
            // A later k block the panel's rows do not reach adds nothing.
            jr_hi = rt_kir_select(l->a,
                                  rt_b(l, RT_KIR_AND, rt_b(l, RT_KIR_EQ, kn, rt_i(l, 0)),
                                       rt_b(l, RT_KIR_GT, rt_v(l, vpk), rt_i(l, 0))),
                                  rt_i(l, 0), jr_hi);
        }
    }
    rt_kir_node *lj = li ? rt_re_loop(l, &li->body, "jr", &vjp, rt_i(l, 0), jr_hi) : NULL;
    rt_kir_node *n = lj ? rt_kir_append(l->a, &lj->body, RT_KIR_N_UKERNEL) : NULL;
    RT_LOWER_CHECK(l, n);
    if (!n)
        return;
    rt_kir_ukernel *uk = &n->uk;
    rt_kir_expr *cols = rt_b(l, RT_KIR_MUL, rt_v(l, vjp), rt_i(l, g->nr));
    uk->mr = g->mr;
    uk->nr = g->nr;
    uk->vl = (int32_t)l->rp->cpu.uk_lanes;
    uk->kc = kc;
    uk->a_off = rt_b(l, RT_KIR_MUL, rows, rt_v(l, vkc));
    rt_kir_expr *row = rt_b(l, RT_KIR_ADD, rt_v(l, u->vi0), rows);
    if (u->a_in_place) { // row i0 + rows of the entry's A at the k block's first step (kir.h)
        uk->a_ld = rt_re_const(u->am); // a ragged A's rows: the entry's length, at run time
        uk->a_ld_rt = uk->a_ld > 0 ? NULL : u->am;
        uk->a_buf = l->data_buf[g->ta];
        uk->a_off =
            rt_b(l, RT_KIR_ADD, u->a0, rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, row, u->am), u->p0));
        // Larger entries: the first column panel's call prefetches the next row panel's rows
        // over the k block (kir.h a_pf_next), which the hardware prefetchers do not follow
        // across mr rows a row stride apart, one row per k step. (Every line of them in a loop
        // before the call stalled on the fill buffers: 19% of attention x V's time over RACE's
        // sequences on a Sapphire Rapids core; spread over the k loop it ran 1.10-1.22x faster
        // in same-process A/B turns; Q.K^T over SQuAD's and RACE's within the noise.) Only a
        // whole next panel within the block: every address the hints form is one of its rows.
        if (!rt_re_small(l, g))
            uk->a_pf_next =
                rt_kir_select(l->a,
                              rt_b(l, RT_KIR_AND, rt_b(l, RT_KIR_EQ, rt_v(l, vjp), rt_i(l, 0)),
                                   rt_b(l, RT_KIR_LE, rt_b(l, RT_KIR_ADD, rows, rt_i(l, 2 * g->mr)),
                                        rt_v(l, u->vmc))),
                              rt_b(l, RT_KIR_MUL, rt_i(l, g->mr), u->am), rt_i(l, 0));
    }
    uk->b_off = rt_b(l, RT_KIR_ADD, rt_i(l, u->a_elems),
                     rt_b(l, RT_KIR_MUL, rt_b(l, RT_KIR_ADD, bcol, cols), rt_v(l, vkc)));
    if (u->b_in_place) { // B's rows from the k block's first step, columns j0 + cols (kir.h)
        uk->b_ld = rt_re_const(u->bk);
        uk->b_buf = l->data_buf[g->tb];
        uk->b_off =
            rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_ADD, u->b0, rt_b(l, RT_KIR_MUL, u->p0, u->bk)),
                 rt_b(l, RT_KIR_ADD, rt_v(l, vj0), cols));
    }
    uk->c_buf = l->data_buf[s->out];
    uk->c_off = rt_b(l, RT_KIR_ADD, u->c0,
                     rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, row, u->ldc),
                          rt_b(l, RT_KIR_ADD, rt_v(l, vj0), cols)));
    uk->b_sub = u->b_sub;
    uk->ldc = rt_re_const(u->ldc);
    uk->ldc_rt = uk->ldc > 0 ? NULL : u->ldc;
    uk->m_valid = rt_b(l, RT_KIR_MIN, rt_i(l, g->mr), rt_b(l, RT_KIR_SUB, rt_v(l, u->vmc), rows));
    uk->tail_acc = g->row_tail_acc;
    uk->no_pf_c = g->warm;
    uk->n_valid = rt_b(l, RT_KIR_MIN, rt_i(l, g->nr), rt_b(l, RT_KIR_SUB, rt_v(l, vnc), cols));
    // '+=!' overwrites on the entry's first k block (its only one when K = 0: zeros).
    uk->accumulate =
        s->op == RT_ASSIGN_ADD ? rt_i(l, 1) : rt_b(l, RT_KIR_GT, rt_v(l, vpk), rt_i(l, 0));
    uk->epi_pf_buf = -1;
    if (g->re.tri == 1)
        rt_re_tri_store(l, g, uk, u, row, rt_b(l, RT_KIR_ADD, rt_v(l, vj0), cols));
    RT_LOWER_CHECK(l, uk->a_off && uk->b_off && uk->c_off && uk->m_valid && uk->n_valid &&
                          uk->accumulate);
}

// B's columns [s0, s0 + wcur) of the k block (p0, kcur) -> scratch after A's block, as
// nr-wide panels (of b_sub-wide sub-panels where B's k is contiguous).
static void rt_re_pack_b(rt_lower *l, const rt_gemm *g, rt_kir_block *blk, const rt_re_unit *u,
                         int32_t vs0, int32_t vwc, int32_t vp0, int32_t vkc) {
    rt_kir_expr *bbase = rt_b(l, RT_KIR_ADD, u->b0,
                              rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, vs0), u->bn),
                                   rt_b(l, RT_KIR_MUL, rt_v(l, vp0), u->bk)));
    double alpha = u->a_in_place ? g->alpha : 1.0; // A's scale, where A is not packed
    if (u->b_t16) { // 16 rows per 16 x 16 transposes instead of a gather per k step
        rt_gemm_pack_t16(l, blk, "B rows of the entry (k contiguous) -> the nr-wide k-major panel",
                         g->nr, rt_v(l, vwc), rt_v(l, vkc), l->data_buf[g->tb], bbase, u->bn, alpha,
                         rt_i(l, u->a_elems));
        return;
    }
    rt_gemm_pack_sub(l, blk,
                     u->b_sub ? "B columns of the entry (k contiguous) -> scratch, nr-wide panels "
                                "of 8-wide k-major sub-panels"
                              : "B columns of the entry -> scratch, nr-wide k-major panels",
                     g->nr, u->b_sub ? u->b_sub : g->nr, rt_v(l, vwc), rt_v(l, vkc),
                     l->data_buf[g->tb], bbase, rt_re_const(u->bn), rt_re_const(u->bk), u->bn,
                     u->bk, alpha, rt_i(l, u->a_elems));
}

static void rt_re_row_block_b(rt_lower *l, const rt_gemm *g, rt_kir_block *blk, const rt_re_unit *u,
                              int32_t vpk, int32_t vkc, int32_t vs0, int32_t vwc);

// One row block [i0, i0 + mcur) of the entry against B's packed columns [s0, s0 + wcur): A's
// pack, then per column block of nc the micro-kernels.
static void rt_re_row_block(rt_lower *l, const rt_gemm *g, rt_kir_block *blk, const rt_re_unit *u,
                            int32_t vpk, int32_t vp0, int32_t vkc, int32_t vs0, int32_t vwc) {
    if (g->re.tri == 2) { // causal P: each row's [0, i + tri_c) at its packed offset, zeros past
        rt_gemm gt = *g;
        gt.tri = (rt_perf_tri_range){true, 0, 0, g->re.tri_c, 1};
        gt.tri_s = gt.tri_c = 0;
        rt_status st = rt_gemm_tri_pack_a(l, blk, &gt, u->vmc, vkc, u->vi0, vp0, 0);
        RT_LOWER_CHECK(l, st == RT_OK);
        rt_re_row_block_b(l, g, blk, u, vpk, vkc, vs0, vwc);
        return;
    }
    if (u->a_in_place) { // the micro-kernels read A's rows (rt_re_tiles)
        rt_re_row_block_b(l, g, blk, u, vpk, vkc, vs0, vwc);
        return;
    }
    rt_kir_expr *abase = rt_b(l, RT_KIR_ADD, u->a0,
                              rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rt_v(l, u->vi0), u->am),
                                   rt_b(l, RT_KIR_MUL, rt_v(l, vp0), u->ak)));
    rt_gemm_pack_sub(l, blk, "A block of the entry -> scratch, mr-tall k-major panels", g->mr,
                     g->mr, rt_v(l, u->vmc), rt_v(l, vkc), l->data_buf[g->ta], abase,
                     rt_re_const(u->am), rt_re_const(u->ak), u->am, u->ak, g->alpha, rt_i(l, 0));
    rt_re_row_block_b(l, g, blk, u, vpk, vkc, vs0, vwc);
}

// The row block's column blocks of nc against B's packed columns [s0, s0 + wcur).
static void rt_re_row_block_b(rt_lower *l, const rt_gemm *g, rt_kir_block *blk, const rt_re_unit *u,
                              int32_t vpk, int32_t vkc, int32_t vs0, int32_t vwc) {
    int32_t vjb;
    rt_kir_node *lb =
        rt_re_loop(l, blk, "jb", &vjb, rt_i(l, 0), rt_re_ceil(l, rt_v(l, vwc), g->nc));
    if (!lb)
        return;
    rt_kir_block *jbb = &lb->body;
    rt_kir_expr *bcol = rt_b(l, RT_KIR_MUL, rt_v(l, vjb), rt_i(l, g->nc));
    int32_t vj0 = rt_re_var(l, jbb, "j0", rt_b(l, RT_KIR_ADD, rt_v(l, vs0), bcol));
    int32_t vnc =
        rt_re_var(l, jbb, "ncur",
                  rt_b(l, RT_KIR_MIN, rt_i(l, g->nc), rt_b(l, RT_KIR_SUB, rt_v(l, vwc), bcol)));
    if (vj0 < 0 || vnc < 0)
        return;
    rt_re_tiles(l, g, jbb, u, vpk, vkc, vj0, vnc, bcol, vwc);
}

// The row blocks [rb_lo, rb_hi) of the entry (those this item owns): per k block (at least one)
// and run of b_cols columns of B, B's pack once, then every row block against it.
static void rt_re_units_body(rt_lower *l, const rt_gemm *g, rt_kir_block *blk, rt_re_unit *u,
                             rt_kir_expr *rb_lo, rt_kir_expr *rb_hi, int64_t b_cols) {
    rt_kir_expr *K = u->en.ext[2], *N = u->en.ext[1];
    int32_t vpk, vsb, vrb;
    if (g->re.tri) { // the causal var: only up to the last owned row's range
        rt_kir_expr *end = rt_b(l, RT_KIR_MAX, rt_i(l, 0),
                                rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_MUL, rb_hi, rt_i(l, g->mc)),
                                     rt_i(l, g->re.tri_c - 1)));
        rt_kir_expr **x = g->re.tri == 1 ? &N : &K;
        *x = rt_re_let(l, blk, "tri_end", rt_b(l, RT_KIR_MIN, *x, end));
    }
    // As few k blocks as kc allows, of equal depth (the model's rentry_kblocks); one empty block
    // when K = 0 (it zeroes C).
    rt_kir_expr *nkb =
        rt_re_let(l, blk, "n_kb", rt_b(l, RT_KIR_MAX, rt_i(l, 1), rt_re_ceil(l, K, g->kc)));
    rt_kir_expr *kstep = rt_re_let(
        l, blk, "kstep",
        rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_SUB, rt_b(l, RT_KIR_ADD, K, nkb), rt_i(l, 1)), nkb));
    rt_kir_node *lk = rt_re_loop(l, blk, "pk", &vpk, rt_i(l, 0), nkb);
    if (!lk)
        return;
    rt_kir_block *kb = &lk->body;
    int32_t vp0 = rt_re_var(l, kb, "p0", rt_b(l, RT_KIR_MUL, rt_v(l, vpk), kstep));
    int32_t vkc =
        rt_re_var(l, kb, "kcur", rt_b(l, RT_KIR_MIN, kstep, rt_b(l, RT_KIR_SUB, K, rt_v(l, vp0))));
    rt_kir_node *ls = vp0 >= 0 && vkc >= 0
                          ? rt_re_loop(l, kb, "sb", &vsb, rt_i(l, 0), rt_re_ceil(l, N, b_cols))
                          : NULL;
    if (!ls)
        return;
    rt_kir_block *sbb = &ls->body;
    int32_t vs0 = rt_re_var(l, sbb, "s0", rt_b(l, RT_KIR_MUL, rt_v(l, vsb), rt_i(l, b_cols)));
    int32_t vwc = rt_re_var(
        l, sbb, "wcur", rt_b(l, RT_KIR_MIN, rt_i(l, b_cols), rt_b(l, RT_KIR_SUB, N, rt_v(l, vs0))));
    if (vs0 < 0 || vwc < 0)
        return;
    if (!u->b_in_place)
        rt_re_pack_b(l, g, sbb, u, vs0, vwc, vp0, vkc);
    rt_kir_node *lr = rt_re_loop(l, sbb, "rb", &vrb, rb_lo, rb_hi);
    if (!lr)
        return;
    u->vi0 = rt_re_var(l, &lr->body, "i0", rt_b(l, RT_KIR_MUL, rt_v(l, vrb), rt_i(l, g->mc)));
    u->vmc = u->vi0 < 0 ? -1
                        : rt_re_var(l, &lr->body, "mcur",
                                    rt_b(l, RT_KIR_MIN, rt_i(l, g->mc),
                                         rt_b(l, RT_KIR_SUB, u->en.ext[0], rt_v(l, u->vi0))));
    if (u->vmc < 0)
        return;
    u->p0 = rt_v(l, vp0);
    rt_kir_block *rbb = &lr->body;
    if (g->re.tri) {
        // The block's range end (its last row's), less the k block's or the run's start.
        rt_kir_expr *end =
            rt_b(l, RT_KIR_ADD, rt_b(l, RT_KIR_ADD, rt_v(l, u->vi0), rt_v(l, u->vmc)),
                 rt_i(l, g->re.tri_c - 1));
        if (g->re.tri == 1) { // scores: its columns in the run
            int32_t w = rt_re_var(
                l, rbb, "wrb",
                rt_b(l, RT_KIR_MIN, rt_v(l, vwc), rt_b(l, RT_KIR_SUB, end, rt_v(l, vs0))));
            rbb = w >= 0 ? rt_re_if(l, rbb, rt_b(l, RT_KIR_GT, rt_v(l, w), rt_i(l, 0))) : NULL;
            vwc = w;
        } else { // attention x V: a later k block past its rows adds nothing
            rbb = rt_re_if(l, rbb,
                           rt_b(l, RT_KIR_OR, rt_b(l, RT_KIR_EQ, rt_v(l, vpk), rt_i(l, 0)),
                                rt_b(l, RT_KIR_GT, end, rt_v(l, vp0))));
        }
        if (!rbb)
            return;
    }
    rt_re_row_block(l, g, rbb, u, vpk, vp0, vkc, vs0, vwc);
}

static void rt_re_read_vars(const rt_expr *r, int32_t *vars) {
    for (int32_t d = 0; d < r->n_args; d++)
        vars[d] = r->args[d]->var;
}

// The offset of t at its GEMM vars 0, the batch vars bound (the entry's first element).
static rt_kir_expr *rt_re_base(rt_lower *l, const rt_gemm *g, int32_t t, const int32_t *vars) {
    rt_kir_expr *idx[RT_MAX_DIMS];
    const rt_tensor *tn = &l->op->tensors[t];
    for (int32_t d = 0; d < tn->n_dims; d++) {
        bool batch = vars[d] != g->m_var && vars[d] != g->n_var && vars[d] != g->k_var;
        idx[d] = batch ? rt_v(l, l->var_of[vars[d]]) : rt_i(l, 0);
    }
    return rt_tr_offset(l, t, idx, NULL);
}

// A causal entry's units r in [r[0], r[1]): the first whose start (rt_re_tri_start, from the
// entry's vs) reaches from[0], resp. from[1], found by a walk over its nb row blocks (units
// of unequal cost).
static void rt_re_tri_units(rt_lower *l, const rt_gemm *g, rt_kir_block *blk, const rt_re_entry *en,
                            int32_t vs, rt_kir_expr *nb, rt_kir_expr *const *from,
                            rt_kir_expr **r) {
    int32_t vr[2], vq;
    for (int32_t i = 0; i < 2; i++) {
        vr[i] = rt_re_var(l, blk, i ? "rb_hi" : "rb_lo", nb);
        r[i] = vr[i] >= 0 ? rt_v(l, vr[i]) : NULL;
    }
    rt_kir_node *lq =
        vr[0] >= 0 && vr[1] >= 0 ? rt_re_loop(l, blk, "rq", &vq, rt_i(l, 0), nb) : NULL;
    if (!lq)
        return;
    rt_kir_expr *st =
        rt_re_let(l, &lq->body, "u_start",
                  rt_b(l, RT_KIR_ADD, rt_v(l, vs), rt_re_tri_start(l, g, en, rt_v(l, vq))));
    for (int32_t i = 0; i < 2; i++) {
        rt_kir_block *b = rt_re_if(l, &lq->body, rt_b(l, RT_KIR_GE, st, from[i]));
        if (b)
            rt_let(l, b, vr[i], rt_b(l, RT_KIR_MIN, r[i], rt_v(l, vq)));
    }
}

// The units of one entry (its extents en bound in blk): those whose first cost, counted from
// the entry's (var vs), is in [lo, hi) run.
static void rt_re_entry_units(rt_lower *l, const rt_gemm *g, rt_kir_block *blk,
                              const rt_re_entry *en, int32_t vs, rt_kir_expr *lo, rt_kir_expr *hi,
                              int64_t a_elems, int64_t b_cols) {
    const rt_stmt *s = &l->op->stmts[g->stmt];
    rt_re_unit u = {.en = *en, .a_elems = a_elems};
    int32_t va[RT_MAX_DIMS], vb[RT_MAX_DIMS];
    rt_re_read_vars(g->ra, va);
    rt_re_read_vars(g->rb, vb);
    rt_kir_expr *unused;
    if (rt_re_next_fits(l, g))
        rt_re_bind_next(l, g, blk, &u, va, vb);
    // A causal triangle (P of attention x V, S of scores) has no row stride: the masked pack
    // and the masked store address its rows (the entry's base for the latter).
    if (g->re.tri != 2)
        rt_re_matrix(l, g, blk, g->ta, va, g->m_var, g->k_var, &u.a0, &u.am, &u.ak);
    rt_re_matrix(l, g, blk, g->tb, vb, g->n_var, g->k_var, &u.b0, &u.bn, &u.bk);
    if (g->re.tri == 1)
        u.c0 = rt_re_let(l, blk, "base", rt_re_base(l, g, s->out, s->lhs_vars)), u.ldc = rt_i(l, 1);
    else
        rt_re_matrix(l, g, blk, s->out, s->lhs_vars, g->m_var, -1, &u.c0, &u.ldc, &unused);
    // B's k contiguous (K of Q.K^T read as (b, j, h, d)): its nr-wide panel would gather nr rows
    // per k step. On vectors of at most 8 lanes, as 8-row sub-panels its pack runs the k steps in
    // vector lanes with 8x8 transposes (rt_gemm_pack_panels) and the micro-kernel reads one
    // stream per sub-panel; on 16 lanes, 16 rows at a time by 16x16 transposes into the panel.
    u.b_sub = rt_perf_cpu_rentry_b_sub(g->nr, l->rp->cpu.uk_lanes, rt_re_const(u.bk) == 1);
    u.b_t16 = rt_perf_cpu_b_t16(g->nr, l->rp->cpu.uk_lanes, rt_re_const(u.bk) == 1);
    u.a_in_place = l->rp->cpu.gemm.re_a_in_place;
    // The model's A rows run along k (rentry_a_in_place); their stride is the layout's, a
    // constant or the entry's (uk a_ld_rt).
    RT_LOWER_CHECK(l, !u.a_in_place || rt_re_const(u.ak) == 1);
    // B in place: its rows along n, whole nr-wide panels only (rentry_b_in_place).
    u.b_in_place = l->rp->cpu.gemm.re_b_in_place;
    RT_LOWER_CHECK(l,
                   !u.b_in_place || (rt_re_const(u.bn) == 1 && rt_re_const(u.bk) > 0 && !u.b_sub &&
                                     !u.b_t16 && g->re.ext[1] % g->nr == 0 && g->nc % g->nr == 0));
    // Row block r starts at cost vs + r U (U: a full block's cost; only the last is shorter):
    // this item's are r in [ceil((lo - vs) / U), ceil((hi - vs) / U)) within [0, nb).
    rt_kir_expr *nb = rt_re_ceil(l, en->ext[0], g->mc);
    rt_kir_expr *from[2] = {lo, hi}, *r[2];
    if (g->re.tri) {
        rt_re_tri_units(l, g, blk, en, vs, nb, from, r);
        rt_kir_block *ub = rt_re_if(l, blk, rt_b(l, RT_KIR_LT, r[0], r[1]));
        if (ub)
            rt_re_units_body(l, g, ub, &u, r[0], r[1], b_cols);
        return;
    }
    rt_kir_expr *U = rt_re_let(l, blk, "u_cost", rt_re_unit_cost(l, en, rt_i(l, g->mc)));
    for (int32_t i = 0; i < 2; i++) {
        rt_kir_expr *d = rt_b(l, RT_KIR_MAX, rt_i(l, 0), rt_b(l, RT_KIR_SUB, from[i], rt_v(l, vs)));
        rt_kir_expr *q =
            rt_b(l, RT_KIR_DIV, rt_b(l, RT_KIR_SUB, rt_b(l, RT_KIR_ADD, d, U), rt_i(l, 1)), U);
        r[i] = rt_re_let(l, blk, i ? "rb_hi" : "rb_lo", rt_b(l, RT_KIR_MIN, nb, q));
    }
    rt_kir_block *ub = rt_re_if(l, blk, rt_b(l, RT_KIR_LT, r[0], r[1]));
    if (ub)
        rt_re_units_body(l, g, ub, &u, r[0], r[1], b_cols);
}

// A loop over n entries in blk, the v-th of them entry e0 + v step (its var in *var), with the
// entry's extents and cost bound in its body.
static rt_kir_block *rt_re_entries(rt_lower *l, const rt_gemm *g, rt_kir_block *blk,
                                   rt_re_entry *en, rt_kir_expr *e0, int64_t n, int64_t step,
                                   int32_t *var) {
    rt_kir_node *nd = rt_re_loop(l, blk, "entry", var, rt_i(l, 0), rt_i(l, n));
    if (!nd)
        return NULL;
    rt_kir_expr *e = rt_b(l, RT_KIR_ADD, e0, rt_b(l, RT_KIR_MUL, rt_v(l, *var), rt_i(l, step)));
    rt_re_bind_entry(l, g, &nd->body, e, en);
    return l->oom ? NULL : &nd->body;
}

// Does the cost range [vs, vs + cost) meet this item's [lo, hi)?
static rt_kir_expr *rt_re_meets(rt_lower *l, int32_t vs, rt_kir_expr *cost, rt_kir_expr *lo,
                                rt_kir_expr *hi) {
    return rt_b(l, RT_KIR_AND, rt_b(l, RT_KIR_LT, rt_v(l, vs), hi),
                rt_b(l, RT_KIR_GT, rt_b(l, RT_KIR_ADD, rt_v(l, vs), cost), lo));
}

rt_status rt_lower_gemm_rentry(rt_lower *l, const rt_gemm *g) {
    rt_arena *a = l->a;
    const rt_stmt *s = &l->op->stmts[g->stmt];
    int64_t items = rt_max64(1, l->rp->cpu.gemm.items);
    const char *what = rt_arena_printf(
        a,
        "statement %d: packed GEMM per entry of %lld (each at its own extents, at most "
        "%lldx%lldx%lld), work units of mc=%d rows split by cost over %lld items, nc=%d kc=%d, "
        "micro-kernel %dx%d",
        (int)g->stmt, (long long)g->batch, (long long)g->M, (long long)g->N, (long long)g->K, g->mc,
        (long long)items, g->nc, g->kc, g->mr, g->nr);
    // Causal scores store the packed triangle from the one k block's epilogue (rt_re_tri_store;
    // rt_perf_cpu_rentry_block makes kc hold K).
    if (g->re.tri == 1 && g->re.ext[2] > g->kc)
        return rt_fail(l->err, RT_ERR_BACKEND, s->loc,
                       "internal: causal scores need one k block (K %lld over kc %d)",
                       (long long)g->re.ext[2], g->kc);
    l->p = rt_kir_add_phase(a, l->k, what ? what : "gemm", items);
    if (!l->p)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    l->done.gemm.items = items;
    RT_TRY(rt_lower_begin_stmt(l, s));
    int64_t a_elems = rt_round_up((int64_t)g->mc * g->kc, 16);
    rt_perf_cpu_gemm pg = {.N = g->N, .kc = g->kc, .nc = g->nc};
    int64_t b_cols = rt_perf_cpu_rentry_b_cols(&pg);
    bool b_packed = !l->rp->cpu.gemm.re_b_in_place;
    l->p->scratch_bytes = (a_elems + (b_packed ? rt_round_up(b_cols, g->nr) * g->kc : 0)) * 4;
    if (l->p->scratch_bytes > l->k->scratch_bytes)
        l->k->scratch_bytes = l->p->scratch_bytes;
    rt_kir_block *body = &l->p->body;
    rt_re_entry en;
    // Entries come in runs of `run` of equal cost (rt_perf_gemm_rentry_run: the heads of one
    // sequence): the walks step over runs, and only a run that meets the item's share is
    // walked entry by entry. The total cost W, then this item's share [lo, hi) of it.
    int64_t run = rt_perf_gemm_rentry_run(&g->re), runs = g->batch / run;
    int32_t vw = rt_re_var(l, body, "w_total", rt_i(l, 0)), vg;
    rt_kir_block *e1 = vw >= 0 ? rt_re_entries(l, g, body, &en, rt_i(l, 0), runs, run, &vg) : NULL;
    if (!e1)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_let(l, e1, vw, rt_b(l, RT_KIR_ADD, rt_v(l, vw), rt_b(l, RT_KIR_MUL, en.cost, rt_i(l, run))));
    rt_kir_expr *item = rt_v(l, l->p->item_var);
    rt_kir_expr *lo =
        rt_re_let(l, body, "w_lo", rt_re_ceil(l, rt_b(l, RT_KIR_MUL, item, rt_v(l, vw)), items));
    rt_kir_expr *hi = rt_re_let(
        l, body, "w_hi",
        rt_re_ceil(l, rt_b(l, RT_KIR_MUL, rt_b(l, RT_KIR_ADD, item, rt_i(l, 1)), rt_v(l, vw)),
                   items));
    int32_t vs = rt_re_var(l, body, "e_cost0", rt_i(l, 0));
    rt_kir_block *e2 = vs >= 0 ? rt_re_entries(l, g, body, &en, rt_i(l, 0), runs, run, &vg) : NULL;
    if (!e2)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_kir_expr *run_cost =
        rt_re_let(l, e2, "run_cost", rt_b(l, RT_KIR_MUL, en.cost, rt_i(l, run)));
    rt_kir_block *eb = rt_re_if(l, e2, rt_re_meets(l, vs, run_cost, lo, hi));
    if (eb && run == 1) {
        rt_re_entry_units(l, g, eb, &en, vs, lo, hi, a_elems, b_cols);
    } else if (eb) { // the run's entries one by one, from its first cost
        rt_re_entry ef;
        int32_t vf, vsf = rt_re_var(l, eb, "e_cost1", rt_v(l, vs));
        rt_kir_expr *first = rt_b(l, RT_KIR_MUL, rt_v(l, vg), rt_i(l, run));
        rt_kir_block *e3 = vsf >= 0 ? rt_re_entries(l, g, eb, &ef, first, run, 1, &vf) : NULL;
        rt_kir_block *fb = e3 ? rt_re_if(l, e3, rt_re_meets(l, vsf, ef.cost, lo, hi)) : NULL;
        if (fb)
            rt_re_entry_units(l, g, fb, &ef, vsf, lo, hi, a_elems, b_cols);
        if (e3)
            rt_let(l, e3, vsf, rt_b(l, RT_KIR_ADD, rt_v(l, vsf), ef.cost));
    }
    rt_let(l, e2, vs, rt_b(l, RT_KIR_ADD, rt_v(l, vs), run_cost));
    if (l->oom)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    return RT_OK;
}
