// hal.h: the hardware abstraction layer. A device is data (an INI file in devices/, or the host
// CPU detected at run time) plus behaviour chosen by its class (cuda, hip, opencl, cpu).
// perfmodel and codegen see a device only through const rt_device *.
//
// Levels are ordered as in the INI: level[0] is the lowest (largest, slowest: DRAM / global),
// level[n_levels-1] the highest (registers).
#ifndef RT_HAL_H
#define RT_HAL_H

#include "rt.h"

#define RT_MAX_MEM_LEVELS    8
#define RT_MAX_CURVE_POINTS  16
#define RT_MAX_INSN_PEAKS    16   // [compute] <name>_gflops_per_teu entries
#define RT_DEVICE_TEXT_BYTES 8192 // rt_device.text: the source strings live there

// ORDER RT_DEVCLASS: registry table in hal.c.
typedef enum rt_devclass {
    RT_DEVCLASS_CUDA,
    RT_DEVCLASS_HIP,
    RT_DEVCLASS_OPENCL,
    RT_DEVCLASS_CPU,
    RT_DEVCLASS_COUNT
} rt_devclass;

typedef enum rt_mem_scope {
    RT_MEM_SCOPE_DEVICE, // one instance for the whole device
    RT_MEM_SCOPE_UNIT,   // one per SM / CU / core
    RT_MEM_SCOPE_BLOCK,  // one per thread block
    RT_MEM_SCOPE_THREAD, // one per thread (registers)
    RT_MEM_SCOPE_COUNT
} rt_mem_scope;

// The instruction set of a CPU device ([device] isa). ORDER RT_CPU_ISA: names in hal.c.
typedef enum rt_cpu_isa {
    RT_CPU_ISA_NONE,    // not a CPU device (or a host of an instruction set rtgen does not name)
    RT_CPU_ISA_X86_64,  // "x86_64"
    RT_CPU_ISA_AARCH64, // "aarch64"
    RT_CPU_ISA_COUNT
} rt_cpu_isa;

typedef enum rt_mem_managed {
    RT_MEM_EXPLICIT, // tiles are copied in by the kernel (shared memory, registers)
    RT_MEM_CACHE,    // hardware-managed cache (CPU caches)
} rt_mem_managed;

typedef struct rt_curve_point {
    int64_t bytes; // bytes moved per unit
    double gbps;   // whole-device bandwidth achieved at that size
} rt_curve_point;

// One measured per-instruction-class peak from [compute] (`f32_fma_gflops_per_teu = 64`).
typedef struct rt_insn_peak {
    char name[48];         // "f32_fma"
    double gflops_per_teu; // per TEU (warp scheduler / FMA port)
} rt_insn_peak;

typedef struct rt_mem_level {
    char name[32]; // "global", "shared", "reg", "l1" (from [mem.<name>])
    rt_loc loc;    // the section header, for messages
    int32_t level;
    rt_mem_scope scope;
    rt_mem_managed managed;
    int64_t capacity_bytes;      // per instance of the scope
    int64_t tile_capacity_bytes; // what one rTile may use; = capacity_bytes when not given
    double bandwidth_gbps;       // whole device; 0 for the register level when not given
    // Whole device, with non-temporal stores (the STREAM triad counting 12 B per element, which
    // these move, where ordinary stores also read each line first): the ceiling of kernels that
    // stream their outputs. 0 = not given.
    double stream_gbps;
    int32_t transaction_bytes; // 0 = not given
    int32_t banks, bank_bytes; // 0 = no banks
    int32_t line_bytes, ways;  // caches; 0 = not given
    double latency_ns;         // 0 = not given
    int32_t n_curve;
    rt_curve_point curve[RT_MAX_CURVE_POINTS]; // bandwidth_curve_gbps, ascending bytes
    const char *source;
} rt_mem_level;

