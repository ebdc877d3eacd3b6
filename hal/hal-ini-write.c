// hal-ini-write.c: the inverse of hal-ini.c. Serializes an rt_device as a device file in the
// schema of device-ini.md ([device], [compute], one [mem.NAME] per level with its `source`
// line), with numbers in their shortest form that reads back exactly, so that
// rt_hal_load_device(write(dev)) equals dev. rtcalib writes its measured device through here,
// and atomically: a temporary file next to the output, fsync, rename; signal handlers can
// remove the temporary of a write in progress.
#include "calib.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RT_INI_WRITE_MAX_LINE 1000 // hal-ini.c rejects longer lines

// ---------------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------------

// x in a form strtod reads back exactly: fixed notation with at most 6 decimals when that is
// exact and short (2600, 0.25, 499.2), else the shortest %g (at most 17 significant digits).
static void rt_ini_fmt_num(double x, char *buf, size_t size) {
    for (int decimals = 0; decimals <= 6; decimals++) {
        snprintf(buf, size, "%.*f", decimals, x);
        if (strtod(buf, NULL) == x && strlen(buf) <= 20)
            return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            return;
    }
}

// Text values are written bare when hal-ini.c would read them back unchanged, else quoted.
static rt_status rt_ini_put_text(rt_buf *out, const char *section, const char *key, const char *v,
                                 rt_err *err) {
    size_t n = strlen(v);
    bool bare = n > 0 && v[0] != ' ' && v[0] != '\t' && v[n - 1] != ' ' && v[n - 1] != '\t' &&
                v[0] != '"' && v[0] != '\'' && !strpbrk(v, ";#");
    if (n == 0)
        return rt_fail(err, RT_ERR_DEVICE, RT_NOLOC, "cannot write an empty '%s' in [%s]", key,
                       section);
    for (const char *p = v; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return rt_fail(err, RT_ERR_DEVICE, RT_NOLOC,
                           "cannot write '%s' in [%s] (expected printable text, got character "
                           "0x%02x)",
                           key, section, c);
    }
    char q = 0;
    if (!bare)
        q = !strchr(v, '"') ? '"' : !strchr(v, '\'') ? '\'' : 0;
    if (!bare && !q)
        return rt_fail(err, RT_ERR_DEVICE, RT_NOLOC,
                       "cannot write '%s' in [%s] (expected a value without both quote "
                       "characters, got %s)",
                       key, section, v);
    if (strlen(key) + 3 + n + 2 > RT_INI_WRITE_MAX_LINE)
        return rt_fail(err, RT_ERR_DEVICE, RT_NOLOC,
                       "cannot write '%s' in [%s] (expected at most %d characters on a line, got "
                       "%zu)",
                       key, section, RT_INI_WRITE_MAX_LINE, strlen(key) + 3 + n + 2);
    if (q)
        rt_buf_printf(out, "%s = %c%s%c\n", key, q, v, q);
    else
        rt_buf_printf(out, "%s = %s\n", key, v);
    return RT_OK;
}

static void rt_ini_put_num(rt_buf *out, const char *key, double x) {
    char num[40];
    rt_ini_fmt_num(x, num, sizeof num);
    rt_buf_printf(out, "%s = %s\n", key, num);
}

static void rt_ini_put_int(rt_buf *out, const char *key, int64_t x) {
    rt_buf_printf(out, "%s = %lld\n", key, (long long)x);
}

// ---------------------------------------------------------------------------------------------
// Sections
// ---------------------------------------------------------------------------------------------

// INI spelling of the data types in peak keys. ORDER RT_DTYPE
static const char *const rt_ini_dtype_names[] = {"f32", "f16", "bf16", "f64", "i32", "i8"};
_Static_assert(sizeof rt_ini_dtype_names / sizeof rt_ini_dtype_names[0] == RT_DTYPE_COUNT,
               "ORDER RT_DTYPE");

