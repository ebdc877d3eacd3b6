// lower-cpu-impl.h: internal to the CPU lowering (lower-cpu.c and the files it is split into:
// lower-cpu-window.c the blocked loop nests and window reductions, lower-cpu-gemm.c the packed
// GEMM, lower-cpu-pack.c its packing, lower-cpu-naive.c the naive kernel's reduction order).
// Nothing outside codegen/lower-cpu*.c includes it.
#ifndef RT_LOWER_CPU_IMPL_H
#define RT_LOWER_CPU_IMPL_H

#include "emit.h"
#include "lower-expr.h"

typedef struct rt_lower {
    rt_arena *a;
    const rt_op *op;
    rt_kir_kernel *k;
    rt_kir_phase *p;
    rt_err *err;
    int32_t *data_buf;                 // per tensor: its data buffer (-1: none)
    int32_t (*start_buf)[RT_MAX_DIMS]; // per tensor and dim: start array buffer (-1: dense)
    int64_t (*extent)[RT_MAX_DIMS];    // per tensor and dim: dense extent (-1: ragged)
    int64_t *local_base; // per tensor: scratch offset of its per-thread row (-1: none; rt_lx)
    int32_t *local_dims; // per tensor with a local_base: its leading dims left out (the row's)
    int32_t (*tree_buf)[RT_KIR_TREE_FIELD_COUNT]; // per tree parameter: its arrays (-1: unused)
    int32_t *tree_child;                          // per tree parameter: its CHILD buffer (rt_lx)
    const rt_stmt *s;
    int32_t *var_of;   // statement var -> phase var (-1: unbound)
    rt_kir_type ct;    // compute type of the statement
    rt_kir_block *pre; // where reductions inside expressions put their loops
    bool oom;
    const rt_device *dev; // general path: the rTile blocking (NULL when naive)
    const rt_perf_model *m;
    const rt_rprog *rp;
    // Window reductions (rt_lower_window): while win is set, padded reads go through
    // rt_tr_read_window with win_x the statement var in vector lanes and win_red the window vars;
    // guard_x / guard_row: which dims of those reads get a clamped index and a pad select.
    bool win, win_guard_x, win_guard_row;
    int32_t win_x, win_nr;
    const int32_t *win_red;
    int64_t win_pt[3];                  // window var values of the point being translated
    int64_t win_dy;                     // output row (of the win_pack->yu) being translated
    const struct rt_win_pack *win_pack; // the strided read packed into scratch (NULL: none)
    rt_perf_cpu_plan done; // the plan the kernel executes (kind NONE: naive), for the header
    bool naive;            // the naive kernel (rt_lower_options.naive): plain loop nests
    const rt_expr *sum_at; // a sum already computed (rt_lx.sum_at), NULL when none
    rt_kir_expr *sum_value;
} rt_lower;

#define RT_LOWER_CHECK(l, x)                                                                       \
    do {                                                                                           \
        if (!(x))                                                                                  \
            (l)->oom = true;                                                                       \
    } while (0)

