// test-calib.c: rtcalib's library side. Statistics of repeated probes and the refusal of noisy
// values; the INI writer's round trip (write -> rt_hal_load_device -> equal) for every shipped
// device, the detected host and a device with every optional key; merging measurements into a
// device; atomic files (nothing left behind on failure); a real --quick probe run on this
// host whose result round-trips too; and the default device's short probe (host_probe), whose
// one-core FMA rate must agree with the test's own FMA loop (fma-loop.h).
#include "calib.h"
#include "test.h"
#include "fma-loop.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp_dir[256];

// ---------------------------------------------------------------------------------------------
// Device equality (every field rtgen reads; locations and storage aside)
// ---------------------------------------------------------------------------------------------

static bool same_str(const char *a, const char *b) {
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

// Returns NULL when equal, else the name of the first field that differs.
static const char *device_diff(const rt_device *a, const rt_device *b) {
#define RT_SAME(f)                                                                                 \
    do {                                                                                           \
        if (!(a->f == b->f))                                                                       \
            return #f;                                                                             \
    } while (0)
    if (strcmp(a->name, b->name) || strcmp(a->arch, b->arch) || strcmp(a->features, b->features))
        return "name/arch/features";
    RT_SAME(devclass);
    RT_SAME(units);
    RT_SAME(lanes);
    RT_SAME(teus_per_unit);
    RT_SAME(clock_mhz);
    RT_SAME(max_threads_per_block);
    RT_SAME(max_threads_per_unit);
    RT_SAME(max_blocks_per_unit);
    RT_SAME(regs_per_unit);
    RT_SAME(launch_overhead_us);
    RT_SAME(sync_overhead_us);
    RT_SAME(mma_m);
    RT_SAME(mma_n);
    RT_SAME(mma_k);
    RT_SAME(fma_latency_cycles);
    RT_SAME(isa);
    RT_SAME(n_insn);
    RT_SAME(n_levels);
    RT_SAME(ops);
    for (int t = 0; t < RT_DTYPE_COUNT; t++) {
        RT_SAME(peak_gflops[t]);
        RT_SAME(mma_gflops[t]);
    }
    for (int i = 0; i < a->n_insn; i++) {
        if (strcmp(a->insn[i].name, b->insn[i].name))
            return "insn name";
        RT_SAME(insn[i].gflops_per_teu);
    }
    if (!same_str(a->compute_source, b->compute_source))
        return "compute_source";
    if (!same_str(a->device_source, b->device_source))
        return "device_source";
    for (int i = 0; i < a->n_levels; i++) {
        if (strcmp(a->level[i].name, b->level[i].name))
            return "level name";
        RT_SAME(level[i].level);
        RT_SAME(level[i].scope);
        RT_SAME(level[i].managed);
        RT_SAME(level[i].capacity_bytes);
        RT_SAME(level[i].tile_capacity_bytes);
        RT_SAME(level[i].bandwidth_gbps);
        RT_SAME(level[i].stream_gbps);
        RT_SAME(level[i].transaction_bytes);
        RT_SAME(level[i].banks);
        RT_SAME(level[i].bank_bytes);
        RT_SAME(level[i].line_bytes);
        RT_SAME(level[i].ways);
        RT_SAME(level[i].latency_ns);
        RT_SAME(level[i].n_curve);
        for (int j = 0; j < a->level[i].n_curve; j++) {
            RT_SAME(level[i].curve[j].bytes);
            RT_SAME(level[i].curve[j].gbps);
        }
        if (!same_str(a->level[i].source, b->level[i].source))
            return "level source";
    }
    return NULL;
#undef RT_SAME
}

static bool write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    fputs(text, f);
    return fclose(f) == 0;
}

