// test-hal.c: unit tests of the HAL's data side: every shipped device loads and passes the
// cross-checks, specific values of the shipped files, bandwidth-curve interpolation, peak
// selection, device copies, printing and JSON, host detection on this machine, the loader's
// strictness on inputs built here, the two examples of device-ini.md verbatim, concurrent loads,
// and every error case of tests/err/ini/ (the same check the CLI runner makes, done through
// rt_hal_load_device and rt_err_format).
#include "hal.h"
#include "hal-ops.h"
#include "test.h"

#include <dirent.h>
#include <jansson.h>
#include <pthread.h>
#include <unistd.h>

#define ERR_DIR "tests/err/ini"

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// Sorted names of the *.ini files of dir; returns the count (at most cap).
static int list_ini(const char *dir, char names[][256], int cap) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < cap) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".ini") == 0 && len < 256)
            snprintf(names[n++], 256, "%s", e->d_name);
    }
    closedir(d);
    const char *ptrs[256];
    for (int i = 0; i < n; i++)
        ptrs[i] = names[i];
    qsort(ptrs, (size_t)n, sizeof ptrs[0], cmp_str);
    char tmp[256][256];
    for (int i = 0; i < n; i++)
        snprintf(tmp[i], 256, "%.255s", ptrs[i]);
    for (int i = 0; i < n; i++)
        snprintf(names[i], 256, "%.255s", tmp[i]);
    return n;
}

static rt_device dev, dev2;

static void test_shipped_devices(void) {
    static char names[256][256];
    int n = list_ini("devices", names, 256);
    RT_EXPECT(n >= 10);
    static const char *const required[] = {
        "v100.ini", "a100.ini",   "h100.ini",       "t4.ini",       "k80.ini",
        "mi50.ini", "mi250x.ini", "x86-avx512.ini", "x86-avx2.ini", "arm-neoverse-n1.ini"};
    for (size_t r = 0; r < sizeof required / sizeof required[0]; r++) {
        bool found = false;
        for (int i = 0; i < n; i++)
            found |= strcmp(names[i], required[r]) == 0;
        if (!found)
            fprintf(stderr, "missing devices/%s\n", required[r]);
        RT_EXPECT(found);
    }
    for (int i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, "devices/%.255s", names[i]);
        rt_err err = {0};
        rt_status st = rt_hal_load_device(path, &dev, &err);
        if (st != RT_OK) {
            char msg[1024];
            rt_err_format(&err, "test", true, msg, sizeof msg);
            fprintf(stderr, "%s\n", msg);
        }
        RT_EXPECT_EQ(st, RT_OK);
        if (st != RT_OK)
            continue;
        RT_EXPECT_EQ(rt_hal_check_device(&dev, &err), RT_OK);
        RT_EXPECT(dev.device_source && dev.compute_source);
        RT_EXPECT(!dev.detected);
        // Every CPU device names its instruction set; a GPU device has none.
        RT_EXPECT_EQ(dev.isa != RT_CPU_ISA_NONE, dev.devclass == RT_DEVCLASS_CPU);
        if (strcmp(names[i], "arm-neoverse-n1.ini") == 0)
            RT_EXPECT_EQ(dev.isa, RT_CPU_ISA_AARCH64);
        if (strncmp(names[i], "x86-", 4) == 0)
            RT_EXPECT_EQ(dev.isa, RT_CPU_ISA_X86_64);
        for (int l = 0; l < dev.n_levels; l++) {
            RT_EXPECT_EQ(dev.level[l].level, l);
            RT_EXPECT(dev.level[l].source != NULL);
            RT_EXPECT(dev.level[l].tile_capacity_bytes <= dev.level[l].capacity_bytes);
            if (l > 0)
                RT_EXPECT(dev.level[l].capacity_bytes <= dev.level[l - 1].capacity_bytes);
        }
        // Every GPU: global / shared / registers, 48 KiB static shared on NVIDIA, 64 KiB on
        // AMD, Roller's 96-register tile.
        if (dev.devclass == RT_DEVCLASS_CUDA || dev.devclass == RT_DEVCLASS_HIP) {
            RT_EXPECT_EQ(dev.n_levels, 3);
            RT_EXPECT_STR(dev.level[0].name, "global");
            RT_EXPECT_STR(dev.level[1].name, "shared");
            RT_EXPECT_STR(dev.level[2].name, "reg");
            RT_EXPECT_EQ(dev.level[1].tile_capacity_bytes,
                         dev.devclass == RT_DEVCLASS_CUDA ? 49152 : 65536);
            RT_EXPECT_EQ(dev.level[2].tile_capacity_bytes, 384);
            RT_EXPECT_EQ(dev.lanes, dev.devclass == RT_DEVCLASS_CUDA ? 32 : 64);
        } else if (dev.devclass == RT_DEVCLASS_CPU) {
            RT_EXPECT(dev.fma_latency_cycles > 0);
            RT_EXPECT(dev.features[0] != '\0');
        }
    }
}

