// hal-gpu.c: the class-independent part of the GPU backends declared in hal-gpu.h — the checks
// around the calls of a class's ops (hal-ops.h: compile, load, run, time; found in the registry,
// never by naming a backend), the occupancy calculator fed by the
// INI numbers, parallel compilation with a timeout per source (pthreads; each worker compiles
// into its own arena, the result is copied into the caller's), the conversion of host doubles
// to and from the device data types around a launch, and the whole launch of the launch-style
// drivers (cuda, hip) over their rt_gpu_driver_ops: module cache, buffers, scalar parameters,
// warm-up, event-timed repetitions, copy-out and cleanup.
#include "hal-gpu-impl.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// ---------------------------------------------------------------------------------------------
// Occupancy
// ---------------------------------------------------------------------------------------------

// The level the blocks of a unit share (shared memory / LDS): the lowest explicit level with
// scope unit or block above global. NULL when the device has none.
static const rt_mem_level *rt_gpu_shared_level(const rt_device *dev) {
    for (int32_t i = 1; i < dev->n_levels - 1; i++) {
        const rt_mem_level *l = &dev->level[i];
        if (l->managed == RT_MEM_EXPLICIT &&
            (l->scope == RT_MEM_SCOPE_UNIT || l->scope == RT_MEM_SCOPE_BLOCK))
            return l;
    }
    return NULL;
}

rt_status rt_gpu_occupancy_of(const rt_device *dev, const rt_gpu_resources *res,
                              int32_t threads_per_block, rt_gpu_occupancy *out, rt_err *err) {
    memset(out, 0, sizeof *out);
    out->threads_per_block = threads_per_block;
    out->limiter = "threads";
    if (dev->lanes <= 0 || dev->max_threads_per_unit <= 0 || dev->max_threads_per_block <= 0)
        return rt_fail(err, RT_ERR_DEVICE, dev->origin,
                       "device %s lacks the GPU keys lanes, max_threads_per_block and "
                       "max_threads_per_unit (needed for occupancy)",
                       dev->name);
    if (threads_per_block <= 0 || threads_per_block > dev->max_threads_per_block)
        return rt_fail(err, RT_ERR_DEVICE, dev->origin,
                       "threads per block out of range (expected 1..%d, got %d)",
                       (int)dev->max_threads_per_block, (int)threads_per_block);
    int64_t warps = rt_ceil_div(threads_per_block, dev->lanes);
    int64_t threads_alloc = warps * dev->lanes;
    int64_t blocks = dev->max_threads_per_unit / threads_alloc;
    if (dev->max_blocks_per_unit > 0 && dev->max_blocks_per_unit < blocks) {
        blocks = dev->max_blocks_per_unit;
        out->limiter = "blocks";
    }
    if (res->regs > 0 && dev->regs_per_unit > 0) {
        // Registers are allocated per warp or per lane in the device file's granules.
        int64_t lane = dev->reg_granule_lane > 0 ? dev->reg_granule_lane : 1;
        int64_t warp = dev->reg_granule_warp > 0 ? dev->reg_granule_warp : 1;
        int64_t per_warp = rt_round_up(rt_round_up(res->regs, lane) * dev->lanes, warp);
        int64_t by_regs = dev->regs_per_unit / (per_warp * warps);
        if (by_regs < blocks) {
            blocks = by_regs;
            out->limiter = "registers";
        }
    }
    const rt_mem_level *sh = rt_gpu_shared_level(dev);
    if (res->smem_bytes > 0 && sh && sh->capacity_bytes > 0) {
        int64_t by_smem = sh->capacity_bytes / res->smem_bytes;
        if (by_smem < blocks) {
            blocks = by_smem;
            out->limiter = "shared memory";
        }
    }
    out->blocks_per_unit = (int32_t)blocks;
    out->occupancy = (double)(blocks * threads_alloc) / (double)dev->max_threads_per_unit;
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Compilation
// ---------------------------------------------------------------------------------------------

// The ops of a GPU class: one whose class compiles source and has a runtime (NULL otherwise).
static const struct rt_hal_ops *rt_gpu_ops_of(rt_devclass c) {
    const struct rt_hal_ops *ops = rt_hal_class_ops(c);
    return ops && ops->compile && ops->load && ops->run && ops->time ? ops : NULL;
}

static bool rt_gpu_is_gpu_class(rt_devclass c) {
    return rt_gpu_ops_of(c) != NULL;
}

static double rt_gpu_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

// First line of a compile log that reports an error, at most 200 bytes, for the one-line
// message; "" when there is none.
static const char *rt_gpu_log_first_error(rt_arena *a, const char *log) {
    const char *p = log ? strstr(log, "error") : NULL;
    if (!p)
        return "";
    const char *s = p, *e = p;
    while (s > log && s[-1] != '\n')
        s--;
    while (*e && *e != '\n')
        e++;
    size_t n = (size_t)(e - s) < 200 ? (size_t)(e - s) : 200;
    const char *line = rt_arena_strndup(a, s, n);
    return line ? line : "";
}

rt_status rt_gpu_compile_fail(rt_arena *a, const char *what, const char *target, const char *why,
                              const char *log, rt_err *err) {
    const char *first = rt_gpu_log_first_error(a, log);
    rt_status st = rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "%s failed for %s (%s)%s%s", what, target,
                           why, first[0] ? ": " : "", first);
    if (!err->log)
        err->log = log;
    return st;
}

rt_status rt_gpu_join_options(rt_arena *a, const char *const *o, int32_t n, const char **out,
                              rt_err *err) {
    rt_buf joined;
    rt_buf_init(&joined, a);
    for (int32_t i = 0; i < n; i++) {
        if (!o[i])
            return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        rt_buf_printf(&joined, "%s%s", i ? " " : "", o[i]);
    }
    if (joined.oom)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    *out = joined.data;
    return RT_OK;
}

