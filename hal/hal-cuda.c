// hal-cuda.c: the cuda class of the HAL. Compiles CUDA C in-process with NVRTC to a CUBIN for
// the device's sm_XY (or, when this NVRTC lacks it, the nearest supported arch, with a note),
// and reads registers, spills, shared memory and barriers from the ptxas -v report in the log.
// NVRTC is opened with dlopen at the first CUDA compile, and the driver with
// dlopen("libcuda.so.1") when kernels run — neither is linked. hal-gpu.c gets the driver calls
// (rt_gpu_driver_ops) with which it loads, launches and times kernels: with CUPTI's kernel
// records (hal-cupti.c) where CUPTI works, else with cuEvents. Without the driver or a GPU it
// reports "no GPU".
// Built when CMake finds the CUDA toolkit's NVRTC (RT_WITH_CUDA: its headers and the soname to
// open); otherwise every entry point reports "not built with CUDA".
#include "hal-gpu-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(RT_WITH_CUDA)

#include <cuda.h>
#include <dlfcn.h>
#include <nvrtc.h>
#include <pthread.h>

#ifndef RT_CUDA_INCLUDE_DIR
#define RT_CUDA_INCLUDE_DIR "/usr/local/cuda/include"
#endif
#ifndef RT_NVRTC_SONAME
#define RT_NVRTC_SONAME "libnvrtc.so"
#endif
#ifndef RT_NVRTC_PATH
#define RT_NVRTC_PATH RT_NVRTC_SONAME
#endif

// ---------------------------------------------------------------------------------------------
// NVRTC, opened at the first CUDA compile
// ---------------------------------------------------------------------------------------------

// libnvrtc is not linked: it is a 100 MB library whose loading and relocation cost every rtgen
// run about 7 ms at start, though only CUDA devices use it. The entry points below are resolved
// into rt_nvrtc once, from $RTGEN_LIBNVRTC when set, else from the first library that opens of
// the toolkit's soname found at configure time (RT_NVRTC_SONAME, through the loader's path),
// the same file in the toolkit's directory (RT_NVRTC_PATH, for toolkits outside the loader's
// path), and the sonames of other NVRTC releases whose C API these calls share.
#define RT_NVRTC_FNS(X)                                                                            \
    X(nvrtcVersion)                                                                                \
    X(nvrtcGetNumSupportedArchs)                                                                   \
    X(nvrtcGetSupportedArchs)                                                                      \
    X(nvrtcCreateProgram)                                                                          \
    X(nvrtcDestroyProgram)                                                                         \
    X(nvrtcAddNameExpression)                                                                      \
    X(nvrtcCompileProgram)                                                                         \
    X(nvrtcGetProgramLogSize)                                                                      \
    X(nvrtcGetProgramLog)                                                                          \
    X(nvrtcGetLoweredName)                                                                         \
    X(nvrtcGetCUBINSize)                                                                           \
    X(nvrtcGetCUBIN)                                                                               \
    X(nvrtcGetErrorString)

#define RT_NVRTC_FIELD(name) __typeof__(name) *name;
static struct {
    RT_NVRTC_FNS(RT_NVRTC_FIELD)
    bool ok;
    char why[768];
} rt_nvrtc;
static pthread_once_t rt_nvrtc_once = PTHREAD_ONCE_INIT;

// Fills rt_nvrtc from lib (opened as name), which stays loaded for the process.
static void rt_nvrtc_resolve(void *lib, const char *name) {
    void *p;
#define RT_NVRTC_RESOLVE(fn)                                                                       \
    p = dlsym(lib, #fn);                                                                           \
    if (!p && !rt_nvrtc.why[0])                                                                    \
        snprintf(rt_nvrtc.why, sizeof rt_nvrtc.why, "the NVRTC library %s lacks %s", name, #fn);   \
    memcpy(&rt_nvrtc.fn, &p, sizeof p);
    RT_NVRTC_FNS(RT_NVRTC_RESOLVE)
#undef RT_NVRTC_RESOLVE
    rt_nvrtc.ok = !rt_nvrtc.why[0];
}

static void rt_nvrtc_load(void) {
    static const char *const names[] = {RT_NVRTC_SONAME,  RT_NVRTC_PATH,      "libnvrtc.so.13",
                                        "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"};
    const char *env = getenv("RTGEN_LIBNVRTC");
    if (env && env[0]) {
        void *lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char *e = dlerror();
            snprintf(rt_nvrtc.why, sizeof rt_nvrtc.why,
                     "cannot load NVRTC from RTGEN_LIBNVRTC (%s): set it to libnvrtc's path",
                     e ? e : env);
            return;
        }
        rt_nvrtc_resolve(lib, env);
        return;
    }
    // The first error says why the expected soname failed; the others only name what was tried.
    char first_error[256] = "", tried[256] = "";
    size_t len = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        bool dup = false;
        for (size_t k = 0; k < i && !dup; k++)
            dup = strcmp(names[k], names[i]) == 0;
        if (dup)
            continue;
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib) {
            rt_nvrtc_resolve(lib, names[i]);
            return;
        }
        const char *e = dlerror();
        if (i == 0)
            snprintf(first_error, sizeof first_error, "%s", e ? e : names[i]);
        else if (len < sizeof tried)
            len += (size_t)snprintf(tried + len, sizeof tried - len, ", %s", names[i]);
    }
    snprintf(rt_nvrtc.why, sizeof rt_nvrtc.why,
             "cannot load NVRTC (%s; also tried%s): install the CUDA toolkit's NVRTC or set "
             "RTGEN_LIBNVRTC to its path",
             first_error, tried[0] ? tried + 1 : " nothing else");
}

