// cpu.c: the CPU side of the micro-performance model — the register micro-kernel, the packed
// GEMM program the CPU backend builds from an rProgram, and its time on the cores.
//
// cost.c calls in here for devices without a thread level. The micro-kernel's efficiency comes
// from its register block (loads per FMA against the load ports, FMA latency against the
// accumulators, register pressure); for a contraction the backend (codegen/lower-cpu.c) packs
// A and B panels per mc x nc block and kc step, so the time is packing + micro-kernel calls over
// the blocks a core gets (wave quantization over `units`). Every number comes from the device
// description: load ports from the L1 bandwidth per core and cycle, registers from the register
// level's capacity, bandwidth per level from its curve. No device is special-cased.
#include "perfmodel.h"

#include <math.h>
#include <string.h>

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

double rt_perf_cpu_load_ports(const rt_device *dev) {
    int32_t top = dev->n_levels - 1;
    double ghz = dev->clock_mhz / 1000.0;
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

int64_t rt_perf_cpu_vector_regs(const rt_device *dev) {
    int32_t top = dev->n_levels - 1;
    int64_t vec_bytes = (int64_t)(dev->lanes > 0 ? dev->lanes : 1) * 4;
    int64_t cap = top >= 0 ? dev->level[top].capacity_bytes : 0;
    return cap > 0 ? cap / vec_bytes : 16;
}

bool rt_perf_cpu_ukernel(const rt_device *dev, int32_t elem_bytes, int64_t mr, int64_t nr,
                         int64_t kc, rt_perf_ukernel *out) {
    memset(out, 0, sizeof *out);
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
    out->vector_regs = out->acc_vectors + nv + 1;
    double fma = (double)out->acc_vectors / teus;
    // Accumulators beyond the register file are spilled: a reload and a store every step.
    int64_t spilled = out->vector_regs - rt_perf_cpu_vector_regs(dev);
    if (spilled < 0)
        spilled = 0;
    if (spilled > out->acc_vectors)
        spilled = out->acc_vectors;
    double loads = (double)(mr + nv + 2 * spilled) / ports;
    double latency = (double)(dev->fma_latency_cycles > 0 ? dev->fma_latency_cycles : 0);
    out->cycles_per_k = fma;
    if (loads > out->cycles_per_k)
        out->cycles_per_k = loads;
    if (latency > out->cycles_per_k)
        out->cycles_per_k = latency;
    // One call: kc steps, then C (+)= acc (a load and a store per accumulator) and the loop and
    // edge-test overhead of entering the kernel.
    out->call_cycles = (double)kc * out->cycles_per_k + 2.0 * (double)out->acc_vectors / ports +
                       RT_PERF_CPU_CALL_CYCLES;
    out->eff = fma * (double)kc / out->call_cycles;
    return out->vector_regs <= rt_perf_cpu_vector_regs(dev);
}

// The model axis of a spatial axis that appears in exactly the given input and the output.
static bool gemm_axes(const rt_perf_model *m, int32_t *xm, int32_t *xn, int32_t *xk, int32_t *ia,
                      int32_t *ib) {
    if (m->n_access != 3 || m->n_axes != 3 || m->dtype != RT_DTYPE_F32 ||
        (m->assign != RT_ASSIGN_ADD_INIT && m->assign != RT_ASSIGN_ADD))
        return false;
    const rt_perf_access *o = &m->access[2];
    *xm = *xn = *xk = -1;
    for (int32_t x = 0; x < 3; x++) {
        if (m->axes[x].ragged && m->axes[x].dist.n > 1)
            return false;
        bool in[3] = {false, false, false};
        for (int32_t i = 0; i < 3; i++)
            for (int32_t d = 0; d < m->access[i].n_dims; d++)
                in[i] = in[i] || m->access[i].coef[d][x] != 0;
        if (m->axes[x].is_reduce) {
            if (!in[0] || !in[1] || in[2] || *xk >= 0)
                return false;
            *xk = x;
        } else if (in[2] && o->coef[o->n_dims - 1][x] == 1 && (in[0] != in[1]) && *xn < 0) {
            *xn = x;
            *ib = in[0] ? 0 : 1;
        } else if (in[2] && (in[0] != in[1]) && *xm < 0) {
            *xm = x;
            *ia = in[0] ? 0 : 1;
        } else {
            return false;
        }
    }
    return *xm >= 0 && *xn >= 0 && *xk >= 0 && *ia != *ib;
}

// The blocking rule of the packed GEMM, shared with codegen/lower-cpu.c (which calls this and
// rt_perf_cpu_gemm_view, so model and backend compile and predict the same blocks). g holds M,
// N, K and the rTile seeds in mr (register tile along m), nr (along n), kc (L1 tile along k), mc
// (L2 tile along m) and nc (the level below, along n); batch independent GEMMs share the cores.
void rt_perf_cpu_gemm_block(const rt_device *dev, int64_t batch, rt_perf_cpu_gemm *g) {
    int64_t M = g->M, N = g->N, K = g->K;
    int64_t mr = g->mr, nr = g->nr, kc = g->kc, mc = g->mc, nc = g->nc;
    // The register tile keeps the model's shape where it fits the vector registers, widened to
    // two vectors (B loads amortized over mr broadcasts) when N allows.
    int64_t nv = clamp64(rt_ceil_div(nr, 16), 2, 4);
    nv = rt_max64(1, rt_min64(nv, rt_ceil_div(N, 16)));
    mr = clamp64(mr, rt_ceil_div(12, nv), 28 / nv);
    // Cache blocking (BLIS analytical rules): the kc x nr B micro-panel fills two thirds of L1
    // (the rest holds the streamed A micro-panel and the C lines) and the mc x kc A block half
    // of L2; rTiles smaller than that only add packing overhead. Measured on a 48 KiB L1:
    // kc = 256 beats kc = 176 by 5-8% at 1024^3, since C is revisited K / kc times.
    if (dev && dev->n_levels >= 3) {
        int32_t t = dev->n_levels - 1;
        int64_t l1 = dev->level[t - 1].capacity_bytes, l2 = dev->level[t - 2].capacity_bytes;
        if (l1 > 0)
            kc = rt_max64(kc, l1 * 2 / 3 / (16 * nv * 4) / 16 * 16);
        if (l2 > 0 && dev->n_levels >= 4)
            mc = rt_max64(mc, l2 / 2 / (rt_max64(kc, 1) * 4));
    }
    mr = clamp64(mr, 1, M);
    g->mr = mr;
    g->nr = 16 * nv;
    g->kc = clamp64(kc, rt_min64(16, K), rt_min64(1024, K));
    g->mc = clamp64(rt_round_up(mc, mr), mr, rt_min64(rt_round_up(M, mr), rt_round_up(1024, mr)));
    g->nc = clamp64(rt_round_up(nc, g->nr), g->nr, rt_min64(rt_round_up(N, g->nr), 4096));
    // Enough work items for every core.
    int64_t units = dev && dev->units > 0 ? dev->units : 1;
    if (batch < 1)
        batch = 1;
    while (batch * rt_ceil_div(M, g->mc) * rt_ceil_div(N, g->nc) < units && g->nc > g->nr)
        g->nc = rt_round_up(g->nc / 2, g->nr);
    while (batch * rt_ceil_div(M, g->mc) * rt_ceil_div(N, g->nc) < units && g->mc > g->mr)
        g->mc = rt_round_up(g->mc / 2, g->mr);
    // A work item is a row block times a run of nc blocks: A is packed once per (mc, kc) and
    // reused across the run. The n blocks are split into the fewest runs (of equal length) that
    // give every core an item and lose at most a fifth of the cores to the last round.
    int64_t rows = batch * rt_ceil_div(M, g->mc), ntl = rt_ceil_div(N, g->nc);
    int64_t ng = 1;
    while (ng < ntl &&
           (rows * ng < units || 5 * rt_ceil_div(rows * ng, units) * units > 6 * rows * ng))
        ng++;
    g->ng = rt_ceil_div(ntl, rt_ceil_div(ntl, ng));
    g->items = rows * g->ng;
}

// The packed GEMM codegen/lower-cpu.c compiles for p: the rTiles give the seeds (register tile
// -> mr x nr, L1 -> kc, L2 -> mc, the level below -> nc), rt_perf_cpu_gemm_block the blocking.
bool rt_perf_cpu_gemm_view(const rt_perf_model *m, const rt_rprog *p, rt_perf_cpu_gemm *g) {
    memset(g, 0, sizeof *g);
    if (m->thread_level >= 0 ||
        !gemm_axes(m, &g->axis_m, &g->axis_n, &g->axis_k, &g->in_a, &g->in_b))
        return false;
    g->M = m->axes[g->axis_m].extent;
    g->N = m->axes[g->axis_n].extent;
    g->K = m->axes[g->axis_k].extent;
    int32_t top = m->top;
    g->mr = p->tile[top].shape[g->axis_m];
    g->nr = p->tile[top].shape[g->axis_n];
    g->kc = top >= 1 ? p->tile[top - 1].shape[g->axis_k] : 256;
    g->mc = top >= 2 ? p->tile[top - 2].shape[g->axis_m] : 96;
    g->nc = top >= 3 ? p->tile[top - 3].shape[g->axis_n] : 1024;
    rt_perf_cpu_gemm_block(m->dev, 1, g);
    return true;
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

// Cycles of one mcur x ncur block (all K) on one core, with the A pack of its row block (in
// *pack_a_out: a work item packs it once for its whole run of nc blocks) and all its packing.
static double block_cycles(const rt_perf_model *m, const rt_perf_cpu_gemm *g, int64_t mcur,
                           int64_t ncur, const rt_perf_ukernel *uk, const rt_perf_ukernel *uk_last,
                           int64_t k_full, int64_t k_last, double ghz, double *pack_out,
                           double *pack_a_out) {
    const rt_device *dev = m->dev;
    double ports = rt_perf_cpu_load_ports(dev);
    double vec_elems = (dev->lanes > 0 ? dev->lanes : 1);
    double a_bytes = (double)g->M * (double)g->K * 4, b_bytes = (double)g->K * (double)g->N * 4;
    // Packing: B rows are contiguous along n (vector copies); A panels are gathered one element
    // per load across rows. Either is bound by its load slots or by the bandwidth of the level
    // its source lives in.
    double b_gbps = source_gbps(dev, b_bytes, (double)ncur * 4 * (double)g->kc);
    double a_gbps = source_gbps(dev, a_bytes, (double)mcur * 4 * (double)g->kc);
    double pack = 0, pack_a = 0,
           calls = (double)rt_ceil_div(mcur, g->mr) * (double)rt_ceil_div(ncur, g->nr);
    double kernel = 0;
    for (int32_t last = 0; last < 2; last++) {
        int64_t kcur = last ? k_last : g->kc;
        int64_t steps = last ? (k_last > 0 ? 1 : 0) : k_full;
        if (steps == 0 || kcur <= 0)
            continue;
        double eb = (double)rt_round_up(ncur, g->nr) * (double)kcur;
        double ea = (double)rt_round_up(mcur, g->mr) * (double)kcur;
        double tb = eb / vec_elems / ports * 2;
        double tbw = b_gbps > 0 ? eb * 4 / b_gbps * ghz : 0;
        double ta = ea / ports + ea / vec_elems / ports;
        double taw = a_gbps > 0 ? ea * 4 / a_gbps * ghz : 0;
        pack += (double)steps * ((tb > tbw ? tb : tbw) + (ta > taw ? ta : taw));
        pack_a += (double)steps * (ta > taw ? ta : taw);
        kernel += (double)steps * calls * (last ? uk_last->call_cycles : uk->call_cycles);
    }
    *pack_out = pack;
    *pack_a_out = pack_a;
    return pack + kernel;
}

bool rt_perf_cpu_gemm_time(const rt_perf_model *m, const rt_perf_cpu_gemm *g, double *ns,
                           double *pack_ns, double *eff, const char **why) {
    const rt_device *dev = m->dev;
    double ghz = dev->clock_mhz > 0 ? dev->clock_mhz / 1000.0 : 0;
    *why = "";
    if (!(ghz > 0))
        return false; // no clock: the caller keeps the peak-based estimate
    int64_t k_full = g->K / g->kc, k_last = g->K % g->kc;
    // The backend compiles the block it chose whatever the register file: one that does not
    // fit runs with spills, which the micro-kernel's step cost includes.
    rt_perf_ukernel uk, uk_last;
    (void)rt_perf_cpu_ukernel(dev, 4, g->mr, g->nr, g->kc, &uk);
    (void)rt_perf_cpu_ukernel(dev, 4, g->mr, g->nr, k_last > 0 ? k_last : g->kc, &uk_last);
    *eff = uk.eff;
    // Blocks: full and edge ones along m and n. A work item is a row block times a run of
    // ntl / ng nc blocks; it packs A once per k block for the whole run.
    int64_t mb = g->M / g->mc, nb = g->N / g->nc;
    int64_t me = g->M % g->mc, ne = g->N % g->nc;
    double ng = (double)(g->ng > 0 ? g->ng : rt_ceil_div(g->N, g->nc));
    double total = 0, pack_total = 0, biggest = 0;
    for (int32_t i = 0; i < 2; i++) {
        int64_t rows = i ? (me > 0) : mb;
        if (rows == 0)
            continue;
        double row = 0, row_pack = 0, pa = 0;
        for (int32_t j = 0; j < 2; j++) {
            int64_t cnt = j ? (ne > 0) : nb;
            if (cnt == 0)
                continue;
            double pk;
            double c = block_cycles(m, g, i ? me : g->mc, j ? ne : g->nc, &uk, &uk_last, k_full,
                                    k_last, ghz, &pk, &pa);
            row += (double)cnt * (c - pa);
            row_pack += (double)cnt * (pk - pa);
        }
        row += ng * pa;
        row_pack += ng * pa;
        total += (double)rows * row;
        pack_total += (double)rows * row_pack;
        if (row / ng > biggest)
            biggest = row / ng;
    }
    // Items go to the cores in equal counts: the busiest core does ceil(items / units) of them
    // (Roller's wave quantization with max = units), at the average item's cost.
    int64_t units = dev->units > 0 ? dev->units : 1;
    double per_item = total / (double)g->items;
    double rounds = (double)rt_ceil_div(g->items, units);
    double core = rounds * per_item;
    if (core < biggest)
        core = biggest;
    *ns = core / ghz;
    *pack_ns = pack_total / (double)g->items * rounds / ghz;
    return true;
}