rt_status rt_gpu_compile(rt_arena *a, const rt_device *dev, const char *source,
                         const char *kernel_name, const rt_gpu_compile_options *opts,
                         rt_gpu_binary **out, rt_err *err) {
    *out = NULL;
    if (!rt_gpu_is_gpu_class(dev->devclass))
        return rt_fail(err, RT_ERR_DEVICE, dev->origin,
                       "device %s is not a GPU class (expected cuda, hip or opencl, got %s)",
                       dev->name, rt_devclass_name(dev->devclass));
    if (!source || !kernel_name || !kernel_name[0])
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "no kernel source or kernel name given");
    rt_gpu_compile_options none = {0};
    if (!opts)
        opts = &none;
    rt_gpu_binary *bin;
    RT_ALLOC(a, bin, 1, err);
    bin->devclass = dev->devclass;
    bin->kernel_name = rt_arena_strdup(a, kernel_name);
    bin->source = rt_arena_strdup(a, source);
    if (!bin->kernel_name || !bin->source)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    bin->res = (rt_gpu_resources){.regs = -1,
                                  .sregs = -1,
                                  .spill_store_bytes = -1,
                                  .spill_load_bytes = -1,
                                  .smem_bytes = -1,
                                  .stack_frame_bytes = -1,
                                  .barriers = -1,
                                  .max_threads_per_block = -1};
    double t0 = rt_gpu_now_ms();
    RT_TRY(rt_gpu_ops_of(dev->devclass)->compile(a, dev, source, kernel_name, opts, bin, err));
    bin->compile_ms = rt_gpu_now_ms() - t0;
    int32_t tpb =
        opts->threads_per_block > 0 ? opts->threads_per_block : dev->max_threads_per_block;
    if (bin->res.max_threads_per_block > 0 && tpb > bin->res.max_threads_per_block &&
        opts->threads_per_block == 0)
        tpb = bin->res.max_threads_per_block;
    RT_TRY(rt_gpu_occupancy_of(dev, &bin->res, tpb, &bin->occ, err));
    *out = bin;
    return RT_OK;
}

// Deep copy of a worker's binary into the caller's arena.
static const char *rt_gpu_dup(rt_arena *a, const char *s, bool *oom) {
    if (!s)
        return NULL;
    char *d = rt_arena_strdup(a, s);
    *oom |= d == NULL;
    return d;
}

static rt_gpu_binary *rt_gpu_binary_copy(rt_arena *a, const rt_gpu_binary *src) {
    rt_gpu_binary *b = rt_arena_alloc(a, sizeof *b);
    if (!b)
        return NULL;
    *b = *src;
    bool oom = false;
    b->kernel_name = rt_gpu_dup(a, src->kernel_name, &oom);
    b->symbol = rt_gpu_dup(a, src->symbol, &oom);
    b->note = rt_gpu_dup(a, src->note, &oom);
    b->source = rt_gpu_dup(a, src->source, &oom);
    b->options = rt_gpu_dup(a, src->options, &oom);
    b->log = rt_gpu_dup(a, src->log, &oom);
    b->occ.limiter = src->occ.limiter; // static strings
    if (src->image_bytes > 0) {
        uint8_t *img = rt_arena_alloc(a, src->image_bytes);
        if (img)
            memcpy(img, src->image, src->image_bytes);
        b->image = img;
        oom |= img == NULL;
    }
    return oom ? NULL : b;
}

// One compile handed to a worker thread. Shared between the caller and the worker under
// rt_gpu_pool_mu; whoever sees it last frees it (the worker when the caller abandoned it).
typedef struct rt_gpu_task {
    const rt_device *dev; // a private copy (the caller's may be gone when abandoned)
    rt_device dev_copy;
    rt_gpu_compile_options opts;
    char *source, *kernel_name; // owned
    rt_arena *arena;            // owned: the worker's allocations
    rt_gpu_binary *bin;
    rt_status status;
    rt_err err;
    bool done, abandoned;
    pthread_t thread;
} rt_gpu_task;

static pthread_mutex_t rt_gpu_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rt_gpu_pool_cv = PTHREAD_COND_INITIALIZER;
static int32_t rt_gpu_pool_pending; // abandoned tasks still running

static void rt_gpu_task_free(rt_gpu_task *t) {
    if (t->arena)
        rt_arena_free(t->arena);
    free(t->source);
    free(t->kernel_name);
    free(t);
}

static void *rt_gpu_task_main(void *p) {
    rt_gpu_task *t = p;
    rt_gpu_binary *bin = NULL;
    rt_err e;
    rt_err_clear(&e);
    rt_status st = rt_gpu_compile(t->arena, t->dev, t->source, t->kernel_name, &t->opts, &bin, &e);
    pthread_mutex_lock(&rt_gpu_pool_mu);
    t->bin = bin;
    t->status = st;
    t->err = e;
    t->done = true;
    bool abandoned = t->abandoned;
    if (abandoned)
        rt_gpu_pool_pending--;
    pthread_cond_broadcast(&rt_gpu_pool_cv);
    pthread_mutex_unlock(&rt_gpu_pool_mu);
    if (abandoned)
        rt_gpu_task_free(t);
    return NULL;
}

int32_t rt_gpu_compile_pending(void) {
    pthread_mutex_lock(&rt_gpu_pool_mu);
    int32_t n = rt_gpu_pool_pending;
    pthread_mutex_unlock(&rt_gpu_pool_mu);
    return n;
}

