// test-gpu-plan.c: the GPU plan made once (perfmodel/gpu-plan.c), no GPU needed.
//   - every candidate of every example on every GPU device carries a plan, its threads per block
//     are the plan's (the model prices the plan), and no two candidates share a plan (equal
//     plans are merged during construction: top-K means K different kernels);
//   - the lowering executes the candidate's plan: its header prints that plan, and a plan
//     changed after construction changes the kernel (the lowering does not re-derive it);
//   - the grouped block order comes from the device file (raster_group_blocks), not the arch;
//   - 128-bit loads (vec4): the GEMM top-1 on h100 chunks its register tile, lays A out
//     transposed with rows padded by 4, copies full aligned tiles 4 floats at a time and falls
//     back to scalar copies where the tiles are not full; the model prices the decision (issue
//     share); the lowering prints float4 accesses and declares its shared arrays aligned;
//   - regtile reads priced as global loads: sectors per warp through the L1, issue slots.
//   - the rows mode of row-wise groups (softmax): threads per row from the rProgram, counted
//     in the block's threads; a group that accumulates ('+=') stays direct;
//   - the interior/edge split (issue 22): at 1000 x 1000 x 999 the top-1 on h100 runs its
//     interior blocks' full steps unguarded, B (rows of 1000 floats) copied 128-bit there and
//     A (rows of 999) not; the lowering executes it (an interior branch, then the guarded
//     steps); full shapes are not split.
#include "test.h"

#include "gpu-plan.h"
#include "gpu.h"

#include <dirent.h>
#include <math.h>
#include <string.h>

static const char *const gpu_devs[] = {
    "devices/a100.ini", "devices/h100.ini", "devices/v100.ini",   "devices/t4.ini",
    "devices/k80.ini",  "devices/mi50.ini", "devices/mi250x.ini", "devices/pocl-cpu.ini"};

static rt_perf_result *construct_sized(rt_arena *a, const char *spec, const rt_device *dev,
                                       int32_t k, const rt_size_binding *sets, int32_t n_sets) {
    rt_op *op = NULL;
    rt_perf_result *r = NULL;
    rt_perf_options popt = {.top_k = k};
    rt_err err = {0};
    if (rt_spec_load(a, spec, sets, n_sets, &op, &err) != RT_OK ||
        rt_perf_construct(a, op, dev, &popt, &r, &err) != RT_OK)
        return NULL;
    return r;
}

static rt_perf_result *construct(rt_arena *a, const char *spec, const rt_device *dev, int32_t k) {
    return construct_sized(a, spec, dev, k, NULL, 0);
}

// A vec4 plan's invariants (gpu-plan.h): every staged read has a fragment dim that is chunked
// with a register tile of a multiple of 4, stride 1 along vdim and multiples of 4 elsewhere,
// 128-bit copies only of full tiles.
static bool vec4_consistent(const rt_gpu_phase_plan *ph) {
    if (!ph->vec4) {
        for (int32_t d = 0; d < ph->n_dims; d++)
            if (ph->dims[d].chunk4)
                return false;
        for (int32_t i = 0; i < ph->n_stage; i++)
            if (ph->stage[i].frag >= 0 || ph->stage[i].gvec)
                return false;
        return true;
    }
    for (int32_t i = 0; i < ph->n_stage; i++) {
        const rt_gpu_stage *sg = &ph->stage[i];
        if (sg->frag < 0 || !ph->dims[sg->frag].chunk4 || ph->dims[sg->frag].R % 4 != 0 ||
            sg->stride[sg->vdim] != 1 || (sg->gvec && !sg->full))
            return false;
        for (int32_t d = 0; d < sg->n_dims; d++)
            if (d != sg->vdim && sg->stride[d] % 4 != 0)
                return false;
    }
    return true;
}

