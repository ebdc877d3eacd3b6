// fake-cublas.c: a stand-in for libcuda and libcublas together (one shared library that
// test-gpu-peer-cublas.sh points $RTGEN_LIBCUDA and $RTGEN_LIBCUBLAS at), with the entry points
// bench/gpu-peer-cublas.c opens. "Device" memory is host memory; events read a clock that each
// GEMM call advances by 1 ms; the GEMMs compute on the host in column-major order as cuBLAS
// defines them, decoding A and B by the cudaDataType_t they are given (CUDA_R_32F, CUDA_R_16F,
// CUDA_R_16BF) and refusing any other type, a C that is not CUDA_R_32F or a compute type that is
// not CUBLAS_COMPUTE_32F. $FAKE_CUBLAS_WRONG=1 perturbs one element of every result.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

// The entry points, with the parameter types of cuda.h and cublas_api.h spelled plainly
// (handles as void *, device pointers as uint64_t, enums as int).
FAKE_EXPORT int cuInit(unsigned f);
FAKE_EXPORT int cuDeviceGet(int *d, int i);
FAKE_EXPORT int cuDevicePrimaryCtxRetain(void **c, int d);
FAKE_EXPORT int cuCtxSetCurrent(void *c);
FAKE_EXPORT int cuMemAlloc_v2(uint64_t *p, size_t n);
FAKE_EXPORT int cuMemFree_v2(uint64_t p);
FAKE_EXPORT int cuMemcpyHtoD_v2(uint64_t d, const void *s, size_t n);
FAKE_EXPORT int cuMemcpyDtoH_v2(void *d, uint64_t s, size_t n);
FAKE_EXPORT int cuEventCreate(void **e, unsigned f);
FAKE_EXPORT int cuEventRecord(void *e, void *s);
FAKE_EXPORT int cuEventSynchronize(void *e);
FAKE_EXPORT int cuEventDestroy_v2(void *e);
FAKE_EXPORT int cuEventElapsedTime_v2(float *ms, void *a, void *b);
FAKE_EXPORT int cuCtxSynchronize(void);
FAKE_EXPORT int cublasCreate_v2(void **h);
FAKE_EXPORT int cublasSetMathMode(void *h, int m);
FAKE_EXPORT int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha,
                               const float *A, int lda, const float *B, int ldb, const float *beta,
                               float *C, int ldc);
FAKE_EXPORT int cublasSgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k,
                                          const float *alpha, const float *A, int lda, long long sa,
                                          const float *B, int ldb, long long sb, const float *beta,
                                          float *C, int ldc, long long sc, int batch);
FAKE_EXPORT int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha,
                             const void *A, int at, int lda, const void *B, int bt, int ldb,
                             const void *beta, void *C, int ct, int ldc, int compute, int algo);

static double fake_clock_ms;

