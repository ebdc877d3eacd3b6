// hal-opencl.c: the opencl class of the HAL, through the ICD loader (OpenCL 1.2 API), which it
// opens with dlopen at first use — never linked. Picks the platform/device whose names contain
// the INI's arch (case-insensitive; e.g. "pocl"), builds OpenCL C source with the build log on
// failure, reports local/private memory per kernel, and runs NDRanges with profiling-event
// timing. On this project's machines it runs on PoCL's CPU device and is how GPU-structured
// kernels are checked numerically without a GPU.
// Built when CMake finds OpenCL (RT_WITH_OPENCL: its headers and the loader's soname); otherwise
// it reports "not built with OpenCL".
#include "hal-gpu-impl.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(RT_WITH_OPENCL)

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>

#ifndef RT_OPENCL_SONAME
#define RT_OPENCL_SONAME "libOpenCL.so.1"
#endif
#ifndef RT_OPENCL_PATH
#define RT_OPENCL_PATH RT_OPENCL_SONAME
#endif

// ---------------------------------------------------------------------------------------------
// The ICD loader, opened at first use
// ---------------------------------------------------------------------------------------------

// libOpenCL is not linked, so that runs that use no OpenCL device do not load it at start.
// The entry points below are resolved into rt_cl_lib once (rt_cl_lib_load, after the drivers
// are isolated), from $RTGEN_LIBOPENCL when set, else from the loader's soname found at
// configure time (RT_OPENCL_SONAME) or the same file where it was found (RT_OPENCL_PATH).
#define RT_CL_FNS(X)                                                                               \
    X(clGetPlatformIDs)                                                                            \
    X(clGetPlatformInfo)                                                                           \
    X(clGetDeviceIDs)                                                                              \
    X(clGetDeviceInfo)                                                                             \
    X(clCreateContext)                                                                             \
    X(clReleaseContext)                                                                            \
    X(clCreateCommandQueue)                                                                        \
    X(clReleaseCommandQueue)                                                                       \
    X(clCreateProgramWithSource)                                                                   \
    X(clBuildProgram)                                                                              \
    X(clGetProgramBuildInfo)                                                                       \
    X(clGetProgramInfo)                                                                            \
    X(clReleaseProgram)                                                                            \
    X(clCreateKernel)                                                                              \
    X(clGetKernelWorkGroupInfo)                                                                    \
    X(clSetKernelArg)                                                                              \
    X(clReleaseKernel)                                                                             \
    X(clCreateBuffer)                                                                              \
    X(clCreateSubBuffer)                                                                           \
    X(clReleaseMemObject)                                                                          \
    X(clEnqueueNDRangeKernel)                                                                      \
    X(clEnqueueReadBuffer)                                                                         \
    X(clFinish)                                                                                    \
    X(clWaitForEvents)                                                                             \
    X(clGetEventProfilingInfo)                                                                     \
    X(clReleaseEvent)

#define RT_CL_FIELD(name) __typeof__(name) *name;
static struct {
    RT_CL_FNS(RT_CL_FIELD)
    bool ok;
    char why[640]; // the reason, prefixed with RT_GPU_ABSENT_PREFIX, when !ok
} rt_cl_lib;
static pthread_once_t rt_cl_lib_once = PTHREAD_ONCE_INIT;

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

