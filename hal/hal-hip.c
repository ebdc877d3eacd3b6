// hal-hip.c: the hip class of the HAL. Compiles HIP C++ in-process with hipRTC for the device's
// gfxNNN after checking it against amd_comgr's ISA list (hipRTC 5.2 aborts the process on an
// architecture its comgr does not know, so an unknown one is refused before compiling), and
// reads VGPRs, SGPRs, spills and LDS from the code object's metadata through amd_comgr. The HIP
// runtime is opened at run time with dlopen("libamdhip64.so.5"), and hal-gpu.c launches and
// times (hipEvents) through its calls (rt_gpu_driver_ops).
// Built with hipRTC when CMake finds it (RT_WITH_HIP); otherwise it reports "not built with HIP".
#include "hal-gpu-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(RT_WITH_HIP)

#include <amd_comgr.h>
#include <dlfcn.h>
#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>
#include <hip/hiprtc.h>
#include <pthread.h>

// ---------------------------------------------------------------------------------------------
// hipRTC and amd_comgr, opened at first use
// ---------------------------------------------------------------------------------------------

// Neither library is linked: amd_comgr carries a static copy of clang 15 on top of the shared
// libLLVM-15, and so does PoCL (libclang-cpp.so.15); loading both into one process registers
// clang's command-line options twice and LLVM aborts ("registered more than once"). Opening
// them only when a HIP kernel is compiled keeps every other process (OpenCL on PoCL included)
// free of them, and lets both backends refuse the combination instead of crashing.
#define RT_HIP_RTC_FNS(X)                                                                          \
    X(hiprtcCreateProgram)                                                                         \
    X(hiprtcDestroyProgram)                                                                        \
    X(hiprtcAddNameExpression)                                                                     \
    X(hiprtcCompileProgram)                                                                        \
    X(hiprtcGetProgramLogSize)                                                                     \
    X(hiprtcGetProgramLog)                                                                         \
    X(hiprtcGetLoweredName)                                                                        \
    X(hiprtcGetCodeSize)                                                                           \
    X(hiprtcGetCode)                                                                               \
    X(hiprtcGetErrorString)

#define RT_HIP_COMGR_FNS(X)                                                                        \
    X(amd_comgr_get_isa_count)                                                                     \
    X(amd_comgr_get_isa_name)                                                                      \
    X(amd_comgr_create_data)                                                                       \
    X(amd_comgr_set_data)                                                                          \
    X(amd_comgr_get_data_metadata)                                                                 \
    X(amd_comgr_metadata_lookup)                                                                   \
    X(amd_comgr_get_metadata_list_size)                                                            \
    X(amd_comgr_index_list_metadata)                                                               \
    X(amd_comgr_get_metadata_string)                                                               \
    X(amd_comgr_destroy_metadata)                                                                  \
    X(amd_comgr_release_data)

#define RT_HIP_FIELD(name) __typeof__(name) *name;
static struct {
    RT_HIP_RTC_FNS(RT_HIP_FIELD)
    RT_HIP_COMGR_FNS(RT_HIP_FIELD)
    bool ok;
    char why[384];
} rt_hip_lib;
static pthread_once_t rt_hip_lib_once = PTHREAD_ONCE_INIT;

static void *rt_hip_sym(void *lib, const char *lib_name, const char *sym) {
    void *p = lib ? dlsym(lib, sym) : NULL;
    if (!p && !rt_hip_lib.why[0])
        snprintf(rt_hip_lib.why, sizeof rt_hip_lib.why, "%s lacks %s", lib_name, sym);
    return p;
}

