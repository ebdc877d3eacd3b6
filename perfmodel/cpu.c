// cpu.c: the CPU side of the micro-performance model — the register micro-kernel, the packed
// GEMM program the CPU backend builds from an rProgram (plain, or the implicit GEMM of a
// convolution), the loop nest it builds for everything else, and their time on the cores.
//
// cost.c calls in here for devices without a thread level. The micro-kernel's efficiency comes
// from its register block (loads per FMA against the load ports, FMA latency against the
// accumulators, register pressure); for a contraction the backend (codegen/lower-cpu.c) packs
// A and B panels per mc x nc block and kc step, so the time is packing + micro-kernel calls + C's
// round trip per k block over the work items the busiest core gets (contiguous chunks, as the
// thread pool hands them out). For other statements it is the blocked loop nest's instructions:
// work items, loop control and vector loops (whole vectors for trip counts known when compiled,
// the vectorizer's main/epilogue/scalar split otherwise), and for a window reduction whose read
// the backend packs by rows, that packing (window_pack, window_pack_cycles). Every number comes
// from the device description: the clock from the FMA peak, load ports from the L1 bandwidth per
// core and cycle, registers from the register level's capacity, bandwidth per level from its
// curve. No device is special-cased.
#include "perfmodel.h"

#include <math.h>
#include <string.h>

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

double rt_perf_cpu_ghz(const rt_device *dev) {
    double nominal = dev->clock_mhz / 1000.0;
    double lanes = dev->lanes > 0 ? dev->lanes : 1;
    double ports = dev->teus_per_unit > 0 ? dev->teus_per_unit : 1;
    double units = dev->units > 0 ? dev->units : 1;
    double peak = rt_hal_peak_gflops(dev, RT_DTYPE_F32, false);
    if (!(nominal > 0) || !(peak > 0))
        return nominal > 0 ? nominal : 0;
    // The clock the FMA peak implies (the nominal one for a peak derived from it).
    return peak / (units * ports * lanes * 2.0);
}

double rt_perf_cpu_load_ports(const rt_device *dev) {
    int32_t top = dev->n_levels - 1;
    double ghz = rt_perf_cpu_ghz(dev);
    int64_t units = dev->units > 0 ? dev->units : 1;
    double vec_bytes = (dev->lanes > 0 ? dev->lanes : 1) * 4.0;
    if (top < 1 || !(ghz > 0))
        return RT_PERF_CPU_DEFAULT_LOAD_PORTS;
    double gbps = dev->level[top - 1].bandwidth_gbps;
    if (!(gbps > 0))
        return RT_PERF_CPU_DEFAULT_LOAD_PORTS;
    double ports = gbps / ((double)units * ghz * vec_bytes);
    return ports < 0.5 ? 0.5 : ports;
}

double rt_perf_cpu_expr_cycles(const rt_device *dev, const rt_expr *e) {
    if (!e || rt_perf_expr_is_leaf(e))
        return 0;
    double pipes = dev->teus_per_unit > 0 ? dev->teus_per_unit : 1;
    double lanes = dev->lanes > 0 ? dev->lanes : 1, own = 1.0 / pipes;
    if (e->kind == RT_EXPR_CALL) {
        switch (e->fn) {
        case RT_FN_EXP:
            own = RT_PERF_CPU_EXP_OPS / pipes;
            break;
        case RT_FN_SIGMOID:
            own = (RT_PERF_CPU_EXP_OPS + 3.0) / pipes;
            break;
        case RT_FN_ERF:
            own = RT_PERF_CPU_ERF_OPS / pipes;
            break;
        case RT_FN_SQRT:
            own = rt_hal_cpu_costs(dev).sqrt_cycles;
            break;
        case RT_FN_RSQRT:
            own = rt_hal_cpu_costs(dev).sqrt_cycles + 1.0 / pipes;
            break;
        case RT_FN_LOG:
        case RT_FN_TANH:
            own = rt_hal_cpu_costs(dev).libm_cycles * lanes;
            break;
        default:
            break;
        }
    }
    double c = own;
    for (int32_t i = 0; i < e->n_args; i++)
        c += rt_perf_cpu_expr_cycles(dev, e->args[i]);
    return c;
}

int64_t rt_perf_cpu_vector_regs(const rt_device *dev) {
    int32_t top = dev->n_levels - 1;
    int64_t vec_bytes = (int64_t)(dev->lanes > 0 ? dev->lanes : 1) * 4;
    int64_t cap = top >= 0 ? dev->level[top].capacity_bytes : 0;
    return cap > 0 ? cap / vec_bytes : 16;
}

void rt_perf_cpu_uk_rules_of(const rt_device *dev, rt_perf_cpu_uk_rules *out) {
    int64_t latency = dev && dev->fma_latency_cycles > 0 ? dev->fma_latency_cycles : 4;
    int64_t pipes = !dev ? 2 : dev->teus_per_unit > 0 ? dev->teus_per_unit : 1;
    out->lanes = !dev ? 16 : dev->lanes > 0 ? dev->lanes : 1;
    out->regs = dev ? rt_perf_cpu_vector_regs(dev) : 32;
    out->acc_min = rt_ceil_div(3 * latency * pipes, 2);
    // nv_max: the widest B row for which every narrower one keeps acc_min accumulators in the
    // registers (a register file too small for that keeps what one B vector leaves).
    out->nv_max = 0;
    for (int64_t nv = 1; nv <= RT_PERF_CPU_UK_MAX_NV; nv++) {
        if (nv * rt_ceil_div(out->acc_min, nv) + nv + 1 > out->regs)
            break;
        out->nv_max = nv;
    }
    if (out->nv_max == 0) {
        out->nv_max = 1;
        out->acc_min = out->regs > 3 ? out->regs - 2 : 1;
    }
    out->nv_min = out->nv_max < 2 ? out->nv_max : 2;
    out->masked_edge = out->lanes == 16;
}

int64_t rt_perf_cpu_uk_max_mr(const rt_perf_cpu_uk_rules *r, int64_t nv) {
    nv = nv < 1 ? 1 : nv;
    int64_t acc = rt_min64(r->regs - nv - 1, RT_PERF_CPU_UK_MAX_ACC);
    return acc / nv > 1 ? acc / nv : 1;
}

int64_t rt_perf_cpu_tail_sets(int64_t mr, int64_t nv, int64_t rows, int64_t acc) {
    if (rows < 1 || rows >= mr || nv < 1 || acc <= 0)
        return 1;
    int64_t s = rt_min64(rt_ceil_div(acc, rows * nv), mr / rows);
    return s < 1 ? 1 : s;
}

int64_t rt_perf_cpu_tail_quantum(int64_t mr) {
    return mr > 4 ? rt_ceil_div(mr, 4) : 1;
}

int64_t rt_perf_cpu_tail_rows(int64_t mr, int64_t rows) {
    int64_t q = rt_perf_cpu_tail_quantum(mr);
    return rows >= mr ? mr : rt_min64(mr, rt_ceil_div(rows < 1 ? 1 : rows, q) * q);
}

bool rt_perf_cpu_ukernel(const rt_device *dev, int32_t elem_bytes, int64_t mr, int64_t nr,
                         int64_t kc, rt_perf_ukernel *out) {
    return rt_perf_cpu_ukernel_sets(dev, elem_bytes, mr, nr, kc, 1, out);
}

bool rt_perf_cpu_ukernel_sets(const rt_device *dev, int32_t elem_bytes, int64_t mr, int64_t nr,
                              int64_t kc, int64_t sets, rt_perf_ukernel *out) {
    memset(out, 0, sizeof *out);
    sets = sets < 1 ? 1 : sets;
    int64_t vec_elems =
        (int64_t)(dev->lanes > 0 ? dev->lanes : 1) * 4 / (elem_bytes > 0 ? elem_bytes : 4);
    if (vec_elems < 1)
        vec_elems = 1;
    double teus = dev->teus_per_unit > 0 ? dev->teus_per_unit : 1;
    double ports = rt_perf_cpu_load_ports(dev);
    int64_t nv = rt_ceil_div(nr < 1 ? 1 : nr, vec_elems);
    if (mr < 1)
        mr = 1;
    if (kc < 1)
        kc = 1;
    out->acc_vectors = mr * nv;
    // Accumulators, the B vectors of one k step and one broadcast A value.
    out->vector_regs = out->acc_vectors * sets + nv + 1;
    double fma = (double)out->acc_vectors / teus;
    // Accumulators beyond the register file are spilled: a reload and a store every step.
    int64_t spilled = out->vector_regs - rt_perf_cpu_vector_regs(dev);
    if (spilled < 0)
        spilled = 0;
    if (spilled > out->acc_vectors)
        spilled = out->acc_vectors;
    double loads = (double)(mr + nv + 2 * spilled) / ports, stream = 0, reload = 0;
    // The call's L1 set is its A micro-panel, which stays in L1 across the column panels of a
    // B block (codegen/lower-cpu.c runs row panels outside column panels), and its C tile; the
    // B panel streams from L2, nv vectors per k step. The stream bounds the step where L2 does
    // not deliver it within the FMA time. An A micro-panel beyond L1 less one way (BLIS: the
    // L1-resident panel gets the ways the stream leaves it) is fetched from L2 again every k
    // step, and a share of that time (RT_PERF_CPU_RELOAD_EXPOSED) adds to the step.
    int32_t t1 = dev->n_levels - 2;
    if (t1 >= 1 && kc > 1) {
        const rt_mem_level *l1 = &dev->level[t1], *l2 = &dev->level[t1 - 1];
        double cap = (double)l1->capacity_bytes;
        if (l1->ways > 1)
            cap = cap / l1->ways * (l1->ways - 1);
        if (l1->tile_capacity_bytes > 0 && (double)l1->tile_capacity_bytes < cap)
            cap = (double)l1->tile_capacity_bytes;
        double set = (double)(mr * kc + mr * nv * vec_elems) * (double)elem_bytes;
        double ghz = rt_perf_cpu_ghz(dev);
        double l2_bytes_per_cycle =
            ghz > 0 ? l2->bandwidth_gbps / (double)(dev->units > 0 ? dev->units : 1) / ghz : 0;
        if (l2_bytes_per_cycle > 0) {
            stream = (double)(nv * vec_elems * elem_bytes) / l2_bytes_per_cycle;
            if (cap > 0 && set > cap)
                reload = (double)(mr * elem_bytes) / l2_bytes_per_cycle;
        }
    }
    double latency =
        (double)(dev->fma_latency_cycles > 0 ? dev->fma_latency_cycles : 0) / (double)sets;
    double busy = fma > loads ? fma : loads;
    out->cycles_per_k = stream > 0 ? pow(pow(busy, RT_PERF_CPU_STREAM_OVERLAP_P) +
                                             pow(stream, RT_PERF_CPU_STREAM_OVERLAP_P),
                                         1.0 / RT_PERF_CPU_STREAM_OVERLAP_P)
                                   : busy;
    out->cycles_per_k += RT_PERF_CPU_RELOAD_EXPOSED * reload;
    if (latency > out->cycles_per_k)
        out->cycles_per_k = latency;
    // One call: kc steps, then C (+)= acc (a load and a store per accumulator) and the loop and
    // edge-test overhead of entering the kernel.
    // (Split sets: their sum after the loop, an add per accumulator of every set but one.)
    out->call_cycles = (double)kc * out->cycles_per_k + 2.0 * (double)out->acc_vectors / ports +
                       (double)((sets - 1) * out->acc_vectors) / teus + RT_PERF_CPU_CALL_CYCLES;
    out->eff = fma * (double)kc / out->call_cycles;
    return out->vector_regs <= rt_perf_cpu_vector_regs(dev);
}