// Opens NVRTC on first use; RT_ERR_BACKEND with what was tried when it cannot.
static rt_status rt_nvrtc_ready(rt_err *err) {
    pthread_once(&rt_nvrtc_once, rt_nvrtc_load);
    if (!rt_nvrtc.ok)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "%s", rt_nvrtc.why);
    return RT_OK;
}

static const char *rt_cuda_program_log(rt_arena *a, nvrtcProgram prog) {
    size_t n = 0;
    if (!prog || rt_nvrtc.nvrtcGetProgramLogSize(prog, &n) != NVRTC_SUCCESS || n == 0)
        return "";
    char *log = rt_arena_alloc(a, n + 1);
    if (!log || rt_nvrtc.nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
        return "";
    return log;
}

// Records a failed NVRTC call: the call's text, NVRTC's message, the first error line of the log
// in the message and the whole log in err->log.
static rt_status rt_cuda_nvrtc_fail(rt_arena *a, nvrtcProgram prog, const char *what, nvrtcResult r,
                                    const char *arch, rt_err *err) {
    return rt_gpu_compile_fail(a, what, arch, rt_nvrtc.nvrtcGetErrorString(r),
                               rt_cuda_program_log(a, prog), err);
}

// RT_NVRTC(nvrtcCompileProgram, (prog, n, o), ...) calls the loaded entry point and, on failure,
// reports the call as written ("nvrtcCompileProgram(prog, n, o)").
#define RT_NVRTC(fn, args, a, prog, arch, err)                                                     \
    do {                                                                                           \
        nvrtcResult rt_r_ = rt_nvrtc.fn args;                                                      \
        if (rt_r_ != NVRTC_SUCCESS)                                                                \
            return rt_cuda_nvrtc_fail((a), (prog), #fn #args, rt_r_, (arch), (err));               \
    } while (0)

// The architectures this NVRTC can compile for, ascending (queried once).
static struct {
    int n;
    int arch[64];
    int major, minor;
} rt_cuda_archs;
static pthread_once_t rt_cuda_archs_once = PTHREAD_ONCE_INIT;

static void rt_cuda_archs_query(void) {
    int n = 0;
    if (rt_nvrtc.nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0 || n > 64)
        n = 0;
    if (n > 0 && rt_nvrtc.nvrtcGetSupportedArchs(rt_cuda_archs.arch) != NVRTC_SUCCESS)
        n = 0;
    rt_cuda_archs.n = n;
    if (rt_nvrtc.nvrtcVersion(&rt_cuda_archs.major, &rt_cuda_archs.minor) != NVRTC_SUCCESS)
        rt_cuda_archs.major = rt_cuda_archs.minor = 0;
}

// Parses "sm_90a" into 90 and the suffix "a". False when it is not sm_<digits>[letter].
static bool rt_cuda_parse_arch(const char *arch, int *num, const char **suffix) {
    if (strncmp(arch, "sm_", 3) != 0)
        return false;
    char *end;
    long v = strtol(arch + 3, &end, 10);
    if (end == arch + 3 || v <= 0 || v > 10000)
        return false;
    *num = (int)v;
    *suffix = end;
    return strlen(end) <= 1;
}

// Picks the arch to compile for: dev->arch when supported; otherwise the nearest supported arch
// below it (or the lowest, for archs older than every supported one), with a note saying so.
static rt_status rt_cuda_pick_arch(rt_arena *a, const rt_device *dev, rt_gpu_binary *bin,
                                   rt_err *err) {
    int num;
    const char *suffix;
    if (!rt_cuda_parse_arch(dev->arch, &num, &suffix))
        return rt_fail(err, RT_ERR_DEVICE, dev->arch_loc,
                       "bad arch for class cuda (expected sm_NN, got \"%s\")", dev->arch);
    pthread_once(&rt_cuda_archs_once, rt_cuda_archs_query);
    if (rt_cuda_archs.n == 0)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       "nvrtcGetSupportedArchs failed: NVRTC reports no architecture");
    int pick = -1;
    for (int i = 0; i < rt_cuda_archs.n; i++) {
        if (rt_cuda_archs.arch[i] == num) {
            snprintf(bin->compiled_arch, sizeof bin->compiled_arch, "%s", dev->arch);
            return RT_OK;
        }
        if (rt_cuda_archs.arch[i] < num)
            pick = rt_cuda_archs.arch[i];
    }
    if (pick < 0)
        pick = rt_cuda_archs.arch[0];
    snprintf(bin->compiled_arch, sizeof bin->compiled_arch, "sm_%d", pick);
    bin->note =
        rt_arena_printf(a, "%s not supported by NVRTC %d.%d; compile-checked for %s", dev->arch,
                        rt_cuda_archs.major, rt_cuda_archs.minor, bin->compiled_arch);
    if (!bin->note)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    return RT_OK;
}

static void rt_cuda_program_release(void *h) {
    nvrtcProgram p = h;
    rt_nvrtc.nvrtcDestroyProgram(&p);
}

// The integer right before `phrase` in [s, end), e.g. 40 in "Used 40 registers". -1: absent.
static int64_t rt_cuda_num_before(const char *s, const char *end, const char *phrase) {
    size_t n = strlen(phrase);
    for (const char *p = s; p + n <= end; p++) {
        if (memcmp(p, phrase, n) != 0)
            continue;
        const char *q = p;
        while (q > s && q[-1] == ' ')
            q--;
        const char *d = q;
        while (d > s && d[-1] >= '0' && d[-1] <= '9')
            d--;
        if (d == q)
            continue;
        return strtoll(d, NULL, 10);
    }
    return -1;
}

// Reads the ptxas -v report of entry function sym from an NVRTC log:
//   ptxas info    : Compiling entry function 'sym' for 'sm_80'
//   ptxas info    : Function properties for sym
//       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//   ptxas info    : Used 40 registers, used 1 barriers, 4096 bytes smem, 392 bytes cmem[0]
// Returns false when the log has no report for sym.
static bool rt_cuda_parse_ptxas(const char *log, const char *sym, rt_gpu_resources *res) {
    static const char marker[] = "Compiling entry function '";
    const char *s = NULL;
    for (const char *p = strstr(log, marker); p; p = strstr(p + 1, marker)) {
        const char *name = p + sizeof marker - 1;
        size_t n = strlen(sym);
        if (strncmp(name, sym, n) == 0 && name[n] == '\'') {
            s = name + n;
            break;
        }
    }
    if (!s)
        return false;
    const char *end = strstr(s, marker);
    if (!end)
        end = s + strlen(s);
    int64_t regs = rt_cuda_num_before(s, end, " registers");
    if (regs < 0)
        return false;
    res->regs = (int32_t)regs;
    res->spill_store_bytes = rt_max64(rt_cuda_num_before(s, end, " bytes spill stores"), 0);
    res->spill_load_bytes = rt_max64(rt_cuda_num_before(s, end, " bytes spill loads"), 0);
    res->stack_frame_bytes = rt_max64(rt_cuda_num_before(s, end, " bytes stack frame"), 0);
    res->smem_bytes = rt_max64(rt_cuda_num_before(s, end, " bytes smem"), 0);
    res->barriers = (int32_t)rt_max64(rt_cuda_num_before(s, end, " barriers"), 0);
    return true;
}

static rt_status rt_gpu_cuda_compile(rt_arena *a, const rt_device *dev, const char *source,
                                     const char *kernel_name, const rt_gpu_compile_options *opts,
                                     rt_gpu_binary *bin, rt_err *err) {
    RT_TRY(rt_nvrtc_ready(err));
    RT_TRY(rt_cuda_pick_arch(a, dev, bin, err));
    const char *arch = bin->compiled_arch;
    int32_t n_opts = 0;
    const char **o = rt_arena_calloc(a, (size_t)(9 + rt_max64(opts->n_extra, 0)), sizeof *o);
    if (!o)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    o[n_opts++] = rt_arena_printf(a, "--gpu-architecture=%s", arch);
    o[n_opts++] = "--ptxas-options=-v";
    // NVRTC 12.9 and later keep compiled cubins in the driver's compute cache (with a driver
    // present) and answer a repeated compile from it without running ptxas, so the log has no
    // resource report: the second rtgen run of the same op on a GPU machine failed every
    // candidate that way (H200, CUDA 13.0). rtgen reads registers and spills from every compile.
    if (rt_cuda_archs.major > 12 || (rt_cuda_archs.major == 12 && rt_cuda_archs.minor >= 9))
        o[n_opts++] = "--no-cache";
    o[n_opts++] = "-I" RT_CUDA_INCLUDE_DIR;
    o[n_opts++] = "-default-device";
    o[n_opts++] = "--std=c++17";
    if (opts->max_regs > 0)
        o[n_opts++] = rt_arena_printf(a, "--maxrregcount=%d", (int)opts->max_regs);
    for (int32_t i = 0; i < opts->n_extra; i++)
        o[n_opts++] = opts->extra[i];
    RT_TRY(rt_gpu_join_options(a, o, n_opts, &bin->options, err));

    const char *file = rt_arena_printf(a, "%s.cu", kernel_name);
    nvrtcProgram prog = NULL;
    RT_NVRTC(nvrtcCreateProgram, (&prog, source, file, 0, NULL, NULL), a, NULL, arch, err);
    if (rt_arena_defer(a, rt_cuda_program_release, prog) != RT_OK) {
        rt_cuda_program_release(prog);
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    }
    RT_NVRTC(nvrtcAddNameExpression, (prog, kernel_name), a, prog, arch, err);
    RT_NVRTC(nvrtcCompileProgram, (prog, n_opts, o), a, prog, arch, err);
    bin->log = rt_cuda_program_log(a, prog);
    const char *lowered = NULL;
    RT_NVRTC(nvrtcGetLoweredName, (prog, kernel_name, &lowered), a, prog, arch, err);
    bin->symbol = rt_arena_strdup(a, lowered);
    size_t n = 0;
    RT_NVRTC(nvrtcGetCUBINSize, (prog, &n), a, prog, arch, err);
    uint8_t *img = rt_arena_alloc(a, rt_at_least_one(n));
    if (!img || !bin->symbol)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    RT_NVRTC(nvrtcGetCUBIN, (prog, (char *)img), a, prog, arch, err);
    bin->image = img;
    bin->image_bytes = n;
    if (!rt_cuda_parse_ptxas(bin->log, bin->symbol, &bin->res)) {
        rt_status st = rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                               "no ptxas resource report for %s in the NVRTC log (expected "
                               "\"Used N registers\")",
                               bin->symbol);
        err->log = bin->log;
        return st;
    }
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Driver (libcuda.so.1, opened at run time)
// ---------------------------------------------------------------------------------------------

typedef struct rt_cuda_api {
    CUresult (*init)(unsigned);
    CUresult (*get_proc_address)(const char *, void **, int, cuuint64_t,
                                 CUdriverProcAddressQueryResult *);
    CUresult (*driver_get_version)(int *);
    CUresult (*device_get_count)(int *);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*device_get_name)(char *, int, CUdevice);
    CUresult (*device_get_attribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*primary_ctx_retain)(CUcontext *, CUdevice);
    CUresult (*primary_ctx_release)(CUdevice);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*ctx_synchronize)(void);
    CUresult (*module_load_data)(CUmodule *, const void *);
    CUresult (*module_unload)(CUmodule);
    CUresult (*module_get_function)(CUfunction *, CUmodule, const char *);
    CUresult (*func_set_attribute)(CUfunction, CUfunction_attribute, int);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*memcpy_htod)(CUdeviceptr, const void *, size_t);
    CUresult (*memcpy_dtoh)(void *, CUdeviceptr, size_t);
    CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);
    CUresult (*event_create)(CUevent *, unsigned);
    CUresult (*event_record)(CUevent, CUstream);
    CUresult (*event_synchronize)(CUevent);
    CUresult (*event_elapsed_time)(float *, CUevent, CUevent);
    CUresult (*event_destroy)(CUevent);
    CUresult (*get_error_name)(CUresult, const char **);
    CUresult (*get_error_string)(CUresult, const char **);
} rt_cuda_api;