// Moves a finished task's outcome into the caller's job (arena a).
static void rt_gpu_task_harvest(rt_arena *a, rt_gpu_task *t, rt_gpu_compile_job *job) {
    rt_err_clear(&job->err);
    job->status = t->status;
    job->out = NULL;
    if (t->status == RT_OK) {
        job->out = rt_gpu_binary_copy(a, t->bin);
        if (!job->out)
            job->status = rt_fail(&job->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        return;
    }
    job->err = t->err;
    if (t->err.log)
        job->err.log = rt_arena_strdup(a, t->err.log);
}

static struct timespec rt_gpu_deadline(double timeout_s) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double whole = (double)(int64_t)timeout_s;
    ts.tv_sec += (time_t)whole;
    ts.tv_nsec += (long)((timeout_s - whole) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

static bool rt_gpu_past(const struct timespec *now, const struct timespec *t) {
    return now->tv_sec > t->tv_sec || (now->tv_sec == t->tv_sec && now->tv_nsec >= t->tv_nsec);
}

rt_status rt_gpu_compile_many(rt_arena *a, const rt_device *dev, const rt_gpu_compile_options *opts,
                              int32_t n_threads, rt_gpu_compile_job *jobs, int32_t n, rt_err *err) {
    if (n < 0 || (n > 0 && !jobs))
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "bad job list (expected n >= 0, got %d)",
                       (int)n);
    rt_gpu_compile_options none = {0};
    if (!opts)
        opts = &none;
    double timeout_s = opts->timeout_s > 0.0 ? opts->timeout_s : 120.0;
    if (n_threads <= 0)
        n_threads = 2;
    rt_gpu_task **tasks = rt_arena_calloc(a, rt_at_least_one((size_t)n), sizeof *tasks);
    struct timespec *deadline = rt_arena_calloc(a, rt_at_least_one((size_t)n), sizeof *deadline);
    if (!tasks || !deadline)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    for (int32_t i = 0; i < n; i++) {
        jobs[i].out = NULL;
        jobs[i].status = RT_ERR_BACKEND;
        rt_err_clear(&jobs[i].err);
    }

    int32_t next = 0, running = 0, finished = 0;
    pthread_mutex_lock(&rt_gpu_pool_mu);
    while (finished < n) {
        // Start tasks while there is room.
        while (next < n && running < n_threads) {
            int32_t i = next++;
            rt_gpu_task *t = calloc(1, sizeof *t);
            if (t) {
                rt_hal_device_copy(&t->dev_copy, dev);
                t->dev = &t->dev_copy;
                t->opts = *opts;
                t->opts.n_extra = 0; // the extra options are the caller's: copy them below
                t->opts.extra = NULL;
                t->source = strdup(jobs[i].source ? jobs[i].source : "");
                t->kernel_name = strdup(jobs[i].kernel_name ? jobs[i].kernel_name : "");
                t->arena = rt_arena_new(1 << 16);
            }
            char **extra = NULL;
            bool ok = t && t->source && t->kernel_name && t->arena;
            if (ok && opts->n_extra > 0) {
                extra = rt_arena_calloc(t->arena, (size_t)opts->n_extra, sizeof *extra);
                ok = extra != NULL;
                for (int32_t k = 0; ok && k < opts->n_extra; k++)
                    ok = (extra[k] = rt_arena_strdup(t->arena, opts->extra[k])) != NULL;
                t->opts.n_extra = opts->n_extra;
                t->opts.extra = (const char *const *)extra;
            }
            if (ok && pthread_create(&t->thread, NULL, rt_gpu_task_main, t) != 0)
                ok = false;
            if (!ok) {
                if (t)
                    rt_gpu_task_free(t);
                jobs[i].status =
                    rt_fail(&jobs[i].err, RT_ERR_NOMEM, RT_NOLOC, "cannot start a compile thread");
                finished++;
                continue;
            }
            tasks[i] = t;
            deadline[i] = rt_gpu_deadline(timeout_s);
            running++;
        }
        // Harvest finished tasks and abandon late ones.
        struct timespec now, earliest = {0, 0};
        clock_gettime(CLOCK_REALTIME, &now);
        bool any_wait = false, progress = false;
        for (int32_t i = 0; i < next; i++) {
            rt_gpu_task *t = tasks[i];
            if (!t)
                continue;
            if (t->done) {
                pthread_mutex_unlock(&rt_gpu_pool_mu);
                pthread_join(t->thread, NULL);
                rt_gpu_task_harvest(a, t, &jobs[i]);
                rt_gpu_task_free(t);
                pthread_mutex_lock(&rt_gpu_pool_mu);
            } else if (rt_gpu_past(&now, &deadline[i])) {
                t->abandoned = true;
                rt_gpu_pool_pending++;
                pthread_detach(t->thread);
                jobs[i].status =
                    rt_fail(&jobs[i].err, RT_ERR_BACKEND, RT_NOLOC,
                            "compile of %s timed out (expected at most %g s)",
                            jobs[i].kernel_name ? jobs[i].kernel_name : "(null)", timeout_s);
            } else {
                if (!any_wait || !rt_gpu_past(&deadline[i], &earliest))
                    earliest = deadline[i];
                any_wait = true;
                continue;
            }
            tasks[i] = NULL;
            running--;
            finished++;
            progress = true;
        }
        if (!progress && any_wait) {
            int rc = pthread_cond_timedwait(&rt_gpu_pool_cv, &rt_gpu_pool_mu, &earliest);
            (void)rc; // ETIMEDOUT or a wake-up: both rescan
        }
    }
    pthread_mutex_unlock(&rt_gpu_pool_mu);
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Runtime
// ---------------------------------------------------------------------------------------------

bool rt_gpu_err_is_absent(const rt_err *err) {
    return err->status == RT_ERR_BACKEND &&
           strncmp(err->msg, RT_GPU_ABSENT_PREFIX, strlen(RT_GPU_ABSENT_PREFIX)) == 0;
}

const char *rt_gpu_runtime_device_name(const rt_gpu_runtime *rt) {
    return rt->device_name;
}

rt_arena *rt_gpu_runtime_arena(const rt_gpu_runtime *rt) {
    return rt->arena;
}

rt_status rt_gpu_runtime_open(rt_arena *a, const rt_device *dev, rt_gpu_runtime **out,
                              rt_err *err) {
    *out = NULL;
    if (!rt_gpu_is_gpu_class(dev->devclass))
        return rt_fail(err, RT_ERR_DEVICE, dev->origin,
                       "device %s is not a GPU class (expected cuda, hip or opencl, got %s)",
                       dev->name, rt_devclass_name(dev->devclass));
    rt_gpu_runtime *rt;
    RT_ALLOC(a, rt, 1, err);
    rt->devclass = dev->devclass;
    rt->dev = dev;
    rt->arena = a;
    RT_TRY(rt_gpu_ops_of(dev->devclass)->load(rt, err));
    *out = rt;
    return RT_OK;
}

size_t rt_gpu_arg_bytes(const rt_gpu_arg *arg) {
    return (size_t)arg->n_elems * (size_t)rt_dtype_bytes(arg->dtype);
}

// IEEE binary16 from a float, round to nearest even (handles subnormals, overflow to inf, NaN).
static uint16_t rt_gpu_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
    if (exp == 0xffu)
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0u));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++; // may carry into the exponent, up to inf: correct
    return (uint16_t)(sign | h);
}