// A window reduction's read that moves along x with a stride a >= 2, or 1 on a padded tensor
// (rt_win_pack_plan), packed into scratch (rt_win_pack_rows) before the x loop: the run of
// elements the x loop needs, split by phase (element j of the run at (j % a) * q + j / a), with
// the pad value where it leaves the extents, one such row per value of the read's row index (its
// one other dim that moves with the window: 2y + r - 2 of a 2D window). The x loop then reads
// scratch at unit stride: no interleaved loads (whose unused last member, as 2x+2 of a 5-wide
// stride-2 window, makes LLVM keep a scalar iteration per vector block), no guards and no x
// borders. When the lowering also hands over the loop of y (yv >= 0), y runs over the work
// item's whole tile and every row is packed once, into a ring of scratch rows, and shared by the
// output rows that overlap (a 5-row window of stride 2 packs 2 new rows per output row instead of
// 5); the ring keeps the scratch a few rows long (L1-resident) whatever the tile. Where outputs
// may be recomputed, each y iteration computes yu = 2 output rows (y, y + 1) in one x loop, the
// window points ordered by the packed row they read so that a row's loads feed both outputs
// (rt_win_body): 7 rows of 5 loads for 50 multiply-adds of a 5x5 stride-2 window instead of 10
// rows, and the loads, not the FMAs, were the bound (each unaligned 64-byte load crosses a line).
typedef struct rt_win_pack {
    const rt_expr *read;
    int32_t dim;          // its dim along x
    rt_affine af;         // the index along dim: a * x + sum bx * w + outer kept vars
    int64_t a;            // the stride along x
    int64_t bx[3];        // per window var: its coefficient along dim
    int64_t bmin, bmax;   // range of sum bx * w
    int32_t rdim;         // its row dim (-1: none, one row)
    rt_affine raf;        // the index along rdim: ay * y + sum br * w + outer kept vars
    int32_t yv;           // the statement var y when its loop is handed over, else -1
    int64_t ay;           // coefficient of y along rdim (0 unless yv >= 0)
    int64_t br[3];        // per window var: its coefficient along rdim
    int64_t brmin, brmax; // range of sum br * w
    int64_t q;            // scratch elements per phase of a row
    int64_t rows;         // scratch rows; with yv >= 0 a ring (a power of two), row h at h % rows
    int64_t yu;           // output rows per y iteration (1, or RT_WIN_Y_ROWS; rt_win_rows)
    int32_t yvar[RT_WIN_Y_ROWS]; // with yv >= 0: the KIR var of y + dy per output row dy
    rt_kir_expr **rb; // with yv >= 0: scratch offset of the y iteration's row h (rt_win_rows)
    int64_t shift;    // offset of element 0 of a phase (rt_win_pack_setup)
    rt_kir_expr *lo;  // the first x of the loop
    // Set up by rt_win_pack_setup for rt_win_pack_rows: the run's length, its count of q, its
    // start along dim, the q range [qa, qb) copied without guards, the row dim's index of row 0,
    // the read's other indices and whether they stay within their extents, the loop vars of the
    // rows, of the copy and (with a row dim) of the prefetched lines.
    rt_kir_expr *len, *nq, *u0, *qa, *qb, *r0, *valid, *idx[RT_MAX_DIMS];
    int32_t hv, qv, pv;
} rt_win_pack;

typedef struct rt_gemm {
    int32_t stmt;
    int32_t ta, tb; // tensors: A holds the M vars, B the N vars
    int64_t M, N, K;
    int64_t am, ak, bk, bn, cm; // flat strides (cn == 1)
    double alpha;
    int32_t m_var, n_var, k_var; // last (innermost) var of each group, for the rTile lookup
    int32_t mr, nr, kc, mc, nc;
    int64_t ng;    // n groups: a work item is one mc row block x a run of nc blocks
    int64_t batch; // independent GEMMs (implicit: product of the batch var extents)
    bool a_batch;  // A reads batch vars too (batched attention): A is packed per batch entry and
                   // a work item is one entry's row block x a run of its column blocks
    // Implicit GEMM (a contraction over affine reads, e.g. a convolution): the packs gather
    // A and B through the reads themselves (pad value outside the extents), decomposing the flat
    // m, n, k of a block into the statement vars of each group (outer first).
    bool implicit;
    const rt_expr *ra, *rb; // the reads holding the m and the n vars
    int32_t gvar[4][8];     // groups: RT_GEMM_G_M, _N, _K, _BATCH
    int32_t n_gvar[4];
    int64_t ccoef[16]; // flat offset coefficient of each statement var in C
    // Token-flattened (rt_gemm_detect_tokens, rt_perf_gemm_tokens_of): the rows are the (b, i)
    // of packed ragged tensors, M the plan's expected sum(len); the actual one is read at run
    // time from A's start array (tok_start_buf[tok_rows_at], rt_gemm_token_rows).
    bool tokens;
    int32_t tok_start_buf;
    int64_t tok_rows_at;
    int32_t tok_b_var, tok_i_var;
    // Triangular (affine) k range per row, tri.on (lower-cpu-tri.c): A's element of row m at
    // the GEMM's k is A(m, k - tri_s m - tri_c) (ra), B plain.
    rt_perf_tri_range tri;
    int64_t tri_s, tri_c;
    // One GEMM per batch entry at its own extents (lower-cpu-rentry.c): M, N, K the plan's
    // (the longest entry's), batch the entries; re the statement's form.
    bool rentry;
    rt_perf_gemm_rentry re;
    int32_t row_tail_acc; // the plan's rt_perf_cpu_gemm.row_tail_acc (a per-entry plan's)
    bool warm; // the plan's re_warm: no prefetch of C's tiles (kir no_pf_c) nor of next entries
} rt_gemm;

