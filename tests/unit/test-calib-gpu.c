// test-calib-gpu: the GPU probes of rtcalib without a GPU. The sweeps and launch shapes, the
// generated sources per dialect, the host logic on synthetic timings (throughputs, the best
// bandwidth, bank replay factors, launch overhead, bad timings, noisy values refused) merged
// into a device and written back as INI, the probes compiled with NVRTC for sm_75/80/90 (and
// sm_70's fallback) and with hipRTC for gfx906/gfx90a without spills, and the "no GPU" error.
// OpenCL runs are in tests/num/test-calib-opencl.c (hipRTC and PoCL cannot share a process).
#include "calib.h"
#include "test.h"

#include <unistd.h>

static void load(const char *name, rt_device *dev) {
    char path[512];
    snprintf(path, sizeof path, "%s/devices/%s", RTGEN_SOURCE_DIR, name);
    rt_err e;
    rt_err_clear(&e);
    rt_status st = rt_hal_load_device(path, dev, &e);
    RT_EXPECT_EQ(st, RT_OK);
    if (st != RT_OK)
        fprintf(stderr, "%s: %s\n", path, e.msg);
}

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

// ---------------------------------------------------------------------------------------------
// Sweeps and shapes
// ---------------------------------------------------------------------------------------------

static void test_sweep(void) {
    static rt_device t4, h100, pocl;
    load("t4.ini", &t4);
    load("h100.ini", &h100);
    load("pocl-cpu.ini", &pocl);
    int32_t w[RT_MAX_CURVE_POINTS];
    int32_t n = rt_calib_gpu_sweep(&t4, false, w); // 1024 threads / 32 lanes
    RT_EXPECT_EQ(n, 6);
    RT_EXPECT_EQ(w[0], 1);
    RT_EXPECT_EQ(w[5], 32);
    n = rt_calib_gpu_sweep(&t4, true, w);
    RT_EXPECT_EQ(n, 4);
    RT_EXPECT_EQ(w[1], 4);
    RT_EXPECT_EQ(w[2], 16);
    RT_EXPECT_EQ(w[3], 32);
    n = rt_calib_gpu_sweep(&pocl, false, w); // 4096 / 16 = 256
    RT_EXPECT_EQ(n, 9);
    RT_EXPECT_EQ(w[8], 256);
    for (int32_t i = 1; i < n; i++)
        RT_EXPECT(w[i] > w[i - 1]);

    RT_EXPECT_EQ(rt_calib_gpu_inflight_bytes(&t4, 4), 4 * 32 * 16 * 4);
    int32_t tpb, bpu;
    rt_calib_gpu_spread(&h100, 64, &tpb, &bpu); // 2048 threads: 2 blocks of 1024
    RT_EXPECT_EQ(tpb, 1024);
    RT_EXPECT_EQ(bpu, 2);
    rt_calib_gpu_spread(&h100, 3, &tpb, &bpu);
    RT_EXPECT_EQ(tpb, 96);
    RT_EXPECT_EQ(bpu, 1);
    rt_calib_gpu_spread(&pocl, 256, &tpb, &bpu);
    RT_EXPECT_EQ(tpb, 4096);
    RT_EXPECT_EQ(bpu, 1);
}

// ---------------------------------------------------------------------------------------------
// Plans and sources
// ---------------------------------------------------------------------------------------------

static const rt_calib_gpu_kernel *find_kernel(const rt_calib_gpu_plan *p, const char *name) {
    for (int32_t i = 0; i < p->n_kernels; i++)
        if (strcmp(p->kernels[i].name, name) == 0)
            return &p->kernels[i];
    return NULL;
}

static int32_t count_target(const rt_calib_gpu_plan *p, rt_calib_target t) {
    int32_t n = 0;
    for (int32_t i = 0; i < p->n_meas; i++)
        n += p->meas[i].v.target == t;
    return n;
}