static const char *rt_cl_result_name(cl_int r) {
    switch (r) {
    case CL_DEVICE_NOT_FOUND:
        return "CL_DEVICE_NOT_FOUND";
    case CL_DEVICE_NOT_AVAILABLE:
        return "CL_DEVICE_NOT_AVAILABLE";
    case CL_OUT_OF_RESOURCES:
        return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY:
        return "CL_OUT_OF_HOST_MEMORY";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
        return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_BUILD_PROGRAM_FAILURE:
        return "CL_BUILD_PROGRAM_FAILURE";
    case CL_INVALID_VALUE:
        return "CL_INVALID_VALUE";
    case CL_INVALID_PLATFORM:
        return "CL_INVALID_PLATFORM";
    case CL_INVALID_DEVICE:
        return "CL_INVALID_DEVICE";
    case CL_INVALID_BUILD_OPTIONS:
        return "CL_INVALID_BUILD_OPTIONS";
    case CL_INVALID_PROGRAM_EXECUTABLE:
        return "CL_INVALID_PROGRAM_EXECUTABLE";
    case CL_INVALID_KERNEL_NAME:
        return "CL_INVALID_KERNEL_NAME";
    case CL_INVALID_ARG_INDEX:
        return "CL_INVALID_ARG_INDEX";
    case CL_INVALID_ARG_VALUE:
        return "CL_INVALID_ARG_VALUE";
    case CL_INVALID_ARG_SIZE:
        return "CL_INVALID_ARG_SIZE";
    case CL_INVALID_KERNEL_ARGS:
        return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_WORK_DIMENSION:
        return "CL_INVALID_WORK_DIMENSION";
    case CL_INVALID_WORK_GROUP_SIZE:
        return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_WORK_ITEM_SIZE:
        return "CL_INVALID_WORK_ITEM_SIZE";
    case CL_INVALID_GLOBAL_WORK_SIZE:
        return "CL_INVALID_GLOBAL_WORK_SIZE";
    case CL_INVALID_BUFFER_SIZE:
        return "CL_INVALID_BUFFER_SIZE";
    case -1001:
        return "CL_PLATFORM_NOT_FOUND_KHR";
    default:
        return "OpenCL error";
    }
}

static rt_status rt_cl_fail(const char *what, cl_int r, rt_err *err) {
    return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "%s failed: %s (%d)", what, rt_cl_result_name(r),
                   (int)r);
}

