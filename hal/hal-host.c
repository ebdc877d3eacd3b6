// hal-host.c: describes the CPU rtgen runs on, so that `rtgen OP.spec` works without a device
// file. hwloc gives the cores this process may use and the caches (size, line, associativity);
// cpuid (x86 only) gives the ISA features, checked against what the OS enables (xgetbv), and
// the LLVM CPU name. Nominal figures: peaks from units x FMA ports x lanes x 2 x the clock
// /proc/cpuinfo reports, bandwidths from conservative policies. The default device replaces
// the clock, the f32 peak and the bandwidths of DRAM and the last-level cache by the figures
// its first-use probe measured (hal-host-probe.c, rt_hal_detect_host_measured); rtcalib
// measures everything into an INI file that replaces detection entirely.
#define _GNU_SOURCE // sched_getaffinity, CPU_COUNT
#include "hal.h"

#include <hwloc.h>

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

// What detection found; turned into an rt_device by rt_host_build.
typedef struct rt_host_info {
    int32_t cores;
    int64_t dram_bytes;
    int64_t cache_bytes[4]; // [1] L1d, [2] L2, [3] L3 (all instances our cores reach); 0 = none
    int32_t cache_line_bytes[4], cache_ways[4];
    double clock_mhz;
    char clock_from[32];
    char topo_from[64];
    // ISA (enabled by both the CPU and the OS)
    bool avx2, fma, avx512f, avx512dq, avx512bw, avx512vl, avx512_vnni, avx512_bf16, avx512_fp16;
    bool amx_tile, amx_bf16, amx_int8;
    char vendor[16];
    uint32_t family, model;
    char arch[32];
    char features[256];
} rt_host_info;

// ---------------------------------------------------------------------------------------------
// hwloc: cores, caches, memory
// ---------------------------------------------------------------------------------------------

static bool rt_host_cache_level(hwloc_obj_type_t t, int *level) {
    switch (t) {
    case HWLOC_OBJ_L1CACHE:
        *level = 1;
        return true;
    case HWLOC_OBJ_L2CACHE:
        *level = 2;
        return true;
    case HWLOC_OBJ_L3CACHE:
        *level = 3;
        return true;
    default:
        return false;
    }
}

static void rt_host_hwloc(rt_host_info *h) {
    unsigned v = hwloc_get_api_version();
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0)
        return;
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        return;
    }
    snprintf(h->topo_from, sizeof h->topo_from, "hwloc %u.%u.%u", (v >> 16) & 0xff, (v >> 8) & 0xff,
             v & 0xff);
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (set && hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) != 0)
        hwloc_bitmap_copy(set, hwloc_topology_get_allowed_cpuset(topo));
    hwloc_const_bitmap_t use = set ? set : hwloc_topology_get_allowed_cpuset(topo);

    int32_t cores = 0, pus = 0;
    for (hwloc_obj_t o = NULL; (o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_CORE, o));)
        cores += hwloc_bitmap_intersects(o->cpuset, use);
    for (hwloc_obj_t o = NULL; (o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PU, o));)
        pus += hwloc_bitmap_intersects(o->cpuset, use);
    h->cores = cores > 0 ? cores : pus;

    static const hwloc_obj_type_t types[] = {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE,
                                             HWLOC_OBJ_L3CACHE};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        int level = 0;
        if (!rt_host_cache_level(types[i], &level))
            continue;
        for (hwloc_obj_t o = NULL; (o = hwloc_get_next_obj_by_type(topo, types[i], o));) {
            if (!o->attr || o->attr->cache.type == HWLOC_OBJ_CACHE_INSTRUCTION ||
                !hwloc_bitmap_intersects(o->cpuset, use))
                continue;
            // L1/L2: one instance (per core); L3: every instance our cores reach.
            if (level < 3 && h->cache_bytes[level] > 0)
                continue;
            h->cache_bytes[level] += (int64_t)o->attr->cache.size;
            h->cache_line_bytes[level] = (int32_t)o->attr->cache.linesize;
            h->cache_ways[level] =
                o->attr->cache.associativity > 0 ? (int32_t)o->attr->cache.associativity : 0;
        }
    }
    hwloc_obj_t root = hwloc_get_root_obj(topo);
    if (root)
        h->dram_bytes = (int64_t)root->total_memory;
    hwloc_bitmap_free(set);
    hwloc_topology_destroy(topo);
}