// Whether access i reads axis x (in any dim).
static bool access_uses(const rt_perf_access *acc, int32_t x) {
    for (int32_t d = 0; d < acc->n_dims; d++)
        if (acc->coef[d][x] != 0)
            return true;
    return false;
}

// Bytes of the tensor behind an access (its storage extents).
static double access_bytes(const rt_perf_access *acc) {
    double b = acc->elem_bytes > 0 ? acc->elem_bytes : 4;
    for (int32_t d = 0; d < acc->n_dims; d++)
        b *= (double)(acc->dim_extent[d] > 0 ? acc->dim_extent[d] : 1);
    return b;
}

// Groups the model axes of a contraction C (+)= A * B the way codegen/lower-cpu.c groups the
// statement's variables for its packed GEMM (rt_gemm_detect_implicit): B is the input holding
// the output's innermost axis; n is the output's unit-stride suffix of axes only B holds (they
// flatten into one index), m the output axes only A holds (flattening by their output strides),
// k the reduction axes both hold, batch the other output axes only B holds or both hold
// (a_batch). Fills the groups, extents, accesses and tensor sizes of g; false for anything else
// (an output axis neither input holds, a reduction one input lacks, ragged extents, other dtypes
// or assignments).
bool rt_perf_cpu_gemm_groups(const rt_perf_model *m, rt_perf_cpu_gemm *g) {
    if (m->n_access != 3 || m->dtype != RT_DTYPE_F32 ||
        (m->assign != RT_ASSIGN_ADD_INIT && m->assign != RT_ASSIGN_ADD))
        return false;
    const rt_perf_access *o = &m->access[2];
    if (m->access[0].elem_bytes != 4 || m->access[1].elem_bytes != 4 || o->elem_bytes != 4)
        return false;
    // The backend packs dense tensors only (a ragged one has start arrays, no strides).
    for (int32_t i = 0; i < 3; i++)
        if (m->op->tensors[m->access[i].tensor].ragged)
            return false;
    // Flat offset coefficient of each axis in C (dims of C are plain axes).
    int64_t ccoef[RT_PERF_MAX_AXES] = {0}, stride = 1;
    for (int32_t d = o->n_dims - 1; d >= 0; d--) {
        if (!o->affine[d])
            return false;
        for (int32_t x = 0; x < m->n_axes; x++)
            ccoef[x] += o->coef[d][x] * stride;
        stride *= o->dim_extent[d];
    }
    int32_t inner = -1;
    for (int32_t x = 0; x < m->n_axes; x++) {
        if (m->axes[x].ragged && m->axes[x].dist.n > 1)
            return false;
        if (o->coef[o->n_dims - 1][x] != 0)
            inner = inner < 0 ? x : -2;
    }
    if (inner < 0 || access_uses(&m->access[0], inner) == access_uses(&m->access[1], inner))
        return false;
    g->in_b = access_uses(&m->access[0], inner) ? 0 : 1;
    g->in_a = 1 - g->in_b;
    const rt_perf_access *A = &m->access[g->in_a], *B = &m->access[g->in_b];
    for (int32_t x = 0; x < RT_PERF_MAX_AXES; x++)
        g->group[x] = -1;
    // n: C's dims from the innermost while each is one axis of B alone with the running stride.
    int64_t run = 1;
    g->axis_n = inner;
    for (int32_t d = o->n_dims - 1; d >= 0; d--) {
        int32_t x = -1;
        for (int32_t y = 0; y < m->n_axes; y++)
            if (o->coef[d][y] != 0)
                x = x < 0 ? y : -2;
        if (x < 0 || o->coef[d][x] != 1 || !access_uses(B, x) || access_uses(A, x) ||
            g->group[x] >= 0 || ccoef[x] != run)
            break;
        g->group[x] = RT_PERF_GEMM_N;
        run *= m->axes[x].extent;
    }
    g->N = run;
    g->M = g->K = g->batch = 1;
    g->axis_m = g->axis_k = -1;
    int32_t mv[RT_PERF_MAX_AXES], nm = 0;
    for (int32_t x = 0; x < m->n_axes; x++) {
        bool ua = access_uses(A, x), ub = access_uses(B, x), uc = ccoef[x] != 0;
        if (m->axes[x].is_reduce) {
            if (!ua || !ub || uc)
                return false;
            g->group[x] = RT_PERF_GEMM_K;
            g->K *= m->axes[x].extent;
            g->axis_k = x;
        } else if (!uc || (!ua && !ub)) {
            return false;
        } else if (ua && ub) {
            g->group[x] = RT_PERF_GEMM_BATCH;
            g->batch *= m->axes[x].extent;
            g->a_batch = true;
        } else if (ua) {
            g->group[x] = RT_PERF_GEMM_M;
            mv[nm++] = x;
        } else if (g->group[x] != RT_PERF_GEMM_N) {
            g->group[x] = RT_PERF_GEMM_BATCH;
            g->batch *= m->axes[x].extent;
        }
    }
    if (nm == 0 || g->axis_k < 0)
        return false;
    // m axes outer first by their C stride; together they must flatten like one index.
    for (int32_t i = 1; i < nm; i++)
        for (int32_t j = i; j > 0 && ccoef[mv[j]] > ccoef[mv[j - 1]]; j--) {
            int32_t t = mv[j];
            mv[j] = mv[j - 1];
            mv[j - 1] = t;
        }
    for (int32_t i = nm - 1; i >= 0; i--) {
        if (ccoef[mv[i]] != ccoef[mv[nm - 1]] * g->M)
            return false;
        g->M *= m->axes[mv[i]].extent;
    }
    g->axis_m = mv[nm - 1];
    // A plain GEMM reads A(m, k) and B(k, n) as two-dimensional arrays of single axes; anything
    // else (windows y + r, strides, several axes per group) is packed by gathering.
    int32_t per_group[RT_PERF_GEMM_GROUP_COUNT] = {0};
    for (int32_t x = 0; x < m->n_axes; x++)
        per_group[g->group[x]]++;
    g->implicit = per_group[RT_PERF_GEMM_M] != 1 || per_group[RT_PERF_GEMM_N] != 1 ||
                  per_group[RT_PERF_GEMM_K] != 1 || per_group[RT_PERF_GEMM_BATCH] != 0;
    for (int32_t i = 0; i < 2 && !g->implicit; i++) {
        const rt_perf_access *acc = &m->access[i];
        for (int32_t d = 0; d < acc->n_dims; d++) {
            int32_t terms = 0;
            for (int32_t x = 0; x < m->n_axes; x++)
                terms += acc->coef[d][x] != 0 ? (acc->coef[d][x] == 1 ? 1 : 2) : 0;
            g->implicit = g->implicit || !acc->affine[d] || terms != 1;
        }
    }
    for (int32_t d = 0; d < B->n_dims; d++) {
        int32_t terms = 0; // axes of extent 1 only add a constant
        for (int32_t x = 0; x < m->n_axes; x++)
            terms += B->coef[d][x] == 0 || m->axes[x].extent <= 1 ? 0 : B->coef[d][x] == 1 ? 1 : 2;
        g->b_window = g->b_window || !B->affine[d] || terms > 1;
    }
    // Flat stride of n in B (the backend prefetches B blocks that are contiguous along n).
    int64_t bn = 0, bstride = 1;
    for (int32_t d = B->n_dims - 1; d >= 0; d--) {
        bn += B->coef[d][g->axis_n] * bstride;
        bstride *= B->dim_extent[d] > 0 ? B->dim_extent[d] : 1;
    }
    g->b_prefetch = !g->implicit && bn == 1;
    // Flat stride of k in A (the backend loads A's rows along k as vectors when it is 1).
    int64_t ak = 0, astride = 1;
    for (int32_t d = A->n_dims - 1; d >= 0; d--) {
        ak += A->coef[d][g->axis_k] * astride;
        astride *= A->dim_extent[d] > 0 ? A->dim_extent[d] : 1;
    }
    g->a_k_unit = ak == 1;
    int64_t bk = 0;
    bstride = 1;
    for (int32_t d = B->n_dims - 1; d >= 0; d--) {
        bk += B->coef[d][g->axis_k] * bstride;
        bstride *= B->dim_extent[d] > 0 ? B->dim_extent[d] : 1;
    }
    g->b_k_unit = !g->b_window && bk == 1 && bn != 1;
    g->a_bytes = access_bytes(A);
    g->b_bytes = access_bytes(B);
    g->c_bytes = access_bytes(o);
    return true;
}

// Run counts tried beyond the least one (rt_perf_cpu_gemm_block).
#define GEMM_RUNS_TRIED 64

// The work items of g's packed GEMM: item i is row block i % mt times the run i / mt of bpg
// column blocks (the ntl column blocks of every batch entry, batch-major). The last row block is
// short when M % mc is not 0, the last column block of every batch entry when N % nc is not 0.
// With a_batch the items are entry-major: `entries` times the `per` items of one entry's ntl
// column blocks (nblk = ntl), each entry's runs its own.
typedef struct gemm_grid {
    int64_t mt, ntl, nblk, bpg;
    int64_t m_rest, n_rest; // M % mc, N % nc
    int64_t entries, per;
} gemm_grid;