static void load(const char *path) {
    rt_err err = {0};
    memset(&dev, 0xab, sizeof dev);
    RT_EXPECT_EQ(rt_hal_load_device(path, &dev, &err), RT_OK);
    if (err.status)
        fprintf(stderr, "%s: %s\n", path, err.msg);
}

static void test_v100_values(void) {
    load("devices/v100.ini");
    RT_EXPECT_STR(dev.arch, "sm_70");
    RT_EXPECT_EQ(dev.devclass, RT_DEVCLASS_CUDA);
    RT_EXPECT_STR(dev.ops->class_name, "cuda");
    RT_EXPECT_EQ(dev.units, 80);
    RT_EXPECT_EQ(dev.teus_per_unit, 4);
    RT_EXPECT_NEAR(dev.clock_mhz, 1530, 0);
    RT_EXPECT_EQ(dev.max_threads_per_block, 1024);
    RT_EXPECT_EQ(dev.regs_per_unit, 65536);
    RT_EXPECT_EQ(dev.level[0].capacity_bytes, 17179869184LL);
    RT_EXPECT_NEAR(dev.level[0].bandwidth_gbps, 750, 0);
    RT_EXPECT_EQ(dev.level[0].transaction_bytes, 32);
    RT_EXPECT_EQ(dev.level[1].capacity_bytes, 98304);
    RT_EXPECT_EQ(dev.level[1].tile_capacity_bytes, 49152);
    RT_EXPECT_EQ(dev.level[1].banks, 32);
    RT_EXPECT_EQ(dev.level[1].bank_bytes, 4);
    RT_EXPECT_EQ(dev.level[1].scope, RT_MEM_SCOPE_UNIT);
    RT_EXPECT_EQ(dev.level[2].scope, RT_MEM_SCOPE_THREAD);
    RT_EXPECT_EQ(dev.level[2].capacity_bytes, 1020);
    RT_EXPECT_NEAR(dev.level[2].bandwidth_gbps, 0, 0);
    RT_EXPECT_EQ(dev.mma_m, 16);
    RT_EXPECT_EQ(dev.mma_k, 16);
    RT_EXPECT_EQ(dev.level[1].loc.line, 36);
    RT_EXPECT_EQ(dev.reg_granule_warp, 256); // GPU plan facts
    RT_EXPECT_EQ(dev.reg_granule_lane, 0);
    RT_EXPECT_EQ(dev.raster_group_blocks, 0);
    RT_EXPECT_STR(dev.level[1].loc.file, "devices/v100.ini");
    RT_EXPECT(strncmp(dev.level[0].source, "measured: Jia et al. 2018", 25) == 0);
    RT_EXPECT(strstr(dev.level[1].source, "48 KiB static per block") != NULL); // not cut short

    load("devices/a100.ini");
    RT_EXPECT_NEAR(dev.peak_gflops[RT_DTYPE_F32], 19500, 0); // not the 78000 f16 figure
    RT_EXPECT(dev.level[0].bandwidth_gbps != 750);           // not copied from V100
    RT_EXPECT_EQ(dev.raster_group_blocks, 8);
    load("devices/mi50.ini");
    RT_EXPECT_EQ(dev.reg_granule_lane, 4);
    RT_EXPECT_EQ(dev.reg_granule_warp, 0);
    load("devices/k80.ini");
    RT_EXPECT_EQ(dev.level[1].bank_bytes, 8);
    load("devices/mi50.ini");
    RT_EXPECT_EQ(dev.lanes, 64);
    RT_EXPECT_EQ(dev.level[1].capacity_bytes, 65536);
    RT_EXPECT_EQ(dev.mma_m, 0);
    load("devices/x86-avx512.ini");
    RT_EXPECT_EQ(dev.lanes, 16);
    RT_EXPECT_EQ(dev.fma_latency_cycles, 4);
    RT_EXPECT_EQ(dev.level[dev.n_levels - 1].capacity_bytes, 2048);
    RT_EXPECT_EQ(dev.level[1].managed, RT_MEM_CACHE);
    RT_EXPECT(strstr(dev.features, "avx512f,") != NULL);
    RT_EXPECT(strstr(dev.features, " ") == NULL);
}

