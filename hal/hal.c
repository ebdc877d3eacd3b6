// hal.c: the device-class registry of the HAL (one row per class: its name and its ops, which
// each backend file defines: hal-cpu.c, hal-cuda.c, hal-hip.c, hal-opencl.c), and the helpers every later layer uses on
// a loaded device: bandwidth of a level at a given transfer size, peak of a data type, and the
// human summary and JSON form of a device. Devices come from hal-ini.c (INI files) or
// hal-host.c (the detected host CPU); perfmodel and codegen read them through these helpers.
#include "hal.h"
#include "hal-impl.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

// ORDER RT_DEVCLASS
// clang-format off
static const struct {
    const char *name;
    const struct rt_hal_ops *ops;
} rt_hal_classes[] = {
    [RT_DEVCLASS_CUDA]   = {"cuda",   &rt_hal_cuda_ops},
    [RT_DEVCLASS_HIP]    = {"hip",    &rt_hal_hip_ops},
    [RT_DEVCLASS_OPENCL] = {"opencl", &rt_hal_opencl_ops},
    [RT_DEVCLASS_CPU]    = {"cpu",    &rt_hal_cpu_ops},
};
// clang-format on
_Static_assert(sizeof rt_hal_classes / sizeof rt_hal_classes[0] == RT_DEVCLASS_COUNT,
               "ORDER RT_DEVCLASS");

const char *rt_devclass_name(rt_devclass c) {
    return (unsigned)c < RT_DEVCLASS_COUNT ? rt_hal_classes[c].name : "unknown";
}

// clang-format off
static const char *const rt_cpu_isa_names[RT_CPU_ISA_COUNT] = {
    [RT_CPU_ISA_NONE]    = "none",
    [RT_CPU_ISA_X86_64]  = "x86_64",
    [RT_CPU_ISA_AARCH64] = "aarch64",
};
// clang-format on
_Static_assert(sizeof rt_cpu_isa_names / sizeof rt_cpu_isa_names[0] == RT_CPU_ISA_COUNT,
               "ORDER RT_CPU_ISA");

const char *rt_cpu_isa_name(rt_cpu_isa isa) {
    return (unsigned)isa < RT_CPU_ISA_COUNT ? rt_cpu_isa_names[isa] : "unknown";
}

bool rt_cpu_isa_find(const char *name, rt_cpu_isa *out) {
    for (int i = RT_CPU_ISA_NONE + 1; i < RT_CPU_ISA_COUNT; i++) {
        if (strcmp(name, rt_cpu_isa_names[i]) == 0) {
            *out = (rt_cpu_isa)i;
            return true;
        }
    }
    return false;
}

rt_cpu_isa rt_hal_host_isa(void) {
#if defined(__x86_64__)
    return RT_CPU_ISA_X86_64;
#elif defined(__aarch64__)
    return RT_CPU_ISA_AARCH64;
#else
    return RT_CPU_ISA_NONE;
#endif
}

const struct rt_hal_ops *rt_hal_class_ops(rt_devclass c) {
    return (unsigned)c < RT_DEVCLASS_COUNT ? rt_hal_classes[c].ops : NULL;
}

rt_status rt_hal_validate(const rt_device *dev, rt_err *err) {
    const struct rt_hal_ops *ops = dev->ops ? dev->ops : rt_hal_class_ops(dev->devclass);
    return ops && ops->validate ? ops->validate(dev, err) : RT_OK;
}

bool rt_hal_find_class(const char *name, rt_devclass *out) {
    for (int i = 0; i < RT_DEVCLASS_COUNT; i++) {
        if (strcmp(name, rt_hal_classes[i].name) == 0) {
            *out = (rt_devclass)i;
            return true;
        }
    }
    return false;
}

const char *rt_mem_scope_name(rt_mem_scope s) {
    static const char *const names[] = {
        [RT_MEM_SCOPE_DEVICE] = "device",
        [RT_MEM_SCOPE_UNIT] = "unit",
        [RT_MEM_SCOPE_BLOCK] = "block",
        [RT_MEM_SCOPE_THREAD] = "thread",
    };
    _Static_assert(sizeof names / sizeof names[0] == RT_MEM_SCOPE_COUNT, "ORDER RT_MEM_SCOPE");
    return (unsigned)s < RT_MEM_SCOPE_COUNT ? names[s] : "unknown";
}

