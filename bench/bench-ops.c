// bench-ops.c: issue 4's CPU benchmark. Every op (fp32 GEMMs of many shapes, Conv2D, depthwise
// conv, ReLU, AvgPool, ReduceMean, softmax, linear+bias+GELU) is written as a spec, constructed,
// JIT-built and profiled through librtgen on the detected host, and its winner's min/median time
// is put next to oneDNN (dnnl_sgemm and its primitives) and OpenBLAS (SkylakeX kernels) measured
// in the same process with the same method, on 1 and 2 threads; BLIS comes from bench-ops-blis
// (--blis=FILE). Outputs are compared with the peer's. Reported, never asserted (style.md §6).
//
// usage: bench-ops [--quick] [--ops=NAME,...] [--threads=1,2] [--top-k=N] [--budget-ms=MS]
//                  [--blis=FILE] [--list-gemm]            (bench/run.sh runs everything)
#include "bench-util.h"
#include "rtgen.h"

#include <cblas.h>
#include <dnnl.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void openblas_set_num_threads(int n);
char *openblas_get_config(void);

typedef enum bench_kind {
    BK_GEMM,   // C(M,N) = A(M,K) B(K,N)
    BK_CONV,   // NCHW, weights (F, C, KH, KW) or (F, C) for 1x1
    BK_DWCONV, // NCHW, weights (C, KH, KW)
    BK_RELU,
    BK_POOL, // average, no padding
    BK_RMEAN,
    BK_SOFTMAX,
    BK_LGELU, // Y = gelu_erf(X Wt + bias)
} bench_kind;

// One benchmark op. d[] by kind: GEMM/LGELU {M, N, K}; CONV/DWCONV/POOL {N, C, H, W, F, KH,
// KW, stride, pad, OH, OW}; RELU {N, C, H, W}; RMEAN {B, R, L}; SOFTMAX {N, D}.
typedef struct bench_op {
    const char *name;
    bench_kind kind;
    const char *spec; // relative to the source root
    const char *set;  // "M=256,N=256,K=256": --set bindings ("" for none)
    int64_t d[11];
    bool quick; // part of --quick
} bench_op;

// clang-format off
static const bench_op bench_ops[] = {
    {"gemm256",   BK_GEMM, "examples/matmul.spec", "M=256,N=256,K=256",    {256, 256, 256}, true},
    {"gemm512",   BK_GEMM, "examples/matmul.spec", "M=512,N=512,K=512",    {512, 512, 512}, false},
    {"gemm1024",  BK_GEMM, "examples/matmul.spec", "M=1024,N=1024,K=1024", {1024, 1024, 1024}, true},
    {"gemm2048",  BK_GEMM, "examples/matmul.spec", "M=2048,N=2048,K=2048", {2048, 2048, 2048}, false},
    {"gemm4096",  BK_GEMM, "examples/matmul.spec", "M=4096,N=4096,K=4096", {4096, 4096, 4096}, false},
    {"gemm_bert_out",  BK_GEMM, "examples/bench/bert_out.spec",  "", {512, 1024, 1024}, false},
    {"gemm_bert_ffn1", BK_GEMM, "examples/bench/bert_ffn1.spec", "", {512, 4096, 1024}, false},
    {"gemm_bert_ffn2", BK_GEMM, "examples/bench/bert_ffn2.spec", "", {512, 1024, 4096}, false},
    {"gemm_M0",   BK_GEMM, "examples/bench/M0.spec", "", {65536, 1024, 2}, false},
    {"gemm_M1",   BK_GEMM, "examples/bench/M1.spec", "", {128, 1000, 4032}, false},
    {"gemm_prime", BK_GEMM, "examples/matmul.spec", "M=1021,N=1031,K=1033", {1021, 1031, 1033},
     false},
    {"conv3x3_b1", BK_CONV, "bench/specs/conv3x3.spec", "N=1,C=64,H=56,W=56,F=64",
     {1, 64, 56, 56, 64, 3, 3, 1, 1, 56, 56}, true},
    {"conv3x3_b8", BK_CONV, "bench/specs/conv3x3.spec", "N=8,C=256,H=14,W=14,F=256",
     {8, 256, 14, 14, 256, 3, 3, 1, 1, 14, 14}, false},
    {"conv3x3s2_b2", BK_CONV, "bench/specs/conv3x3s2.spec", "",
     {2, 128, 58, 58, 128, 3, 3, 2, 1, 29, 29}, false},
    {"conv1x1_b4", BK_CONV, "bench/specs/conv1x1.spec", "",
     {4, 128, 28, 28, 512, 1, 1, 1, 0, 28, 28}, false},
    {"dwconv5x5s2_b8", BK_DWCONV, "bench/specs/dwconv5x5s2.spec", "",
     {8, 84, 83, 83, 84, 5, 5, 2, 2, 42, 42}, false},
    {"dwconv3x3_b4", BK_DWCONV, "bench/specs/dwconv3x3.spec", "",
     {4, 128, 56, 56, 128, 3, 3, 1, 1, 56, 56}, true},
    {"relu_b8",   BK_RELU, "bench/specs/relu.spec", "", {8, 1008, 42, 42}, false},
    {"relu_b1",   BK_RELU, "bench/specs/relu.spec", "N=1", {1, 1008, 42, 42}, true},
    {"avgpool_b8", BK_POOL, "bench/specs/avgpool.spec", "",
     {8, 617, 21, 21, 617, 3, 3, 2, 0, 10, 10}, true},
    {"reduce_mean_b16", BK_RMEAN, "bench/specs/reduce_mean.spec", "", {16, 512, 1024}, true},
    {"softmax",   BK_SOFTMAX, "bench/specs/softmax.spec", "", {4096, 1024}, false},
    {"softmax_small", BK_SOFTMAX, "bench/specs/softmax.spec", "N=512", {512, 1024}, true},
    {"linear_gelu", BK_LGELU, "bench/specs/linear_gelu.spec", "", {512, 4096, 1024}, false},
    {"linear_gelu_small", BK_LGELU, "bench/specs/linear_gelu.spec", "M=128,N=1024,K=1024",
     {128, 1024, 1024}, true},
};
// clang-format on
#define BENCH_N_OPS ((int)(sizeof bench_ops / sizeof bench_ops[0]))