// ---------------------------------------------------------------------------------------------
// cpuid: ISA features and the LLVM CPU name
// ---------------------------------------------------------------------------------------------

// ISA rank of an LLVM CPU name or of the host's features: 0 none, 1 AVX2+FMA, 2 AVX-512,
// 3 AVX-512 + AMX. A model-table name is used only when its rank matches the host's, so a VM
// that reports a client model with server features (or an OS without AVX-512 state) gets a
// name whose ISA it really has.
typedef struct rt_cpu_model {
    uint32_t family, model;
    const char *arch;
    int rank;
} rt_cpu_model;

// clang-format off
static const rt_cpu_model rt_cpu_models[] = {
    {6, 0x3C, "haswell", 1},        {6, 0x3F, "haswell", 1},        {6, 0x45, "haswell", 1},
    {6, 0x46, "haswell", 1},        {6, 0x3D, "broadwell", 1},      {6, 0x47, "broadwell", 1},
    {6, 0x4F, "broadwell", 1},      {6, 0x56, "broadwell", 1},      {6, 0x4E, "skylake", 1},
    {6, 0x5E, "skylake", 1},        {6, 0x8E, "skylake", 1},        {6, 0x9E, "skylake", 1},
    {6, 0x55, "skylake-avx512", 2}, {6, 0x6A, "icelake-server", 2}, {6, 0x6C, "icelake-server", 2},
    {6, 0x7D, "icelake-client", 2}, {6, 0x7E, "icelake-client", 2}, {6, 0x8C, "tigerlake", 2},
    {6, 0x8D, "tigerlake", 2},      {6, 0xA7, "rocketlake", 2},     {6, 0x97, "alderlake", 1},
    {6, 0x9A, "alderlake", 1},      {6, 0xB7, "raptorlake", 1},     {6, 0xBA, "raptorlake", 1},
    {6, 0xBF, "raptorlake", 1},     {6, 0x8F, "sapphirerapids", 3}, {6, 0xCF, "sapphirerapids", 3},
    {6, 0xAD, "graniterapids", 3},  {6, 0xAE, "graniterapids", 3},
};
// clang-format on

static int rt_host_rank(const rt_host_info *h) {
    if (h->avx512f && h->amx_tile)
        return 3;
    if (h->avx512f)
        return 2;
    if (h->avx2 && h->fma)
        return 1;
    return 0;
}

static const char *rt_host_arch_from_features(const rt_host_info *h) {
    if (h->avx512f && (h->amx_tile || h->avx512_fp16))
        return "sapphirerapids";
    if (h->avx512f && h->avx512_bf16)
        return "cooperlake";
    if (h->avx512f && h->avx512_vnni)
        return "cascadelake";
    if (h->avx512f)
        return "skylake-avx512";
    if (h->avx2 && h->fma)
        return "haswell";
    return "native";
}

