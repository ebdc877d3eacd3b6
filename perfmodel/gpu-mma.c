// gpu-mma.c: the price of a matrix-instruction GEMM phase (gpu-plan.h, rt_gpu_mma; run by
// codegen/lower-gpu-mma*.c), step by step of k as the kernel runs it, and the mma.sync path's
// lane tables. Per k step a block copies its A and B tiles (T1m x ks, ks x T1n, 16-bit) global
// -> shared, waits at a barrier, and each warp loads (wm + wn) / 16 fragments of 512 B per 16 of
// k from shared memory for its (wm / 16) x (wn / 16) 16x16x16 products (WMMA fragments, or
// mma.sync m16n8k16 pairs fed by ldmatrix.x4: the same bytes). On the unit, per k step of the
// blocks resident there:
//   copy     their tiles' bytes at the global level's bandwidth for that many bytes in flight
//            (the level's curve, Little's law: below its first point the bandwidth falls in
//            proportion, so a small copy costs the memory latency, not its bytes); with S > 2
//            cp.async stages the copies of S - 1 steps are in flight at once;
//   mma      their flops at the device's matrix-instruction peak over its units (fewer warps
//            than the unit's schedulers leave some idle);
//   shared   their fragment loads and tile stores at the shared level's bandwidth (mma.sync:
//            the fragment loads times ldmatrix's wavefronts over the ideal on the padded rows,
//            rt_gpu_mma_ldsm_ways, gpu-smem.c's counter);
//   barrier  RT_GPU_MMA_BARRIER_CYCLES per __syncthreads (nominal): two per step staged once,
//            one with cp.async stages.
// The tensor units and the load pipe overlap across warps (busy = the larger of mma and shared).
// One stage: a block's copy and its compute run one after the other, the other resident blocks
// filling the wait (max(busy, copy + busy / resident)); S >= 2 stages (cp.async, sm_80+): the
// copies run under the compute (max(busy, copy)). Without double buffering and with one block
// per unit, a k step of 16 pays the latency twice as often as one of 32: on the H100
// (tests/data/half-gemm.spec 4096^3, GPU check 2026-11-27) k 32 ran 20-45 % faster, where the
// model had priced every k step alike. The model prices WMMA and mma.sync alike but for
// ldmatrix's bank conflicts (none on the padded rows); the plan prefers mma.sync on a tie
// (gpu-plan.c). On the H200 (2026-11-28) the model's top-1, mma.sync with 3 cp.async stages,
// ran 0.54 ms for 4096^3 f16 (predicted 0.48).
// MFMA (gfx90a, codegen/lower-gpu-mfma.c) is priced by the same steps over wavefronts of 64:
// one stage (no asynchronous copy), a 16x16 f32 accumulator 4 registers per lane, an operand 2,
// the matrix peak of the INI's mma_* rows over its units and 4 SIMDs (teus_per_unit); never run
// on an AMD GPU.
#include "gpu-plan.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// Loads in flight per thread in an element-by-element tile copy: lower-gpu-mma.c's loop of one
// element per thread and round, unrolled 4. On the H200 (GPU check 2026-11-28) the four guarded
// WMMA GEMMs of 4096^3 (k step 48 or tiles of 192 and 144: copies element by element, one block
// per unit) ran 3.0-3.7 ms where the model, pricing their copies with the whole tile in flight,
// said 0.61-0.74; with 2 KiB in flight per unit (the global curve's first point, 516 GB/s) the
// copies alone take 3.2-3.3 ms.
#define RT_GPU_MMA_SCALAR_LOADS 4
// Nominal: cycles one __syncthreads of a block whose warps arrive together costs the unit.
#define RT_GPU_MMA_BARRIER_CYCLES 40
// Nominal: registers per thread besides fragments (addresses, indices, loop counters), fitted to
// ptxas (sm_90, CUDA 13, NVRTC): 119 registers for a 64x32 warp tile (8 * 8 + 4 * 6 + 31), 140
// for 48x48 (8 * 9 + 4 * 6 + 44), which spilled under a cap of 128.
#define RT_GPU_MMA_BASE_REGS 40