typedef struct bench_opts {
    bool quick, list_gemm;
    const char *ops; // comma-separated name prefixes, NULL: all
    int threads[4];
    int n_threads;
    int top_k;        // 0: 10 (4 for ops over 20 GFLOP), --quick: 3
    double budget_ms; // per kernel
    const char *blis; // bench-ops-blis output
} bench_opts;

// ---------------------------------------------------------------------------------------------
// Work of an op: FLOPs and minimum DRAM bytes (inputs once + outputs once)
// ---------------------------------------------------------------------------------------------

static bool bench_compute_bound(const bench_op *o) {
    return o->kind == BK_GEMM || o->kind == BK_CONV || o->kind == BK_LGELU;
}

static double bench_flops(const bench_op *o) {
    const int64_t *d = o->d;
    switch (o->kind) {
    case BK_GEMM:
    case BK_LGELU:
        return 2.0 * (double)d[0] * (double)d[1] * (double)d[2];
    case BK_CONV:
        return 2.0 * (double)(d[0] * d[4] * d[9] * d[10]) * (double)(d[1] * d[5] * d[6]);
    case BK_DWCONV:
        return 2.0 * (double)(d[0] * d[1] * d[9] * d[10]) * (double)(d[5] * d[6]);
    case BK_POOL:
        return (double)(d[0] * d[1] * d[9] * d[10]) * (double)(d[5] * d[6]);
    case BK_RELU:
        return (double)(d[0] * d[1] * d[2] * d[3]);
    case BK_RMEAN:
        return (double)(d[0] * d[1] * d[2]);
    case BK_SOFTMAX:
        return 4.0 * (double)(d[0] * d[1]);
    }
    return 0;
}

static double bench_bytes(const bench_op *o) {
    const int64_t *d = o->d;
    switch (o->kind) {
    case BK_GEMM:
        return 4.0 * (double)(d[0] * d[2] + d[2] * d[1] + d[0] * d[1]);
    case BK_LGELU:
        return 4.0 * (double)(d[0] * d[2] + d[2] * d[1] + d[0] * d[1] + d[1]);
    case BK_CONV:
        return 4.0 * (double)(d[0] * d[1] * d[2] * d[3] + d[4] * d[1] * d[5] * d[6] +
                              d[0] * d[4] * d[9] * d[10]);
    case BK_DWCONV:
        return 4.0 * (double)(d[0] * d[1] * d[2] * d[3] + d[1] * d[5] * d[6] +
                              d[0] * d[1] * d[9] * d[10]);
    case BK_POOL:
        return 4.0 * (double)(d[0] * d[1] * d[2] * d[3] + d[0] * d[1] * d[9] * d[10]);
    case BK_RELU:
        return 8.0 * (double)(d[0] * d[1] * d[2] * d[3]);
    case BK_RMEAN:
        return 4.0 * (double)(d[0] * d[1] * d[2] + d[0] * d[1]);
    case BK_SOFTMAX:
        return 8.0 * (double)(d[0] * d[1]);
    }
    return 0;
}

// Performance at a time: GFLOP/s for compute-bound ops, GB/s otherwise (both per ns * 1e9 / 1e9).
static double bench_perf(const bench_op *o, double ns) {
    if (ns <= 0)
        return 0;
    return (bench_compute_bound(o) ? bench_flops(o) : bench_bytes(o)) / ns;
}

