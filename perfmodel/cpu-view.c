// cpu-view.c: the packed GEMM the CPU backend compiles for an rProgram, as the model sees it
// (rt_perf_cpu_gemm_view): the contraction's groups (plain, implicit, token-flattened,
// triangular, per entry), the rTile seeds and the blocking rule (cpu.c), and a memo of the views
// by their seeds, since the construction prices many rPrograms whose seeds agree.
#include "perfmodel.h"

#include <string.h>

// The groups of a token-flattened contraction (rt_perf_gemm_tokens_of): the fused (b.i) axis is
// m, of the expected sum(len) rows (its extent: the model's bulk-padded axis), the axes of the
// n run (h.d of a projection to heads) n, of the k run k; a plain GEMM (A's rows contiguous
// along k, W's strides as stored) of batch 1.
static bool gemm_tokens(const rt_perf_model *m, rt_perf_cpu_gemm *g) {
    rt_perf_gemm_tokens tk;
    if (m->n_access != 3 || !rt_perf_gemm_tokens_of(m->op, &m->op->stmts[m->main_stmt], &tk))
        return false;
    memset(g, 0, sizeof *g);
    int32_t xm = -1, xn = -1, xk = -1;
    const rt_stmt *s = &m->op->stmts[m->main_stmt];
    if (s->n_axes != m->n_axes)
        return false;
    for (int32_t x = 0; x < RT_PERF_MAX_AXES; x++)
        g->group[x] = -1;
    for (int32_t x = 0; x < s->n_axes; x++) {
        int32_t grp = rt_perf_gemm_tokens_group(&s->axes[x], &tk);
        if (grp < 0 || (grp == RT_PERF_GEMM_M && xm >= 0))
            return false;
        g->group[x] = grp;
        *(grp == RT_PERF_GEMM_M ? &xm : grp == RT_PERF_GEMM_N ? &xn : &xk) = x; // the innermost
    }
    if (xm < 0 || xn < 0 || xk < 0)
        return false;
    for (int32_t i = 0; i < 2; i++)
        if (m->access[i].tensor == tk.ta)
            g->in_a = i;
    g->in_b = 1 - g->in_a;
    if (m->access[g->in_b].tensor != tk.tw)
        return false;
    g->axis_m = xm, g->axis_n = xn, g->axis_k = xk;
    g->M = rt_max64(1, m->axes[xm].extent);
    g->N = tk.N, g->K = tk.K, g->batch = 1;
    g->tokens = true;
    g->b_prefetch = tk.wn == 1;
    g->a_k_unit = true;
    g->b_k_unit = tk.wk == 1 && tk.wn != 1;
    g->a_bytes = (double)g->M * (double)g->K * 4;
    g->b_bytes = (double)g->K * (double)g->N * 4;
    g->c_bytes = (double)g->M * (double)g->N * 4;
    return true;
}

// The groups of the packed GEMM codegen/lower-cpu.c compiles for the model's statement: false
// when it is not such a contraction or the device has a thread level.
static bool gemm_view_groups(const rt_perf_model *m, rt_perf_cpu_gemm *g) {
    memset(g, 0, sizeof *g);
    if (m->thread_level >= 0)
        return false;
    // A triangular contraction first: its k axis may also look dense where it has one value.
    if (!rt_perf_cpu_tri_groups(m, g)) {
        memset(g, 0, sizeof *g);
        if (!(rt_perf_cpu_gemm_groups(m, g) || gemm_tokens(m, g) ||
              rt_perf_cpu_rentry_groups(m, g)))
            return false;
    }
    return true;
}