static float rt_gpu_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, x;
    if (exp == 0x1fu) {
        x = sign | 0x7f800000u | (man << 13);
    } else if (exp == 0) {
        if (man == 0) {
            x = sign;
        } else {
            int32_t e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400u));
            x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else {
        x = sign | ((exp - 15 + 127) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static uint16_t rt_gpu_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    uint32_t lsb = (x >> 16) & 1u;
    x += 0x7fffu + lsb;
    return (uint16_t)(x >> 16);
}

static float rt_gpu_bf16_to_f32(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static void rt_gpu_pack(const rt_gpu_arg *arg, void *dst) {
    for (int64_t i = 0; i < arg->n_elems; i++) {
        double v = arg->host ? arg->host[i] : 0.0;
        switch (arg->dtype) {
        case RT_DTYPE_F32:
            ((float *)dst)[i] = (float)v;
            break;
        case RT_DTYPE_F64:
            ((double *)dst)[i] = v;
            break;
        case RT_DTYPE_F16:
            ((uint16_t *)dst)[i] = rt_gpu_f32_to_f16((float)v);
            break;
        case RT_DTYPE_BF16:
            ((uint16_t *)dst)[i] = rt_gpu_f32_to_bf16((float)v);
            break;
        case RT_DTYPE_I32:
            ((int32_t *)dst)[i] = (int32_t)rt_dtype_round(RT_DTYPE_I32, v);
            break;
        case RT_DTYPE_I8:
            ((int8_t *)dst)[i] = (int8_t)rt_dtype_round(RT_DTYPE_I8, v);
            break;
        default:
            break;
        }
    }
}

static void rt_gpu_unpack(const void *src, rt_gpu_arg *arg) {
    for (int64_t i = 0; i < arg->n_elems; i++) {
        double v = 0.0;
        switch (arg->dtype) {
        case RT_DTYPE_F32:
            v = (double)((const float *)src)[i];
            break;
        case RT_DTYPE_F64:
            v = ((const double *)src)[i];
            break;
        case RT_DTYPE_F16:
            v = (double)rt_gpu_f16_to_f32(((const uint16_t *)src)[i]);
            break;
        case RT_DTYPE_BF16:
            v = (double)rt_gpu_bf16_to_f32(((const uint16_t *)src)[i]);
            break;
        case RT_DTYPE_I32:
            v = (double)((const int32_t *)src)[i];
            break;
        case RT_DTYPE_I8:
            v = (double)((const int8_t *)src)[i];
            break;
        default:
            break;
        }
        arg->host[i] = v;
    }
}

// ---------------------------------------------------------------------------------------------
// Launch-style drivers (cuda, hip): one exec over rt_gpu_driver_ops
// ---------------------------------------------------------------------------------------------

struct rt_gpu_module {
    rt_gpu_module *next;
    const rt_gpu_binary *bin;
    void *module, *fn;
};

rt_status rt_gpu_driver_fail(const rt_gpu_driver_ops *ops, void *ctx, const char *what, int r,
                             rt_err *err) {
    const char *text = ops->error_string ? ops->error_string(ctx, r) : NULL;
    return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "%s failed: %s (%d)%s%s", what,
                   ops->error_name(ctx, r), r, text ? ": " : "", text ? text : "");
}

void rt_gpu_driver_unload_all(rt_gpu_driver *d) {
    for (rt_gpu_module *m = d->modules; m; m = m->next)
        d->ops->module_unload(d->ctx, m->module);
    d->modules = NULL;
}

// The kernel of bin, its image loaded on first use and kept until rt_gpu_driver_unload_all. A
// module whose function cannot be found is unloaded at once, so a later call tries again.
static rt_status rt_gpu_driver_function(rt_arena *a, rt_gpu_driver *d, const rt_gpu_binary *bin,
                                        void **out, rt_err *err) {
    for (rt_gpu_module *m = d->modules; m; m = m->next) {
        if (m->bin == bin) {
            *out = m->fn;
            return RT_OK;
        }
    }
    const rt_gpu_driver_ops *ops = d->ops;
    if (!bin->image || bin->image_bytes == 0)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "kernel %s has no %s", bin->kernel_name,
                       ops->image_name);
    rt_gpu_module *m;
    RT_ALLOC(a, m, 1, err);
    int r = ops->module_load(d->ctx, bin->image, &m->module);
    if (r != 0)
        return rt_gpu_driver_fail(ops, d->ctx, ops->load_call, r, err);
    r = ops->module_function(d->ctx, m->module, bin->symbol ? bin->symbol : bin->kernel_name,
                             &m->fn);
    if (r != 0) {
        ops->module_unload(d->ctx, m->module);
        return rt_gpu_driver_fail(ops, d->ctx, ops->function_call, r, err);
    }
    m->bin = bin;
    m->next = d->modules;
    d->modules = m;
    *out = m->fn;
    return RT_OK;
}

