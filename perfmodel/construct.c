// construct.c: rProgram construction — scale-up, scale-out and shrink (Roller §3.2, Fig. 8).
//
// Scale-up walks the device's levels top (registers) to bottom: at each level it enlarges the
// tile along the axis with the best data-reuse score S_i = (Q(T) - Q(T'_i)) / (F(T'_i) - F(T))
// over the next aligned sizes (align.c), while the footprint fits and the level is memory
// bound; where the tile becomes compute bound or hits capacity it records the tile and descends
// (and, when compute bound, also keeps enlarging, Fig. 8 line 20). Visited tiles are memoized.
// Completed rPrograms are scaled out over the units (the reduction stays inside a block) and, for
// small operators, shrunk along the lowest-reuse axis. The padding bound epsilon grows 0 -> 1
// until K candidates exist. On a CPU many rPrograms lower to the same kernel (the backend's
// blocking rule overrides most cache tiles): each kernel is kept once, as its best-predicted
// rProgram, so the top-K are K different kernels. Ranking and reports are in topk.c.
#include "perfmodel.h"
#include "gpu-plan.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct cons {
    rt_arena *a;
    rt_perf_model *m;
    rt_buf *explain;
    int64_t tiles[RT_MAX_MEM_LEVELS][RT_PERF_MAX_AXES]; // current path
    int64_t full[RT_PERF_MAX_AXES];                     // the whole iteration space
    uint64_t *memo; // visited (level, tile, tiles above) hashes; 0 = empty slot
    int64_t memo_cap, memo_n;
    uint64_t *seen; // completed rPrograms, across epsilon rounds
    int64_t seen_cap, seen_n;
    int64_t evals, max_evals, total_evals;
    rt_rprog *found;
    uint64_t *found_key; // per found rProgram: the kernel it lowers to (kernel_key)
    int32_t n_found, cap_found, want;
    int32_t n_same;     // rPrograms dropped: an earlier one lowers to the same kernel
    int32_t n_recorded; // rPrograms recorded, the dropped ones included
    int32_t limit;      // records allowed in the current subtree (spreads them over tiles)
    double t0_ns, top1_ns;
    bool relaxed; // last resort: record without thread-count alignment
    bool has_red;
    // GPU: the reduction axis whose threads share a row element in rows mode (gpu-plan.h
    // rt_gpu_plan_rows_axis); they count in the block's threads. -1: none.
    int32_t rows_axis;
    bool dense;      // no ragged axis: pricing a tile counts no model steps (it may be reused)
    double full_red; // dense: the tile count along the reduction of the whole iteration space
    rt_status st;
    rt_err *err;
} cons;

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uint64_t hash_mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

