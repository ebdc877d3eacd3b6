// test-gpu-driver: the run-time side of the GPU backends. Without --run (label unit): a machine
// without a GPU gets a clean "no GPU" error from each class (dlopen failure of libcuda.so.1, the
// toolkit's stub library, no HIP device, no matching OpenCL device) and bad launch arguments
// are refused. With --run (label gpu): on each GPU found, the INI arch is checked against the
// live device, the tiled SGEMM runs at a prime and a ragged shape against a C reference, and
// it is timed; exit 77 when no GPU is present.
#include "hal-gpu-impl.h"
#include "test.h"
#include "gpu-sgemm.h"

#include <dlfcn.h>
#include <unistd.h>

static void expect_absent(const rt_device *dev, const char *needle) {
    rt_arena *a = rt_arena_new(1 << 14);
    rt_gpu_runtime *rt = (rt_gpu_runtime *)&rt; // must be reset to NULL on failure
    rt_err e;
    rt_err_clear(&e);
    rt_status st = rt_gpu_runtime_open(a, dev, &rt, &e);
    RT_EXPECT_EQ(st, RT_ERR_BACKEND);
    RT_EXPECT(rt == NULL);
    RT_EXPECT(rt_gpu_err_is_absent(&e));
    if (strstr(e.msg, "not built with")) { // the backend was configured out: also "no GPU"
        printf("%s: %s\n", dev->arch, e.msg);
        rt_arena_free(a);
        return;
    }
    if (!strstr(e.msg, needle)) {
        fprintf(stderr, "message \"%s\" lacks \"%s\"\n", e.msg, needle);
        RT_EXPECT(strstr(e.msg, needle) != NULL);
    }
    printf("%s: %s\n", dev->arch, e.msg);
    rt_arena_free(a);
}

static void test_no_driver(void) {
    rt_device dev;
    make_gpu(&dev, RT_DEVCLASS_CUDA, "sm_80", 32, 167936);

    // The real loader path: where libcuda.so.1 cannot be opened, the message carries dlerror's.
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        expect_absent(&dev, "no GPU: no CUDA driver (libcuda.so.1: cannot open shared object "
                            "file: No such file or directory)");
    } else {
        dlclose(h);
        printf("libcuda.so.1 is present: the no-driver path is checked through RTGEN_LIBCUDA\n");
    }

    // A driver path that does not exist.
    setenv("RTGEN_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
    expect_absent(&dev, "no GPU: no CUDA driver (/nonexistent/libcuda.so.1: cannot open");

    // The toolkit's stub: dlopen works, cuInit returns CUDA_ERROR_STUB_LIBRARY (34).
    const char *stubs[] = {"/usr/local/cuda/lib64/stubs/libcuda.so",
                           "/usr/local/cuda/lib/stubs/libcuda.so"};
    for (int i = 0; i < 2; i++) {
        if (access(stubs[i], R_OK) == 0) {
            setenv("RTGEN_LIBCUDA", stubs[i], 1);
            expect_absent(&dev, "stub library (cuInit returned CUDA_ERROR_STUB_LIBRARY)");
            break;
        }
    }
    unsetenv("RTGEN_LIBCUDA");

    // OpenCL with an arch no platform or device matches.
    make_gpu(&dev, RT_DEVCLASS_OPENCL, "no-such-opencl-device", 32, 65536);
#if defined(__SANITIZE_ADDRESS__)
    expect_absent(&dev, "no GPU: OpenCL is disabled under AddressSanitizer");
#else
    expect_absent(&dev, "no GPU: no OpenCL ");
#endif

    // HIP: where no AMD GPU is present (no /dev/kfd), hipInit fails and no device is counted.
    if (access("/dev/kfd", F_OK) != 0) {
        make_gpu(&dev, RT_DEVCLASS_HIP, "gfx906", 64, 65536);
        expect_absent(&dev, "no GPU: no HIP ");
    }

    // A CPU device has no GPU runtime.
    rt_arena *a = rt_arena_new(1 << 12);
    rt_gpu_runtime *rt;
    rt_err e;
    rt_err_clear(&e);
    make_gpu(&dev, RT_DEVCLASS_CPU, "native", 16, 49152);
    RT_EXPECT_EQ(rt_gpu_runtime_open(a, &dev, &rt, &e), RT_ERR_DEVICE);
    RT_EXPECT(!rt_gpu_err_is_absent(&e));
    rt_arena_free(a);
}