// One launch of every step in order (the kernels in fns[]). params has room for the steps' own
// int arguments after the shared ones: each launch points them at its step's values (a launch
// copies its parameters when it is issued).
static int rt_gpu_driver_round(const rt_gpu_driver_ops *ops, void *ctx, void *const *fns,
                               const rt_gpu_exec *x, void **params) {
    for (int32_t s = 0; s < x->n_steps; s++) {
        const rt_gpu_launch *g = &x->steps[s].cfg;
        void **p = x->step_params && x->step_params[s] ? x->step_params[s] : params;
        int32_t base = p == params ? x->n_args : x->steps[s].n_mapped;
        for (int32_t k = 0; k < x->steps[s].n_ints; k++)
            p[base + k] = (void *)&x->steps[s].ints[k];
        unsigned grid[3], block[3];
        for (int k = 0; k < 3; k++) {
            grid[k] = (unsigned)(g->grid[k] > 0 ? g->grid[k] : 1);
            block[k] = (unsigned)(g->block[k] > 0 ? g->block[k] : 1);
        }
        int r = ops->launch(ctx, fns[s], grid, block, (unsigned)g->dyn_smem_bytes, p);
        if (r != 0)
            return r;
    }
    return 0;
}

// The timed repetitions without device events: the wall clock from before the first launch of
// a round to the return of the sync after it (the warm-up is waited for first).
static int rt_gpu_driver_time_wall(const rt_gpu_driver_ops *ops, void *ctx, void *const *fns,
                                   rt_gpu_exec *x, void **params) {
    int r = ops->sync(ctx);
    for (int32_t i = 0; r == 0 && i < x->reps; i++) {
        double t0 = rt_gpu_now_ms();
        r = rt_gpu_driver_round(ops, ctx, fns, x, params);
        if (r == 0)
            r = ops->sync(ctx);
        x->samples_ns[i] = (rt_gpu_now_ms() - t0) * 1e6;
    }
    return r;
}

// The timed repetitions on the driver's kernel timer: the warm-up is waited for, then the reps
// rounds are launched while the timer records, each waited for (as each event-timed one is: the
// wall clock around a timing keeps its meaning, which rtcalib's launch probe reads); a sample is
// a round's span on the device, from the start of its first kernel to the end of its last. Returns
// 0; or -1 with *drv_r the driver's result when a launch or wait failed (a failure of the
// kernels, reported as such); or -1 with *drv_r 0 and why filled when the timer failed (then the
// caller times with events).
static int rt_gpu_driver_time_kernels(const rt_gpu_driver *d, void *const *fns, rt_gpu_exec *x,
                                      void **params, int *drv_r, char *why, size_t why_size) {
    const rt_gpu_driver_ops *ops = d->ops;
    const rt_gpu_kernel_timer *t = d->timer;
    if ((*drv_r = ops->sync(d->ctx)) != 0)
        return -1;
    int64_t ns = x->n_steps, n = (int64_t)x->reps * ns;
    uint64_t *start = calloc((size_t)n, sizeof *start), *end = calloc((size_t)n, sizeof *end);
    const char **syms = calloc((size_t)n, sizeof *syms);
    int tr = 1;
    if (!start || !end || !syms)
        snprintf(why, why_size, "out of memory for %lld kernel records", (long long)n);
    else
        tr = t->begin(why, why_size);
    if (tr == 0) {
        int r = 0;
        for (int32_t i = 0; r == 0 && i < x->reps; i++)
            if ((r = rt_gpu_driver_round(ops, d->ctx, fns, x, params)) == 0)
                r = ops->sync(d->ctx);
        for (int64_t k = 0; k < n; k++) {
            const rt_gpu_binary *bin = x->steps[k % ns].bin;
            syms[k] = bin->symbol ? bin->symbol : bin->kernel_name;
        }
        tr = t->end(syms, r == 0 ? n : 0, start, end, why, why_size);
        *drv_r = r;
    }
    for (int32_t i = 0; tr == 0 && *drv_r == 0 && i < x->reps; i++)
        x->samples_ns[i] = (double)(end[(int64_t)i * ns + ns - 1] - start[(int64_t)i * ns]);
    free(start);
    free(end);
    free(syms);
    return tr == 0 && *drv_r == 0 ? 0 : -1;
}