static void bench_shape(const bench_op *o, char *buf, size_t n) {
    const int64_t *d = o->d;
    switch (o->kind) {
    case BK_GEMM:
    case BK_LGELU:
        snprintf(buf, n, "%lldx%lldx%lld", (long long)d[0], (long long)d[1], (long long)d[2]);
        break;
    case BK_CONV:
    case BK_DWCONV:
    case BK_POOL:
        snprintf(buf, n, "%lldx%lldx%lldx%lld k%lld s%lld f%lld", (long long)d[0], (long long)d[1],
                 (long long)d[2], (long long)d[3], (long long)d[5], (long long)d[7],
                 (long long)d[4]);
        break;
    case BK_RELU:
        snprintf(buf, n, "%lldx%lldx%lldx%lld", (long long)d[0], (long long)d[1], (long long)d[2],
                 (long long)d[3]);
        break;
    case BK_RMEAN:
        snprintf(buf, n, "%lldx%lldx%lld", (long long)d[0], (long long)d[1], (long long)d[2]);
        break;
    case BK_SOFTMAX:
        snprintf(buf, n, "%lldx%lld", (long long)d[0], (long long)d[1]);
        break;
    }
}

// ---------------------------------------------------------------------------------------------
// Peers
// ---------------------------------------------------------------------------------------------

typedef struct bench_peer {
    const bench_op *op;
    int threads;
    float *in[3]; // inputs in spec order
    float *out;
    int64_t out_elems;
    // oneDNN primitive (all but GEMM)
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    dnnl_primitive_t prim;
    dnnl_memory_t mem[4];
    dnnl_exec_arg_t args[4];
    int nargs;
} bench_peer;

static void peer_dnnl_sgemm(void *ctx) {
    bench_peer *p = ctx;
    const int64_t *d = p->op->d;
    dnnl_sgemm('N', 'N', d[0], d[1], d[2], 1.0f, p->in[0], d[2], p->in[1], d[1], 0.0f, p->out,
               d[1]);
}

static void peer_dnnl_prim(void *ctx) {
    bench_peer *p = ctx;
    dnnl_primitive_execute(p->prim, p->strm, p->nargs, p->args);
    dnnl_stream_wait(p->strm);
}

static void peer_openblas_sgemm(void *ctx) {
    bench_peer *p = ctx;
    const int64_t *d = p->op->d;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d[0], (int)d[1], (int)d[2], 1.0f,
                p->in[0], (int)d[2], p->in[1], (int)d[1], 0.0f, p->out, (int)d[1]);
}

// sgemm, then bias + GELU (erf form) in a C loop on the same threads.
static void peer_openblas_lgelu(void *ctx) {
    bench_peer *p = ctx;
    peer_openblas_sgemm(ctx);
    const int64_t m = p->op->d[0], n = p->op->d[1];
    const float *bias = p->in[2];
    float *y = p->out;
#pragma omp parallel for num_threads(p->threads) schedule(static)
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float t = y[i * n + j] + bias[j];
            y[i * n + j] = 0.5f * t * (1.0f + erff(t * 0.70710678f));
        }
}

#define DNNL_CHECK(call)                                                                           \
    do {                                                                                           \
        dnnl_status_t s_ = (call);                                                                 \
        if (s_ != dnnl_success) {                                                                  \
            fprintf(stderr, "bench-ops: %s failed (status %d)\n", #call, (int)s_);                 \
            return false;                                                                          \
        }                                                                                          \
    } while (0)

static bool peer_mem(bench_peer *p, int slot, int arg, int nd, const int64_t *dims,
                     dnnl_format_tag_t tag, void *ptr) {
    dnnl_memory_desc_t md;
    dnnl_dims_t dd;
    for (int i = 0; i < nd; i++)
        dd[i] = dims[i];
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&md, nd, dd, dnnl_f32, tag));
    DNNL_CHECK(dnnl_memory_create(&p->mem[slot], &md, p->eng, ptr));
    p->args[slot] = (dnnl_exec_arg_t){arg, p->mem[slot]};
    p->nargs = slot + 1;
    return true;
}

static const dnnl_memory_desc_t *peer_md(bench_peer *p, int slot) {
    const dnnl_memory_desc_t *md = NULL;
    dnnl_memory_get_memory_desc(p->mem[slot], &md);
    return md;
}

