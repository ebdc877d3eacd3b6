// hal-cupti.c: the kernel timer of the cuda class from CUPTI's activity API (rt_gpu_kernel_timer,
// hal-gpu-impl.h). While a timing records, CUPTI writes one CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
// record per kernel executed (start and end on the device, in ns) into buffers this file hands
// it and gets back through two callbacks; hal-gpu.c turns the records into samples and falls back
// to CUDA events, with a note, when anything here fails. libcupti is opened with dlopen at the
// first timing ($RTGEN_LIBCUPTI, else the toolkit's soname found at configure time, its path,
// and the sonames of other CUPTI releases), never linked. CUPTI's activity state is one per
// process: one timing records at a time (a mutex held from begin to end).
// Built when CMake finds cupti.h and libcupti next to NVRTC (RT_WITH_CUPTI); otherwise the cuda
// class times with events only.
#include "hal-gpu-impl.h"

#if defined(RT_WITH_CUPTI)

#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef RT_CUPTI_SONAME
#define RT_CUPTI_SONAME "libcupti.so"
#endif
#ifndef RT_CUPTI_PATH
#define RT_CUPTI_PATH RT_CUPTI_SONAME
#endif

// The fields read from a kernel record sit where every record version since
// CUpti_ActivityKernel4 has them (CUDA 12's CUPTI writes Kernel9, CUDA 13's Kernel10).
_Static_assert(offsetof(CUpti_ActivityKernel10, start) == offsetof(CUpti_ActivityKernel9, start) &&
                   offsetof(CUpti_ActivityKernel10, end) == offsetof(CUpti_ActivityKernel9, end) &&
                   offsetof(CUpti_ActivityKernel10, correlationId) ==
                       offsetof(CUpti_ActivityKernel9, correlationId) &&
                   offsetof(CUpti_ActivityKernel10, name) == offsetof(CUpti_ActivityKernel9, name),
               "kernel records of CUDA 12 and 13 are read alike");

#define RT_CUPTI_FNS(X)                                                                            \
    X(cuptiGetResultString)                                                                        \
    X(cuptiActivityRegisterCallbacks)                                                              \
    X(cuptiActivityEnable)                                                                         \
    X(cuptiActivityDisable)                                                                        \
    X(cuptiActivityFlushAll)                                                                       \
    X(cuptiActivityGetNextRecord)                                                                  \
    X(cuptiActivityGetNumDroppedRecords)

#define RT_CUPTI_FIELD(name) __typeof__(name) *name;
static struct {
    RT_CUPTI_FNS(RT_CUPTI_FIELD)
    void *lib;
    bool ready; // loaded and the buffer callbacks registered (then kept for the process)
    bool stale; // the last timing failed: CUPTI may still hold records of its kernels
} rt_cupti;

// One timing at a time, from begin to end (CUPTI's activity state is the process's).
static pthread_mutex_t rt_cupti_mu = PTHREAD_MUTEX_INITIALIZER;

enum { RT_CUPTI_BUFFER_BYTES = 1 << 20, RT_CUPTI_NAME_MAX = 128 };

// A kernel record as the completion callback copies it (CUPTI may run that callback on its own
// thread; rt_cupti_got_mu guards what it fills).
typedef struct rt_cupti_rec {
    uint64_t start_ns, end_ns;
    uint32_t correlation; // the launch's id: launch order
    char name[RT_CUPTI_NAME_MAX];
} rt_cupti_rec;

static pthread_mutex_t rt_cupti_got_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    rt_cupti_rec *v;
    int64_t n, cap;
    size_t dropped;  // records CUPTI reports it dropped
    bool oom;        // a record could not be kept
    int read_result; // a failed cuptiActivityGetNextRecord (0: none)
} rt_cupti_got;