static void test_plan(void) {
    static rt_device v100, mi50, mi250x, pocl, cpu;
    load("v100.ini", &v100);
    load("mi50.ini", &mi50);
    load("mi250x.ini", &mi250x);
    load("pocl-cpu.ini", &pocl);
    load("x86-avx2.ini", &cpu);
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err e;
    rt_err_clear(&e);
    rt_calib_gpu_plan *p = NULL;

    // Full plan on cuda: 64 tile shapes (16 written per TEU), WMMA, one source per kernel.
    RT_EXPECT_EQ(rt_calib_gpu_plan_new(a, &v100, false, &p, &e), RT_OK);
    RT_EXPECT_EQ(p->n_kernels, 1 + 1 + 64 + 1 + 1);
    RT_EXPECT_EQ(count_target(p, RT_CALIB_INSN), 16);
    RT_EXPECT_EQ(count_target(p, RT_CALIB_CURVE), 7); // 1..64 warps per SM
    RT_EXPECT_EQ(count_target(p, RT_CALIB_MMA), 1);
    RT_EXPECT_EQ(count_target(p, RT_CALIB_LAUNCH), 1);
    const rt_calib_gpu_kernel *k = find_kernel(p, "rt_calib_fma_3x5");
    RT_EXPECT(k != NULL);
    if (k) {
        RT_EXPECT(strstr(k->source,
                         "extern \"C\" __global__ void __launch_bounds__(256) rt_calib_fma_3x5(") !=
                  NULL);
        RT_EXPECT(strstr(k->source, "c2_4 = fmaf(a2, b4, c2_4);") != NULL);
        RT_EXPECT(strstr(k->source, "c3_0") == NULL);
        RT_EXPECT(strstr(k->source, "rt_calib_read") == NULL); // one kernel per source
    }
    k = find_kernel(p, "rt_calib_mma_f16");
    RT_EXPECT(k && strstr(k->source, "wmma::mma_sync(c3, a, b, c3);") != NULL);
    // Every accumulator element reaches the output, so no half of a product can be dropped.
    RT_EXPECT(k && strstr(k->source, "for (int i = 0; i < c0.num_elements; i++)") != NULL);
    RT_EXPECT(k && strstr(k->source, " + c3.x[i];") != NULL);
    k = find_kernel(p, "rt_calib_shared");
    RT_EXPECT(k && strstr(k->source, "__shared__ float s[4096];") != NULL);
    RT_EXPECT(k && strstr(k->source, "(t % 32) * stride") != NULL);
    for (int32_t i = 0; i < p->n_meas; i++) {
        const rt_calib_gpu_meas *m = &p->meas[i];
        if (m->v.target == RT_CALIB_INSN) {
            RT_EXPECT_EQ(m->threads_per_block, 4 * 32); // one warp per TEU
            RT_EXPECT_NEAR(m->scale, 1.0 / 80, 1e-15);
        }
        if (m->v.target == RT_CALIB_CURVE)
            RT_EXPECT_EQ(m->v.curve_bytes, rt_calib_gpu_inflight_bytes(&v100, m->warps_per_unit));
    }

    // hip: no matrix cores on gfx906, MFMA on gfx90a.
    RT_EXPECT_EQ(rt_calib_gpu_plan_new(a, &mi50, true, &p, &e), RT_OK);
    RT_EXPECT(find_kernel(p, "rt_calib_mma_f16") == NULL);
    k = find_kernel(p, "rt_calib_shared");
    RT_EXPECT(k && strstr(k->source, "(t % 64) * stride") != NULL);
    RT_EXPECT_EQ(rt_calib_gpu_plan_new(a, &mi250x, true, &p, &e), RT_OK);
    k = find_kernel(p, "rt_calib_mma_f16");
    RT_EXPECT(k && strstr(k->source, "__builtin_amdgcn_mfma_f32_16x16x16f16") != NULL);

    // opencl: one program holding every probe.
    RT_EXPECT_EQ(rt_calib_gpu_plan_new(a, &pocl, true, &p, &e), RT_OK);
    RT_EXPECT(find_kernel(p, "rt_calib_mma_f16") == NULL);
    for (int32_t i = 0; i < p->n_kernels; i++) {
        RT_EXPECT(p->kernels[i].source == p->kernels[0].source);
        char decl[80];
        snprintf(decl, sizeof decl, "__kernel void %s(", p->kernels[i].name);
        RT_EXPECT(strstr(p->kernels[0].source, decl) != NULL);
    }
    RT_EXPECT(strstr(p->kernels[0].source, "const __local float *p = s + base") != NULL);
    RT_EXPECT(strstr(p->kernels[0].source, "__global const float4 *restrict in") != NULL);

    // Not a GPU class.
    rt_err_clear(&e);
    RT_EXPECT_EQ(rt_calib_gpu_plan_new(a, &cpu, true, &p, &e), RT_ERR_DEVICE);
    RT_EXPECT_STR(e.msg, "GPU probes need a GPU class (expected cuda, hip or opencl, got cpu)");
    rt_arena_free(a);
}