static void test_candidates(void) {
    DIR *d = opendir("examples");
    RT_EXPECT(d != NULL);
    if (!d)
        return;
    struct dirent *de;
    int32_t n_checked = 0;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 5, ".spec") != 0)
            continue;
        char spec[512];
        snprintf(spec, sizeof spec, "examples/%s", de->d_name);
        for (size_t i = 0; i < sizeof gpu_devs / sizeof gpu_devs[0]; i++) {
            rt_device dev;
            rt_err err = {0};
            RT_EXPECT_EQ(rt_hal_load_device(gpu_devs[i], &dev, &err), RT_OK);
            rt_arena *a = rt_arena_new(1 << 20);
            rt_perf_result *r = construct(a, spec, &dev, 10);
            for (int32_t c = 0; r && c < r->n_cands; c++) {
                const rt_rprog *p = &r->cands[c];
                if (!p->gpu)
                    continue; // a construct the backend does not support (lowering says why)
                n_checked++;
                int64_t t = rt_gpu_plan_main_threads(p->gpu, r->model->main_stmt);
                if (t > 0 && t != p->threads_per_block)
                    fprintf(stderr, "%s %s rank %d: model %lld threads, plan %lld\n", spec,
                            gpu_devs[i], (int)c + 1, (long long)p->threads_per_block, (long long)t);
                RT_EXPECT(t == 0 || t == p->threads_per_block);
                for (int32_t ph = 0; ph < p->gpu->n_phases; ph++)
                    RT_EXPECT(vec4_consistent(&p->gpu->phases[ph]));
                for (int32_t o = 0; o < c; o++)
                    if (r->cands[o].gpu && r->cands[o].gpu->key == p->gpu->key) {
                        fprintf(stderr, "%s %s: ranks %d and %d share a plan\n", spec, gpu_devs[i],
                                (int)o + 1, (int)c + 1);
                        RT_EXPECT(false);
                    }
            }
            rt_arena_free(a);
        }
    }
    closedir(d);
    RT_EXPECT(n_checked > 100);
}

// The lowering executes the plan it is given and prints it in its header.
static void test_lowering_executes_plan(void) {
    rt_device dev;
    rt_err err = {0};
    RT_EXPECT_EQ(rt_hal_load_device("devices/a100.ini", &dev, &err), RT_OK);
    rt_arena *a = rt_arena_new(1 << 20);
    rt_perf_result *r = construct(a, "examples/matmul.spec", &dev, 1);
    RT_EXPECT(r && r->cands[0].gpu);
    if (!r || !r->cands[0].gpu) {
        rt_arena_free(a);
        return;
    }
    const rt_gpu_plan *plan = r->cands[0].gpu;
    RT_EXPECT_EQ(plan->phases[0].mode, RT_GPU_STAGED);
    RT_EXPECT_EQ(plan->phases[0].raster, 8); // a100.ini: raster_group_blocks = 8
    rt_gpu_kernel *k = NULL;
    RT_EXPECT_EQ(rt_gpu_lower(a, r->model->op, &dev, r->model, &r->cands[0], NULL, &k, &err),
                 RT_OK);
    rt_buf line;
    rt_buf_init(&line, a);
    rt_gpu_plan_print_phase(r->model->op, plan, 0, &line);
    RT_EXPECT(k && strstr(k->header, line.data) != NULL);
    RT_EXPECT(k && k->phases[0].threads == plan->phases[0].threads);
    // A different plan for the same rProgram: no grouped order, the register tile in a loop.
    rt_gpu_plan other = *plan;
    rt_gpu_phase_plan ph = plan->phases[0];
    ph.raster = 0;
    other.phases = &ph;
    rt_rprog p = r->cands[0];
    p.gpu = &other;
    rt_gpu_kernel *k2 = NULL;
    RT_EXPECT_EQ(rt_gpu_lower(a, r->model->op, &dev, r->model, &p, NULL, &k2, &err), RT_OK);
    RT_EXPECT(k2 && strstr(k2->header, "grouped block order") == NULL);
    RT_EXPECT(k && strstr(k->header, "grouped block order 8") != NULL);
    // The device file decides the block order: without the key, no grouped order is planned.
    dev.raster_group_blocks = 0;
    rt_perf_result *r0 = construct(a, "examples/matmul.spec", &dev, 1);
    RT_EXPECT(r0 && r0->cands[0].gpu && r0->cands[0].gpu->phases[0].raster == 0);
    rt_arena_free(a);
}

