// test-gpu-compile: in-process compilation of a hand-written tiled SGEMM (shared memory,
// barriers, a 4x4 register tile, __launch_bounds__) with NVRTC for sm_75/80/90 and with hipRTC
// for gfx906/gfx90a, the resources read back (registers, spills, shared memory), the sm_70
// fallback note, refusal of gfx942 without calling hipRTC, compile errors with their log,
// parallel compilation with a timeout, and the occupancy calculator. No GPU needed.
#include "hal-gpu.h"
#include "test.h"
#include "gpu-sgemm.h"

#include <time.h>

// 64 live floats per thread, indexed dynamically: spills under --maxrregcount=24.
static const char spill_src[] =
    "extern \"C\" __global__ void big(const float *x, float *y, int n) {\n"
    "    float r[64];\n"
    "    for (int i = 0; i < 64; i++) r[i] = x[threadIdx.x * 64 + i];\n"
    "    for (int k = 0; k < n; k++)\n"
    "        for (int i = 0; i < 64; i++) r[i] = r[i] * r[(i + k) & 63] + 1.0f;\n"
    "    float s = 0.0f;\n"
    "    for (int i = 0; i < 64; i++) s += r[i];\n"
    "    y[threadIdx.x] = s;\n"
    "}\n";

static const char broken_src[] = "extern \"C\" __global__ void sgemm(int n) {\n"
                                 "    int x = n +;\n"
                                 "}\n";

static bool built_with(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_gpu_binary *bin;
    rt_err e;
    rt_err_clear(&e);
    rt_status st = rt_gpu_compile(a, dev, "", "k", NULL, &bin, &e);
    bool built = !(st == RT_ERR_BACKEND && strstr(e.msg, "not built with"));
    rt_arena_free(a);
    return built;
}

static bool is_elf(const rt_gpu_binary *b) {
    return b->image_bytes > 4 && memcmp(b->image,
                                        "\x7f"
                                        "ELF",
                                        4) == 0;
}

static void test_cuda_sgemm(rt_arena *a, const char *arch) {
    rt_device dev;
    make_gpu(&dev, RT_DEVCLASS_CUDA, arch, 32, 98304);
    rt_gpu_compile_options o = {.threads_per_block = 256};
    rt_gpu_binary *bin = NULL;
    rt_err e;
    rt_err_clear(&e);
    rt_status st = rt_gpu_compile(a, &dev, sgemm_src, "sgemm", &o, &bin, &e);
    RT_EXPECT_EQ(st, RT_OK);
    if (st != RT_OK) {
        fprintf(stderr, "%s: %s\n%s\n", arch, e.msg, e.log ? e.log : "");
        return;
    }
    RT_EXPECT_STR(bin->compiled_arch, arch);
    RT_EXPECT(bin->note == NULL);
    RT_EXPECT_STR(bin->symbol, "sgemm");
    RT_EXPECT(is_elf(bin));
    RT_EXPECT(strstr(bin->options, "--ptxas-options=-v") != NULL);
#if defined(RT_TEST_NVRTC_MAJOR)
    // NVRTC 12.9+ answers a repeated compile from the driver's cache without ptxas (no resource
    // report) unless told --no-cache; older ones reject the option.
    bool caches =
        RT_TEST_NVRTC_MAJOR > 12 || (RT_TEST_NVRTC_MAJOR == 12 && RT_TEST_NVRTC_MINOR >= 9);
    RT_EXPECT_EQ(strstr(bin->options, "--no-cache") != NULL, caches);
#endif
    RT_EXPECT(bin->res.regs > 16 && bin->res.regs <= 255);
    RT_EXPECT_EQ(bin->res.spill_store_bytes, 0);
    RT_EXPECT_EQ(bin->res.spill_load_bytes, 0);
    RT_EXPECT_EQ(bin->res.smem_bytes, 2 * 8 * 64 * 4); // As + Bs
    RT_EXPECT(bin->res.barriers >= 1);
    RT_EXPECT_EQ(bin->occ.threads_per_block, 256);
    RT_EXPECT(bin->occ.blocks_per_unit >= 1 && bin->occ.occupancy > 0.0 &&
              bin->occ.occupancy <= 1.0);
    // Cross-check the occupancy against the calculator's rule by hand.
    int64_t per_block = ((bin->res.regs * 32 + 255) / 256 * 256) * 8;
    int64_t want = 65536 / per_block < 8 ? 65536 / per_block : 8;
    RT_EXPECT_EQ(bin->occ.blocks_per_unit, want);
    printf("cuda %s: %d regs, %lld B smem, %zu B cubin, occupancy %.2f (%s), %.0f ms\n", arch,
           (int)bin->res.regs, (long long)bin->res.smem_bytes, bin->image_bytes, bin->occ.occupancy,
           bin->occ.limiter, bin->compile_ms);
}

