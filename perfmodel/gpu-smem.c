// gpu-smem.c: the shared-memory access patterns of a staged GPU phase (gpu-plan.h), computed
// once here for the plan (the row padding of the staged tiles), the lowering (which emits the
// accesses) and the model (which prices them): bank conflicts counted from which lane touches
// which 4-byte bank in one warp instruction, and the unrolling of the step loops.
//
// The accesses are the ones codegen/lower-gpu.c emits:
//   copy    thread tid of round c moves element l = c * threads + tid of the data tile
//           (innermost dim fastest; 4 elements of the innermost dim per item where the copy is
//           128-bit), stored at sum o[d] * stride[d]: one 128-bit store where the tile's
//           innermost dim is its shared rows' too, else one scalar store per element;
//   compute per reduction iteration, each lane reads its register tile's element along every
//           spatial plan dim the read indexes: t + j * nt (strided) or (j / 4) * nt * 4 + t * 4
//           + j % 4 (chunk4, a 128-bit fragment load), t the lane's thread coordinate in that
//           dim (rt_gl_coords: innermost dim fastest over the thread index).
#include "gpu-plan.h"

#include <string.h>

// The shared-array layout of sg with its first padded row `row` elements long: vec4 (vdim >= 0)
// vdim innermost, then the other dims from the tensor's innermost outwards; scalar, the
// tensor's dims in order, the innermost padded.
static void rt_gs_layout(rt_gpu_stage *sg, int64_t row) {
    int64_t stride = 1;
    bool first = true;
    if (sg->vdim >= 0) {
        sg->stride[sg->vdim] = 1;
        stride = row;
        first = false;
    }
    for (int32_t d = sg->n_dims - 1; d >= 0; d--) {
        if (d == sg->vdim)
            continue;
        sg->stride[d] = stride;
        stride *= first ? row : sg->span[d];
        first = false;
    }
    sg->elems = stride;
}

int32_t rt_gpu_bank_wavefronts(const int64_t *word, int32_t lanes, int32_t width, int32_t banks) {
    if (banks <= 0 || width <= 0 || lanes <= 0)
        return 1;
    int32_t per = banks / width > 0 ? banks / width : 1; // lanes served per wavefront
    int32_t total = 0;
    for (int32_t p0 = 0; p0 < lanes; p0 += per) {
        // distinct words per bank among the phase's lanes (equal words are one broadcast): each
        // bank chains the words it holds (next[]), so a word is compared only with its bank's
        int64_t seen[RT_GPU_SMEM_MAX_LANES * 4];
        int32_t next[RT_GPU_SMEM_MAX_LANES * 4], head[RT_GPU_SMEM_MAX_BANKS];
        int32_t n_seen = 0, load[RT_GPU_SMEM_MAX_BANKS] = {0}, most = 0;
        for (int32_t b = 0; b < banks; b++)
            head[b] = -1;
        for (int32_t i = p0; i < p0 + per && i < lanes; i++) {
            if (word[i] < 0)
                continue;
            for (int32_t w = 0; w < width; w++) {
                int64_t x = word[i] + w;
                int32_t b = (int32_t)(x % banks);
                bool dup = false;
                for (int32_t k = head[b]; k >= 0 && !dup; k = next[k])
                    dup = seen[k] == x;
                if (dup || n_seen >= RT_GPU_SMEM_MAX_LANES * 4)
                    continue;
                seen[n_seen] = x;
                next[n_seen] = head[b];
                head[b] = n_seen++;
                if (++load[b] > most)
                    most = load[b];
            }
        }
        total += most;
    }
    return total > 0 ? total : 1;
}

// Thread tid's coordinate in plan dim d (rt_gl_coords): inner dims fastest.
static int64_t rt_gs_tcoord(const rt_gpu_phase_plan *pl, int32_t d, int64_t tid) {
    for (int32_t k = pl->n_dims - 1; k > d; k--)
        tid /= pl->dims[k].nt > 0 ? pl->dims[k].nt : 1;
    return pl->dims[d].nt > 1 ? tid % pl->dims[d].nt : 0;
}

// The plan dim whose single member is var v, -1 none.
static int32_t rt_gs_dim_of(const rt_gpu_phase_plan *pl, int32_t v) {
    for (int32_t d = 0; d < pl->n_dims; d++)
        if (pl->dims[d].n_members == 1 && pl->dims[d].members[0] == v && !pl->dims[d].ragged)
            return d;
    return -1;
}

// Word of thread tid's first register-tile element of read sg (the other lanes of the warp read
// at the same reduction iteration and register index: only the thread coordinates differ).
static int64_t rt_gs_load_word(const rt_gpu_phase_plan *pl, const rt_gpu_stage *sg, int64_t tid) {
    int64_t w = 0;
    for (int32_t sd = 0; sd < sg->n_dims; sd++)
        for (int32_t t = 0; t < sg->aff[sd].n_terms; t++) {
            int32_t d = rt_gs_dim_of(pl, sg->aff[sd].var[t]);
            if (d < 0)
                continue;
            int64_t c = sg->aff[sd].coef[t] < 0 ? -sg->aff[sd].coef[t] : sg->aff[sd].coef[t];
            bool c4 = pl->dims[d].chunk4 || d == sg->frag;
            int64_t pos = rt_gs_tcoord(pl, d, tid) * (c4 ? 4 : 1);
            w += c * pos * sg->stride[sd];
        }
    return w;
}

