// cost.c: the micro-performance model of one rProgram (Roller §3.3, pipeline view of §3.2).
//
// Given the tile at every level, it derives the launch configuration (threads per block from
// the block and thread tiles, blocks from the scale-out level, concurrent blocks per unit from
// registers, threads and unit-scoped explicit memory) and predicts time: per level traffic /
// (bandwidth of the source level, interpolated on its curve, times the share of units in use
// with wave quantization real / (max * ceil(real / max))), compute from the device peak for the
// data type, and the rProgram's time is its bottleneck stage plus launch overhead (plus, with
// explicitly staged levels, the other stages divided by the blocks resident on a unit). On a
// CPU the compute stage is the code the backend compiles: a contraction's packed GEMM (cpu.c),
// or the loop nest blocked by the rTiles with its instruction costs (and the row packing of a
// window read); an operator small enough to stay in the last-level cache between runs
// (rt_perf_cpu_warm) takes its compulsory traffic from there instead of DRAM.
#include "perfmodel.h"
#include "gpu-plan.h"

#include <math.h>
#include <string.h>

double rt_perf_compute_ns(const rt_perf_model *m, double flops, double eff) {
    if (eff <= 0)
        eff = 1e-9;
    return flops / (m->peak_gflops * eff); // GFLOP/s == flop/ns
}

// Global bandwidth of a GPU at bytes_per_unit in flight on each unit, on the level's curve
// (rt_hal_level_gbps); below its first point the bandwidth falls in proportion (Little's law:
// bandwidth = bytes in flight / latency).
static double gpu_inflight_gbps(const rt_mem_level *lvl, double bytes_per_unit) {
    const rt_curve_point *c0 = &lvl->curve[0];
    if (bytes_per_unit < (double)c0->bytes)
        return c0->gbps * bytes_per_unit / (double)c0->bytes;
    return rt_hal_level_gbps(lvl, bytes_per_unit);
}

// A GPU whose global level has rtcalib's curve (bandwidth by bytes in flight per unit): global
// traffic moves at the curve's value for the bytes the resident blocks of p keep in flight on a
// unit (Little's law), not at the peak; 0 where that does not apply. A softmax of 1024 rows on 8
// blocks of 128 threads, one float in flight per thread, measured 515 us on an H200 where the
// peak had predicted 29.
static double gpu_inflight_bytes(const rt_perf_model *m, const rt_device *dev, const rt_rprog *p,
                                 int64_t bpu, int64_t units) {
    if (dev->devclass == RT_DEVCLASS_CPU || m->thread_level < 0 || dev->level[0].n_curve <= 0)
        return 0;
    int32_t eb = m->n_access > 0 ? m->access[0].elem_bytes : 4;
    int64_t resident = rt_min64(bpu, rt_ceil_div(p->blocks, units));
    bool reduces = false;
    for (int32_t x = 0; x < m->n_axes; x++)
        reduces = reduces || m->axes[x].is_reduce;
    return rt_gpu_plan_main_inflight_bytes(p->gpu, m->main_stmt, eb, reduces) * (double)resident;
}

// Elements between the addresses of neighbours along axis x in access acc (its row-major
// storage); *irregular when a dim that is not affine involves x.
static double gpu_axis_stride(const rt_perf_access *acc, int32_t x, bool *irregular) {
    double stride = 0, inner = 1;
    for (int32_t d = acc->n_dims - 1; d >= 0; d--) {
        if (acc->coef[d][x] != 0) {
            *irregular = *irregular || !acc->affine[d];
            stride += (double)acc->coef[d][x] * inner;
        }
        inner *= acc->dim_extent[d] > 0 ? (double)acc->dim_extent[d] : 1;
    }
    return stride;
}