static void test_curve(void) {
    rt_mem_level l;
    memset(&l, 0, sizeof l);
    l.bandwidth_gbps = 500;
    RT_EXPECT_NEAR(rt_hal_level_gbps(&l, 1e6), 500, 0);
    l.n_curve = 3;
    l.curve[0] = (rt_curve_point){1024, 100};
    l.curve[1] = (rt_curve_point){4096, 300};
    l.curve[2] = (rt_curve_point){65536, 700};
    RT_EXPECT_NEAR(rt_hal_level_gbps(&l, 1024), 100, 1e-9);
    RT_EXPECT_NEAR(rt_hal_level_gbps(&l, 2048), 200, 1e-9); // linear in log(bytes)
    RT_EXPECT_NEAR(rt_hal_level_gbps(&l, 4096), 300, 1e-9);
    RT_EXPECT_NEAR(rt_hal_level_gbps(&l, 16384), 500, 1e-9);
    RT_EXPECT_NEAR(rt_hal_level_gbps(&l, 10), 100, 0); // clamped at both ends
    RT_EXPECT_NEAR(rt_hal_level_gbps(&l, 1e9), 700, 0);
    RT_EXPECT_NEAR(rt_hal_level_gbps(&l, 0), 100, 0);
    RT_EXPECT_NEAR(rt_hal_level_gbps(&l, NAN), 100, 0);
}

static void test_peaks(void) {
    load("devices/v100.ini");
    RT_EXPECT_NEAR(rt_hal_peak_gflops(&dev, RT_DTYPE_F16, true), 125000, 0);
    RT_EXPECT_NEAR(rt_hal_peak_gflops(&dev, RT_DTYPE_F16, false), 31400, 0);
    RT_EXPECT_NEAR(rt_hal_peak_gflops(&dev, RT_DTYPE_F32, true), 15700, 0); // no f32 mma
    RT_EXPECT_NEAR(rt_hal_peak_gflops(&dev, RT_DTYPE_F64, false), 7800, 0);
    RT_EXPECT_NEAR(rt_hal_peak_gflops(&dev, RT_DTYPE_BF16, false), 15700, 0); // via f32
    load("devices/t4.ini");
    RT_EXPECT_NEAR(rt_hal_peak_gflops(&dev, RT_DTYPE_I8, true), 130000, 0);
    load("devices/mi250x.ini");
    RT_EXPECT_NEAR(rt_hal_peak_gflops(&dev, RT_DTYPE_F32, true), 47850, 0);
    RT_EXPECT_NEAR(rt_hal_peak_gflops(&dev, RT_DTYPE_F32, false), 23950, 0);
}