// Column blocks the runs go over: every entry's, batch-major (A shared by the entries), or one
// entry's (a_batch); the entries then repeat the grid.
static int64_t gemm_nblk(const rt_perf_cpu_gemm *g, int64_t batch, int64_t ntl) {
    return g->a_batch ? ntl : (batch > 0 ? batch : 1) * ntl;
}

static gemm_grid grid_of(const rt_perf_cpu_gemm *g, int64_t batch, int64_t ntl, int64_t nblk,
                         int64_t bpg) {
    int64_t mt = rt_ceil_div(g->M, g->mc);
    gemm_grid gr = {mt,
                    ntl,
                    nblk,
                    bpg,
                    g->M % g->mc,
                    g->N % g->nc,
                    g->a_batch && batch > 1 ? batch : 1,
                    mt * rt_ceil_div(nblk, bpg)};
    return gr;
}

// What a range of work items covers, by whether the item's row block is the short one (index
// 1) or not (0): items, and the full-width and short column blocks of their runs, each counted
// once per item that covers it. Every item's cost is linear in these, so a chunk of items costs
// what its span's counts say, whatever its length.
typedef struct gemm_span {
    int64_t items[2], full[2], edge[2];
} gemm_span;

// Adds rows [r0, r1) of each of the `runs` runs from run j.
static void span_add(const gemm_grid *gr, int64_t j, int64_t runs, int64_t r0, int64_t r1,
                     gemm_span *s) {
    if (runs <= 0 || r1 <= r0)
        return;
    int64_t lo = j * gr->bpg, hi = rt_min64(gr->nblk, (j + runs) * gr->bpg);
    // Short column blocks in [lo, hi): those with (cb + 1) a multiple of ntl.
    int64_t edge = gr->n_rest ? hi / gr->ntl - lo / gr->ntl : 0, full = hi - lo - edge;
    int64_t short_rows = gr->m_rest && r0 <= gr->mt - 1 && gr->mt - 1 < r1 ? 1 : 0;
    int64_t rows[2] = {r1 - r0 - short_rows, short_rows};
    for (int32_t e = 0; e < 2; e++) {
        s->items[e] += rows[e] * runs;
        s->full[e] += rows[e] * full;
        s->edge[e] += rows[e] * edge;
    }
}

// The span of items [a, b) of one entry: the rest of the first run, the whole runs, the start
// of the last.
static gemm_span span_in_entry(const gemm_grid *gr, int64_t a, int64_t b) {
    gemm_span s;
    memset(&s, 0, sizeof s);
    if (a >= b)
        return s;
    int64_t mt = gr->mt, ja = a / mt, jb = (b - 1) / mt;
    if (ja == jb) {
        span_add(gr, ja, 1, a - ja * mt, b - ja * mt, &s);
        return s;
    }
    span_add(gr, ja, 1, a - ja * mt, mt, &s);
    span_add(gr, ja + 1, jb - ja - 1, 0, mt, &s);
    span_add(gr, jb, 1, 0, b - jb * mt, &s);
    return s;
}

static void span_acc(gemm_span *s, const gemm_span *t, int64_t times) {
    for (int32_t e = 0; e < 2; e++) {
        s->items[e] += t->items[e] * times;
        s->full[e] += t->full[e] * times;
        s->edge[e] += t->edge[e] * times;
    }
}

// The span of items [a, b) over the entries: the rest of the first entry, the whole entries,
// the start of the last.
static gemm_span span_of(const gemm_grid *gr, int64_t a, int64_t b) {
    int64_t per = gr->per, ea = a / per, eb = b > a ? (b - 1) / per : ea;
    if (a >= b || ea == eb)
        return span_in_entry(gr, a - ea * per, b - ea * per);
    gemm_span s = span_in_entry(gr, a - ea * per, per), whole = span_in_entry(gr, 0, per),
              last = span_in_entry(gr, 0, b - eb * per);
    span_acc(&s, &whole, eb - ea - 1);
    span_acc(&s, &last, 1);
    return s;
}

// Work of the busiest core when the mt x runs work items of g go to `units` cores in
// contiguous chunks [n t / T, n (t + 1) / T), as hal-cpu.c's pool hands them out: an item costs
// its rows x (its columns + pack) + 2 x its columns, pack being its A packing (a transpose:
// about one cycle per element against 1 / pack of a cycle per element and column for the
// micro-kernel's FMAs, pack = lanes x FMA pipes / 2: 16 on AVX-512, 8 on AVX2) and the 2 its B
// packing (a vector copy, an eighth of a cycle per element), which every row block repeats.
// Integer sums, exact in a double below 2^53.
static double gemm_busiest_load(const rt_perf_cpu_gemm *g, int64_t batch, int64_t ntl, int64_t nblk,
                                int64_t bpg, int64_t units, double pack, int64_t *steps) {
    gemm_grid gr = grid_of(g, batch, ntl, nblk, bpg);
    int64_t n = gr.entries * gr.per, height[2] = {g->mc, gr.m_rest};
    double busiest = 0;
    for (int64_t t = 0; t < units; t++) {
        gemm_span s = span_of(&gr, n * t / units, n * (t + 1) / units);
        double load = 0;
        for (int32_t e = 0; e < 2; e++) {
            double cols = (double)(s.full[e] * g->nc + s.edge[e] * gr.n_rest);
            load += (double)height[e] * (cols + pack * (double)s.items[e]) + 2 * cols;
        }
        busiest = load > busiest ? load : busiest;
        ++*steps;
    }
    return busiest;
}

// Column block counts tried beyond the fewest, and (row, column) block pairs in all
// (rt_perf_cpu_gemm_block).
#define GEMM_NC_TRIED     8
#define GEMM_BLOCKS_TRIED 160

// The number of runs of column blocks for g's mc and nc. A work item is a row block times a run
// of nc blocks: A is packed once per (mc, kc) and reused across the run. With a batch (an
// implicit GEMM's, A the same for every entry) the runs go over the batch x ntl column blocks,
// batch-major, and are cut so that the C block of a run, revisited once per k block, stays
// within half of L2 (codegen/lower-cpu.c rt_gemm_fold_runs). From there it takes the fewest runs
// whose busiest core has at most 2% more work than the least it can have (gemm_busiest_load),
// which goes to *load: 5 row blocks on 2 cores as 5 items leave one core idle for a fifth of the
// time (0.79x oneDNN at 4096^3), as 10 none.
static int64_t gemm_runs(const rt_device *dev, int64_t batch, int64_t units,
                         const rt_perf_cpu_gemm *g, double *load_out, int64_t *steps) {
    int64_t ntl = rt_ceil_div(g->N, g->nc), nblk = gemm_nblk(g, batch, ntl), ng = 1;
    if (batch > 1 && dev && dev->n_levels >= 4 && g->K > g->kc) {
        int64_t l2 = dev->level[dev->n_levels - 3].capacity_bytes;
        int64_t run = l2 / 2 / (g->mc * g->nc * 4);
        if (l2 > 0)
            ng = rt_ceil_div(nblk, run > 1 ? run : 1);
    }
    ng = rt_min64(ng, nblk);
    double pack = 16.0; // without a device: AVX-512's 16 lanes on 2 pipes
    if (dev)
        pack = (double)(dev->lanes > 0 ? dev->lanes : 1) *
               (double)(dev->teus_per_unit > 0 ? dev->teus_per_unit : 1) / 2.0;
    double load[GEMM_RUNS_TRIED + 1] = {0}, least = -1;
    int64_t span = rt_min64(nblk - ng, rt_min64(8 * units, GEMM_RUNS_TRIED));
    for (int64_t d = 0; d <= span; d++) {
        load[d] =
            gemm_busiest_load(g, batch, ntl, nblk, rt_ceil_div(nblk, ng + d), units, pack, steps);
        least = least < 0 || load[d] < least ? load[d] : least;
    }
    int64_t best = ng;
    while (best < ng + span && load[best - ng] > 1.02 * least)
        best++;
    *load_out = load[best - ng];
    return rt_ceil_div(nblk, rt_ceil_div(nblk, best));
}