// A regtile phase (gpu-plan.h) has no shared memory: every register-tile element is a global
// load instruction, served by the unit's L1 (on NVIDIA the same SRAM as shared memory, the
// device file's level 1) in sectors of the global level's transaction size. The threads of a
// block run along its axes strided (thread t's element j at t + j * threads), the last spatial
// axis with more than one thread fastest, so a warp's lanes walk that axis, then the one
// before it. Per read: sectors per warp load against the 32 lanes' useful bytes, at least 1
// (the L1 returns one 128-byte wavefront per clock, a broadcast no faster); *l1_factor is
// their mean weighted by the register data tile. *issue_share is the FMAs' share of the issue
// slots per register-tile iteration against one load per element of the inputs' data tiles,
// and for a read whose index is a window (two axes in one dim, y + r - 1: it may leave the
// tensor) the bounds test the kernel runs before it: two compares per window dim and a select.
// A conv3x3 of 32x28x28 on one H100 block measured 744 us with lanes down y (every lane its
// own sector) and 241 us with lanes along x, where shared-memory pricing had said 62 for both.
static void gpu_regtile_reads(const rt_perf_model *m, const rt_rprog *p, double *l1_factor,
                              double *issue_share) {
    const rt_device *dev = m->dev;
    const rt_rtile *blk = &p->tile[m->block_level], *th = &p->tile[m->thread_level];
    int32_t fast = -1, next = -1;
    for (int32_t x = m->n_axes - 1; x >= 0; x--) {
        if (m->axes[x].is_reduce || th->shape[x] < 1 || blk->shape[x] / th->shape[x] <= 1)
            continue;
        if (fast < 0)
            fast = x;
        else if (next < 0)
            next = x;
    }
    const double warp = dev->lanes > 0 ? (double)dev->lanes : 32;
    double sector = dev->level[0].transaction_bytes > 0 ? dev->level[0].transaction_bytes : 32;
    double fma = 1, loads = 0, wsum = 0, fsum = 0;
    for (int32_t x = 0; x < m->n_axes; x++)
        fma *= (double)p->tile[m->top].shape[x];
    for (int32_t i = 0; i < m->n_access; i++) {
        const rt_perf_access *acc = &m->access[i];
        double elems = 1;
        for (int32_t d = 0; d < acc->n_dims; d++)
            elems *= (double)p->tile[m->top].data[i][d];
        double factor = 1;
        if (!acc->is_output && fast >= 0) {
            double nt = (double)(blk->shape[fast] / th->shape[fast]);
            double lanes = nt < warp ? nt : warp;
            bool irr = false;
            double st = gpu_axis_stride(acc, fast, &irr);
            double eb = acc->elem_bytes > 0 ? acc->elem_bytes : 4;
            double sec = st == 0 ? 1 : irr ? lanes : ceil(lanes * st * eb / sector);
            sec = sec > lanes ? lanes : sec;
            double groups = ceil(warp / lanes);
            if (next >= 0) {
                double nn = (double)(blk->shape[next] / th->shape[next]);
                groups = groups > nn ? nn : groups;
                bool irr2 = false;
                if (gpu_axis_stride(acc, next, &irr2) == 0 && !irr2)
                    groups = 1; // the read does not move along the next axis: same sectors
            }
            factor = sec * groups * sector / (warp * eb);
            factor = factor < 1 ? 1 : factor;
            int32_t windows = 0;
            for (int32_t d = 0; d < acc->n_dims; d++) {
                int32_t terms = 0;
                for (int32_t x = 0; x < m->n_axes; x++)
                    terms += acc->coef[d][x] != 0;
                windows += acc->affine[d] && terms > 1;
            }
            loads += elems * (1 + (windows > 0 ? 2.0 * windows + 1 : 0));
        }
        wsum += elems;
        fsum += elems * factor;
    }
    *l1_factor = wsum > 0 ? fsum / wsum : 1;
    *issue_share = fma / (fma + loads);
}

static int64_t ceil_pos(double v) {
    int64_t r = (int64_t)ceil(v - 1e-9);
    return r < 1 ? 1 : r;
}

// Bytes of the operator's tensors (each once, at its storage extent) and of its fused statements.
static double op_bytes(const rt_perf_model *m) {
    double bytes = m->extra_dram_bytes;
    for (int32_t i = 0; i < m->n_access; i++) {
        const rt_perf_access *acc = &m->access[i];
        bool seen = acc->local; // a row in L1 scratch (model_local)
        for (int32_t j = 0; j < i && !seen; j++)
            seen = m->access[j].tensor == acc->tensor;
        double b = acc->elem_bytes;
        for (int32_t d = 0; d < acc->n_dims && !seen; d++)
            b *= (double)acc->dim_extent[d];
        bytes += seen ? 0 : b;
    }
    return bytes;
}

bool rt_perf_cpu_warm(const rt_perf_model *m) {
    const rt_device *dev = m->dev;
    return m->thread_level < 0 && dev->n_levels > 2 && dev->level[1].managed == RT_MEM_CACHE &&
           dev->level[1].capacity_bytes > 0 &&
           op_bytes(m) <= 0.5 * (double)dev->level[1].capacity_bytes;
}