static void test_copy_print_json(void) {
    load("devices/v100.ini");
    memset(&dev2, 0, sizeof dev2);
    rt_hal_device_copy(&dev2, &dev);
    RT_EXPECT_STR(dev2.level[1].source, dev.level[1].source);
    RT_EXPECT(dev2.level[1].source != dev.level[1].source);
    RT_EXPECT(dev2.level[1].source >= dev2.text &&
              dev2.level[1].source < dev2.text + sizeof dev2.text);
    RT_EXPECT(dev2.origin.file == dev2.path);
    RT_EXPECT(dev2.compute_source >= dev2.text && dev2.device_source >= dev2.text);

    rt_arena *a = rt_arena_new(1 << 16);
    rt_buf b1, b2;
    rt_buf_init(&b1, a);
    rt_buf_init(&b2, a);
    rt_hal_print_device(&dev, &b1);
    rt_hal_print_device(&dev2, &b2);
    RT_EXPECT_STR(b1.data, b2.data);
    RT_EXPECT(strstr(b1.data, "device  NVIDIA Tesla V100-SXM2-16GB (cuda, sm_70)\n") != NULL);
    RT_EXPECT(strstr(b1.data, "units   80 x 32 lanes x 4 TEUs at 1530 MHz (nominal)\n") != NULL);
    RT_EXPECT(strstr(b1.data, "level 1 shared   unit   explicit 96 KiB (tile 48 KiB), 12080 GB/s "
                              "(measured), transaction 128 B, 32 banks x 4 B\n") != NULL);
    RT_EXPECT(strstr(b1.data, "mma     16x16x16: f16 125000 (nominal)\n") != NULL);
    // Measured figures without a date (Jia et al., Roller's artifact) and a nominal one.
    RT_EXPECT(strstr(b1.data, "16384 MiB, 750 GB/s (measured)") != NULL);
    RT_EXPECT(strstr(b1.data, "f32 15700 GFLOP/s (nominal)") != NULL);
    rt_arena_free(a);

    json_t *j = rt_hal_device_to_json(&dev);
    RT_EXPECT(j != NULL);
    RT_EXPECT_EQ(json_integer_value(json_object_get(j, "units")), 80);
    RT_EXPECT_STR(json_string_value(json_object_get(j, "class")), "cuda");
    json_t *levels = json_object_get(j, "levels");
    RT_EXPECT_EQ(json_array_size(levels), 3);
    json_t *shared = json_array_get(levels, 1);
    RT_EXPECT_EQ(json_integer_value(json_object_get(shared, "tile_capacity_bytes")), 49152);
    RT_EXPECT_STR(json_string_value(json_object_get(shared, "scope")), "unit");
    json_t *compute = json_object_get(j, "compute");
    RT_EXPECT_NEAR(json_real_value(json_object_get(compute, "mma_f16_gflops")), 125000, 0);
    RT_EXPECT_EQ(json_array_size(json_object_get(compute, "mma_shape")), 3);
    char *s1 = json_dumps(j, JSON_SORT_KEYS);
    json_t *j2 = rt_hal_device_to_json(&dev2);
    char *s2 = json_dumps(j2, JSON_SORT_KEYS);
    RT_EXPECT_STR(s1, s2);
    free(s1);
    free(s2);
    json_decref(j);
    json_decref(j2);
}

static void test_host(void) {
    rt_err err = {0};
    rt_status st = rt_hal_detect_host(NULL, &dev, &err);
    if (st != RT_OK)
        fprintf(stderr, "detect: %s\n", err.msg);
    RT_EXPECT_EQ(st, RT_OK);
    RT_EXPECT(dev.detected);
    RT_EXPECT_EQ(dev.devclass, RT_DEVCLASS_CPU);
    RT_EXPECT(dev.units >= 1);
    RT_EXPECT(dev.lanes == 4 || dev.lanes == 8 || dev.lanes == 16);
    RT_EXPECT(dev.teus_per_unit == 1 || dev.teus_per_unit == 2);
    RT_EXPECT(dev.clock_mhz > 100);
    // The detected peak is nominal; test-host-probe.c checks the default device's measured one
    // against an FMA loop of its own.
    RT_EXPECT(dev.peak_gflops[RT_DTYPE_F32] > 0);
    RT_EXPECT(strncmp(dev.compute_source, "nominal: ", 9) == 0);
    RT_EXPECT(dev.n_levels >= 3);
    RT_EXPECT(dev.arch[0] != '\0');
    RT_EXPECT_EQ(dev.isa, rt_hal_host_isa());
    RT_EXPECT(strncmp(dev.device_source, "detected: ", 10) == 0);
    const rt_mem_level *l1 = NULL, *l2 = NULL;
    for (int i = 0; i < dev.n_levels; i++) {
        if (strcmp(dev.level[i].name, "l1") == 0)
            l1 = &dev.level[i];
        if (strcmp(dev.level[i].name, "l2") == 0)
            l2 = &dev.level[i];
    }
    RT_EXPECT(l1 != NULL);
    if (l1 && l2)
        RT_EXPECT(l1->capacity_bytes <= l2->capacity_bytes);
    if (l1)
        RT_EXPECT(l1->capacity_bytes >= 4096 && l1->line_bytes >= 16);
    RT_EXPECT_EQ(dev.level[dev.n_levels - 1].managed, RT_MEM_EXPLICIT);
    RT_EXPECT_EQ(dev.level[dev.n_levels - 1].capacity_bytes,
                 (dev.lanes == 16 ? 32 : 16) * dev.lanes * 4);
#if defined(__x86_64__)
    RT_EXPECT(strcmp(dev.arch, "native") != 0 || dev.lanes == 4);
    if (dev.lanes == 16)
        RT_EXPECT(strstr(dev.features, "avx512f") != NULL);
#endif
    RT_EXPECT_EQ(rt_hal_check_device(&dev, &err), RT_OK);

    // A host.ini replaces detection; a missing one does not matter.
    RT_EXPECT_EQ(rt_hal_detect_host("devices/x86-avx2.ini", &dev, &err), RT_OK);
    RT_EXPECT(!dev.detected);
    RT_EXPECT_STR(dev.arch, "skylake");
    RT_EXPECT_EQ(rt_hal_detect_host("devices/no-such-host.ini", &dev, &err), RT_OK);
    RT_EXPECT(dev.detected);
}