static void test_cuda(void) {
    rt_arena *a = rt_arena_new(1 << 20);
    test_cuda_sgemm(a, "sm_75");
    test_cuda_sgemm(a, "sm_80");
    test_cuda_sgemm(a, "sm_90");
    // The same source and options again: with a CUDA driver present, NVRTC 12.9+ answers this
    // compile from the driver's cache without running ptxas (no resource report) unless rtgen
    // passes --no-cache. Without a driver (here) it only shows that the repeat is harmless.
    test_cuda_sgemm(a, "sm_90");

    // sm_70 (V100): not in NVRTC 13, compile-checked at the lowest supported arch.
    rt_device v100;
    make_gpu(&v100, RT_DEVCLASS_CUDA, "sm_70", 32, 98304);
    rt_gpu_binary *bin = NULL;
    rt_err e;
    rt_err_clear(&e);
    RT_EXPECT_EQ(rt_gpu_compile(a, &v100, sgemm_src, "sgemm", NULL, &bin, &e), RT_OK);
    if (bin) {
        RT_EXPECT_STR(bin->compiled_arch, "sm_75");
        RT_EXPECT(bin->note && strstr(bin->note, "sm_70 not supported by NVRTC "));
        RT_EXPECT(bin->note && strstr(bin->note, "; compile-checked for sm_75"));
        RT_EXPECT(bin->res.regs > 0);
        // no threads_per_block: the device maximum, and 1024 x regs fits 64K regs only if <= 64
        RT_EXPECT_EQ(bin->occ.threads_per_block, 1024);
        printf("sm_70 note: %s\n", bin->note ? bin->note : "(none)");
    }

    // A syntax error: RT_ERR_BACKEND, the first error line in the message, the log attached.
    rt_device a100;
    make_gpu(&a100, RT_DEVCLASS_CUDA, "sm_80", 32, 167936);
    rt_err_clear(&e);
    bin = NULL;
    RT_EXPECT_EQ(rt_gpu_compile(a, &a100, broken_src, "sgemm", NULL, &bin, &e), RT_ERR_BACKEND);
    RT_EXPECT(bin == NULL);
    RT_EXPECT(strstr(e.msg, "nvrtcCompileProgram") != NULL);
    RT_EXPECT(strstr(e.msg, "NVRTC_ERROR_COMPILATION") != NULL);
    RT_EXPECT(strstr(e.msg, "error: expected an expression") != NULL);
    RT_EXPECT(e.log && strstr(e.log, "sgemm.cu(2)") != NULL);

    // A kernel name the source does not define.
    rt_err_clear(&e);
    RT_EXPECT_EQ(rt_gpu_compile(a, &a100, sgemm_src, "no_such_kernel", NULL, &bin, &e),
                 RT_ERR_BACKEND);
    RT_EXPECT(e.log && strstr(e.log, "no_such_kernel") != NULL);

    // Forced spills: the ptxas report's spill bytes are read back.
    rt_gpu_compile_options o = {.threads_per_block = 128, .max_regs = 24};
    rt_err_clear(&e);
    RT_EXPECT_EQ(rt_gpu_compile(a, &a100, spill_src, "big", &o, &bin, &e), RT_OK);
    if (bin) {
        RT_EXPECT(bin->res.regs > 0 && bin->res.regs <= 24);
        RT_EXPECT(bin->res.spill_store_bytes > 0);
        RT_EXPECT(bin->res.spill_load_bytes > 0);
        RT_EXPECT(bin->res.stack_frame_bytes >= 256);
        RT_EXPECT(strstr(bin->options, "--maxrregcount=24") != NULL);
    }
    rt_arena_free(a);
}