// The launches, with the device buffers in place: reps == 0, one round (every step once) and a
// synchronize; otherwise warmup untimed rounds, then reps rounds timed by the driver's kernel
// timer (rt_gpu_driver_time_kernels) where it has one that works, else each between two event
// records (the wall clock around round + sync where the driver has no events), whose elapsed
// time is the sample. A kernel timer that fails is dropped for the driver's life, the reason
// noted in the events' method (text in a). The events are destroyed on every path.
static rt_status rt_gpu_driver_launch_all(rt_arena *a, rt_gpu_driver *d, void *const *fns,
                                          rt_gpu_exec *x, void **params, rt_err *err) {
    const rt_gpu_driver_ops *ops = d->ops;
    void *ctx = d->ctx;
    int r;
    int32_t untimed = x->reps == 0 ? 1 : x->warmup; // the run's one round, or the warm-up
    for (int32_t i = 0; i < untimed; i++)
        if ((r = rt_gpu_driver_round(ops, ctx, fns, x, params)) != 0)
            return rt_gpu_driver_fail(ops, ctx, ops->launch_call, r, err);
    if (x->reps == 0) {
        if ((r = ops->sync(ctx)) != 0)
            return rt_gpu_driver_fail(ops, ctx, ops->sync_call, r, err);
        return RT_OK;
    }
    if (d->timer) {
        char why[512] = "";
        if (rt_gpu_driver_time_kernels(d, fns, x, params, &r, why, sizeof why) == 0) {
            x->method = d->timer->method;
            return RT_OK;
        }
        if (r != 0)
            return rt_gpu_driver_fail(ops, ctx, ops->timed_calls, r, err);
        const char *m =
            rt_arena_printf(a, "%s (%s not used: %s)", ops->event_timer, d->timer->name, why);
        if (!m)
            return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        d->event_method = m;
        d->timer = NULL;
    }
    if (!ops->event_create) {
        x->method = RT_GPU_TIMED_WALL;
        if ((r = rt_gpu_driver_time_wall(ops, ctx, fns, x, params)) != 0)
            return rt_gpu_driver_fail(ops, ctx, ops->timed_calls, r, err);
        return RT_OK;
    }
    x->method = d->event_method ? d->event_method : ops->event_timer;
    void *ev[2] = {NULL, NULL};
    r = 0;
    for (int k = 0; k < 2 && r == 0; k++) {
        void *e = NULL;
        if ((r = ops->event_create(ctx, &e)) == 0)
            ev[k] = e;
    }
    for (int32_t i = 0; r == 0 && i < x->reps; i++) {
        float ms = 0.0f;
        r = ops->event_record(ctx, ev[0]);
        if (r == 0)
            r = rt_gpu_driver_round(ops, ctx, fns, x, params);
        if (r == 0)
            r = ops->event_record(ctx, ev[1]);
        if (r == 0)
            r = ops->event_synchronize(ctx, ev[1]);
        if (r == 0)
            r = ops->event_elapsed_ms(ctx, ev[0], ev[1], &ms);
        x->samples_ns[i] = (double)ms * 1e6;
    }
    rt_status st = r == 0 ? RT_OK : rt_gpu_driver_fail(ops, ctx, ops->timed_calls, r, err);
    for (int k = 0; k < 2; k++)
        if (ev[k])
            ops->event_destroy(ctx, ev[k]);
    return st;
}

// A scalar kernel argument as launch-style drivers take it: a pointer to the value, which must
// stay alive until the launch. One slot per argument.
typedef union rt_gpu_scalar {
    int32_t i32;
    int64_t i64;
    float f32;
    double f64;
} rt_gpu_scalar;

// Stores scalar argument g in *slot and returns the parameter pointer to pass for it; NULL for
// a local argument, which launch-style drivers do not take.
static void *rt_gpu_scalar_param(const rt_gpu_arg *g, rt_gpu_scalar *slot) {
    switch (g->kind) {
    case RT_GPU_ARG_I32:
        slot->i32 = (int32_t)g->i;
        return &slot->i32;
    case RT_GPU_ARG_I64:
        slot->i64 = g->i;
        return &slot->i64;
    case RT_GPU_ARG_F32:
        slot->f32 = (float)g->f;
        return &slot->f32;
    case RT_GPU_ARG_F64:
        slot->f64 = g->f;
        return &slot->f64;
    default:
        return NULL;
    }
}

// The parameter list of every step with an arg_map: pointers into the shared list params
// (x->step_params, freed by the caller). Errors: RT_ERR_NOMEM.
static rt_status rt_gpu_driver_step_params(rt_gpu_exec *x, void **params, rt_err *err) {
    bool any = false;
    for (int32_t s = 0; s < x->n_steps; s++)
        any = any || x->steps[s].arg_map;
    if (!any)
        return RT_OK;
    if (!(x->step_params = calloc((size_t)x->n_steps, sizeof *x->step_params)))
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    for (int32_t s = 0; s < x->n_steps; s++) {
        const rt_gpu_step *st = &x->steps[s];
        if (!st->arg_map)
            continue;
        void **p = calloc((size_t)st->n_mapped + RT_GPU_STEP_MAX_INTS, sizeof *p);
        if (!(x->step_params[s] = p))
            return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        for (int32_t j = 0; j < st->n_mapped; j++)
            p[j] = params[st->arg_map[j]];
    }
    return RT_OK;
}