static void rt_hip_lib_load(void) {
    void *clang = dlopen("libclang-cpp.so.15", RTLD_LAZY | RTLD_NOLOAD);
    if (clang) {
        dlclose(clang);
        snprintf(rt_hip_lib.why, sizeof rt_hip_lib.why,
                 "hipRTC cannot be loaded into a process that has loaded libclang-cpp.so.15 "
                 "(PoCL): amd_comgr would register clang's options a second time and LLVM "
                 "would abort");
        return;
    }
    void *hip = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
    if (!hip) {
        const char *e = dlerror();
        snprintf(rt_hip_lib.why, sizeof rt_hip_lib.why, "no hipRTC (%s)",
                 e ? e : "libamdhip64.so.5");
        return;
    }
    void *comgr = dlopen("libamd_comgr.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!comgr) {
        const char *e = dlerror();
        snprintf(rt_hip_lib.why, sizeof rt_hip_lib.why, "no amd_comgr (%s)",
                 e ? e : "libamd_comgr.so.2");
        return;
    }
    void *p;
#define RT_HIP_LOAD_RTC(name)                                                                      \
    p = rt_hip_sym(hip, "libamdhip64.so.5", #name);                                                \
    memcpy(&rt_hip_lib.name, &p, sizeof p);
#define RT_HIP_LOAD_COMGR(name)                                                                    \
    p = rt_hip_sym(comgr, "libamd_comgr.so.2", #name);                                             \
    memcpy(&rt_hip_lib.name, &p, sizeof p);
    RT_HIP_RTC_FNS(RT_HIP_LOAD_RTC)
    RT_HIP_COMGR_FNS(RT_HIP_LOAD_COMGR)
    rt_hip_lib.ok = !rt_hip_lib.why[0]; // the libraries stay loaded for the process
}

static rt_status rt_hip_lib_ready(rt_err *err) {
    pthread_once(&rt_hip_lib_once, rt_hip_lib_load);
    if (!rt_hip_lib.ok)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "%s", rt_hip_lib.why);
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// The ISA list of amd_comgr
// ---------------------------------------------------------------------------------------------

#define RT_HIP_MAX_ISAS 128

static struct {
    int n;
    char name[RT_HIP_MAX_ISAS][24]; // "gfx906", "gfx90a" (processor part of the ISA name)
} rt_hip_isas;
static pthread_once_t rt_hip_isas_once = PTHREAD_ONCE_INIT;

// ISA names look like "amdgcn-amd-amdhsa--gfx90a" (possibly with ":sramecc+:xnack-").
static void rt_hip_isas_query(void) {
    size_t n = 0;
    if (rt_hip_lib.amd_comgr_get_isa_count(&n) != AMD_COMGR_STATUS_SUCCESS)
        n = 0;
    for (size_t i = 0; i < n && rt_hip_isas.n < RT_HIP_MAX_ISAS; i++) {
        const char *s = NULL;
        if (rt_hip_lib.amd_comgr_get_isa_name(i, &s) != AMD_COMGR_STATUS_SUCCESS || !s)
            continue;
        const char *p = strstr(s, "--");
        p = p ? p + 2 : s;
        size_t len = strcspn(p, ":");
        if (len == 0 || len >= sizeof rt_hip_isas.name[0])
            continue;
        bool dup = false;
        for (int k = 0; k < rt_hip_isas.n && !dup; k++)
            dup = strlen(rt_hip_isas.name[k]) == len && strncmp(rt_hip_isas.name[k], p, len) == 0;
        if (!dup) {
            memcpy(rt_hip_isas.name[rt_hip_isas.n], p, len);
            rt_hip_isas.name[rt_hip_isas.n][len] = '\0';
            rt_hip_isas.n++;
        }
    }
}

static rt_status rt_hip_check_arch(rt_arena *a, const rt_device *dev, rt_err *err) {
    RT_TRY(rt_hip_lib_ready(err));
    pthread_once(&rt_hip_isas_once, rt_hip_isas_query);
    for (int i = 0; i < rt_hip_isas.n; i++)
        if (strcmp(rt_hip_isas.name[i], dev->arch) == 0)
            return RT_OK;
    rt_buf list;
    rt_buf_init(&list, a);
    for (int i = 0; i < rt_hip_isas.n; i++)
        rt_buf_printf(&list, "%s%s", i ? ", " : "", rt_hip_isas.name[i]);
    return rt_fail(err, RT_ERR_BACKEND, dev->arch_loc,
                   "%s is not supported by hipRTC %d.%d (supported: %s)", dev->arch,
                   HIP_VERSION_MAJOR, HIP_VERSION_MINOR,
                   list.oom || !list.data ? "(out of memory)" : list.data);
}

// ---------------------------------------------------------------------------------------------
// hipRTC
// ---------------------------------------------------------------------------------------------

// hipRTC 5.2 is not documented as thread-safe: compiles are serialized.
static pthread_mutex_t rt_hip_compile_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *rt_hip_program_log(rt_arena *a, hiprtcProgram prog) {
    size_t n = 0;
    if (!prog || rt_hip_lib.hiprtcGetProgramLogSize(prog, &n) != HIPRTC_SUCCESS || n == 0)
        return "";
    char *log = rt_arena_alloc(a, n + 1);
    if (!log || rt_hip_lib.hiprtcGetProgramLog(prog, log) != HIPRTC_SUCCESS)
        return "";
    return log;
}

static rt_status rt_hip_rtc_fail(rt_arena *a, hiprtcProgram prog, const char *what, hiprtcResult r,
                                 const char *arch, rt_err *err) {
    return rt_gpu_compile_fail(a, what, arch, rt_hip_lib.hiprtcGetErrorString(r),
                               rt_hip_program_log(a, prog), err);
}

#define RT_HIPRTC(call, a, prog, arch, err)                                                        \
    do {                                                                                           \
        hiprtcResult rt_r_ = (call);                                                               \
        if (rt_r_ != HIPRTC_SUCCESS)                                                               \
            return rt_hip_rtc_fail((a), (prog), #call, rt_r_, (arch), (err));                      \
    } while (0)

static void rt_hip_program_release(void *h) {
    hiprtcProgram p = h;
    rt_hip_lib.hiprtcDestroyProgram(&p);
}

// ---------------------------------------------------------------------------------------------
// Code object metadata (amd_comgr)
// ---------------------------------------------------------------------------------------------

// The string value of key in a metadata map; false when absent.
static bool rt_hip_md_string(amd_comgr_metadata_node_t map, const char *key, char *buf,
                             size_t size) {
    amd_comgr_metadata_node_t v;
    if (rt_hip_lib.amd_comgr_metadata_lookup(map, key, &v) != AMD_COMGR_STATUS_SUCCESS)
        return false;
    size_t n = 0;
    bool ok = rt_hip_lib.amd_comgr_get_metadata_string(v, &n, NULL) == AMD_COMGR_STATUS_SUCCESS &&
              n > 0 && n <= size &&
              rt_hip_lib.amd_comgr_get_metadata_string(v, &n, buf) == AMD_COMGR_STATUS_SUCCESS;
    rt_hip_lib.amd_comgr_destroy_metadata(v);
    if (ok)
        buf[n - 1] = '\0';
    return ok;
}

static int64_t rt_hip_md_int(amd_comgr_metadata_node_t map, const char *key) {
    char buf[64];
    if (!rt_hip_md_string(map, key, buf, sizeof buf))
        return -1;
    char *end;
    long long v = strtoll(buf, &end, 10);
    return end == buf ? -1 : (int64_t)v;
}

// Reads the resources of kernel sym ("sym" or "sym.kd") from the code object.
static rt_status rt_hip_read_metadata(const rt_gpu_binary *bin, const char *sym,
                                      rt_gpu_resources *res, rt_err *err) {
    amd_comgr_data_t data;
    amd_comgr_metadata_node_t md, kernels;
    if (rt_hip_lib.amd_comgr_create_data(AMD_COMGR_DATA_KIND_EXECUTABLE, &data) !=
        AMD_COMGR_STATUS_SUCCESS)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "amd_comgr_create_data failed");
    rt_status st = RT_OK;
    if (rt_hip_lib.amd_comgr_set_data(data, bin->image_bytes, (const char *)bin->image) !=
            AMD_COMGR_STATUS_SUCCESS ||
        rt_hip_lib.amd_comgr_get_data_metadata(data, &md) != AMD_COMGR_STATUS_SUCCESS) {
        rt_hip_lib.amd_comgr_release_data(data);
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       "amd_comgr_get_data_metadata failed on the code object of %s", sym);
    }
    bool found = false;
    if (rt_hip_lib.amd_comgr_metadata_lookup(md, "amdhsa.kernels", &kernels) ==
        AMD_COMGR_STATUS_SUCCESS) {
        size_t n = 0;
        rt_hip_lib.amd_comgr_get_metadata_list_size(kernels, &n);
        for (size_t i = 0; i < n && !found; i++) {
            amd_comgr_metadata_node_t k;
            if (rt_hip_lib.amd_comgr_index_list_metadata(kernels, i, &k) !=
                AMD_COMGR_STATUS_SUCCESS)
                continue;
            char name[256];
            if (rt_hip_md_string(k, ".name", name, sizeof name) && strcmp(name, sym) == 0) {
                found = true;
                res->regs = (int32_t)rt_hip_md_int(k, ".vgpr_count");
                res->sregs = (int32_t)rt_hip_md_int(k, ".sgpr_count");
                int64_t vs = rt_hip_md_int(k, ".vgpr_spill_count");
                int64_t ss = rt_hip_md_int(k, ".sgpr_spill_count");
                res->spill_store_bytes = 4 * (rt_max64(vs, 0) + rt_max64(ss, 0));
                res->spill_load_bytes = res->spill_store_bytes;
                res->smem_bytes = rt_hip_md_int(k, ".group_segment_fixed_size");
                res->stack_frame_bytes = rt_hip_md_int(k, ".private_segment_fixed_size");
                res->max_threads_per_block = (int32_t)rt_hip_md_int(k, ".max_flat_workgroup_size");
            }
            rt_hip_lib.amd_comgr_destroy_metadata(k);
        }
        rt_hip_lib.amd_comgr_destroy_metadata(kernels);
    }
    rt_hip_lib.amd_comgr_destroy_metadata(md);
    rt_hip_lib.amd_comgr_release_data(data);
    if (!found)
        st = rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                     "kernel %s not found in the code object's amdhsa.kernels metadata", sym);
    return st;
}