static const char *rt_host_arch_from_model(const rt_host_info *h) {
    if (strcmp(h->vendor, "GenuineIntel") == 0) {
        for (size_t i = 0; i < sizeof rt_cpu_models / sizeof rt_cpu_models[0]; i++) {
            const rt_cpu_model *m = &rt_cpu_models[i];
            if (m->family == h->family && m->model == h->model)
                return m->rank == rt_host_rank(h) ? m->arch : NULL;
        }
    } else if (strcmp(h->vendor, "AuthenticAMD") == 0) {
        // Zen: family 0x17 (Zen 1/2), 0x19 (Zen 3/4), 0x1a (Zen 5). Zen 4 is the first with
        // AVX-512. LLVM 16 has no znver5 (LLVM 19 added it): Zen 5 gets znver4, the nearest core
        // it knows, rather than the Intel name its features alone would give.
        if (h->family == 0x17 && rt_host_rank(h) == 1)
            return h->model >= 0x30 ? "znver2" : "znver1";
        if (h->family == 0x19 || h->family == 0x1a)
            return rt_host_rank(h) >= 2 ? "znver4" : rt_host_rank(h) == 1 ? "znver3" : NULL;
    }
    return NULL;
}

static void rt_host_add_feature(rt_host_info *h, bool has, const char *name) {
    if (!has)
        return;
    size_t n = strlen(h->features);
    snprintf(h->features + n, sizeof h->features - n, "%s%s", n ? "," : "", name);
}

// The CPU's brand string (cpuid 0x80000002-4, x86 only), without surrounding blanks; "" when
// there is none.
static void rt_host_brand(char *out, size_t size) {
    char brand[49] = {0};
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x80000004) {
        for (unsigned i = 0; i < 3; i++) {
            __get_cpuid(0x80000002 + i, &a, &b, &c, &d);
            memcpy(brand + 16 * i, &a, 4);
            memcpy(brand + 16 * i + 4, &b, 4);
            memcpy(brand + 16 * i + 8, &c, 4);
            memcpy(brand + 16 * i + 12, &d, 4);
        }
    }
#endif
    const char *s = brand;
    while (*s == ' ')
        s++;
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == ' ')
        n--;
    snprintf(out, size, "%.*s", (int)n, s);
}

#if defined(__x86_64__)
static uint64_t rt_host_xgetbv(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}
#endif

static void rt_host_cpuid(rt_host_info *h) {
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return;
    unsigned max_leaf = a;
    memcpy(h->vendor, &b, 4);
    memcpy(h->vendor + 4, &d, 4);
    memcpy(h->vendor + 8, &c, 4);
    h->vendor[12] = '\0';
    __get_cpuid(1, &a, &b, &c, &d);
    uint32_t fam = (a >> 8) & 0xf, model = (a >> 4) & 0xf;
    if (fam == 0xf)
        fam += (a >> 20) & 0xff;
    if (fam == 0x6 || fam >= 0xf)
        model |= ((a >> 16) & 0xf) << 4;
    h->family = fam;
    h->model = model;
    bool osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
    bool fma = (c >> 12) & 1;
    uint64_t xcr0 = osxsave ? rt_host_xgetbv() : 0;
    bool os_avx = (xcr0 & 0x6) == 0x6;
    bool os_avx512 = (xcr0 & 0xe6) == 0xe6;
    bool os_amx = (xcr0 & (3u << 17)) == (3u << 17);
    h->fma = fma && avx && os_avx;
    if (max_leaf >= 7) {
        unsigned a7, b7, c7, d7;
        __cpuid_count(7, 0, a7, b7, c7, d7);
        h->avx2 = avx && os_avx && ((b7 >> 5) & 1);
        h->avx512f = os_avx512 && ((b7 >> 16) & 1);
        h->avx512dq = h->avx512f && ((b7 >> 17) & 1);
        h->avx512bw = h->avx512f && ((b7 >> 30) & 1);
        h->avx512vl = h->avx512f && ((b7 >> 31) & 1);
        h->avx512_vnni = h->avx512f && ((c7 >> 11) & 1);
        h->avx512_fp16 = h->avx512f && ((d7 >> 23) & 1);
        h->amx_bf16 = os_amx && ((d7 >> 22) & 1);
        h->amx_tile = os_amx && ((d7 >> 24) & 1);
        h->amx_int8 = os_amx && ((d7 >> 25) & 1);
        if (a7 >= 1) {
            unsigned a71, b71, c71, d71;
            __cpuid_count(7, 1, a71, b71, c71, d71);
            h->avx512_bf16 = h->avx512f && ((a71 >> 5) & 1);
        }
    }
    // Brand string, for the clock when /proc/cpuinfo has none ("... @ 2.10GHz").
    char brand[49];
    rt_host_brand(brand, sizeof brand);
    const char *at = strstr(brand, "@ ");
    double ghz = at ? strtod(at + 2, NULL) : 0.0;
    if (h->clock_mhz <= 0.0 && ghz > 0.1 && ghz < 10.0) {
        h->clock_mhz = ghz * 1000.0;
        snprintf(h->clock_from, sizeof h->clock_from, "cpuid brand string");
    }
#else
    (void)h;
#endif
    rt_host_add_feature(h, h->avx2, "avx2");
    rt_host_add_feature(h, h->fma, "fma");
    rt_host_add_feature(h, h->avx512f, "avx512f");
    rt_host_add_feature(h, h->avx512dq, "avx512dq");
    rt_host_add_feature(h, h->avx512bw, "avx512bw");
    rt_host_add_feature(h, h->avx512vl, "avx512vl");
    rt_host_add_feature(h, h->avx512_vnni, "avx512_vnni");
    rt_host_add_feature(h, h->avx512_bf16, "avx512_bf16");
    rt_host_add_feature(h, h->avx512_fp16, "avx512_fp16");
    rt_host_add_feature(h, h->amx_tile, "amx-tile");
    rt_host_add_feature(h, h->amx_bf16, "amx-bf16");
    rt_host_add_feature(h, h->amx_int8, "amx-int8");
#if defined(__aarch64__)
    rt_host_add_feature(h, true, "neon");
#endif
    const char *arch = rt_host_arch_from_model(h);
    if (!arch)
        arch = rt_host_arch_from_features(h); // "native" without x86 features
    snprintf(h->arch, sizeof h->arch, "%s", arch);
}