static const char *const rt_gpu_mma_inst_names[] = {"wmma 16x16x16", "mma.sync m16n8k16",
                                                    "mfma 16x16x16"};
_Static_assert(sizeof rt_gpu_mma_inst_names / sizeof rt_gpu_mma_inst_names[0] ==
                   RT_GPU_MMA_INST_COUNT,
               "one name per rt_gpu_mma_inst");

const char *rt_gpu_mma_inst_name(rt_gpu_mma_inst i) {
    return (unsigned)i < RT_GPU_MMA_INST_COUNT ? rt_gpu_mma_inst_names[i] : "?";
}

// A (rows m, columns k): matrices 0 .. 3 at (0, 0), (8, 0), (0, 8), (8, 8) are the operand's
// registers a0a1, a2a3, a4a5, a6a7. B (rows k, columns n), transposed: matrices at (0, 0),
// (8, 0) are registers b0b1, b2b3 of the first n8 tile, (0, 8), (8, 8) those of the second.
const rt_gpu_mma_ldsm_map rt_gpu_mma_ldsm_a = {
    .row0 = {0, 8, 0, 8}, .col0 = {0, 0, 8, 8}, .reg = {0, 1, 2, 3}, .ntile = {0, 0, 0, 0}};
const rt_gpu_mma_ldsm_map rt_gpu_mma_ldsm_b = {.row0 = {0, 8, 0, 8},
                                               .col0 = {0, 0, 8, 8},
                                               .reg = {0, 1, 0, 1},
                                               .ntile = {0, 0, 1, 1},
                                               .trans = true};
const uint8_t rt_gpu_mma_acc_row[8] = {0, 1, 2, 3, 4, 5, 6, 7};
const uint8_t rt_gpu_mma_acc_col[4] = {0, 2, 4, 6};

// CDNA 2 ISA (v_mfma_f32_16x16x16f16, v_mfma_f32_16x16x16bf16_1k): lanes 16 q .. 16 q + 15 hold
// k 4 q .. 4 q + 3 of the operands' rows 0 .. 15, and rows 4 q .. 4 q + 3 of the accumulator's
// columns 0 .. 15.
const uint8_t rt_gpu_mfma_ab_k[4] = {0, 4, 8, 12};
const uint8_t rt_gpu_mfma_acc_r[4] = {0, 4, 8, 12};

void rt_gpu_mfma_ab_lane(int32_t lane, int32_t v, int32_t *row, int32_t *k) {
    *row = lane % RT_GPU_MFMA_ROWS;
    *k = rt_gpu_mfma_ab_k[(lane / RT_GPU_MFMA_ROWS) & 3] + v;
}

void rt_gpu_mfma_acc_lane(int32_t lane, int32_t v, int32_t *row, int32_t *col) {
    *row = rt_gpu_mfma_acc_r[(lane / RT_GPU_MFMA_ROWS) & 3] + v;
    *col = lane % RT_GPU_MFMA_ROWS;
}

int64_t rt_gpu_mma_wave(const rt_gpu_mma *mm) {
    return mm->inst == RT_GPU_MMA_MFMA ? 64 : 32;
}

bool rt_gpu_mma_insts(const rt_device *dev, rt_gpu_mma_inst *first, rt_gpu_mma_inst *last) {
    int arch = 0;
    if (dev->devclass == RT_DEVCLASS_CUDA && sscanf(dev->arch, "sm_%d", &arch) == 1 && arch >= 80) {
        *first = RT_GPU_MMA_WMMA;
        *last = RT_GPU_MMA_SYNC;
        return true;
    }
    // gfx90a (CDNA 2): the bf16 MFMA of 4 elements per lane (_1k) is new there; gfx906 has none
    if (dev->devclass == RT_DEVCLASS_HIP && strcmp(dev->arch, "gfx90a") == 0) {
        *first = *last = RT_GPU_MMA_MFMA;
        return true;
    }
    return false;
}

void rt_gpu_mma_ldsm_lane(const rt_gpu_mma_ldsm_map *map, int32_t lane, int32_t *row,
                          int32_t *col) {
    *row = map->row0[(lane >> 3) & 3] + (lane & 7);
    *col = map->col0[(lane >> 3) & 3];
}