// Word where copy item l stores its (first) element, vw elements per item; -1 past the tile.
static int64_t rt_gs_copy_word(const rt_gpu_stage *sg, int64_t l, int64_t vw, int64_t total) {
    if (l >= total)
        return -1;
    int64_t w = 0, rest = l;
    for (int32_t d = sg->n_dims - 1; d >= 0; d--) {
        int64_t sp = d == sg->n_dims - 1 ? sg->span[d] / vw : sg->span[d];
        int64_t o = d == 0 ? rest : rest % sp;
        if (d > 0)
            rest /= sp;
        if (d == sg->n_dims - 1)
            o *= vw;
        w += o * sg->stride[d];
    }
    return w;
}

void rt_gpu_stage_smem(const rt_gpu_phase_plan *pl, const rt_gpu_stage *sg, bool gvec,
                       int32_t banks, int32_t lanes, rt_gpu_smem_cost *out) {
    memset(out, 0, sizeof *out);
    if (lanes <= 0 || lanes > RT_GPU_SMEM_MAX_LANES)
        lanes = 32;
    if (banks > RT_GPU_SMEM_MAX_BANKS)
        banks = 0;
    int64_t T = pl->threads > 0 ? pl->threads : 1;
    int64_t warps = (T + lanes - 1) / lanes;
    int64_t word[RT_GPU_SMEM_MAX_LANES];
    // copy: every round of every warp
    int64_t vw = gvec ? 4 : 1, total = 1;
    for (int32_t d = 0; d < sg->n_dims; d++)
        total *= sg->span[d];
    total /= vw;
    bool vstore = gvec && sg->vdim == sg->n_dims - 1; // one 128-bit store, else vw scalar ones
    int32_t width = vstore ? 4 : 1;
    int64_t rounds = (total + T - 1) / T;
    double waves = 0;
    for (int64_t c = 0; c < rounds; c++)
        for (int64_t w = 0; w < warps; w++) {
            for (int32_t i = 0; i < lanes; i++) {
                int64_t tid = w * lanes + i;
                word[i] = tid < T ? rt_gs_copy_word(sg, c * T + tid, vw, total) : -1;
            }
            waves += rt_gpu_bank_wavefronts(word, lanes, width, banks);
        }
    int64_t ideal = banks > 0 ? (lanes * width + banks - 1) / banks : 1;
    out->store_instr = (double)rounds * (vstore ? 1 : (double)vw);
    out->store_ways = rounds > 0 ? waves / (double)(rounds * warps * ideal) : 1;
    // compute: the first element of every warp's lanes
    width = sg->frag >= 0 ? 4 : 1;
    waves = 0;
    for (int64_t w = 0; w < warps; w++) {
        for (int32_t i = 0; i < lanes; i++) {
            int64_t tid = w * lanes + i;
            word[i] = tid < T ? rt_gs_load_word(pl, sg, tid) : -1;
        }
        waves += rt_gpu_bank_wavefronts(word, lanes, width, banks);
    }
    ideal = banks > 0 ? (lanes * width + banks - 1) / banks : 1;
    out->load_ways = waves / (double)(warps * ideal);
    // load instructions per reduction iteration: the distinct elements over the register tile
    // (the R of each dim the read indexes), 4 per 128-bit fragment load
    double elems = 1;
    for (int32_t d = 0; d < pl->n_dims; d++) {
        bool uses = false;
        for (int32_t k = 0; k < sg->n_dims; k++)
            for (int32_t t = 0; t < sg->aff[k].n_terms; t++)
                for (int32_t j = 0; j < pl->dims[d].n_members; j++)
                    uses = uses || sg->aff[k].var[t] == pl->dims[d].members[j];
        if (uses)
            elems *= (double)pl->dims[d].R;
    }
    out->load_instr = sg->frag >= 0 ? elems / 4 : elems;
}

int64_t rt_gpu_stage_pad(const rt_gpu_phase_plan *pl, rt_gpu_stage *sg, int64_t row, int64_t step,
                         int32_t banks, int32_t lanes) {
    int64_t iters = 1; // reduction iterations per step: loads per copy
    for (int32_t v = 0; v < RT_GPU_PLAN_MAX_VARS; v++)
        if (pl->red_T1[v] > 0)
            iters *= pl->red_T1[v];
    if (step < 1)
        step = 1;
    int64_t best_pad = 0;
    double best = -1;
    for (int64_t pad = 0; pad < (banks > 0 ? banks : 1); pad += step) {
        rt_gs_layout(sg, row + pad);
        rt_gpu_smem_cost c;
        rt_gpu_stage_smem(pl, sg, sg->gvec, banks, lanes, &c);
        double cost =
            c.store_instr * c.store_ways + (double)iters * c.load_instr * c.load_ways + 1e-9 * pad;
        if (best < 0 || cost < best) {
            best = cost;
            best_pad = pad;
        }
    }
    rt_gs_layout(sg, row + best_pad);
    return best_pad;
}

int64_t rt_gpu_step_unroll(int64_t trips, int64_t body_fmas) {
    if (trips < 1)
        return 1;
    for (int64_t f = trips; f > 1; f--)
        if (trips % f == 0 && f * body_fmas <= RT_GPU_MAX_UNROLLED_FMAS)
            return f;
    return 1;
}

double rt_gpu_step_loop_instrs(int64_t trips, int64_t f, int32_t n_reads) {
    if (f < 1)
        f = 1;
    if (f >= trips)
        return 0;
    // per trip of the rolled loop: its counter, test and branch, and each read's shared
    // address advanced (a fully rolled body, f == 1, computes each read's address afresh: an
    // index times the row stride, shifted and added to the array's base)
    double per_trip = RT_GPU_LOOP_INSTRS + (f == 1 ? 3.0 : 1.0) * n_reads;
    return per_trip / (double)f;
}