// The live architecture named by a mismatch message "... (expected sm_90 for NAME, got sm_10)".
static bool live_arch(const rt_err *e, char *out, size_t size) {
    const char *p = strstr(e->msg, "(expected ");
    if (!p)
        return false;
    p += strlen("(expected ");
    size_t n = strcspn(p, " ");
    if (n == 0 || n >= size)
        return false;
    memcpy(out, p, n);
    out[n] = '\0';
    return true;
}

// Opens the class's GPU if present: first with an arch no GPU has (checks the mismatch error),
// then with the live arch. Returns 1 when it ran, 0 when no GPU of the class is present.
static int run_on_gpu(rt_devclass cls, const char *bogus_arch, int32_t lanes) {
    rt_device dev;
    make_gpu(&dev, cls, bogus_arch, lanes, 65536);
    rt_arena *a = rt_arena_new(1 << 20);
    rt_gpu_runtime *rt = NULL;
    rt_err e;
    rt_err_clear(&e);
    rt_status st = rt_gpu_runtime_open(a, &dev, &rt, &e);
    if (st != RT_OK && rt_gpu_err_is_absent(&e)) {
        printf("no %s GPU here: %s\n", rt_devclass_name(cls), e.msg);
        rt_arena_free(a);
        return 0;
    }
    RT_EXPECT_EQ(st, RT_ERR_DEVICE);
    RT_EXPECT_EQ(e.where.line, 4);
    char arch[64];
    RT_EXPECT(live_arch(&e, arch, sizeof arch));
    printf("%s\n", e.msg);
    rt_arena_free(a);
    a = rt_arena_new(1 << 20);
    make_gpu(&dev, cls, arch, lanes, 65536);
    rt_err_clear(&e);
    st = rt_gpu_runtime_open(a, &dev, &rt, &e);
    RT_EXPECT_EQ(st, RT_OK);
    rt_gpu_binary *bin = NULL;
    if (st == RT_OK) {
        rt_gpu_compile_options o = {.threads_per_block = SGEMM_THREADS};
        st = rt_gpu_compile(a, &dev, sgemm_src, "sgemm", &o, &bin, &e);
        RT_EXPECT_EQ(st, RT_OK);
    }
    if (st == RT_OK && bin->note == NULL) { // a fallback arch cannot load on this GPU
        RT_EXPECT(sgemm_run(rt, bin, 67, 61, 59));
        RT_EXPECT(sgemm_run(rt, bin, 130, 33, 17));
        RT_EXPECT(sgemm_run(rt, bin, 256, 256, 256));
    } else if (st != RT_OK) {
        fprintf(stderr, "%s\n%s\n", e.msg, e.log ? e.log : "");
    }
    rt_arena_free(a);
    return 1;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--run") == 0) {
        int ran =
            run_on_gpu(RT_DEVCLASS_CUDA, "sm_10", 32) + run_on_gpu(RT_DEVCLASS_HIP, "gfx600", 64);
        if (!ran) {
            printf("test-gpu-driver --run: no GPU present\n");
            return 77;
        }
        return rt_test_finish("test-gpu-driver --run");
    }
    test_no_driver();

    // Bad timing counts and arguments are refused before any driver call.
    rt_gpu_runtime fake = {.devclass = RT_DEVCLASS_OPENCL};
    rt_gpu_binary bin = {.devclass = RT_DEVCLASS_CUDA, .kernel_name = "k"};
    rt_gpu_launch cfg = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    rt_gpu_timing t;
    rt_err e;
    rt_err_clear(&e);
    RT_EXPECT_EQ(rt_gpu_time(&fake, &bin, &cfg, NULL, 0, 1, 0, &t, &e), RT_ERR_BACKEND);
    RT_EXPECT(strstr(e.msg, "bad timing counts") != NULL);
    rt_err_clear(&e);
    RT_EXPECT_EQ(rt_gpu_run(&fake, &bin, &cfg, NULL, 0, &e), RT_ERR_BACKEND);
    RT_EXPECT_STR(e.msg, "kernel k was compiled for class cuda (expected opencl)");
    bin.devclass = RT_DEVCLASS_OPENCL;
    rt_gpu_arg bad = {.kind = RT_GPU_ARG_BUFFER, .dtype = RT_DTYPE_F32, .n_elems = 0};
    rt_err_clear(&e);
    RT_EXPECT_EQ(rt_gpu_run(&fake, &bin, &cfg, &bad, 1, &e), RT_ERR_BACKEND);
    RT_EXPECT(strstr(e.msg, "buffer argument 0 needs n_elems > 0") != NULL);
    return rt_test_finish("test-gpu-driver");
}