// Writes text to a temporary file, loads it and returns the formatted error ("" when it
// loaded), with the file name replaced by "F".
static const char *load_text(const char *text, size_t len) {
    static char msg[1024];
    char path[] = "/tmp/rtgen-test-hal-XXXXXX";
    int fd = mkstemp(path);
    RT_EXPECT(fd >= 0);
    if (fd < 0)
        return "(no temp file)";
    RT_EXPECT_EQ(write(fd, text, len), (long long)len);
    close(fd);
    rt_err err = {0};
    msg[0] = '\0';
    if (rt_hal_load_device(path, &dev, &err) != RT_OK) {
        err.where.file = "F";
        rt_err_format(&err, "test", false, msg, sizeof msg);
    }
    unlink(path);
    return msg;
}

static const char base_cpu[] = "[device]\nname = c\nclass = cpu\narch = native\nunits = 1\n"
                               "lanes = 4\nteus_per_unit = 1\nclock_mhz = 1000\n"
                               "[compute]\nf32_gflops = 8\n"
                               "[mem.dram]\nlevel = 0\nscope = device\nmanaged = cache\n"
                               "capacity_bytes = 1048576\nbandwidth_gbps = 10\n"
                               "[mem.reg]\nlevel = 1\nscope = unit\nmanaged = explicit\n"
                               "capacity_bytes = 256\n";

// base_cpu with `extra` appended to the [compute] or [mem.reg] section (the last one).
static const char *load_cpu_with(const char *extra) {
    static char text[4096];
    snprintf(text, sizeof text, "%s%s", base_cpu, extra);
    return load_text(text, strlen(text));
}