void rt_gpu_mma_acc_lane(int32_t lane, int32_t q, int32_t *row, int32_t *col) {
    *row = rt_gpu_mma_acc_row[(lane >> 2) & 7] + 8 * ((q >> 1) & 1);
    *col = rt_gpu_mma_acc_col[lane & 3] + (q & 1);
}

double rt_gpu_mma_ldsm_ways(const rt_gpu_mma_ldsm_map *map, int64_t ld, int32_t banks) {
    int64_t word[32];
    for (int32_t l = 0; l < 32; l++) {
        int32_t r, c;
        rt_gpu_mma_ldsm_lane(map, l, &r, &c);
        word[l] = ((int64_t)r * ld + c) / 2; // 16-bit elements, 4-byte words
    }
    // 16 bytes per lane: 8 lanes (one matrix's rows) per wavefront at best, 4 wavefronts
    return rt_gpu_bank_wavefronts(word, 32, 4, banks) / 4.0;
}

// Bandwidth of global level lv at bytes_per_unit in flight per unit (its curve; below the first
// point in proportion: Little's law).
static double rt_gpu_mma_gbps(const rt_mem_level *lv, double bytes_per_unit) {
    if (lv->n_curve > 0 && bytes_per_unit < (double)lv->curve[0].bytes)
        return lv->curve[0].gbps * bytes_per_unit / (double)lv->curve[0].bytes;
    return rt_hal_level_gbps(lv, bytes_per_unit);
}

// Registers per thread: the accumulators (a 16x16 float fragment is 8 per lane of 32, 4 of 64)
// and the A and B fragments of one 16 of k (4 per lane of 32 each, 2 of 64).
static int64_t rt_gpu_mma_regs(const rt_gpu_mma *mm) {
    int64_t fm = mm->wm / 16, fn = mm->wn / 16, per = 256 / rt_gpu_mma_wave(mm);
    return per * fm * fn + per / 2 * (fm + fn) + RT_GPU_MMA_BASE_REGS;
}

// Blocks of `threads` resident on one unit: thread, block, register and shared-memory limits.
static int64_t rt_gpu_mma_resident(const rt_device *dev, const rt_gpu_mma *mm, int64_t threads,
                                   int64_t smem_unit_bytes, int64_t *regs_out) {
    int64_t r = dev->max_blocks_per_unit > 0 ? dev->max_blocks_per_unit : 1;
    int64_t wave = rt_gpu_mma_wave(mm), warps = (threads + wave - 1) / wave,
            regs = rt_gpu_mma_regs(mm);
    // the kernel's __launch_bounds__(threads, 1): the compiler fits one block's registers, and
    // spills beyond them
    int64_t cap = dev->regs_per_unit > 0 ? rt_min64(255, dev->regs_per_unit / (warps * wave)) : 255;
    *regs_out = regs;
    if (regs > cap)
        return 0;
    if (dev->max_threads_per_unit > 0)
        r = rt_min64(r, dev->max_threads_per_unit / threads);
    if (dev->regs_per_unit > 0) {
        int64_t g = dev->reg_granule_warp > 0 ? dev->reg_granule_warp : 1;
        int64_t per_warp = rt_round_up(regs * wave, g);
        if (dev->reg_granule_lane > 0) // AMD: VGPRs per lane in granules
            per_warp = rt_round_up(regs, dev->reg_granule_lane) * wave;
        r = rt_min64(r, dev->regs_per_unit / (warps * per_warp));
    }
    if (smem_unit_bytes > 0 && mm->smem_bytes > 0)
        r = rt_min64(r, smem_unit_bytes / mm->smem_bytes);
    return r;
}