// Creates the oneDNN primitive of a non-GEMM op on plain (NCHW / row-major) layouts, the
// layouts rtgen's kernels read and write.
static bool peer_dnnl_setup(bench_peer *p) {
    const bench_op *o = p->op;
    const int64_t *d = o->d;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    union {
        dnnl_convolution_desc_t conv;
        dnnl_eltwise_desc_t elt;
        dnnl_pooling_v2_desc_t pool;
        dnnl_reduction_desc_t red;
        dnnl_softmax_desc_t smax;
        dnnl_matmul_desc_t mm;
    } desc;
    switch (o->kind) {
    case BK_CONV:
    case BK_DWCONV: {
        bool dw = o->kind == BK_DWCONV;
        int64_t src[4] = {d[0], d[1], d[2], d[3]}, dst[4] = {d[0], d[4], d[9], d[10]};
        int64_t wf[4] = {d[4], d[1], d[5], d[6]}, wg[5] = {d[1], 1, 1, d[5], d[6]};
        if (!peer_mem(p, 0, DNNL_ARG_SRC, 4, src, dnnl_nchw, p->in[0]) ||
            !(dw ? peer_mem(p, 1, DNNL_ARG_WEIGHTS, 5, wg, dnnl_goihw, p->in[1])
                 : peer_mem(p, 1, DNNL_ARG_WEIGHTS, 4, wf, dnnl_oihw, p->in[1])) ||
            !peer_mem(p, 2, DNNL_ARG_DST, 4, dst, dnnl_nchw, p->out))
            return false;
        dnnl_dims_t strides = {d[7], d[7]}, pad_l = {d[8], d[8]};
        dnnl_dims_t pad_r = {(d[9] - 1) * d[7] + d[5] - d[2] - d[8],
                             (d[10] - 1) * d[7] + d[6] - d[3] - d[8]};
        DNNL_CHECK(dnnl_convolution_forward_desc_init(
            &desc.conv, dnnl_forward_inference, dnnl_convolution_auto, peer_md(p, 0), peer_md(p, 1),
            NULL, peer_md(p, 2), strides, pad_l, pad_r));
        break;
    }
    case BK_RELU: {
        int64_t dims[4] = {d[0], d[1], d[2], d[3]};
        if (!peer_mem(p, 0, DNNL_ARG_SRC, 4, dims, dnnl_nchw, p->in[0]) ||
            !peer_mem(p, 1, DNNL_ARG_DST, 4, dims, dnnl_nchw, p->out))
            return false;
        DNNL_CHECK(dnnl_eltwise_forward_desc_init(&desc.elt, dnnl_forward_inference,
                                                  dnnl_eltwise_relu, peer_md(p, 0), 0.0f, 0.0f));
        break;
    }
    case BK_POOL: {
        int64_t src[4] = {d[0], d[1], d[2], d[3]}, dst[4] = {d[0], d[1], d[9], d[10]};
        if (!peer_mem(p, 0, DNNL_ARG_SRC, 4, src, dnnl_nchw, p->in[0]) ||
            !peer_mem(p, 1, DNNL_ARG_DST, 4, dst, dnnl_nchw, p->out))
            return false;
        dnnl_dims_t strides = {d[7], d[7]}, kernel = {d[5], d[6]}, dil = {0, 0};
        dnnl_dims_t pad_l = {d[8], d[8]};
        dnnl_dims_t pad_r = {(d[9] - 1) * d[7] + d[5] - d[2] - d[8],
                             (d[10] - 1) * d[7] + d[6] - d[3] - d[8]};
        DNNL_CHECK(dnnl_pooling_v2_forward_desc_init(
            &desc.pool, dnnl_forward_inference, dnnl_pooling_avg_exclude_padding, peer_md(p, 0),
            peer_md(p, 1), strides, kernel, dil, pad_l, pad_r));
        break;
    }
    case BK_RMEAN: {
        int64_t src[3] = {d[0], d[1], d[2]}, dst[3] = {d[0], d[1], 1};
        if (!peer_mem(p, 0, DNNL_ARG_SRC, 3, src, dnnl_abc, p->in[0]) ||
            !peer_mem(p, 1, DNNL_ARG_DST, 3, dst, dnnl_abc, p->out))
            return false;
        DNNL_CHECK(dnnl_reduction_desc_init(&desc.red, dnnl_reduction_mean, peer_md(p, 0),
                                            peer_md(p, 1), 0.0f, 0.0f));
        break;
    }
    case BK_SOFTMAX: {
        int64_t dims[2] = {d[0], d[1]};
        if (!peer_mem(p, 0, DNNL_ARG_SRC, 2, dims, dnnl_ab, p->in[0]) ||
            !peer_mem(p, 1, DNNL_ARG_DST, 2, dims, dnnl_ab, p->out))
            return false;
        DNNL_CHECK(
            dnnl_softmax_forward_desc_init(&desc.smax, dnnl_forward_inference, peer_md(p, 0), 1));
        break;
    }
    case BK_LGELU: {
        int64_t src[2] = {d[0], d[2]}, wt[2] = {d[2], d[1]}, bias[2] = {1, d[1]};
        int64_t dst[2] = {d[0], d[1]};
        if (!peer_mem(p, 0, DNNL_ARG_SRC, 2, src, dnnl_ab, p->in[0]) ||
            !peer_mem(p, 1, DNNL_ARG_WEIGHTS, 2, wt, dnnl_ab, p->in[1]) ||
            !peer_mem(p, 2, DNNL_ARG_BIAS, 2, bias, dnnl_ab, p->in[2]) ||
            !peer_mem(p, 3, DNNL_ARG_DST, 2, dst, dnnl_ab, p->out))
            return false;
        DNNL_CHECK(dnnl_matmul_desc_init(&desc.mm, peer_md(p, 0), peer_md(p, 1), peer_md(p, 2),
                                         peer_md(p, 3)));
        DNNL_CHECK(dnnl_post_ops_create(&po));
        DNNL_CHECK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_gelu_erf, 0.0f, 0.0f));
        DNNL_CHECK(dnnl_primitive_attr_create(&attr));
        DNNL_CHECK(dnnl_primitive_attr_set_post_ops(attr, po));
        break;
    }
    case BK_GEMM:
        return true; // dnnl_sgemm, no primitive
    }
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &desc, attr, p->eng, NULL);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (po)
        dnnl_post_ops_destroy(po);
    DNNL_CHECK(st);
    st = dnnl_primitive_create(&p->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    DNNL_CHECK(st);
    return true;
}