// The blocking rule of the packed GEMM, shared with codegen/lower-cpu.c (which calls this and
// rt_perf_cpu_gemm_view, so model and backend compile and predict the same blocks). g holds M,
// N, K and the rTile seeds in mr (register tile along m), nr (along n), kc (L1 tile along k), mc
// (L2 tile along m) and nc (the level below, along n), which the device's capacities override
// where it gives them; batch independent GEMMs share the cores.
void rt_perf_cpu_gemm_block(const rt_device *dev, int64_t batch, rt_perf_cpu_gemm *g) {
    int64_t M = g->M, N = g->N, K = g->K;
    int64_t mr = g->mr, nr = g->nr, kc = g->kc, mc = g->mc, nc = g->nc;
    // The register tile keeps the model's shape where it fits the vector registers, widened to
    // two vectors (B loads amortized over mr broadcasts) when N allows (rt_perf_cpu_uk_rules).
    rt_perf_cpu_uk_rules ur;
    rt_perf_cpu_uk_rules_of(dev, &ur);
    int64_t vl = ur.lanes;
    int64_t nv = clamp64(rt_ceil_div(nr, vl), ur.nv_min, ur.nv_max);
    nv = rt_max64(1, rt_min64(nv, rt_ceil_div(N, vl)));
    mr = clamp64(mr, rt_ceil_div(ur.acc_min, nv), rt_perf_cpu_uk_max_mr(&ur, nv));
    // Cache blocking (BLIS analytical rules for the backend's loop order, row panels outside
    // column panels): the mr x kc A micro-panel, which stays in L1 across a B block, fills half
    // of L1 (kc at most RT_PERF_CPU_MAX_KC); the kc x nc B block,
    // which the micro-kernels stream from L2, a quarter of L2 (the next block, prefetched while
    // this one is used, takes as much; with half of L2 each, 128x1000x4032 on 2 Zen 4 cores ran
    // 3-14% slower); the mc x kc A block, read once per B block, half of a core's share of L3
    // (of L2 without an L3). The rTile seeds rule where the device gives no capacity. k is cut
    // into equal blocks (1033 as 345 x 3, not 512 + 512 + 9).
    // Measured on a Zen 4 core (32 KiB L1): kc = 512 ran 3-5% faster than the kc = 80-160 that a
    // 64-wide B micro-panel in L1 allowed.
    if (dev && dev->n_levels >= 3) {
        int32_t t = dev->n_levels - 1;
        int64_t units = dev->units > 0 ? dev->units : 1;
        int64_t l1 = dev->level[t - 1].capacity_bytes;
        int64_t l2 = dev->n_levels >= 4 ? dev->level[t - 2].capacity_bytes : 0;
        int64_t l3 = 0;
        if (dev->n_levels >= 5) {
            const rt_mem_level *lv = &dev->level[t - 3];
            l3 = lv->scope == RT_MEM_SCOPE_DEVICE ? lv->capacity_bytes / units : lv->capacity_bytes;
        }
        if (l1 > 0)
            kc = rt_max64(16,
                          rt_min64(RT_PERF_CPU_MAX_KC, l1 / 2 / (clamp64(mr, 1, M) * 4)) / 16 * 16);
        if (kc > 0 && K > 0)
            kc = rt_ceil_div(K, rt_ceil_div(K, kc));
        if (l2 > 0)
            nc = rt_max64(vl * nv, l2 / 4 / (kc * 4) / (vl * nv) * (vl * nv));
        int64_t outer = l3 > 0 ? l3 : l2;
        if (outer > 0)
            mc = rt_max64(mc, outer / 2 / (kc * 4));
    }
    mr = clamp64(mr, 1, M);
    g->mr = mr;
    g->nr = vl * nv;
    g->kc = clamp64(kc, rt_min64(16, K), rt_min64(RT_PERF_CPU_MAX_KC, K));
    g->mc = clamp64(rt_round_up(mc, mr), mr, rt_min64(rt_round_up(M, mr), rt_round_up(1024, mr)));
    g->nc = clamp64(rt_round_up(nc, g->nr), g->nr, rt_min64(rt_round_up(N, g->nr), 4096));
    // Enough work items for every core.
    int64_t units = dev && dev->units > 0 ? dev->units : 1;
    if (batch < 1)
        batch = 1;
    // Several cores on one GEMM: split the rows (each core packs only its rows of A, and all of
    // B) rather than the columns (each core packs all of A) when A is at least as large as B,
    // since A's packing is a transpose and B's a copy. Measured on 2 cores at 1024^3 (a harness
    // with the same micro-kernel): 284-299 GFLOP/s splitting columns, 301-314 splitting rows.
    // Only while a core keeps 256 rows or more: with many cores every one of them would pack
    // all of B for a sliver of A.
    if (batch == 1 && units > 1 && M >= N && rt_ceil_div(M, g->mc) < units) {
        int64_t mc_split = rt_round_up(rt_ceil_div(M, units), g->mr);
        if (mc_split >= 256)
            g->mc = mc_split;
    }
    while (batch * rt_ceil_div(M, g->mc) * rt_ceil_div(N, g->nc) < units && g->nc > g->nr)
        g->nc = rt_round_up(g->nc / 2, g->nr);
    while (batch * rt_ceil_div(M, g->mc) * rt_ceil_div(N, g->nc) < units && g->mc > g->mr)
        g->mc = rt_round_up(g->mc / 2, g->mr);
    // Row and column blocks of equal size, as many as balance the cores best: the cache rules
    // give the largest blocks, and M = 1024 cut at 824 leaves a 200-row block (on 2 cores an
    // 824 : 200 split of the work), 1031 columns cut at 352 leave 352 + 352 + 327 on 2 cores (or
    // cut at 736, 736 + 295; 0.86-0.95x oneDNN at 1021x1031x1033 against 1.01x with two row
    // blocks). Row block counts from the fewest up to one more per core, column block counts up
    // to GEMM_NC_TRIED more, each pair with its best runs (gemm_runs); the fewest rows, then the
    // fewest columns, within 2% of the least work on the busiest core wins.
    int64_t mc_max = g->mc, nc_max = g->nc, mt0 = rt_ceil_div(M, mc_max), steps = 0;
    int64_t b0 = rt_ceil_div(N, nc_max), last_mc = 0;
    // With 8 blocks per core or more the last round costs little: equal blocks, no search.
    bool search = batch * mt0 * b0 < 8 * units;
    double least = -1, loads[GEMM_BLOCKS_TRIED];
    int64_t mcs[GEMM_BLOCKS_TRIED], ncs[GEMM_BLOCKS_TRIED], ngs[GEMM_BLOCKS_TRIED], n_tried = 0;
    for (int64_t rows = mt0; rows <= mt0 + (search && batch == 1 ? units : 0); rows++) {
        int64_t height = clamp64(rt_round_up(rt_ceil_div(M, rows), g->mr), g->mr, mc_max);
        if (height == last_mc)
            continue;
        last_mc = height;
        int64_t last_nc = 0;
        for (int64_t blocks = b0; blocks <= b0 + (search ? GEMM_NC_TRIED : 0); blocks++) {
            int64_t width = clamp64(rt_round_up(rt_ceil_div(N, blocks), g->nr), g->nr, nc_max);
            if (width == last_nc || n_tried >= GEMM_BLOCKS_TRIED)
                continue;
            last_nc = width;
            g->mc = height;
            g->nc = width;
            ngs[n_tried] = gemm_runs(dev, batch, units, g, &loads[n_tried], &steps);
            mcs[n_tried] = height;
            ncs[n_tried] = width;
            least = least < 0 || loads[n_tried] < least ? loads[n_tried] : least;
            n_tried++;
        }
    }
    int32_t pick = 0;
    while (pick + 1 < n_tried && loads[pick] > 1.02 * least)
        pick++;
    g->mc = mcs[pick];
    g->nc = ncs[pick];
    g->ng = ngs[pick];
    int64_t rows = rt_ceil_div(M, g->mc);
    g->items = (g->a_batch ? batch : 1) * rows * g->ng;
    g->batch = batch;
    g->steps = steps;
}

// Bandwidth per core (GB/s) of the level a matrix of `bytes` is read from: the first level
// (from the top) whose capacity, counted for all the cores sharing it, holds it.
static double source_gbps(const rt_device *dev, double bytes, double chunk_bytes) {
    int64_t units = dev->units > 0 ? dev->units : 1;
    int32_t top = dev->n_levels - 1;
    for (int32_t l = top - 1; l >= 1; l--) {
        const rt_mem_level *lv = &dev->level[l];
        double cap = (double)lv->capacity_bytes;
        if (lv->scope == RT_MEM_SCOPE_UNIT)
            cap *= (double)units;
        if (cap > 0 && bytes <= cap * 0.5)
            return rt_hal_level_gbps(lv, chunk_bytes) / (double)units;
    }
    return rt_hal_level_gbps(&dev->level[0], chunk_bytes) / (double)units;
}

// Cycles of packing one block of `rows` x kcur elements of a matrix of `bytes` read with chunks
// of rows x kc: B rows contiguous along n are vector copies; A panels, and B panels of a B
// contiguous along k only (b_k_unit), read along k are loaded as vectors and interleaved by shuffles (one per vector) up to RT_PERF_CPU_MAX_INTERLEAVE rows,
// gathered row by row (the device's gather_cycles per element) when taller (on 16-lane vectors
// a k-contiguous B goes by 16 x 16 transposes instead: rt_perf_cpu_b_t16), and otherwise read
// one element per load across rows; either is bound by its load slots or by the bandwidth of
// the level its source lives in. A B read through a window (a convolution's y + r) is packed by
// masked loads or clamped row segments: the bounds test costs about one more pass over its
// vectors.
// With fetch non-NULL (B prefetched: rt_perf_cpu_gemm.b_prefetch) the block is read from L2,
// where the prefetch put it, and *fetch gets the cycles of bringing it there from its source,
// which overlap the previous block's micro-kernel calls.
static double pack_cycles(const rt_device *dev, const rt_perf_cpu_gemm *g, bool is_b, int64_t rows,
                          int64_t kcur, double ghz, double *fetch) {
    double ports = rt_perf_cpu_load_ports(dev);
    double vec_elems = (dev->lanes > 0 ? dev->lanes : 1);
    double bytes = is_b ? (g->b_bytes > 0 ? g->b_bytes : (double)g->K * (double)g->N * 4)
                        : (g->a_bytes > 0 ? g->a_bytes : (double)g->M * (double)g->K * 4);
    double gbps = source_gbps(dev, bytes, (double)rows * 4 * (double)g->kc);
    double e = (double)rt_round_up(rows, is_b ? g->nr : g->mr) * (double)kcur;
    double slots =
        is_b ? e / vec_elems / ports * (g->b_window ? 3 : 2) : e / ports + e / vec_elems / ports;
    bool k_unit = is_b ? g->b_k_unit : g->a_k_unit;
    int64_t w = is_b ? (g->b_sub > 0 ? g->b_sub : g->nr) : g->mr;
    if (is_b && rt_perf_cpu_b_t16(g->nr, dev->lanes, k_unit))
        slots = (double)(rt_round_up(rows, g->nr) / 16) * (double)rt_ceil_div(kcur, 16) *
                RT_PERF_CPU_T16_CYCLES;
    else if (k_unit)
        slots = w <= RT_PERF_CPU_MAX_INTERLEAVE
                    ? e / vec_elems / ports * 2 + e / vec_elems
                    : e * rt_hal_cpu_costs(dev).gather_cycles + e / vec_elems / ports;
    double bw = gbps > 0 ? e * 4 / gbps * ghz : 0;
    if (fetch) {
        *fetch = bw;
        int32_t l2 = dev->n_levels - 3;
        double l2_gbps = l2 >= 0 ? rt_hal_level_gbps(&dev->level[l2], (double)rows * 4) /
                                       (double)(dev->units > 0 ? dev->units : 1)
                                 : 0;
        bw = l2_gbps > 0 ? e * 4 / l2_gbps * ghz : 0;
    }
    return slots > bw ? slots : bw;
}

bool rt_perf_cpu_b_t16(int64_t nr, int64_t lanes, bool k_unit) {
    return k_unit && lanes == 16 && nr % 16 == 0;
}

double rt_perf_cpu_pack_cycles(const rt_device *dev, const rt_perf_cpu_gemm *g, bool is_b,
                               int64_t rows, int64_t kcur, double ghz) {
    return pack_cycles(dev, g, is_b, rows, kcur, ghz, NULL);
}