// ---------------------------------------------------------------------------------------------
// Host logic on synthetic timings
// ---------------------------------------------------------------------------------------------

static void fill(rt_calib_gpu_meas *m, double ns, double jitter) {
    m->n_samples = 5;
    for (int32_t i = 0; i < 5; i++)
        m->samples_ns[i] = ns * (1.0 + jitter * (i - 2) / 2.0);
}

static rt_calib_value *find_value(rt_calib_result *r, const char *prefix) {
    for (int32_t i = 0; i < r->n_values; i++)
        if (strncmp(r->values[i].name, prefix, strlen(prefix)) == 0)
            return &r->values[i];
    return NULL;
}

static void test_finish(void) {
    static rt_device t4, out, back;
    static rt_calib_result res;
    load("t4.ini", &t4);
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err e;
    rt_err_clear(&e);
    rt_calib_gpu_plan *p = NULL;
    RT_EXPECT_EQ(rt_calib_gpu_plan_new(a, &t4, true, &p, &e), RT_OK);
    if (!p) {
        rt_arena_free(a);
        return;
    }
    // Global: 1e8 bytes per launch; w warps per SM take 1e6 * 32 / w ns (best: 32 warps at
    // 100 GB/s... (1e8 B / 1e6 ns), with w = 16 at 50 GB/s).
    for (int32_t i = 0; i < p->n_meas; i++) {
        rt_calib_gpu_meas *m = &p->meas[i];
        const rt_calib_gpu_kernel *k = &p->kernels[m->kernel];
        switch (k->kind) {
        case RT_CALIB_GPU_GLOBAL:
            m->work = 1e8;
            fill(m, 1e6 * 32.0 / m->warps_per_unit, 0.02);
            break;
        case RT_CALIB_GPU_SHARED: // stride s: s-way conflicts up to 32
            m->work = 1e9;
            fill(m, 1e5 * m->stride_words, 0.01);
            break;
        case RT_CALIB_GPU_FMA: // 4e9 flop per launch in 1e6 ns: 4000 GFLOP/s
            m->work = 4e9;
            fill(m, 1e6, 0.0);
            break;
        case RT_CALIB_GPU_MMA:
            m->work = 6.5e10;
            fill(m, 1e6, 0.0);
            break;
        default: // launch: per-launch nanoseconds
            fill(m, 5000.0, 0.2);
            break;
        }
    }
    memset(&res, 0, sizeof res);
    RT_EXPECT_EQ(rt_calib_gpu_finish(p, &res, &e), RT_OK);
    rt_calib_value *v = find_value(&res, "global read, 32 warps per unit");
    RT_EXPECT(v != NULL);
    if (v) {
        // Throughputs keep the fastest sample: 1e8 B / (1e6 ns x 0.98).
        RT_EXPECT_NEAR(v->value, 1e8 / 0.98e6, 1e-6);
        RT_EXPECT_NEAR(v->stats.spread, (1e8 / 0.98e6 - 1e8 / 1.02e6) / 100.0, 1e-9);
        RT_EXPECT_EQ(v->target, RT_CALIB_CURVE);
        RT_EXPECT_EQ(v->curve_bytes, 32 * 32 * 64);
    }
    v = find_value(&res, "global read, best of sweep (32 warps per unit)");
    RT_EXPECT(v && v->target == RT_CALIB_LEVEL_BW && v->level == 0);
    v = find_value(&res, "shared read, stride 1 word");
    RT_EXPECT(v && v->target == RT_CALIB_LEVEL_BW && v->level == 1);
    RT_EXPECT(v && strcmp(v->note, "bank replay by stride: 1:1.00x 2:2.00x 32:32.00x") == 0);
    if (v)
        RT_EXPECT_NEAR(v->value, 1e9 / (1e5 * 0.99), 1e-6);
    v = find_value(&res, "shared read, stride 32 words");
    RT_EXPECT(v && v->target == RT_CALIB_REPORT);
    RT_EXPECT(v && strcmp(v->note, "replay 32.00x against stride 1") == 0);
    v = find_value(&res, "f32 fma 4x4 tile");
    RT_EXPECT(v && v->target == RT_CALIB_INSN && strcmp(v->insn, "f32_fma_4x4") == 0);
    if (v)
        RT_EXPECT_NEAR(v->value, 4000.0 / 40, 1e-9); // per SM
    v = find_value(&res, "f32 fma 8x8 tile, full");
    RT_EXPECT(v && v->target == RT_CALIB_PEAK);
    if (v)
        RT_EXPECT_NEAR(v->value, 4000.0, 1e-9);
    v = find_value(&res, "launch");
    RT_EXPECT(v && v->target == RT_CALIB_LAUNCH);
    if (v) {
        RT_EXPECT_NEAR(v->value, 4.0, 1e-9); // overheads keep the lowest sample, in us
        RT_EXPECT_NEAR(v->stats.spread, 0.4, 1e-9);
    }

    // Merged into the device: the launch overhead (spread 40%) is refused at 10%.
    RT_EXPECT_EQ(rt_calib_gpu_apply(&t4, &res, 0.10, "2024-05-06", &out, &e), RT_OK);
    if (e.status != RT_OK)
        fprintf(stderr, "apply: %s\n", e.msg);
    RT_EXPECT_EQ(out.level[0].n_curve, 4);
    RT_EXPECT_EQ(out.level[0].curve[0].bytes, 1 * 32 * 64);
    RT_EXPECT_NEAR(out.level[0].curve[3].gbps, 102.0, 1e-9); // 4 significant digits
    RT_EXPECT_NEAR(out.level[0].bandwidth_gbps, 102.0, 1e-9);
    RT_EXPECT_NEAR(out.level[1].bandwidth_gbps, 10100.0, 1e-9);
    RT_EXPECT_NEAR(out.peak_gflops[RT_DTYPE_F32], 4000.0, 1e-9);
    RT_EXPECT_NEAR(out.mma_gflops[RT_DTYPE_F16], 65000.0, 1e-9);
    RT_EXPECT_EQ(out.launch_overhead_us, 0.0);
    RT_EXPECT(find_value(&res, "launch")->refused);
    RT_EXPECT_EQ(out.n_insn, 4); // 1x1, 2x4, 4x4, 8x8
    for (int32_t i = 0; i < out.n_insn; i++)
        RT_EXPECT_NEAR(out.insn[i].gflops_per_teu, 100.0 / 4, 1e-9);
    RT_EXPECT(strncmp(out.compute_source, "measured: rtcalib 2024-05-06 (", 30) == 0);
    RT_EXPECT(strstr(out.compute_source, "f32_fma_2x4_gflops_per_teu") != NULL);
    RT_EXPECT(strncmp(out.level[0].source, "measured: rtcalib 2024-05-06 (bandwidth_", 40) == 0);

    // Written as INI and read back.
    rt_buf ini;
    rt_buf_init(&ini, a);
    RT_EXPECT_EQ(rt_hal_write_ini(&out, "test", &ini, &e), RT_OK);
    RT_EXPECT(ini.data && strstr(ini.data, "f32_fma_4x4_gflops_per_teu = 25\n") != NULL);
    char path[] = "/tmp/rt-calib-gpu-XXXXXX";
    int fd = mkstemp(path);
    RT_EXPECT(fd >= 0);
    if (fd >= 0 && ini.data) {
        RT_EXPECT_EQ(write(fd, ini.data, ini.len), (long long)ini.len);
        close(fd);
        rt_err_clear(&e);
        RT_EXPECT_EQ(rt_hal_load_device(path, &back, &e), RT_OK);
        RT_EXPECT_EQ(back.n_insn, 4);
        RT_EXPECT_EQ(back.level[0].n_curve, 4);
        RT_EXPECT_NEAR(back.insn[2].gflops_per_teu, 25.0, 1e-12);
        unlink(path);
    }

    // A device without mma_shape gets the probe's shape with a measured mma peak.
    static rt_device mi50;
    load("mi50.ini", &mi50);
    memset(&res, 0, sizeof res);
    rt_calib_value *mma = &res.values[res.n_values++];
    snprintf(mma->name, sizeof mma->name, "mma");
    mma->target = RT_CALIB_MMA;
    mma->dtype = RT_DTYPE_F16;
    mma->value = 300000.0;
    mma->stats = (rt_calib_stats){.n = 3, .min = 3e5, .median = 3e5, .max = 3e5};
    rt_err_clear(&e);
    RT_EXPECT_EQ(rt_calib_gpu_apply(&mi50, &res, 0.1, "2024-05-06", &out, &e), RT_OK);
    RT_EXPECT_EQ(out.mma_m * 10000 + out.mma_n * 100 + out.mma_k, 161616);
    mma->stats.min = 1e5; // too noisy: neither peak nor shape
    mma->stats.spread = 2.0 / 3.0;
    RT_EXPECT_EQ(rt_calib_gpu_apply(&mi50, &res, 0.1, "2024-05-06", &out, &e), RT_OK);
    RT_EXPECT_EQ(out.mma_m, 0);
    RT_EXPECT_EQ(out.mma_gflops[RT_DTYPE_F16], 0.0);

    // Bad timings.
    rt_calib_gpu_meas *m0 = &p->meas[0];
    m0->samples_ns[1] = 0.0;
    memset(&res, 0, sizeof res);
    rt_err_clear(&e);
    RT_EXPECT_EQ(rt_calib_gpu_finish(p, &res, &e), RT_ERR_BACKEND);
    RT_EXPECT_STR(e.msg, "global read, 1 warp per unit (2048 B in flight): bad timing 2 "
                         "(expected a time > 0 ns, got 0)");
    m0->n_samples = 0;
    rt_err_clear(&e);
    RT_EXPECT_EQ(rt_calib_gpu_finish(p, &res, &e), RT_ERR_BACKEND);
    RT_EXPECT(strstr(e.msg, "no timings (expected at least 1)") != NULL);
    rt_arena_free(a);
}