static void peer_dnnl_release(bench_peer *p) {
    if (p->prim)
        dnnl_primitive_destroy(p->prim);
    for (int i = 0; i < 4; i++)
        if (p->mem[i])
            dnnl_memory_destroy(p->mem[i]);
    p->prim = NULL;
    memset(p->mem, 0, sizeof p->mem);
    p->nargs = 0;
}

// ---------------------------------------------------------------------------------------------
// BLIS results (bench-ops-blis output: "blis M N K THREADS MIN_NS MEDIAN_NS MAXERR ARCH")
// ---------------------------------------------------------------------------------------------

typedef struct bench_blis_row {
    int64_t m, n, k;
    int threads;
    double min_ns, median_ns, err;
} bench_blis_row;

static bench_blis_row bench_blis[256];
static int bench_n_blis;
static char bench_blis_arch[64] = "";

static void bench_blis_read(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "bench-ops: cannot read %s (BLIS column left empty)\n", path);
        return;
    }
    char line[512];
    while (fgets(line, sizeof line, f) && bench_n_blis < 256) {
        bench_blis_row r;
        long long m, n, k;
        char arch[64];
        if (sscanf(line, "blis %lld %lld %lld %d %lf %lf %lf %63s", &m, &n, &k, &r.threads,
                   &r.min_ns, &r.median_ns, &r.err, arch) == 8) {
            r.m = m, r.n = n, r.k = k;
            bench_blis[bench_n_blis++] = r;
            snprintf(bench_blis_arch, sizeof bench_blis_arch, "%s", arch);
        }
    }
    fclose(f);
}

static const bench_blis_row *bench_blis_find(const bench_op *o, int threads) {
    if (o->kind != BK_GEMM)
        return NULL;
    for (int i = 0; i < bench_n_blis; i++)
        if (bench_blis[i].m == o->d[0] && bench_blis[i].n == o->d[1] &&
            bench_blis[i].k == o->d[2] && bench_blis[i].threads == threads)
            return &bench_blis[i];
    return NULL;
}

// ---------------------------------------------------------------------------------------------
// One op on one thread count
// ---------------------------------------------------------------------------------------------

typedef struct bench_row {
    bool ok;
    double rt_min_ns, rt_med_ns;
    double dnnl_min_ns, dnnl_med_ns;
    double oblas_min_ns, oblas_med_ns; // 0: no OpenBLAS peer for this op
    double err;                        // max |rtgen - peer| / max |peer| over the peers
    int32_t winner, n_cands, n_ok;
    double build_ms;
    char what[160];
} bench_row;

static int bench_parse_sets(rt_arena *a, const char *text, rt_size_binding *out, int max) {
    int n = 0;
    const char *s = text;
    while (*s && n < max) {
        const char *eq = strchr(s, '='), *end = strchr(s, ',');
        if (!eq)
            break;
        if (!end)
            end = s + strlen(s);
        out[n].name = rt_arena_strndup(a, s, (size_t)(eq - s));
        if (!out[n].name)
            break;
        out[n].value = strtoll(eq + 1, NULL, 10);
        n++;
        s = *end ? end + 1 : end;
    }
    return n;
}

// Max |got - ref| / max |ref| (a normwise relative error; elementwise relative errors blow up
// at the zeros of a GEMM's output).
static double bench_err(const double *got, const float *ref, int64_t n) {
    double max_diff = 0, max_ref = 0;
    for (int64_t i = 0; i < n; i++) {
        double diff = fabs(got[i] - (double)ref[i]);
        if (!(diff <= max_diff)) // NaN propagates
            max_diff = diff;
        max_ref = fmax(max_ref, fabs((double)ref[i]));
    }
    return max_diff / fmax(max_ref, 1e-30);
}

static float *bench_floats(const rt_tensor_data *t) {
    int64_t n = t->layout.elems;
    float *f = aligned_alloc(64, (size_t)((n + 15) / 16 * 16) * sizeof(float));
    if (f)
        for (int64_t i = 0; i < n; i++)
            f[i] = (float)t->data[i];
    return f;
}