// write(dev) -> file -> load -> equal, and the second write prints the same text.
static void check_round_trip(const rt_device *dev, const char *label) {
    static rt_device back;
    rt_arena *a = rt_arena_new(1 << 16);
    rt_buf text, text2;
    rt_buf_init(&text, a);
    rt_buf_init(&text2, a);
    rt_err err;
    rt_err_clear(&err);
    rt_status st = rt_hal_write_ini(dev, "round trip of\nthis device", &text, &err);
    RT_EXPECT_EQ(st, RT_OK);
    if (st != RT_OK) {
        fprintf(stderr, "  %s: %s\n", label, err.msg);
        rt_arena_free(a);
        return;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/rt.ini", tmp_dir);
    RT_EXPECT(write_text(path, text.data));
    st = rt_hal_load_device(path, &back, &err);
    RT_EXPECT_EQ(st, RT_OK);
    if (st != RT_OK) {
        fprintf(stderr, "  %s: %s:%d:%d: %s\n%s", label, err.where.file ? err.where.file : "-",
                (int)err.where.line, (int)err.where.col, err.msg, text.data);
    } else {
        const char *diff = device_diff(dev, &back);
        RT_EXPECT(diff == NULL);
        if (diff)
            fprintf(stderr, "  %s: field %s differs after the round trip\n", label, diff);
        RT_EXPECT_EQ(rt_hal_write_ini(&back, "round trip of\nthis device", &text2, &err), RT_OK);
        RT_EXPECT_STR(text2.data, text.data);
    }
    RT_EXPECT(strncmp(text.data, "; round trip of\n; this device\n[device]\n", 39) == 0);
    unlink(path);
    rt_arena_free(a);
}

// ---------------------------------------------------------------------------------------------
// Statistics and refusal
// ---------------------------------------------------------------------------------------------

static void test_stats(void) {
    rt_calib_stats s;
    rt_err err;
    rt_err_clear(&err);
    const double odd[] = {3.0, 1.0, 2.0};
    RT_EXPECT_EQ(rt_calib_stats_of(odd, 3, &s, &err), RT_OK);
    RT_EXPECT_EQ(s.n, 3);
    RT_EXPECT_NEAR(s.min, 1.0, 0.0);
    RT_EXPECT_NEAR(s.median, 2.0, 0.0);
    RT_EXPECT_NEAR(s.max, 3.0, 0.0);
    RT_EXPECT_NEAR(s.spread, 1.0, 1e-15);
    RT_EXPECT_NEAR(odd[0], 3.0, 0.0); // input untouched

    const double even[] = {4.0, 1.0, 3.0, 2.0};
    RT_EXPECT_EQ(rt_calib_stats_of(even, 4, &s, &err), RT_OK);
    RT_EXPECT_NEAR(s.median, 2.5, 0.0);
    RT_EXPECT_NEAR(s.spread, 3.0 / 2.5, 1e-15);

    const double one[] = {7.5};
    RT_EXPECT_EQ(rt_calib_stats_of(one, 1, &s, &err), RT_OK);
    RT_EXPECT_NEAR(s.spread, 0.0, 0.0);
    RT_EXPECT_NEAR(s.median, 7.5, 0.0);

    const double zeros[] = {0.0, 0.0};
    RT_EXPECT_EQ(rt_calib_stats_of(zeros, 2, &s, &err), RT_OK);
    RT_EXPECT_NEAR(s.spread, 0.0, 0.0);

    RT_EXPECT_EQ(rt_calib_stats_of(one, 0, &s, &err), RT_ERR_USAGE);
    RT_EXPECT_STR(err.msg, "no samples to summarize (expected at least 1, got 0)");
    rt_err_clear(&err);
    const double bad[] = {1.0, NAN};
    RT_EXPECT_EQ(rt_calib_stats_of(bad, 2, &s, &err), RT_ERR_USAGE);
    RT_EXPECT_STR(err.msg, "bad sample 2 (expected a finite value >= 0, got nan)");
    rt_err_clear(&err);
    const double neg[] = {-1.0};
    RT_EXPECT_EQ(rt_calib_stats_of(neg, 1, &s, &err), RT_ERR_USAGE);
    rt_err_clear(&err);
    const double zmed[] = {0.0, 0.0, 1.0};
    RT_EXPECT_EQ(rt_calib_stats_of(zmed, 3, &s, &err), RT_ERR_USAGE);
    RT_EXPECT_STR(err.msg, "samples with a median of 0 have no spread (min 0, max 1)");
    rt_err_clear(&err);

    // The refusal: (max - min) / median against the limit.
    const double quiet[] = {100.0, 104.0, 102.0, 101.0, 103.0}; // spread 4/102
    RT_EXPECT_EQ(rt_calib_stats_of(quiet, 5, &s, &err), RT_OK);
    RT_EXPECT_EQ(rt_calib_check_spread("f32 fma", &s, 0.05, &err), RT_OK);
    RT_EXPECT_EQ(rt_calib_check_spread("f32 fma", &s, 4.0 / 102.0, &err), RT_OK);
    RT_EXPECT_EQ(rt_calib_check_spread("f32 fma", &s, 0.03, &err), RT_ERR_BACKEND);
    RT_EXPECT_STR(err.msg, "f32 fma not written: spread 3.9% over 5 repeats exceeds --max-spread "
                           "3.0% (min 100, median 102, max 104)");
}

// ---------------------------------------------------------------------------------------------
// The writer
// ---------------------------------------------------------------------------------------------

static void test_round_trip_shipped(void) {
    static rt_device dev;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/devices", RTGEN_SOURCE_DIR);
    DIR *d = opendir(dir);
    RT_EXPECT(d != NULL);
    if (!d)
        return;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".ini") != 0)
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        rt_err err;
        rt_err_clear(&err);
        rt_status st = rt_hal_load_device(path, &dev, &err);
        RT_EXPECT_EQ(st, RT_OK);
        if (st != RT_OK) {
            fprintf(stderr, "  %s: %s\n", path, err.msg);
            continue;
        }
        check_round_trip(&dev, e->d_name);
        n++;
    }
    closedir(d);
    RT_EXPECT(n >= 10); // device-ini.md's list of devices to ship
}

// Every optional key, values that need quotes, numbers that need all their digits.
static const char *const every_key_ini =
    "[device]\n"
    "name = \"gpu; with a semicolon # and hash\"\n"
    "class = cuda\n"
    "arch = sm_80\n"
    "units = 108\n"
    "lanes = 32\n"
    "teus_per_unit = 4\n"
    "clock_mhz = 1410.5\n"
    "max_threads_per_block = 1024\n"
    "max_threads_per_unit = 2048\n"
    "max_blocks_per_unit = 32\n"
    "regs_per_unit = 65536\n"
    "launch_overhead_us = 4.25\n"
    "sync_overhead_us = 0.001\n"
    "source = 'spec: \"quoted\" title; with a semicolon'\n"
    "[compute]\n"
    "f32_gflops = 19500\n"
    "f16_gflops = 78000\n"
    "bf16_gflops = 39000.000000000007\n"
    "f64_gflops = 9700\n"
    "i32_gops = 19500\n"
    "i8_gops = 1e5\n"
    "mma_f16_gflops = 312000\n"
    "mma_bf16_gflops = 312000\n"
    "mma_f64_gflops = 19500\n"
    "mma_i8_gops = 624000\n"
    "mma_shape = 16x8x16\n"
    "f32_fma_gflops_per_teu = 45.125\n"
    "hmma_gflops_per_teu = 0.1\n"
    "source = spec\n"
    "[mem.global]\n"
    "level = 0\n"
    "scope = device\n"
    "managed = explicit\n"
    "capacity_bytes = 42949672960\n"
    "bandwidth_gbps = 1555\n"
    "stream_gbps = 1601.25\n"
    "bandwidth_curve_gbps = 1024:95, 4096:310.5, 65536:1.2345678901234567e3\n"
    "transaction_bytes = 32\n"
    "latency_ns = 466.7\n"
    "source = measured: a paper\n"
    "[mem.shared]\n"
    "level = 1\n"
    "scope = unit\n"
    "managed = explicit\n"
    "capacity_bytes = 167936\n"
    "tile_capacity_bytes = 49152\n"
    "bandwidth_gbps = 19400\n"
    "banks = 32\n"
    "bank_bytes = 4\n"
    "[mem.reg]\n"
    "level = 2\n"
    "scope = thread\n"
    "managed = explicit\n"
    "capacity_bytes = 1020\n"
    "tile_capacity_bytes = 384\n";