static const char *rt_cupti_result(CUptiResult r) {
    const char *s = NULL;
    if (rt_cupti.cuptiGetResultString && rt_cupti.cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "unknown CUPTI result";
}

// "CALL failed: NAME (CODE)" into why; returns 1.
static int rt_cupti_fail(char *why, size_t why_size, const char *call, CUptiResult r) {
    snprintf(why, why_size, "%s failed: %s (%d)", call, rt_cupti_result(r), (int)r);
    return 1;
}

static void CUPTIAPI rt_cupti_buffer_requested(uint8_t **buffer, size_t *size,
                                               size_t *max_records) {
    *buffer = aligned_alloc(8, RT_CUPTI_BUFFER_BYTES); // records are 8-byte aligned
    *size = *buffer ? RT_CUPTI_BUFFER_BYTES : 0;
    *max_records = 0; // as many as fit
}

static void rt_cupti_keep(const CUpti_ActivityKernel10 *k) {
    if (rt_cupti_got.n == rt_cupti_got.cap) {
        int64_t cap = rt_cupti_got.cap ? 2 * rt_cupti_got.cap : 256;
        rt_cupti_rec *v = realloc(rt_cupti_got.v, (size_t)cap * sizeof *v);
        if (!v) {
            rt_cupti_got.oom = true;
            return;
        }
        rt_cupti_got.v = v;
        rt_cupti_got.cap = cap;
    }
    rt_cupti_rec *r = &rt_cupti_got.v[rt_cupti_got.n++];
    r->start_ns = k->start;
    r->end_ns = k->end;
    r->correlation = k->correlationId;
    snprintf(r->name, sizeof r->name, "%s", k->name ? k->name : "");
}

static void CUPTIAPI rt_cupti_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                               size_t size, size_t valid_bytes) {
    (void)size;
    pthread_mutex_lock(&rt_cupti_got_mu);
    CUpti_Activity *rec = NULL;
    CUptiResult r;
    while (buffer &&
           (r = rt_cupti.cuptiActivityGetNextRecord(buffer, valid_bytes, &rec)) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
            rec->kind == CUPTI_ACTIVITY_KIND_KERNEL)
            rt_cupti_keep((const CUpti_ActivityKernel10 *)(const void *)rec);
    }
    if (buffer && r != CUPTI_ERROR_MAX_LIMIT_REACHED && !rt_cupti_got.read_result)
        rt_cupti_got.read_result = (int)r;
    size_t dropped = 0;
    if (rt_cupti.cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
        rt_cupti_got.dropped += dropped;
    pthread_mutex_unlock(&rt_cupti_got_mu);
    free(buffer);
}

static void rt_cupti_got_clear(void) {
    pthread_mutex_lock(&rt_cupti_got_mu);
    rt_cupti_got.n = 0;
    rt_cupti_got.dropped = 0;
    rt_cupti_got.oom = false;
    rt_cupti_got.read_result = 0;
    pthread_mutex_unlock(&rt_cupti_got_mu);
}