static const rt_gpu_stage *stage_of(const rt_op *op, const rt_gpu_phase_plan *ph,
                                    const char *tensor) {
    for (int32_t i = 0; i < ph->n_stage; i++)
        if (strcmp(op->tensors[ph->stage[i].read->tensor].name, tensor) == 0)
            return &ph->stage[i];
    return NULL;
}

static void test_vec4(void) {
    rt_device dev;
    rt_err err = {0};
    RT_EXPECT_EQ(rt_hal_load_device("devices/h100.ini", &dev, &err), RT_OK);
    rt_arena *a = rt_arena_new(1 << 20);
    // examples/matmul.spec, 4096 x 4096 x 1024: the top-1 is 128x128x8 / 8x8, 256 threads
    // (tests/golden/rtiles.txt)
    rt_perf_result *r = construct(a, "examples/matmul.spec", &dev, 1);
    RT_EXPECT(r && r->cands[0].gpu);
    if (!r || !r->cands[0].gpu) {
        rt_arena_free(a);
        return;
    }
    const rt_op *op = r->model->op;
    const rt_gpu_phase_plan *ph = &r->cands[0].gpu->phases[0];
    const rt_gpu_stage *sa = stage_of(op, ph, "A"), *sb = stage_of(op, ph, "B");
    RT_EXPECT(ph->mode == RT_GPU_STAGED && ph->vec4 && sa && sb);
    RT_EXPECT(ph->n_dims == 2 && ph->dims[0].T1 == 128 && ph->dims[0].R == 8 &&
              ph->dims[1].T1 == 128 && ph->dims[1].R == 8 && ph->threads == 256);
    RT_EXPECT(ph->dims[0].chunk4 && ph->dims[1].chunk4);
    if (!sa || !sb || ph->n_dims != 2) {
        rt_arena_free(a);
        return;
    }
    // A(m, k) transposed: [k][m], rows of 128 + 4; B(k, n) as is: [k][n], rows of 128
    RT_EXPECT(sa->vdim == 0 && sa->frag == 0 && sa->stride[0] == 1 && sa->stride[1] == 132 &&
              sa->elems == 8 * 132);
    RT_EXPECT(sb->vdim == 1 && sb->frag == 1 && sb->stride[1] == 1 && sb->stride[0] == 128 &&
              sb->elems == 8 * 128);
    RT_EXPECT(sa->gvec && sb->gvec && sa->full && sb->full);
    // the model's issue share per k: 64 FMAs, 2 + 2 fragment loads, copies per step of 8 k
    // of 256 threads (B: 1 load + 1 store; A: 1 load + 4 stores) against 16 scalar loads and
    // 4 x 2 + 4 x 2
    double share = rt_gpu_plan_main_issue_share(r->cands[0].gpu, r->model->main_stmt);
    RT_EXPECT(fabs(share - 64.0 / (64 + 4 + (2 + 5) / 8.0)) < 1e-12);
    rt_gpu_plan scalar = *r->cands[0].gpu;
    rt_gpu_phase_plan sph = *ph;
    rt_gpu_stage sst[2] = {ph->stage[0], ph->stage[1]};
    sph.vec4 = false;
    for (int32_t i = 0; i < 2; i++)
        sst[i].frag = -1, sst[i].gvec = false;
    sph.stage = sst;
    scalar.phases = &sph;
    double share1 = rt_gpu_plan_main_issue_share(&scalar, r->model->main_stmt);
    // scalar loads of the chunked layout: B's lanes (n fastest) read words 4 apart, 16 words
    // on 8 banks, 2-way (gpu-smem.c); A's 2 words per warp are broadcast
    RT_EXPECT(fabs(share1 - 64.0 / (64 + 8 + 8 * 2 + (8 + 8) / 8.0)) < 1e-12);
    // the lowering: float4 fragment loads and copies, aligned shared arrays; a shared array not
    // declared aligned is refused by the IR check
    rt_gpu_kernel *k = NULL;
    const char *src = NULL;
    RT_EXPECT_EQ(rt_gpu_lower(a, op, &dev, r->model, &r->cands[0], NULL, &k, &err), RT_OK);
    RT_EXPECT(k && rt_gpu_emit(a, k, &rt_gpu_dialect_cuda, &src, &err) == RT_OK);
    RT_EXPECT(src && strstr(src, "float4 rt_v = *(const float4 *)(&sh_A_p0[") &&
              strstr(src, "float4 rt_v = *(const float4 *)(&t_A[") &&
              strstr(src, "*(float4 *)(&sh_B_p0[") &&
              strstr(src, "__shared__ float sh_A_p0[1056] __attribute__((aligned(16)));"));
    for (int32_t i = 0; k && i < k->kir->n_bufs; i++)
        k->kir->bufs[i].align16 = false;
    RT_EXPECT(k && rt_kir_validate(k->kir, &err) == RT_ERR_BACKEND);
    // 1000 x 1000 x 999: the tiles are not full, the copies scalar (guarded), the fragments
    // still 128-bit where the register tile allows
    rt_size_binding odd[3] = {{"M", 1000}, {"N", 1000}, {"K", 999}};
    rt_perf_result *r2 = construct_sized(a, "examples/matmul.spec", &dev, 10, odd, 3);
    int32_t n_vec = 0;
    for (int32_t c = 0; r2 && c < r2->n_cands; c++) {
        const rt_gpu_phase_plan *p2 = r2->cands[c].gpu ? &r2->cands[c].gpu->phases[0] : NULL;
        if (!p2 || p2->mode != RT_GPU_STAGED)
            continue;
        n_vec += p2->vec4;
        for (int32_t i = 0; i < p2->n_stage; i++)
            RT_EXPECT(!p2->stage[i].gvec);
    }
    RT_EXPECT(n_vec > 0);
    rt_arena_free(a);
}