enum { RT_GEMM_G_M, RT_GEMM_G_N, RT_GEMM_G_K, RT_GEMM_G_BATCH };

// An elementwise statement right after a plain GEMM C(m, n) (+)= A * B that reads C only as
// C(p, q) over exactly the GEMM's rows p in [0, M) and columns q in [0, N), such as the bias and
// activation of a linear layer: Y(m, n) = gelu(t(m, n) + bias(n)). It is fused into the
// micro-kernel's store on the last k block (rt_kir_ukernel's epilogue), so C's final values are
// never written and read back by a separate pass; C is still stored where something else
// reads it (an output, a later statement).
typedef struct rt_gemm_epi {
    int32_t stmt; // the fused statement, -1 when none
    int32_t p, q; // its vars over the rows and the columns
    bool keep_c;
    int32_t b0; // token-flattened: its var b, bound to 0 (the row p is the flat one); else -1
} rt_gemm_epi;

// One kept var of the blocked nest: its constant range, its tile extent per level (levels
// block_level..top, each at most the one above) and the bounds [base, end) of the current tile.
typedef struct rt_tvar {
    int32_t v;
    const char *name; // the var's, or a flat axis's ("c_h_w" for c.h.w, m->flat)
    bool tiled;       // false: a vloop or a var of no model axis, looped over its own range
    int64_t lo, hi;
    int64_t t[RT_MAX_MEM_LEVELS];
    bool exact; // the current tile is always full (its end is base + t)
    rt_kir_expr *base, *end;
} rt_tvar;

// Masked packing of an implicit GEMM operand whose rows are contiguous in the source: the rows
// vars flatten into the read's offset with unit stride, as the output pixels (y, x) of a stride-1
// convolution with 'same' padding do in each input plane. Row j of k is then src[o(k) + j] where
// it is inside the extents and the pad value elsewhere, so each w-row panel of a k is one vector
// loop of masked loads at consecutive addresses, with no per-segment bounds arithmetic. Which
// lanes are inside is tested against a table of the rows' part of every index that moves with
// the rows (float, exact since every index stays below 2^22), with bounds computed once per k.
typedef struct rt_gemm_mask {
    int32_t n_dims;            // dims of the read with a rows term, tested per lane
    int32_t dim[RT_MAX_DIMS];  // in the order of their tables
    rt_affine af[RT_MAX_DIMS]; // affine form of every index of the read
} rt_gemm_mask;

// Window reductions (rt_lower_window) run their x loop in vector lanes with every window point
// unrolled in its body. A padded read there must not be a per-lane branch or a clamped-index
// select along x (both become gathers at stride 2), so each of its dims is classified: dims the
// var ranges keep in the extents need nothing, dims along x are in the extents on the x interior
// (the borders are separate scalar loops), and dims that do not move with x (the rows of a
// window) are in the extents for whole rows, tested once per row.
typedef enum rt_win_dim {
    RT_WIN_IN,    // always within the extents: plain index
    RT_WIN_X,     // coefficient > 0 on x: within the extents on the x interior
    RT_WIN_ROW,   // independent of x: within the extents or not for a whole x row
    RT_WIN_GUARD, // anything else: clamped index and pad select wherever it is read
} rt_win_dim;