double rt_perf_cpu_stream_cycles_per_byte(const rt_device *dev, double total_bytes,
                                          double chunk_bytes, double ghz) {
    double gbps = source_gbps(dev, total_bytes, chunk_bytes);
    return gbps > 0 ? ghz / gbps : 0;
}

// Per-thread cost of the packed GEMM as the backend runs it: work item i is row block i % mt
// times the run of column blocks [(i / mt) * bpg, + bpg) (column blocks: the nc blocks of every
// batch entry, batch-major); per k block it packs A for the row block once, then for each column
// block packs B and makes its micro-kernel calls. Items go to the threads in contiguous chunks
// [n t / T, n (t + 1) / T) (hal-cpu.c's pool), so the busiest thread's sum is the time.
typedef struct gemm_costs {
    double a_pack[2][2];      // [edge row block][last k block]
    double b_pack[2][2];      // [edge column block][last k block]
    double b_fetch[2][2];     // prefetched B: cycles of its fetch (overlaps the calls), else 0
    double calls[2][2][2];    // [edge row][edge column][last k block]
    double c_cycles_per_byte; // cycles per byte of C moved from C's level, per core
} gemm_costs;

// Cycles of the work items in span s (and in *pack, of their packing). An item of row block
// height mcur over a run of column blocks, per k block (nk_full whole ones and the last, short
// one when k_last): packs A once, and per column block packs B and makes its micro-kernel calls;
// every k block then reads and writes its C region (mcur x the run's columns) again. Linear in
// the items and the column blocks they cover, so a span of any length costs O(1).
static double span_cycles(const rt_perf_cpu_gemm *g, const gemm_costs *c, const gemm_span *s,
                          int64_t m_rest, int64_t n_rest, int64_t nk_full, bool k_last,
                          double *pack) {
    double steps[2] = {(double)nk_full, k_last ? 1 : 0}, nk = steps[0] + steps[1];
    double total = 0, pk = 0;
    for (int32_t er = 0; er < 2; er++) {
        const int64_t blocks[2] = {s->full[er], s->edge[er]}, width[2] = {g->nc, n_rest};
        double mcur = (double)(er ? m_rest : g->mc), a = 0;
        for (int32_t kl = 0; kl < 2; kl++)
            a += steps[kl] * c->a_pack[er][kl];
        total += (double)s->items[er] * a;
        pk += (double)s->items[er] * a;
        for (int32_t ec = 0; ec < 2; ec++) {
            double b = 0, bp = 0;
            for (int32_t kl = 0; kl < 2; kl++) {
                double calls = c->calls[er][ec][kl], fetch = c->b_fetch[ec][kl];
                b += steps[kl] * (c->b_pack[ec][kl] + (fetch > calls ? fetch : calls));
                bp += steps[kl] * c->b_pack[ec][kl];
            }
            b += nk * 2.0 * mcur * (double)width[ec] * 4.0 * c->c_cycles_per_byte;
            total += (double)blocks[ec] * b;
            pk += (double)blocks[ec] * bp;
        }
    }
    *pack += pk;
    return total;
}

// Cycles of the items [i0, i1) of a triangular GEMM (g->tri), in the backend's order
// (rt_perf_tri_row_block): an item runs only the k blocks its row block's range meets, packing A
// (masked, each panel over its own k steps) and per column block B once per such block, over
// the block's part within the range; its row panels' calls run only the k steps of their rows'
// range (rt_perf_tri_sum over the panels), each call its fixed cost.
static double tri_cycles(const rt_perf_cpu_gemm *g, const gemm_costs *c, const rt_perf_ukernel *uk,
                         int64_t i0, int64_t i1, double *pack) {
    int64_t mt = rt_ceil_div(g->M, g->mc), ntl = rt_ceil_div(g->N, g->nc);
    int64_t ng = g->ng > 0 && g->ng <= ntl ? g->ng : ntl, bpg = rt_ceil_div(ntl, ng);
    int64_t nkb = rt_ceil_div(g->K, g->kc);
    const rt_perf_tri_range *r = &g->tri;
    double fixed = uk->call_cycles - (double)g->kc * uk->cycles_per_k, total = 0;
    for (int64_t i = i0; i < i1; i++) {
        int64_t rb = rt_perf_tri_row_block(r, i % mt, mt), r0 = rb * g->mc;
        int64_t mcur = rt_min64(g->mc, g->M - r0), lo, hi;
        int32_t er = mcur < g->mc;
        rt_perf_tri_rows_range(r, g->K, r0, r0 + mcur, &lo, &hi);
        int64_t kb0 = rt_min64(lo / g->kc, nkb - 1);
        int64_t kb1 = rt_max64(rt_ceil_div(hi, g->kc), kb0 + 1);
        int64_t pan = rt_ceil_div(mcur, g->mr);
        double steps = rt_perf_tri_sum(
            r->lo0 + r->lo1 * (r0 + (r->lo1 < 0 ? g->mr - 1 : 0)), r->lo1 * g->mr,
            r->hi0 + r->hi1 * (r0 + (r->hi1 >= 0 ? g->mr - 1 : 0)), r->hi1 * g->mr, g->K, pan);
        // Each k block packs B only over its part within [lo, hi) (rt_gemm_tri_kclamp): hi - lo
        // k steps over the item's blocks; A's panels only over their own k steps (steps), at
        // costs linear in them.
        double nk = (double)(kb1 - kb0), kf = (double)(hi - lo) / (double)g->kc;
        double a = steps / ((double)pan * (double)g->kc) * c->a_pack[er][0];
        // The item's column blocks [cb0, cb1): whole ones and at most one edge block (the last
        // of all), counted rather than walked (N may be huge).
        int64_t cb0 = (i / mt) * bpg, cb1 = rt_min64(ntl, cb0 + bpg);
        int64_t n_edge = g->N % g->nc && cb0 < cb1 && cb1 == ntl ? 1 : 0;
        const int64_t n_blocks[2] = {rt_max64(0, cb1 - cb0 - n_edge), n_edge};
        double cost = a, pk = a;
        for (int32_t ec = 0; ec < 2; ec++) {
            int64_t width = ec ? g->N % g->nc : g->nc;
            double cols = (double)rt_ceil_div(width, g->nr);
            double calls = cols * ((double)pan * nk * fixed + steps * uk->cycles_per_k);
            double bp = kf * c->b_pack[ec][0], fetch = kf * c->b_fetch[ec][0];
            double per = bp + (fetch > calls ? fetch : calls) +
                         nk * 2.0 * (double)mcur * (double)width * 4.0 * c->c_cycles_per_byte;
            cost += (double)n_blocks[ec] * per;
            pk += (double)n_blocks[ec] * bp;
        }
        total += cost;
        *pack += pk;
    }
    return total;
}

bool rt_perf_cpu_gemm_time(const rt_perf_model *m, const rt_perf_cpu_gemm *g, double *ns,
                           double *pack_ns, double *eff, const char **why) {
    const rt_device *dev = m->dev;
    double ghz = rt_perf_cpu_ghz(dev);
    *why = "";
    if (!(ghz > 0))
        return false; // no clock: the caller keeps the peak-based estimate
    if (g->rentry)
        return rt_perf_cpu_rentry_time(m, g, ns, pack_ns, eff);
    int64_t k_full = g->K / g->kc, k_last = g->K % g->kc;
    // The backend compiles the block it chose whatever the register file: one that does not
    // fit runs with spills, which the micro-kernel's step cost includes.
    rt_perf_ukernel uk, uk_last;
    (void)rt_perf_cpu_ukernel(dev, 4, g->mr, g->nr, g->kc, &uk);
    (void)rt_perf_cpu_ukernel(dev, 4, g->mr, g->nr, k_last > 0 ? k_last : g->kc, &uk_last);
    *eff = uk.eff;
    rt_perf_cpu_uk_rules ur;
    rt_perf_cpu_uk_rules_of(dev, &ur);
    int64_t mt = rt_ceil_div(g->M, g->mc), ntl = rt_ceil_div(g->N, g->nc);
    int64_t batch = g->batch > 0 ? g->batch : 1, nblk = gemm_nblk(g, batch, ntl);
    int64_t ng = g->ng > 0 && g->ng <= nblk ? g->ng : nblk;
    int64_t bpg = rt_ceil_div(nblk, ng);
    int64_t items = (g->a_batch ? batch : 1) * mt * rt_ceil_div(nblk, bpg);
    int64_t me = g->M % g->mc, ne = g->N % g->nc;
    // The backend prefetches the next B block only where an item has one (lower-cpu.c pf_next).
    bool pf_b = g->b_prefetch && (bpg > 1 || g->K > g->kc);
    gemm_costs c;
    for (int32_t e = 0; e < 2; e++)
        for (int32_t kl = 0; kl < 2; kl++) {
            int64_t kcur = kl ? (k_last > 0 ? k_last : g->kc) : g->kc;
            int64_t mcur = e && me ? me : g->mc, ncur = e && ne ? ne : g->nc;
            c.a_pack[e][kl] = pack_cycles(dev, g, false, mcur, kcur, ghz, NULL);
            c.b_fetch[e][kl] = 0;
            c.b_pack[e][kl] =
                pack_cycles(dev, g, true, ncur, kcur, ghz, pf_b ? &c.b_fetch[e][kl] : NULL);
            for (int32_t f = 0; f < 2; f++) {
                int64_t nc2 = f && ne ? ne : g->nc;
                double rows = (double)rt_ceil_div(mcur, g->mr),
                       cols = (double)rt_ceil_div(nc2, g->nr);
                // A partial tile (the last row or column panel) runs the full k loop on its
                // zero-padded panels, then goes to C through a buffer element by element, or
                // with masked vectors straight from the registers (uk_rules.masked_edge).
                double edges = (mcur % g->mr ? cols : 0) + (nc2 % g->nr ? rows : 0) -
                               (mcur % g->mr && nc2 % g->nr ? 1 : 0);
                double per_edge = ur.masked_edge ? (double)(g->mr * rt_ceil_div(g->nr, ur.lanes))
                                                 : (double)(g->mr * g->nr);
                c.calls[e][f][kl] = rows * cols * (kl ? uk_last.call_cycles : uk.call_cycles) +
                                    edges * per_edge * 2.0 / rt_perf_cpu_load_ports(dev);
            }
        }
    int64_t units = dev->units > 0 ? dev->units : 1;
    // C's round trips per k block: an item's C region (mcur x its run's columns) is read and
    // written once per k block, next to the packed A and B blocks. The share of it that fits a
    // cache level beside those blocks comes from there, the rest from the level below (a
    // gradual share, not a cliff: LRU keeps what fits). Its loads are prefetched, but its
    // lines still cross at that level's bandwidth share (measured: a kc too short for K costs
    // that many more round trips of C).
    double region = (double)g->mc * (double)g->nc * (double)bpg * 4.0;
    double blocks = ((double)g->mc + (double)g->nc * (double)bpg) * (double)g->kc * 4.0;
    double fitted = 0, cycles_per_byte = 0;
    for (int32_t l = dev->n_levels - 3; l >= 0; l--) {
        const rt_mem_level *lv = &dev->level[l];
        double cap = l > 0 ? (double)rt_perf_capacity_bytes(m, l) : region + blocks;
        if (l > 0 && lv->scope == RT_MEM_SCOPE_DEVICE)
            cap /= (double)units;
        double frac = l > 0 && lv->managed != RT_MEM_CACHE ? 0 : (cap - blocks) / region;
        frac = frac < fitted ? fitted : frac > 1 ? 1 : frac;
        double gbps = rt_hal_level_gbps(lv, (double)g->nc * 4.0) / (double)units;
        if (frac > fitted && gbps > 0)
            cycles_per_byte += (frac - fitted) * ghz / gbps;
        fitted = frac;
    }
    c.c_cycles_per_byte = cycles_per_byte;
    double worst = 0, worst_pack = 0;
    gemm_grid gr = grid_of(g, batch, ntl, nblk, bpg);
    for (int64_t t = 0; t < units; t++) {
        gemm_span sp = span_of(&gr, items * t / units, items * (t + 1) / units);
        double pack = 0;
        double cyc = g->tri.on
                         ? tri_cycles(g, &c, &uk, items * t / units, items * (t + 1) / units, &pack)
                         : span_cycles(g, &c, &sp, me, ne, k_full, k_last > 0, &pack);
        rt_perf_count_steps(m, g->tri.on ? items / units + 1 : 1);
        if (cyc > worst) {
            worst = cyc;
            worst_pack = pack;
        }
    }
    *ns = worst / ghz;
    *pack_ns = worst_pack / ghz;
    return true;
}