// Regtile reads priced as the global loads they are (cost.c gpu_regtile_reads): conv3x3 of
// 32x28x28 on h100, one block of 448 threads. Measured on the H100 (GPU check 2026-11-27):
// regtile with the 28-wide register tile along x (lanes down y, every lane its own sector)
// 744 us, along y (lanes along x) 241 us, staged 92-99 us; priced as shared-memory loads the
// two regtile kernels had ranked first (62 and 64 us).
static void test_regtile_reads(void) {
    rt_device dev;
    rt_err err = {0};
    RT_EXPECT_EQ(rt_hal_load_device("devices/h100.ini", &dev, &err), RT_OK);
    rt_arena *a = rt_arena_new(1 << 20);
    rt_size_binding sz[4] = {{"C", 32}, {"F", 32}, {"H", 28}, {"W", 28}};
    rt_perf_result *r = construct_sized(a, "bench/specs/conv3x3.spec", &dev, 200, sz, 4);
    RT_EXPECT(r != NULL);
    double down_y = 0, along_x = 0, staged = 0;
    for (int32_t c = 0; r && c < r->n_cands; c++) {
        const rt_rprog *p = &r->cands[c];
        const rt_gpu_phase_plan *ph = p->gpu ? &p->gpu->phases[0] : NULL;
        if (!ph || p->blocks != 1 || p->threads_per_block != 448)
            continue;
        const int64_t *t = p->tile[r->model->thread_level].shape; // n f y x c r s
        if (ph->mode == RT_GPU_STAGED && (staged == 0 || p->predicted_ns < staged))
            staged = p->predicted_ns;
        if (ph->mode == RT_GPU_REGTILE && t[3] == 28 && t[2] == 1 &&
            (down_y == 0 || p->predicted_ns < down_y))
            down_y = p->predicted_ns;
        if (ph->mode == RT_GPU_REGTILE && t[2] == 28 && t[3] == 1 &&
            (along_x == 0 || p->predicted_ns < along_x))
            along_x = p->predicted_ns;
    }
    RT_EXPECT(down_y > 0 && along_x > 0 && staged > 0);
    RT_EXPECT(staged < along_x);
    RT_EXPECT(along_x * 1.3 < down_y);
    rt_arena_free(a);
}