// Microarchitecture costs of a CPU core that the CPU model prices its plans with ([compute],
// class cpu; docs: the device-INI reference). A key left out of the file stays 0 here and
// rt_hal_cpu_costs gives its default (RT_CPU_COST_DEFAULT_*), which the detected host uses too.
typedef struct rt_cpu_costs {
    double store_ports;        // store_ports: vector stores per cycle per core
    double gather_cycles;      // gather_cycles: cycles per element of a gather or scatter
    double vloop_entry_cycles; // vloop_entry_cycles: entering a vector loop whose trip count is
                               // known at run time (the vectorizer's dispatch branches)
    double libm_cycles;        // libm_cycles: per element of a function left to libm (log, tanh)
    double sqrt_cycles;        // sqrt_cycles: per vector of a square root
} rt_cpu_costs;
// Defaults and their sources. One vector store port: Intel Skylake/Ice Lake client, AMD Zen 2-4
// and Arm Neoverse N1 issue one vector store per cycle (Intel Optimization Reference Manual,
// Agner Fog's microarchitecture tables). A gather element per cycle: measured on a Zen 4 core,
// an mr = 12 A pack by 12-wide gathers took 1.2-1.3 cycles per element more than the shuffled
// one. 16 cycles per run-time-trip-count vector loop: about one mispredicted branch (15-20 cycles
// on current x86 cores) where the trip count alternates between tile sizes. 20 cycles per libm
// element: glibc's scalar logf/tanhf on x86-64 (measured by the softmax/GELU benches). 6 cycles
// per vector square root: the reciprocal throughput of vsqrtps ymm on Skylake and Zen (Agner Fog).
#define RT_CPU_COST_DEFAULT_STORE_PORTS        1.0
#define RT_CPU_COST_DEFAULT_GATHER_CYCLES      1.0
#define RT_CPU_COST_DEFAULT_VLOOP_ENTRY_CYCLES 16.0
#define RT_CPU_COST_DEFAULT_LIBM_CYCLES        20.0
#define RT_CPU_COST_DEFAULT_SQRT_CYCLES        6.0

typedef struct rt_device {
    const struct rt_hal_ops *ops;
    rt_devclass devclass;
    char name[128];
    char arch[64];         // sm_70, gfx906, an LLVM CPU name
    rt_loc arch_loc;       // where arch was given (the INI value), for the class validate hooks
    char path[512];        // INI path, or "(host)" for the detected host
    rt_loc origin;         // path:1 for messages
    int32_t units;         // SMs / CUs / cores
    int32_t lanes;         // lanes of one TEU (warp, wavefront, fp32 SIMD width)
    int32_t teus_per_unit; // warp schedulers / FMA ports
    double clock_mhz;
    int32_t max_threads_per_block, max_threads_per_unit, max_blocks_per_unit; // GPU; 0 on CPU
    int64_t regs_per_unit;                                                    // 32-bit registers
    double launch_overhead_us, sync_overhead_us;                              // 0 = not given
    // GPU facts the plan and occupancy use ([device], hal-ini.c "GPU plan facts"), 0 = none:
    int32_t reg_granule_warp;    // registers are allocated per warp in multiples of this (CUDA 256)
    int32_t reg_granule_lane;    // per lane in multiples of this (AMD VGPRs: 8)
    int32_t raster_group_blocks; // grouped block order over this many block rows (L2 reuse)
    // [compute], whole device. 0 = the device has no such path.
    double peak_gflops[RT_DTYPE_COUNT]; // f32_gflops, f16_gflops, bf16_gflops, f64_gflops,
                                        // i32_gops, i8_gops
    double mma_gflops[RT_DTYPE_COUNT];  // mma_f16_gflops, mma_bf16_gflops, mma_i8_gops, ...
    int32_t mma_m, mma_n, mma_k;        // mma_shape; 0 = none
    int32_t fma_latency_cycles;         // CPU: cycles of one FMA (register-block rule); 0 = n/a
    rt_cpu_costs cpu_costs;             // CPU: [compute] microarchitecture costs; 0 = not given
    int32_t n_insn;
    rt_insn_peak insn[RT_MAX_INSN_PEAKS]; // measured *_gflops_per_teu, in INI order
    const char *compute_source;
    const char *device_source;
    char features[512]; // CPU ISA features, comma separated ("avx512f,avx512bw,fma,...")
    rt_cpu_isa isa;     // CPU: instruction set ([device] isa; this host's when not given)
    bool detected;      // built from the running host
    int32_t n_levels;
    rt_mem_level level[RT_MAX_MEM_LEVELS];
    void *impl; // owned by ops->open / ops->close
    // Storage of the strings above (sources) and of path: rt_device points into itself, so copy
    // it with rt_hal_device_copy, never by assignment.
    int32_t text_used;
    char text[RT_DEVICE_TEXT_BYTES];
} rt_device;

