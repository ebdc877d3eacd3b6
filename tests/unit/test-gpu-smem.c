// test-gpu-smem.c: the shared-memory accesses of a staged GPU phase (perfmodel/gpu-smem.c), no
// GPU needed (issue 22):
//   - bank wavefronts of one warp instruction: lanes over banks, broadcasts, 128-bit phases;
//   - the copy-in stores and fragment loads of the odd-shape GEMM's top-1 on h100 (1000 x 1000
//     x 999, 64x64x24 / 8x8): A's transposed rows of 64 + pad, counted against a brute-force
//     count of the same lanes' banks; the pad chosen is the cheapest multiple of 4 (68: at most
//     3-way stores, against 24-way at 64), the fragment loads conflict-free;
//   - the step loop's unroll factor (2048 FMAs: the k-24 loop of 64 FMAs fully) and the loop
//     instructions a rolled one keeps.
#include "test.h"

#include "gpu-plan.h"

#include <math.h>
#include <string.h>

static void test_wavefronts(void) {
    int64_t w[32];
    for (int32_t i = 0; i < 32; i++)
        w[i] = i;
    RT_EXPECT_EQ(rt_gpu_bank_wavefronts(w, 32, 1, 32), 1); // consecutive words
    for (int32_t i = 0; i < 32; i++)
        w[i] = 2 * i;
    RT_EXPECT_EQ(rt_gpu_bank_wavefronts(w, 32, 1, 32), 2); // stride 2: 2-way
    for (int32_t i = 0; i < 32; i++)
        w[i] = 33 * i;
    RT_EXPECT_EQ(rt_gpu_bank_wavefronts(w, 32, 1, 32), 1); // odd stride: conflict-free
    for (int32_t i = 0; i < 32; i++)
        w[i] = 64 * i;
    RT_EXPECT_EQ(rt_gpu_bank_wavefronts(w, 32, 1, 32), 32); // one bank
    for (int32_t i = 0; i < 32; i++)
        w[i] = 64 * (i / 8);
    RT_EXPECT_EQ(rt_gpu_bank_wavefronts(w, 32, 1, 32), 4); // 4 words, broadcast to 8 lanes each
    for (int32_t i = 0; i < 32; i++)
        w[i] = 4 * i;
    RT_EXPECT_EQ(rt_gpu_bank_wavefronts(w, 32, 4, 32), 4); // 128-bit, contiguous: 4 phases
    for (int32_t i = 0; i < 32; i++)
        w[i] = 4 * (i % 8);
    RT_EXPECT_EQ(rt_gpu_bank_wavefronts(w, 32, 4, 32), 4); // 128-bit, phases broadcast
    for (int32_t i = 0; i < 32; i++)
        w[i] = 8 * i;
    RT_EXPECT_EQ(rt_gpu_bank_wavefronts(w, 32, 4, 32), 8); // 128-bit, rows 32 B apart: 2-way
    for (int32_t i = 0; i < 32; i++)
        w[i] = i < 16 ? 64 * i : -1;
    RT_EXPECT_EQ(rt_gpu_bank_wavefronts(w, 32, 1, 32), 16); // inactive lanes do not count
    RT_EXPECT_EQ(rt_gpu_bank_wavefronts(w, 32, 1, 0), 1);   // no banks
}

// Brute force: the wavefronts of the scalar copy of A(m, k)'s 64 x 24 tile into [k][stride]
// (element l: k = l % 24, m = l / 24, word k * stride + m), 64 threads, per warp store.
static double copy_ways_brute(int64_t stride) {
    double sum = 0;
    int32_t n = 0;
    for (int64_t c = 0; c < 24; c++)
        for (int64_t wp = 0; wp < 2; wp++) {
            int32_t count[32][64] = {{0}}, most = 0;
            for (int64_t i = 0; i < 32; i++) {
                int64_t l = c * 64 + wp * 32 + i;
                int64_t word = (l % 24) * stride + l / 24;
                int32_t b = (int32_t)(word % 32);
                int32_t k = 0;
                while (count[b][k] && count[b][k] != (int32_t)word + 1)
                    k++;
                count[b][k] = (int32_t)word + 1;
                most = k + 1 > most ? k + 1 : most;
            }
            sum += most;
            n++;
        }
    return sum / n;
}