// The first "cpu MHz" of /proc/cpuinfo (Linux); 0 when absent.
static double rt_host_cpuinfo_mhz(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return 0.0;
    char line[256];
    double mhz = 0.0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "cpu MHz", 7) == 0) {
            const char *colon = strchr(line, ':');
            mhz = colon ? strtod(colon + 1, NULL) : 0.0;
            break;
        }
    }
    fclose(f);
    return mhz > 100.0 && mhz < 10000.0 ? mhz : 0.0;
}

// ---------------------------------------------------------------------------------------------
// The device
// ---------------------------------------------------------------------------------------------

// Policy bandwidths, per core and cycle, below what the build machine measured
// (toolchain-probe.md §6: L1 ~100, L2 ~36, L3 ~10 B per cycle per core, DRAM 13 GB/s per core).
#define RT_HOST_L1_VECTORS_PER_CYCLE 1.5
#define RT_HOST_L2_BYTES_PER_CYCLE   32.0
#define RT_HOST_L3_BYTES_PER_CYCLE   8.0
#define RT_HOST_DRAM_GBPS_PER_CORE   8.0
#define RT_HOST_DRAM_GBPS_MAX        64.0

static bool rt_host_pow2(int64_t x) {
    return x > 0 && (x & (x - 1)) == 0;
}

static void rt_host_level(rt_device *dev, const char *name, rt_mem_scope scope,
                          rt_mem_managed managed, int64_t capacity_bytes, double gbps,
                          int32_t line_bytes, int32_t ways, const char *source) {
    rt_mem_level *l = &dev->level[dev->n_levels];
    snprintf(l->name, sizeof l->name, "%s", name);
    l->loc = dev->origin;
    l->level = dev->n_levels;
    l->scope = scope;
    l->managed = managed;
    l->capacity_bytes = capacity_bytes;
    l->tile_capacity_bytes = capacity_bytes;
    l->bandwidth_gbps = gbps;
    if (managed == RT_MEM_CACHE) {
        l->line_bytes = rt_host_pow2(line_bytes) ? line_bytes : 64;
        l->ways = ways > 0 ? ways : 0;
    }
    l->source = rt_hal_device_text(dev, source);
    dev->n_levels++;
}