// ---------------------------------------------------------------------------------------------
// The general path: the statement's loop nest blocked by the rTiles
// ---------------------------------------------------------------------------------------------

int64_t rt_perf_member_tile(const rt_op *op, const rt_stmt *s, int32_t ax, int32_t v,
                            int64_t tile) {
    int64_t rem = tile < 1 ? 1 : tile;
    for (int32_t i = s->axes[ax].n_members - 1; i >= 0; i--) {
        int32_t mv = s->axes[ax].members[i];
        int64_t lo, hi;
        if (mv < 0 || mv >= s->n_vars || !s->vars[mv].lo || !s->vars[mv].hi ||
            !rt_expr_const_int(op, s->vars[mv].lo, &lo) ||
            !rt_expr_const_int(op, s->vars[mv].hi, &hi) || hi <= lo)
            return 0;
        int64_t t = rem < hi - lo ? rem : hi - lo;
        if (mv == v)
            return t;
        rem = t == hi - lo ? (rem / t > 1 ? rem / t : 1) : 1;
    }
    return 0;
}

// The model axis that statement var v is a member of, or -1.
static int32_t var_axis(const rt_perf_model *m, int32_t v) {
    const rt_stmt *s = &m->op->stmts[m->main_stmt];
    for (int32_t x = 0; x < s->n_axes && x < m->n_axes; x++)
        for (int32_t k = 0; k < s->axes[x].n_members; k++)
            if (s->axes[x].members[k] == v)
                return x;
    return -1;
}

// Is the nest one the loop model times: an output the statement does not read, and either no
// reduction or one the backend lowers in window form (codegen/lower-cpu.c rt_window_form): one
// to three dense reduction axes of at most 7 points, 49 in all, unrolled in the body of the
// vector loop along the output's innermost index and accumulated (+=)? *n_red gets the
// reduction axes, *points the window's points (1 without reduction).
static bool window_form(const rt_perf_model *m, int32_t x_var, int32_t *n_red, double *points) {
    const rt_stmt *s = &m->op->stmts[m->main_stmt];
    *n_red = 0;
    *points = 1;
    for (int32_t x = 0; x < m->n_axes; x++)
        if (m->axes[x].is_reduce) {
            ++*n_red;
            *points *= (double)m->axes[x].extent;
            if (m->axes[x].ragged || m->axes[x].extent > 7)
                return false;
        }
    const rt_perf_access *o = &m->access[m->n_access - 1];
    for (int32_t i = 0; i + 1 < m->n_access; i++)
        if (m->access[i].tensor == o->tensor)
            return false;
    return *n_red == 0 || (*n_red <= 3 && *points <= 49 && m->assign != RT_ASSIGN_SET &&
                           s->n_lhs >= 1 && s->lhs_vars[s->n_lhs - 1] == x_var);
}

// The window read the backend packs into scratch rows before the x loop (codegen/lower-cpu.c
// rt_win_pack_plan): the one input moving along x (the innermost var) at a stride a of 2-8
// along one dim, or 1 on a padded tensor, whose rows (its one other dim that moves with the
// window) also move with y (the var before x) at a coefficient ay >= 1 when y's loop is handed
// to the packing. Then y runs over the work item's whole tile, each row is packed once into a
// ring of scratch rows and shared by the output rows that overlap it: ay (y - 1) + span rows
// for y output rows of a window span rows tall; where every item has RT_WIN_Y_ROWS rows, the
// outputs may be recomputed (not '+=') and no other input is padded, each y iteration computes
// yu = RT_WIN_Y_ROWS output rows from span + ay (yu - 1) packed rows, each row's loads shared.
// Otherwise every output row packs all span rows.
typedef struct win_pack {
    const rt_perf_access *rd;
    int64_t a, ay, span, bspan; // x stride, y coefficient, window rows, window extent along x - 1
    int64_t yu;                 // output rows per y iteration
    double off_line;            // share of the points whose load starts off a packed row's lines
    bool has_row, handed, pad;
} win_pack;

static bool window_pack(const rt_perf_model *m, const rt_perf_cpu_loops *lp, win_pack *w) {
    int32_t nk = lp->n_vars, ax_x = var_axis(m, lp->var[nk - 1]);
    int32_t ax_y = nk >= 2 ? var_axis(m, lp->var[nk - 2]) : -1;
    int64_t lanes = m->dev->lanes > 1 ? m->dev->lanes : 1;
    memset(w, 0, sizeof *w);
    for (int32_t i = 0; i + 1 < m->n_access && ax_x >= 0; i++)
        if (access_uses(&m->access[i], ax_x)) {
            if (w->rd)
                return false;
            w->rd = &m->access[i];
        }
    const rt_perf_access *rd = w->rd;
    if (!rd || rd->elem_bytes != 4 || m->dtype != RT_DTYPE_F32 || !lp->tiled[nk - 1] ||
        lp->tile[nk - 1][m->top] <= lanes)
        return false;
    int32_t dx = -1, dr = -1;
    for (int32_t d = 0; d < rd->n_dims; d++) {
        bool on_x = rd->coef[d][ax_x] != 0, on_row = ax_y >= 0 && rd->coef[d][ax_y] != 0;
        for (int32_t x = 0; x < m->n_axes; x++)
            on_row = on_row || (m->axes[x].is_reduce && rd->coef[d][x] != 0);
        if (!rd->affine[d] && (on_x || on_row))
            return false;
        if (on_x && dx < 0)
            dx = d;
        else if (!on_x && on_row && dr < 0)
            dr = d;
        else if (on_x || on_row)
            return false;
    }
    w->a = dx >= 0 ? rd->coef[dx][ax_x] : 0;
    w->pad = m->op->tensors[rd->tensor].has_pad;
    w->has_row = dr >= 0;
    w->span = 1;
    if (w->a < 1 || w->a > 8 || (w->a == 1 && !w->pad) || (ax_y >= 0 && rd->coef[dx][ax_y] != 0))
        return false;
    // A point at offset o along x reads phase o % a of the packed row from element o / a: the
    // rows start on a line (codegen/lower-cpu.c rt_win_pack_row_elems), so its vector load
    // starts off one, and crosses into the next line, unless o / a is a multiple of the lanes.
    w->off_line = 0;
    for (int32_t x = 0; x < m->n_axes; x++)
        if (m->axes[x].is_reduce) {
            if (dr >= 0 && rd->coef[dx][x] != 0 && rd->coef[dr][x] != 0)
                return false;
            w->bspan += rd->coef[dx][x] * (m->axes[x].extent - 1);
            w->span += dr >= 0 ? rd->coef[dr][x] * (m->axes[x].extent - 1) : 0;
            if (rd->coef[dx][x] != 0) {
                int64_t off = 0;
                for (int64_t v = 0; v < m->axes[x].extent; v++)
                    off += (rd->coef[dx][x] * v / w->a) % lanes != 0;
                w->off_line = (double)off / (double)m->axes[x].extent;
            }
        }
    w->ay = dr >= 0 && ax_y >= 0 ? rd->coef[dr][ax_y] : 0;
    int64_t q = rt_win_pack_row_elems(lp->tile[nk - 1][m->top], w->a, w->bspan);
    w->yu = 1;
    if (w->ay >= 1 && lp->tiled[nk - 2] && m->assign != RT_ASSIGN_ADD) {
        int64_t t = lp->tile[nk - 2][m->block_level], rest = lp->extent[nk - 2] % t;
        bool other_pad = false;
        for (int32_t i = 0; i + 1 < m->n_access; i++)
            other_pad =
                other_pad || (&m->access[i] != rd && m->op->tensors[m->access[i].tensor].has_pad);
        if ((rest ? rest : t) >= RT_WIN_Y_ROWS && !other_pad)
            w->yu = RT_WIN_Y_ROWS;
    }
    int64_t ring = rt_win_pack_ring_rows(w->span, w->ay, w->yu);
    if (w->yu > 1 && ring * w->a * q > RT_WIN_PACK_ELEMS) {
        w->yu = 1;
        ring = rt_win_pack_ring_rows(w->span, w->ay, 1);
    }
    w->handed = w->ay >= 1 && ring * w->a * q <= RT_WIN_PACK_ELEMS;
    return w->handed || w->span * w->a * q <= RT_WIN_PACK_ELEMS;
}