// Entry points resolved after cuInit: the name for cuGetProcAddress_v2 (CUDA 12.0 ABI), and the
// versioned symbol to dlsym when the driver predates cuGetProcAddress_v2.
#define RT_CUDA_AT(field) offsetof(rt_cuda_api, field)
// clang-format off
static const struct {
    const char *name, *sym;
    size_t offset;
} rt_cuda_entry[] = {
    {"cuDriverGetVersion",        "cuDriverGetVersion",           RT_CUDA_AT(driver_get_version)},
    {"cuDeviceGetCount",          "cuDeviceGetCount",             RT_CUDA_AT(device_get_count)},
    {"cuDeviceGet",               "cuDeviceGet",                  RT_CUDA_AT(device_get)},
    {"cuDeviceGetName",           "cuDeviceGetName",              RT_CUDA_AT(device_get_name)},
    {"cuDeviceGetAttribute",      "cuDeviceGetAttribute",         RT_CUDA_AT(device_get_attribute)},
    {"cuDevicePrimaryCtxRetain",  "cuDevicePrimaryCtxRetain",     RT_CUDA_AT(primary_ctx_retain)},
    {"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", RT_CUDA_AT(primary_ctx_release)},
    {"cuCtxSetCurrent",           "cuCtxSetCurrent",              RT_CUDA_AT(ctx_set_current)},
    {"cuCtxSynchronize",          "cuCtxSynchronize",             RT_CUDA_AT(ctx_synchronize)},
    {"cuModuleLoadData",          "cuModuleLoadData",             RT_CUDA_AT(module_load_data)},
    {"cuModuleUnload",            "cuModuleUnload",               RT_CUDA_AT(module_unload)},
    {"cuModuleGetFunction",       "cuModuleGetFunction",          RT_CUDA_AT(module_get_function)},
    {"cuFuncSetAttribute",        "cuFuncSetAttribute",           RT_CUDA_AT(func_set_attribute)},
    {"cuMemAlloc",                "cuMemAlloc_v2",                RT_CUDA_AT(mem_alloc)},
    {"cuMemFree",                 "cuMemFree_v2",                 RT_CUDA_AT(mem_free)},
    {"cuMemcpyHtoD",              "cuMemcpyHtoD_v2",              RT_CUDA_AT(memcpy_htod)},
    {"cuMemcpyDtoH",              "cuMemcpyDtoH_v2",              RT_CUDA_AT(memcpy_dtoh)},
    {"cuLaunchKernel",            "cuLaunchKernel",               RT_CUDA_AT(launch_kernel)},
    {"cuEventCreate",             "cuEventCreate",                RT_CUDA_AT(event_create)},
    {"cuEventRecord",             "cuEventRecord",                RT_CUDA_AT(event_record)},
    {"cuEventSynchronize",        "cuEventSynchronize",           RT_CUDA_AT(event_synchronize)},
    {"cuEventElapsedTime",        "cuEventElapsedTime",           RT_CUDA_AT(event_elapsed_time)},
    {"cuEventDestroy",            "cuEventDestroy_v2",            RT_CUDA_AT(event_destroy)},
    {"cuGetErrorName",            "cuGetErrorName",               RT_CUDA_AT(get_error_name)},
    {"cuGetErrorString",          "cuGetErrorString",             RT_CUDA_AT(get_error_string)},
};
// clang-format on