// Texts of a measured figure's source: "measured: host probe DATE (keys)" and its tail.
#define RT_HOST_MEASURED "measured: host probe"

// The FMA pipes per core that the measured per-core f32 FMA rate implies at the measured
// clock: rate / (clock x lanes x 2), rounded, within [1, 2 x the nominal pipes] (a clock read on
// a loaded core must not give a core 5 pipes); 0 when either figure is missing.
static int32_t rt_host_measured_pipes(const rt_host_figures *fig, int32_t lanes, int32_t nominal) {
    if (!fig || !(fig->clock_mhz > 0) || !(fig->f32_gflops_per_core > 0) || lanes < 1)
        return 0;
    double p = fig->f32_gflops_per_core / (fig->clock_mhz / 1000.0 * lanes * 2.0);
    int32_t pipes = p < 1.5 ? 1 : (int32_t)lround(p);
    return pipes > 2 * nominal ? 2 * nominal : pipes;
}

// Clock, FMA pipes and peaks: nominal (units x FMA ports x lanes x 2 x clock, the clock from
// /proc/cpuinfo) or, with fig, the measured clock and units x the measured per-core FMA rate.
static void rt_host_build_compute(const rt_host_info *h, const rt_host_figures *fig,
                                  const char *note, rt_device *dev) {
    dev->units = h->cores;
    dev->lanes = h->avx512f ? 16 : h->avx2 ? 8 : 4;
    // FMA pipes per core at the vector width of `lanes`: two (Intel since Haswell, AMD Zen 1-3
    // at 256 bits, Zen 5, Arm N1); one without FMA. Zen 4 (family 0x19 with AVX-512) runs a
    // 512-bit FMA as two halves on its two 256-bit pipes: one zmm FMA per cycle (measured on a
    // Genoa VM: 24 independent zmm FMA chains at 32 flop per cycle, as 12 ymm chains).
#if defined(__x86_64__)
    dev->teus_per_unit = h->fma ? 2 : 1;
    if (h->avx512f && strcmp(h->vendor, "AuthenticAMD") == 0 && h->family == 0x19)
        dev->teus_per_unit = 1;
#else
    dev->teus_per_unit = 2;
#endif
    int32_t nominal_pipes = dev->teus_per_unit;
    bool clock_measured = fig && fig->clock_mhz > 0;
    bool f32_measured = fig && fig->f32_gflops_per_core > 0;
    int32_t pipes = rt_host_measured_pipes(fig, dev->lanes, nominal_pipes);
    if (pipes > 0)
        dev->teus_per_unit = pipes;
    dev->clock_mhz = clock_measured ? fig->clock_mhz : h->clock_mhz;
    double ghz = dev->clock_mhz / 1000.0;
    double f32 = f32_measured ? dev->units * fig->f32_gflops_per_core
                              : dev->units * dev->teus_per_unit * dev->lanes * 2.0 * ghz;
    dev->peak_gflops[RT_DTYPE_F32] = f32;
    dev->peak_gflops[RT_DTYPE_F64] = f32 / 2.0;
    if (h->avx512_bf16)
        dev->peak_gflops[RT_DTYPE_BF16] = 2.0 * f32;
    if (h->amx_tile && h->amx_bf16 && h->amx_int8) {
        dev->mma_gflops[RT_DTYPE_BF16] = dev->units * 1024.0 * ghz;
        dev->mma_gflops[RT_DTYPE_I8] = dev->units * 2048.0 * ghz;
        dev->mma_m = 16;
        dev->mma_n = 16;
        dev->mma_k = 32;
    }
    dev->fma_latency_cycles = 4;
    // The CPU model's microarchitecture costs: the documented defaults (hal.h).
    dev->cpu_costs =
        (rt_cpu_costs){RT_CPU_COST_DEFAULT_STORE_PORTS, RT_CPU_COST_DEFAULT_GATHER_CYCLES,
                       RT_CPU_COST_DEFAULT_VLOOP_ENTRY_CYCLES, RT_CPU_COST_DEFAULT_LIBM_CYCLES,
                       RT_CPU_COST_DEFAULT_SQRT_CYCLES};

    char text[2048], head[384] = "";
    if (clock_measured)
        snprintf(head, sizeof head,
                 RT_HOST_MEASURED " %s (clock_mhz%s): %.4g MHz under load (a dependent add chain, "
                                  "1 thread)%s -- other values: ",
                 fig->date, pipes > 0 ? ", teus_per_unit" : "", fig->clock_mhz,
                 pipes > 0 ? ", FMA pipes = the 1-thread FMA rate / (clock x lanes x 2)" : "");
    snprintf(text, sizeof text,
             "%sdetected: %s / cpuid %s family 0x%x model 0x%x; nominal: clock %.6g MHz from %s, "
             "%d FMA pipe%s per core at %d lanes%s",
             head, h->topo_from[0] ? h->topo_from : "no hwloc topology (defaults)",
             h->vendor[0] ? h->vendor : "(none)", (unsigned)h->family, (unsigned)h->model,
             h->clock_mhz, h->clock_from, (int)nominal_pipes, nominal_pipes == 1 ? "" : "s",
             (int)dev->lanes, note ? note : "");
    dev->device_source = rt_hal_device_text(dev, text);
    head[0] = '\0';
    if (f32_measured)
        snprintf(head, sizeof head,
                 RT_HOST_MEASURED " %s (f32_gflops): %d cores x %.4g GFLOP/s (independent f32 "
                                  "FMA chains, 1 thread) -- other values: ",
                 fig->date, (int)dev->units, fig->f32_gflops_per_core);
    snprintf(text, sizeof text, "%snominal: %sf64 at f32 / 2%s%s; FMA latency 4 cycles", head,
             f32_measured ? "" : "f32 = units x FMA ports x lanes x 2 x clock; ",
             h->avx512_bf16 ? "; bf16 dot products at 2x f32" : "",
             dev->mma_m ? "; AMX 1024 bf16 and 2048 int8 ops per cycle per core" : "");
    dev->compute_source = rt_hal_device_text(dev, text);
}

