// gpu-peer-cublas: cuBLAS SGEMM (and strided batched SGEMM), and cublasGemmEx on half or
// bfloat16 inputs into float (HGEMM / bf16 GEMM), timed on the GPU: the peers of rtgen's CUDA
// GEMM kernels in scripts/gpu-check.sh. Nothing is linked: the CUDA driver (libcuda.so.1) and
// cuBLAS are opened with dlopen, so the program builds on any machine and says why it cannot
// run where there is no GPU.
//
//   gpu-peer-cublas [--reps=N] [f16|bf16] M N K [BATCH] ...   (shapes as groups separated by ',')
//   gpu-peer-cublas 1024 1024 1024 , 8 128 128 64 96   (the second: BATCH=96 of 128x128x64)
//   gpu-peer-cublas f16 4096 4096 4096 , bf16 4096 4096 4096
//
// Row-major C[M,N] = A[M,K] B[K,N] called as the column-major C^T = B^T A^T. fp32 (no type
// word): SGEMM with cuBLAS' default math mode (no TF32). f16 / bf16: A and B of that type
// (CUDA_R_16F / CUDA_R_16BF), C float (CUDA_R_32F), compute type CUBLAS_COMPUTE_32F, the
// default algorithm (tensor cores): what rtgen's matrix-instruction kernels compute (batch 1).
// Each shape: 3 warm-up calls, then --reps calls each between two CUDA events; the minimum and
// the median are printed with GFLOP/s, and 64 sampled elements of C are compared with a
// double-precision dot product on the host over the inputs as stored (max error relative to
// sum |a b|; above 1e-5 for fp32 or 1e-4 for 16-bit inputs prints "wrong" and makes the exit
// status 1). 16-bit inputs are multiples of 1/1024 (half) or 1/128 (bfloat16) in [-1, 1],
// exact in their type.
//
// Output, one line per shape (PEER: cublas for fp32, cublas_f16, cublas_bf16):
//   PEER M N K BATCH min_ms median_ms gflops_at_median max_rel_err ok|wrong
// Exit: 0 all ok, 1 a result was wrong, 2 usage, 3 no GPU / library (the reason on stderr).
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int rt_cu_result;
typedef uint64_t rt_cu_ptr;
typedef void *rt_cu_ctx;
typedef void *rt_cu_event;
typedef void *rt_cublas;

// The driver entry points this peer needs.
typedef struct rt_peer_cuda {
    rt_cu_result (*init)(unsigned);
    rt_cu_result (*device_get)(int *, int);
    rt_cu_result (*ctx_retain)(rt_cu_ctx *, int);
    rt_cu_result (*ctx_set)(rt_cu_ctx);
    rt_cu_result (*mem_alloc)(rt_cu_ptr *, size_t);
    rt_cu_result (*mem_free)(rt_cu_ptr);
    rt_cu_result (*htod)(rt_cu_ptr, const void *, size_t);
    rt_cu_result (*dtoh)(void *, rt_cu_ptr, size_t);
    rt_cu_result (*event_create)(rt_cu_event *, unsigned);
    rt_cu_result (*event_record)(rt_cu_event, void *);
    rt_cu_result (*event_sync)(rt_cu_event);
    rt_cu_result (*event_elapsed)(float *, rt_cu_event, rt_cu_event);
    rt_cu_result (*event_destroy)(rt_cu_event);
    rt_cu_result (*ctx_sync)(void);
    int (*blas_create)(rt_cublas *);
    int (*blas_math)(rt_cublas, int);
    int (*sgemm)(rt_cublas, int, int, int, int, int, const float *, const float *, int,
                 const float *, int, const float *, float *, int);
    int (*sgemm_batched)(rt_cublas, int, int, int, int, int, const float *, const float *, int,
                         long long, const float *, int, long long, const float *, float *, int,
                         long long, int);
    int (*gemm_ex)(rt_cublas, int, int, int, int, int, const void *, const void *, int, int,
                   const void *, int, int, const void *, void *, int, int, int, int);
} rt_peer_cuda;

// The element types of a shape (cudaDataType_t values of library_types.h for A and B; C is
// always float).
typedef enum rt_peer_type { RT_PEER_F32, RT_PEER_F16, RT_PEER_BF16 } rt_peer_type;
enum {
    RT_PEER_CUDA_R_32F = 0,
    RT_PEER_CUDA_R_16F = 2,
    RT_PEER_CUDA_R_16BF = 14,
    RT_PEER_COMPUTE_32F = 68,  // cublasComputeType_t CUBLAS_COMPUTE_32F
    RT_PEER_GEMM_DEFAULT = -1, // cublasGemmAlgo_t CUBLAS_GEMM_DEFAULT
};