static rt_status rt_gpu_hip_compile(rt_arena *a, const rt_device *dev, const char *source,
                                    const char *kernel_name, const rt_gpu_compile_options *opts,
                                    rt_gpu_binary *bin, rt_err *err) {
    RT_TRY(rt_hip_check_arch(a, dev, err)); // before any hipRTC call: unknown archs abort
    const char *arch = dev->arch;
    snprintf(bin->compiled_arch, sizeof bin->compiled_arch, "%s", arch);
    int32_t n_opts = 0;
    const char **o = rt_arena_calloc(a, (size_t)(4 + rt_max64(opts->n_extra, 0)), sizeof *o);
    if (!o)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    o[n_opts++] = rt_arena_printf(a, "--offload-arch=%s", arch);
    o[n_opts++] = "-O3";
    for (int32_t i = 0; i < opts->n_extra; i++)
        o[n_opts++] = opts->extra[i];
    RT_TRY(rt_gpu_join_options(a, o, n_opts, &bin->options, err));
    const char *file = rt_arena_printf(a, "%s.hip", kernel_name);
    if (!file)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");

    pthread_mutex_lock(&rt_hip_compile_mu);
    rt_status st = RT_OK;
    hiprtcProgram prog = NULL;
    hiprtcResult r = rt_hip_lib.hiprtcCreateProgram(&prog, source, file, 0, NULL, NULL);
    if (r != HIPRTC_SUCCESS) {
        st = rt_hip_rtc_fail(a, NULL, "hiprtcCreateProgram", r, arch, err);
    } else if (rt_arena_defer(a, rt_hip_program_release, prog) != RT_OK) {
        rt_hip_program_release(prog);
        st = rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    }
    if (st == RT_OK &&
        (r = rt_hip_lib.hiprtcAddNameExpression(prog, kernel_name)) != HIPRTC_SUCCESS)
        st = rt_hip_rtc_fail(a, prog, "hiprtcAddNameExpression", r, arch, err);
    if (st == RT_OK && (r = rt_hip_lib.hiprtcCompileProgram(prog, n_opts, o)) != HIPRTC_SUCCESS)
        st = rt_hip_rtc_fail(a, prog, "hiprtcCompileProgram", r, arch, err);
    pthread_mutex_unlock(&rt_hip_compile_mu);
    RT_TRY(st);

    bin->log = rt_hip_program_log(a, prog);
    const char *lowered = NULL;
    RT_HIPRTC(rt_hip_lib.hiprtcGetLoweredName(prog, kernel_name, &lowered), a, prog, arch, err);
    bin->symbol = rt_arena_strdup(a, lowered);
    size_t n = 0;
    RT_HIPRTC(rt_hip_lib.hiprtcGetCodeSize(prog, &n), a, prog, arch, err);
    uint8_t *img = rt_arena_alloc(a, rt_at_least_one(n));
    if (!img || !bin->symbol)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    RT_HIPRTC(rt_hip_lib.hiprtcGetCode(prog, (char *)img), a, prog, arch, err);
    bin->image = img;
    bin->image_bytes = n;
    return rt_hip_read_metadata(bin, bin->symbol, &bin->res, err);
}