static void test_odd_gemm(void) {
    rt_device dev;
    rt_err err = {0};
    RT_EXPECT_EQ(rt_hal_load_device("devices/h100.ini", &dev, &err), RT_OK);
    rt_arena *a = rt_arena_new(1 << 20);
    rt_op *op = NULL;
    rt_perf_result *r = NULL;
    rt_size_binding odd[3] = {{"M", 1000}, {"N", 1000}, {"K", 999}};
    rt_perf_options popt = {.top_k = 1};
    RT_EXPECT(rt_spec_load(a, "examples/matmul.spec", odd, 3, &op, &err) == RT_OK &&
              rt_perf_construct(a, op, &dev, &popt, &r, &err) == RT_OK);
    const rt_gpu_phase_plan *ph = r && r->cands[0].gpu ? &r->cands[0].gpu->phases[0] : NULL;
    RT_EXPECT(ph && ph->mode == RT_GPU_STAGED && ph->vec4 && ph->threads == 64);
    if (!ph || ph->n_stage != 2) {
        rt_arena_free(a);
        return;
    }
    const rt_gpu_stage *sa = NULL, *sb = NULL;
    for (int32_t i = 0; i < 2; i++) {
        const char *name = op->tensors[ph->stage[i].read->tensor].name;
        if (strcmp(name, "A") == 0)
            sa = &ph->stage[i];
        else
            sb = &ph->stage[i];
    }
    int64_t k_step = 0;
    for (int32_t v = 0; v < RT_GPU_PLAN_MAX_VARS; v++)
        k_step = ph->red_T1[v] > 0 ? ph->red_T1[v] : k_step;
    RT_EXPECT(sa && sb && k_step == 24 && sa->span[0] == 64 && sa->span[1] == 24);
    if (!sa || !sb || k_step != 24) {
        rt_arena_free(a);
        return;
    }
    // A: transposed, rows of 64 + 4; its copy scalar (rows of 999 floats are not aligned)
    RT_EXPECT(sa->vdim == 0 && sa->stride[0] == 1 && sa->stride[1] == 68 && !sa->gvec);
    rt_gpu_smem_cost c;
    rt_gpu_stage_smem(ph, sa, false, 32, 32, &c);
    RT_EXPECT(fabs(c.store_ways - copy_ways_brute(68)) < 1e-9);
    RT_EXPECT(fabs(c.store_ways - 8.0 / 3) < 1e-9 && c.store_instr == 24); // 3-way, 2 where a
    // warp's 32 elements span two rows of m
    RT_EXPECT(fabs(c.load_ways - 1) < 1e-9 && c.load_instr == 2); // 8 m per 128-bit: 2 loads
    // every other multiple of 4 costs as much or more; rows of 64 put a warp's 24 k on a bank
    rt_gpu_stage alt = *sa;
    double best = c.store_instr * c.store_ways + 24 * c.load_instr * c.load_ways;
    for (int64_t pad = 0; pad < 32; pad += 4) {
        int64_t got = rt_gpu_stage_pad(ph, &alt, 64 + pad, 32, 32, 32); // one candidate: pad 0
        RT_EXPECT_EQ(got, 0);
        RT_EXPECT_EQ(alt.stride[1], 64 + pad);
        rt_gpu_smem_cost ca;
        rt_gpu_stage_smem(ph, &alt, false, 32, 32, &ca);
        RT_EXPECT(fabs(ca.store_ways - copy_ways_brute(64 + pad)) < 1e-9);
        RT_EXPECT(ca.store_instr * ca.store_ways + 24 * ca.load_instr * ca.load_ways >=
                  best - 1e-9);
    }
    RT_EXPECT(fabs(copy_ways_brute(64) - 64.0 / 3) < 1e-9); // 24-way, 16 where two rows of m
    RT_EXPECT_EQ(rt_gpu_stage_pad(ph, &alt, 64, 4, 32, 32), 4);
    RT_EXPECT(alt.stride[1] == 68 && alt.elems == 24 * 68);
    // B: [k][n] as is, rows of 64; the 128-bit copy (interior) and fragments conflict-free
    RT_EXPECT(sb->vdim == 1 && sb->stride[1] == 1 && sb->stride[0] == 64);
    rt_gpu_stage_smem(ph, sb, true, 32, 32, &c);
    RT_EXPECT(fabs(c.store_ways - 1) < 1e-9 && c.store_instr == 6);
    RT_EXPECT(fabs(c.load_ways - 1) < 1e-9 && c.load_instr == 2);
    // the plan unrolls the k step fully; the model prices a rolled one's loop instructions
    RT_EXPECT_EQ(ph->step_unroll, 24);
    rt_gpu_plan rolled = *r->cands[0].gpu;
    rt_gpu_phase_plan rph = *ph;
    rph.step_unroll = 1;
    rolled.phases = &rph;
    double s_full = rt_gpu_plan_main_issue_share(r->cands[0].gpu, r->model->main_stmt);
    double s_rolled = rt_gpu_plan_main_issue_share(&rolled, r->model->main_stmt);
    RT_EXPECT(fabs(64 / s_rolled - 64 / s_full - (RT_GPU_LOOP_INSTRS + 3 * 2)) < 1e-9);
    rt_arena_free(a);
}

static void test_unroll(void) {
    RT_EXPECT_EQ(rt_gpu_step_unroll(24, 64), 24); // the odd GEMM's k step: fully
    RT_EXPECT_EQ(rt_gpu_step_unroll(16, 64), 16);
    RT_EXPECT_EQ(rt_gpu_step_unroll(32, 64), 32);
    RT_EXPECT_EQ(rt_gpu_step_unroll(48, 64), 24); // 3072 FMAs: by the largest divisor in 2048
    RT_EXPECT_EQ(rt_gpu_step_unroll(7, 512), 1);  // no divisor in 4: rolled
    RT_EXPECT(rt_gpu_step_loop_instrs(24, 24, 2) == 0);
    RT_EXPECT(fabs(rt_gpu_step_loop_instrs(48, 24, 2) - (RT_GPU_LOOP_INSTRS + 2) / 24.0) < 1e-12);
    RT_EXPECT(fabs(rt_gpu_step_loop_instrs(7, 1, 2) - (RT_GPU_LOOP_INSTRS + 6)) < 1e-12);
}

int main(void) {
    test_wavefronts();
    test_odd_gemm();
    test_unroll();
    return rt_test_finish("test-gpu-smem");
}