// ---------------------------------------------------------------------------------------------
// Compiling the probes
// ---------------------------------------------------------------------------------------------

static void compile_quick(const char *ini, const char *want_arch) {
    static rt_device dev;
    load(ini, &dev);
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err e;
    rt_err_clear(&e);
    rt_calib_gpu_plan *p = NULL;
    RT_EXPECT_EQ(rt_calib_gpu_plan_new(a, &dev, true, &p, &e), RT_OK);
    rt_status st = p ? rt_calib_gpu_compile(a, p, 2, &e) : RT_ERR_DEVICE;
    RT_EXPECT_EQ(st, RT_OK);
    if (st != RT_OK) {
        fprintf(stderr, "%s: %s\n%s\n", ini, e.msg, e.log ? e.log : "");
        rt_arena_free(a);
        return;
    }
    RT_EXPECT_STR(p->compiled_arch, want_arch);
    for (int32_t i = 0; i < p->n_kernels; i++) {
        const rt_gpu_resources *r = &p->kernels[i].bin->res;
        RT_EXPECT(r->regs > 0 || p->kernels[i].kind == RT_CALIB_GPU_LAUNCH);
        RT_EXPECT_EQ(r->spill_store_bytes + r->spill_load_bytes, 0);
        if (p->kernels[i].kind == RT_CALIB_GPU_SHARED)
            RT_EXPECT_EQ(r->smem_bytes, 4 * RT_CALIB_GPU_SHARED_WORDS);
        if (p->kernels[i].kind == RT_CALIB_GPU_FMA && p->kernels[i].m == 8)
            RT_EXPECT(r->regs >= 64); // the 8x8 tile lives in registers
    }
    rt_buf b;
    rt_buf_init(&b, a);
    rt_calib_gpu_print_resources(p, &b);
    printf("%s", b.data);
    RT_EXPECT(strstr(b.data, "rt_calib_fma_8x8") != NULL);
    rt_arena_free(a);
}