// A level's source: "measured: host probe DATE (bandwidth_gbps): HOW -- other values: DETECTED"
// when its bandwidth was measured (fig not NULL), else "DETECTED; nominal: POLICY".
static const char *rt_host_level_source(rt_device *dev, const rt_host_figures *fig,
                                        int64_t ws_bytes, bool stream, const char *detected,
                                        const char *policy) {
    char text[768];
    if (fig)
        snprintf(text, sizeof text,
                 RT_HOST_MEASURED " %s (bandwidth_gbps%s): STREAM triad (12 B per element)%s, %d "
                                  "thread%s, %.4g MiB in all -- other values: %s",
                 fig->date, stream ? ", stream_gbps" : "",
                 stream ? ", with ordinary and with non-temporal stores" : "", (int)fig->threads,
                 fig->threads == 1 ? "" : "s", (double)ws_bytes / (1 << 20), detected);
    else
        snprintf(text, sizeof text, "%s; nominal: %s", detected, policy);
    return rt_hal_device_text(dev, text);
}

static void rt_host_build_levels(const rt_host_info *h, const rt_host_figures *fig,
                                 rt_device *dev) {
    double ghz = dev->clock_mhz / 1000.0;
    double cores = dev->units;
    bool dram_measured = fig && fig->dram_gbps > 0, llc_measured = fig && fig->llc_gbps > 0;
    double dram_gbps = cores * RT_HOST_DRAM_GBPS_PER_CORE;
    if (dram_gbps > RT_HOST_DRAM_GBPS_MAX)
        dram_gbps = RT_HOST_DRAM_GBPS_MAX;
    int32_t vec_bytes = dev->lanes * 4;
    int64_t reg_bytes = (int64_t)(h->avx512f ? 32 : 16) * vec_bytes;
    const char *clock = fig && fig->clock_mhz > 0 ? "the measured clock" : "the nominal clock";
    char policy[128];

    // Caches, largest first, kept only when they fit inside the level below (a VM may report
    // odd sizes). Level 1, the last-level cache of the model's warm rule, and DRAM take the
    // probe's triads.
    int64_t below = h->dram_bytes;
    rt_host_level(dev, "dram", RT_MEM_SCOPE_DEVICE, RT_MEM_CACHE, h->dram_bytes,
                  dram_measured ? fig->dram_gbps : dram_gbps, 64, 0,
                  rt_host_level_source(dev, dram_measured ? fig : NULL, fig ? fig->dram_bytes : 0,
                                       dram_measured && fig->dram_stream_gbps > 0,
                                       "detected: hwloc and sysconf total memory",
                                       "8 GB/s per core, at most 64 GB/s"));
    dev->level[0].transaction_bytes = 64;
    if (dram_measured && fig->dram_stream_gbps > 0)
        dev->level[0].stream_gbps = fig->dram_stream_gbps;
    bool llc = true; // the next cache added is level 1
    if (h->cache_bytes[3] > 0 && h->cache_bytes[3] <= below) {
        snprintf(policy, sizeof policy, "8 B per cycle per core at %s", clock);
        rt_host_level(dev, "l3", RT_MEM_SCOPE_DEVICE, RT_MEM_CACHE, h->cache_bytes[3],
                      llc_measured ? fig->llc_gbps : cores * RT_HOST_L3_BYTES_PER_CYCLE * ghz,
                      h->cache_line_bytes[3], h->cache_ways[3],
                      rt_host_level_source(dev, llc_measured ? fig : NULL, fig ? fig->llc_bytes : 0,
                                           false, "detected: hwloc L3 (all instances of our cores)",
                                           policy));
        below = h->cache_bytes[3];
        llc = false;
    }
    if (h->cache_bytes[2] > 0 && h->cache_bytes[2] <= below) {
        bool m = llc && llc_measured;
        snprintf(policy, sizeof policy, "32 B per cycle per core at %s", clock);
        rt_host_level(dev, "l2", RT_MEM_SCOPE_UNIT, RT_MEM_CACHE, h->cache_bytes[2],
                      m ? fig->llc_gbps : cores * RT_HOST_L2_BYTES_PER_CYCLE * ghz,
                      h->cache_line_bytes[2], h->cache_ways[2],
                      rt_host_level_source(dev, m ? fig : NULL, fig ? fig->llc_bytes : 0, false,
                                           "detected: hwloc L2", policy));
        below = h->cache_bytes[2];
        llc = false;
    }
    if (h->cache_bytes[1] > 0 && h->cache_bytes[1] <= below && h->cache_bytes[1] >= reg_bytes) {
        bool m = llc && llc_measured;
        snprintf(policy, sizeof policy, "1.5 vector loads per cycle per core at %s", clock);
        rt_host_level(dev, "l1", RT_MEM_SCOPE_UNIT, RT_MEM_CACHE, h->cache_bytes[1],
                      m ? fig->llc_gbps : cores * RT_HOST_L1_VECTORS_PER_CYCLE * vec_bytes * ghz,
                      h->cache_line_bytes[1], h->cache_ways[1],
                      rt_host_level_source(dev, m ? fig : NULL, fig ? fig->llc_bytes : 0, false,
                                           "detected: hwloc L1d", policy));
    }
    rt_host_level(dev, "reg", RT_MEM_SCOPE_UNIT, RT_MEM_EXPLICIT, reg_bytes, 0.0, 0, 0,
                  h->avx512f ? "spec: 32 vector registers" : "spec: 16 vector registers");
}