// The rTile seeds of g's blocking from p (register tile -> mr x nr, L1 -> kc, L2 -> mc, the level
// below -> nc; a group's tile is the product of its axes' tiles, as the backend takes it).
static void gemm_view_seeds(const rt_perf_model *m, const rt_rprog *p, rt_perf_cpu_gemm *g) {
    int32_t top = m->top;
    int64_t t[RT_PERF_GEMM_GROUP_COUNT][RT_MAX_MEM_LEVELS];
    for (int32_t gi = 0; gi < RT_PERF_GEMM_GROUP_COUNT; gi++)
        for (int32_t l = 0; l < RT_MAX_MEM_LEVELS; l++)
            t[gi][l] = 1;
    for (int32_t x = 0; x < m->n_axes; x++)
        for (int32_t l = 0; l <= top; l++)
            t[g->group[x]][l] *= p->tile[l].shape[x];
    g->mr = t[RT_PERF_GEMM_M][top];
    g->nr = t[RT_PERF_GEMM_N][top];
    g->kc = top >= 1 ? t[RT_PERF_GEMM_K][top - 1] : 256;
    g->mc = top >= 2 ? t[RT_PERF_GEMM_M][top - 2] : 96;
    g->nc = top >= 3 ? t[RT_PERF_GEMM_N][top - 3] : 1024;
}

static void gemm_view_block(const rt_perf_model *m, rt_perf_cpu_gemm *g) {
    rt_perf_cpu_gemm_block(m->dev, g->batch, g);
    rt_perf_cpu_tri_block(m->dev, g);
    rt_perf_cpu_rentry_block(m, g);
}

// rt_perf_cpu_gemm_view's memo (rt_perf_model.gemm_memo): the groups, made once, and the views
// by their seeds, which many rPrograms share (the blocking rule overrides most cache tiles).
// Open addressing; once it is three quarters full, further views are made without being kept.
#define GEMM_MEMO_SLOTS 128
typedef struct gemm_memo_slot {
    bool used;
    int64_t seed[5];
    rt_perf_cpu_gemm g;
} gemm_memo_slot;
struct rt_perf_gemm_memo {
    bool have_groups, groups_ok;
    rt_perf_cpu_gemm groups; // gemm_view_groups' result
    int32_t n;
    gemm_memo_slot slot[GEMM_MEMO_SLOTS];
};

rt_perf_gemm_memo *rt_perf_gemm_memo_new(rt_arena *a) {
    return rt_arena_calloc(a, 1, sizeof(rt_perf_gemm_memo));
}

static gemm_memo_slot *gemm_memo_find(rt_perf_gemm_memo *mo, const rt_perf_cpu_gemm *g) {
    int64_t seed[5] = {g->mr, g->nr, g->kc, g->mc, g->nc};
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int32_t i = 0; i < 5; i++)
        h = (h ^ (uint64_t)seed[i]) * 0xff51afd7ed558ccdull;
    for (uint32_t j = (uint32_t)(h >> 40) % GEMM_MEMO_SLOTS;; j = (j + 1) % GEMM_MEMO_SLOTS) {
        gemm_memo_slot *s = &mo->slot[j];
        if (!s->used) {
            if (mo->n * 4 >= GEMM_MEMO_SLOTS * 3)
                return NULL;
            memcpy(s->seed, seed, sizeof seed);
            return s;
        }
        if (memcmp(s->seed, seed, sizeof seed) == 0)
            return s;
    }
}

// The packed GEMM codegen/lower-cpu.c compiles for p: the rTiles give the seeds
// (gemm_view_seeds), rt_perf_cpu_gemm_block the blocking.
bool rt_perf_cpu_gemm_view(const rt_perf_model *m, const rt_rprog *p, rt_perf_cpu_gemm *g) {
    rt_perf_gemm_memo *mo = m->gemm_memo;
    if (!mo) {
        if (!gemm_view_groups(m, g))
            return false;
        gemm_view_seeds(m, p, g);
        gemm_view_block(m, g);
        rt_perf_count_steps(m, g->steps);
        return true;
    }
    if (!mo->have_groups) {
        mo->groups_ok = gemm_view_groups(m, &mo->groups);
        mo->have_groups = true;
    }
    *g = mo->groups;
    if (!mo->groups_ok)
        return false;
    gemm_view_seeds(m, p, g);
    gemm_memo_slot *s = gemm_memo_find(mo, g);
    if (s && s->used) {
        *g = s->g;
    } else {
        gemm_view_block(m, g);
        if (s) {
            s->used = true;
            s->g = *g;
            mo->n++;
        }
    }
    rt_perf_count_steps(m, g->steps);
    return true;
}