// Inserts h; returns true when it was already there. Grows the table at half load.
static bool set_insert(cons *c, uint64_t **tab, int64_t *cap, int64_t *n, uint64_t h) {
    if (h == 0)
        h = 1;
    if (*n * 2 >= *cap) {
        int64_t ncap = *cap ? *cap * 2 : 1024;
        uint64_t *nt = rt_arena_calloc(c->a, (size_t)ncap, sizeof *nt);
        if (!nt) {
            c->st = rt_fail(c->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
            return true;
        }
        for (int64_t i = 0; i < *cap; i++) {
            uint64_t v = (*tab)[i];
            if (!v)
                continue;
            int64_t j = (int64_t)(v & (uint64_t)(ncap - 1));
            while (nt[j])
                j = (j + 1) & (ncap - 1);
            nt[j] = v;
        }
        *tab = nt;
        *cap = ncap;
    }
    int64_t j = (int64_t)(h & (uint64_t)(*cap - 1));
    while ((*tab)[j]) {
        if ((*tab)[j] == h)
            return true;
        j = (j + 1) & (*cap - 1);
    }
    (*tab)[j] = h;
    (*n)++;
    return false;
}

static void shape_str(const rt_perf_model *m, const int64_t *s, char *buf, size_t size) {
    size_t o = 0;
    buf[0] = 0;
    for (int32_t x = 0; x < m->n_axes && o + 24 < size; x++)
        o += (size_t)snprintf(buf + o, size - o, "%s%lld", x ? "," : "[", (long long)s[x]);
    if (o + 2 < size)
        snprintf(buf + o, size - o, "]");
}

static bool done(const cons *c) {
    return c->st != RT_OK || c->evals >= c->max_evals || c->n_found >= c->want ||
           c->n_recorded >= c->limit;
}

// Whole-operator memory time at level l vs compute time (Fig. 8 line 17: MemPerf vs
// MaxComputePerf), both at full device bandwidth and peak.
static void level_times(const cons *c, int32_t l, const int64_t *t, double q, double *mem_ns,
                        double *comp_ns) {
    const rt_perf_model *m = c->m;
    const rt_mem_level *src = &m->dev->level[l - 1];
    double gbps = src->bandwidth_gbps;
    *mem_ns = gbps > 0 ? q / gbps : 0;
    *comp_ns = rt_perf_compute_ns(m, m->flops_per_point * rt_perf_padded_points(m, t), 1.0);
}

static double traffic(const cons *c, int32_t l, const int64_t *t) {
    const rt_perf_model *m = c->m;
    return rt_perf_traffic_bytes(m, l, t, (!m->acc_persist && l == m->top) ? c->full : NULL);
}

// The same from t's data tiles.
static double traffic_of(const cons *c, int32_t l, const int64_t *t,
                         const int64_t (*dt)[RT_MAX_DIMS]) {
    const rt_perf_model *m = c->m;
    return rt_perf_traffic_of(m, l, t, dt, (!m->acc_persist && l == m->top) ? c->full : NULL);
}

// The same for a dense model from the per-axis tile counts fac of t (rt_perf_axis_tiles) with
// axis x's replaced by fac_x (that of the grown size).
static double grown_traffic(const cons *c, int32_t l, double *fac, int32_t x, double fac_x,
                            const int64_t (*dt)[RT_MAX_DIMS]) {
    const rt_perf_model *m = c->m;
    double keep = fac[x], n_all, n_sp;
    fac[x] = fac_x;
    rt_perf_tile_counts_of(m, fac, &n_all, &n_sp);
    fac[x] = keep;
    return rt_perf_traffic_counted(m, l, dt, n_all, n_sp,
                                   (!m->acc_persist && l == m->top) ? c->full_red : -1);
}

static int64_t threads_of(const cons *c, int32_t l, const int64_t *t) {
    const rt_perf_model *m = c->m;
    if (m->thread_level < 0 || l != m->block_level || l >= m->thread_level)
        return 1;
    int64_t th = 1;
    for (int32_t x = 0; x < m->n_axes; x++)
        if (!m->axes[x].is_reduce || x == c->rows_axis)
            th *= t[x] / c->tiles[m->thread_level][x];
    return th;
}

// Fits the level: capacity, and at the block level threads and registers.
static bool eligible(const cons *c, int32_t l, const int64_t *t, int64_t fp) {
    const rt_perf_model *m = c->m;
    const rt_device *dev = m->dev;
    if (fp > rt_perf_capacity_bytes(m, l))
        return false;
    if (m->thread_level >= 0 && l == m->block_level && l < m->thread_level) {
        int64_t th = threads_of(c, l, t);
        if (dev->max_threads_per_block > 0 && th > dev->max_threads_per_block)
            return false;
        int64_t regs = rt_ceil_div(
            rt_perf_footprint_bytes(m, m->thread_level, c->tiles[m->thread_level], NULL, NULL), 4);
        if (dev->regs_per_unit > 0 && th * regs > dev->regs_per_unit)
            return false;
    }
    return true;
}

// Whether the tile may end the scale-up of its level (peak-compute alignment, Roller's
// IsPeakComputeTile; on vector units the register block must hide the FMA latency).
static bool recordable(const cons *c, int32_t l, const int64_t *t) {
    const rt_perf_model *m = c->m;
    const rt_device *dev = m->dev;
    if (c->relaxed)
        return true;
    if (m->thread_level >= 0 && l == m->block_level && l < m->thread_level) {
        int64_t th = threads_of(c, l, t);
        int64_t lanes = dev->lanes > 0 ? dev->lanes : 1;
        int64_t peak = lanes * (dev->teus_per_unit > 0 ? dev->teus_per_unit : 1);
        if (th % peak == 0)
            return true;
        return rt_perf_tile_count(m, t, true) <= 1.0 + 1e-9 && th % lanes == 0;
    }
    if (m->thread_level < 0 && l == m->top && dev->fma_latency_cycles > 0 && c->has_red) {
        const rt_perf_access *o = &m->access[m->n_access - 1];
        int64_t dt[RT_MAX_DIMS];
        rt_perf_data_tile(m, m->n_access - 1, t, dt);
        int64_t elems = 1, whole = 1;
        for (int32_t d = 0; d < o->n_dims; d++) {
            elems *= dt[d];
            whole *= o->dim_extent[d];
        }
        int64_t lanes = dev->lanes > 0 ? dev->lanes : 1;
        int64_t want =
            (int64_t)dev->fma_latency_cycles * (dev->teus_per_unit > 0 ? dev->teus_per_unit : 1);
        return rt_ceil_div(elems, lanes) >= want || elems >= whole;
    }
    return true;
}

typedef struct grow grow;
static void enlarge(cons *c, int32_t l, const int64_t *t, const grow *from);

// The kernel the backend lowers p to, as a hash: two rPrograms with the same key compile to
// the same code (up to names), so only the better predicted one is kept and the top-K are K
// different kernels. On a CPU the key is the plan's (rt_perf_cpu_plan_key: the packed GEMM's
// blocking, the blocked loop nest's tiles, or the plain nests); on a device with a thread level
// every rTile is its own kernel.
static uint64_t kernel_key(const cons *c, const rt_rprog *p) {
    const rt_perf_model *m = c->m;
    uint64_t h = 0x51;
    if (m->thread_level >= 0) {
        if (p->gpu) // GPU: the plan the backend executes (gpu-plan.c)
            return p->gpu->key;
        for (int32_t l = 1; l <= m->top; l++)
            for (int32_t x = 0; x < m->n_axes; x++)
                h = hash_mix(h, (uint64_t)p->tile[l].shape[x]);
        return h;
    }
    return rt_perf_cpu_plan_key(&p->cpu);
}

// GPU: the plan of p (gpu-plan.c), made once here, priced by the model (rt_perf_evaluate takes
// its threads per block and its bytes in flight) and executed by the backend. Without a plan (a construct the backend
// does not support) p keeps its tiles' pricing and lowering reports why.
static bool gpu_plan(cons *c, rt_rprog *p, const char **why) {
    rt_err err;
    rt_err_clear(&err);
    rt_status st = rt_gpu_plan_make(c->a, c->m->op, c->m->dev, c->m, p, &p->gpu, &err);
    if (st != RT_OK) {
        if (st == RT_ERR_NOMEM)
            c->st = rt_fail(c->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        p->gpu = NULL;
        return c->st == RT_OK;
    }
    // Priced again with the plan: its threads per block and the bytes its blocks keep in flight.
    return rt_perf_evaluate(c->m, p, why);
}

// Room for one more found rProgram; false (c->st set) when out of memory.
static bool found_room(cons *c) {
    if (c->n_found < c->cap_found)
        return true;
    int32_t ncap = c->cap_found ? c->cap_found * 2 : 32;
    rt_rprog *nf = rt_arena_calloc(c->a, (size_t)ncap, sizeof *nf);
    uint64_t *nk = rt_arena_calloc(c->a, (size_t)ncap, sizeof *nk);
    if (!nf || !nk) {
        c->st = rt_fail(c->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        return false;
    }
    if (c->n_found) {
        memcpy(nf, c->found, sizeof *nf * (size_t)c->n_found);
        memcpy(nk, c->found_key, sizeof *nk * (size_t)c->n_found);
    }
    c->found = nf;
    c->found_key = nk;
    c->cap_found = ncap;
    return true;
}

// The rProgram record() evaluates: the first free found slot, zeroed as a whole. Only what the
// model may write is cleared: the levels the device has, and in each the data tiles of the
// model's accesses. The rest (an rt_rprog holds RT_MAX_MEM_LEVELS levels of RT_PERF_MAX_ACCESS
// data tiles) is never written by the construction or the model, so it still holds the zeros
// the slot was allocated with.
static rt_rprog *record_slot(cons *c) {
    if (!found_room(c))
        return NULL;
    rt_rprog *p = &c->found[c->n_found];
    size_t tail = offsetof(rt_rprog, threads_per_block);
    size_t rest = offsetof(rt_rtile, pad_elems);
    memset(p, 0, offsetof(rt_rprog, tile));
    for (int32_t l = 0; l < c->m->dev->n_levels; l++) {
        rt_rtile *t = &p->tile[l];
        memset(t, 0, offsetof(rt_rtile, data));
        memset(t->data, 0, sizeof t->data[0] * (size_t)c->m->n_access);
        memset((char *)t + rest, 0, sizeof *t - rest);
    }
    memset((char *)p + tail, 0, sizeof *p - tail);
    return p;
}

static void record(cons *c) {
    const rt_perf_model *m = c->m;
    uint64_t h = 0x51;
    for (int32_t l = 1; l <= m->top; l++)
        for (int32_t x = 0; x < m->n_axes; x++)
            h = hash_mix(h, (uint64_t)c->tiles[l][x]);
    if (set_insert(c, &c->seen, &c->seen_cap, &c->seen_n, h))
        return;
    rt_rprog *p = record_slot(c);
    if (!p)
        return;
    for (int32_t l = 1; l <= m->top; l++)
        memcpy(p->tile[l].shape, c->tiles[l], sizeof(int64_t) * RT_PERF_MAX_AXES);
    const char *why = NULL;
    bool fits = rt_perf_evaluate(m, p, &why);
    if (c->explain) {
        char b1[160];
        shape_str(m, p->tile[1].shape, b1, sizeof b1);
        if (fits)
            rt_buf_linef(c->explain, 1,
                         "rprog %s threads %lld blocks %lld: predicted %.4g ns "
                         "(%.4g GFLOP/s), kept",
                         b1, (long long)p->threads_per_block, (long long)p->blocks, p->predicted_ns,
                         p->flops / p->predicted_ns);
        else
            rt_buf_linef(c->explain, 1, "rprog %s: dropped (%s)", b1, why);
    }
    if (fits && m->thread_level >= 0)
        fits = gpu_plan(c, p, &why);
    if (!fits)
        return;
    c->n_recorded++;
    p->epsilon = m->epsilon;
    p->construct_ns = now_ns() - c->t0_ns;
    uint64_t key = kernel_key(c, p);
    for (int32_t i = 0; i < c->n_found; i++) {
        if (c->found_key[i] != key)
            continue;
        // The same kernel: keep the rProgram the model rates better (its first discovery
        // otherwise), so that every kernel is ranked once.
        c->n_same++;
        if (c->explain)
            rt_buf_linef(c->explain, 1, "  same kernel as rprog %d%s", (int)c->found[i].order,
                         p->predicted_ns < c->found[i].predicted_ns ? ", replaces it" : "");
        if (p->predicted_ns < c->found[i].predicted_ns) {
            p->order = c->found[i].order;
            c->found[i] = *p;
        }
        return;
    }
    p->order = c->n_found;
    if (c->top1_ns == 0)
        c->top1_ns = p->construct_ns;
    c->found_key[c->n_found++] = key;
}

// Records t at level l and continues at the level below, starting from t re-aligned.
static void descend(cons *c, int32_t l, const int64_t *t) {
    const rt_perf_model *m = c->m;
    memcpy(c->tiles[l], t, sizeof(int64_t) * RT_PERF_MAX_AXES);
    if (l == 1) {
        record(c);
        return;
    }
    int64_t t0[RT_PERF_MAX_AXES];
    memcpy(t0, t, sizeof t0);
    // One tile above gets a third of the remaining results, so that the depth-first walk
    // spreads its candidates over many upper tiles instead of exhausting the first.
    // Records, not kernels, count here: on a CPU many rTiles below the register level lower to
    // the same kernel, and a subtree that only finds those must not take the whole budget.
    int32_t saved = c->limit;
    int32_t left = c->want - c->n_found;
    if (saved != INT32_MAX && saved - c->n_recorded < left)
        left = saved - c->n_recorded;
    c->limit = c->n_recorded + (left / 3 > 2 ? left / 3 : 2);
    if (c->limit > saved)
        c->limit = saved;
    for (int32_t x = 0; x < m->n_axes; x++) {
        int64_t v = rt_perf_next_aligned_size(m, t0, x, l - 1, t, true);
        t0[x] = v > 0 ? v : t[x];
    }
    enlarge(c, l - 1, t0, NULL);
    c->limit = saved;
}

// A tile grown along one axis, priced: its traffic q and footprint f at the level; the data tiles
// dt and per-axis tile counts fac (dense models; fac_x along the axis) of the tile it grew from.
struct grow {
    int32_t axis;
    int64_t shape[RT_PERF_MAX_AXES];
    double score, q, fac_x;
    int64_t f;
    bool fits;
    int32_t pref;
    const int64_t (*dt)[RT_MAX_DIMS];
    const double *fac;
};

// Preference among equal scores: spatial before reduction, the output's inner axes first.
static int32_t axis_pref(const rt_perf_model *m, int32_t x) {
    const rt_perf_access *o = &m->access[m->n_access - 1];
    int32_t p = m->axes[x].is_reduce ? 1000 : 0;
    for (int32_t d = 0; d < o->n_dims; d++)
        if (o->coef[d][x])
            return p + (o->n_dims - 1 - d) * 10 + x;
    return p + 500 + x;
}

static void sort_grows(grow *g, int32_t n) {
    for (int32_t i = 1; i < n; i++) { // insertion sort: stable, n <= RT_PERF_MAX_AXES
        grow k = g[i];
        int32_t j = i - 1;
        while (j >= 0 && (g[j].score < k.score || (g[j].score == k.score && g[j].pref > k.pref))) {
            g[j + 1] = g[j];
            j--;
        }
        g[j + 1] = k;
    }
}

// A GPU rows phase's block tile along its row axis is the threads each row element gets
// (gpu-plan.h): parallelism, not reuse, which the model ranks. At the block level it grows too
// when none of the first `tried` grows g[0 .. tried) of the level took that axis.
static void enlarge_rows(cons *c, int32_t l, grow *g, int32_t n_fit, int32_t tried) {
    if (l != c->m->block_level || c->rows_axis < 0)
        return;
    for (int32_t i = 0; i < tried && i < n_fit; i++)
        if (g[i].axis == c->rows_axis)
            return;
    for (int32_t i = tried; i < n_fit && !done(c); i++)
        if (g[i].axis == c->rows_axis)
            enlarge(c, l, g[i].shape, &g[i]);
}

// Scale-up at level l from tile t; from, when given, is the grow of this level that made t: t's
// traffic and footprint (reused where pricing counts no model steps), and data tiles and tile
// counts follow from those of the tile it grew from.
static void enlarge(cons *c, int32_t l, const int64_t *t, const grow *from) {
    const rt_perf_model *m = c->m;
    if (done(c))
        return;
    uint64_t h = hash_mix(0x77, (uint64_t)l);
    for (int32_t k = l; k <= m->top; k++)
        for (int32_t x = 0; x < m->n_axes; x++)
            h = hash_mix(h, (uint64_t)(k == l ? t[x] : c->tiles[k][x]));
    if (set_insert(c, &c->memo, &c->memo_cap, &c->memo_n, h))
        return;
    c->evals++;
    const int64_t *upper = l < m->top ? c->tiles[l + 1] : NULL;
    // Data tiles of t, and of each grown tile from them (only the accesses of its axis change).
    int64_t dt[RT_PERF_MAX_ACCESS][RT_MAX_DIMS], dt2[RT_PERF_MAX_ACCESS][RT_MAX_DIMS];
    rt_perf_data_tiles(m, t, from ? from->dt : NULL, from ? from->axis : -1, dt);
    const int64_t(*cdt)[RT_MAX_DIMS] = (const int64_t(*)[RT_MAX_DIMS])dt;
    const int64_t(*cdt2)[RT_MAX_DIMS] = (const int64_t(*)[RT_MAX_DIMS])dt2;
    double fac[RT_PERF_MAX_AXES];
    for (int32_t x = 0; c->dense && x < m->n_axes; x++)
        fac[x] =
            from ? (x == from->axis ? from->fac_x : from->fac[x]) : rt_perf_axis_tiles(m, x, t[x]);
    bool reuse = from && c->dense;
    double q = reuse ? from->q : traffic_of(c, l, t, cdt);
    int64_t f = reuse ? from->f : rt_perf_footprint_of(m, l, cdt, upper, NULL);
    grow g[RT_PERF_MAX_AXES];
    int32_t ng = 0;
    bool best_blocked = false;
    for (int32_t x = 0; x < m->n_axes; x++) {
        int64_t v = rt_perf_next_aligned_size(m, t, x, l, upper, false);
        if (v <= 0)
            continue;
        grow *gi = &g[ng];
        memcpy(gi->shape, t, sizeof gi->shape);
        gi->shape[x] = v;
        gi->axis = x;
        gi->pref = axis_pref(m, x);
        rt_perf_data_tiles(m, gi->shape, cdt, x, dt2);
        int64_t f2 = rt_perf_footprint_of(m, l, cdt2, upper, NULL);
        gi->dt = cdt;
        gi->fac = fac;
        gi->fac_x = c->dense ? rt_perf_axis_tiles(m, x, v) : 0;
        double q2 = c->dense ? grown_traffic(c, l, fac, x, gi->fac_x, cdt2)
                             : traffic_of(c, l, gi->shape, cdt2);
        double df = (double)(f2 - f);
        gi->score = df > 0 ? (q - q2) / df : (q2 < q ? 1e30 : 0);
        gi->q = q2;
        gi->f = f2;
        gi->fits = eligible(c, l, gi->shape, f2);
        ng++;
    }
    sort_grows(g, ng);
    if (ng > 0 && !g[0].fits)
        best_blocked = true;
    int32_t n_fit = 0;
    for (int32_t i = 0; i < ng; i++)
        if (g[i].fits)
            g[n_fit++] = g[i];
    double mem_ns, comp_ns;
    level_times(c, l, t, q, &mem_ns, &comp_ns);
    bool cb = mem_ns <= comp_ns;
    bool rec = recordable(c, l, t);
    if (c->explain) {
        char b[160];
        shape_str(m, t, b, sizeof b);
        rt_buf_linef(c->explain, 0,
                     "L%d %s %s footprint %lld B traffic %.4g B: mem %.4g ns, compute %.4g ns "
                     "(%.4g GFLOP/s), best score %.4g: %s",
                     l, m->dev->level[l].name, b, (long long)f, q, mem_ns, comp_ns,
                     comp_ns > 0 ? m->flops_per_point * rt_perf_padded_points(m, t) /
                                       (mem_ns > comp_ns ? mem_ns : comp_ns)
                                 : 0.0,
                     n_fit ? g[0].score : 0.0,
                     n_fit == 0  ? (rec ? "kept (no larger tile fits)" : "dropped (not aligned)")
                     : cb && rec ? "kept (compute bound), also enlarged"
                     : best_blocked && rec    ? "kept (next tile exceeds capacity), also enlarged"
                     : g[0].score <= 0 && rec ? "kept (no reuse left)"
                                              : "enlarged (memory bound)");
    }
    if (n_fit == 0) {
        if (rec)
            descend(c, l, t);
        return;
    }
    if (rec && (cb || best_blocked || g[0].score <= 0)) {
        // Record, and keep enlarging along the best axis (Fig. 8 line 20); with no reuse left
        // the larger tiles differ only in parallelism, which the model ranks.
        descend(c, l, t);
        enlarge(c, l, g[0].shape, &g[0]);
        // A CPU register block is a micro-kernel whose shape (rows x vectors) the reuse score
        // cannot rank: every compute-bound block already hides the FMA latency, and its rows
        // against its vectors trade broadcasts for loads, C updates and the kc that fits L1.
        // The cost model (cpu.c) ranks them, so the other spatial axes grow here too.
        if (m->thread_level < 0 && l == m->top && c->has_red)
            for (int32_t i = 1; i < n_fit && !done(c); i++)
                if (!m->axes[g[i].axis].is_reduce)
                    enlarge(c, l, g[i].shape, &g[i]);
        enlarge_rows(c, l, g, n_fit, 1);
        return;
    }
    // Memory bound: try the two best axes (the second only when it also saves traffic).
    int32_t tried = 0;
    for (int32_t i = 0; i < n_fit && i < 2 && !done(c); i++) {
        if (i > 0 && g[i].score <= 0)
            break;
        int64_t tt[RT_PERF_MAX_AXES];
        memcpy(tt, g[i].shape, sizeof tt);
        enlarge(c, l, tt, &g[i]);
        tried = i + 1;
    }
    enlarge_rows(c, l, g, n_fit, tried);
}

// The tile at the top level before any growth.
static void start(cons *c) {
    const rt_perf_model *m = c->m;
    int64_t t[RT_PERF_MAX_AXES];
    for (int32_t x = 0; x < RT_PERF_MAX_AXES; x++)
        t[x] = 1;
    for (int32_t x = 0; x < m->n_axes; x++) {
        int64_t v = rt_perf_next_aligned_size(m, t, x, m->top, NULL, true);
        t[x] = v > 0 ? v : 1;
    }
    c->memo_n = 0;
    if (c->memo)
        memset(c->memo, 0, sizeof *c->memo * (size_t)c->memo_cap);
    c->evals = 0;
    c->limit = INT32_MAX;
    enlarge(c, m->top, t, NULL);
    c->total_evals += c->evals;
}

// Small operators: shrink the scale-out tile along its lowest-reuse axis until every unit has a
// block (Roller §3.2), halving and keeping the tiles above nested.
static void shrink(cons *c, const rt_rprog *src) {
    const rt_perf_model *m = c->m;
    int64_t units = m->dev->units > 0 ? m->dev->units : 1;
    if (src->blocks >= units)
        return;
    int32_t bl = m->block_level;
    for (int32_t l = 1; l <= m->top; l++)
        memcpy(c->tiles[l], src->tile[l].shape, sizeof c->tiles[l]);
    bool changed = false;
    for (int32_t iter = 0; iter < 64; iter++) {
        if (rt_perf_tile_count(m, c->tiles[bl], true) >= (double)units)
            break;
        int32_t best = -1;
        double best_s = 0;
        int64_t best_v = 0;
        double q = traffic(c, bl, c->tiles[bl]);
        int64_t f = rt_perf_footprint_bytes(m, bl, c->tiles[bl], NULL, NULL);
        for (int32_t x = 0; x < m->n_axes; x++) {
            if (m->axes[x].is_reduce || c->tiles[bl][x] <= 1)
                continue;
            int64_t cur = c->tiles[bl][x];
            int64_t v = cur / 2;
            if (v < 1 || cur % 2)
                continue;
            int64_t t2[RT_PERF_MAX_AXES];
            memcpy(t2, c->tiles[bl], sizeof t2);
            t2[x] = v;
            double s = (traffic(c, bl, t2) - q) /
                       (double)rt_max64(1, f - rt_perf_footprint_bytes(m, bl, t2, NULL, NULL));
            if (best < 0 || s < best_s) {
                best = x;
                best_s = s;
                best_v = v;
            }
        }
        if (best < 0)
            break;
        // Lower levels stay multiples; upper levels are cut to divide the new size.
        c->tiles[bl][best] = best_v;
        for (int32_t l = bl + 1; l <= m->top; l++)
            while (c->tiles[l][best] > 1 && c->tiles[l - 1][best] % c->tiles[l][best] != 0)
                c->tiles[l][best] = c->tiles[l][best] % 2 ? 1 : c->tiles[l][best] / 2;
        changed = true;
    }
    if (!changed)
        return;
    if (m->thread_level >= 0 && m->dev->lanes > 0) {
        int64_t th = threads_of(c, bl, c->tiles[bl]);
        if (th % m->dev->lanes != 0)
            return; // partial warps: not an aligned rProgram
    }
    int32_t before = c->n_found;
    record(c);
    if (c->n_found > before)
        c->found[c->n_found - 1].shrunk = true;
}

static int cmp_rprog(const void *pa, const void *pb) {
    const rt_rprog *a = pa, *b = pb;
    if (a->predicted_ns != b->predicted_ns)
        return a->predicted_ns < b->predicted_ns ? -1 : 1;
    // Packed GEMMs that the same roof (reading their operands once) binds: the one whose cores
    // take less time under it. Attention x V over a CoLA batch on one thread tied 8 candidates
    // at its roof whose measured times spread 40-58 us.
    if (a->bound_bytes > 0 && b->bound_bytes > 0 && a->compute_ns != b->compute_ns)
        return a->compute_ns < b->compute_ns ? -1 : 1;
    // Equal times on a CPU: the larger register block (fewer loads and calls per FMA beyond
    // what the model resolves).
    if (a->reg_block_elems != b->reg_block_elems)
        return a->reg_block_elems > b->reg_block_elems ? -1 : 1;
    double sa = a->compute_ns, sb = b->compute_ns;
    for (int32_t l = 1; l < a->n_levels; l++) {
        sa += a->tile[l].time_ns;
        sb += b->tile[l].time_ns;
    }
    if (sa != sb)
        return sa < sb ? -1 : 1;
    if (a->waste != b->waste)
        return a->waste < b->waste ? -1 : 1;
    return (a->order > b->order) - (a->order < b->order);
}

rt_status rt_perf_construct(rt_arena *a, const rt_op *op, const rt_device *dev,
                            const rt_perf_options *opt, rt_perf_result **out, rt_err *err) {
    double t0 = now_ns();
    rt_perf_model *m;
    RT_TRY(rt_perf_model_build(a, op, dev, opt, &m, err));
    cons c;
    memset(&c, 0, sizeof c);
    c.a = a;
    c.m = m;
    c.err = err;
    c.explain = opt ? opt->explain : NULL;
    c.t0_ns = t0;
    int32_t k = opt && opt->top_k > 0 ? opt->top_k : 10;
    c.want = k * 2 > 24 ? k * 2 : 24;
    c.max_evals = opt && opt->max_evals > 0 ? opt->max_evals : 1000;
    c.dense = true;
    RT_TRY(rt_gpu_plan_rows_axis(a, op, dev, m, &c.rows_axis, err));
    for (int32_t x = 0; x < m->n_axes; x++) {
        c.full[x] = m->axes[x].extent;
        c.has_red = c.has_red || m->axes[x].is_reduce;
        c.dense = c.dense && !(m->axes[x].group >= 0 && m->axes[x].dist.n > 1);
    }
    if (c.dense)
        c.full_red = rt_perf_tile_count(m, c.full, false) / rt_perf_tile_count(m, c.full, true);
    static const double eps[] = {0, 0.05, 0.1, 0.2, 0.4, 0.7, 1.0};
    for (size_t e = 0; e < sizeof eps / sizeof eps[0] && c.st == RT_OK; e++) {
        m->epsilon = eps[e];
        if (c.explain)
            rt_buf_linef(c.explain, 0, "epsilon %.2f", eps[e]);
        start(&c);
        if (c.n_found >= k || c.total_evals >= 2 * c.max_evals)
            break; // enough candidates, or the evaluation budget of the whole construction
        c.want = c.n_found + (k * 2 > 24 ? k * 2 : 24);
    }
    if (c.n_found == 0 && c.st == RT_OK) {
        c.relaxed = true;
        if (c.explain)
            rt_buf_linef(c.explain, 0, "no aligned candidate: relaxing thread alignment");
        start(&c);
    }
    if (c.st != RT_OK)
        return c.st;
    int32_t n0 = c.n_found;
    c.want = n0 * 2 + 1;
    c.limit = INT32_MAX;
    for (int32_t i = 0; i < n0 && c.st == RT_OK; i++) {
        rt_rprog src = c.found[i];
        shrink(&c, &src);
    }
    if (c.st != RT_OK)
        return c.st;
    if (c.n_found == 0)
        return rt_fail(err, RT_ERR_NOFIT, dev->origin,
                       "no candidate for '%s' fits device '%s' (expected a tile within every "
                       "level's capacity, got none after %lld tile evaluations)",
                       op->name ? op->name : "?", dev->name, (long long)c.total_evals);
    qsort(c.found, (size_t)c.n_found, sizeof *c.found, cmp_rprog);
    rt_perf_result *r;
    RT_ALLOC(a, r, 1, err);
    r->model = m;
    r->n_found = c.n_found;
    r->n_same_kernel = c.n_same;
    r->n_cands = c.n_found < k ? c.n_found : k;
    r->top_k = k;
    r->cands = c.found;
    r->n_evals = c.total_evals;
    r->n_steps = *m->steps;
    r->top1_ns = c.top1_ns;
    r->construct_ns = now_ns() - t0;
    *out = r;
    return RT_OK;
}