static void bench_rtgen_run(void *ctx) {
    rt_err err = {0};
    rt_cpu_runner_run(ctx, &err);
}

// Rounds of turns in which rtgen's winner and oneDNN are timed, and the pause before each turn
// (rt_bench_time_turns).
#define BENCH_ROUNDS    5
#define BENCH_SETTLE_MS 20

static void bench_run_op(const bench_op *o, const bench_opts *bo, const rt_device *dev,
                         dnnl_engine_t eng, dnnl_stream_t strm, int threads, bench_row *row) {
    memset(row, 0, sizeof *row);
    rt_arena *a = rt_arena_new(1 << 20);
    if (!a)
        return;
    rt_err err = {0};
    rt_size_binding sets[12];
    int n_sets = bench_parse_sets(a, o->set, sets, 12);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", RTGEN_SOURCE_DIR, o->spec);
    int top_k = bo->top_k > 0 ? bo->top_k : bo->quick ? 3 : bench_flops(o) > 20e9 ? 4 : 10;
    rt_perf_options popt = {.top_k = top_k};
    rt_cpu_options copt = {
        .profile = true, .threads = threads, .budget_ms = bo->budget_ms, .timeout_ms = 300000};
    rt_op *op;
    rt_perf_result *perf;
    rt_bindings *b;
    rt_cpu_report *rep;
    bench_peer p = {.op = o, .threads = threads, .eng = eng, .strm = strm};
    bench_peer po = {0}; // OpenBLAS: p with an output of its own
    rt_cpu_runner *rn = NULL;
    // rtgen constructs for the cores the row runs on, as a user would with a device file of
    // that many units; the peers likewise pick their blocking for the thread count they get.
    rt_device dev_row = *dev;
    if (threads > 0 && threads < dev_row.units)
        dev_row.units = threads;
    if (rt_spec_load(a, path, sets, n_sets, &op, &err) ||
        rt_perf_construct(a, op, &dev_row, &popt, &perf, &err) ||
        rt_bindings_new(a, op, 1, &b, &err) ||
        rt_cpu_build_and_profile(a, op, &dev_row, b, perf, &copt, &rep, &err)) {
        snprintf(row->what, sizeof row->what, "rtgen failed: %.120s", err.msg);
        goto done;
    }
    row->n_cands = rep->n;
    row->winner = rep->winner;
    row->build_ms = rep->total_ms;
    for (int32_t i = 0; i < rep->n; i++)
        row->n_ok += rep->cands[i].status == RT_CPU_CAND_OK;
    if (rep->winner < 0) {
        snprintf(row->what, sizeof row->what, "no correct candidate among %d", (int)rep->n);
        goto done;
    }
    const rt_cpu_cand *w = &rep->cands[rep->winner];
    snprintf(row->what, sizeof row->what, "%s", w->summary ? w->summary : w->name);
    // The peers read the very inputs rtgen was checked on.
    int n_in = 0;
    for (int32_t t = 0; t < op->n_tensors && n_in < 3; t++)
        if (op->tensors[t].role == RT_ROLE_INPUT)
            p.in[n_in++] = bench_floats(&b->tensors[t]);
    int32_t out_t = op->outputs[0];
    p.out_elems = b->tensors[out_t].layout.elems;
    bool oblas = o->kind == BK_GEMM || o->kind == BK_LGELU;
    p.out = aligned_alloc(64, (size_t)((p.out_elems + 15) / 16 * 16) * sizeof(float));
    po = p;
    po.out =
        oblas ? aligned_alloc(64, (size_t)((p.out_elems + 15) / 16 * 16) * sizeof(float)) : NULL;
    for (int i = 0; i < n_in; i++)
        if (!p.in[i])
            goto done;
    if (!p.out || (oblas && !po.out))
        goto done;
    // rtgen's winner runs in this process through a runner, on its own copy of the inputs.
    if (rt_cpu_runner_new(rep, -1, b, &rn, &err) || rt_cpu_runner_run(rn, &err)) {
        snprintf(row->what, sizeof row->what, "run winner: %.120s", err.msg);
        goto done;
    }
    rt_cpu_runner_outputs(rn, b);
    const double *got = b->tensors[out_t].data;
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    if (o->kind != BK_GEMM && !peer_dnnl_setup(&p)) {
        snprintf(row->what, sizeof row->what, "oneDNN primitive could not be created");
        goto done;
    }
    // rtgen and oneDNN take turns (rt_bench_time_turns); OpenBLAS is timed after them, on its
    // own: its pthreads spin for tens of milliseconds after a call, and would slow whichever
    // contender took the next turn.
    void (*fns[2])(void *) = {bench_rtgen_run,
                              o->kind == BK_GEMM ? peer_dnnl_sgemm : peer_dnnl_prim};
    void *ctxs[2] = {rn, &p};
    rt_bench_stats st[2];
    rt_bench_time_turns(2, fns, ctxs, bo->budget_ms, BENCH_ROUNDS, BENCH_SETTLE_MS, st);
    row->rt_min_ns = st[0].min_ns;
    row->rt_med_ns = st[0].median_ns;
    row->dnnl_min_ns = st[1].min_ns;
    row->dnnl_med_ns = st[1].median_ns;
    row->err = bench_err(got, p.out, p.out_elems);
    if (oblas) {
        rt_bench_time(o->kind == BK_GEMM ? peer_openblas_sgemm : peer_openblas_lgelu, &po,
                      bo->budget_ms, &st[0]);
        row->oblas_min_ns = st[0].min_ns;
        row->oblas_med_ns = st[0].median_ns;
        row->err = fmax(row->err, bench_err(got, po.out, p.out_elems));
    }
    row->ok = true;
done:
    rt_cpu_runner_free(rn);
    peer_dnnl_release(&p);
    for (int i = 0; i < 3; i++)
        free(p.in[i]);
    free(p.out);
    free(po.out);
    rt_arena_free(a);
    usleep(200000); // let the peers' spinning worker threads go to sleep before the next op
}