// May the members mem[0..n) (a fused axis, outer first) be one flat index in access e of
// statement s (the output when e is NULL)? They must all be absent from it, or be its plain
// index arguments at consecutive positions whose dims after the first have exactly the members'
// extents (constant, not ragged), so that the members' part of the offset is the flat index
// times the last member's stride. rt_flat_expr checks the other arguments: a member anywhere
// else (inside an index expression, or as a value) fails.
static bool flat_in(const rt_op *op, const rt_stmt *s, const rt_expr *e, const int32_t *mem,
                    int32_t n, const int64_t *ext) {
    const rt_tensor *t = &op->tensors[e ? e->tensor : s->out];
    int32_t n_args = e ? e->n_args : s->n_lhs, first = -1, seen = 0;
    for (int32_t d = 0; d < n_args; d++) {
        const rt_expr *arg = e ? e->args[d] : NULL;
        int32_t v = e ? (arg->kind == RT_EXPR_INDEX ? arg->var : -1) : s->lhs_vars[d];
        int32_t i = 0;
        while (i < n && mem[i] != v)
            i++;
        if (i == n)
            continue;
        if (first < 0)
            first = d - i;
        int64_t de;
        if (d != first + i || i != seen++ || d >= t->n_dims || t->dims[d].ragged ||
            (i > 0 && (!rt_expr_const_int(op, t->dims[d].extent, &de) || de != ext[i])))
            return false;
    }
    return seen == 0 || (seen == n && !t->ragged);
}

// Every read of e (recursively) passes flat_in, and no member is used outside a read's plain
// index arguments.
static bool flat_expr(const rt_op *op, const rt_stmt *s, const rt_expr *e, const int32_t *mem,
                      int32_t n, const int64_t *ext) {
    if (!e)
        return true;
    if (e->kind == RT_EXPR_INDEX) {
        for (int32_t i = 0; i < n; i++)
            if (e->var == mem[i])
                return false;
        return true;
    }
    if (e->kind == RT_EXPR_READ && !flat_in(op, s, e, mem, n, ext))
        return false;
    for (int32_t i = 0; i < e->n_args; i++)
        if (e->kind != RT_EXPR_READ || e->args[i]->kind != RT_EXPR_INDEX)
            if (!flat_expr(op, s, e->args[i], mem, n, ext))
                return false;
    return true;
}

int32_t rt_perf_cpu_flat_axis(const rt_perf_model *m, const rt_stmt *s, rt_perf_flat *out) {
    const rt_op *op = m->op;
    memset(out, 0, sizeof *out);
    if (s->op != RT_ASSIGN_SET || s->n_loops < 2)
        return 0;
    for (int32_t v = 0; v < s->n_vars; v++)
        if (s->vars[v].is_reduce)
            return 0;
    int32_t last = s->loops[s->n_loops - 1], ax = -1;
    for (int32_t x = 0; x < s->n_axes && x < m->n_axes && ax < 0; x++)
        for (int32_t k = 0; k < s->axes[x].n_members; k++)
            if (s->axes[x].members[k] == last)
                ax = x;
    if (ax < 0 || m->axes[ax].ragged || s->axes[ax].n_members < 2)
        return 0;
    const rt_axis *x = &s->axes[ax];
    int32_t n = x->n_members;
    int64_t ext[RT_MAX_DIMS], total = 1;
    for (int32_t i = 0; i < n; i++) {
        int64_t lo, hi;
        int32_t v = x->members[i];
        if (s->loops[s->n_loops - n + i] != v || !s->vars[v].lo || !s->vars[v].hi ||
            !rt_expr_const_int(op, s->vars[v].lo, &lo) ||
            !rt_expr_const_int(op, s->vars[v].hi, &hi) || lo != 0 || hi < 1 ||
            __builtin_mul_overflow(total, hi, &total))
            return 0;
        ext[i] = hi;
    }
    if (!flat_in(op, s, NULL, x->members, n, ext) || !flat_expr(op, s, s->rhs, x->members, n, ext))
        return 0;
    out->n = n;
    out->axis = ax;
    memcpy(out->mem, x->members, (size_t)n * sizeof *out->mem);
    out->total = total;
    return n;
}

bool rt_perf_cpu_loop_plan(const rt_perf_model *m, const rt_rprog *p, rt_perf_cpu_loops *out) {
    memset(out, 0, sizeof *out);
    const rt_op *op = m->op;
    const rt_stmt *s = &op->stmts[m->main_stmt];
    int32_t bl = m->block_level, top = m->top, nk = 0, n_tiled = 0;
    if (bl < 0 || top >= RT_MAX_MEM_LEVELS || bl > top)
        return false;
    int64_t lanes = m->dev->lanes > 1 ? m->dev->lanes : 1;
    const rt_perf_flat *fl = &m->flat;
    for (int32_t i = 0; i < s->n_loops && nk < RT_MAX_DIMS * 2; i++) {
        int32_t v = s->loops[i];
        if (v < 0 || v >= s->n_vars)
            return false;
        if (s->vars[v].is_reduce || i >= s->n_loops - fl->n)
            continue;
        int32_t ax = -1;
        for (int32_t x = 0; x < s->n_axes && x < m->n_axes && ax < 0; x++)
            for (int32_t k = 0; k < s->axes[x].n_members; k++)
                if (s->axes[x].members[k] == v)
                    ax = x;
        int64_t lo = 0, hi = 0;
        out->var[nk] = v;
        out->lo[nk] = 0;
        out->tiled[nk] = ax >= 0 && !m->axes[ax].ragged && s->vars[v].lo && s->vars[v].hi &&
                         rt_expr_const_int(op, s->vars[v].lo, &lo) &&
                         rt_expr_const_int(op, s->vars[v].hi, &hi) && hi > lo;
        out->extent[nk] = out->tiled[nk] ? hi - lo : 0;
        out->lo[nk] = out->tiled[nk] ? lo : 0;
        int64_t up = out->extent[nk];
        for (int32_t lv = bl; lv <= top && out->tiled[nk]; lv++) {
            int64_t e = rt_perf_member_tile(op, s, ax, v, p->tile[lv].shape[ax]);
            out->tiled[nk] = e > 0;
            out->tile[nk][lv] = e < 1 ? 1 : e > up ? up : e;
            up = out->tile[nk][lv];
        }
        n_tiled += out->tiled[nk];
        nk++;
    }
    if (fl->n > 0 && nk < RT_MAX_DIMS * 2) {
        // The flat axis: its last member runs over the whole axis with the axis's tiles.
        out->var[nk] = fl->mem[fl->n - 1];
        out->tiled[nk] = true;
        out->extent[nk] = fl->total;
        for (int32_t lv = bl; lv <= top; lv++) {
            int64_t e = p->tile[lv].shape[fl->axis];
            int64_t up = lv > bl ? out->tile[nk][lv - 1] : fl->total;
            out->tile[nk][lv] = e < 1 ? 1 : e > up ? up : e;
        }
        n_tiled++;
        nk++;
    }
    if (n_tiled == 0)
        return false;
    // The innermost kept var runs in vector lanes: no tile below the register width.
    int32_t in = nk - 1;
    if (out->tiled[in])
        for (int32_t lv = bl + 1; lv <= top; lv++)
            if (out->tile[in][lv] < lanes)
                out->tile[in][lv] = out->tile[in][lv - 1] < lanes ? out->tile[in][lv - 1] : lanes;
    out->n_vars = nk;
    // A packed window read with y handed over: y runs over the work item's tile.
    int32_t n_red;
    double points;
    win_pack w;
    // The window form and its packing (the backend's rt_lower_window executes them as planned).
    out->window = window_form(m, out->var[nk - 1], &n_red, &points) && n_red > 0;
    out->win_yu = 1;
    if (out->window && nk >= 2 && window_pack(m, out, &w)) {
        out->win_pack = w.handed ? RT_PERF_CPU_WIN_PACK_ROWS : RT_PERF_CPU_WIN_PACK_X;
        out->win_yu = w.handed ? w.yu : 1;
    }
    if (out->win_pack == RT_PERF_CPU_WIN_PACK_ROWS && out->tiled[nk - 2])
        for (int32_t lv = bl + 1; lv <= top; lv++)
            out->tile[nk - 2][lv] = out->tile[nk - 2][bl];
    out->items = 1;
    for (int32_t i = 0; i < nk; i++) {
        if (out->tiled[i])
            out->items *= rt_ceil_div(out->extent[i], out->tile[i][bl]);
        if (out->items > ((int64_t)1 << 31)) // the backend's work item index is an int32
            return false;
    }
    return true;
}

// The tiles of one variable at a level: sizes with their counts (a tile of size b splits into
// b / t tiles of t and one of b % t at the next level: at most two sizes per level).
typedef struct tile_set {
    int32_t n;
    int64_t size[2 * RT_MAX_MEM_LEVELS];
    double count[2 * RT_MAX_MEM_LEVELS];
} tile_set;

static void tile_split(const tile_set *in, int64_t t, tile_set *out) {
    out->n = 0;
    for (int32_t i = 0; i < in->n; i++) {
        int64_t b = in->size[i], parts[2] = {t, b % t};
        double counts[2] = {(double)(b / t) * in->count[i], b % t ? in->count[i] : 0};
        for (int32_t k = 0; k < 2; k++) {
            if (counts[k] == 0 || parts[k] == 0)
                continue;
            int32_t j = 0;
            while (j < out->n && out->size[j] != parts[k])
                j++;
            if (j == out->n && out->n < 2 * RT_MAX_MEM_LEVELS) {
                out->size[j] = parts[k];
                out->count[j] = 0;
                out->n++;
            }
            if (j < out->n)
                out->count[j] += counts[k];
        }
    }
}

static double tile_total(const tile_set *s) {
    double n = 0;
    for (int32_t i = 0; i < s->n; i++)
        n += s->count[i];
    return n;
}