static rt_status rt_ini_write_device(const rt_device *dev, rt_buf *out, rt_err *err) {
    rt_buf_puts(out, "[device]\n");
    RT_TRY(rt_ini_put_text(out, "device", "name", dev->name, err));
    rt_buf_printf(out, "class = %s\n", rt_devclass_name(dev->devclass));
    RT_TRY(rt_ini_put_text(out, "device", "arch", dev->arch, err));
    rt_ini_put_int(out, "units", dev->units);
    rt_ini_put_int(out, "lanes", dev->lanes);
    rt_ini_put_int(out, "teus_per_unit", dev->teus_per_unit);
    rt_ini_put_num(out, "clock_mhz", dev->clock_mhz);
    if (dev->max_threads_per_block > 0)
        rt_ini_put_int(out, "max_threads_per_block", dev->max_threads_per_block);
    if (dev->max_threads_per_unit > 0)
        rt_ini_put_int(out, "max_threads_per_unit", dev->max_threads_per_unit);
    if (dev->max_blocks_per_unit > 0)
        rt_ini_put_int(out, "max_blocks_per_unit", dev->max_blocks_per_unit);
    if (dev->regs_per_unit > 0)
        rt_ini_put_int(out, "regs_per_unit", dev->regs_per_unit);
    if (dev->reg_granule_warp > 0)
        rt_ini_put_int(out, "reg_granule_warp", dev->reg_granule_warp);
    if (dev->reg_granule_lane > 0)
        rt_ini_put_int(out, "reg_granule_lane", dev->reg_granule_lane);
    if (dev->raster_group_blocks > 0)
        rt_ini_put_int(out, "raster_group_blocks", dev->raster_group_blocks);
    if (dev->launch_overhead_us > 0.0)
        rt_ini_put_num(out, "launch_overhead_us", dev->launch_overhead_us);
    if (dev->sync_overhead_us > 0.0)
        rt_ini_put_num(out, "sync_overhead_us", dev->sync_overhead_us);
    if (dev->features[0]) {
        // Stored as "a,b,c"; written as "a, b, c" as in the shipped files.
        char feat[2 * sizeof dev->features];
        size_t o = 0;
        for (const char *p = dev->features; *p && o + 3 < sizeof feat; p++) {
            feat[o++] = *p;
            if (*p == ',')
                feat[o++] = ' ';
        }
        feat[o] = '\0';
        RT_TRY(rt_ini_put_text(out, "device", "features", feat, err));
    }
    if (dev->devclass == RT_DEVCLASS_CPU && dev->isa != RT_CPU_ISA_NONE)
        rt_buf_printf(out, "isa = %s\n", rt_cpu_isa_name(dev->isa));
    if (dev->device_source)
        RT_TRY(rt_ini_put_text(out, "device", "source", dev->device_source, err));
    return RT_OK;
}

static rt_status rt_ini_write_compute(const rt_device *dev, rt_buf *out, rt_err *err) {
    rt_buf_puts(out, "\n[compute]\n");
    char key[64];
    for (int t = 0; t < RT_DTYPE_COUNT; t++) {
        const char *unit = rt_dtype_is_int((rt_dtype)t) ? "gops" : "gflops";
        if (t == RT_DTYPE_F32 || dev->peak_gflops[t] > 0.0) {
            snprintf(key, sizeof key, "%s_%s", rt_ini_dtype_names[t], unit);
            rt_ini_put_num(out, key, dev->peak_gflops[t]);
        }
    }
    for (int t = 0; t < RT_DTYPE_COUNT; t++) {
        if (!(dev->mma_gflops[t] > 0.0))
            continue;
        if (t == RT_DTYPE_I32) // the schema has no mma_i32_gops
            return rt_fail(err, RT_ERR_DEVICE, RT_NOLOC,
                           "cannot write an i32 matrix peak (the schema has no mma_i32_gops)");
        const char *unit = rt_dtype_is_int((rt_dtype)t) ? "gops" : "gflops";
        snprintf(key, sizeof key, "mma_%s_%s", rt_ini_dtype_names[t], unit);
        rt_ini_put_num(out, key, dev->mma_gflops[t]);
    }
    if (dev->mma_m > 0)
        rt_buf_printf(out, "mma_shape = %dx%dx%d\n", (int)dev->mma_m, (int)dev->mma_n,
                      (int)dev->mma_k);
    if (dev->fma_latency_cycles > 0)
        rt_ini_put_int(out, "fma_latency_cycles", dev->fma_latency_cycles);
    const rt_cpu_costs *cc = &dev->cpu_costs;
    const double costs[] = {cc->store_ports, cc->gather_cycles, cc->vloop_entry_cycles,
                            cc->libm_cycles, cc->sqrt_cycles};
    static const char *const cost_keys[] = {"store_ports", "gather_cycles", "vloop_entry_cycles",
                                            "libm_cycles", "sqrt_cycles"};
    for (size_t i = 0; i < sizeof costs / sizeof costs[0]; i++)
        if (costs[i] > 0)
            rt_ini_put_num(out, cost_keys[i], costs[i]);
    for (int32_t i = 0; i < dev->n_insn; i++) {
        snprintf(key, sizeof key, "%s_gflops_per_teu", dev->insn[i].name);
        rt_ini_put_num(out, key, dev->insn[i].gflops_per_teu);
    }
    if (dev->compute_source)
        RT_TRY(rt_ini_put_text(out, "compute", "source", dev->compute_source, err));
    return RT_OK;
}