static bool bench_selected(const bench_op *o, const bench_opts *bo) {
    if (!bo->ops)
        return !bo->quick || o->quick;
    const char *s = bo->ops;
    while (*s) {
        const char *end = strchr(s, ',');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        if (n > 0 && strncmp(o->name, s, n) == 0)
            return true;
        if (!end)
            break;
        s = end + 1;
    }
    return false;
}

static void bench_usage(void) {
    fprintf(stderr, "usage: bench-ops [--quick] [--ops=NAME,...] [--threads=1,2] [--top-k=N]\n"
                    "                 [--budget-ms=MS] [--blis=FILE] [--list-gemm]\n"
                    "ops (name prefixes):");
    for (int i = 0; i < BENCH_N_OPS; i++)
        fprintf(stderr, " %s", bench_ops[i].name);
    fprintf(stderr, "\n");
}

static bool bench_parse_args(int argc, char **argv, bench_opts *bo) {
    *bo = (bench_opts){.threads = {1, 2}, .n_threads = 2};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "--quick") == 0) {
            bo->quick = true;
        } else if (strcmp(s, "--list-gemm") == 0) {
            bo->list_gemm = true;
        } else if (strncmp(s, "--ops=", 6) == 0) {
            bo->ops = s + 6;
        } else if (strncmp(s, "--blis=", 7) == 0) {
            bo->blis = s + 7;
        } else if (strncmp(s, "--top-k=", 8) == 0) {
            bo->top_k = atoi(s + 8);
            if (bo->top_k < 1 || bo->top_k > 64)
                return false;
        } else if (strncmp(s, "--budget-ms=", 12) == 0) {
            bo->budget_ms = atof(s + 12);
            if (!(bo->budget_ms > 0 && bo->budget_ms < 60000))
                return false;
        } else if (strncmp(s, "--threads=", 10) == 0) {
            bo->n_threads = 0;
            for (const char *t = s + 10; *t && bo->n_threads < 4;) {
                char *end;
                long v = strtol(t, &end, 10);
                if (end == t || v < 1 || v > 64)
                    return false;
                bo->threads[bo->n_threads++] = (int)v;
                t = *end == ',' ? end + 1 : end;
                if (*end && *end != ',')
                    return false;
            }
            if (bo->n_threads == 0)
                return false;
        } else {
            return false;
        }
    }
    if (bo->budget_ms == 0)
        bo->budget_ms = bo->quick ? 60 : 200;
    return true;
}