static void test_round_trip_every_key(void) {
    static rt_device dev;
    char path[512];
    snprintf(path, sizeof path, "%s/every.ini", tmp_dir);
    RT_EXPECT(write_text(path, every_key_ini));
    rt_err err;
    rt_err_clear(&err);
    rt_status st = rt_hal_load_device(path, &dev, &err);
    RT_EXPECT_EQ(st, RT_OK);
    if (st != RT_OK) {
        fprintf(stderr, "  every.ini: %d:%d: %s\n", (int)err.where.line, (int)err.where.col,
                err.msg);
        return;
    }
    RT_EXPECT_EQ(dev.n_insn, 2);
    RT_EXPECT_EQ(dev.level[0].n_curve, 3);
    check_round_trip(&dev, "every.ini");

    // Numbers: fixed notation where exact and short, the shortest exact %g otherwise.
    rt_arena *a = rt_arena_new(1 << 16);
    rt_buf b;
    rt_buf_init(&b, a);
    RT_EXPECT_EQ(rt_hal_write_ini(&dev, NULL, &b, &err), RT_OK);
    RT_EXPECT(strstr(b.data, "\nclock_mhz = 1410.5\n") != NULL);
    RT_EXPECT(strstr(b.data, "\ni8_gops = 100000\n") != NULL);
    RT_EXPECT(strstr(b.data, "\nbf16_gflops = 39000.00000000001\n") != NULL);
    RT_EXPECT(strstr(b.data, "\nname = \"gpu; with a semicolon # and hash\"\n") != NULL);
    RT_EXPECT(strstr(b.data, "\nsource = 'spec: \"quoted\" title; with a semicolon'\n") != NULL);
    RT_EXPECT(strstr(b.data, "65536:1234.5678901234567\n") != NULL);
    RT_EXPECT(b.data[0] == '['); // no header asked for

    // Values the schema cannot spell are refused, not written wrong.
    static rt_device bad;
    rt_hal_device_copy(&bad, &dev);
    snprintf(bad.name, sizeof bad.name, "both \" and ' ; here");
    rt_buf_init(&b, a);
    RT_EXPECT_EQ(rt_hal_write_ini(&bad, NULL, &b, &err), RT_ERR_DEVICE);
    RT_EXPECT_STR(err.msg, "cannot write 'name' in [device] (expected a value without both quote "
                           "characters, got both \" and ' ; here)");
    rt_err_clear(&err);
    rt_hal_device_copy(&bad, &dev);
    bad.n_levels = 1; // fails rt_hal_check_device
    rt_buf_init(&b, a);
    RT_EXPECT_EQ(rt_hal_write_ini(&bad, NULL, &b, &err), RT_ERR_DEVICE);
    rt_err_clear(&err);
    rt_arena_free(a);
    unlink(path);
}

static void test_round_trip_host(void) {
    static rt_device host;
    rt_err err;
    rt_err_clear(&err);
    RT_EXPECT_EQ(rt_hal_detect_host(NULL, &host, &err), RT_OK);
    check_round_trip(&host, "(host)");
}

// ---------------------------------------------------------------------------------------------
// Merging measurements
// ---------------------------------------------------------------------------------------------

static rt_calib_value *add_value(rt_calib_result *r, rt_calib_target target, double v,
                                 double spread) {
    rt_calib_value *x = &r->values[r->n_values++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "probe %d", (int)r->n_values);
    x->target = target;
    x->value = v;
    x->stats.n = 5;
    x->stats.min = v * (1.0 - spread);
    x->stats.max = v;
    x->stats.median = v;
    x->stats.spread = spread;
    x->unit = "GB/s";
    return x;
}

// The shipped x86-avx512.ini into base, and res emptied: the start of an rt_calib_apply test.
static void apply_setup(rt_device *base, rt_calib_result *res, rt_err *err) {
    char path[512];
    snprintf(path, sizeof path, "%s/devices/x86-avx512.ini", RTGEN_SOURCE_DIR);
    rt_err_clear(err);
    RT_EXPECT_EQ(rt_hal_load_device(path, base, err), RT_OK);
    memset(res, 0, sizeof *res);
}