// ---------------------------------------------------------------------------------------------
// Device storage
// ---------------------------------------------------------------------------------------------

const char *rt_hal_device_text(rt_device *dev, const char *s) {
    size_t n = strlen(s) + 1;
    if (dev->text_used < 0 || (size_t)dev->text_used + n > sizeof dev->text)
        return NULL;
    char *p = dev->text + dev->text_used;
    memcpy(p, s, n);
    dev->text_used += (int32_t)n;
    return p;
}

// Moves p from src's storage to dst's when it points into src.
static const char *rt_rebase(const rt_device *src, rt_device *dst, const char *p) {
    if (!p)
        return NULL;
    const char *base = (const char *)src;
    if (p >= base && p < base + sizeof *src)
        return (const char *)dst + (p - base);
    return p;
}

void rt_hal_device_copy(rt_device *dst, const rt_device *src) {
    if (dst == src)
        return;
    memcpy(dst, src, sizeof *dst);
    dst->origin.file = rt_rebase(src, dst, src->origin.file);
    dst->arch_loc.file = rt_rebase(src, dst, src->arch_loc.file);
    dst->compute_source = rt_rebase(src, dst, src->compute_source);
    dst->device_source = rt_rebase(src, dst, src->device_source);
    for (int i = 0; i < RT_MAX_MEM_LEVELS; i++) {
        dst->level[i].loc.file = rt_rebase(src, dst, src->level[i].loc.file);
        dst->level[i].source = rt_rebase(src, dst, src->level[i].source);
    }
}

void rt_hal_device_on_units(rt_device *dev, int32_t units) {
    if (units < 1 || units >= dev->units)
        return;
    double f = (double)units / (double)dev->units;
    for (int32_t t = 0; t < RT_DTYPE_COUNT; t++) {
        dev->peak_gflops[t] *= f;
        dev->mma_gflops[t] *= f;
    }
    for (int32_t l = 1; l < dev->n_levels && l < RT_MAX_MEM_LEVELS; l++) {
        rt_mem_level *lv = &dev->level[l];
        lv->bandwidth_gbps *= f;
        lv->stream_gbps *= f;
        for (int32_t c = 0; c < lv->n_curve && c < RT_MAX_CURVE_POINTS; c++)
            lv->curve[c].gbps *= f;
    }
    dev->units = units;
}

// ---------------------------------------------------------------------------------------------
// Model helpers
// ---------------------------------------------------------------------------------------------

double rt_hal_level_gbps(const rt_mem_level *lvl, double bytes_per_unit) {
    if (lvl->n_curve <= 0)
        return lvl->bandwidth_gbps;
    const rt_curve_point *c = lvl->curve;
    int n = lvl->n_curve;
    if (!(bytes_per_unit > (double)c[0].bytes)) // also NaN
        return c[0].gbps;
    if (bytes_per_unit >= (double)c[n - 1].bytes)
        return c[n - 1].gbps;
    int i = 1;
    while (i < n - 1 && (double)c[i].bytes < bytes_per_unit)
        i++;
    double x0 = log((double)c[i - 1].bytes), x1 = log((double)c[i].bytes);
    double t = (log(bytes_per_unit) - x0) / (x1 - x0);
    return c[i - 1].gbps + t * (c[i].gbps - c[i - 1].gbps);
}

double rt_hal_peak_gflops(const rt_device *dev, rt_dtype t, bool use_mma) {
    if ((unsigned)t >= RT_DTYPE_COUNT)
        return 0.0;
    if (use_mma && dev->mma_gflops[t] > 0.0)
        return dev->mma_gflops[t];
    if (dev->peak_gflops[t] > 0.0)
        return dev->peak_gflops[t];
    // No native path for this type: it is computed through the f32 ALUs (converted on load).
    return dev->peak_gflops[RT_DTYPE_F32];
}

// ---------------------------------------------------------------------------------------------
// Printing
// ---------------------------------------------------------------------------------------------

// INI spelling of the peak keys, by data type: "f32" -> f32_gflops, "i8" -> i8_gops.
static const char *rt_hal_dtype_key(rt_dtype t) {
    // ORDER RT_DTYPE
    static const char *const names[] = {"f32", "f16", "bf16", "f64", "i32", "i8"};
    _Static_assert(sizeof names / sizeof names[0] == RT_DTYPE_COUNT, "ORDER RT_DTYPE");
    return names[t];
}