static void test_strict_values(void) {
    RT_EXPECT_STR(load_cpu_with(""), "");
    RT_EXPECT_STR(load_cpu_with("latency_ns = 1.5e1\n"), "");
    RT_EXPECT_EQ(dev.level[1].latency_ns, 15);
    RT_EXPECT_STR(load_cpu_with("latency_ns = 0.5 ; comment\n"), "");
    RT_EXPECT_STR(load_cpu_with("source = \"quoted ; kept\"  # tail comment\n"), "");
    RT_EXPECT_STR(dev.level[1].source, "quoted ; kept");
    RT_EXPECT_STR(load_cpu_with("LATENCY_NS = 2\n"), ""); // iniparser lower-cases keys
    RT_EXPECT_STR(load_cpu_with("source = a#b\n"),
                  "F:22:11: error: '#' inside a value starts a comment (expected a blank before "
                  "it, or a quoted value)");
    RT_EXPECT_STR(load_cpu_with("latency_ns = inf\n"),
                  "F:22:14: error: 'latency_ns' expects a number in nanoseconds (got \"inf\")");
    RT_EXPECT_STR(load_cpu_with("latency_ns = 1e999\n"),
                  "F:22:14: error: 'latency_ns' is out of range (expected a finite number, got "
                  "\"1e999\")");
    RT_EXPECT_STR(load_cpu_with("latency_ns = +1\n"),
                  "F:22:14: error: 'latency_ns' expects a number in nanoseconds (got \"+1\")");
    RT_EXPECT_STR(load_cpu_with("latency_ns = 01.5\n"),
                  "F:22:14: error: 'latency_ns' has a leading zero (expected a decimal number, "
                  "got \"01.5\")");
    RT_EXPECT_STR(load_cpu_with("source = \"open\n"),
                  "F:22:10: error: unterminated quoted value (expected a closing \")");
    RT_EXPECT_STR(load_cpu_with("source = \"a\" b\n"),
                  "F:22:14: error: unexpected text after quoted value (expected a comment or end "
                  "of line, got \"b\")");
    RT_EXPECT_STR(load_cpu_with("my key = 1\n"),
                  "F:22:3: error: bad key name (expected letters, digits and '_', got \"my "
                  "key\")");
    RT_EXPECT_STR(load_cpu_with("[mem.]\n"), "F:22:1: error: empty memory level name in [mem.]");
    RT_EXPECT_STR(load_cpu_with("[]\n"), "F:22:1: error: empty section name");
    RT_EXPECT_STR(load_cpu_with("; comment \\\n"),
                  "F:22:11: error: line continuation is not supported (got '\\' at end of line)");
    RT_EXPECT_STR(load_cpu_with("line_bytes = 64\n"),
                  "F:22:1: error: 'line_bytes' applies to cache levels only (expected managed = "
                  "cache in [mem.reg])");
    RT_EXPECT_STR(load_cpu_with("transaction_bytes = 48\n"),
                  "F:22:1: error: 'transaction_bytes' must be a power of two (got 48)");

    // Measured per-instruction-class entries in [compute].
    static char text[4096];
    snprintf(text, sizeof text, "%s", base_cpu);
    static const char insn[] = "f32_fma_gflops_per_teu = 2.5\nx_gflops_per_teu=1 \n";
    char *reg = strstr(text, "[mem.dram]");
    memmove(reg + strlen(insn), reg, strlen(reg) + 1);
    memcpy(reg, insn, strlen(insn));
    RT_EXPECT_STR(load_text(text, strlen(text)), "");
    RT_EXPECT_EQ(dev.n_insn, 2);
    RT_EXPECT_STR(dev.insn[0].name, "f32_fma");
    RT_EXPECT_NEAR(dev.insn[0].gflops_per_teu, 2.5, 0);
    RT_EXPECT_STR(dev.insn[1].name, "x");

    // Control characters, NUL bytes, CRLF, very long lines, missing file.
    RT_EXPECT_STR(load_text("[device]\n\0name = x\n", 19),
                  "F:2:1: error: invalid character 0x00 (expected printable text)");
    char crlf[2048];
    size_t o = 0;
    for (const char *p = base_cpu; *p; p++) {
        if (*p == '\n')
            crlf[o++] = '\r';
        crlf[o++] = *p;
    }
    RT_EXPECT_STR(load_text(crlf, o), "");
    char longline[1200];
    memset(longline, 'a', sizeof longline);
    memcpy(longline, "[device]\nname = ", 16);
    RT_EXPECT_STR(load_text(longline, sizeof longline),
                  "F:2:1001: error: line too long (expected at most 1000 characters, got 1191)");
    rt_err err = {0};
    RT_EXPECT_EQ(rt_hal_load_device("devices/does-not-exist.ini", &dev, &err), RT_ERR_IO);
    RT_EXPECT_STR(err.where.file, "devices/does-not-exist.ini");
    RT_EXPECT_STR(load_text("", 0), "F:1:1: error: missing section [device]");
    RT_EXPECT_STR(load_text("\xef\xbb\xbf[device]\n", 12),
                  "F:1:1: error: byte-order mark at the start of the file (expected plain UTF-8 "
                  "text)");
    // Many keys: bounded, so a large file cannot make the duplicate lookups quadratic.
    static char many[40000];
    size_t m = (size_t)snprintf(many, sizeof many, "[device]\n");
    for (int i = 0; i < 1100; i++)
        m += (size_t)snprintf(many + m, sizeof many - m, "k%d = 1\n", i);
    RT_EXPECT_STR(load_text(many, m), "F:1026:1: error: too many keys (expected at most 1024)");
}

// Number of open file descriptors of this process.
static int count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