// How many rows ahead the row packing prefetches its read (rt_win_pack_rows).
#define RT_WIN_PF_ROWS 16

static inline rt_kir_expr *rt_v(rt_lower *l, int32_t var) {
    return rt_kir_var_ref(l->a, l->p, var);
}

static inline rt_kir_expr *rt_i(rt_lower *l, int64_t v) {
    return rt_kir_int(l->a, v);
}

static inline rt_kir_expr *rt_b(rt_lower *l, rt_kir_bop op, rt_kir_expr *x, rt_kir_expr *y) {
    return rt_kir_bin(l->a, op, x, y);
}

static inline void rt_let(rt_lower *l, rt_kir_block *blk, int32_t var, rt_kir_expr *v) {
    rt_kir_node *n = rt_kir_append(l->a, blk, RT_KIR_N_LET);
    RT_LOWER_CHECK(l, n && v);
    if (n) {
        n->var = var;
        n->value = v;
    }
}

// One pack of an implicit GEMM's operand block (rt_gemm_pack_affine, _segments, _masked): the
// copy's comment, w rows per k step (mr or nr), the valid rows of the block and its k steps,
// the read rd with its row vars (rows, outer first) and k vars (ks), the block's first row and
// k, the scale folded in and the scratch offset the panels go to.
typedef struct rt_gemm_pack_desc {
    const char *what;
    int32_t w;
    rt_kir_expr *valid, *kcur;
    const rt_expr *rd;
    const int32_t *rows;
    int32_t n_rows;
    const int32_t *ks;
    int32_t n_ks;
    rt_kir_expr *row0, *k0;
    double alpha;
    rt_kir_expr *dst0;
} rt_gemm_pack_desc;

// lower-cpu.c
int32_t rt_win_index(const rt_lower *l, int32_t v);
bool rt_var_range(const rt_lower *l, int32_t v, int64_t *lo, int64_t *hi);
rt_win_dim rt_win_dim_of(const rt_lower *l, const rt_expr *e, int64_t ext, rt_affine *af);
bool rt_win_padded(const rt_lower *l, const rt_expr *e);
rt_lx rt_tr_ctx(rt_lower *l);
rt_status rt_tr_done(rt_lower *l, const rt_lx *x, rt_status st);
rt_kir_expr *rt_tr_offset(rt_lower *l, int32_t t, rt_kir_expr **idx, rt_kir_expr **valid);
rt_status rt_tr_read(rt_lower *l, const rt_expr *e, rt_kir_expr **out);
rt_status rt_tr_int(rt_lower *l, const rt_expr *e, rt_kir_expr **out);
rt_status rt_tr_loops_range(rt_lower *l, int32_t v, rt_kir_expr **lo, rt_kir_expr **hi);
rt_status rt_tr_num(rt_lower *l, const rt_expr *e, rt_kir_expr **out);
rt_status rt_lower_begin_stmt(rt_lower *l, const rt_stmt *s);
rt_kir_bop rt_assign_bop(rt_assign op);
rt_status rt_lower_out_offset(rt_lower *l, rt_kir_expr **off);
rt_kir_node *rt_lower_store_out(rt_lower *l, rt_kir_block *blk, rt_kir_expr *off,
                                rt_kir_expr *value);
int64_t rt_largest_cache_bytes(const rt_device *dev);
rt_status rt_lower_element(rt_lower *l, rt_kir_block *blk, const int32_t *red, int32_t n_red);

// The naive kernel's loop order for a reduction (lower-cpu-naive.c): kept var c innermost,
// under the reduced vars, accumulating the term body of the statement's own sum (sum NULL) or
// of the sum inside its right side.
typedef struct rt_naive_order {
    int32_t c;          // the kept var run innermost
    const rt_expr *sum; // the sum inside an '=' statement's right side (NULL: the statement's)
    const rt_expr *body;
    const int32_t *red; // the reduced vars, outer first
    int32_t nr;
} rt_naive_order;