static rt_status rt_ini_write_level(const rt_mem_level *l, rt_buf *out, rt_err *err) {
    for (const char *p = l->name; *p; p++) {
        char c = *p;
        bool ok =
            (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
        if (!ok || !l->name[0])
            return rt_fail(err, RT_ERR_DEVICE, l->loc,
                           "cannot write level name \"%s\" (expected lower-case letters, digits, "
                           "'_', '.' or '-')",
                           l->name);
    }
    char sec[48];
    snprintf(sec, sizeof sec, "mem.%s", l->name);
    rt_buf_printf(out, "\n[%s]\n", sec);
    rt_ini_put_int(out, "level", l->level);
    rt_buf_printf(out, "scope = %s\n", rt_mem_scope_name(l->scope));
    rt_buf_printf(out, "managed = %s\n", l->managed == RT_MEM_CACHE ? "cache" : "explicit");
    rt_ini_put_int(out, "capacity_bytes", l->capacity_bytes);
    if (l->tile_capacity_bytes != l->capacity_bytes)
        rt_ini_put_int(out, "tile_capacity_bytes", l->tile_capacity_bytes);
    if (l->bandwidth_gbps > 0.0)
        rt_ini_put_num(out, "bandwidth_gbps", l->bandwidth_gbps);
    if (l->stream_gbps > 0.0)
        rt_ini_put_num(out, "stream_gbps", l->stream_gbps);
    if (l->n_curve > 0) {
        rt_buf_puts(out, "bandwidth_curve_gbps = ");
        for (int32_t i = 0; i < l->n_curve; i++) {
            char num[40];
            rt_ini_fmt_num(l->curve[i].gbps, num, sizeof num);
            rt_buf_printf(out, "%s%lld:%s", i ? ", " : "", (long long)l->curve[i].bytes, num);
        }
        rt_buf_puts(out, "\n");
    }
    if (l->transaction_bytes > 0)
        rt_ini_put_int(out, "transaction_bytes", l->transaction_bytes);
    if (l->banks > 0)
        rt_ini_put_int(out, "banks", l->banks);
    if (l->bank_bytes > 0)
        rt_ini_put_int(out, "bank_bytes", l->bank_bytes);
    if (l->line_bytes > 0)
        rt_ini_put_int(out, "line_bytes", l->line_bytes);
    if (l->ways > 0)
        rt_ini_put_int(out, "ways", l->ways);
    if (l->latency_ns > 0.0)
        rt_ini_put_num(out, "latency_ns", l->latency_ns);
    if (l->source)
        RT_TRY(rt_ini_put_text(out, sec, "source", l->source, err));
    return RT_OK;
}

rt_status rt_hal_write_ini(const rt_device *dev, const char *header, rt_buf *out, rt_err *err) {
    RT_TRY(rt_hal_check_device(dev, err));
    for (const char *p = header; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n + 2 > RT_INI_WRITE_MAX_LINE)
            n = RT_INI_WRITE_MAX_LINE - 2;
        rt_buf_puts(out, n ? "; " : ";");
        rt_buf_putn(out, p, n);
        rt_buf_puts(out, "\n");
        p = nl ? nl + 1 : p + strlen(p);
    }
    RT_TRY(rt_ini_write_device(dev, out, err));
    RT_TRY(rt_ini_write_compute(dev, out, err));
    // In level order: level 0 (DRAM / global) first, as in the shipped files.
    for (int32_t i = 0; i < dev->n_levels; i++)
        RT_TRY(rt_ini_write_level(&dev->level[i], out, err));
    if (out->oom)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory writing device %s", dev->name);
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Atomic files
// ---------------------------------------------------------------------------------------------

// The temporary file of the write in progress, for rt_hal_file_abort_signal.
static char rt_pending_tmp[1100];
static volatile sig_atomic_t rt_pending;

rt_status rt_hal_file_begin(rt_atomic_file *f, const char *path, rt_err *err) {
    f->fd = -1;
    f->tmp[0] = '\0';
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof f->path)
        return rt_fail(err, RT_ERR_IO, RT_NOLOC,
                       "cannot write \"%s\" (expected a path of 1 to %zu characters)", path,
                       sizeof f->path - 1);
    memcpy(f->path, path, n + 1);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return rt_fail(err, RT_ERR_IO, rt_loc_make(f->path, 0, 0), "cannot write: %s",
                       strerror(EISDIR));
    const char *slash = strrchr(path, '/');
    int dir_len = slash ? (int)(slash - path + 1) : 0;
    const char *base = slash ? slash + 1 : path;
    if (!*base)
        return rt_fail(err, RT_ERR_IO, rt_loc_make(f->path, 0, 0), "cannot write: %s",
                       strerror(EISDIR));
    snprintf(f->tmp, sizeof f->tmp, "%.*s.%s.tmp-%ld", dir_len, path, base, (long)getpid());
    if (rt_pending)
        return rt_fail(err, RT_ERR_IO, rt_loc_make(f->path, 0, 0),
                       "cannot write: another atomic write is in progress");
    memcpy(rt_pending_tmp, f->tmp, sizeof rt_pending_tmp);
    rt_pending = 1; // before the file exists: a signal from here on removes it
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (f->fd < 0) {
        int e = errno;
        rt_pending = 0;
        return rt_fail(err, RT_ERR_IO, rt_loc_make(f->path, 0, 0), "cannot write: %s", strerror(e));
    }
    return RT_OK;
}