typedef struct rt_cuda_rt {
    void *lib;
    rt_cuda_api api;
    CUdevice device;
    CUcontext ctx;
    bool ctx_retained;
    rt_gpu_driver drv; // what hal-gpu.c launches on; ctx: this
} rt_cuda_rt;

// The name of a driver result; the driver's own when it can say (the stub cannot).
static const char *rt_cuda_result_name(const rt_cuda_rt *c, CUresult r) {
    const char *s = NULL;
    if (c && c->api.get_error_name && c->api.get_error_name(r, &s) == CUDA_SUCCESS && s)
        return s;
    switch (r) {
    case CUDA_ERROR_INVALID_VALUE:
        return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY:
        return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED:
        return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_STUB_LIBRARY:
        return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_NO_DEVICE:
        return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_IMAGE:
        return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
        return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case CUDA_ERROR_NOT_FOUND:
        return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
        return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case CUDA_ERROR_ILLEGAL_ADDRESS:
        return "CUDA_ERROR_ILLEGAL_ADDRESS";
    default:
        return "unknown CUDA error";
    }
}

// rt_gpu_driver_ops over the dlopen'd entry points; ctx is the rt_cuda_rt.
_Static_assert(CUDA_SUCCESS == 0, "rt_gpu_driver_ops take 0 for success");
_Static_assert(sizeof(CUdeviceptr) == sizeof(rt_gpu_devptr),
               "a buffer parameter is the bytes of its CUdeviceptr");