// RT_CL(clFinish, (q), err) calls the loaded entry point and, on failure, reports the call as
// written ("clFinish(q)").
#define RT_CL(fn, args, err)                                                                       \
    do {                                                                                           \
        cl_int rt_r_ = rt_cl_lib.fn args;                                                          \
        if (rt_r_ != CL_SUCCESS)                                                                   \
            return rt_cl_fail(#fn #args, rt_r_, (err));                                            \
    } while (0)

// ---------------------------------------------------------------------------------------------
// Device selection and context
// ---------------------------------------------------------------------------------------------

typedef struct rt_cl_module {
    struct rt_cl_module *next;
    const rt_gpu_binary *bin;
    cl_program prog;
    cl_kernel kernel;
} rt_cl_module;

typedef struct rt_cl_rt {
    cl_platform_id platform;
    cl_device_id device;
    cl_context ctx;
    cl_command_queue queue;
    bool profiling; // the queue records profiling times (else timed launches use the wall clock)
    char name[128];
    rt_cl_module *modules;
} rt_cl_rt;

static bool rt_cl_contains(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (const char *p = hay; *p; p++) {
        size_t i = 0;
        while (i < n && p[i] && tolower((unsigned char)p[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return true;
    }
    return n == 0;
}

static void rt_cl_release(void *p) {
    rt_cl_rt *c = p;
    for (rt_cl_module *m = c->modules; m; m = m->next) {
        if (m->kernel)
            rt_cl_lib.clReleaseKernel(m->kernel);
        if (m->prog)
            rt_cl_lib.clReleaseProgram(m->prog);
    }
    if (c->queue)
        rt_cl_lib.clReleaseCommandQueue(c->queue);
    if (c->ctx)
        rt_cl_lib.clReleaseContext(c->ctx);
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RT_CL_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define RT_CL_ASAN 1
#endif

// OpenCL drivers that compile with their own LLVM (PoCL links LLVM 15) must not bind to the
// LLVM 16 that rtgen's CPU backend has in the global scope when it links the shared libLLVM
// (the test programs do; the rtgen CLI links LLVM statically and exports none of it): a cold
// PoCL build would call into it and crash. Each driver listed by the ICD loader
// (OCL_ICD_VENDORS or /etc/OpenCL/vendors) is therefore loaded first with RTLD_DEEPBIND, before
// the ICD loader is opened and opens the same handle. AddressSanitizer refuses RTLD_DEEPBIND, so
// sanitized builds report OpenCL as absent. Returns false with rt_cl_lib.why set when OpenCL
// cannot be used.
static bool rt_cl_isolate_drivers(void) {
#if defined(RT_CL_ASAN)
    snprintf(rt_cl_lib.why, sizeof rt_cl_lib.why, "%s",
             RT_GPU_ABSENT_PREFIX "OpenCL is disabled under AddressSanitizer (it refuses "
                                  "RTLD_DEEPBIND, which keeps the driver's LLVM apart from "
                                  "rtgen's)");
    return false;
#else
    const char *dir = getenv("OCL_ICD_VENDORS");
    if (!dir || !*dir)
        dir = "/etc/OpenCL/vendors";
    DIR *d = opendir(dir);
    if (!d)
        return true; // the ICD loader will report that there is no platform
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".icd") != 0)
            continue;
        char path[1024], lib[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(lib, sizeof lib, f)) {
            lib[strcspn(lib, "\r\n")] = '\0';
            if (lib[0]) // kept loaded for the process: the ICD loader reuses this handle
                (void)dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
        }
        fclose(f);
    }
    closedir(d);
    return true;
#endif
}

// Fills rt_cl_lib from lib (opened as name), which stays loaded for the process.
static void rt_cl_lib_resolve(void *lib, const char *name) {
    void *p;
#define RT_CL_RESOLVE(fn)                                                                          \
    p = dlsym(lib, #fn);                                                                           \
    if (!p && !rt_cl_lib.why[0])                                                                   \
        snprintf(rt_cl_lib.why, sizeof rt_cl_lib.why, "the OpenCL library %s lacks %s", name,      \
                 #fn);                                                                             \
    memcpy(&rt_cl_lib.fn, &p, sizeof p);
    RT_CL_FNS(RT_CL_RESOLVE)
#undef RT_CL_RESOLVE
    rt_cl_lib.ok = !rt_cl_lib.why[0];
}

static void rt_cl_lib_load(void) {
    if (!rt_cl_isolate_drivers())
        return;
    const char *env = getenv("RTGEN_LIBOPENCL");
    if (env && env[0]) {
        void *lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char *e = dlerror();
            snprintf(rt_cl_lib.why, sizeof rt_cl_lib.why,
                     RT_GPU_ABSENT_PREFIX "cannot load the OpenCL ICD loader from RTGEN_LIBOPENCL "
                                          "(%s): set it to libOpenCL's path",
                     e ? e : env);
            return;
        }
        rt_cl_lib_resolve(lib, env);
        return;
    }
    // The error of the soname says why; the path is tried for loaders outside the loader path.
    char first_error[256] = "";
    void *lib = dlopen(RT_OPENCL_SONAME, RTLD_NOW | RTLD_LOCAL);
    const char *name = RT_OPENCL_SONAME;
    if (!lib) {
        const char *e = dlerror();
        snprintf(first_error, sizeof first_error, "%s", e ? e : RT_OPENCL_SONAME);
        if (strcmp(RT_OPENCL_PATH, RT_OPENCL_SONAME) != 0) {
            lib = dlopen(RT_OPENCL_PATH, RTLD_NOW | RTLD_LOCAL);
            name = RT_OPENCL_PATH;
        }
    }
    if (!lib) {
        snprintf(rt_cl_lib.why, sizeof rt_cl_lib.why,
                 RT_GPU_ABSENT_PREFIX "cannot load the OpenCL ICD loader (%s): install it or set "
                                      "RTGEN_LIBOPENCL to its path",
                 first_error);
        return;
    }
    rt_cl_lib_resolve(lib, name);
}

// Finds the first device whose "platform name, platform version, device name" contains
// dev->arch and creates a context (and, with a queue, a profiling queue) on it. Released with a.
static rt_status rt_cl_open_locked(rt_arena *a, const rt_device *dev, bool with_queue,
                                   rt_cl_rt **out, rt_err *err) {
    // PoCL links libclang-cpp.so.15; amd_comgr (hipRTC) carries its own clang 15: with both in
    // one process LLVM aborts on the duplicate options. Refuse instead (hal-hip.c does too).
    void *comgr = dlopen("libamd_comgr.so.2", RTLD_LAZY | RTLD_NOLOAD);
    if (comgr) {
        dlclose(comgr);
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       "OpenCL cannot be used in a process that has loaded amd_comgr (hipRTC): "
                       "PoCL's clang would register its options a second time and LLVM would "
                       "abort");
    }
    pthread_once(&rt_cl_lib_once, rt_cl_lib_load);
    if (!rt_cl_lib.ok)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "%s", rt_cl_lib.why);
    cl_platform_id plats[16];
    cl_uint n_plats = 0;
    cl_int r = rt_cl_lib.clGetPlatformIDs(16, plats, &n_plats);
    if (r != CL_SUCCESS || n_plats == 0)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       RT_GPU_ABSENT_PREFIX "no OpenCL platform (clGetPlatformIDs returned %s)",
                       rt_cl_result_name(r));
    rt_buf seen;
    rt_buf_init(&seen, a);
    rt_cl_rt *c;
    RT_ALLOC(a, c, 1, err);
    for (cl_uint p = 0; p < n_plats && !c->device; p++) {
        char pname[256] = "", pver[256] = "";
        rt_cl_lib.clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof pname - 1, pname, NULL);
        rt_cl_lib.clGetPlatformInfo(plats[p], CL_PLATFORM_VERSION, sizeof pver - 1, pver, NULL);
        cl_device_id devs[16];
        cl_uint n_devs = 0;
        if (rt_cl_lib.clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 16, devs, &n_devs) != CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < n_devs; d++) {
            char dname[256] = "";
            rt_cl_lib.clGetDeviceInfo(devs[d], CL_DEVICE_NAME, sizeof dname - 1, dname, NULL);
            rt_buf_printf(&seen, "%s\"%s\"", seen.len ? ", " : "", dname);
            if (rt_cl_contains(pname, dev->arch) || rt_cl_contains(pver, dev->arch) ||
                rt_cl_contains(dname, dev->arch)) {
                c->platform = plats[p];
                c->device = devs[d];
                snprintf(c->name, sizeof c->name, "%.127s", dname);
                break;
            }
        }
    }
    if (!c->device)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       RT_GPU_ABSENT_PREFIX "no OpenCL device matches arch \"%s\" (found: %s)",
                       dev->arch, seen.data && seen.len ? seen.data : "none");
    if (rt_arena_defer(a, rt_cl_release, c) != RT_OK)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)c->platform, 0};
    c->ctx = rt_cl_lib.clCreateContext(props, 1, &c->device, NULL, NULL, &r);
    if (r != CL_SUCCESS)
        return rt_cl_fail("clCreateContext", r, err);
    if (with_queue) {
        c->queue = rt_cl_lib.clCreateCommandQueue(c->ctx, c->device, CL_QUEUE_PROFILING_ENABLE, &r);
        c->profiling = r == CL_SUCCESS;
        if (r == CL_INVALID_QUEUE_PROPERTIES) // no profiling: timed with the wall clock
            c->queue = rt_cl_lib.clCreateCommandQueue(c->ctx, c->device, 0, &r);
        if (r != CL_SUCCESS)
            return rt_cl_fail("clCreateCommandQueue", r, err);
    }
    *out = c;
    return RT_OK;
}