// rt_gpu_exec on a launch-style driver: binds the context, finds the kernels, allocates and
// uploads every buffer (a pointer to its device address is the parameter), passes scalars by
// type, launches (rt_gpu_driver_launch_all), reads the copy_out buffers back into the staging
// memory after an untimed run, and frees every device buffer whatever failed.
rt_status rt_gpu_driver_exec(rt_gpu_runtime *rt, rt_gpu_exec *x, rt_err *err) {
    rt_gpu_driver *d = rt->driver;
    const rt_gpu_driver_ops *ops = d->ops;
    void *ctx = d->ctx;
    int r;
    if (ops->bind && (r = ops->bind(ctx)) != 0)
        return rt_gpu_driver_fail(ops, ctx, ops->bind_call, r, err);
    void **fns = calloc((size_t)x->n_steps, sizeof *fns);
    if (!fns)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_status st = RT_OK;
    for (int32_t s = 0; st == RT_OK && s < x->n_steps; s++) {
        st = rt_gpu_driver_function(rt->arena, d, x->steps[s].bin, &fns[s], err);
        int64_t smem = x->steps[s].cfg.dyn_smem_bytes;
        if (st == RT_OK && ops->set_dyn_smem && (r = ops->set_dyn_smem(ctx, fns[s], smem)) != 0)
            st = rt_gpu_driver_fail(ops, ctx, ops->smem_call, r, err);
    }
    if (st != RT_OK) {
        free(fns);
        return st;
    }
    int32_t n = x->n_args;
    rt_gpu_devptr *dptr = calloc(rt_at_least_one((size_t)n), sizeof *dptr);
    rt_gpu_devptr *view = calloc(rt_at_least_one((size_t)n), sizeof *view);
    void **params = calloc((size_t)n + RT_GPU_STEP_MAX_INTS, sizeof *params);
    rt_gpu_scalar *scalars = calloc(rt_at_least_one((size_t)n), sizeof *scalars);
    if (!dptr || !view || !params || !scalars)
        st = rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    for (int32_t i = 0; st == RT_OK && i < n; i++) {
        const rt_gpu_arg *g = &x->args[i];
        r = 0;
        if (g->kind == RT_GPU_ARG_BUFFER && g->view_of > 0) { // inside its parent's memory
            view[i] = dptr[g->view_of - 1] + (rt_gpu_devptr)g->view_offset;
            params[i] = &view[i];
        } else if (g->kind == RT_GPU_ARG_BUFFER) {
            rt_gpu_devptr p = 0;
            if ((r = ops->alloc(ctx, rt_gpu_arg_bytes(g), &p)) == 0) {
                dptr[i] = p;
                r = ops->htod(ctx, p, x->host_staging[i], rt_gpu_arg_bytes(g));
            }
            params[i] = &dptr[i];
        } else if (!(params[i] = rt_gpu_scalar_param(g, &scalars[i]))) {
            st = rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                         "argument %d: local buffers are for opencl (expected dyn_smem_bytes on "
                         "%s)",
                         (int)i, ops->class_name);
        }
        if (r != 0)
            st = rt_gpu_driver_fail(ops, ctx, ops->upload_calls, r, err);
    }
    if (st == RT_OK)
        st = rt_gpu_driver_step_params(x, params, err);
    if (st == RT_OK)
        st = rt_gpu_driver_launch_all(rt->arena, d, fns, x, params, err);
    for (int32_t i = 0; st == RT_OK && x->reps == 0 && i < n; i++) {
        const rt_gpu_arg *g = &x->args[i];
        if (g->kind != RT_GPU_ARG_BUFFER || !g->copy_out || g->view_of > 0)
            continue;
        if ((r = ops->dtoh(ctx, x->host_staging[i], dptr[i], rt_gpu_arg_bytes(g))) != 0)
            st = rt_gpu_driver_fail(ops, ctx, ops->download_call, r, err);
    }
    for (int32_t i = 0; dptr && i < n; i++)
        if (dptr[i])
            ops->free(ctx, dptr[i]);
    for (int32_t s = 0; x->step_params && s < x->n_steps; s++)
        free(x->step_params[s]);
    free(x->step_params);
    x->step_params = NULL;
    free(dptr);
    free(view);
    free(params);
    free(scalars);
    free(fns);
    return st;
}

// ---------------------------------------------------------------------------------------------
// Launch
// ---------------------------------------------------------------------------------------------

// The class's run op (x->reps == 0) or time op: cuda and hip run on their driver table
// (rt_gpu_driver_exec), opencl sets its arguments and enqueues its own way.
static rt_status rt_gpu_exec_dispatch(rt_gpu_runtime *rt, rt_gpu_exec *x, rt_err *err) {
    const struct rt_hal_ops *ops = rt_gpu_ops_of(rt->devclass);
    return x->reps > 0 ? ops->time(rt, x, err) : ops->run(rt, x, err);
}

// Argument i, when it is a view (rt_gpu_arg.view_of): of an earlier buffer of its dtype that is
// no view, inside it, at an aligned offset.
static rt_status rt_gpu_view_check(const rt_gpu_arg *args, int32_t i, rt_err *err) {
    const rt_gpu_arg *g = &args[i];
    if (g->kind != RT_GPU_ARG_BUFFER || g->view_of == 0)
        return RT_OK;
    int32_t p = g->view_of - 1;
    const rt_gpu_arg *pa = p >= 0 && p < i ? &args[p] : NULL;
    size_t eb = (size_t)rt_dtype_bytes(g->dtype);
    if (!pa || pa->kind != RT_GPU_ARG_BUFFER || pa->view_of != 0 || pa->dtype != g->dtype ||
        g->view_offset < 0 || g->view_offset % RT_GPU_VIEW_ALIGN_BYTES != 0 ||
        (size_t)g->view_offset + (size_t)g->n_elems * eb > rt_gpu_arg_bytes(pa))
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       "buffer argument %d: a view (of argument %d at byte %lld, %lld elements) "
                       "must lie inside an earlier buffer of its type that is no view, at a "
                       "multiple of %d bytes",
                       (int)i, (int)p, (long long)g->view_offset, (long long)g->n_elems,
                       RT_GPU_VIEW_ALIGN_BYTES);
    return RT_OK;
}