bool rt_gpu_mma_price(const rt_device *dev, const rt_gpu_mma *mm, int64_t T1m, int64_t T1n,
                      int64_t threads, int64_t blocks, double peak_gflops, int64_t smem_unit_bytes,
                      rt_gpu_mma_cost *out) {
    memset(out, 0, sizeof *out);
    int64_t units = dev->units > 0 ? dev->units : 1;
    int64_t wave = rt_gpu_mma_wave(mm);
    if (threads < wave || blocks < 1 || mm->ks < 16 || peak_gflops <= 0 || dev->n_levels < 2)
        return false;
    int64_t resident = rt_gpu_mma_resident(dev, mm, threads, smem_unit_bytes, &out->regs);
    if (resident < 1)
        return false;
    int64_t per_unit = rt_ceil_div(blocks, units);
    double r = (double)rt_min64(resident, per_unit);
    double warps = (double)(threads / wave), teus = dev->teus_per_unit > 0 ? dev->teus_per_unit : 4;
    double ks = (double)mm->ks, copy_bytes = (double)(T1m + T1n) * ks * 2;
    // in flight: the copies of stages - 1 steps ahead (one without cp.async); both tiles
    // copied 16 bytes per access: every access of the step at once; else A's copy and then B's,
    // an element-by-element one with 4 loads per thread in flight
    double ahead = mm->stages > 2 ? (double)(mm->stages - 1) : 1;
    double a_bytes = (double)T1m * ks * 2, b_bytes = (double)T1n * ks * 2;
    double scalar = (double)threads * RT_GPU_MMA_SCALAR_LOADS * 2, copy_ns = 0;
    if (mm->vec_a && mm->vec_b) {
        double gbps = rt_gpu_mma_gbps(&dev->level[0], r * copy_bytes * ahead) / (double)units;
        copy_ns = gbps > 0 ? r * copy_bytes / gbps : 0;
    } else {
        const double bytes[2] = {a_bytes, b_bytes};
        const bool vec[2] = {mm->vec_a, mm->vec_b};
        for (int i = 0; i < 2; i++) {
            double flight = vec[i] ? bytes[i] : fmin(bytes[i], scalar);
            double gbps = rt_gpu_mma_gbps(&dev->level[0], r * flight) / (double)units;
            copy_ns += gbps > 0 ? r * bytes[i] / gbps : 0;
        }
    }
    double sh_gbps = (dev->level[1].bandwidth_gbps > 0 ? dev->level[1].bandwidth_gbps
                                                       : dev->level[0].bandwidth_gbps) /
                     (double)units;
    double mma_gbps = peak_gflops / (double)units;
    double fill = r * warps < teus ? r * warps / teus : 1;
    // mma.sync: ldmatrix's wavefronts over the ideal on the padded rows (gpu-smem.c's counter)
    double wa = 1, wb = 1;
    if (mm->inst == RT_GPU_MMA_SYNC && dev->n_levels > 1 && dev->level[1].bank_bytes == 4) {
        wa = rt_gpu_mma_ldsm_ways(&rt_gpu_mma_ldsm_a, mm->ks + RT_GPU_MMA_PAD, dev->level[1].banks);
        wb = rt_gpu_mma_ldsm_ways(&rt_gpu_mma_ldsm_b, T1n + RT_GPU_MMA_PAD, dev->level[1].banks);
    }
    double frag_bytes =
        warps * ((double)(mm->wm / 16) * wa + (double)(mm->wn / 16) * wb) * (ks / 16) * 512;
    double clock_ghz = dev->clock_mhz > 0 ? dev->clock_mhz / 1000 : 1;
    out->resident = (int64_t)r;
    out->copy_ns = copy_ns;
    out->mma_ns = r * 2.0 * (double)T1m * (double)T1n * ks / (mma_gbps * fill);
    out->shared_ns = sh_gbps > 0 ? r * (frag_bytes + copy_bytes) / sh_gbps : 0;
    out->barrier_ns = (mm->stages > 1 ? 1 : 2) * r * RT_GPU_MMA_BARRIER_CYCLES / clock_ghz;
    double busy = out->mma_ns > out->shared_ns ? out->mma_ns : out->shared_ns;
    double wait = mm->stages > 1 ? out->copy_ns : out->copy_ns + busy / r;
    out->step_ns = (busy > wait ? busy : wait) + out->barrier_ns;
    double steps = ceil((double)mm->K / ks), rounds = ceil((double)per_unit / r);
    // the store: C's bytes once at the global level's bandwidth
    double c_bytes = (double)mm->M * (double)mm->N * 4;
    double store_ns = dev->level[0].bandwidth_gbps > 0 ? c_bytes / dev->level[0].bandwidth_gbps : 0;
    out->unit_steps = rounds * steps;
    out->total_ns = out->unit_steps * out->step_ns + store_ns;
    out->compute_ns = out->unit_steps * (busy + out->barrier_ns);
    out->global_ns = out->unit_steps * out->copy_ns + store_ns;
    return true;
}