// rt_perf_cpu_l2_share (perfmodel.h): a static schedule gives each core the same work every run,
// so its part stays where it was.
// On the 2-core Intel VM attention x V over a batch of short sentences (about 2 MB) ran at
// 1.9-2.1x the last-level cache's measured bandwidth on 1 and 2 threads, where the L3 roof
// bound every candidate alike.
double rt_perf_cpu_l2_share(const rt_perf_model *m) {
    const rt_device *dev = m->dev;
    if (dev->n_levels < 4 || dev->level[2].managed != RT_MEM_CACHE ||
        dev->level[3].managed != RT_MEM_CACHE || // level 2 is not the L1
        dev->level[2].scope != RT_MEM_SCOPE_UNIT || dev->level[2].capacity_bytes <= 0)
        return 0;
    double bytes = op_bytes(m);
    double held =
        0.5 * (double)dev->level[2].capacity_bytes * (double)(dev->units > 0 ? dev->units : 1);
    return bytes > held ? held / bytes : 1.0;
}

double rt_perf_cpu_roof_gbps(const rt_perf_model *m, double bytes, int64_t units, int32_t *level) {
    const rt_device *dev = m->dev;
    double per_unit = bytes / (double)units;
    double gbps = rt_hal_level_gbps(&dev->level[m->warm ? 1 : 0], per_unit);
    double l2_share = m->warm ? m->l2_share : 0;
    double l2_gbps = l2_share > 0 ? rt_hal_level_gbps(&dev->level[2], per_unit) : 0;
    if (l2_gbps > 0 && gbps > 0)
        gbps = 1.0 / (l2_share / l2_gbps + (1.0 - l2_share) / gbps);
    *level = l2_gbps > 0 && l2_share >= 0.5 ? 2 : m->warm ? 1 : 0;
    return gbps;
}

// CPU: the vector lanes the register block's innermost output extent fills, and for a reduction
// the register block as a micro-kernel (loads per FMA against the load ports, FMA latency
// against the accumulators, the vector registers it needs): scales *eff; false (with why) when
// the block needs more vector registers than the device has.
static bool cpu_reg_eff(const rt_perf_model *m, rt_rprog *p, double *eff_io, const char **why) {
    const rt_device *dev = m->dev;
    const rt_perf_access *o = &m->access[m->n_access - 1];
    const rt_rtile *tt = &p->tile[m->top];
    int32_t lanes = dev->lanes > 0 ? dev->lanes : 1;
    double eff = *eff_io;
    int64_t inner = tt->data[m->n_access - 1][o->n_dims - 1];
    eff *= (double)inner / (double)rt_round_up(inner, lanes);
    bool has_red = false;
    for (int32_t x = 0; x < m->n_axes; x++)
        has_red = has_red || m->axes[x].is_reduce;
    p->reg_block_elems = 1;
    for (int32_t d = 0; d < o->n_dims; d++)
        p->reg_block_elems *= tt->data[m->n_access - 1][d];
    if (has_red) {
        // The register block as a micro-kernel: loads per FMA against the load ports, FMA
        // latency against the accumulators, and the vector registers it needs.
        int64_t rows = 1;
        for (int32_t d = 0; d + 1 < o->n_dims; d++)
            rows *= tt->data[m->n_access - 1][d];
        rt_perf_ukernel uk;
        if (!rt_perf_cpu_ukernel(dev, o->elem_bytes, rows, inner, 1, &uk)) {
            *why = "register block exceeds the vector registers";
            return false;
        }
        eff *= ((double)uk.acc_vectors / (dev->teus_per_unit > 0 ? dev->teus_per_unit : 1)) /
               uk.cycles_per_k;
    }
    *eff_io = eff;
    return true;
}