// PoCL's platform and device queries race when two threads open it at once (seen as a crash in
// clGetDeviceInfo while compiling candidates in parallel): discovery is serialized.
static pthread_mutex_t rt_cl_open_mutex = PTHREAD_MUTEX_INITIALIZER;

static rt_status rt_cl_open(rt_arena *a, const rt_device *dev, bool with_queue, rt_cl_rt **out,
                            rt_err *err) {
    pthread_mutex_lock(&rt_cl_open_mutex);
    rt_status st = rt_cl_open_locked(a, dev, with_queue, out, err);
    pthread_mutex_unlock(&rt_cl_open_mutex);
    return st;
}

// ---------------------------------------------------------------------------------------------
// Build
// ---------------------------------------------------------------------------------------------

static const char *rt_cl_build_log(rt_arena *a, cl_program prog, cl_device_id dev) {
    size_t n = 0;
    cl_int r = rt_cl_lib.clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
    if (r != CL_SUCCESS || n == 0)
        return "";
    char *log = rt_arena_alloc(a, n + 1);
    if (!log)
        return "";
    r = rt_cl_lib.clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, n, log, NULL);
    return r == CL_SUCCESS ? log : "";
}

// Builds source for c's device; on success *out_prog and *out_kernel are set (the caller
// releases them). Errors: RT_ERR_BACKEND with the build log.
static rt_status rt_cl_build(rt_arena *a, rt_cl_rt *c, const char *source, const char *options,
                             const char *kernel_name, cl_program *out_prog, cl_kernel *out_kernel,
                             const char **out_log, rt_err *err) {
    cl_int r;
    *out_prog = NULL;
    *out_kernel = NULL;
    cl_program prog = rt_cl_lib.clCreateProgramWithSource(c->ctx, 1, &source, NULL, &r);
    if (r != CL_SUCCESS)
        return rt_cl_fail("clCreateProgramWithSource", r, err);
    r = rt_cl_lib.clBuildProgram(prog, 1, &c->device, options, NULL, NULL);
    const char *log = rt_cl_build_log(a, prog, c->device);
    if (out_log)
        *out_log = log;
    if (r != CL_SUCCESS) {
        rt_status st =
            rt_gpu_compile_fail(a, "clBuildProgram", c->name, rt_cl_result_name(r), log, err);
        rt_cl_lib.clReleaseProgram(prog);
        return st;
    }
    cl_kernel k = rt_cl_lib.clCreateKernel(prog, kernel_name, &r);
    if (r != CL_SUCCESS) {
        rt_cl_lib.clReleaseProgram(prog);
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       "clCreateKernel failed: no kernel %s in the program (%s)", kernel_name,
                       rt_cl_result_name(r));
    }
    *out_prog = prog;
    *out_kernel = k;
    return RT_OK;
}