static int rt_cuda_op_bind(void *ctx) {
    rt_cuda_rt *c = ctx;
    return (int)c->api.ctx_set_current(c->ctx);
}

static int rt_cuda_op_module_load(void *ctx, const void *image, void **out) {
    rt_cuda_rt *c = ctx;
    CUmodule m = NULL;
    CUresult r = c->api.module_load_data(&m, image);
    *out = m;
    return (int)r;
}

static int rt_cuda_op_module_function(void *ctx, void *module, const char *symbol, void **out) {
    rt_cuda_rt *c = ctx;
    CUfunction f = NULL;
    CUresult r = c->api.module_get_function(&f, module, symbol);
    *out = f;
    return (int)r;
}

static void rt_cuda_op_module_unload(void *ctx, void *module) {
    rt_cuda_rt *c = ctx;
    c->api.module_unload(module);
}

// A kernel may use 48 KiB of dynamic shared memory unless its function is allowed more.
static int rt_cuda_op_set_dyn_smem(void *ctx, void *fn, int64_t bytes) {
    rt_cuda_rt *c = ctx;
    if (bytes <= 48 * 1024)
        return CUDA_SUCCESS;
    return (int)c->api.func_set_attribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                          (int)bytes);
}

static int rt_cuda_op_alloc(void *ctx, size_t bytes, rt_gpu_devptr *out) {
    rt_cuda_rt *c = ctx;
    CUdeviceptr p = 0;
    CUresult r = c->api.mem_alloc(&p, bytes);
    *out = p;
    return (int)r;
}