static void test_apply(void) {
    static rt_device base, out;
    static rt_calib_result res;
    rt_err err;
    apply_setup(&base, &res, &err);
    add_value(&res, RT_CALIB_PEAK, 372.123456, 0.02)->dtype = RT_DTYPE_F32;
    rt_calib_value *insn = add_value(&res, RT_CALIB_INSN, 200.0, 0.01);
    snprintf(insn->insn, sizeof insn->insn, "f32_fma");
    add_value(&res, RT_CALIB_MMA, 5000.0, 0.01)->dtype = RT_DTYPE_BF16;
    add_value(&res, RT_CALIB_LEVEL_BW, 26.4, 0.03)->level = 0;  // dram: written
    add_value(&res, RT_CALIB_LEVEL_BW, 999.0, 0.50)->level = 2; // l2: too noisy
    rt_calib_value *c2 = add_value(&res, RT_CALIB_CURVE, 20.0, 0.02);
    c2->curve_bytes = 65536;
    rt_calib_value *c1 = add_value(&res, RT_CALIB_CURVE, 5.0, 0.02);
    c1->curve_bytes = 1024; // out of order: sorted when applied
    rt_calib_value *c3 = add_value(&res, RT_CALIB_CURVE, 7.0, 0.02);
    c3->skipped = true; // skipped values are never written
    c3->curve_bytes = 4096;
    add_value(&res, RT_CALIB_LAUNCH, 3.14159, 0.05);
    add_value(&res, RT_CALIB_SYNC, 0.25, 0.05);
    add_value(&res, RT_CALIB_REPORT, 1.0, 0.9); // reported only: never refused

    RT_EXPECT_EQ(rt_calib_apply(&base, &res, 0.10, "2025-01-02", &out, &err), RT_OK);
    RT_EXPECT_NEAR(out.peak_gflops[RT_DTYPE_F32], 372.1, 0.0); // 4 significant digits
    RT_EXPECT_NEAR(out.mma_gflops[RT_DTYPE_BF16], 5000.0, 0.0);
    RT_EXPECT_EQ(out.n_insn, base.n_insn + 1);
    RT_EXPECT_STR(out.insn[out.n_insn - 1].name, "f32_fma");
    RT_EXPECT_NEAR(out.insn[out.n_insn - 1].gflops_per_teu, 100.0, 0.0); // 200 / 2 FMA ports
    RT_EXPECT_NEAR(out.level[0].bandwidth_gbps, 26.4, 0.0);
    RT_EXPECT_NEAR(out.level[2].bandwidth_gbps, base.level[2].bandwidth_gbps, 0.0); // kept
    RT_EXPECT(res.values[4].refused);
    RT_EXPECT(strstr(res.values[4].note, "probe 5 not written: spread 50.0% over 5 repeats") ==
              res.values[4].note);
    RT_EXPECT(!res.values[0].refused && !res.values[10].refused);
    RT_EXPECT_EQ(out.level[0].n_curve, 2);
    RT_EXPECT_EQ(out.level[0].curve[0].bytes, 1024);
    RT_EXPECT_EQ(out.level[0].curve[1].bytes, 65536);
    RT_EXPECT_NEAR(out.level[0].curve[1].gbps, 20.0, 0.0);
    RT_EXPECT_NEAR(out.launch_overhead_us, 3.14, 0.0);
    RT_EXPECT_NEAR(out.sync_overhead_us, 0.25, 0.0);
    char want[1024];
    snprintf(want, sizeof want,
             "measured: rtcalib 2025-01-02 (bandwidth_gbps, bandwidth_curve_gbps) -- other "
             "values: %s",
             base.level[0].source);
    RT_EXPECT_STR(out.level[0].source, want);
    RT_EXPECT_STR(out.level[2].source, base.level[2].source); // nothing written there
    RT_EXPECT(strncmp(out.compute_source,
                      "measured: rtcalib 2025-01-02 (f32_gflops, f32_fma_gflops_per_teu, "
                      "mma_bf16_gflops) -- other values: spec: 2 cores",
                      110) == 0);
    RT_EXPECT(strncmp(out.device_source,
                      "measured: rtcalib 2025-01-02 (launch_overhead_us, sync_overhead_us) -- "
                      "other values: spec: Intel",
                      95) == 0);
    check_round_trip(&out, "applied");

    // A second calibration replaces the first one's part of the source instead of nesting it.
    static rt_device again;
    for (int i = 0; i < res.n_values; i++)
        res.values[i].refused = false;
    RT_EXPECT_EQ(rt_calib_apply(&out, &res, 0.10, "2025-02-03", &again, &err), RT_OK);
    RT_EXPECT(strncmp(again.level[0].source,
                      "measured: rtcalib 2025-02-03 (bandwidth_gbps, bandwidth_curve_gbps) -- "
                      "other values: measured: toolchain-probe.md",
                      110) == 0);
    RT_EXPECT(strstr(again.level[0].source, "2025-01-02") == NULL);

    // One noisy point refuses the whole curve (a partial curve would override bandwidth_gbps).
    memset(&res, 0, sizeof res);
    rt_calib_value *p1 = add_value(&res, RT_CALIB_CURVE, 5.0, 0.02);
    p1->curve_bytes = 1024;
    rt_calib_value *p2 = add_value(&res, RT_CALIB_CURVE, 9.0, 0.02);
    p2->curve_bytes = 4096;
    rt_calib_value *p3 = add_value(&res, RT_CALIB_CURVE, 20.0, 0.5);
    p3->curve_bytes = 65536;
    RT_EXPECT_EQ(rt_calib_apply(&base, &res, 0.10, "2025-01-02", &out, &err), RT_OK);
    RT_EXPECT_EQ(out.level[0].n_curve, base.level[0].n_curve);
    RT_EXPECT_STR(out.level[0].source, base.level[0].source);
    RT_EXPECT(res.values[0].refused && res.values[1].refused && res.values[2].refused);
    RT_EXPECT_STR(res.values[0].note, "probe 1 not written: the curve of [mem.dram] needs all its "
                                      "points (1 of 3 too noisy)");
    // A single point is no curve either.
    memset(&res, 0, sizeof res);
    add_value(&res, RT_CALIB_CURVE, 5.0, 0.02)->curve_bytes = 1024;
    RT_EXPECT_EQ(rt_calib_apply(&base, &res, 0.10, "2025-01-02", &out, &err), RT_OK);
    RT_EXPECT_EQ(out.level[0].n_curve, base.level[0].n_curve);
    RT_EXPECT(res.values[0].refused);

    // A measured f32 peak beyond twice the issue rate fails the device checks: nothing to write.
    memset(&res, 0, sizeof res);
    add_value(&res, RT_CALIB_PEAK, 1e6, 0.0)->dtype = RT_DTYPE_F32;
    rt_err_clear(&err);
    RT_EXPECT_EQ(rt_calib_apply(&base, &res, 0.10, "2025-01-02", &out, &err), RT_ERR_DEVICE);
}