static void test_compile_cuda(void) {
    static rt_device t4;
    load("t4.ini", &t4);
    if (!built_with(&t4)) {
        rt_test_skip("cuda: not built with NVRTC");
        return;
    }
    compile_quick("a100.ini", "sm_80");
    compile_quick("h100.ini", "sm_90");

    // Without a GPU: compiled, then "no GPU". With one, the T4 file does not match it.
    rt_arena *a = rt_arena_new(1 << 20);
    static rt_calib_result res;
    rt_calib_opts o = {.repeats = 2, .max_spread = 0.1, .quick = true};
    rt_calib_gpu_plan *p = NULL;
    rt_err e;
    rt_err_clear(&e);
    rt_status st = rt_calib_gpu_run(a, &t4, &o, &p, &res, &e);
    RT_EXPECT(st != RT_OK);
    RT_EXPECT(p != NULL && p->kernels[0].bin != NULL);
    for (int32_t i = 0; p && i < p->n_kernels; i++) // compiled for sm_75 without spills
        RT_EXPECT(p->kernels[i].bin && p->kernels[i].bin->res.spill_store_bytes == 0 &&
                  strcmp(p->kernels[i].bin->compiled_arch, "sm_75") == 0);
    if (st == RT_ERR_BACKEND) {
        RT_EXPECT(rt_gpu_err_is_absent(&e));
        const char *tail = "; probes compiled for sm_75 but not run";
        size_t n = strlen(e.msg), m = strlen(tail);
        RT_EXPECT(n > m && strcmp(e.msg + n - m, tail) == 0);
        printf("%s\n", e.msg);
    } else {
        RT_EXPECT_EQ(st, RT_ERR_DEVICE);
        RT_EXPECT(strstr(e.msg, "arch does not match the GPU present") != NULL);
    }
    rt_err_clear(&e);
    o.repeats = 1;
    RT_EXPECT_EQ(rt_calib_gpu_run(a, &t4, &o, &p, &res, &e), RT_ERR_USAGE);
    rt_arena_free(a);
}

static void test_compile_hip(void) {
    static rt_device mi50;
    load("mi50.ini", &mi50);
    if (!built_with(&mi50)) {
        rt_test_skip("hip: not built with hipRTC");
        return;
    }
    compile_quick("mi50.ini", "gfx906");
    compile_quick("mi250x.ini", "gfx90a");
}

int main(void) {
    test_sweep();
    test_plan();
    test_finish();
    test_compile_cuda();
    test_compile_hip();
    return rt_test_finish("test-calib-gpu");
}
