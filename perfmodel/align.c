// align.c: the alignment rules behind next_aligned_size (Roller §3.1 GetNextAlignedAxisSize).
//
// A tile size along one axis at one memory level is acceptable when every rule of the table
// below accepts it: tensor-shape alignment under the padding bound epsilon, pinned batch axes,
// vector-lane alignment of the register block, transaction alignment of every data tile's
// innermost extent, and matrix-instruction shapes. Bank-conflict padding is storage, not shape:
// rt_perf_bank_pad_elems (rtile.c). A new rule is one function and one row in rules[].
#include "perfmodel.h"

#include <string.h>

// Tensor shape: padding waste (ceil(N/S)*S - N) / N <= epsilon (Roller §3.1). Ragged axes carry
// inherent padding, so their bound starts at 0.2 (CORA pads vloops to 32/64).
static bool rule_shape(const rt_perf_model *m, const int64_t *shape, int32_t axis, int32_t level,
                       const int64_t *upper, int64_t value) {
    (void)shape, (void)level, (void)upper;
    const rt_perf_axis *ax = &m->axes[axis];
    if (ax->group >= 0 && ax->dist.n > 1) {
        double mean = rt_extent_dist_mean(&ax->dist);
        if (mean <= 0)
            return value == 1;
        double waste = rt_extent_dist_padded(&ax->dist, value) / mean - 1;
        return waste <= m->epsilon + 0.2 + 1e-12;
    }
    int64_t n = ax->extent;
    double waste = (double)(rt_ceil_div(n, value) * value - n) / (double)n;
    return waste <= m->epsilon + 1e-12;
}

// A batch axis a vloop depends on is tiled by 1 (each entry has its own length).
static bool rule_pinned(const rt_perf_model *m, const int64_t *shape, int32_t axis, int32_t level,
                        const int64_t *upper, int64_t value) {
    (void)shape, (void)level, (void)upper;
    return !m->axes[axis].pinned || value == 1;
}

// The innermost dim of the output: (access index, dim) when axis is its only index.
static bool output_inner_axis(const rt_perf_model *m, int32_t axis, int32_t back) {
    const rt_perf_access *o = &m->access[m->n_access - 1];
    int32_t d = o->n_dims - 1 - back;
    if (d < 0 || !o->affine[d] || o->coef[d][axis] != 1)
        return false;
    for (int32_t x = 0; x < m->n_axes; x++)
        if (x != axis && o->coef[d][x])
            return false;
    return true;
}

// Register block of a vector unit (no thread level): the output's innermost extent is a
// multiple of the lanes (or the whole extent when it is shorter).
static bool rule_lanes(const rt_perf_model *m, const int64_t *shape, int32_t axis, int32_t level,
                       const int64_t *upper, int64_t value) {
    (void)shape, (void)upper;
    int32_t lanes = m->dev->lanes;
    if (m->thread_level >= 0 || level != m->top || lanes <= 1 || !output_inner_axis(m, axis, 0))
        return true;
    return value % lanes == 0 || value >= m->axes[axis].extent;
}

// Every data tile whose innermost dim is indexed by this axis alone moves whole transactions of
// the level it is loaded from (Roller Fig. 5a), unless it spans the whole dim. Registers are
// filled by vector loads, not transactions, so the top level is exempt.
static bool rule_transaction(const rt_perf_model *m, const int64_t *shape, int32_t axis,
                             int32_t level, const int64_t *upper, int64_t value) {
    (void)shape, (void)upper;
    if (level < 1 || level >= m->top)
        return true;
    const rt_mem_level *src = &m->dev->level[level - 1];
    int32_t txn = src->transaction_bytes > 0 ? src->transaction_bytes : src->line_bytes;
    if (txn <= 0)
        return true;
    bool with_out = m->dev->level[level].managed == RT_MEM_CACHE;
    for (int32_t i = 0; i < m->n_access; i++) {
        const rt_perf_access *acc = &m->access[i];
        if (acc->is_output && !with_out)
            continue;
        int32_t d = acc->n_dims - 1;
        // axis alone: its coefficient the only nonzero one of the dim (rt_perf_access_terms)
        if (!acc->affine[d] || acc->coef[d][axis] != 1 || acc->n_terms[d] != 1)
            continue;
        // the data tile's inner extent: 1 + (value - 1), capped as rt_perf_data_tile caps it
        int64_t inner = acc->dim_extent[d] > 0 && value > acc->dim_extent[d] ? acc->dim_extent[d]
                        : value < 1                                          ? 1
                                                                             : value;
        if (inner >= acc->dim_extent[d])
            continue;
        if ((inner * acc->elem_bytes) % txn != 0)
            return false;
    }
    return true;
}

// Matrix instructions (mma_shape m x n x k) at the block level: the output's two inner axes
// and the reduction are multiples of the instruction shape.
static bool rule_mma(const rt_perf_model *m, const int64_t *shape, int32_t axis, int32_t level,
                     const int64_t *upper, int64_t value) {
    (void)shape, (void)upper;
    if (!m->use_mma || level != m->block_level || value >= m->axes[axis].extent)
        return true;
    const rt_device *dev = m->dev;
    if (output_inner_axis(m, axis, 0))
        return value % dev->mma_n == 0;
    if (output_inner_axis(m, axis, 1))
        return value % dev->mma_m == 0;
    if (m->axes[axis].is_reduce)
        return value % dev->mma_k == 0;
    return true;
}

// clang-format off
static const rt_align_rule rules[] = {
    {"pinned",      rule_pinned},
    {"shape",       rule_shape},
    {"lanes",       rule_lanes},
    {"transaction", rule_transaction},
    {"mma",         rule_mma},
};
// clang-format on

const rt_align_rule *rt_perf_align_rules(int32_t *n_out) {
    *n_out = (int32_t)(sizeof rules / sizeof rules[0]);
    return rules;
}

const char *rt_perf_align_check(const rt_perf_model *m, const int64_t *shape, int32_t axis,
                                int32_t level, const int64_t *upper, int64_t value) {
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++)
        if (!rules[r].accept(m, shape, axis, level, upper, value))
            return rules[r].name;
    return NULL;
}

// Multipliers of the upper tile tried in order: 1 2 3 4 6 8 12 16 24 32 48 ... (powers of two
// and three times powers of two), then the multiple that covers the whole extent.
static int64_t next_multiplier(int64_t k) {
    if (k < 4)
        return k + 1;
    // k is 2^j (then 3 * 2^(j-1) follows) or 3 * 2^j (then 2^(j+2))
    return (k & (k - 1)) == 0 ? k + k / 2 : k / 3 * 4;
}

int64_t rt_perf_next_aligned_size(const rt_perf_model *m, const int64_t *shape, int32_t axis,
                                  int32_t level, const int64_t *upper, bool inclusive) {
    int64_t s = upper ? upper[axis] : 1;
    if (s < 1)
        s = 1;
    int64_t n = m->axes[axis].extent;
    int64_t kmax = rt_ceil_div(n, s);
    int64_t cur = shape[axis];
    for (int64_t k = 1;; k = next_multiplier(k)) {
        if (k > kmax)
            k = kmax;
        int64_t v = s * k;
        if (v > cur || (inclusive && v == cur)) {
            if (!rt_perf_align_check(m, shape, axis, level, upper, v))
                return v;
        }
        if (k >= kmax)
            return 0;
    }
}