static void test_cuda_many(void) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_device dev;
    make_gpu(&dev, RT_DEVCLASS_CUDA, "sm_80", 32, 167936);
    rt_gpu_compile_job jobs[4] = {
        {.source = sgemm_src, .kernel_name = "sgemm"},
        {.source = broken_src, .kernel_name = "sgemm"},
        {.source = spill_src, .kernel_name = "big"},
        {.source = sgemm_src, .kernel_name = "sgemm"},
    };
    rt_gpu_compile_options o = {.threads_per_block = 256, .timeout_s = 60.0};
    rt_err e;
    rt_err_clear(&e);
    RT_EXPECT_EQ(rt_gpu_compile_many(a, &dev, &o, 2, jobs, 4, &e), RT_OK);
    RT_EXPECT_EQ(jobs[0].status, RT_OK);
    RT_EXPECT_EQ(jobs[1].status, RT_ERR_BACKEND);
    RT_EXPECT_EQ(jobs[2].status, RT_OK);
    RT_EXPECT_EQ(jobs[3].status, RT_OK);
    RT_EXPECT(jobs[1].out == NULL && jobs[1].err.log && strstr(jobs[1].err.log, "error"));
    if (jobs[0].out && jobs[3].out) {
        RT_EXPECT(is_elf(jobs[0].out));
        RT_EXPECT_EQ(jobs[0].out->res.regs, jobs[3].out->res.regs);
        RT_EXPECT_EQ(jobs[0].out->image_bytes, jobs[3].out->image_bytes);
        RT_EXPECT_EQ(jobs[0].out->res.smem_bytes, 4096);
    }
    if (jobs[2].out)
        RT_EXPECT_STR(jobs[2].out->symbol, "big");

    // A timeout far below NVRTC's compile time: reported as failed, left to finish behind.
    rt_gpu_compile_job slow[2] = {{.source = sgemm_src, .kernel_name = "sgemm"},
                                  {.source = spill_src, .kernel_name = "big"}};
    rt_gpu_compile_options fast = {.timeout_s = 1e-6};
    RT_EXPECT_EQ(rt_gpu_compile_many(a, &dev, &fast, 2, slow, 2, &e), RT_OK);
    for (int i = 0; i < 2; i++) {
        RT_EXPECT_EQ(slow[i].status, RT_ERR_BACKEND);
        RT_EXPECT(slow[i].out == NULL);
        RT_EXPECT(strstr(slow[i].err.msg, "timed out") != NULL);
    }
    for (int i = 0; i < 3000 && rt_gpu_compile_pending() > 0; i++)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    RT_EXPECT_EQ(rt_gpu_compile_pending(), 0);
    rt_arena_free(a);
}