// The clock probe gives [device] clock_mhz and, with the 1-thread f32 FMA rate, the FMA pipes per
// core ([device] teus_per_unit), which the per-TEU entry then divides by; the one-chain FMA
// probe gives fma_latency_cycles. A Zen 4 core: 3658 MHz, 117.3 GFLOP/s on 16 lanes (one pipe).
static void test_apply_pipes(void) {
    static rt_device base, out;
    static rt_calib_result res;
    rt_err err;
    apply_setup(&base, &res, &err);
    RT_EXPECT_EQ(base.teus_per_unit, 2);
    rt_calib_value *f32 = add_value(&res, RT_CALIB_INSN, 117.3, 0.01);
    snprintf(f32->insn, sizeof f32->insn, "f32_fma");
    add_value(&res, RT_CALIB_FMA_LATENCY, 4.02, 0.01);
    add_value(&res, RT_CALIB_CLOCK, 3658.2, 0.02); // after the rate: order does not matter
    add_value(&res, RT_CALIB_PEAK, 234.6, 0.01)->dtype = RT_DTYPE_F32;
    RT_EXPECT_EQ(rt_calib_apply(&base, &res, 0.10, "2025-01-02", &out, &err), RT_OK);
    RT_EXPECT_NEAR(out.clock_mhz, 3658.0, 0.0);
    RT_EXPECT_EQ(out.teus_per_unit, 1);
    RT_EXPECT_EQ(out.fma_latency_cycles, 4);
    RT_EXPECT_NEAR(out.insn[out.n_insn - 1].gflops_per_teu, 117.3, 0.0);
    RT_EXPECT(strncmp(out.device_source, "measured: rtcalib 2025-01-02 (clock_mhz, teus_per_unit)",
                      55) == 0);
    RT_EXPECT(strstr(out.compute_source, "fma_latency_cycles") != NULL);
    check_round_trip(&out, "pipes");

    // Two pipes at 2.9 GHz (230 GFLOP/s on 16 lanes); a noisy clock writes neither value.
    apply_setup(&base, &res, &err);
    f32 = add_value(&res, RT_CALIB_INSN, 230.0, 0.01);
    snprintf(f32->insn, sizeof f32->insn, "f32_fma");
    add_value(&res, RT_CALIB_CLOCK, 2900.0, 0.01);
    RT_EXPECT_EQ(rt_calib_apply(&base, &res, 0.10, "2025-01-02", &out, &err), RT_OK);
    RT_EXPECT_EQ(out.teus_per_unit, 2);
    RT_EXPECT_NEAR(out.clock_mhz, 2900.0, 0.0);
    apply_setup(&base, &res, &err);
    f32 = add_value(&res, RT_CALIB_INSN, 117.3, 0.01);
    snprintf(f32->insn, sizeof f32->insn, "f32_fma");
    add_value(&res, RT_CALIB_CLOCK, 3658.0, 0.30);
    RT_EXPECT_EQ(rt_calib_apply(&base, &res, 0.10, "2025-01-02", &out, &err), RT_OK);
    RT_EXPECT_EQ(out.teus_per_unit, base.teus_per_unit);
    RT_EXPECT_NEAR(out.clock_mhz, base.clock_mhz, 0.0);
    RT_EXPECT(res.values[1].refused);

    // Clock and 1-thread rate taken on a loaded core (as seen beside a parallel ASan run): the
    // issue rate they give (2 x 1 x 16 x 2 x 0.0381 = 2.4 GFLOP/s) is far below the 2-thread
    // peak, so neither the clock nor the latency counted in its cycles is written, and the
    // device still passes its checks.
    apply_setup(&base, &res, &err);
    f32 = add_value(&res, RT_CALIB_INSN, 1.191, 0.02);
    snprintf(f32->insn, sizeof f32->insn, "f32_fma");
    add_value(&res, RT_CALIB_CLOCK, 38.1, 0.09);
    add_value(&res, RT_CALIB_FMA_LATENCY, 0.04159, 0.02);
    add_value(&res, RT_CALIB_PEAK, 236.1, 0.01)->dtype = RT_DTYPE_F32;
    RT_EXPECT_EQ(rt_calib_apply(&base, &res, 0.10, "2025-01-02", &out, &err), RT_OK);
    RT_EXPECT_NEAR(out.clock_mhz, base.clock_mhz, 0.0);
    RT_EXPECT_EQ(out.teus_per_unit, base.teus_per_unit);
    RT_EXPECT_EQ(out.fma_latency_cycles, base.fma_latency_cycles);
    RT_EXPECT(res.values[1].refused && res.values[2].refused);
    RT_EXPECT(strstr(res.values[1].note, "probe 2 not written: 2 cores x 1 FMA pipes x 16 lanes x "
                                         "2 at 38.1 MHz issue 2.438 GFLOP/s, below the f32 "
                                         "peak 236.1 (a loaded core?)") == res.values[1].note);

    // The same clock where every f32 rate was too spread to keep (seen in a ctest -j run): it
    // is checked against the base device's f32 peak instead, and refused as well.
    apply_setup(&base, &res, &err);
    f32 = add_value(&res, RT_CALIB_INSN, 116.3, 1.28);
    snprintf(f32->insn, sizeof f32->insn, "f32_fma");
    add_value(&res, RT_CALIB_CLOCK, 69.57, 0.004);
    add_value(&res, RT_CALIB_PEAK, 235.2, 1.0)->dtype = RT_DTYPE_F32;
    RT_EXPECT_EQ(rt_calib_apply(&base, &res, 0.10, "2025-01-02", &out, &err), RT_OK);
    RT_EXPECT_NEAR(out.clock_mhz, base.clock_mhz, 0.0);
    RT_EXPECT_EQ(out.teus_per_unit, base.teus_per_unit);
    RT_EXPECT(res.values[1].refused);
}