static void rt_hal_print_bytes(rt_buf *out, int64_t bytes) {
    if (bytes >= (1 << 20) && bytes % (1 << 20) == 0)
        rt_buf_printf(out, "%lld MiB", (long long)(bytes >> 20));
    else if (bytes >= 1024 && bytes % 1024 == 0)
        rt_buf_printf(out, "%lld KiB", (long long)(bytes >> 10));
    else
        rt_buf_printf(out, "%lld B", (long long)bytes);
}

// Is s at a "YYYY-MM-DD" date?
static bool rt_hal_at_date(const char *s) {
    static const char pattern[] = "dddd-dd-dd";
    for (size_t i = 0; i < sizeof pattern - 1; i++)
        if (pattern[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != pattern[i])
            return false;
    return true;
}

void rt_hal_figure_label(const char *src, const char *key, char *out, size_t size) {
    snprintf(out, size, "nominal");
    if (!src || strncmp(src, "measured", 8) != 0)
        return;
    // The first date of the measured part, and the "(k1, k2)" right after it.
    const char *end = strstr(src, " -- ");
    size_t len = end ? (size_t)(end - src) : strlen(src);
    const char *date = NULL;
    for (size_t i = 0; i + 10 <= len && !date; i++)
        if (rt_hal_at_date(src + i))
            date = src + i;
    if (date && key && date[10] == ' ' && date[11] == '(') {
        const char *keys = date + 12, *close = strchr(keys, ')');
        size_t n = strlen(key);
        bool listed = false;
        for (const char *k = keys; close && k < close && !listed; k++)
            listed = (k == keys || k[-1] == ' ') && strncmp(k, key, n) == 0 &&
                     (k[n] == ',' || k[n] == ')');
        if (!listed)
            return;
    }
    if (date)
        snprintf(out, size, "measured %.10s", date);
    else
        snprintf(out, size, "measured");
}

// " (measured DATE)" or " (nominal)" after a figure.
static void rt_hal_print_label(rt_buf *out, const char *src, const char *key) {
    char label[32];
    rt_hal_figure_label(src, key, label, sizeof label);
    rt_buf_printf(out, " (%s)", label);
}

void rt_hal_print_device(const rt_device *dev, rt_buf *out) {
    if (dev->devclass == RT_DEVCLASS_CPU)
        rt_buf_linef(out, 0, "device  %s (%s, %s, %s)%s", dev->name,
                     rt_devclass_name(dev->devclass), dev->arch, rt_cpu_isa_name(dev->isa),
                     dev->detected ? " detected" : "");
    else
        rt_buf_linef(out, 0, "device  %s (%s, %s)%s", dev->name, rt_devclass_name(dev->devclass),
                     dev->arch, dev->detected ? " detected" : "");
    rt_buf_printf(out, "units   %d x %d lanes x %d TEUs at %g MHz", (int)dev->units,
                  (int)dev->lanes, (int)dev->teus_per_unit, dev->clock_mhz);
    rt_hal_print_label(out, dev->device_source, "clock_mhz");
    rt_buf_puts(out, "\npeak   ");
    for (int t = 0; t < RT_DTYPE_COUNT; t++) {
        char key[32];
        bool is_int = rt_dtype_is_int((rt_dtype)t);
        snprintf(key, sizeof key, "%s_%s", rt_hal_dtype_key((rt_dtype)t),
                 is_int ? "gops" : "gflops");
        if (dev->peak_gflops[t] > 0.0) {
            rt_buf_printf(out, " %s %g%s", rt_hal_dtype_key((rt_dtype)t), dev->peak_gflops[t],
                          is_int ? " GOP/s" : " GFLOP/s");
            rt_hal_print_label(out, dev->compute_source, key);
        }
    }
    rt_buf_puts(out, "\n");
    if (dev->mma_m > 0) {
        rt_buf_printf(out, "mma     %dx%dx%d:", (int)dev->mma_m, (int)dev->mma_n, (int)dev->mma_k);
        for (int t = 0; t < RT_DTYPE_COUNT; t++) {
            char key[32];
            snprintf(key, sizeof key, "mma_%s_%s", rt_hal_dtype_key((rt_dtype)t),
                     rt_dtype_is_int((rt_dtype)t) ? "gops" : "gflops");
            if (dev->mma_gflops[t] > 0.0) {
                rt_buf_printf(out, " %s %g", rt_hal_dtype_key((rt_dtype)t), dev->mma_gflops[t]);
                rt_hal_print_label(out, dev->compute_source, key);
            }
        }
        rt_buf_puts(out, "\n");
    }
    for (int i = 0; i < dev->n_levels; i++) {
        const rt_mem_level *l = &dev->level[i];
        rt_buf_printf(out, "level %d %-8s %-6s %-8s ", (int)l->level, l->name,
                      rt_mem_scope_name(l->scope),
                      l->managed == RT_MEM_CACHE ? "cache" : "explicit");
        rt_hal_print_bytes(out, l->capacity_bytes);
        if (l->tile_capacity_bytes != l->capacity_bytes) {
            rt_buf_puts(out, " (tile ");
            rt_hal_print_bytes(out, l->tile_capacity_bytes);
            rt_buf_puts(out, ")");
        }
        if (l->bandwidth_gbps > 0.0) {
            rt_buf_printf(out, ", %g GB/s", l->bandwidth_gbps);
            rt_hal_print_label(out, l->source, "bandwidth_gbps");
        }
        if (l->stream_gbps > 0.0) {
            rt_buf_printf(out, ", %g GB/s streaming", l->stream_gbps);
            rt_hal_print_label(out, l->source, "stream_gbps");
        }
        if (l->n_curve > 0) {
            rt_buf_printf(out, " (curve of %d points", (int)l->n_curve);
            char label[32];
            rt_hal_figure_label(l->source, "bandwidth_curve_gbps", label, sizeof label);
            rt_buf_printf(out, ", %s)", label);
        }
        if (l->transaction_bytes > 0)
            rt_buf_printf(out, ", transaction %d B", (int)l->transaction_bytes);
        if (l->banks > 0)
            rt_buf_printf(out, ", %d banks x %d B", (int)l->banks, (int)l->bank_bytes);
        if (l->line_bytes > 0)
            rt_buf_printf(out, ", line %d B", (int)l->line_bytes);
        if (l->ways > 0)
            rt_buf_printf(out, ", %d-way", (int)l->ways);
        rt_buf_puts(out, "\n");
    }
}

// ---------------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------------

// json_object_set_new that tolerates a NULL value (out of memory: the key is left out).
static void rt_json_set(json_t *obj, const char *key, json_t *val) {
    if (obj && val)
        json_object_set_new(obj, key, val);
    else
        json_decref(val);
}

static json_t *rt_json_str(const char *s) {
    return s ? json_string(s) : json_null();
}

// "measured DATE" or "nominal" (rt_hal_figure_label).
static json_t *rt_json_label(const char *src, const char *key) {
    char label[32];
    rt_hal_figure_label(src, key, label, sizeof label);
    return json_string(label);
}

static json_t *rt_hal_level_to_json(const rt_mem_level *l) {
    json_t *o = json_object();
    rt_json_set(o, "name", json_string(l->name));
    rt_json_set(o, "level", json_integer(l->level));
    rt_json_set(o, "scope", json_string(rt_mem_scope_name(l->scope)));
    rt_json_set(o, "managed", json_string(l->managed == RT_MEM_CACHE ? "cache" : "explicit"));
    rt_json_set(o, "capacity_bytes", json_integer(l->capacity_bytes));
    rt_json_set(o, "tile_capacity_bytes", json_integer(l->tile_capacity_bytes));
    rt_json_set(o, "bandwidth_gbps", json_real(l->bandwidth_gbps));
    rt_json_set(o, "stream_gbps", json_real(l->stream_gbps));
    rt_json_set(o, "transaction_bytes", json_integer(l->transaction_bytes));
    rt_json_set(o, "banks", json_integer(l->banks));
    rt_json_set(o, "bank_bytes", json_integer(l->bank_bytes));
    rt_json_set(o, "line_bytes", json_integer(l->line_bytes));
    rt_json_set(o, "ways", json_integer(l->ways));
    rt_json_set(o, "latency_ns", json_real(l->latency_ns));
    json_t *curve = json_array();
    for (int i = 0; curve && i < l->n_curve; i++) {
        json_t *pt = json_object();
        rt_json_set(pt, "bytes", json_integer(l->curve[i].bytes));
        rt_json_set(pt, "gbps", json_real(l->curve[i].gbps));
        if (pt)
            json_array_append_new(curve, pt);
    }
    rt_json_set(o, "bandwidth_curve_gbps", curve);
    rt_json_set(o, "source", rt_json_str(l->source));
    rt_json_set(o, "bandwidth_label", rt_json_label(l->source, "bandwidth_gbps"));
    if (l->stream_gbps > 0.0)
        rt_json_set(o, "stream_label", rt_json_label(l->source, "stream_gbps"));
    return o;
}

void *rt_hal_device_to_json(const rt_device *dev) {
    json_t *o = json_object();
    if (!o)
        return NULL;
    rt_json_set(o, "name", json_string(dev->name));
    rt_json_set(o, "class", json_string(rt_devclass_name(dev->devclass)));
    rt_json_set(o, "arch", json_string(dev->arch));
    if (dev->devclass == RT_DEVCLASS_CPU)
        rt_json_set(o, "isa", json_string(rt_cpu_isa_name(dev->isa)));
    rt_json_set(o, "path", json_string(dev->path));
    rt_json_set(o, "detected", json_boolean(dev->detected));
    rt_json_set(o, "units", json_integer(dev->units));
    rt_json_set(o, "lanes", json_integer(dev->lanes));
    rt_json_set(o, "teus_per_unit", json_integer(dev->teus_per_unit));
    rt_json_set(o, "clock_mhz", json_real(dev->clock_mhz));
    rt_json_set(o, "clock_mhz_label", rt_json_label(dev->device_source, "clock_mhz"));
    rt_json_set(o, "max_threads_per_block", json_integer(dev->max_threads_per_block));
    rt_json_set(o, "max_threads_per_unit", json_integer(dev->max_threads_per_unit));
    rt_json_set(o, "max_blocks_per_unit", json_integer(dev->max_blocks_per_unit));
    rt_json_set(o, "regs_per_unit", json_integer(dev->regs_per_unit));
    rt_json_set(o, "launch_overhead_us", json_real(dev->launch_overhead_us));
    rt_json_set(o, "sync_overhead_us", json_real(dev->sync_overhead_us));
    rt_json_set(o, "features", json_string(dev->features));
    rt_json_set(o, "source", rt_json_str(dev->device_source));

    json_t *compute = json_object(), *labels = json_object();
    for (int t = 0; compute && t < RT_DTYPE_COUNT; t++) {
        char key[32];
        const char *unit = rt_dtype_is_int((rt_dtype)t) ? "gops" : "gflops";
        if (dev->peak_gflops[t] > 0.0) {
            snprintf(key, sizeof key, "%s_%s", rt_hal_dtype_key((rt_dtype)t), unit);
            rt_json_set(compute, key, json_real(dev->peak_gflops[t]));
            rt_json_set(labels, key, rt_json_label(dev->compute_source, key));
        }
        if (dev->mma_gflops[t] > 0.0) {
            snprintf(key, sizeof key, "mma_%s_%s", rt_hal_dtype_key((rt_dtype)t), unit);
            rt_json_set(compute, key, json_real(dev->mma_gflops[t]));
            rt_json_set(labels, key, rt_json_label(dev->compute_source, key));
        }
    }
    rt_json_set(compute, "labels", labels);
    if (dev->mma_m > 0) {
        json_t *shape = json_pack("[iii]", (int)dev->mma_m, (int)dev->mma_n, (int)dev->mma_k);
        rt_json_set(compute, "mma_shape", shape);
    }
    rt_json_set(compute, "fma_latency_cycles", json_integer(dev->fma_latency_cycles));
    json_t *insn = json_object();
    for (int i = 0; insn && i < dev->n_insn; i++)
        rt_json_set(insn, dev->insn[i].name, json_real(dev->insn[i].gflops_per_teu));
    rt_json_set(compute, "gflops_per_teu", insn);
    rt_json_set(compute, "source", rt_json_str(dev->compute_source));
    rt_json_set(o, "compute", compute);

    json_t *levels = json_array();
    for (int i = 0; levels && i < dev->n_levels; i++) {
        json_t *l = rt_hal_level_to_json(&dev->level[i]);
        if (l)
            json_array_append_new(levels, l);
    }
    rt_json_set(o, "levels", levels);
    return o;
}