// Whether statement l->s (kept vars kept[first..nk) to loop over, reduced vars red[0..nr))
// takes the reordered nest, and its order in *o; then its loops under blk, where the other
// kept vars are bound.
bool rt_naive_plan(const rt_lower *l, const int32_t *kept, int32_t nk, int32_t first,
                   const int32_t *red, int32_t nr, rt_naive_order *o);
rt_status rt_lower_naive_rows(rt_lower *l, rt_kir_block *blk, const rt_naive_order *o);

// lower-cpu-window.c
rt_kir_node *rt_prefetch_lines(rt_lower *l, rt_kir_block *blk, int32_t var, rt_kir_expr *len,
                               rt_kir_expr **off);
rt_status rt_lower_tiled(rt_lower *l, int32_t si, bool *done);

// lower-cpu-gemm.c
bool rt_gemm_detect(const rt_lower *l, int32_t si, rt_gemm *g);
bool rt_gemm_detect_implicit(const rt_lower *l, int32_t si, rt_gemm *g);
bool rt_gemm_blocking(rt_lower *l, rt_gemm *g);
void rt_gemm_executed(rt_lower *l, const rt_gemm *g);
bool rt_gemm_epi_detect(const rt_lower *l, const rt_gemm *g, rt_gemm_epi *epi);
rt_status rt_lower_gemm(rt_lower *l, const rt_gemm *g, const rt_gemm_epi *epi);

// lower-cpu-ragged.c
bool rt_gemm_detect_tokens(const rt_lower *l, int32_t si, rt_gemm *g);
rt_kir_block *rt_gemm_token_rows(rt_lower *l, const rt_gemm *g, rt_kir_block *body,
                                 rt_kir_expr *item, int64_t mt, int32_t vi0, int32_t vmc);
bool rt_gemm_epi_detect_tokens(const rt_lower *l, const rt_gemm *g, rt_gemm_epi *epi);
// lower-cpu-rentry.c
bool rt_gemm_detect_rentry(const rt_lower *l, int32_t si, rt_gemm *g);
rt_status rt_lower_gemm_rentry(rt_lower *l, const rt_gemm *g);
// lower-cpu-tri.c
bool rt_gemm_detect_tri(const rt_lower *l, int32_t si, rt_gemm *g);
rt_kir_expr *rt_gemm_tri_row_block(rt_lower *l, const rt_gemm *g, rt_kir_expr *q, int64_t mt);
void rt_gemm_tri_kblocks(rt_lower *l, const rt_gemm *g, rt_kir_block *blk, int32_t vi0, int32_t vmc,
                         int32_t *vpk_lo, int32_t *vpk_hi);
// In a k block (p0, kcur: its first k step and count), the part of it the row block's range
// meets: the packs of A and B and the micro-kernels then run only that part (kcur 0 where the
// range is empty: the block's zeros are still stored).
void rt_gemm_tri_kclamp(rt_lower *l, const rt_gemm *g, rt_kir_block *blk, int32_t vi0, int32_t vmc,
                        int32_t vp0, int32_t vkc);
// The end of the row block's range (rows [i0, i0 + mcur)) within [0, K): the k steps a B block
// is packed for, up to which the next one is prefetched.
rt_kir_expr *rt_gemm_tri_khi(rt_lower *l, const rt_gemm *g, int32_t vi0, int32_t vmc);
void rt_gemm_tri_panel_k(rt_lower *l, const rt_gemm *g, rt_kir_block *blk, int32_t vip, int32_t vi0,
                         int32_t vmc, int32_t vp0, int32_t vkc, int32_t *vks, int32_t *vkn);