FAKE_EXPORT int cuInit(unsigned f) {
    (void)f;
    return 0;
}
FAKE_EXPORT int cuDeviceGet(int *d, int i) {
    *d = i;
    return i == 0 ? 0 : 101;
}
FAKE_EXPORT int cuDevicePrimaryCtxRetain(void **c, int d) {
    (void)d;
    *c = &fake_clock_ms;
    return 0;
}
FAKE_EXPORT int cuCtxSetCurrent(void *c) {
    (void)c;
    return 0;
}
FAKE_EXPORT int cuMemAlloc_v2(uint64_t *p, size_t n) {
    void *m = malloc(n);
    if (m) // uninitialized, as device memory is: NaN bytes, so a GEMM that reads C with beta 0
        memset(m, 0xff, n); // fails here and not only where malloc happens to reuse memory
    *p = (uint64_t)(uintptr_t)m;
    return m ? 0 : 2;
}
FAKE_EXPORT int cuMemFree_v2(uint64_t p) {
    free((void *)(uintptr_t)p);
    return 0;
}
FAKE_EXPORT int cuMemcpyHtoD_v2(uint64_t d, const void *s, size_t n) {
    memcpy((void *)(uintptr_t)d, s, n);
    return 0;
}
FAKE_EXPORT int cuMemcpyDtoH_v2(void *d, uint64_t s, size_t n) {
    memcpy(d, (const void *)(uintptr_t)s, n);
    return 0;
}
FAKE_EXPORT int cuEventCreate(void **e, unsigned f) {
    (void)f;
    *e = calloc(1, sizeof(double));
    return *e ? 0 : 2;
}
FAKE_EXPORT int cuEventDestroy_v2(void *e) {
    free(e);
    return 0;
}
FAKE_EXPORT int cuEventRecord(void *e, void *s) {
    (void)s;
    *(double *)e = fake_clock_ms;
    return 0;
}
FAKE_EXPORT int cuEventSynchronize(void *e) {
    (void)e;
    return 0;
}
FAKE_EXPORT int cuEventElapsedTime_v2(float *ms, void *a, void *b) {
    *ms = (float)(*(double *)b - *(double *)a);
    return 0;
}
FAKE_EXPORT int cuCtxSynchronize(void) {
    return 0;
}
FAKE_EXPORT int cublasCreate_v2(void **h) {
    *h = &fake_clock_ms;
    return 0;
}
FAKE_EXPORT int cublasSetMathMode(void *h, int m) {
    (void)h;
    return m == 0 ? 0 : 7;
}

// Element i of an array of cudaDataType_t t (0 float, 2 half, 14 bfloat16).
static double fake_elem(const void *p, int t, size_t i) {
    if (t == 0)
        return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    if (t == 14) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

// C (m x n, column-major, ldc) = alpha A (m x k, lda) B (k x n, ldb) + beta C, no transposes.
static int fake_gemm(int ta, int tb, int m, int n, int k, const float *alpha, const void *A, int at,
                     int lda, const void *B, int bt, int ldb, const float *beta, float *C,
                     int ldc) {
    if (ta != 0 || tb != 0 || lda < m || ldb < k || ldc < m)
        return 7; // CUBLAS_STATUS_INVALID_VALUE
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int l = 0; l < k; l++)
                s += fake_elem(A, at, (size_t)l * lda + i) * fake_elem(B, bt, (size_t)j * ldb + l);
            // As cuBLAS: beta == 0 does not read C (device memory is uninitialized; 0 * NaN).
            double c0 = *beta == 0.0f ? 0.0 : (double)*beta * (double)C[(size_t)j * ldc + i];
            C[(size_t)j * ldc + i] = (float)((double)*alpha * s + c0);
        }
    const char *w = getenv("FAKE_CUBLAS_WRONG");
    if (w && *w == '1')
        C[0] += 1.0f;
    fake_clock_ms += 1.0;
    return 0;
}

FAKE_EXPORT int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha,
                               const float *A, int lda, const float *B, int ldb, const float *beta,
                               float *C, int ldc) {
    (void)h;
    return fake_gemm(ta, tb, m, n, k, alpha, A, 0, lda, B, 0, ldb, beta, C, ldc);
}
FAKE_EXPORT int cublasSgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k,
                                          const float *alpha, const float *A, int lda, long long sa,
                                          const float *B, int ldb, long long sb, const float *beta,
                                          float *C, int ldc, long long sc, int batch) {
    (void)h;
    for (int b = 0; b < batch; b++) {
        int rc = fake_gemm(ta, tb, m, n, k, alpha, A + b * sa, 0, lda, B + b * sb, 0, ldb, beta,
                           C + b * sc, ldc);
        if (rc)
            return rc;
    }
    return 0;
}
FAKE_EXPORT int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha,
                             const void *A, int at, int lda, const void *B, int bt, int ldb,
                             const void *beta, void *C, int ct, int ldc, int compute, int algo) {
    (void)h;
    (void)algo;
    if ((at != 0 && at != 2 && at != 14) || bt != at || ct != 0 || compute != 68)
        return 15; // CUBLAS_STATUS_NOT_SUPPORTED
    return fake_gemm(ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ldc);
}