// A shared cache reported far larger than what behaves as one (a VM showing the host's whole L3):
// its half-capacity triad runs at DRAM speed, and the sweep gives the capacity and bandwidth.
static void test_apply_sweep(void) {
    static rt_device base, out;
    static rt_calib_result res;
    rt_err err;
    apply_setup(&base, &res, &err);
    base.level[1].capacity_bytes = (int64_t)480 << 20;
    add_value(&res, RT_CALIB_LEVEL_BW, 30.0, 0.02)->level = 0;
    add_value(&res, RT_CALIB_LEVEL_BW, 31.0, 0.02)->level = 1; // at 240 MiB: DRAM speed
    const int64_t mib = 1 << 20;
    const struct {
        int64_t bytes;
        double gbps, spread;
    } pts[] = {{8 * mib, 90.0, 0.02},
               {16 * mib, 75.0, 0.02},
               {32 * mib, 60.0, 0.02},
               {64 * mib, 80.0, 0.50},   // too noisy: refused, never used
               {128 * mib, 35.0, 0.02}}; // under 1.25 x DRAM: not a cache any more
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
        rt_calib_value *v = add_value(&res, RT_CALIB_SWEEP, pts[i].gbps, pts[i].spread);
        v->level = 1;
        v->curve_bytes = pts[i].bytes;
    }
    RT_EXPECT_EQ(rt_calib_apply(&base, &res, 0.10, "2025-01-02", &out, &err), RT_OK);
    RT_EXPECT_EQ(out.level[1].capacity_bytes, 64 * mib);
    RT_EXPECT_NEAR(out.level[1].bandwidth_gbps, 60.0, 0.0);
    RT_EXPECT(res.values[5].refused);
    RT_EXPECT(strstr(res.values[4].note, "capacity_bytes = 67108864") != NULL);
    const char *keys = "measured: rtcalib 2025-01-02 (bandwidth_gbps, capacity_bytes";
    RT_EXPECT(strncmp(out.level[1].source, keys, strlen(keys)) == 0);

    // Fast at half its capacity: a real cache of that size, left as measured.
    res.values[1].value = 50.0;
    res.values[1].stats.max = res.values[1].stats.median = 50.0;
    res.values[1].stats.min = 49.0;
    RT_EXPECT_EQ(rt_calib_apply(&base, &res, 0.10, "2025-01-02", &out, &err), RT_OK);
    RT_EXPECT_EQ(out.level[1].capacity_bytes, (int64_t)480 << 20);
    RT_EXPECT_NEAR(out.level[1].bandwidth_gbps, 50.0, 0.0);
}

// ---------------------------------------------------------------------------------------------
// Atomic files
// ---------------------------------------------------------------------------------------------

// Number of entries in tmp_dir other than . and ..
static int count_entries(void) {
    DIR *d = opendir(tmp_dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d)
        closedir(d);
    return n;
}

static void test_atomic(void) {
    rt_atomic_file f;
    rt_err err;
    rt_err_clear(&err);
    char path[512], text[64];
    snprintf(path, sizeof path, "%s/out.ini", tmp_dir);
    RT_EXPECT_EQ(count_entries(), 0);

    // Success: the file appears whole, and only it.
    RT_EXPECT_EQ(rt_hal_file_begin(&f, path, &err), RT_OK);
    RT_EXPECT_EQ(count_entries(), 1); // the temporary file
    RT_EXPECT(access(path, F_OK) != 0);
    RT_EXPECT_EQ(rt_hal_file_commit(&f, "[device]\n", 9, &err), RT_OK);
    RT_EXPECT_EQ(count_entries(), 1);
    FILE *in = fopen(path, "r");
    RT_EXPECT(in && fgets(text, sizeof text, in) && strcmp(text, "[device]\n") == 0);
    if (in)
        fclose(in);

    // Abort: the old file is untouched, the temporary is gone.
    RT_EXPECT_EQ(rt_hal_file_begin(&f, path, &err), RT_OK);
    RT_EXPECT_EQ(count_entries(), 2);
    rt_hal_file_abort(&f);
    RT_EXPECT_EQ(count_entries(), 1);

    // The signal path: the handler's call removes the temporary file.
    RT_EXPECT_EQ(rt_hal_file_begin(&f, path, &err), RT_OK);
    rt_hal_file_abort_signal();
    RT_EXPECT_EQ(count_entries(), 1);
    rt_hal_file_abort(&f);
    unlink(path);
    RT_EXPECT_EQ(count_entries(), 0);

    // A missing directory: an error at the path, nothing created.
    char missing[512];
    snprintf(missing, sizeof missing, "%s/no-such-dir/out.ini", tmp_dir);
    RT_EXPECT_EQ(rt_hal_file_begin(&f, missing, &err), RT_ERR_IO);
    RT_EXPECT_STR(err.msg, "cannot write: No such file or directory");
    RT_EXPECT(err.where.file != NULL && strcmp(err.where.file, missing) == 0);
    RT_EXPECT_EQ(count_entries(), 0);
    rt_err_clear(&err);

    // The output is a directory: refused up front.
    RT_EXPECT_EQ(rt_hal_file_begin(&f, tmp_dir, &err), RT_ERR_IO);
    RT_EXPECT_STR(err.msg, "cannot write: Is a directory");
    rt_err_clear(&err);

    // The rename fails (a directory appeared at the path meanwhile): nothing is left behind.
    RT_EXPECT_EQ(rt_hal_file_begin(&f, path, &err), RT_OK);
    RT_EXPECT_EQ(mkdir(path, 0755), 0);
    RT_EXPECT_EQ(rt_hal_file_commit(&f, "x", 1, &err), RT_ERR_IO);
    RT_EXPECT(strncmp(err.msg, "cannot write (rename): ", 23) == 0);
    RT_EXPECT_EQ(count_entries(), 1); // the directory only
    rmdir(path);
    rt_err_clear(&err);
}