// The behaviour of a device class (validate, compile, load, run, time) is struct rt_hal_ops,
// defined in hal-ops.h, the HAL's runtime interface; this header only describes devices.

const char *rt_devclass_name(rt_devclass c);
// "x86_64", "aarch64"; "none" for RT_CPU_ISA_NONE.
const char *rt_cpu_isa_name(rt_cpu_isa isa);
// Looks an instruction set up by its INI spelling; false when unknown (or "none").
bool rt_cpu_isa_find(const char *name, rt_cpu_isa *out);
// The instruction set rtgen runs on (the one its JIT compiles for).
rt_cpu_isa rt_hal_host_isa(void);
const char *rt_mem_scope_name(rt_mem_scope s);
// Looks a class up by its INI spelling ("cuda"); false when unknown.
bool rt_hal_find_class(const char *name, rt_devclass *out);
// The behaviour of a class (registry row in hal.c).
const struct rt_hal_ops *rt_hal_class_ops(rt_devclass c);
// The class's own validation of dev's loaded numbers (its ops' validate: e.g. the spelling of
// arch), RT_OK when the class has none. Errors: RT_ERR_DEVICE at dev->arch_loc.
rt_status rt_hal_validate(const rt_device *dev, rt_err *err);

// Copies s into dev->text and returns the copy; NULL when dev->text is full.
const char *rt_hal_device_text(rt_device *dev, const char *s);

// Copies a device, rebasing its internal pointers (sources, locations) onto dst.
void rt_hal_device_copy(rt_device *dst, const rt_device *src);

// dev restricted to its first `units` cores (a benchmark's row on 1 of 2 cores): units set, and
// the whole-device figures that are sums over the cores scaled by units / dev->units -- the
// compute peaks and the bandwidths of the caches (every level but the device memory, level 0,
// which fewer cores still reach most of). A CPU model's per-core clock (peak / units / ...) is
// then unchanged; with units alone lowered, one core would get the whole device's FMA rate.
// Nothing happens unless 1 <= units < dev->units.
void rt_hal_device_on_units(rt_device *dev, int32_t units);

// The cross-checks of a complete device (level numbering, capacities, class rules, the class's
// validate hook), with errors at dev->origin and the level headers. rt_hal_load_device runs the
// same checks with the exact INI key positions.
rt_status rt_hal_check_device(const rt_device *dev, rt_err *err);

// Loads and strictly validates an INI device file (devices/*.ini). Errors carry file:line:col
// of the offending key or section. The device is written to *out (no arena needed).
rt_status rt_hal_load_device(const char *path, rt_device *out, rt_err *err);

// Describes the running host CPU (hwloc topology + cpuid), refined by host_ini when that file
// exists (host_ini may be NULL). Never fails for lack of information: falls back to
// conservative values and says so in the source strings. Its clock, peaks and bandwidths are
// nominal (the clock /proc/cpuinfo reports, bandwidth policies), and every source says so;
// rt_hal_host_device measures them.
rt_status rt_hal_detect_host(const char *host_ini, rt_device *out, rt_err *err);

// Figures measured on the running host by the default device's first-use probe
// (rt_hal_host_probe) or read back from its cache. A figure <= 0 was not measured.
typedef struct rt_host_figures {
    char date[16];              // "YYYY-MM-DD", the day of the measurement
    double clock_mhz;           // a dependent integer-add chain on one core: the clock under load
    double f32_gflops_per_core; // independent f32 vector FMA chains on one core
    int32_t threads;            // threads of the triads (one per core this process may use)
    double llc_gbps;            // STREAM triad over a quarter of level 1 (the last-level cache)
    int64_t llc_bytes;          // its working set, all threads and 3 arrays
    double dram_gbps;           // STREAM triad over a buffer 2x the caches
    int64_t dram_bytes;         // its working set
    double dram_stream_gbps;    // the same with non-temporal stores
    double seconds;             // wall time of the probe
    bool complete; // the probe measured every figure (none was skipped for a loaded machine)
} rt_host_figures;