static void *rt_peer_sym(void *lib, const char *const *names, const char *what) {
    for (int32_t i = 0; names[i]; i++) {
        void *p = dlsym(lib, names[i]);
        if (p)
            return p;
    }
    fprintf(stderr, "gpu-peer-cublas: %s has no %s\n", what, names[0]);
    return NULL;
}

static void *rt_peer_open(const char *env, const char *const *names) {
    const char *e = getenv(env);
    if (e && *e)
        return dlopen(e, RTLD_NOW | RTLD_LOCAL);
    for (int32_t i = 0; names[i]; i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib)
            return lib;
    }
    return NULL;
}

#define RT_PEER_SYM(lib, field, what, ...)                                                         \
    do {                                                                                           \
        static const char *const n_[] = {__VA_ARGS__, NULL};                                       \
        *(void **)&c->field = rt_peer_sym(lib, n_, what);                                          \
        if (!c->field)                                                                             \
            return false;                                                                          \
    } while (0)

static bool rt_peer_load(rt_peer_cuda *c) {
    static const char *const cuda_names[] = {"libcuda.so.1", "libcuda.so", NULL};
    static const char *const blas_names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
                                             NULL};
    void *cu = rt_peer_open("RTGEN_LIBCUDA", cuda_names);
    if (!cu) {
        fprintf(stderr, "gpu-peer-cublas: no CUDA driver: %s\n", dlerror());
        return false;
    }
    void *bl = rt_peer_open("RTGEN_LIBCUBLAS", blas_names);
    if (!bl) {
        fprintf(stderr, "gpu-peer-cublas: no cuBLAS: %s\n", dlerror());
        return false;
    }
    RT_PEER_SYM(cu, init, "libcuda", "cuInit");
    RT_PEER_SYM(cu, device_get, "libcuda", "cuDeviceGet");
    RT_PEER_SYM(cu, ctx_retain, "libcuda", "cuDevicePrimaryCtxRetain");
    RT_PEER_SYM(cu, ctx_set, "libcuda", "cuCtxSetCurrent");
    RT_PEER_SYM(cu, mem_alloc, "libcuda", "cuMemAlloc_v2");
    RT_PEER_SYM(cu, mem_free, "libcuda", "cuMemFree_v2");
    RT_PEER_SYM(cu, htod, "libcuda", "cuMemcpyHtoD_v2");
    RT_PEER_SYM(cu, dtoh, "libcuda", "cuMemcpyDtoH_v2");
    RT_PEER_SYM(cu, event_create, "libcuda", "cuEventCreate");
    RT_PEER_SYM(cu, event_record, "libcuda", "cuEventRecord");
    RT_PEER_SYM(cu, event_sync, "libcuda", "cuEventSynchronize");
    RT_PEER_SYM(cu, event_elapsed, "libcuda", "cuEventElapsedTime_v2", "cuEventElapsedTime");
    RT_PEER_SYM(cu, event_destroy, "libcuda", "cuEventDestroy_v2", "cuEventDestroy");
    RT_PEER_SYM(cu, ctx_sync, "libcuda", "cuCtxSynchronize");
    RT_PEER_SYM(bl, blas_create, "libcublas", "cublasCreate_v2");
    RT_PEER_SYM(bl, blas_math, "libcublas", "cublasSetMathMode");
    RT_PEER_SYM(bl, sgemm, "libcublas", "cublasSgemm_v2");
    RT_PEER_SYM(bl, sgemm_batched, "libcublas", "cublasSgemmStridedBatched");
    RT_PEER_SYM(bl, gemm_ex, "libcublas", "cublasGemmEx");
    return true;
}

typedef struct rt_peer_shape {
    int m, n, k, batch;
    rt_peer_type type;
} rt_peer_shape;

static const char *const rt_peer_names[] = {"cublas", "cublas_f16", "cublas_bf16"};
static const int rt_peer_cuda_types[] = {RT_PEER_CUDA_R_32F, RT_PEER_CUDA_R_16F,
                                         RT_PEER_CUDA_R_16BF};
_Static_assert(sizeof rt_peer_names / sizeof rt_peer_names[0] == RT_PEER_BF16 + 1,
               "ORDER rt_peer_type");
_Static_assert(sizeof rt_peer_cuda_types / sizeof rt_peer_cuda_types[0] == RT_PEER_BF16 + 1,
               "ORDER rt_peer_type");

static uint64_t rt_peer_rng = 0x9e3779b97f4a7c15ull;