void rt_hal_file_abort(rt_atomic_file *f) {
    if (f->fd >= 0) {
        close(f->fd);
        f->fd = -1;
        unlink(f->tmp);
        rt_pending = 0;
    }
}

void rt_hal_file_abort_signal(void) {
    if (rt_pending)
        unlink(rt_pending_tmp); // async-signal-safe
}

// Makes the rename durable: fsync of the directory holding path.
static void rt_hal_sync_dir(const char *path) {
    char dir[1024];
    const char *slash = strrchr(path, '/');
    if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else if (slash)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    else
        snprintf(dir, sizeof dir, ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd); // best effort: some file systems refuse fsync on directories
        close(fd);
    }
}

rt_status rt_hal_file_commit(rt_atomic_file *f, const char *data, size_t len, rt_err *err) {
    if (f->fd < 0)
        return rt_fail(err, RT_ERR_IO, rt_loc_make(f->path, 0, 0),
                       "cannot write: no temporary file open");
    const char *what = "write";
    int e = 0;
    for (size_t done = 0; done < len && !e;) {
        ssize_t w = write(f->fd, data + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            e = w < 0 ? errno : EIO;
        else
            done += (size_t)w;
    }
    if (!e && fsync(f->fd) != 0)
        e = errno, what = "fsync";
    if (close(f->fd) != 0 && !e)
        e = errno, what = "close";
    f->fd = -1;
    if (!e && rename(f->tmp, f->path) != 0)
        e = errno, what = "rename";
    if (e) {
        unlink(f->tmp);
        rt_pending = 0;
        return rt_fail(err, RT_ERR_IO, rt_loc_make(f->path, 0, 0), "cannot write (%s): %s", what,
                       strerror(e));
    }
    rt_pending = 0;
    rt_hal_sync_dir(f->path);
    return RT_OK;
}