int main(int argc, char **argv) {
    // OpenBLAS reads OPENBLAS_CORETYPE when the library initializes, before main: without it,
    // it takes its SSE3 kernel on this CPU. bench/run.sh exports it; when run alone, re-execute.
    if (!getenv("OPENBLAS_CORETYPE")) {
        setenv("OPENBLAS_CORETYPE", rt_bench_openblas_core(), 1);
        execv("/proc/self/exe", argv);
    }
    bench_opts bo;
    if (!bench_parse_args(argc, argv, &bo)) {
        bench_usage();
        return 2;
    }
    if (bo.list_gemm) {
        for (int i = 0; i < BENCH_N_OPS; i++)
            if (bench_ops[i].kind == BK_GEMM && bench_selected(&bench_ops[i], &bo))
                printf("%lldx%lldx%lld\n", (long long)bench_ops[i].d[0],
                       (long long)bench_ops[i].d[1], (long long)bench_ops[i].d[2]);
        return 0;
    }
    if (bo.blis)
        bench_blis_read(bo.blis);
    rt_device dev;
    rt_err err = {0};
    if (rt_hal_detect_host(NULL, &dev, &err) != RT_OK) {
        fprintf(stderr, "bench-ops: host: %s\n", err.msg);
        return 1;
    }
    const char *cfg = openblas_get_config();
    bool skx = cfg && strstr(cfg, rt_bench_openblas_core());
    const dnnl_version_t *dv = dnnl_version();
    printf("host: %s (%s), %d cores\n", dev.name, dev.arch, (int)dev.units);
    printf("OpenBLAS: %s%s\n", cfg ? cfg : "?",
           skx ? "" : "   <-- not the core type for this CPU: ratios are unfair");
    printf("oneDNN: %d.%d.%d (primitives on plain NCHW / row-major layouts)\n", dv->major,
           dv->minor, dv->patch);
    printf("BLIS: %s\n", bench_n_blis ? bench_blis_arch : "(no --blis results)");
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&strm, eng, dnnl_stream_default_flags) != dnnl_success) {
        fprintf(stderr, "bench-ops: cannot create the oneDNN CPU engine\n");
        return 1;
    }
    double peak[4], triad[4];
    for (int t = 0; t < bo.n_threads; t++) {
        peak[t] = rt_bench_fma_peak_gflops(bo.threads[t]);
        triad[t] = rt_bench_triad_gbps(bo.threads[t], 128LL << 20);
        printf("measured on %d thread%s: %s FMA peak %.1f GFLOP/s, DRAM triad %.1f GB/s\n",
               bo.threads[t], bo.threads[t] > 1 ? "s" : "", rt_bench_fma_isa(), peak[t], triad[t]);
    }
    printf("\nunit: GFLOP/s for gemm/conv/linear_gelu (%% of FMA peak), GB/s of compulsory "
           "traffic otherwise (%% of DRAM triad).\nmed = at the median time, best = at the "
           "minimum; x = rtgen / peer at the median (> 1: rtgen faster); err = max|rtgen - "
           "peer| / max|peer|.\n\n");
    printf("%-18s %-26s %3s %6s %8s %8s %8s %8s %6s %8s %6s %8s %6s %6s %8s %6s %s\n", "op",
           "shape", "thr", "unit", "rt med", "rt best", "dnnl med", "dnnl bst", "x dnnl", "oblas",
           "x obl", "blis", "x blis", "%peak", "err", "cands", "rtgen winner");
    double log_sum[4] = {0};
    int log_n[4] = {0};
    for (int t = 0; t < bo.n_threads; t++) {
        int thr = bo.threads[t];
        for (int i = 0; i < BENCH_N_OPS; i++) {
            const bench_op *o = &bench_ops[i];
            if (!bench_selected(o, &bo))
                continue;
            bench_row r;
            bench_run_op(o, &bo, &dev, eng, strm, thr, &r);
            char shape[64];
            bench_shape(o, shape, sizeof shape);
            const char *unit = bench_compute_bound(o) ? "GFLOP" : "GB";
            if (!r.ok) {
                printf("%-18s %-26s %3d %6s  -- %s\n", o->name, shape, thr, unit, r.what);
                fflush(stdout);
                continue;
            }
            double rt = bench_perf(o, r.rt_med_ns), dn = bench_perf(o, r.dnnl_med_ns);
            double ob = bench_perf(o, r.oblas_med_ns);
            const bench_blis_row *bl = bench_blis_find(o, thr);
            double bg = bl ? bench_perf(o, bl->median_ns) : 0;
            double ceiling = bench_compute_bound(o) ? peak[t] : triad[t];
            char obs[16] = "-", obx[16] = "-", bls[16] = "-", blx[16] = "-", cands[16];
            if (ob > 0) {
                snprintf(obs, sizeof obs, "%.1f", ob);
                snprintf(obx, sizeof obx, "%.2f", rt / ob);
            }
            if (bg > 0) {
                snprintf(bls, sizeof bls, "%.1f", bg);
                snprintf(blx, sizeof blx, "%.2f", rt / bg);
            }
            snprintf(cands, sizeof cands, "%d/%d", (int)r.n_ok, (int)r.n_cands);
            printf("%-18s %-26s %3d %6s %8.1f %8.1f %8.1f %8.1f %6.2f %8s %6s %8s %6s %6.1f "
                   "%8.1e %6s #%d %s\n",
                   o->name, shape, thr, unit, rt, bench_perf(o, r.rt_min_ns), dn,
                   bench_perf(o, r.dnnl_min_ns), rt / dn, obs, obx, bls, blx,
                   ceiling > 0 ? 100.0 * rt / ceiling : 0.0, r.err, cands, (int)r.winner, r.what);
            fflush(stdout);
            log_sum[t] += log(rt / dn);
            log_n[t]++;
        }
    }
    printf("\n");
    for (int t = 0; t < bo.n_threads; t++)
        if (log_n[t] > 0)
            printf("geometric mean rtgen / oneDNN on %d thread%s: %.2f over %d ops\n",
                   bo.threads[t], bo.threads[t] > 1 ? "s" : "", exp(log_sum[t] / log_n[t]),
                   log_n[t]);
    dnnl_stream_destroy(strm);
    dnnl_engine_destroy(eng);
    return 0;
}