// ---------------------------------------------------------------------------------------------
// A real run of the probes (--quick) on this host
// ---------------------------------------------------------------------------------------------

static int progress_events;
static void count_progress(void *ctx, const rt_calib_event *ev) {
    (void)ctx;
    RT_EXPECT(ev->index >= 1 && ev->index <= ev->count && ev->probe && ev->probe[0]);
    progress_events++;
}

static void test_quick_run(void) {
    static rt_device host, out;
    static rt_calib_result res;
    rt_err err;
    rt_err_clear(&err);
    RT_EXPECT_EQ(rt_hal_detect_host(NULL, &host, &err), RT_OK);
    rt_calib_opts opts = {
        .repeats = 2, .max_spread = 1e9, .quick = true, .progress = count_progress};
    rt_status st = rt_calib_cpu_run(&host, &opts, &res, &err);
    RT_EXPECT_EQ(st, RT_OK);
    if (st != RT_OK) {
        fprintf(stderr, "  quick run: %s\n", err.msg);
        return;
    }
    RT_EXPECT(res.n_values >= 10);
    RT_EXPECT_EQ(progress_events, 2 * res.n_values);
    RT_EXPECT(res.seconds < 10.0);
    bool f32 = false, dram = false, launch = false;
    for (int i = 0; i < res.n_values; i++) {
        const rt_calib_value *v = &res.values[i];
        if (v->skipped)
            continue;
        RT_EXPECT(v->value > 0.0 && isfinite(v->value));
        RT_EXPECT_EQ(v->stats.n, 2);
        RT_EXPECT(v->stats.min <= v->value && v->value <= v->stats.max);
        f32 |= v->target == RT_CALIB_PEAK && v->dtype == RT_DTYPE_F32;
        dram |= v->target == RT_CALIB_LEVEL_BW && v->level == 0;
        launch |= v->target == RT_CALIB_LAUNCH;
    }
    // No bounds on the clock or the FMA latency here: ctest runs this beside other tests, which
    // may share the core for a whole (quick, microseconds long) sample.
    RT_EXPECT(f32 && dram && launch);
    st = rt_calib_apply(&host, &res, 1e9, "2025-01-02", &out, &err);
    RT_EXPECT_EQ(st, RT_OK);
    if (st != RT_OK) {
        fprintf(stderr, "  apply: %s\n", err.msg);
        return;
    }
    RT_EXPECT(strncmp(out.compute_source, "measured: rtcalib 2025-01-02 (", 30) == 0);
    RT_EXPECT(strstr(out.compute_source, "f32_gflops") != NULL);
    RT_EXPECT(strncmp(out.level[0].source, "measured: rtcalib 2025-01-02 (bandwidth_gbps", 44) ==
              0);
    RT_EXPECT(out.launch_overhead_us > 0.0);
    check_round_trip(&out, "measured host");

    // Bad options and a device that is not a CPU.
    rt_calib_opts one = {.repeats = 1, .quick = true};
    RT_EXPECT_EQ(rt_calib_cpu_run(&host, &one, &res, &err), RT_ERR_USAGE);
    RT_EXPECT_STR(err.msg, "repeats out of range (expected 2 to 256, got 1)");
    rt_err_clear(&err);
    static rt_device gpu;
    char path[512];
    snprintf(path, sizeof path, "%s/devices/v100.ini", RTGEN_SOURCE_DIR);
    RT_EXPECT_EQ(rt_hal_load_device(path, &gpu, &err), RT_OK);
    RT_EXPECT_EQ(rt_calib_cpu_run(&gpu, &opts, &res, &err), RT_ERR_DEVICE);
    RT_EXPECT_STR(err.msg, "rtcalib measures class cpu devices on this host (got class cuda)");
}