static float rt_peer_uniform(void) {
    rt_peer_rng ^= rt_peer_rng << 13;
    rt_peer_rng ^= rt_peer_rng >> 7;
    rt_peer_rng ^= rt_peer_rng << 17;
    return (float)((double)(rt_peer_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

// x, a multiple of 2^-10 in [-1, 1] (exact in half), as IEEE binary16 bits.
static uint16_t rt_peer_half_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    int32_t e = (int32_t)((u >> 23) & 0xffu);
    if (e == 0) // zero (no float subnormal is such a multiple)
        return sign;
    return (uint16_t)(sign | (uint16_t)((e - 127 + 15) << 10) | (uint16_t)((u >> 13) & 0x3ffu));
}

// One input element of type t, exact in that type, stored into the device array at index i;
// returns its value.
static float rt_peer_input(rt_peer_type t, void *dst, size_t i) {
    float x = rt_peer_uniform();
    if (t == RT_PEER_F32) {
        ((float *)dst)[i] = x;
        return x;
    }
    float q = t == RT_PEER_F16 ? 1024.0f : 128.0f;
    x = (float)lrintf(x * q) / q;
    uint32_t u;
    memcpy(&u, &x, 4);
    ((uint16_t *)dst)[i] = t == RT_PEER_F16 ? rt_peer_half_bits(x) : (uint16_t)(u >> 16);
    return x;
}

static int rt_peer_cmp(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

// One call of the shape's GEMM (batched when batch > 1) on the column-major view.
static int rt_peer_call(const rt_peer_cuda *c, rt_cublas h, const rt_peer_shape *s, rt_cu_ptr a,
                        rt_cu_ptr b, rt_cu_ptr o) {
    const float one = 1.0f, zero = 0.0f;
    const float *pa = (const float *)(uintptr_t)a, *pb = (const float *)(uintptr_t)b;
    float *pc = (float *)(uintptr_t)o;
    if (s->type != RT_PEER_F32) {
        int t = rt_peer_cuda_types[s->type];
        return c->gemm_ex(h, 0, 0, s->n, s->m, s->k, &one, (const void *)(uintptr_t)b, t, s->n,
                          (const void *)(uintptr_t)a, t, s->k, &zero, pc, RT_PEER_CUDA_R_32F, s->n,
                          RT_PEER_COMPUTE_32F, RT_PEER_GEMM_DEFAULT);
    }
    if (s->batch == 1)
        return c->sgemm(h, 0, 0, s->n, s->m, s->k, &one, pb, s->n, pa, s->k, &zero, pc, s->n);
    return c->sgemm_batched(h, 0, 0, s->n, s->m, s->k, &one, pb, s->n, (long long)s->k * s->n, pa,
                            s->k, (long long)s->m * s->k, &zero, pc, s->n, (long long)s->m * s->n,
                            s->batch);
}

// Runs and times one shape; returns 0 ok, 1 wrong, 3 failure.
static int rt_peer_shape_run(const rt_peer_cuda *c, rt_cublas h, const rt_peer_shape *s, int reps) {
    size_t na = (size_t)s->batch * s->m * s->k, nb = (size_t)s->batch * s->k * s->n;
    size_t nc = (size_t)s->batch * s->m * s->n, eb = s->type == RT_PEER_F32 ? 4 : 2;
    float *ha = malloc(na * sizeof(float)), *hb = malloc(nb * sizeof(float));
    float *hc = malloc(nc * sizeof(float)), *ms = malloc((size_t)reps * sizeof(float));
    void *ua = malloc(na * eb), *ub = malloc(nb * eb); // as uploaded (16-bit: the type's bits)
    rt_cu_ptr da = 0, db = 0, dc = 0;
    rt_cu_event e0 = NULL, e1 = NULL;
    int rc = 3;
    if (!ha || !hb || !hc || !ms || !ua || !ub)
        goto out;
    for (size_t i = 0; i < na; i++)
        ha[i] = rt_peer_input(s->type, ua, i);
    for (size_t i = 0; i < nb; i++)
        hb[i] = rt_peer_input(s->type, ub, i);
    if (c->mem_alloc(&da, na * eb) || c->mem_alloc(&db, nb * eb) || c->mem_alloc(&dc, nc * 4) ||
        c->htod(da, ua, na * eb) || c->htod(db, ub, nb * eb))
        goto out;
    if (c->event_create(&e0, 0) || c->event_create(&e1, 0))
        goto out;
    for (int i = 0; i < 3; i++)
        if (rt_peer_call(c, h, s, da, db, dc))
            goto out;
    for (int r = 0; r < reps; r++) {
        c->event_record(e0, NULL);
        if (rt_peer_call(c, h, s, da, db, dc))
            goto out;
        c->event_record(e1, NULL);
        if (c->event_sync(e1) || c->event_elapsed(&ms[r], e0, e1))
            goto out;
    }
    if (c->ctx_sync() || c->dtoh(hc, dc, nc * 4))
        goto out;
    double worst = 0;
    for (int i = 0; i < 64; i++) {
        size_t bi = (size_t)(i % s->batch), mi = (size_t)(i * 7919) % (size_t)s->m;
        size_t ni = (size_t)(i * 104729) % (size_t)s->n;
        const float *A = ha + bi * s->m * s->k, *B = hb + bi * s->k * s->n;
        double ref = 0, mag = 0;
        for (int kk = 0; kk < s->k; kk++) {
            ref += (double)A[mi * s->k + kk] * (double)B[(size_t)kk * s->n + ni];
            mag += fabs((double)A[mi * s->k + kk] * (double)B[(size_t)kk * s->n + ni]);
        }
        double got = hc[bi * s->m * s->n + mi * s->n + ni];
        double rel = fabs(got - ref) / (mag > 0 ? mag : 1);
        if (!(rel <= worst))
            worst = isnan(rel) ? (double)INFINITY : rel;
    }
    qsort(ms, (size_t)reps, sizeof *ms, rt_peer_cmp);
    double med = (double)ms[reps / 2], flops = 2.0 * s->batch * s->m * (double)s->n * s->k;
    bool ok = worst < (s->type == RT_PEER_F32 ? 1e-5 : 1e-4);
    printf("%s %d %d %d %d %.4f %.4f %.1f %.3g %s\n", rt_peer_names[s->type], s->m, s->n, s->k,
           s->batch, (double)ms[0], med, flops / (med * 1e6), worst, ok ? "ok" : "wrong");
    fflush(stdout);
    rc = ok ? 0 : 1;
out:
    if (rc == 3)
        fprintf(stderr, "gpu-peer-cublas: %s %dx%dx%d batch %d failed in the CUDA or cuBLAS call\n",
                rt_peer_names[s->type], s->m, s->n, s->k, s->batch);
    if (e0)
        c->event_destroy(e0);
    if (e1)
        c->event_destroy(e1);
    if (da)
        c->mem_free(da);
    if (db)
        c->mem_free(db);
    if (dc)
        c->mem_free(dc);
    free(ha);
    free(hb);
    free(hc);
    free(ms);
    free(ua);
    free(ub);
    return rc;
}

static int rt_peer_usage(void) {
    fprintf(stderr, "usage: gpu-peer-cublas [--reps=N] [f16|bf16] M N K [BATCH] [, [f16|bf16] M N "
                    "K [BATCH]]...\n");
    return 2;
}

int main(int argc, char **argv) {
    int reps = 20;
    rt_peer_shape shapes[64];
    int n_shapes = 0, vals[4], n_vals = 0;
    rt_peer_type type = RT_PEER_F32;
    for (int i = 1; i <= argc; i++) {
        const char *a = i < argc ? argv[i] : ",";
        if (strncmp(a, "--reps=", 7) == 0) {
            reps = atoi(a + 7);
            if (reps < 1 || reps > 1000)
                return rt_peer_usage();
            continue;
        }
        if (strcmp(a, ",") == 0) {
            if (n_vals == 0 && type != RT_PEER_F32)
                return rt_peer_usage(); // a type word without its shape
            if (n_vals == 0)
                continue;
            if (n_vals < 3 || n_shapes == 64 || (type != RT_PEER_F32 && n_vals == 4))
                return rt_peer_usage(); // 16-bit shapes are not batched
            shapes[n_shapes++] =
                (rt_peer_shape){vals[0], vals[1], vals[2], n_vals == 4 ? vals[3] : 1, type};
            n_vals = 0;
            type = RT_PEER_F32;
            continue;
        }
        if (strcmp(a, "f16") == 0 || strcmp(a, "bf16") == 0) {
            if (n_vals != 0 || type != RT_PEER_F32)
                return rt_peer_usage(); // the type word opens a shape
            type = a[0] == 'f' ? RT_PEER_F16 : RT_PEER_BF16;
            continue;
        }
        char *end;
        long v = strtol(a, &end, 10);
        if (*end || v < 1 || v > 65536 || n_vals == 4)
            return rt_peer_usage();
        vals[n_vals++] = (int)v;
    }
    if (n_shapes == 0)
        return rt_peer_usage();
    rt_peer_cuda c;
    memset(&c, 0, sizeof c);
    if (!rt_peer_load(&c))
        return 3;
    int dev;
    rt_cu_ctx ctx;
    rt_cublas h;
    if (c.init(0) || c.device_get(&dev, 0) || c.ctx_retain(&ctx, dev) || c.ctx_set(ctx)) {
        fprintf(stderr, "gpu-peer-cublas: no CUDA device\n");
        return 3;
    }
    if (c.blas_create(&h) || c.blas_math(h, 0)) {
        fprintf(stderr, "gpu-peer-cublas: cublasCreate failed\n");
        return 3;
    }
    int worst = 0;
    for (int i = 0; i < n_shapes; i++) {
        int rc = rt_peer_shape_run(&c, h, &shapes[i], reps);
        worst = rc > worst ? rc : worst;
    }
    return worst;
}
