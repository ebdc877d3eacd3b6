// test-gpu-plan.c: the GPU plan made once (perfmodel/gpu-plan.c), no GPU needed.
//   - every candidate of every example on every GPU device carries a plan, its threads per block
//     are the plan's (the model prices the plan), and no two candidates share a plan (equal
//     plans are merged during construction: top-K means K different kernels);
//   - the lowering executes the candidate's plan: its header prints that plan, and a plan
//     changed after construction changes the kernel (the lowering does not re-derive it);
//   - the grouped block order comes from the device file (raster_group_blocks), not the arch.
#include "test.h"

#include "gpu-plan.h"
#include "gpu.h"

#include <dirent.h>
#include <string.h>

static const char *const gpu_devs[] = {
    "devices/a100.ini", "devices/h100.ini", "devices/v100.ini",   "devices/t4.ini",
    "devices/k80.ini",  "devices/mi50.ini", "devices/mi250x.ini", "devices/pocl-cpu.ini"};

static rt_perf_result *construct(rt_arena *a, const char *spec, const rt_device *dev, int32_t k) {
    rt_op *op = NULL;
    rt_perf_result *r = NULL;
    rt_perf_options popt = {.top_k = k};
    rt_err err = {0};
    if (rt_spec_load(a, spec, NULL, 0, &op, &err) != RT_OK ||
        rt_perf_construct(a, op, dev, &popt, &r, &err) != RT_OK)
        return NULL;
    return r;
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

int main(void) {
    test_candidates();
    test_lowering_executes_plan();
    return rt_test_finish("test-gpu-plan");
}