static void rt_cuda_op_free(void *ctx, rt_gpu_devptr p) {
    rt_cuda_rt *c = ctx;
    c->api.mem_free(p);
}

static int rt_cuda_op_htod(void *ctx, rt_gpu_devptr dst, const void *src, size_t bytes) {
    rt_cuda_rt *c = ctx;
    return (int)c->api.memcpy_htod(dst, src, bytes);
}

static int rt_cuda_op_dtoh(void *ctx, void *dst, rt_gpu_devptr src, size_t bytes) {
    rt_cuda_rt *c = ctx;
    return (int)c->api.memcpy_dtoh(dst, src, bytes);
}

static int rt_cuda_op_launch(void *ctx, void *fn, const unsigned grid[3], const unsigned block[3],
                             unsigned dyn_smem_bytes, void **params) {
    rt_cuda_rt *c = ctx;
    return (int)c->api.launch_kernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                     dyn_smem_bytes, NULL, params, NULL);
}

static int rt_cuda_op_sync(void *ctx) {
    rt_cuda_rt *c = ctx;
    return (int)c->api.ctx_synchronize();
}

static int rt_cuda_op_event_create(void *ctx, void **out) {
    rt_cuda_rt *c = ctx;
    CUevent e = NULL;
    CUresult r = c->api.event_create(&e, CU_EVENT_DEFAULT);
    *out = e;
    return (int)r;
}

static int rt_cuda_op_event_record(void *ctx, void *ev) {
    rt_cuda_rt *c = ctx;
    return (int)c->api.event_record(ev, NULL);
}

static int rt_cuda_op_event_synchronize(void *ctx, void *ev) {
    rt_cuda_rt *c = ctx;
    return (int)c->api.event_synchronize(ev);
}

static int rt_cuda_op_event_elapsed_ms(void *ctx, void *start, void *end, float *out_ms) {
    rt_cuda_rt *c = ctx;
    return (int)c->api.event_elapsed_time(out_ms, start, end);
}

static void rt_cuda_op_event_destroy(void *ctx, void *ev) {
    rt_cuda_rt *c = ctx;
    c->api.event_destroy(ev);
}

static const char *rt_cuda_op_error_name(void *ctx, int result) {
    return rt_cuda_result_name(ctx, (CUresult)result);
}

static const char *rt_cuda_op_error_string(void *ctx, int result) {
    rt_cuda_rt *c = ctx;
    const char *msg = NULL;
    if (c->api.get_error_string && c->api.get_error_string((CUresult)result, &msg) != CUDA_SUCCESS)
        msg = NULL;
    return msg;
}