// Checks the arguments and converts the buffers; the staging memory is malloc'd (it may be
// large and lives only for one call) and freed by rt_gpu_exec_run.
static rt_status rt_gpu_exec_run(rt_gpu_runtime *rt, rt_gpu_exec *x, rt_err *err) {
    if (x->n_steps < 1 || !x->steps)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "no kernel to launch (expected at least 1)");
    for (int32_t s = 0; s < x->n_steps; s++) {
        const rt_gpu_binary *bin = x->steps[s].bin;
        if (!bin)
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "step %d has no kernel", (int)s);
        if (x->steps[s].n_ints < 0 || x->steps[s].n_ints > RT_GPU_STEP_MAX_INTS)
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                           "step %d has %d int arguments (expected at most %d)", (int)s,
                           (int)x->steps[s].n_ints, RT_GPU_STEP_MAX_INTS);
        if (bin->devclass != rt->devclass)
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                           "kernel %s was compiled for class %s (expected %s)", bin->kernel_name,
                           rt_devclass_name(bin->devclass), rt_devclass_name(rt->devclass));
    }
    if (x->n_args < 0 || (x->n_args > 0 && !x->args))
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "bad argument list");
    for (int32_t i = 0; i < x->n_args; i++) {
        const rt_gpu_arg *g = &x->args[i];
        if ((unsigned)g->kind >= RT_GPU_ARG_COUNT)
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "argument %d has a bad kind (got %d)",
                           (int)i, (int)g->kind);
        if (g->kind == RT_GPU_ARG_BUFFER &&
            (g->n_elems <= 0 || (unsigned)g->dtype >= RT_DTYPE_COUNT || (g->copy_out && !g->host)))
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                           "buffer argument %d needs n_elems > 0, a dtype and, for copy_out, "
                           "host memory (got %lld elements)",
                           (int)i, (long long)g->n_elems);
        if (g->kind == RT_GPU_ARG_LOCAL && g->local_bytes <= 0)
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                           "local argument %d needs local_bytes > 0 (got %lld)", (int)i,
                           (long long)g->local_bytes);
        RT_TRY(rt_gpu_view_check(x->args, i, err));
    }
    for (int32_t s = 0; s < x->n_steps; s++) {
        const rt_gpu_step *st = &x->steps[s];
        for (int32_t j = 0; st->arg_map && j < st->n_mapped; j++)
            if (st->arg_map[j] < 0 || st->arg_map[j] >= x->n_args)
                return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                               "argument %d of step %d maps to argument %d (expected 0..%d)",
                               (int)j, (int)s, (int)st->arg_map[j], (int)x->n_args - 1);
        if (st->arg_map && st->n_mapped < 0)
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "step %d maps %d arguments", (int)s,
                           (int)st->n_mapped);
    }
    void **staging = calloc(rt_at_least_one((size_t)x->n_args), sizeof *staging);
    if (!staging)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_status st = RT_OK;
    for (int32_t i = 0; i < x->n_args && st == RT_OK; i++) {
        if (x->args[i].kind != RT_GPU_ARG_BUFFER || x->args[i].view_of > 0)
            continue;
        staging[i] = malloc(rt_gpu_arg_bytes(&x->args[i]));
        if (!staging[i])
            st = rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory for argument %d", (int)i);
        else
            rt_gpu_pack(&x->args[i], staging[i]);
    }
    x->host_staging = staging;
    if (st == RT_OK)
        st = rt_gpu_exec_dispatch(rt, x, err);
    for (int32_t i = 0; i < x->n_args; i++) {
        if (st == RT_OK && x->reps == 0 && x->args[i].kind == RT_GPU_ARG_BUFFER &&
            x->args[i].copy_out && x->args[i].view_of <= 0)
            rt_gpu_unpack(staging[i], &x->args[i]);
        free(staging[i]);
    }
    free(staging);
    x->host_staging = NULL;
    return st;
}

rt_status rt_gpu_run_steps(rt_gpu_runtime *rt, const rt_gpu_step *steps, int32_t n_steps,
                           rt_gpu_arg *args, int32_t n_args, rt_err *err) {
    rt_gpu_exec x = {.steps = steps, .n_steps = n_steps, .args = args, .n_args = n_args};
    return rt_gpu_exec_run(rt, &x, err);
}

rt_status rt_gpu_run(rt_gpu_runtime *rt, const rt_gpu_binary *bin, const rt_gpu_launch *cfg,
                     rt_gpu_arg *args, int32_t n_args, rt_err *err) {
    rt_gpu_step step = {.bin = bin, .cfg = *cfg};
    return rt_gpu_run_steps(rt, &step, 1, args, n_args, err);
}

static int rt_gpu_cmp_double(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

rt_status rt_gpu_time_steps(rt_gpu_runtime *rt, const rt_gpu_step *steps, int32_t n_steps,
                            rt_gpu_arg *args, int32_t n_args, int32_t warmup, int32_t reps,
                            rt_gpu_timing *out, rt_err *err) {
    memset(out, 0, sizeof *out);
    if (reps < 1 || warmup < 0)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       "bad timing counts (expected reps >= 1 and warmup >= 0, got %d and %d)",
                       (int)reps, (int)warmup);
    double *samples = calloc((size_t)reps, sizeof *samples);
    if (!samples)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_gpu_exec x = {.steps = steps,
                     .n_steps = n_steps,
                     .args = args,
                     .n_args = n_args,
                     .warmup = warmup,
                     .reps = reps,
                     .samples_ns = samples};
    rt_status st = rt_gpu_exec_run(rt, &x, err);
    if (st == RT_OK) {
        double sum = 0.0;
        for (int32_t i = 0; i < reps; i++)
            sum += samples[i];
        qsort(samples, (size_t)reps, sizeof *samples, rt_gpu_cmp_double);
        out->warmup = warmup;
        out->reps = reps;
        out->min_ns = samples[0];
        out->median_ns =
            reps % 2 ? samples[reps / 2] : 0.5 * (samples[reps / 2 - 1] + samples[reps / 2]);
        out->mean_ns = sum / reps;
        out->method = x.method;
    }
    free(samples);
    return st;
}

rt_status rt_gpu_time(rt_gpu_runtime *rt, const rt_gpu_binary *bin, const rt_gpu_launch *cfg,
                      rt_gpu_arg *args, int32_t n_args, int32_t warmup, int32_t reps,
                      rt_gpu_timing *out, rt_err *err) {
    rt_gpu_step step = {.bin = bin, .cfg = *cfg};
    return rt_gpu_time_steps(rt, &step, 1, args, n_args, warmup, reps, out, err);
}