static void rt_host_build(const rt_host_info *h, const rt_host_figures *fig, const char *note,
                          rt_device *dev) {
    snprintf(dev->path, sizeof dev->path, "(host)");
    dev->origin = rt_loc_make(dev->path, 0, 0);
    dev->arch_loc = dev->origin;
    dev->devclass = RT_DEVCLASS_CPU;
    dev->ops = rt_hal_class_ops(RT_DEVCLASS_CPU);
    dev->detected = true;
    snprintf(dev->arch, sizeof dev->arch, "%s", h->arch);
    snprintf(dev->features, sizeof dev->features, "%s", h->features);
    dev->isa = rt_hal_host_isa();
    snprintf(dev->name, sizeof dev->name, "host CPU (%s, %d cores)", h->arch, (int)h->cores);
    rt_host_build_compute(h, fig, note, dev);
    rt_host_build_levels(h, fig, dev);
}

// Everything detection finds: hwloc, the OS, /proc/cpuinfo, cpuid.
static void rt_host_detect(rt_host_info *h) {
    memset(h, 0, sizeof *h);
    rt_host_hwloc(h);
    if (h->cores <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        h->cores = n > 0 && n < 65536 ? (int32_t)n : 1;
    }
    // Memory: the larger of hwloc's NUMA total and the OS's count (sandboxes and VMs may
    // report a small NUMA node), 4 GiB when neither is known.
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    int64_t os_bytes = pages > 0 && page > 0 ? (int64_t)pages * page : 0;
    if (os_bytes > h->dram_bytes)
        h->dram_bytes = os_bytes;
    if (h->dram_bytes <= 0)
        h->dram_bytes = (int64_t)1 << 32;
    if (h->cache_bytes[1] <= 0) {
        h->cache_bytes[1] = 32 * 1024; // conservative defaults, said so in the sources
        h->cache_bytes[2] = 256 * 1024;
    }
    h->clock_mhz = rt_host_cpuinfo_mhz();
    if (h->clock_mhz > 0.0)
        snprintf(h->clock_from, sizeof h->clock_from, "/proc/cpuinfo");
    rt_host_cpuid(h);
    if (h->clock_mhz <= 0.0) {
        h->clock_mhz = 2000.0;
        snprintf(h->clock_from, sizeof h->clock_from, "default 2000 MHz");
    }
}

rt_status rt_hal_detect_host_measured(const rt_host_figures *fig, const char *note, rt_device *out,
                                      rt_err *err) {
    memset(out, 0, sizeof *out);
    rt_host_info h;
    rt_host_detect(&h);
    rt_host_build(&h, fig, note, out);
    return rt_hal_check_device(out, err);
}

rt_status rt_hal_detect_host(const char *host_ini, rt_device *out, rt_err *err) {
    if (host_ini && access(host_ini, F_OK) == 0) {
        // rtcalib's measured description replaces detection wholesale.
        RT_TRY(rt_hal_load_device(host_ini, out, err));
        out->detected = false;
        return RT_OK;
    }
    return rt_hal_detect_host_measured(NULL, NULL, out, err);
}

void rt_hal_host_key(char *out, size_t size) {
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0])
        snprintf(host, sizeof host, "(no host name)");
    char brand[49];
    rt_host_brand(brand, sizeof brand);
    long cpus = 0;
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        cpus = CPU_COUNT(&set);
#endif
    if (cpus <= 0)
        cpus = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(out, size, "%s | %s | %ld cpu%s", host, brand[0] ? brand : "(no brand string)", cpus,
             cpus == 1 ? "" : "s");
}