// ---------------------------------------------------------------------------------------------
// Runtime (libamdhip64.so.5, opened at run time)
// ---------------------------------------------------------------------------------------------

typedef struct rt_hip_api {
    hipError_t (*init)(unsigned);
    hipError_t (*get_device_count)(int *);
    hipError_t (*set_device)(int);
    hipError_t (*get_device_properties)(hipDeviceProp_t *, int);
    hipError_t (*module_load_data)(hipModule_t *, const void *);
    hipError_t (*module_unload)(hipModule_t);
    hipError_t (*module_get_function)(hipFunction_t *, hipModule_t, const char *);
    hipError_t (*malloc_)(void **, size_t);
    hipError_t (*free_)(void *);
    hipError_t (*memcpy_htod)(hipDeviceptr_t, void *, size_t);
    hipError_t (*memcpy_dtoh)(void *, hipDeviceptr_t, size_t);
    hipError_t (*module_launch_kernel)(hipFunction_t, unsigned, unsigned, unsigned, unsigned,
                                       unsigned, unsigned, unsigned, hipStream_t, void **, void **);
    hipError_t (*device_synchronize)(void);
    hipError_t (*event_create)(hipEvent_t *);
    hipError_t (*event_record)(hipEvent_t, hipStream_t);
    hipError_t (*event_synchronize)(hipEvent_t);
    hipError_t (*event_elapsed_time)(float *, hipEvent_t, hipEvent_t);
    hipError_t (*event_destroy)(hipEvent_t);
    const char *(*get_error_name)(hipError_t);
} rt_hip_api;