// Cycles of one run of the innermost vector loop over n elements at c_vec cycles per vector
// (and c_elem per element at the scalar end). A trip count known when compiled is unrolled into
// whole vectors (the tail in narrower ones); one known only at run time runs its main body in
// groups of RT_PERF_CPU_VLOOP_INTERLEAVE vectors, the remainder at half width, then scalar, and
// pays *entry = entry_cycles (the device's vloop_entry_cycles) for choosing between them.
static double vloop_cycles(int64_t n, bool constant, int64_t lanes, double c_vec, double c_elem,
                           double entry_cycles, double *entry) {
    *entry = 0;
    if (constant)
        return (double)(n / lanes) * c_vec + (n % lanes ? c_vec : 0) + RT_PERF_CPU_LOOP_CYCLES;
    int64_t group = lanes * RT_PERF_CPU_VLOOP_INTERLEAVE, half = lanes / 2 > 0 ? lanes / 2 : 1;
    int64_t rem = n % group;
    *entry = entry_cycles;
    return (double)(n / group * RT_PERF_CPU_VLOOP_INTERLEAVE + rem / half) * c_vec +
           (double)(rem % half) * c_elem;
}

// Cycles of packing w's rows over the whole nest: per row, the L1 access slots of the copy of its
// run (a load and a store per vector), with a row dim of one prefetch per line of the row further
// down (and one for a last line the run may reach into), and where a padded run leaves the
// extents of the guarded scalar copies (a load and a store each), or where a stride splits into
// phases the shuffles (one per vector, on the vector pipes) if they take longer, and the copy
// loops' steps; rows per point of the vars outside x (all but y when y is handed over: then
// ay (t - 1) + span rows per tile of t values of y). Measured on a Zen 4 core: 39 cycles per
// output row of a 5x5 stride-2 depthwise conv for its two rows of 83 (this gives 57; charging
// every row a vector loop's dispatch and the shuffles on top of the slots gave 123).
static double window_pack_cycles(const rt_perf_model *m, const rt_perf_cpu_loops *lp,
                                 const win_pack *w, const tile_set *ty, const tile_set *tx) {
    double ports = rt_perf_cpu_load_ports(m->dev), rows = 0, outer = 1, row_cycles = 0;
    double lanes = m->dev->lanes > 0 ? m->dev->lanes : 1;
    int32_t ix = lp->n_vars - 1;
    if (w->handed)
        for (int32_t j = 0; j < ty->n; j++)
            rows += ty->count[j] * (double)(w->ay * (ty->size[j] - 1) + w->span);
    else
        rows = (double)w->span;
    for (int32_t u = 0; u < ix; u++)
        if (!w->handed || u != ix - 1)
            outer *= (double)lp->extent[u];
    for (int32_t k = 0; k < tx->n; k++) {
        double len = (double)(w->a * (tx->size[k] - 1) + w->bspan + 1), vecs = ceil(len / lanes);
        double slots = 2.0 * vecs + (w->has_row ? vecs + 1 : 0) + (w->pad ? 2.0 * w->bspan : 0);
        double c = slots / ports;
        if (w->a > 1 && vecs > c)
            c = vecs;
        row_cycles += tx->count[k] * (c + 3 * RT_PERF_CPU_LOOP_CYCLES);
    }
    return outer * rows * row_cycles;
}

bool rt_perf_cpu_loop_time(const rt_perf_model *m, const rt_perf_cpu_loops *lp, double *ns,
                           double *serial_ns) {
    const rt_device *dev = m->dev;
    double ghz = rt_perf_cpu_ghz(dev);
    int32_t nk = lp->n_vars, bl = m->block_level, top = m->top;
    if (!(ghz > 0) || nk < 1 || m->n_fused > 0 || m->recursive)
        return false;
    for (int32_t i = 0; i < nk; i++)
        if (!lp->tiled[i])
            return false;
    // Reductions: only the window form (small constant windows unrolled in the vector loop
    // along the output's innermost index) is modeled.
    double window;
    int32_t n_red;
    if (!window_form(m, lp->var[nk - 1], &n_red, &window))
        return false;
    int64_t lanes = dev->lanes > 1 ? dev->lanes : 1;
    // A vector step loads every input that moves along the innermost variable (the others are
    // broadcast once outside the loop) and stores the output. The L1 access slots
    // (rt_perf_cpu_load_ports, from the L1 triad, which mixes loads and stores as these loops
    // do) take both; the store port bounds stores. In window form (codegen/lower-cpu.c
    // rt_lower_window) the x loop runs once with the window's points unrolled in its body into
    // accumulators held in registers: per vector step a read that moves with the window is
    // loaded at every point, one that does not (and a '+=' output) once, and every point is an
    // FMA (or add) on the FMA pipes. A load that starts off a 64-byte line crosses into the next
    // and takes two slots: a packed read's off_line share of them (the packed rows start on a
    // line), an unpacked one's every one (its rows need not). With yu output rows per y, a
    // packed row's loads serve every output row reading it: span + ay (yu - 1) rows of loads for
    // yu span rows of points. Measured on a Zen 4 core per output vector of a 5x5 stride-2
    // depthwise conv: 40 cycles one row per y (this gives 38.7), 28 two rows (27.4).
    int32_t ax_in = var_axis(m, lp->var[nk - 1]);
    win_pack w;
    bool packed = n_red > 0 && window_pack(m, lp, &w);
    double slots = 1.0 + (n_red > 0 && m->assign == RT_ASSIGN_ADD ? 1.0 : 0.0);
    for (int32_t i = 0; i + 1 < m->n_access; i++) {
        const rt_perf_access *acc = &m->access[i];
        if (ax_in >= 0 && !access_uses(acc, ax_in))
            continue;
        bool windowed = false;
        for (int32_t x = 0; x < m->n_axes && n_red > 0; x++)
            windowed = windowed || (m->axes[x].is_reduce && access_uses(acc, x));
        if (!windowed)
            slots += 1.0;
        else if (packed && acc == w.rd)
            slots += window * (1.0 + w.off_line) * (double)(w.span + w.ay * (w.yu - 1)) /
                     (double)(w.yu * w.span);
        else
            slots += window * 2.0;
    }
    double c_vec = slots / rt_perf_cpu_load_ports(dev);
    double store_ports = rt_hal_cpu_costs(dev).store_ports;
    if (c_vec < 1.0 / store_ports)
        c_vec = 1.0 / store_ports;
    double teus = dev->teus_per_unit > 0 ? dev->teus_per_unit : 1;
    if (n_red > 0 && window / teus > c_vec)
        c_vec = window / teus;
    // Elementwise: the expression's own instructions (an exp, a GELU's erf) on the vector pipes.
    if (n_red == 0 && m->main_expr_cycles > c_vec)
        c_vec = m->main_expr_cycles;
    double c_elem = c_vec + 1.0; // plus the scalar loop's own increment-compare-branch
    // Tiles of every variable at every level, and whether the innermost trip is a constant.
    tile_set ts[RT_MAX_DIMS * 2][RT_MAX_MEM_LEVELS];
    bool constant = true;
    for (int32_t i = 0; i < nk; i++) {
        tile_set whole = {1, {lp->extent[i]}, {1}};
        tile_split(&whole, lp->tile[i][bl], &ts[i][bl]);
        if (i == nk - 1)
            constant = lp->extent[i] % lp->tile[i][bl] == 0;
        for (int32_t lv = bl + 1; lv <= top; lv++) {
            if (lp->tile[i][lv] < lp->tile[i][lv - 1]) {
                tile_split(&ts[i][lv - 1], lp->tile[i][lv], &ts[i][lv]);
                if (i == nk - 1)
                    constant = constant && lp->tile[i][lv - 1] % lp->tile[i][lv] == 0;
            } else {
                ts[i][lv] = ts[i][lv - 1];
            }
        }
    }
    double cycles = 0, serial = 0;
    if (packed)
        cycles +=
            window_pack_cycles(m, lp, &w, nk >= 2 ? &ts[nk - 2][top] : NULL, &ts[nk - 1][top]);
    // Work items: the index decomposition, one division per variable with several blocks.
    double div = 0;
    for (int32_t i = 0; i < nk; i++)
        div += tile_total(&ts[i][bl]) > 1 ? 4.0 : 0.0;
    serial += (double)lp->items * (RT_PERF_CPU_ITEM_CYCLES + div);
    // Tile loops, outer levels first, variables in order within a level.
    for (int32_t lv = bl + 1; lv <= top; lv++)
        for (int32_t i = 0; i < nk; i++) {
            if (lp->tile[i][lv] >= lp->tile[i][lv - 1])
                continue;
            double it = tile_total(&ts[i][lv]);
            for (int32_t u = 0; u < nk; u++)
                if (u != i)
                    it *= tile_total(&ts[u][u < i ? lv : lv - 1]);
            cycles += it * RT_PERF_CPU_LOOP_CYCLES;
        }
    // Point loops of the outer variables (each over its register tile). A handed y loop of yu
    // rows per iteration runs ceil(t / yu) iterations over a tile of t rows, its last shifted
    // back to end at the tile's end: yu ceil(t / yu) rows computed (4 for 3, measured 37%
    // slower than items of 4 rows on a 3x3 depthwise conv).
    double outer_points = 1;
    for (int32_t i = 0; i + 1 < nk; i++) {
        double ext = (double)lp->extent[i];
        if (packed && w.handed && w.yu > 1 && i == nk - 2) {
            const tile_set *ty = &ts[i][top];
            ext = 0;
            for (int32_t j = 0; j < ty->n; j++)
                ext += ty->count[j] * (double)(w.yu * rt_ceil_div(ty->size[j], w.yu));
        }
        double it = ext * outer_points;
        for (int32_t u = i + 1; u < nk; u++)
            it *= tile_total(&ts[u][top]);
        cycles += it * RT_PERF_CPU_LOOP_CYCLES;
        outer_points *= ext;
    }
    // The innermost loop: once per point of the outer variables and register tile of its own.
    const tile_set *inner = &ts[nk - 1][top];
    double runs = 0, entries = 0;
    for (int32_t j = 0; j < inner->n; j++) {
        double entry;
        double one = vloop_cycles(inner->size[j], constant, lanes, c_vec, c_elem,
                                  rt_hal_cpu_costs(m->dev).vloop_entry_cycles, &entry);
        runs += inner->count[j] * one;
        entries += inner->count[j] * entry;
    }
    cycles += outer_points * runs;
    serial += outer_points * entries;
    // Items go to the cores in contiguous equal chunks.
    int64_t units = dev->units > 0 ? dev->units : 1;
    double share = (double)rt_ceil_div(lp->items, units) / (double)lp->items;
    *ns = cycles * share / ghz;
    *serial_ns = serial * share / ghz;
    return true;
}