static rt_status rt_gpu_opencl_compile(rt_arena *a, const rt_device *dev, const char *source,
                                       const char *kernel_name, const rt_gpu_compile_options *opts,
                                       rt_gpu_binary *bin, rt_err *err) {
    rt_cl_rt *c;
    RT_TRY(rt_cl_open(a, dev, false, &c, err));
    rt_buf joined;
    rt_buf_init(&joined, a);
    rt_buf_puts(&joined, "-cl-std=CL1.2");
    for (int32_t i = 0; i < opts->n_extra; i++)
        rt_buf_printf(&joined, " %s", opts->extra[i]);
    if (joined.oom)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    bin->options = joined.data;
    snprintf(bin->compiled_arch, sizeof bin->compiled_arch, "%s", c->name);
    cl_program prog;
    cl_kernel k = NULL;
    RT_TRY(rt_cl_build(a, c, source, bin->options, kernel_name, &prog, &k, &bin->log, err));
    rt_cl_module *m = rt_arena_alloc(a, sizeof *m);
    if (!m) {
        rt_cl_lib.clReleaseKernel(k);
        rt_cl_lib.clReleaseProgram(prog);
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    }
    m->prog = prog;
    m->kernel = k;
    m->next = c->modules;
    c->modules = m; // released with c
    bin->symbol = bin->kernel_name;

    cl_ulong local = 0, priv = 0;
    size_t wg = 0, bytes = 0;
    RT_CL(clGetKernelWorkGroupInfo,
          (k, c->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof local, &local, NULL), err);
    RT_CL(clGetKernelWorkGroupInfo,
          (k, c->device, CL_KERNEL_PRIVATE_MEM_SIZE, sizeof priv, &priv, NULL), err);
    RT_CL(clGetKernelWorkGroupInfo, (k, c->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL),
          err);
    bin->res.smem_bytes = (int64_t)local;
    bin->res.stack_frame_bytes = (int64_t)priv;
    bin->res.max_threads_per_block = (int32_t)wg;
    RT_CL(clGetProgramInfo, (prog, CL_PROGRAM_BINARY_SIZES, sizeof bytes, &bytes, NULL), err);
    if (bytes > 0) {
        uint8_t *img = rt_arena_alloc(a, bytes);
        if (!img)
            return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        unsigned char *ptrs[1] = {img};
        RT_CL(clGetProgramInfo, (prog, CL_PROGRAM_BINARIES, sizeof ptrs, ptrs, NULL), err);
        bin->image = img;
        bin->image_bytes = bytes;
    }
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Runtime
// ---------------------------------------------------------------------------------------------

static rt_status rt_gpu_opencl_open(rt_gpu_runtime *rt, rt_err *err) {
    rt_cl_rt *c;
    RT_TRY(rt_cl_open(rt->arena, rt->dev, true, &c, err));
    snprintf(rt->device_name, sizeof rt->device_name, "%s", c->name);
    rt->impl = c;
    return RT_OK;
}

// The kernel of bin on c, built from its source on first use (PoCL caches the build).
static rt_status rt_cl_kernel(rt_gpu_runtime *rt, rt_cl_rt *c, const rt_gpu_binary *bin,
                              cl_kernel *out, rt_err *err) {
    for (rt_cl_module *m = c->modules; m; m = m->next) {
        if (m->bin == bin) {
            *out = m->kernel;
            return RT_OK;
        }
    }
    rt_cl_module *m;
    RT_ALLOC(rt->arena, m, 1, err);
    RT_TRY(rt_cl_build(rt->arena, c, bin->source, bin->options, bin->kernel_name, &m->prog,
                       &m->kernel, NULL, err));
    m->bin = bin;
    m->next = c->modules;
    c->modules = m;
    *out = m->kernel;
    return RT_OK;
}

// One launch of every step in order; with ev, the event of the first launch in ev[0] and of the
// last in ev[1] (the same event when there is one step; the caller releases both).
static cl_int rt_cl_round(rt_cl_rt *c, const cl_kernel *ks, const rt_gpu_exec *x, cl_event *ev) {
    for (int32_t s = 0; s < x->n_steps; s++) {
        const rt_gpu_launch *g = &x->steps[s].cfg;
        size_t global[3], local[3];
        for (int d = 0; d < 3; d++) {
            size_t n = (size_t)(g->grid[d] > 0 ? g->grid[d] : 1);
            local[d] = (size_t)(g->block[d] > 0 ? g->block[d] : 1);
            global[d] = n * local[d];
        }
        cl_event *out = NULL;
        if (ev && s == 0)
            out = &ev[0];
        else if (ev && s == x->n_steps - 1)
            out = &ev[1];
        // The step's own int arguments (after the shared ones): an enqueue captures the values
        // set at that time, so the next step may set them again on the same kernel.
        cl_int r = CL_SUCCESS;
        int32_t base = x->steps[s].arg_map ? x->steps[s].n_mapped : x->n_args;
        for (int32_t k = 0; r == CL_SUCCESS && k < x->steps[s].n_ints; k++) {
            cl_int v = x->steps[s].ints[k];
            r = rt_cl_lib.clSetKernelArg(ks[s], (cl_uint)(base + k), sizeof v, &v);
        }
        if (r == CL_SUCCESS)
            r = rt_cl_lib.clEnqueueNDRangeKernel(c->queue, ks[s], 3, NULL, global, local, 0, NULL,
                                                 out);
        if (r != CL_SUCCESS)
            return r;
    }
    if (ev && x->n_steps == 1)
        ev[1] = ev[0];
    return CL_SUCCESS;
}

// One timed round with profiling events: from the start of its first kernel to the end of its
// last (an in-order queue runs them one after the other).
static cl_int rt_cl_time_events(rt_cl_rt *c, const cl_kernel *ks, const rt_gpu_exec *x,
                                double *out_ns) {
    cl_event ev[2] = {NULL, NULL};
    cl_ulong t0 = 0, t1 = 0;
    cl_int r = rt_cl_round(c, ks, x, ev);
    if (r == CL_SUCCESS)
        r = rt_cl_lib.clWaitForEvents(1, &ev[1]);
    if (r == CL_SUCCESS)
        r = rt_cl_lib.clGetEventProfilingInfo(ev[0], CL_PROFILING_COMMAND_START, sizeof t0, &t0,
                                              NULL);
    if (r == CL_SUCCESS)
        r = rt_cl_lib.clGetEventProfilingInfo(ev[1], CL_PROFILING_COMMAND_END, sizeof t1, &t1,
                                              NULL);
    for (int k = 0; k < 2; k++)
        if (ev[k] && (k == 0 || ev[1] != ev[0]))
            rt_cl_lib.clReleaseEvent(ev[k]);
    *out_ns = t1 > t0 ? (double)(t1 - t0) : 0.0;
    return r;
}

static double rt_cl_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

// reps == 0: one round and a wait; otherwise warmup rounds, a wait, then reps rounds each timed
// with profiling events, or with the wall clock around round + clFinish when the queue has no
// profiling or the device reports no times (CL_PROFILING_INFO_NOT_AVAILABLE).
static rt_status rt_cl_launch_all(rt_cl_rt *c, const cl_kernel *ks, rt_gpu_exec *x, rt_err *err) {
    int32_t untimed = x->reps == 0 ? 1 : x->warmup;
    for (int32_t i = 0; i < untimed; i++) {
        cl_int r = rt_cl_round(c, ks, x, NULL);
        if (r != CL_SUCCESS)
            return rt_cl_fail("clEnqueueNDRangeKernel", r, err);
    }
    RT_CL(clFinish, (c->queue), err);
    if (x->reps == 0)
        return RT_OK;
    bool events = c->profiling;
    for (int32_t i = 0; i < x->reps; i++) {
        cl_int r = CL_PROFILING_INFO_NOT_AVAILABLE;
        if (events && (r = rt_cl_time_events(c, ks, x, &x->samples_ns[i])) == CL_SUCCESS)
            continue;
        if (r != CL_PROFILING_INFO_NOT_AVAILABLE)
            return rt_cl_fail("timed launch (clEnqueueNDRangeKernel/clGetEventProfilingInfo)", r,
                              err);
        events = false; // this and the remaining samples: the wall clock
        double t0 = rt_cl_now_ns();
        r = rt_cl_round(c, ks, x, NULL);
        if (r == CL_SUCCESS)
            r = rt_cl_lib.clFinish(c->queue);
        if (r != CL_SUCCESS)
            return rt_cl_fail("timed launch (clEnqueueNDRangeKernel/clFinish)", r, err);
        x->samples_ns[i] = rt_cl_now_ns() - t0;
    }
    x->method =
        events ? "OpenCL profiling events (CL_PROFILING_COMMAND_START to END)" : RT_GPU_TIMED_WALL;
    return RT_OK;
}

// Sets argument i of kernel k: the device buffer mem, or the scalar / local size of g.
static cl_int rt_cl_set_arg(cl_kernel k, int32_t i, const rt_gpu_arg *g, const cl_mem *mem) {
    cl_int v_i32 = (cl_int)g->i;
    cl_long v_i64 = (cl_long)g->i;
    cl_float v_f32 = (cl_float)g->f;
    cl_double v_f64 = g->f;
    switch (g->kind) {
    case RT_GPU_ARG_BUFFER:
        return rt_cl_lib.clSetKernelArg(k, (cl_uint)i, sizeof *mem, mem);
    case RT_GPU_ARG_I32:
        return rt_cl_lib.clSetKernelArg(k, (cl_uint)i, sizeof v_i32, &v_i32);
    case RT_GPU_ARG_I64:
        return rt_cl_lib.clSetKernelArg(k, (cl_uint)i, sizeof v_i64, &v_i64);
    case RT_GPU_ARG_F32:
        return rt_cl_lib.clSetKernelArg(k, (cl_uint)i, sizeof v_f32, &v_f32);
    case RT_GPU_ARG_F64:
        return rt_cl_lib.clSetKernelArg(k, (cl_uint)i, sizeof v_f64, &v_f64);
    default:
        return rt_cl_lib.clSetKernelArg(k, (cl_uint)i, (size_t)g->local_bytes, NULL);
    }
}

// Builds (or finds) every step's kernel, creates the buffers once from the staging memory (a
// view as a sub-buffer of its parent) and sets each kernel's arguments (the whole list, or its
// step's arg_map: steps of one kernel must share their map, as arguments are set once per
// kernel), launches, reads the copy_out buffers back after an untimed run, and releases every
// buffer whatever failed.
static rt_status rt_gpu_opencl_exec(rt_gpu_runtime *rt, rt_gpu_exec *x, rt_err *err) {
    rt_cl_rt *c = rt->impl;
    int32_t n = x->n_args;
    cl_kernel *ks = calloc((size_t)x->n_steps, sizeof *ks);
    cl_mem *mem = calloc(rt_at_least_one((size_t)n), sizeof *mem);
    rt_status st = RT_OK;
    if (!ks || !mem)
        st = rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    for (int32_t s = 0; st == RT_OK && s < x->n_steps; s++)
        st = rt_cl_kernel(rt, c, x->steps[s].bin, &ks[s], err);
    for (int32_t i = 0; st == RT_OK && i < n; i++) {
        const rt_gpu_arg *g = &x->args[i];
        cl_int r = CL_SUCCESS;
        if (g->kind == RT_GPU_ARG_BUFFER && g->view_of > 0) {
            cl_buffer_region reg = {(size_t)g->view_offset, rt_gpu_arg_bytes(g)};
            mem[i] = rt_cl_lib.clCreateSubBuffer(mem[g->view_of - 1], CL_MEM_READ_WRITE,
                                                 CL_BUFFER_CREATE_TYPE_REGION, &reg, &r);
        } else if (g->kind == RT_GPU_ARG_BUFFER) {
            mem[i] = rt_cl_lib.clCreateBuffer(c->ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                              rt_gpu_arg_bytes(g), x->host_staging[i], &r);
        }
        if (r != CL_SUCCESS)
            st = rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "argument %d of %s: %s failed: %s (%d)",
                         (int)i, x->steps[0].bin->kernel_name,
                         g->view_of > 0 ? "clCreateSubBuffer" : "clCreateBuffer",
                         rt_cl_result_name(r), (int)r);
    }
    for (int32_t s = 0; st == RT_OK && s < x->n_steps; s++) {
        const rt_gpu_step *sp = &x->steps[s];
        int32_t m = sp->arg_map ? sp->n_mapped : n;
        for (int32_t t = 0; t < s && st == RT_OK; t++)
            if (ks[t] == ks[s] && x->steps[t].arg_map != sp->arg_map)
                st = rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                             "steps %d and %d launch %s with different arguments", (int)t, (int)s,
                             sp->bin->kernel_name);
        for (int32_t j = 0; st == RT_OK && j < m; j++) {
            int32_t i = sp->arg_map ? sp->arg_map[j] : j;
            cl_int r = rt_cl_set_arg(ks[s], j, &x->args[i], &mem[i]);
            if (r != CL_SUCCESS)
                st = rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                             "argument %d of %s: clSetKernelArg failed: %s (%d)", (int)j,
                             sp->bin->kernel_name, rt_cl_result_name(r), (int)r);
        }
    }
    if (st == RT_OK)
        st = rt_cl_launch_all(c, ks, x, err);
    for (int32_t i = 0; st == RT_OK && x->reps == 0 && i < n; i++) {
        const rt_gpu_arg *g = &x->args[i];
        if (g->kind != RT_GPU_ARG_BUFFER || !g->copy_out || g->view_of > 0)
            continue;
        cl_int r = rt_cl_lib.clEnqueueReadBuffer(c->queue, mem[i], CL_TRUE, 0, rt_gpu_arg_bytes(g),
                                                 x->host_staging[i], 0, NULL, NULL);
        if (r != CL_SUCCESS)
            st = rt_cl_fail("clEnqueueReadBuffer", r, err);
    }
    if (st != RT_OK)
        rt_cl_lib.clFinish(c->queue);
    for (int32_t i = n - 1; mem && i >= 0; i--) // views before the buffers they are in
        if (mem[i])
            rt_cl_lib.clReleaseMemObject(mem[i]);
    free(mem);
    free(ks);
    return st;
}