// clang-format off
static const struct {
    const char *sym;
    size_t offset;
} rt_hip_entry[] = {
    {"hipInit",                offsetof(rt_hip_api, init)},
    {"hipGetDeviceCount",      offsetof(rt_hip_api, get_device_count)},
    {"hipSetDevice",           offsetof(rt_hip_api, set_device)},
    {"hipGetDeviceProperties", offsetof(rt_hip_api, get_device_properties)},
    {"hipModuleLoadData",      offsetof(rt_hip_api, module_load_data)},
    {"hipModuleUnload",        offsetof(rt_hip_api, module_unload)},
    {"hipModuleGetFunction",   offsetof(rt_hip_api, module_get_function)},
    {"hipMalloc",              offsetof(rt_hip_api, malloc_)},
    {"hipFree",                offsetof(rt_hip_api, free_)},
    {"hipMemcpyHtoD",          offsetof(rt_hip_api, memcpy_htod)},
    {"hipMemcpyDtoH",          offsetof(rt_hip_api, memcpy_dtoh)},
    {"hipModuleLaunchKernel",  offsetof(rt_hip_api, module_launch_kernel)},
    {"hipDeviceSynchronize",   offsetof(rt_hip_api, device_synchronize)},
    {"hipEventCreate",         offsetof(rt_hip_api, event_create)},
    {"hipEventRecord",         offsetof(rt_hip_api, event_record)},
    {"hipEventSynchronize",    offsetof(rt_hip_api, event_synchronize)},
    {"hipEventElapsedTime",    offsetof(rt_hip_api, event_elapsed_time)},
    {"hipEventDestroy",        offsetof(rt_hip_api, event_destroy)},
    {"hipGetErrorName",        offsetof(rt_hip_api, get_error_name)},
};
// clang-format on