// Resolves the entry points from lib (opened as name) and registers the buffer callbacks.
static int rt_cupti_resolve(void *lib, const char *name, char *why, size_t why_size) {
    void *p;
#define RT_CUPTI_RESOLVE(fn)                                                                       \
    if (!(p = dlsym(lib, #fn))) {                                                                  \
        snprintf(why, why_size, "the CUPTI library %s lacks %s", name, #fn);                       \
        return 1;                                                                                  \
    }                                                                                              \
    memcpy(&rt_cupti.fn, &p, sizeof p);
    RT_CUPTI_FNS(RT_CUPTI_RESOLVE)
#undef RT_CUPTI_RESOLVE
    CUptiResult r = rt_cupti.cuptiActivityRegisterCallbacks(rt_cupti_buffer_requested,
                                                            rt_cupti_buffer_completed);
    if (r != CUPTI_SUCCESS)
        return rt_cupti_fail(why, why_size, "cuptiActivityRegisterCallbacks", r);
    return 0;
}

// Opens and sets up CUPTI once per process; a failure is retried by the next runtime's timing.
static int rt_cupti_load(char *why, size_t why_size) {
    if (rt_cupti.ready)
        return 0;
    static const char *const names[] = {RT_CUPTI_SONAME, RT_CUPTI_PATH, "libcupti.so.13",
                                        "libcupti.so.12",
                                        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"};
    const char *env = getenv("RTGEN_LIBCUPTI");
    const char *name = NULL;
    void *lib = NULL;
    char first_error[256] = "";
    if (env && env[0]) {
        name = env;
        if (!(lib = dlopen(env, RTLD_NOW | RTLD_LOCAL))) {
            const char *e = dlerror();
            snprintf(why, why_size, "cannot load CUPTI from RTGEN_LIBCUPTI (%s)", e ? e : env);
            return 1;
        }
    }
    for (size_t i = 0; !lib && i < sizeof names / sizeof names[0]; i++) {
        name = names[i];
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        const char *e = lib ? NULL : dlerror();
        if (i == 0 && e)
            snprintf(first_error, sizeof first_error, "%s", e);
    }
    if (!lib) {
        snprintf(why, why_size, "cannot load CUPTI (%s)", first_error);
        return 1;
    }
    if (rt_cupti_resolve(lib, name, why, why_size) != 0) {
        memset(&rt_cupti, 0, sizeof rt_cupti);
        dlclose(lib);
        return 1;
    }
    rt_cupti.lib = lib;
    rt_cupti.ready = true;
    return 0;
}

static int rt_cupti_begin(char *why, size_t why_size) {
    pthread_mutex_lock(&rt_cupti_mu);
    if (rt_cupti_load(why, why_size) != 0) {
        pthread_mutex_unlock(&rt_cupti_mu);
        return 1;
    }
    // Records that an earlier timing which failed may have left with CUPTI are flushed out.
    CUptiResult r = CUPTI_SUCCESS;
    if (rt_cupti.stale)
        r = rt_cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    rt_cupti_got_clear();
    if (r != CUPTI_SUCCESS) {
        pthread_mutex_unlock(&rt_cupti_mu);
        return rt_cupti_fail(why, why_size, "cuptiActivityFlushAll", r);
    }
    rt_cupti.stale = false;
    r = rt_cupti.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS) {
        pthread_mutex_unlock(&rt_cupti_mu);
        return rt_cupti_fail(why, why_size, "cuptiActivityEnable(CONCURRENT_KERNEL)", r);
    }
    return 0;
}

static int rt_cupti_cmp_correlation(const void *pa, const void *pb) {
    const rt_cupti_rec *a = pa, *b = pb;
    return (a->correlation > b->correlation) - (a->correlation < b->correlation);
}

// The n records in launch order, checked against the kernels launched.
static int rt_cupti_take(const char *const *symbols, int64_t n, uint64_t *start_ns,
                         uint64_t *end_ns, char *why, size_t why_size) {
    if (rt_cupti_got.read_result)
        return rt_cupti_fail(why, why_size, "cuptiActivityGetNextRecord",
                             (CUptiResult)rt_cupti_got.read_result);
    if (rt_cupti_got.oom) {
        snprintf(why, why_size, "out of memory for CUPTI's kernel records");
        return 1;
    }
    if (rt_cupti_got.dropped) {
        snprintf(why, why_size, "CUPTI dropped %zu records", rt_cupti_got.dropped);
        return 1;
    }
    if (rt_cupti_got.n != n) {
        snprintf(why, why_size, "CUPTI gave %lld kernel records for %lld launches",
                 (long long)rt_cupti_got.n, (long long)n);
        return 1;
    }
    qsort(rt_cupti_got.v, (size_t)n, sizeof *rt_cupti_got.v, rt_cupti_cmp_correlation);
    for (int64_t i = 0; i < n; i++) {
        const rt_cupti_rec *r = &rt_cupti_got.v[i];
        if (strcmp(r->name, symbols[i]) != 0) {
            snprintf(why, why_size, "CUPTI's kernel record %lld is of %s (expected %s)",
                     (long long)i, r->name, symbols[i]);
            return 1;
        }
        if (r->start_ns == 0 || r->end_ns < r->start_ns) {
            snprintf(why, why_size, "CUPTI's kernel record %lld of %s is incomplete (%llu to %llu)",
                     (long long)i, r->name, (unsigned long long)r->start_ns,
                     (unsigned long long)r->end_ns);
            return 1;
        }
        start_ns[i] = r->start_ns;
        end_ns[i] = r->end_ns;
    }
    return 0;
}

static int rt_cupti_end(const char *const *symbols, int64_t n, uint64_t *start_ns, uint64_t *end_ns,
                        char *why, size_t why_size) {
    // Every kernel was waited for: its record is complete, and a plain flush delivers it; a
    // forced flush also hands back the buffer CUPTI is still filling.
    CUptiResult r = rt_cupti.cuptiActivityFlushAll(0);
    int64_t got;
    pthread_mutex_lock(&rt_cupti_got_mu);
    got = rt_cupti_got.n;
    pthread_mutex_unlock(&rt_cupti_got_mu);
    if (r == CUPTI_SUCCESS && got < n)
        r = rt_cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    CUptiResult rd = rt_cupti.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    int st = 0;
    if (r != CUPTI_SUCCESS)
        st = rt_cupti_fail(why, why_size, "cuptiActivityFlushAll", r);
    else if (rd != CUPTI_SUCCESS)
        st = rt_cupti_fail(why, why_size, "cuptiActivityDisable(CONCURRENT_KERNEL)", rd);
    else if (n > 0) {
        pthread_mutex_lock(&rt_cupti_got_mu);
        st = rt_cupti_take(symbols, n, start_ns, end_ns, why, why_size);
        pthread_mutex_unlock(&rt_cupti_got_mu);
    }
    rt_cupti_got_clear();
    rt_cupti.stale = st != 0;
    pthread_mutex_unlock(&rt_cupti_mu);
    return st;
}

static const rt_gpu_kernel_timer rt_cupti_timer_ops = {
    .name = "CUPTI",
    .method = "CUPTI activity records (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)",
    .begin = rt_cupti_begin,
    .end = rt_cupti_end,
};

const rt_gpu_kernel_timer *rt_cupti_timer(void) {
    return &rt_cupti_timer_ops;
}

#else // !RT_WITH_CUPTI

const rt_gpu_kernel_timer *rt_cupti_timer(void) {
    return NULL;
}

#endif