// The two examples of device-ini.md, copied verbatim (comments after section headers and after
// values included), load; positions refer to the original file.
static void test_doc_examples(void) {
    load("tests/data/device-ini-v100.ini");
    RT_EXPECT_STR(dev.name, "NVIDIA Tesla V100-SXM2-16GB");
    RT_EXPECT_EQ(dev.devclass, RT_DEVCLASS_CUDA);
    RT_EXPECT_EQ(dev.units, 80); // "80 ; SMs / compute units / cores"
    RT_EXPECT_NEAR(dev.peak_gflops[RT_DTYPE_F32], 15700, 0);
    RT_EXPECT_NEAR(dev.mma_gflops[RT_DTYPE_F16], 125000, 0);
    RT_EXPECT_EQ(dev.mma_n, 16);
    RT_EXPECT_EQ(dev.n_levels, 3);
    RT_EXPECT_STR(dev.level[1].name, "shared");
    RT_EXPECT_EQ(dev.level[1].loc.line, 32);
    RT_EXPECT_EQ(dev.level[1].loc.col, 1);
    RT_EXPECT_EQ(dev.level[2].tile_capacity_bytes, 384);
    RT_EXPECT_STR(dev.level[1].loc.file, "tests/data/device-ini-v100.ini");

    load("tests/data/device-ini-cpu.ini");
    RT_EXPECT_EQ(dev.devclass, RT_DEVCLASS_CPU);
    RT_EXPECT_EQ(dev.units, 2);
    RT_EXPECT_EQ(dev.lanes, 16);
    RT_EXPECT_NEAR(dev.peak_gflops[RT_DTYPE_F32], 268.8, 1e-9);
    RT_EXPECT_EQ(dev.n_levels, 4);
    RT_EXPECT_EQ(dev.level[3].capacity_bytes, 2048);
    RT_EXPECT_EQ(dev.level[2].ways, 12);

    // Header comments in every form; an error after one still points into the original text.
    RT_EXPECT_STR(load_cpu_with("[mem.l1]\t# a comment\nlevel = 2\n"),
                  "F:22:1: error: missing key 'scope' in [mem.l1]");
    RT_EXPECT_STR(load_cpu_with("[mem.l1];glued ] with a bracket\nlevel = x ; c\n"),
                  "F:23:9: error: 'level' expects an integer (got \"x\")");
    RT_EXPECT_STR(load_cpu_with("[mem.l1]  junk ; c\n"),
                  "F:22:11: error: unexpected text after section header (expected a comment or "
                  "end of line, got \"junk ; c\")");

    // Each load closes its copy for iniparser and leaves no file behind.
    int before = count_fds();
    for (int i = 0; i < 20; i++)
        load("tests/data/device-ini-cpu.ini");
    RT_EXPECT_EQ(count_fds(), before);
}

typedef struct load_job {
    const char *path;
    int failures;
    int32_t units;
} load_job;

static void *load_many(void *arg) {
    load_job *j = arg;
    rt_device *d = malloc(sizeof *d);
    for (int i = 0; d && i < 25; i++) {
        rt_err err = {0};
        if (rt_hal_load_device(j->path, d, &err) != RT_OK || d->units != j->units)
            j->failures++;
        rt_err bad = {0};
        if (rt_hal_load_device("tests/err/ini/section-trailing-text.ini", d, &bad) == RT_OK ||
            bad.where.line != 14 || strstr(bad.msg, "\"peaks ; really\"") == NULL)
            j->failures++;
    }
    free(d);
    return NULL;
}

// Loads may run on several threads at once (iniparser's callback is process-wide).
static void test_threads(void) {
    load_job jobs[4] = {{"tests/data/device-ini-v100.ini", 0, 80},
                        {"tests/data/device-ini-cpu.ini", 0, 2},
                        {"tests/data/device-ini-v100.ini", 0, 80},
                        {"tests/data/device-ini-cpu.ini", 0, 2}};
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        RT_EXPECT_EQ(pthread_create(&th[i], NULL, load_many, &jobs[i]), 0);
    for (int i = 0; i < 4; i++) {
        RT_EXPECT_EQ(pthread_join(th[i], NULL), 0);
        RT_EXPECT_EQ(jobs[i].failures, 0);
    }
}