typedef struct rt_hip_rt {
    void *lib;
    rt_hip_api api;
    rt_gpu_driver drv; // what hal-gpu.c launches on; ctx: this
} rt_hip_rt;

// rt_gpu_driver_ops over the dlopen'd entry points; ctx is the rt_hip_rt.
_Static_assert(hipSuccess == 0, "rt_gpu_driver_ops take 0 for success");
_Static_assert(sizeof(void *) == sizeof(rt_gpu_devptr),
               "a buffer parameter is the bytes of its device pointer");

static int rt_hip_op_module_load(void *ctx, const void *image, void **out) {
    rt_hip_rt *h = ctx;
    hipModule_t m = NULL;
    hipError_t r = h->api.module_load_data(&m, image);
    *out = m;
    return (int)r;
}

static int rt_hip_op_module_function(void *ctx, void *module, const char *symbol, void **out) {
    rt_hip_rt *h = ctx;
    hipFunction_t f = NULL;
    hipError_t r = h->api.module_get_function(&f, module, symbol);
    *out = f;
    return (int)r;
}

static void rt_hip_op_module_unload(void *ctx, void *module) {
    rt_hip_rt *h = ctx;
    h->api.module_unload(module);
}

static int rt_hip_op_alloc(void *ctx, size_t bytes, rt_gpu_devptr *out) {
    rt_hip_rt *h = ctx;
    void *p = NULL;
    hipError_t r = h->api.malloc_(&p, bytes);
    *out = (rt_gpu_devptr)(uintptr_t)p;
    return (int)r;
}

static void rt_hip_op_free(void *ctx, rt_gpu_devptr p) {
    rt_hip_rt *h = ctx;
    h->api.free_((void *)(uintptr_t)p);
}

// hipMemcpyHtoD takes a non-const source (HIP 5.2) but only reads it.
static int rt_hip_op_htod(void *ctx, rt_gpu_devptr dst, const void *src, size_t bytes) {
    rt_hip_rt *h = ctx;
    return (int)h->api.memcpy_htod((hipDeviceptr_t)(uintptr_t)dst, (void *)src, bytes);
}

static int rt_hip_op_dtoh(void *ctx, void *dst, rt_gpu_devptr src, size_t bytes) {
    rt_hip_rt *h = ctx;
    return (int)h->api.memcpy_dtoh(dst, (hipDeviceptr_t)(uintptr_t)src, bytes);
}

static int rt_hip_op_launch(void *ctx, void *fn, const unsigned grid[3], const unsigned block[3],
                            unsigned dyn_smem_bytes, void **params) {
    rt_hip_rt *h = ctx;
    return (int)h->api.module_launch_kernel(fn, grid[0], grid[1], grid[2], block[0], block[1],
                                            block[2], dyn_smem_bytes, NULL, params, NULL);
}

static int rt_hip_op_sync(void *ctx) {
    rt_hip_rt *h = ctx;
    return (int)h->api.device_synchronize();
}