static void test_hip_sgemm(rt_arena *a, const char *arch) {
    rt_device dev;
    make_gpu(&dev, RT_DEVCLASS_HIP, arch, 64, 65536);
    rt_gpu_compile_options o = {.threads_per_block = 256};
    rt_gpu_binary *bin = NULL;
    rt_err e;
    rt_err_clear(&e);
    rt_status st = rt_gpu_compile(a, &dev, sgemm_src, "sgemm", &o, &bin, &e);
    RT_EXPECT_EQ(st, RT_OK);
    if (st != RT_OK) {
        fprintf(stderr, "%s: %s\n%s\n", arch, e.msg, e.log ? e.log : "");
        return;
    }
    RT_EXPECT_STR(bin->compiled_arch, arch);
    RT_EXPECT(is_elf(bin));
    RT_EXPECT(bin->res.regs > 8 && bin->res.regs <= 512);
    RT_EXPECT(bin->res.sregs > 0);
    RT_EXPECT_EQ(bin->res.spill_store_bytes, 0);
    RT_EXPECT_EQ(bin->res.smem_bytes, 4096);
    RT_EXPECT_EQ(bin->res.max_threads_per_block, 256); // from __launch_bounds__(256)
    RT_EXPECT(bin->occ.occupancy > 0.0 && bin->occ.occupancy <= 1.0);
    printf("hip %s: %d VGPRs, %d SGPRs, %lld B LDS, %zu B code object, %.0f ms\n", arch,
           (int)bin->res.regs, (int)bin->res.sregs, (long long)bin->res.smem_bytes,
           bin->image_bytes, bin->compile_ms);
}

static void test_hip(void) {
    rt_arena *a = rt_arena_new(1 << 20);
    test_hip_sgemm(a, "gfx906");
    test_hip_sgemm(a, "gfx90a");

    // gfx942 (MI300) is unknown to hipRTC 5.2's comgr: refused before compiling (hipRTC would
    // abort the process), at the INI's arch position.
    rt_device mi300;
    make_gpu(&mi300, RT_DEVCLASS_HIP, "gfx942", 64, 65536);
    rt_gpu_binary *bin = NULL;
    rt_err e;
    rt_err_clear(&e);
    RT_EXPECT_EQ(rt_gpu_compile(a, &mi300, sgemm_src, "sgemm", NULL, &bin, &e), RT_ERR_BACKEND);
    RT_EXPECT(strncmp(e.msg, "gfx942 is not supported by hipRTC 5.2 (supported: gfx", 52) == 0);
    RT_EXPECT(strstr(e.msg, "gfx906, ") != NULL && strstr(e.msg, "gfx90a") != NULL);
    RT_EXPECT_EQ(e.where.line, 4);
    RT_EXPECT_EQ(e.where.col, 9);

    rt_device mi50;
    make_gpu(&mi50, RT_DEVCLASS_HIP, "gfx906", 64, 65536);
    rt_err_clear(&e);
    RT_EXPECT_EQ(rt_gpu_compile(a, &mi50, broken_src, "sgemm", NULL, &bin, &e), RT_ERR_BACKEND);
    RT_EXPECT(strstr(e.msg, "hiprtcCompileProgram") != NULL);
    RT_EXPECT(e.log && strstr(e.log, "error") != NULL);
    rt_arena_free(a);
}