// Each tests/err/ini case: "; expect: L:C: error: MSG" on line 1, checked as the CLI prints it.
static void test_error_cases(void) {
    static char names[256][256];
    int n = list_ini(ERR_DIR, names, 256);
    RT_EXPECT(n >= 16);
    for (int i = 0; i < n; i++) {
        char path[512], line[1024], want[2048], got[2048];
        snprintf(path, sizeof path, "%s/%s", ERR_DIR, names[i]);
        FILE *f = fopen(path, "r");
        RT_EXPECT(f != NULL);
        if (!f)
            continue;
        bool have = fgets(line, sizeof line, f) != NULL;
        fclose(f);
        RT_EXPECT(have && strncmp(line, "; expect: ", 10) == 0);
        if (!have)
            continue;
        line[strcspn(line, "\r\n")] = '\0';
        snprintf(want, sizeof want, "%s:%s", path, line + 10);
        rt_err err = {0};
        rt_status st = rt_hal_load_device(path, &dev, &err);
        RT_EXPECT(st != RT_OK);
        RT_EXPECT_EQ(rt_status_exit_code(st), 1);
        rt_err_format(&err, "rtgen", false, got, sizeof got);
        RT_EXPECT_STR(got, want);
    }
}

// The registry lists one ops instance per class, each its own class's (hal-cuda.c, hal-hip.c,
// hal-opencl.c, hal-cpu.c): the GPU classes compile, load, run and time; the cpu class only
// validates (its kernels are JIT-compiled LLVM modules). Loaded devices carry their class's ops,
// and an arch that only the class's own validate refuses is refused through them.
static void test_class_ops(void) {
    for (int c = 0; c < RT_DEVCLASS_COUNT; c++) {
        const struct rt_hal_ops *ops = rt_hal_class_ops((rt_devclass)c);
        RT_EXPECT(ops != NULL);
        if (!ops)
            continue;
        RT_EXPECT_STR(ops->class_name, rt_devclass_name((rt_devclass)c));
        bool gpu = c != RT_DEVCLASS_CPU;
        RT_EXPECT_EQ(ops->compile != NULL, gpu);
        RT_EXPECT_EQ(ops->load != NULL, gpu);
        RT_EXPECT_EQ(ops->run != NULL, gpu);
        RT_EXPECT_EQ(ops->time != NULL, gpu);
        RT_EXPECT_EQ(ops->validate != NULL, c != RT_DEVCLASS_OPENCL);
    }
    RT_EXPECT(rt_hal_class_ops(RT_DEVCLASS_COUNT) == NULL);
    const char *paths[] = {"devices/v100.ini", "devices/mi50.ini", "devices/pocl-cpu.ini",
                           "devices/x86-avx2.ini"};
    const rt_devclass want[] = {RT_DEVCLASS_CUDA, RT_DEVCLASS_HIP, RT_DEVCLASS_OPENCL,
                                RT_DEVCLASS_CPU};
    for (int i = 0; i < 4; i++) {
        load(paths[i]);
        RT_EXPECT_EQ(dev.devclass, want[i]);
        RT_EXPECT(dev.ops == rt_hal_class_ops(want[i]));
    }
    // The cuda class's validate refuses a hip arch, and the hip class's a cuda one.
    load("devices/v100.ini");
    rt_err e;
    rt_err_clear(&e);
    RT_EXPECT_EQ(rt_hal_validate(&dev, &e), RT_OK);
    snprintf(dev.arch, sizeof dev.arch, "gfx906");
    RT_EXPECT_EQ(rt_hal_validate(&dev, &e), RT_ERR_DEVICE);
    RT_EXPECT(strstr(e.msg, "bad arch for class cuda") != NULL);
    load("devices/mi50.ini");
    snprintf(dev.arch, sizeof dev.arch, "sm_70");
    rt_err_clear(&e);
    RT_EXPECT_EQ(rt_hal_validate(&dev, &e), RT_ERR_DEVICE);
    RT_EXPECT(strstr(e.msg, "bad arch for class hip") != NULL);
}

int main(void) {
    if (access("devices", F_OK) != 0 && access(RTGEN_SOURCE_DIR, F_OK) == 0)
        RT_EXPECT_EQ(chdir(RTGEN_SOURCE_DIR), 0);
    test_shipped_devices();
    test_v100_values();
    test_curve();
    test_peaks();
    test_copy_print_json();
    test_host();
    test_strict_values();
    test_doc_examples();
    test_threads();
    test_error_cases();
    test_class_ops();
    return rt_test_finish("test-hal");
}