// The first-use probe's plan: the clock, one core's FMA rate, the triad at a quarter of level 1 and
// on DRAM twice the caches; its f32 rate within 15% of fma-loop.h's (accumulators that spill
// read half). Best of up to 4 runs: ctest runs other tests beside this one.
static void test_host_probe_run(void) {
    static rt_device host;
    static rt_calib_result res;
    rt_err err;
    rt_err_clear(&err);
    RT_EXPECT_EQ(rt_hal_detect_host(NULL, &host, &err), RT_OK);
    rt_calib_opts opts = {.repeats = 5, .max_spread = 0.05, .host_probe = true};
    double loop = 0, fma = 0;
    for (int attempt = 0; attempt < 4; attempt++) {
        rt_status st = rt_calib_cpu_run(&host, &opts, &res, &err);
        RT_EXPECT_EQ(st, RT_OK);
        if (st != RT_OK) {
            fprintf(stderr, "  host probe: %s\n", err.msg);
            return;
        }
        RT_EXPECT(res.n_values == 4 || res.n_values == 5); // the clock where there is an add chain
        RT_EXPECT(res.seconds < 10.0);
        int32_t levels = 0;
        for (int i = 0; i < res.n_values; i++) {
            const rt_calib_value *v = &res.values[i];
            if (v->target == RT_CALIB_INSN && strcmp(v->insn, "f32_fma") == 0 && !v->skipped)
                fma = v->value;
            // The clock and the FMA rate a core holds: their samples' median; bandwidths their
            // best (calib-cpu.c rt_probe_holds_clock).
            if (!v->skipped)
                RT_EXPECT_NEAR(v->value,
                               v->target == RT_CALIB_CLOCK || v->target == RT_CALIB_INSN
                                   ? v->stats.median
                                   : v->stats.max,
                               0);
            if (v->target == RT_CALIB_LEVEL_STREAM)
                levels |= 4 * (v->level == 0);
            if (v->target != RT_CALIB_LEVEL_BW && v->target != RT_CALIB_LEVEL_STREAM)
                continue;
            levels |= v->target == RT_CALIB_LEVEL_BW ? 1 << v->level : 0;
            RT_EXPECT_EQ(v->threads, res.threads);
            if (v->level == 1)
                RT_EXPECT(v->ws_bytes <= host.level[1].capacity_bytes / 4 *
                                             (host.level[1].scope == RT_MEM_SCOPE_DEVICE ? 1 : 2));
            else
                RT_EXPECT(v->ws_bytes >= 2 * host.level[1].capacity_bytes - (1 << 20) ||
                          v->ws_bytes >= (255 << 20));
        }
        RT_EXPECT_EQ(levels, 7); // level 1, DRAM, DRAM with non-temporal stores
        loop = rt_test_fma_gflops(host.lanes, 0.2);
        if (loop <= 0.0) {
            printf("  no FMA loop for %d lanes on this host: rate not checked\n", (int)host.lanes);
            return;
        }
        printf("  host probe: f32 FMA %.4g GFLOP/s on one core, the test's loop %.4g (%.1f s)\n",
               fma, loop, res.seconds);
        if (fabs(fma / loop - 1.0) <= 0.15)
            break;
    }
    RT_EXPECT(fabs(fma / loop - 1.0) <= 0.15);
}

// A host probe that never gets an undisturbed sample (run_share over 1: none counts) skips every
// probe with its note, within its tries or RT_CALIB_HOST_GIVE_UP_S (1.5 s) each, whichever
// comes first (on a loaded machine, 400 tries kept CI's sanitizer run over 10 s); a shorter
// give-up (opts.give_up_s) cuts the tries short; a negative share or give-up is an error.
static void test_host_probe_gives_up(void) {
    static rt_device host;
    static rt_calib_result res;
    rt_err err;
    rt_err_clear(&err);
    RT_EXPECT_EQ(rt_hal_detect_host(NULL, &host, &err), RT_OK);
    rt_calib_opts opts = {.repeats = 5, .max_spread = 0.05, .host_probe = true, .run_share = 2.0};
    RT_EXPECT_EQ(rt_calib_cpu_run(&host, &opts, &res, &err), RT_OK);
    RT_EXPECT(res.n_values == 4 || res.n_values == 5);
    for (int i = 0; i < res.n_values; i++) {
        RT_EXPECT(res.values[i].skipped);
        RT_EXPECT(strstr(res.values[i].note, "skipped: ") == res.values[i].note &&
                  strstr(res.values[i].note, " samples had a thread descheduled for over 0% of "
                                             "the time (a loaded machine)"));
    }
    // Each probe's give-up, plus its count calibration and trial run.
    RT_EXPECT(res.seconds < 1.5 * res.n_values + 3.0);
    printf("  host probe with no undisturbed sample: %d probes skipped in %.1f s\n",
           (int)res.n_values, res.seconds);
    // A give-up after 5 ms ends each probe well before its 400 tries (its note counts them):
    // without the give-up every probe would run all 400.
    opts.give_up_s = 0.005;
    RT_EXPECT_EQ(rt_calib_cpu_run(&host, &opts, &res, &err), RT_OK);
    for (int i = 0; i < res.n_values; i++) {
        int bad = -1, tries = -1;
        RT_EXPECT(res.values[i].skipped);
        RT_EXPECT_EQ(sscanf(res.values[i].note, "skipped: %d of %d samples", &bad, &tries), 2);
        RT_EXPECT(tries >= 1 && tries < 400 && bad == tries);
    }
    opts.run_share = -1.0;
    RT_EXPECT_EQ(rt_calib_cpu_run(&host, &opts, &res, &err), RT_ERR_USAGE);
    RT_EXPECT_STR(err.msg, "run share and give-up time must be >= 0 (got -1 and 0.005)");
    rt_err_clear(&err);
    opts.run_share = 2.0, opts.give_up_s = -1.0;
    RT_EXPECT_EQ(rt_calib_cpu_run(&host, &opts, &res, &err), RT_ERR_USAGE);
    RT_EXPECT_STR(err.msg, "run share and give-up time must be >= 0 (got 2 and -1)");
}

int main(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/rt-test-calib-XXXXXX");
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_stats();
    test_round_trip_shipped();
    test_round_trip_every_key();
    test_round_trip_host();
    test_apply();
    test_apply_sweep();
    test_apply_pipes();
    test_atomic();
    test_quick_run();
    test_host_probe_run();
    test_host_probe_gives_up();
    rmdir(tmp_dir);
    return rt_test_finish("test-calib");
}
