// test-hal-units.c: a device restricted to fewer of its cores (rt_hal_device_on_units, as the
// benchmarks construct a row for 1 of 2 cores): the whole-device peaks and cache bandwidths
// scale with the cores, so the CPU model's clock stays the same and its prediction for one core
// of a compute-bound GEMM (the token-rows projection q_proj, 1920 x 512 x 512) is about 4x the
// one for 4 cores, not the same (units alone lowered gave one core the whole device's FMA rate:
// 5.5 ms predicted, 12-15 ms measured on one Zen 3 core).
#include "test.h"
#include "perfmodel.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char q_proj[] =
    "size B = 32\nsize M = 512\nsize H = 8\nsize D = 64\n"
    "def q_proj(int32(B) len, float(b:B, len(b), M) X, float(M, H, D) Wq) -> (Q) {\n"
    "    Q(b, i, h, d) +=! X(b, i, m) * Wq(m, h, d)\n}\n";

static double predicted_ns(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    int64_t samples[32];
    for (int32_t i = 0; i < 32; i++)
        samples[i] = 60;
    rt_perf_length_dist d = {.tensor = "len"};
    rt_perf_options popt = {.top_k = 1, .lengths = &d, .n_lengths = 1};
    double ns = -1;
    if (rt_spec_parse(a, q_proj, "q_proj.spec", NULL, 0, &op, &err) == RT_OK &&
        rt_extent_dist_from_samples(a, samples, 32, (rt_loc){0}, &d.dist, &err) == RT_OK &&
        rt_perf_construct(a, op, dev, &popt, &perf, &err) == RT_OK && perf->n_cands > 0)
        ns = perf->cands[0].predicted_ns;
    else
        fprintf(stderr, "%s\n", err.msg);
    rt_arena_free(a);
    return ns;
}

int main(void) {
    rt_device dev4, dev1, same;
    rt_err err = {0};
    RT_EXPECT_EQ(rt_hal_load_device("devices/x86-avx2.ini", &dev4, &err), RT_OK);
    RT_EXPECT_EQ(dev4.units, 4);
    dev1 = dev4;
    rt_hal_device_on_units(&dev1, 1);
    RT_EXPECT_EQ(dev1.units, 1);
    double p4 = rt_hal_peak_gflops(&dev4, RT_DTYPE_F32, false);
    RT_EXPECT(fabs(rt_hal_peak_gflops(&dev1, RT_DTYPE_F32, false) - p4 / 4) < 1e-9 * p4);
    RT_EXPECT(fabs(rt_perf_cpu_ghz(&dev1) - rt_perf_cpu_ghz(&dev4)) <
              1e-9 * rt_perf_cpu_ghz(&dev4));
    // The device memory keeps its bandwidth; the caches' scale.
    RT_EXPECT_EQ(dev1.level[0].bandwidth_gbps, dev4.level[0].bandwidth_gbps);
    for (int32_t l = 1; l < dev4.n_levels; l++)
        RT_EXPECT(fabs(dev1.level[l].bandwidth_gbps - dev4.level[l].bandwidth_gbps / 4) <=
                  1e-9 * dev4.level[l].bandwidth_gbps);
    // Nothing for units out of (0, dev->units).
    same = dev4;
    rt_hal_device_on_units(&same, 4);
    rt_hal_device_on_units(&same, 0);
    rt_hal_device_on_units(&same, 9);
    RT_EXPECT(same.units == 4 && same.peak_gflops[RT_DTYPE_F32] == dev4.peak_gflops[RT_DTYPE_F32]);
    double t4 = predicted_ns(&dev4), t1 = predicted_ns(&dev1);
    printf("q_proj predicted: %.3f ms on 4 cores, %.3f ms on 1\n", t4 / 1e6, t1 / 1e6);
    RT_EXPECT(t4 > 0 && t1 > 0);
    RT_EXPECT(t1 >= 3.0 * t4 && t1 <= 5.0 * t4);
    return rt_test_finish("test-hal-units");
}