static int rt_hip_op_event_create(void *ctx, void **out) {
    rt_hip_rt *h = ctx;
    hipEvent_t e = NULL;
    hipError_t r = h->api.event_create(&e);
    *out = e;
    return (int)r;
}

static int rt_hip_op_event_record(void *ctx, void *ev) {
    rt_hip_rt *h = ctx;
    return (int)h->api.event_record(ev, NULL);
}

static int rt_hip_op_event_synchronize(void *ctx, void *ev) {
    rt_hip_rt *h = ctx;
    return (int)h->api.event_synchronize(ev);
}

static int rt_hip_op_event_elapsed_ms(void *ctx, void *start, void *end, float *out_ms) {
    rt_hip_rt *h = ctx;
    return (int)h->api.event_elapsed_time(out_ms, start, end);
}

static void rt_hip_op_event_destroy(void *ctx, void *ev) {
    rt_hip_rt *h = ctx;
    h->api.event_destroy(ev);
}

static const char *rt_hip_op_error_name(void *ctx, int result) {
    rt_hip_rt *h = ctx;
    return h->api.get_error_name ? h->api.get_error_name((hipError_t)result) : "hip error";
}

// No bind (the HIP runtime keeps the device of hipSetDevice), no dynamic shared memory limit to
// raise, no error text beyond the name.
static const rt_gpu_driver_ops rt_hip_driver_ops = {
    .class_name = "hip",
    .image_name = "code object",
    .load_call = "hipModuleLoadData",
    .function_call = "hipModuleGetFunction",
    .upload_calls = "hipMalloc/hipMemcpyHtoD",
    .launch_call = "hipModuleLaunchKernel",
    .sync_call = "hipDeviceSynchronize",
    .timed_calls = "timed launch (hipEventRecord/hipModuleLaunchKernel)",
    .event_timer = "HIP events (hipEventElapsedTime)",
    .download_call = "hipMemcpyDtoH",
    .module_load = rt_hip_op_module_load,
    .module_function = rt_hip_op_module_function,
    .module_unload = rt_hip_op_module_unload,
    .alloc = rt_hip_op_alloc,
    .free = rt_hip_op_free,
    .htod = rt_hip_op_htod,
    .dtoh = rt_hip_op_dtoh,
    .launch = rt_hip_op_launch,
    .sync = rt_hip_op_sync,
    .event_create = rt_hip_op_event_create,
    .event_record = rt_hip_op_event_record,
    .event_synchronize = rt_hip_op_event_synchronize,
    .event_elapsed_ms = rt_hip_op_event_elapsed_ms,
    .event_destroy = rt_hip_op_event_destroy,
    .error_name = rt_hip_op_error_name,
};

static rt_status rt_hip_runtime_fail(rt_hip_rt *h, const char *what, hipError_t r, rt_err *err) {
    return rt_gpu_driver_fail(&rt_hip_driver_ops, h, what, (int)r, err);
}

