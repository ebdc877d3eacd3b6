// calib-cpu-apply.c: merges rtcalib's CPU measurements into a device (rt_calib_apply): each
// value whose spread is small enough replaces the base device's, with its source recorded.
#include "calib.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// ORDER RT_DTYPE
static const char *const rt_calib_dtype_names[] = {"f32", "f16", "bf16", "f64", "i32", "i8"};
_Static_assert(sizeof rt_calib_dtype_names / sizeof rt_calib_dtype_names[0] == RT_DTYPE_COUNT,
               "ORDER RT_DTYPE");

// x rounded to `digits` significant decimal digits (measurements carry no more).
static double rt_round_sig(double x, int digits) {
    if (!(x > 0.0) || !isfinite(x))
        return x;
    double p = pow(10.0, digits - 1 - (int)floor(log10(x)));
    double r = round(x * p) / p;
    return r > 0.0 ? r : x;
}

// Appends key to the comma-separated list keys unless it is there (as a whole entry).
static void rt_add_key(char *keys, size_t size, const char *key) {
    size_t n = strlen(keys), k = strlen(key);
    for (const char *at = keys; (at = strstr(at, key)) != NULL; at += k)
        if ((at == keys || at[-1] == ' ') && (at[k] == ',' || at[k] == 0))
            return;
    snprintf(keys + n, size - n, "%s%s", n ? ", " : "", key);
}

#define RT_CALIB_OTHER " -- other values: "

// "measured: rtcalib DATE (keys) -- other values: OLD", where OLD drops an earlier rtcalib part.
static rt_status rt_calib_source(rt_device *dev, const char *date, const char *keys,
                                 const char **src, rt_err *err) {
    const char *old = *src ? *src : "";
    const char *other = strstr(old, RT_CALIB_OTHER);
    if (other)
        old = other + strlen(RT_CALIB_OTHER);
    else if (strncmp(old, "measured: rtcalib", 17) == 0)
        old = "";
    char text[1024];
    int n = snprintf(text, sizeof text, "measured: rtcalib %s (%s)%s%s", date, keys,
                     old[0] ? RT_CALIB_OTHER : "", old);
    if (n < 0 || (size_t)n >= 900) // the INI line limit, with room for the key
        snprintf(text, sizeof text, "measured: rtcalib %s (%s)", date, keys);
    const char *s = rt_hal_device_text(dev, text);
    if (!s)
        return rt_fail(err, RT_ERR_DEVICE, dev->origin,
                       "device texts are too long (expected at most %d bytes in all)",
                       RT_DEVICE_TEXT_BYTES);
    *src = s;
    return RT_OK;
}

// A shared cache whose bandwidth at half its reported capacity is within RT_CALIB_CACHE_GAIN
// of DRAM's is not that large: a VM may report the host's whole last-level cache (480 MiB on
// the 2-core development VM, where the triad at 240 MiB runs at DRAM speed). The largest
// working set of its sweep still RT_CALIB_CACHE_GAIN x faster than DRAM is taken as half of
// its capacity, and the bandwidth there as its bandwidth. Levels whose sweep never beats DRAM
// by that much, or that have no DRAM bandwidth to compare with, keep what they had.
#define RT_CALIB_CACHE_GAIN 1.25