// The interior/edge split at 1000 x 1000 x 999 on h100 (the shape of the GPU check's
// gemm_odd): the plan, its line, and the kernel the lowering prints from it.
static void test_edge_split(void) {
    rt_device dev;
    rt_err err = {0};
    RT_EXPECT_EQ(rt_hal_load_device("devices/h100.ini", &dev, &err), RT_OK);
    rt_arena *a = rt_arena_new(1 << 20);
    rt_size_binding odd[3] = {{"M", 1000}, {"N", 1000}, {"K", 999}};
    rt_perf_result *r = construct_sized(a, "examples/matmul.spec", &dev, 1, odd, 3);
    RT_EXPECT(r && r->cands[0].gpu);
    if (!r || !r->cands[0].gpu) {
        rt_arena_free(a);
        return;
    }
    const rt_op *op = r->model->op;
    const rt_gpu_phase_plan *ph = &r->cands[0].gpu->phases[0];
    const rt_gpu_stage *sa = stage_of(op, ph, "A"), *sb = stage_of(op, ph, "B");
    // the top-1 (64x64x24 / 8x8): 16 blocks per dim, 15 of them whole; 42 k steps, 41 whole
    RT_EXPECT(ph->mode == RT_GPU_STAGED && ph->vec4 && ph->split && sa && sb);
    RT_EXPECT(ph->n_dims == 2 && ph->dims[0].T1 == 64 && ph->dims[1].T1 == 64 &&
              ph->dims[0].nb == 16 && ph->dims[0].nb_full == 15 && ph->dims[1].nb_full == 15);
    RT_EXPECT(ph->split_var == 2 && ph->split_steps == 999 / ph->red_T1[2] && ph->red_T1[2] == 24 &&
              !ph->red_exact);
    if (!sa || !sb) {
        rt_arena_free(a);
        return;
    }
    RT_EXPECT(!sa->full && !sb->full && !sa->gvec && !sb->gvec);
    RT_EXPECT(sa->ifull && sb->ifull && sb->igvec && !sa->igvec); // 1000 floats a row, 999
    rt_buf line;
    rt_buf_init(&line, a);
    rt_gpu_plan_print_phase(op, r->cands[0].gpu, 0, &line);
    RT_EXPECT(line.data && strstr(line.data, "; edge split: interior m 15/16, n 15/16 blocks, "
                                             "k 41/42 steps, unguarded B, A; 128-bit loads: "
                                             "shared, global B interior;"));
    rt_gpu_kernel *k = NULL;
    const char *src = NULL;
    RT_EXPECT_EQ(rt_gpu_lower(a, op, &dev, r->model, &r->cands[0], NULL, &k, &err), RT_OK);
    RT_EXPECT(k && rt_gpu_emit(a, k, &rt_gpu_dialect_cuda, &src, &err) == RT_OK);
    const char *in = src ? strstr(src, "if (interior) {") : NULL;
    const char *edge =
        in ? strstr(in, "for (step_k_1 = (interior ? 41 : 0); step_k_1 < 42;") : NULL;
    RT_EXPECT(in && edge && strstr(src, "interior = ((b_pair_o < 15) && (b_pair_i < 15));"));
    if (in && edge) {
        // interior: B 128-bit, A scalar and unguarded, exact k steps; edge: the guards
        const char *ldg_b = strstr(in, "float4 rt_v = *(const float4 *)(&t_B[");
        const char *ld_a = strstr(in, "] = t_A[");
        const char *kloop = strstr(in, "for (k = base_k; k < (base_k + 24); ++k) {");
        RT_EXPECT(ldg_b && ldg_b < edge && ld_a && ld_a < edge && kloop && kloop < edge);
        RT_EXPECT(strstr(src, "(const float4 *)(&t_A[") == NULL);
        RT_EXPECT(strstr(edge, "< 999)) && (((lo_B1_1 + o_4) >= 0)") != NULL);
    }
    // a shape of whole tiles is not split
    rt_perf_result *r2 = construct(a, "examples/matmul.spec", &dev, 1);
    RT_EXPECT(r2 && r2->cands[0].gpu && !r2->cands[0].gpu->phases[0].split);
    rt_arena_free(a);
}