#else // !RT_WITH_OPENCL

static rt_status rt_gpu_opencl_compile(rt_arena *a, const rt_device *dev, const char *source,
                                       const char *kernel_name, const rt_gpu_compile_options *opts,
                                       rt_gpu_binary *bin, rt_err *err) {
    (void)a, (void)dev, (void)source, (void)kernel_name, (void)opts, (void)bin;
    return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                   "not built with OpenCL (no OpenCL library was found when rtgen was "
                   "configured)");
}

static rt_status rt_gpu_opencl_open(rt_gpu_runtime *rt, rt_err *err) {
    (void)rt;
    return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                   RT_GPU_ABSENT_PREFIX "not built with OpenCL (no OpenCL library was found "
                                        "when rtgen was configured)");
}

static rt_status rt_gpu_opencl_exec(rt_gpu_runtime *rt, rt_gpu_exec *x, rt_err *err) {
    (void)rt, (void)x;
    return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "not built with OpenCL");
}

#endif

const struct rt_hal_ops rt_hal_opencl_ops = {
    .class_name = "opencl",
    .validate = NULL, // any arch string: OpenCL devices have no common naming
    .compile = rt_gpu_opencl_compile,
    .load = rt_gpu_opencl_open,
    .run = rt_gpu_opencl_exec,
    .time = rt_gpu_opencl_exec,
};