#define RT_HIP(h, call, err)                                                                       \
    do {                                                                                           \
        hipError_t rt_r_ = (h)->api.call;                                                          \
        if (rt_r_ != hipSuccess)                                                                   \
            return rt_hip_runtime_fail((h), #call, rt_r_, (err));                                  \
    } while (0)

static void rt_hip_close(void *p) {
    rt_hip_rt *h = p;
    rt_gpu_driver_unload_all(&h->drv);
    if (h->lib)
        dlclose(h->lib);
}

static rt_status rt_gpu_hip_open(rt_gpu_runtime *rt, rt_err *err) {
    rt_hip_rt *h;
    RT_ALLOC(rt->arena, h, 1, err);
    h->drv = (rt_gpu_driver){.ops = &rt_hip_driver_ops, .ctx = h};
    const char *env = getenv("RTGEN_LIBAMDHIP64");
    const char *lib = env && env[0] ? env : "libamdhip64.so.5";
    h->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h->lib) {
        const char *why = dlerror();
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, RT_GPU_ABSENT_PREFIX "no HIP runtime (%s)",
                       why ? why : lib);
    }
    if (rt_arena_defer(rt->arena, rt_hip_close, h) != RT_OK) {
        dlclose(h->lib);
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    }
    for (size_t i = 0; i < sizeof rt_hip_entry / sizeof rt_hip_entry[0]; i++) {
        void *p = dlsym(h->lib, rt_hip_entry[i].sym);
        if (!p)
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "the HIP runtime %s lacks %s", lib,
                           rt_hip_entry[i].sym);
        memcpy((char *)&h->api + rt_hip_entry[i].offset, &p, sizeof p);
    }
    hipError_t r = h->api.init(0);
    int count = 0;
    hipError_t rc = h->api.get_device_count(&count);
    if (rc != hipSuccess || count <= 0)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       RT_GPU_ABSENT_PREFIX "no HIP device (hipInit returned %s, "
                                            "hipGetDeviceCount returned %s)",
                       h->api.get_error_name(r), h->api.get_error_name(rc));
    if (r != hipSuccess)
        return rt_hip_runtime_fail(h, "hipInit(0)", r, err);
    RT_HIP(h, set_device(0), err);
    hipDeviceProp_t prop;
    memset(&prop, 0, sizeof prop);
    RT_HIP(h, get_device_properties(&prop, 0), err);
    snprintf(rt->device_name, sizeof rt->device_name, "%.127s", prop.name);
    char live[sizeof prop.gcnArchName + 1];
    snprintf(live, sizeof live, "%s", prop.gcnArchName);
    live[strcspn(live, ":")] = '\0'; // "gfx90a:sramecc+:xnack-" -> "gfx90a"
    if (strcmp(live, rt->dev->arch) != 0)
        return rt_fail(err, RT_ERR_DEVICE, rt->dev->arch_loc,
                       "arch does not match the GPU present (expected %s for %s, got %s)", live,
                       rt->device_name, rt->dev->arch);
    rt->impl = h;
    rt->driver = &h->drv;
    return RT_OK;
}

#else // !RT_WITH_HIP

static rt_status rt_gpu_hip_compile(rt_arena *a, const rt_device *dev, const char *source,
                                    const char *kernel_name, const rt_gpu_compile_options *opts,
                                    rt_gpu_binary *bin, rt_err *err) {
    (void)a, (void)dev, (void)source, (void)kernel_name, (void)opts, (void)bin;
    return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                   "not built with HIP (hipRTC/amd_comgr were not found when rtgen was "
                   "configured)");
}

static rt_status rt_gpu_hip_open(rt_gpu_runtime *rt, rt_err *err) {
    (void)rt;
    return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                   RT_GPU_ABSENT_PREFIX "not built with HIP (hipRTC was not found when rtgen was "
                                        "configured)");
}

#endif

// hip: gfx followed by 2-4 digits and an optional lower-case letter, 3-5 characters in all
// (gfx906, gfx90a, gfx1030, gfx940).
static rt_status rt_hal_hip_validate(const rt_device *dev, rt_err *err) {
    const char *a = dev->arch;
    size_t n = strlen(a), digits = 0;
    bool ok = n > 3 && strncmp(a, "gfx", 3) == 0;
    for (size_t i = 3; ok && i < n && rt_hal_is_digit(a[i]); i++)
        digits++;
    if (ok)
        ok = digits >= 2 && digits <= 4 && n - 3 >= 3 &&
             (3 + digits == n || (3 + digits + 1 == n && rt_hal_is_lower(a[n - 1])));
    if (!ok)
        return rt_fail(err, RT_ERR_DEVICE, dev->arch_loc,
                       "bad arch for class hip (expected gfxNNN, got \"%s\")", a);
    return RT_OK;
}

const struct rt_hal_ops rt_hal_hip_ops = {
    .class_name = "hip",
    .validate = rt_hal_hip_validate,
    .compile = rt_gpu_hip_compile,
    .load = rt_gpu_hip_open,
    .run = rt_gpu_driver_exec,
    .time = rt_gpu_driver_exec,
};