static void rt_calib_effective_capacity(rt_device *out, rt_calib_result *res,
                                        char (*keys_lvl)[256]) {
    double dram = out->level[0].bandwidth_gbps;
    for (int32_t i = 1; i < out->n_levels && dram > 0; i++) {
        rt_mem_level *l = &out->level[i];
        if (l->bandwidth_gbps >= RT_CALIB_CACHE_GAIN * dram)
            continue;
        rt_calib_value *best = NULL;
        for (int32_t j = 0; j < res->n_values; j++) {
            rt_calib_value *v = &res->values[j];
            if (v->target == RT_CALIB_SWEEP && !v->skipped && !v->refused && v->level == i &&
                v->value >= RT_CALIB_CACHE_GAIN * dram && 2 * v->curve_bytes < l->capacity_bytes &&
                (!best || v->curve_bytes > best->curve_bytes))
                best = v;
        }
        if (!best)
            continue;
        int64_t old_bytes = l->capacity_bytes;
        l->capacity_bytes = 2 * best->curve_bytes;
        l->bandwidth_gbps = rt_round_sig(best->value, 4);
        rt_add_key(keys_lvl[i], sizeof *keys_lvl, "bandwidth_gbps");
        rt_add_key(keys_lvl[i], sizeof *keys_lvl, "capacity_bytes");
        if (l->tile_capacity_bytes > 0) { // the same share of the smaller capacity
            l->tile_capacity_bytes = (int64_t)((double)l->tile_capacity_bytes *
                                               (double)l->capacity_bytes / (double)old_bytes) /
                                     64 * 64;
            if (l->tile_capacity_bytes < 64)
                l->tile_capacity_bytes = 64;
            rt_add_key(keys_lvl[i], sizeof *keys_lvl, "tile_capacity_bytes");
        }
        snprintf(best->note, sizeof best->note,
                 "[mem.%s] is %.4g GB/s up to here and DRAM's %.4g beyond: capacity_bytes = %lld "
                 "(twice this working set), bandwidth_gbps from this point",
                 l->name, best->value, dram, (long long)l->capacity_bytes);
    }
}

// The measured clock ([device] clock_mhz) and, with the 1-thread f32 FMA rate, the FMA pipes
// per core at the device's vector width ([device] teus_per_unit): the rate over clock x lanes x 2,
// rounded. The detected values are a policy (two pipes per core, the clock /proc/cpuinfo
// reports), wrong both ways on a Zen 4 VM: 2.6 GHz reported against 3.66 measured, and one
// 512-bit FMA per cycle, not two. The per-TEU entries that rt_calib_apply writes next divide by
// the pipes found here. Values too noisy to write are left to the main pass to refuse. A clock
// whose issue rate (units x pipes x lanes x 2 x clock) falls short of the measured f32 peak by
// more than a third was taken on a loaded core (38 MHz was seen beside a parallel test run): it
// is refused, with the FMA latency counted in its cycles, and the device keeps its own.
static void rt_calib_pipes(rt_calib_result *res, double max_spread, rt_device *out, char *keys_dev,
                           size_t keys_size) {
    rt_calib_value *clock = NULL, *f32 = NULL;
    double peak = 0;
    for (int32_t i = 0; i < res->n_values; i++) {
        rt_calib_value *v = &res->values[i];
        rt_err e;
        rt_err_clear(&e);
        if (v->skipped || !(v->value > 0) ||
            rt_calib_check_spread(v->name, &v->stats, max_spread, &e) != RT_OK)
            continue;
        if (v->target == RT_CALIB_CLOCK)
            clock = v;
        else if (v->target == RT_CALIB_INSN && strcmp(v->insn, "f32_fma") == 0)
            f32 = v;
        else if (v->target == RT_CALIB_PEAK && v->dtype == RT_DTYPE_F32 && v->value > peak)
            peak = v->value;
    }
    if (!clock)
        return;
    // Without a measured f32 peak (every repeat too spread on a loaded machine), the clock is
    // checked against the base device's: the INI must pass its own issue-rate check.
    if (peak <= 0.0)
        peak = out->peak_gflops[RT_DTYPE_F32];
    double ghz = rt_round_sig(clock->value, 4) / 1000.0;
    int32_t pipes = out->teus_per_unit;
    if (f32 && out->lanes >= 1) {
        double p = f32->value / (ghz * out->lanes * 2.0);
        pipes = p < 1.5 ? 1 : (int32_t)lround(p);
        if (f32->value * out->units > peak)
            peak = f32->value * out->units;
    }
    double issue = out->units * pipes * out->lanes * 2.0 * ghz;
    if (peak > 1.5 * issue) {
        for (int32_t i = 0; i < res->n_values; i++) {
            rt_calib_value *v = &res->values[i];
            if (v->target != RT_CALIB_CLOCK && v->target != RT_CALIB_FMA_LATENCY)
                continue;
            char note[sizeof v->note];
            snprintf(note, sizeof note,
                     "%s not written: %d cores x %d FMA pipes x %d lanes x 2 at %.4g MHz issue "
                     "%.4g GFLOP/s, below the f32 peak %.4g (a loaded core?)",
                     v->name, (int)out->units, (int)pipes, (int)out->lanes, ghz * 1000.0, issue,
                     peak);
            memcpy(v->note, note, sizeof note);
            v->refused = true;
        }
        return;
    }
    out->clock_mhz = ghz * 1000.0;
    rt_add_key(keys_dev, keys_size, "clock_mhz");
    if (!f32 || out->lanes < 1)
        return;
    out->teus_per_unit = pipes;
    rt_add_key(keys_dev, keys_size, "teus_per_unit");
}