rt_status rt_gemm_tri_pack_a(rt_lower *l, rt_kir_block *blk, const rt_gemm *g, int32_t vmc,
                             int32_t vkc, int32_t vi0, int32_t vp0, int64_t dst0);
// The same, each panel packed over its rows' k steps only (the rest of it is never read by the
// packed GEMM's calls, which run each panel's own k steps: rt_gemm_tri_panel_k).
rt_status rt_gemm_tri_pack_a_panels(rt_lower *l, rt_kir_block *blk, const rt_gemm *g, int32_t vmc,
                                    int32_t vkc, int32_t vi0, int32_t vp0, int64_t dst0);

// lower-cpu-pack.c
void rt_gemm_pack(rt_lower *l, rt_kir_block *blk, const char *what, int32_t w, rt_kir_expr *valid,
                  rt_kir_expr *kcur, int32_t src, rt_kir_expr *base, int64_t s_row, int64_t s_k,
                  double alpha, rt_kir_expr *dst0);
// rt_gemm_pack with strides known at run time (e_row, e_k; s_row, s_k: their constant values,
// 0 where they have none, for the choice of the copy's form only).
void rt_gemm_pack_strided(rt_lower *l, rt_kir_block *blk, const char *what, int32_t w,
                          rt_kir_expr *valid, rt_kir_expr *kcur, int32_t src, rt_kir_expr *base,
                          int64_t s_row, int64_t s_k, rt_kir_expr *e_row, rt_kir_expr *e_k,
                          double alpha, rt_kir_expr *dst0);
void rt_gemm_unflatten(rt_lower *l, rt_kir_block *blk, rt_kir_expr *x, const int32_t *vars,
                       int32_t n);
// Packs rows of a matrix contiguous along k into w-wide k-major panels (w a multiple of 16) by
// 16 x 16 transposes (kir.h rt_kir_tpack; perfmodel rt_perf_cpu_b_t16): scratch[dst0 + (panel *
// kcur + kk) * w + r] = alpha * src[base + (panel * w + r) * s_row + kk], rows < valid, else 0.
void rt_gemm_pack_t16(rt_lower *l, rt_kir_block *blk, const char *what, int32_t w,
                      rt_kir_expr *valid, rt_kir_expr *kcur, int32_t src, rt_kir_expr *base,
                      rt_kir_expr *s_row, double alpha, rt_kir_expr *dst0);
// rt_gemm_pack_strided into ws-wide panels (w a multiple of ws), as many as cover the rows
// up to valid rounded up to w: the layout of a micro-kernel whose B has b_sub = ws (kir.h).
// Where k is contiguous, the partial panels too run the k steps in vector lanes (rows past
// valid read row valid - 1 and are replaced by 0) instead of testing every element.
void rt_gemm_pack_sub(rt_lower *l, rt_kir_block *blk, const char *what, int32_t w, int32_t ws,
                      rt_kir_expr *valid, rt_kir_expr *kcur, int32_t src, rt_kir_expr *base,
                      int64_t s_row, int64_t s_k, rt_kir_expr *e_row, rt_kir_expr *e_k,
                      double alpha, rt_kir_expr *dst0);
rt_status rt_gemm_pack_affine(rt_lower *l, rt_kir_block *blk, const rt_gemm_pack_desc *pd);
bool rt_gemm_seg_dim(const rt_lower *l, const rt_expr *rd, int32_t x, int32_t *dx, int64_t *sx);
rt_status rt_gemm_pack_segments(rt_lower *l, rt_kir_block *blk, const rt_gemm_pack_desc *pd,
                                int32_t dx, int64_t sx);
bool rt_gemm_mask_plan(const rt_lower *l, const rt_expr *rd, const int32_t *rows, int32_t n_rows,
                       rt_gemm_mask *mp);
rt_status rt_gemm_pack_masked(rt_lower *l, rt_kir_block *blk, const rt_gemm_pack_desc *pd,
                              const rt_gemm_mask *mp, int64_t tbl0, int64_t tbl_stride);

#endif