// rt_hal_detect_host(NULL, ...) with the measured figures of fig in place of the nominal ones
// (fig NULL: nominal): clock_mhz, teus_per_unit (FMA pipes: the per-core FMA rate over clock x
// lanes x 2, rounded), the f32 peak (units x the per-core rate), level 1's and DRAM's
// bandwidths. Figures that stay nominal (f64 = f32 / 2, per-cycle policies of the other caches
// at the measured clock, FMA latency) are said so in the sources, whose "measured: host probe
// DATE (keys)" part names the measured keys. note (may be NULL) is appended to the device's
// source ("cached in PATH").
rt_status rt_hal_detect_host_measured(const rt_host_figures *fig, const char *note, rt_device *out,
                                      rt_err *err);

// The key of the host probe's cache: host name, CPU brand string and the number of CPUs this
// process may run on ("build7 | AMD EPYC 7B13 64-Core Processor | 2 cpus").
void rt_hal_host_key(char *out, size_t size);

// The default device (rtgen without --device), in this order:
//   1. the file named by $RTGEN_HOST_INI when that is set and not empty (an error when it
//      cannot be read or is not a valid device file, at its file:line:col);
//   2. $XDG_CONFIG_HOME/rtgen/host.ini ($HOME/.config/rtgen/host.ini when XDG_CONFIG_HOME is
//      unset or relative) when it exists -- where `rtcalib -o` writes a full calibration;
//   3. the detected host with measured figures (rt_hal_detect_host_measured): read from the
//      cache $XDG_CACHE_HOME/rtgen/host-<host>-<hash>.txt ($HOME/.cache/rtgen/ by default),
//      keyed by rt_hal_host_key, or measured by rt_hal_host_probe on first use (about 0.2 s)
//      and written there atomically. A cache file that does not parse, is of another version
//      or another key is measured again and rewritten; one that cannot be written is not an
//      error (the device source says so). $RTGEN_NO_PROBE=1 skips the probe and the cache:
//      the figures stay nominal, and the sources say so.
rt_status rt_hal_host_device(rt_device *out, rt_err *err);

// Runs the first-use probe (hal/calib-cpu.c's probes with rt_calib_opts.host_probe) on the
// nominal host device and returns its figures, each rounded to 4 digits. A probe that found too
// few undisturbed samples leaves its figure 0 and complete false; so does a clock at which the
// per-core FMA rate is no whole number of FMA pipes (within 0.25): one of the two was misread.
// Errors: RT_ERR_BACKEND (LLVM, threads), RT_ERR_NOMEM.
rt_status rt_hal_host_probe(const rt_device *nominal, rt_host_figures *out, rt_err *err);

// The host probe's cache file as text, and back. rt_hal_host_figures_parse returns false (with
// the reason in why) for text that is not a complete cache file of this version and key.
void rt_hal_host_figures_format(const rt_host_figures *fig, const char *key, rt_buf *out);
bool rt_hal_host_figures_parse(const char *text, const char *key, rt_host_figures *out, char *why,
                               size_t why_size);

// "measured DATE" (or "measured" without a date) when src says the figure `key` was measured:
// src starts with "measured" and either lists no keys or lists key in its first "(k1, k2)";
// otherwise "nominal". key may be NULL (any figure of src).
void rt_hal_figure_label(const char *src, const char *key, char *out, size_t size);

// Bandwidth of a level when moving bytes_per_unit bytes per unit: interpolates the curve
// (linear in log(bytes)), or returns bandwidth_gbps when the level has no curve.
double rt_hal_level_gbps(const rt_mem_level *lvl, double bytes_per_unit);

// Peak of a data type, taking the matrix path when use_mma and the device has one.
double rt_hal_peak_gflops(const rt_device *dev, rt_dtype t, bool use_mma);

// Human summary (for --dry-run) and a JSON object (jansson json_t *, returned as void * so this
// header does not need jansson.h; the caller owns the reference).
void rt_hal_print_device(const rt_device *dev, rt_buf *out);
void *rt_hal_device_to_json(const rt_device *dev);

// dev's CPU costs, each one the file leaves out (0) at its default.
rt_cpu_costs rt_hal_cpu_costs(const rt_device *dev);

#endif