static const rt_gpu_driver_ops rt_cuda_driver_ops = {
    .class_name = "cuda",
    .image_name = "CUBIN",
    .bind_call = "cuCtxSetCurrent",
    .load_call = "cuModuleLoadData",
    .function_call = "cuModuleGetFunction",
    .smem_call = "cuFuncSetAttribute",
    .upload_calls = "cuMemAlloc/cuMemcpyHtoD",
    .launch_call = "cuLaunchKernel",
    .sync_call = "cuCtxSynchronize",
    .timed_calls = "timed launch (cuEventRecord/cuLaunchKernel/cuEventElapsedTime)",
    .event_timer = "CUDA events (cuEventElapsedTime)",
    .download_call = "cuMemcpyDtoH",
    .bind = rt_cuda_op_bind,
    .module_load = rt_cuda_op_module_load,
    .module_function = rt_cuda_op_module_function,
    .module_unload = rt_cuda_op_module_unload,
    .set_dyn_smem = rt_cuda_op_set_dyn_smem,
    .alloc = rt_cuda_op_alloc,
    .free = rt_cuda_op_free,
    .htod = rt_cuda_op_htod,
    .dtoh = rt_cuda_op_dtoh,
    .launch = rt_cuda_op_launch,
    .sync = rt_cuda_op_sync,
    .event_create = rt_cuda_op_event_create,
    .event_record = rt_cuda_op_event_record,
    .event_synchronize = rt_cuda_op_event_synchronize,
    .event_elapsed_ms = rt_cuda_op_event_elapsed_ms,
    .event_destroy = rt_cuda_op_event_destroy,
    .error_name = rt_cuda_op_error_name,
    .error_string = rt_cuda_op_error_string,
};

static rt_status rt_cuda_driver_fail(rt_cuda_rt *c, const char *what, CUresult r, rt_err *err) {
    return rt_gpu_driver_fail(&rt_cuda_driver_ops, c, what, (int)r, err);
}

#define RT_CU(c, call, err)                                                                        \
    do {                                                                                           \
        CUresult rt_r_ = (c)->api.call;                                                            \
        if (rt_r_ != CUDA_SUCCESS)                                                                 \
            return rt_cuda_driver_fail((c), #call, rt_r_, (err));                                  \
    } while (0)

static void rt_cuda_close(void *h) {
    rt_cuda_rt *c = h;
    if (c->ctx && c->api.ctx_set_current)
        c->api.ctx_set_current(c->ctx);
    rt_gpu_driver_unload_all(&c->drv);
    if (c->ctx_retained)
        c->api.primary_ctx_release(c->device);
    if (c->lib)
        dlclose(c->lib);
}

// The library to open: $RTGEN_LIBCUDA when set (a driver outside the loader path, or the
// toolkit's stub for tests), else libcuda.so.1 — never libcuda.so, the link-time stub's name.
static const char *rt_cuda_lib_name(void) {
    const char *env = getenv("RTGEN_LIBCUDA");
    return env && env[0] ? env : "libcuda.so.1";
}

static rt_status rt_cuda_resolve(rt_cuda_rt *c, rt_err *err) {
    for (size_t i = 0; i < sizeof rt_cuda_entry / sizeof rt_cuda_entry[0]; i++) {
        void *p = NULL;
        if (c->api.get_proc_address) {
            CUdriverProcAddressQueryResult q;
            if (c->api.get_proc_address(rt_cuda_entry[i].name, &p, 12000,
                                        CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS ||
                q != CU_GET_PROC_ADDRESS_SUCCESS)
                p = NULL;
        }
        if (!p)
            p = dlsym(c->lib, rt_cuda_entry[i].sym);
        if (!p)
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                           "the CUDA driver %s lacks %s (expected a driver for CUDA 12 or newer)",
                           rt_cuda_lib_name(), rt_cuda_entry[i].name);
        memcpy((char *)&c->api + rt_cuda_entry[i].offset, &p, sizeof p);
    }
    return RT_OK;
}

// Checks the INI's sm_XY against the live device's compute capability.
static rt_status rt_cuda_check_arch(rt_gpu_runtime *rt, rt_cuda_rt *c, rt_err *err) {
    int major = 0, minor = 0, num;
    const char *suffix;
    RT_CU(c, device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c->device),
          err);
    RT_CU(c, device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c->device),
          err);
    if (!rt_cuda_parse_arch(rt->dev->arch, &num, &suffix) || num != major * 10 + minor)
        return rt_fail(err, RT_ERR_DEVICE, rt->dev->arch_loc,
                       "arch does not match the GPU present (expected sm_%d%d for %s, got %s)",
                       major, minor, rt->device_name, rt->dev->arch);
    return RT_OK;
}