bool rt_perf_gpu_mma_evaluate(const rt_perf_model *m, rt_rprog *p, const char **why) {
    const rt_gpu_phase_plan *ph = rt_gpu_plan_main_mma(p->gpu, m->main_stmt);
    if (!ph || m->block_level < 1 || m->top <= m->block_level)
        return true;
    const rt_device *dev = m->dev;
    const rt_gpu_mma *mm = &ph->mma;
    rt_gpu_mma_cost c;
    if (!rt_gpu_mma_price(dev, mm, ph->dims[mm->dm].T1, ph->dims[mm->dn].T1, ph->threads,
                          ph->blocks, m->peak_gflops, dev->level[m->block_level].capacity_bytes,
                          &c)) {
        *why = "the matrix-instruction warp tile's registers exceed the block's share";
        return false;
    }
    p->blocks_per_unit = c.resident;
    p->regs_per_thread = (int32_t)c.regs;
    p->compute_ns = c.compute_ns;
    p->tile[m->block_level].time_ns = c.global_ns;
    p->tile[m->top].time_ns = c.unit_steps * c.shared_ns;
    p->bottleneck = c.global_ns > c.compute_ns ? 0 : -1;
    p->predicted_ns = c.total_ns + dev->launch_overhead_us * 1000.0;
    return true;
}

const rt_gpu_phase_plan *rt_gpu_plan_main_mma(const rt_gpu_plan *pl, int32_t main_stmt) {
    for (int32_t i = 0; pl && i < pl->n_phases; i++)
        if (pl->phases[i].from_prog && pl->phases[i].tstmt == main_stmt && pl->phases[i].mma.on)
            return &pl->phases[i];
    return NULL;
}

int64_t rt_gpu_mma_smem_bytes(const rt_gpu_mma *mm, int64_t T1m, int64_t T1n, int64_t threads) {
    if (mm->inst == RT_GPU_MMA_MFMA) // A rows m and B rows n, k along both; stores straight to C
        return (T1m + T1n) * (mm->ks + RT_GPU_MMA_PAD) * 2;
    int64_t tiles = (T1m * (mm->ks + RT_GPU_MMA_PAD) + mm->ks * (T1n + RT_GPU_MMA_PAD)) * 2;
    return tiles * (mm->stages > 1 ? mm->stages : 1) + (mm->full ? 0 : (threads / 32) * 256 * 4);
}

void rt_gpu_mma_choose_stages(const rt_device *dev, rt_gpu_mma *mm, int64_t T1m, int64_t T1n,
                              int64_t threads, int64_t blocks, double peak_gflops,
                              int64_t block_cap_bytes, int64_t unit_cap_bytes, bool async_ok) {
    mm->stages = 1;
    mm->smem_bytes = rt_gpu_mma_smem_bytes(mm, T1m, T1n, threads);
    if (!async_ok || !mm->full)
        return;
    rt_gpu_mma best = *mm;
    rt_gpu_mma_cost c;
    double best_ns =
        rt_gpu_mma_price(dev, mm, T1m, T1n, threads, blocks, peak_gflops, unit_cap_bytes, &c)
            ? c.total_ns
            : (double)INFINITY;
    for (int32_t st = 2; st <= RT_GPU_MMA_MAX_STAGES; st++) {
        rt_gpu_mma m = *mm;
        m.stages = st;
        m.smem_bytes = rt_gpu_mma_smem_bytes(&m, T1m, T1n, threads);
        if (m.smem_bytes > block_cap_bytes ||
            !rt_gpu_mma_price(dev, &m, T1m, T1n, threads, blocks, peak_gflops, unit_cap_bytes, &c))
            continue;
        if (c.total_ns < best_ns) {
            best_ns = c.total_ns;
            best = m;
        }
    }
    *mm = best;
}