static void test_occupancy(void) {
    rt_device dev;
    make_gpu(&dev, RT_DEVCLASS_CUDA, "sm_80", 32, 98304);
    rt_gpu_resources r = {.regs = 32, .smem_bytes = 0};
    rt_gpu_occupancy o;
    rt_err e;
    rt_err_clear(&e);
    RT_EXPECT_EQ(rt_gpu_occupancy_of(&dev, &r, 256, &o, &e), RT_OK);
    RT_EXPECT_EQ(o.blocks_per_unit, 8);
    RT_EXPECT_NEAR(o.occupancy, 1.0, 1e-12);
    r.regs = 64; // 64 x 32 x 8 warps = 16384 per block: 4 blocks
    RT_EXPECT_EQ(rt_gpu_occupancy_of(&dev, &r, 256, &o, &e), RT_OK);
    RT_EXPECT_EQ(o.blocks_per_unit, 4);
    RT_EXPECT_NEAR(o.occupancy, 0.5, 1e-12);
    RT_EXPECT_STR(o.limiter, "registers");
    r.regs = 33; // 33 x 32 = 1056 -> 1280 per warp (granule 256): 6 blocks of 8 warps
    RT_EXPECT_EQ(rt_gpu_occupancy_of(&dev, &r, 256, &o, &e), RT_OK);
    RT_EXPECT_EQ(o.blocks_per_unit, 6);
    dev.reg_granule_warp = 0; // no granule in the device file: 1056 x 8 warps, 7 blocks
    RT_EXPECT_EQ(rt_gpu_occupancy_of(&dev, &r, 256, &o, &e), RT_OK);
    RT_EXPECT_EQ(o.blocks_per_unit, 7);
    dev.reg_granule_lane = 8; // per lane: 33 -> 40 x 32 = 1280 per warp, 6 blocks again
    RT_EXPECT_EQ(rt_gpu_occupancy_of(&dev, &r, 256, &o, &e), RT_OK);
    RT_EXPECT_EQ(o.blocks_per_unit, 6);
    dev.reg_granule_lane = 0;
    dev.reg_granule_warp = 256;
    r.regs = 32;
    r.smem_bytes = 40000; // 98304 / 40000 = 2 blocks
    RT_EXPECT_EQ(rt_gpu_occupancy_of(&dev, &r, 256, &o, &e), RT_OK);
    RT_EXPECT_EQ(o.blocks_per_unit, 2);
    RT_EXPECT_NEAR(o.occupancy, 0.25, 1e-12);
    RT_EXPECT_STR(o.limiter, "shared memory");
    r.smem_bytes = 0; // 100 threads -> 4 warps, 16 blocks by threads
    RT_EXPECT_EQ(rt_gpu_occupancy_of(&dev, &r, 100, &o, &e), RT_OK);
    RT_EXPECT_EQ(o.blocks_per_unit, 16);
    RT_EXPECT_NEAR(o.occupancy, 1.0, 1e-12);
    RT_EXPECT_EQ(rt_gpu_occupancy_of(&dev, &r, 32, &o, &e), RT_OK); // 64 by threads, 32 max
    RT_EXPECT_EQ(o.blocks_per_unit, 32);
    RT_EXPECT_STR(o.limiter, "blocks");
    RT_EXPECT_NEAR(o.occupancy, 0.5, 1e-12);
    RT_EXPECT_EQ(rt_gpu_occupancy_of(&dev, &r, 2048, &o, &e), RT_ERR_DEVICE);
    RT_EXPECT_STR(e.msg, "threads per block out of range (expected 1..1024, got 2048)");
    rt_err_clear(&e);
    RT_EXPECT_EQ(rt_gpu_occupancy_of(&dev, &r, 0, &o, &e), RT_ERR_DEVICE);

    // A CPU device is not a GPU class.
    rt_device cpu;
    make_gpu(&cpu, RT_DEVCLASS_CPU, "native", 16, 49152);
    rt_arena *a = rt_arena_new(1 << 12);
    rt_gpu_binary *bin;
    rt_err_clear(&e);
    RT_EXPECT_EQ(rt_gpu_compile(a, &cpu, sgemm_src, "sgemm", NULL, &bin, &e), RT_ERR_DEVICE);
    RT_EXPECT(strstr(e.msg, "is not a GPU class") != NULL);
    rt_arena_free(a);
}

int main(void) {
    rt_device probe;
    test_occupancy();
    make_gpu(&probe, RT_DEVCLASS_CUDA, "sm_80", 32, 98304);
    if (built_with(&probe)) {
        test_cuda();
        test_cuda_many();
    } else {
        rt_test_skip("not built with CUDA (NVRTC)");
    }
    make_gpu(&probe, RT_DEVCLASS_HIP, "gfx906", 64, 65536);
    if (built_with(&probe)) {
        test_hip();
    } else {
        rt_test_skip("not built with HIP (hipRTC)");
    }
    return rt_test_finish("test-gpu-compile");
}