rt_status rt_calib_apply(const rt_device *base, rt_calib_result *res, double max_spread,
                         const char *date, rt_device *out, rt_err *err) {
    rt_hal_device_copy(out, base);
    char keys_dev[256] = "", keys_comp[512] = "", keys_lvl[RT_MAX_MEM_LEVELS][256];
    int32_t n_curve[RT_MAX_MEM_LEVELS] = {0}, n_curve_refused[RT_MAX_MEM_LEVELS] = {0};
    rt_curve_point curve[RT_MAX_MEM_LEVELS][RT_MAX_CURVE_POINTS];
    memset(keys_lvl, 0, sizeof keys_lvl);
    rt_calib_pipes(res, max_spread, out, keys_dev, sizeof keys_dev);
    for (int32_t i = 0; i < res->n_values; i++) {
        rt_calib_value *v = &res->values[i];
        if (v->skipped || v->target == RT_CALIB_REPORT || v->refused)
            continue;
        rt_err e;
        rt_err_clear(&e);
        if (rt_calib_check_spread(v->name, &v->stats, max_spread, &e) != RT_OK) {
            v->refused = true;
            snprintf(v->note, sizeof v->note, "%s", e.msg);
            if (v->target == RT_CALIB_CURVE && v->level >= 0 && v->level < RT_MAX_MEM_LEVELS)
                n_curve_refused[v->level]++;
            continue;
        }
        bool level_ok = v->level >= 0 && v->level < out->n_levels;
        double x = rt_round_sig(v->value, 4);
        char key[80];
        switch (v->target) {
        case RT_CALIB_REPORT:
            break;
        case RT_CALIB_PEAK:
            out->peak_gflops[v->dtype] = x;
            snprintf(key, sizeof key, "%s_gflops", rt_calib_dtype_names[v->dtype]);
            rt_add_key(keys_comp, sizeof keys_comp, key);
            break;
        case RT_CALIB_MMA:
            out->mma_gflops[v->dtype] = x;
            if (out->mma_m == 0) { // AMX: 16x16 fp32 += 16x32 bf16 x 32x16 bf16
                out->mma_m = 16;
                out->mma_n = 16;
                out->mma_k = 32;
            }
            snprintf(key, sizeof key, "mma_%s_gflops", rt_calib_dtype_names[v->dtype]);
            rt_add_key(keys_comp, sizeof keys_comp, key);
            break;
        case RT_CALIB_INSN: {
            double per_teu = rt_round_sig(v->value / out->teus_per_unit, 4);
            int32_t j = 0;
            while (j < out->n_insn && strcmp(out->insn[j].name, v->insn) != 0)
                j++;
            if (j == out->n_insn && j >= RT_MAX_INSN_PEAKS) {
                v->refused = true;
                snprintf(v->note, sizeof v->note,
                         "not written: the device has %d instruction-class entries already",
                         RT_MAX_INSN_PEAKS);
                break;
            }
            if (j == out->n_insn) {
                snprintf(out->insn[j].name, sizeof out->insn[j].name, "%s", v->insn);
                out->n_insn++;
            }
            out->insn[j].gflops_per_teu = per_teu;
            snprintf(key, sizeof key, "%s_gflops_per_teu", v->insn);
            rt_add_key(keys_comp, sizeof keys_comp, key);
            break;
        }
        case RT_CALIB_LEVEL_BW:
            if (!level_ok)
                break;
            out->level[v->level].bandwidth_gbps = x;
            rt_add_key(keys_lvl[v->level], sizeof keys_lvl[0], "bandwidth_gbps");
            break;
        case RT_CALIB_LEVEL_STREAM:
            if (!level_ok)
                break;
            out->level[v->level].stream_gbps = x;
            rt_add_key(keys_lvl[v->level], sizeof keys_lvl[0], "stream_gbps");
            break;
        case RT_CALIB_CURVE: {
            if (!level_ok || n_curve[v->level] >= RT_MAX_CURVE_POINTS)
                break;
            // Keep the points in ascending bytes whatever the order they were measured in.
            rt_curve_point *c = curve[v->level];
            int32_t n = n_curve[v->level]++, at = n;
            while (at > 0 && c[at - 1].bytes > v->curve_bytes) {
                c[at] = c[at - 1];
                at--;
            }
            c[at].bytes = v->curve_bytes;
            c[at].gbps = x;
            break;
        }
        case RT_CALIB_SWEEP: // rt_calib_effective_capacity, once the levels are in
            break;
        case RT_CALIB_LAUNCH:
            out->launch_overhead_us = rt_round_sig(v->value, 3);
            rt_add_key(keys_dev, sizeof keys_dev, "launch_overhead_us");
            break;
        case RT_CALIB_SYNC:
            out->sync_overhead_us = rt_round_sig(v->value, 3);
            rt_add_key(keys_dev, sizeof keys_dev, "sync_overhead_us");
            break;
        case RT_CALIB_CLOCK: // rt_calib_pipes, before the per-TEU entries
            break;
        case RT_CALIB_FMA_LATENCY:
            out->fma_latency_cycles = v->value < 1.5 ? 1 : (int32_t)lround(v->value);
            rt_add_key(keys_comp, sizeof keys_comp, "fma_latency_cycles");
            break;
        }
    }
    // A curve replaces bandwidth_gbps at every size (rt_hal_level_gbps), so it is written whole
    // or not at all: at least 2 points, none of them refused.
    for (int32_t i = 0; i < out->n_levels; i++) {
        if (n_curve[i] == 0 || (n_curve_refused[i] == 0 && n_curve[i] >= 2))
            continue;
        for (int32_t j = 0; j < res->n_values; j++) {
            rt_calib_value *v = &res->values[j];
            if (v->target != RT_CALIB_CURVE || v->level != i || v->skipped || v->refused)
                continue;
            v->refused = true;
            char note[sizeof v->note];
            snprintf(note, sizeof note,
                     "%s not written: the curve of [mem.%s] needs all its points (%d of %d too "
                     "noisy)",
                     v->name, out->level[i].name, (int)n_curve_refused[i],
                     (int)(n_curve[i] + n_curve_refused[i]));
            memcpy(v->note, note, sizeof note);
        }
        n_curve[i] = 0;
    }
    for (int32_t i = 0; i < out->n_levels; i++) {
        int32_t n = 0;
        for (int32_t j = 0; j < n_curve[i]; j++) { // drop equal sizes: bytes must ascend
            if (n > 0 && curve[i][j].bytes == out->level[i].curve[n - 1].bytes)
                continue;
            out->level[i].curve[n++] = curve[i][j];
        }
        if (n > 0) {
            out->level[i].n_curve = n;
            rt_add_key(keys_lvl[i], sizeof keys_lvl[0], "bandwidth_curve_gbps");
        }
    }
    rt_calib_effective_capacity(out, res, keys_lvl);
    if (keys_dev[0])
        RT_TRY(rt_calib_source(out, date, keys_dev, &out->device_source, err));
    if (keys_comp[0])
        RT_TRY(rt_calib_source(out, date, keys_comp, &out->compute_source, err));
    for (int32_t i = 0; i < out->n_levels; i++) {
        if (keys_lvl[i][0])
            RT_TRY(rt_calib_source(out, date, keys_lvl[i], &out->level[i].source, err));
    }
    return rt_hal_check_device(out, err);
}