// CPU: the time of the plan (rt_perf_cpu_plan, made here once per rProgram) on the cores, where
// it exceeds the roofline's compute time: the blocked loop nest's instructions, the fused
// statements' vector instructions, or the packed GEMM's packing and micro-kernel calls. Raises
// p->compute_ns and *worst (the binding time, p->bottleneck with it); *serial_ns gets the loop
// nest's serial part. False (with why) when the packed GEMM does not fit.
static bool cpu_price_plan(const rt_perf_model *m, rt_rprog *p, int64_t units, double *worst,
                           double *serial_ns, const char **why) {
    const rt_device *dev = m->dev;
    // The CPU's general path: the loop nest the backend blocks by these rTiles costs its cores
    // instructions (work items, loop control, vectors with their tails) that a memory-bound
    // roofline does not see; the larger of the two binds.
    // The plan (made here, once per rProgram) is what the backend compiles and what is priced.
    rt_perf_cpu_plan_make(m, p, &p->cpu);
    const rt_perf_cpu_plan *pl = &p->cpu;
    double loop_ns;
    if (m->thread_level < 0 && pl->loops_tiled &&
        rt_perf_cpu_loop_time(m, &pl->loops, &loop_ns, serial_ns) && loop_ns > p->compute_ns)
        p->compute_ns = loop_ns;
    // Fused statements on a CPU (softmax, normalizations): their vector instructions, which the
    // flop count of a transcendental function understates more than tenfold (an exp is 14).
    double ghz = m->thread_level < 0 ? rt_perf_cpu_ghz(dev) : 0;
    if (ghz > 0 && m->n_fused > 0) {
        double vec_ns = (m->main_vector_cycles + m->fused_vector_cycles) / (double)units / ghz;
        p->compute_ns = vec_ns > p->compute_ns ? vec_ns : p->compute_ns;
    }
    if (p->compute_ns >= *worst) {
        *worst = p->compute_ns;
        p->bottleneck = -1;
    }
    // A contraction on a CPU runs as the backend's packed GEMM: its time is the busiest core's
    // packing and micro-kernel calls, bounded below by reading the operands once from DRAM.
    if (pl->kind == RT_PERF_CPU_PLAN_GEMM) {
        const rt_perf_cpu_gemm g = pl->gemm;
        double core_ns, pack_ns, uk_eff;
        const char *gwhy;
        if (rt_perf_cpu_gemm_time(m, &g, &core_ns, &pack_ns, &uk_eff, &gwhy)) {
            double bytes = g.a_bytes + g.b_bytes + 2.0 * g.c_bytes + m->extra_dram_bytes;
            int32_t level;
            double gbps = rt_perf_cpu_roof_gbps(m, bytes, units, &level);
            double dram_ns = gbps > 0 ? bytes / gbps : 0;
            // Fused prologue/epilogue statements run as their own loop nests after it.
            p->compute_ns =
                core_ns + (ghz > 0 ? m->fused_vector_cycles / (double)units / ghz
                                   : rt_perf_compute_ns(m, m->extra_flops, p->wave_eff));
            *worst = p->compute_ns;
            p->bottleneck = -1;
            if (dram_ns > *worst) { // where the operands come from: L3 (and L2) when warm
                *worst = dram_ns;
                p->bottleneck = level;
                p->bound_bytes = bytes;
                p->bound_gbps = gbps;
            }
            p->wave_eff = (double)g.items / (double)(units * rt_ceil_div(g.items, units));
        } else if (gwhy[0]) {
            *why = gwhy;
            return false;
        }
    }
    return true;
}

// Nesting and capacity: each level's tile is a multiple of the one above it (toward the
// registers) and fits the level; fills the data tiles and footprints. False (with why) otherwise.
static bool nest_and_fit(const rt_perf_model *m, rt_rprog *p, const char **why) {
    int32_t top = m->top;
    for (int32_t l = 1; l <= top; l++) {
        rt_rtile *t = &p->tile[l];
        t->level = l;
        if (l < top)
            for (int32_t x = 0; x < m->n_axes; x++)
                if (p->tile[l + 1].shape[x] < 1 || t->shape[x] % p->tile[l + 1].shape[x] != 0) {
                    *why = "tile does not nest the tile of the level above";
                    return false;
                }
        const int64_t *reader = l < top ? p->tile[l + 1].shape : NULL;
        rt_perf_data_tiles(m, t->shape, NULL, -1, t->data);
        t->footprint_bytes = rt_perf_footprint_of(m, l, (const int64_t(*)[RT_MAX_DIMS])t->data,
                                                  reader, t->pad_elems);
        if (t->footprint_bytes > rt_perf_capacity_bytes(m, l)) {
            *why = "footprint exceeds the level's capacity";
            return false;
        }
    }
    for (int32_t i = 0; i < m->n_access; i++)
        rt_perf_data_tile(m, i, p->tile[0].shape, p->tile[0].data[i]);
    p->tile[0].footprint_bytes = 0;

    return true;
}