// The rows mode: softmax on h100 runs its row group with several threads per row, the block's
// threads (the model's) counting them, from the rProgram's tiles of the reduction axis d
// (block-level over thread-level); the top-1 keeps one warp or more per block. Softmax added
// into the caller's Y ('+=') stays direct, and the construction counts no row threads there.
static void test_rows(void) {
    rt_device dev;
    rt_err err = {0};
    RT_EXPECT_EQ(rt_hal_load_device("devices/h100.ini", &dev, &err), RT_OK);
    rt_arena *a = rt_arena_new(1 << 20);
    rt_perf_result *r = construct(a, "examples/softmax.spec", &dev, 8);
    RT_EXPECT(r != NULL && r->n_cands > 0);
    int32_t n_rows = 0;
    for (int32_t c = 0; r && c < r->n_cands; c++) {
        const rt_rprog *p = &r->cands[c];
        const rt_gpu_phase_plan *ph = p->gpu ? &p->gpu->phases[0] : NULL;
        if (!ph || ph->mode != RT_GPU_ROWS)
            continue;
        n_rows++;
        const rt_perf_model *m = r->model;
        int64_t rows_d = p->tile[m->block_level].shape[1] / p->tile[m->thread_level].shape[1];
        int64_t rows_n = p->tile[m->block_level].shape[0] / p->tile[m->thread_level].shape[0];
        RT_EXPECT_EQ(ph->row_threads, rows_d);
        RT_EXPECT_EQ(ph->threads, rows_n * rows_d);
        RT_EXPECT_EQ(p->threads_per_block, ph->threads);
    }
    RT_EXPECT(n_rows >= 4);
    const rt_gpu_phase_plan *top = r && r->cands[0].gpu ? &r->cands[0].gpu->phases[0] : NULL;
    RT_EXPECT(top && top->mode == RT_GPU_ROWS && top->row_threads >= 8 && top->threads >= 32);
    int32_t axis = 0;
    RT_EXPECT_EQ(rt_gpu_plan_rows_axis(a, r->model->op, &dev, r->model, &axis, &err), RT_OK);
    RT_EXPECT_EQ(axis, 1);
    rt_perf_result *acc = construct(a, "tests/data/softmax-acc.spec", &dev, 4);
    RT_EXPECT(acc != NULL && acc->n_cands > 0);
    for (int32_t c = 0; acc && c < acc->n_cands; c++)
        RT_EXPECT(acc->cands[c].gpu && acc->cands[c].gpu->phases[0].mode == RT_GPU_DIRECT);
    RT_EXPECT_EQ(rt_gpu_plan_rows_axis(a, acc->model->op, &dev, acc->model, &axis, &err), RT_OK);
    RT_EXPECT_EQ(axis, -1);
    // A rows tile of many elements stays a loop (each element holds every statement, its trees
    // and barriers): v100's top-10 has one of 32.
    rt_device v100;
    RT_EXPECT_EQ(rt_hal_load_device("devices/v100.ini", &v100, &err), RT_OK);
    rt_perf_result *rv = construct(a, "examples/softmax.spec", &v100, 10);
    int32_t n_big = 0;
    for (int32_t c = 0; rv && c < rv->n_cands; c++) {
        const rt_gpu_phase_plan *ph = rv->cands[c].gpu ? &rv->cands[c].gpu->phases[0] : NULL;
        if (!ph || ph->mode != RT_GPU_ROWS)
            continue;
        RT_EXPECT_EQ(ph->unroll, ph->Rtot <= 16);
        n_big += ph->Rtot > 16;
    }
    RT_EXPECT(n_big >= 1);
    rt_arena_free(a);
}

int main(void) {
    test_rows();
    test_candidates();
    test_lowering_executes_plan();
    test_vec4();
    test_regtile_reads();
    test_edge_split();
    return rt_test_finish("test-gpu-plan");
}