static rt_status rt_gpu_cuda_open(rt_gpu_runtime *rt, rt_err *err) {
    rt_cuda_rt *c;
    RT_ALLOC(rt->arena, c, 1, err);
    c->drv = (rt_gpu_driver){.ops = &rt_cuda_driver_ops, .ctx = c, .timer = rt_cupti_timer()};
    const char *lib = rt_cuda_lib_name();
    c->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!c->lib) {
        const char *why = dlerror();
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, RT_GPU_ABSENT_PREFIX "no CUDA driver (%s)",
                       why ? why : lib);
    }
    if (rt_arena_defer(rt->arena, rt_cuda_close, c) != RT_OK) {
        dlclose(c->lib);
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    }
    void *p_init = dlsym(c->lib, "cuInit");
    void *p_gpa = dlsym(c->lib, "cuGetProcAddress_v2");
    void *p_name = dlsym(c->lib, "cuGetErrorName");
    memcpy(&c->api.init, &p_init, sizeof p_init);
    memcpy(&c->api.get_proc_address, &p_gpa, sizeof p_gpa);
    memcpy(&c->api.get_error_name, &p_name, sizeof p_name);
    if (!c->api.init)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "the CUDA driver %s lacks cuInit", lib);
    CUresult r = c->api.init(0);
    if (r == CUDA_ERROR_STUB_LIBRARY)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       RT_GPU_ABSENT_PREFIX "the CUDA driver %s is the toolkit's stub library "
                                            "(cuInit returned CUDA_ERROR_STUB_LIBRARY)",
                       lib);
    if (r == CUDA_ERROR_NO_DEVICE)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       RT_GPU_ABSENT_PREFIX
                       "no CUDA device (cuInit returned CUDA_ERROR_NO_DEVICE)");
    if (r != CUDA_SUCCESS)
        return rt_cuda_driver_fail(c, "cuInit(0)", r, err);
    RT_TRY(rt_cuda_resolve(c, err));
    int count = 0;
    RT_CU(c, device_get_count(&count), err);
    if (count <= 0)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       RT_GPU_ABSENT_PREFIX "no CUDA device (cuDeviceGetCount returned 0)");
    RT_CU(c, device_get(&c->device, 0), err);
    RT_CU(c, device_get_name(rt->device_name, (int)sizeof rt->device_name - 1, c->device), err);
    RT_TRY(rt_cuda_check_arch(rt, c, err));
    RT_CU(c, primary_ctx_retain(&c->ctx, c->device), err);
    c->ctx_retained = true;
    RT_CU(c, ctx_set_current(c->ctx), err);
    rt->impl = c;
    rt->driver = &c->drv;
    return RT_OK;
}

#else // !RT_WITH_CUDA

static rt_status rt_gpu_cuda_compile(rt_arena *a, const rt_device *dev, const char *source,
                                     const char *kernel_name, const rt_gpu_compile_options *opts,
                                     rt_gpu_binary *bin, rt_err *err) {
    (void)a, (void)dev, (void)source, (void)kernel_name, (void)opts, (void)bin;
    return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                   "not built with CUDA (NVRTC was not found when rtgen was configured)");
}

static rt_status rt_gpu_cuda_open(rt_gpu_runtime *rt, rt_err *err) {
    (void)rt;
    return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                   RT_GPU_ABSENT_PREFIX "not built with CUDA (the CUDA toolkit was not found "
                                        "when rtgen was configured)");
}

#endif

// cuda: sm_NN or sm_NNN with an optional letter suffix (sm_70, sm_90a, sm_100).
static rt_status rt_hal_cuda_validate(const rt_device *dev, rt_err *err) {
    const char *a = dev->arch;
    size_t n = strlen(a), digits = 0;
    bool ok = n > 3 && strncmp(a, "sm_", 3) == 0;
    for (size_t i = 3; ok && i < n && rt_hal_is_digit(a[i]); i++)
        digits++;
    if (ok)
        ok = (digits == 2 || digits == 3) &&
             (3 + digits == n || (3 + digits + 1 == n && rt_hal_is_lower(a[n - 1])));
    if (!ok)
        return rt_fail(err, RT_ERR_DEVICE, dev->arch_loc,
                       "bad arch for class cuda (expected sm_NN, got \"%s\")", a);
    return RT_OK;
}

const struct rt_hal_ops rt_hal_cuda_ops = {
    .class_name = "cuda",
    .validate = rt_hal_cuda_validate,
    .compile = rt_gpu_cuda_compile,
    .load = rt_gpu_cuda_open,
    .run = rt_gpu_driver_exec,
    .time = rt_gpu_driver_exec,
};