// Blocks resident on one unit at a time: the least of the device's block and thread limits,
// its register file and each explicitly managed per-unit level (shared memory) over the block's
// footprint there; 1 without a thread level; 0 when no block fits.
static int64_t gpu_blocks_per_unit(const rt_perf_model *m, const rt_rprog *p, int32_t top) {
    const rt_device *dev = m->dev;
    if (m->thread_level < 0)
        return 1;
    int64_t bpu = INT64_MAX;
    if (dev->max_blocks_per_unit > 0)
        bpu = rt_min64(bpu, dev->max_blocks_per_unit);
    if (dev->max_threads_per_unit > 0)
        bpu = rt_min64(bpu, dev->max_threads_per_unit / p->threads_per_block);
    if (dev->regs_per_unit > 0 && p->compiled_regs > 0) {
        // the compiler's registers, allocated per warp in the device file's granules
        int64_t lanes = dev->lanes > 0 ? dev->lanes : 1;
        int64_t granule = dev->reg_granule_warp > 0 ? dev->reg_granule_warp : 1;
        int64_t per_warp = rt_round_up((int64_t)p->compiled_regs * lanes, granule);
        bpu = rt_min64(bpu,
                       dev->regs_per_unit / (rt_ceil_div(p->threads_per_block, lanes) * per_warp));
    } else if (dev->regs_per_unit > 0 && p->regs_per_thread > 0) {
        bpu = rt_min64(bpu,
                       dev->regs_per_unit / (p->threads_per_block * (int64_t)p->regs_per_thread));
    }
    for (int32_t l = 1; l < top; l++) {
        const rt_mem_level *lv = &dev->level[l];
        if (lv->scope == RT_MEM_SCOPE_UNIT && lv->managed == RT_MEM_EXPLICIT &&
            p->tile[l].footprint_bytes > 0)
            bpu = rt_min64(bpu, lv->capacity_bytes / p->tile[l].footprint_bytes);
    }
    return bpu == INT64_MAX ? 1 : bpu;
}

// The latency of a global load on a GPU whose global level has rtcalib's curve (bandwidth by
// bytes in flight per unit): Little's law at the curve's first point, those bytes over the unit's
// share of its bandwidth; 0 elsewhere (no curve, a CPU). H100: 2048 B at 530 GB/s over 132
// units, 510 ns.
static double gpu_copy_latency_ns(const rt_perf_model *m, const rt_device *dev, const rt_rprog *p) {
    const rt_mem_level *g = &dev->level[0];
    if (m->thread_level < 0 || dev->units <= 0 || g->n_curve <= 0 || g->curve[0].gbps <= 0 ||
        p->compiled_regs <= 0)
        return 0;
    return (double)g->curve[0].bytes / (g->curve[0].gbps / (double)dev->units);
}

// What a staged kernel adds to its bottleneck (a GPU with a latency, gpu_copy_latency_ns). A
// block's reduction step is a copy into shared memory (load, store, barrier), then its compute,
// during which its warps interleave the FMAs with the loads from shared memory into registers:
// those two overlap, the smaller exposed over the warps each scheduler can switch between,
// and the copy waits one latency, hidden by the compute of the other blocks resident on its
// unit. Bandwidth is the levels' own term: blocks of different units run out of step, so a
// unit's copy takes more than its share of the bandwidth while the others compute. H100, 4096^3
// fp32, 128x256x16 tiles on 512 threads (one block per unit): 2965 us measured, 2305 us of
// compute, 1024 steps per unit x 510 ns; the copies priced at the bandwidth and not overlapped
// had predicted 5605 us.
static double gpu_exposed_ns(const rt_perf_model *m, const rt_rprog *p, double latency_ns,
                             int64_t units, int64_t bpu) {
    int32_t top = m->top;
    double step = fmax(p->compute_ns, p->tile[top].time_ns);
    int64_t resident = rt_min64(bpu, rt_ceil_div(p->blocks, units));
    // warps per scheduler (TEU): each hides the others' shared-memory loads behind its FMAs
    const rt_device *dev = m->dev;
    int64_t lanes = dev->lanes > 0 ? dev->lanes : 1, teus = rt_max64(dev->teus_per_unit, 1);
    double warps = (double)(resident * rt_ceil_div(p->threads_per_block, lanes)) / (double)teus;
    double rest = (p->compute_ns + p->tile[top].time_ns - step) / fmax(warps, 1);
    double block_steps = rt_perf_tile_count(m, p->tile[m->block_level].shape, false);
    if (p->blocks <= 0 || block_steps <= 0)
        return rest;
    // steps one after another on a unit, each shared by `resident` blocks
    double slots =
        (double)rt_ceil_div(p->blocks, units * resident) * block_steps / (double)p->blocks;
    double hidden = p->compute_ns / slots * (double)(resident - 1) / (double)resident;
    return rest + slots * fmax(0, latency_ns - hidden);
}

bool rt_perf_reprice_compiled(const rt_perf_result *r, rt_rprog *p, int32_t regs,
                              const char **why) {
    p->compiled_regs = regs > 0 ? regs : 0;
    return rt_perf_evaluate(r->model, p, why);
}

bool rt_perf_evaluate(const rt_perf_model *m, rt_rprog *p, const char **why) {
    const rt_device *dev = m->dev;
    int32_t top = m->top;
    static const char *const ok = "";
    *why = ok;
    p->n_levels = dev->n_levels;
    p->tile[0].level = 0;
    for (int32_t x = 0; x < m->n_axes; x++)
        p->tile[0].shape[x] = m->axes[x].extent;
    if (!nest_and_fit(m, p, why))
        return false;

    // Threads and registers.
    int32_t bl = m->block_level;
    const rt_rtile *blk = &p->tile[bl];
    p->threads_per_block = 1;
    p->regs_per_thread = 0;
    if (m->thread_level >= 0) {
        p->regs_per_thread = (int32_t)rt_ceil_div(p->tile[m->thread_level].footprint_bytes, 4);
        if (bl < m->thread_level)
            for (int32_t x = 0; x < m->n_axes; x++)
                if (!m->axes[x].is_reduce)
                    p->threads_per_block *= blk->shape[x] / p->tile[m->thread_level].shape[x];
        int64_t planned = rt_gpu_plan_main_threads(p->gpu, m->main_stmt);
        if (planned > 0) // the block the backend launches (gpu-plan.c)
            p->threads_per_block = planned;
        if (dev->max_threads_per_block > 0 && p->threads_per_block > dev->max_threads_per_block) {
            *why = "too many threads per block";
            return false;
        }
        if (dev->regs_per_unit > 0 &&
            p->threads_per_block * p->regs_per_thread > dev->regs_per_unit) {
            *why = "registers of the block exceed the unit's register file";
            return false;
        }
    }
    // Scale-out: blocks over units; the reduction stays inside a block.
    double nblk = rt_perf_tile_count(m, blk->shape, true);
    p->blocks = ceil_pos(nblk);
    for (int32_t x = 0; x < m->n_axes; x++) {
        int64_t one[RT_PERF_MAX_AXES];
        for (int32_t y = 0; y < m->n_axes; y++)
            one[y] = y == x ? blk->shape[x] : m->axes[y].extent;
        p->grid[x] = m->axes[x].is_reduce ? 1 : ceil_pos(rt_perf_tile_count(m, one, true));
    }
    int64_t bpu = gpu_blocks_per_unit(m, p, top);
    if (bpu < 1) {
        *why = "no block fits on one unit";
        return false;
    }
    p->blocks_per_unit = bpu;
    int64_t units = dev->units > 0 ? dev->units : 1;
    // Roller's wave quantization with max = units (Arch compute_max_core[0]): each unit works
    // through ceil(real / units) blocks; resident blocks only overlap one another's stages.
    int64_t waves = rt_ceil_div(p->blocks, units);
    p->wave_eff = (double)p->blocks / (double)(units * waves);
    int64_t units_used = rt_min64(units, p->blocks);
    double inflight_bytes = gpu_inflight_bytes(m, dev, p, bpu, units);
    double l1_factor = 1, issue_share = 1;
    if (m->thread_level >= 0) {
        issue_share = rt_gpu_plan_main_issue_share(p->gpu, m->main_stmt);
        if (rt_gpu_plan_main_mode(p->gpu, m->main_stmt) == RT_GPU_REGTILE)
            gpu_regtile_reads(m, p, &l1_factor, &issue_share);
    }

    // Memory levels: traffic into level l comes from level l-1, except into a warm CPU's last-
    // level cache (rt_perf_cpu_warm), which already holds the operator's tensors.
    double worst = 0;
    p->bottleneck = -1;
    p->bound_bytes = 0;
    p->bound_gbps = 0;
    for (int32_t l = 1; l <= top; l++) {
        rt_rtile *t = &p->tile[l];
        const int64_t *red =
            (!m->acc_persist && l == top && top - 1 >= 1) ? p->tile[top - 1].shape : NULL;
        t->traffic_bytes =
            rt_perf_traffic_of(m, l, t->shape, (const int64_t(*)[RT_MAX_DIMS])t->data, red);
        double gbps =
            l == 1 && inflight_bytes > 0
                ? gpu_inflight_gbps(&dev->level[0], inflight_bytes)
                : rt_hal_level_gbps(&dev->level[l - 1], t->traffic_bytes / (double)units_used);
        t->time_ns = gbps > 0 && !(m->warm && l == 1) ? t->traffic_bytes / (gbps * p->wave_eff) : 0;
        if (l == top)
            t->time_ns *= l1_factor; // a regtile kernel's loads through the L1 (sectors)
        if (t->time_ns > worst) {
            worst = t->time_ns;
            p->bottleneck = l - 1; // the level whose bandwidth binds
        }
    }
    p->tile[0].traffic_bytes = 0;
    p->tile[0].time_ns = 0;

    // Compute.
    double padded = rt_perf_padded_points(m, p->tile[1].shape);
    p->flops = m->flops_per_point * padded + m->extra_flops;
    p->waste = m->real_points > 0 ? padded / m->real_points - 1 : 0;
    double eff = p->wave_eff;
    int32_t lanes = dev->lanes > 0 ? dev->lanes : 1;
    int64_t need = (int64_t)lanes * (dev->teus_per_unit > 0 ? dev->teus_per_unit : 1);
    if (m->thread_level >= 0) {
        eff *= (double)p->threads_per_block / (double)rt_round_up(p->threads_per_block, lanes);
        int64_t active = p->threads_per_block * bpu;
        if (active < need)
            eff *= (double)active / (double)need;
        // FMAs share the issue slots with the staged kernel's shared loads and copies, fewer
        // with the plan's 128-bit loads (gpu-plan.h), or with a regtile kernel's global loads
        // and their bounds tests (gpu_regtile_reads)
        eff *= issue_share;
    } else if (!cpu_reg_eff(m, p, &eff, why)) {
        return false;
    }
    p->compute_ns = rt_perf_compute_ns(m, p->flops, eff);
    double serial_ns = 0;
    if (!cpu_price_plan(m, p, units, &worst, &serial_ns, why))
        return false;
    // Explicitly staged levels (shared memory) are not double-buffered: a block loads, then
    // computes; overlap comes from the other blocks resident on the unit. Caches prefetch, so a
    // cache hierarchy overlaps fully (pure bottleneck).
    bool staged = false;
    for (int32_t l = 1; l < top; l++)
        staged = staged || (dev->level[l].managed == RT_MEM_EXPLICIT &&
                            dev->level[l].scope != RT_MEM_SCOPE_DEVICE);
    double rest = 0, latency_ns = gpu_copy_latency_ns(m, dev, p);
    if (staged && latency_ns > 0) {
        rest = gpu_exposed_ns(m, p, latency_ns, units, bpu);
    } else if (staged) {
        double sum = p->compute_ns;
        for (int32_t l = 1; l <= top; l++)
            sum += p->tile[l].time_ns;
        rest = (sum - worst) / (double)bpu;
    }
    // The loop nest's serial part (work items, vector-loop dispatch) adds to the core's own
    // work, and the core does it while its loads wait: a memory-bound nest hides it. Measured on
    // a Zen 5 VM (ReLU over 14 MB in L3, 2 threads): work items of one 42-element row ran as
    // fast as items of 13 rows (61-76 us each), where adding the items' 104 us of serial work
    // to the 63 us of L3 traffic had predicted 167 us.
    if (p->compute_ns + serial_ns > worst) {
        worst = p->compute_ns + serial_ns;
        p->bottleneck = -1;
    }
    p->predicted_ns = worst + rest + dev->launch_overhead_us * 1000.0;
    // a phase on matrix instructions: its own price (gpu-mma.c)
    return rt_perf_gpu_mma_evaluate(m, p, why);
}
