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
    int top_k;         // 0: 10 (4 for ops over 20 GFLOP), --quick: 3
    double budget_ms;  // per kernel
    const char *blis;  // bench-ops-blis output
    int64_t llc_bytes; // --llc-mib, or from sysfs (main)
    bool self_test;
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
// Ceilings and the rows of an op
//
// A row's performance is graded against the ceiling its data lives under. Compute-bound ops
// (GEMM, conv, linear+GELU) against the FMA peak. A memory-bound op whose working set (its
// compulsory bytes) is smaller than the last-level cache gets two rows: "warm", timed back to
// back as before, where the data stays in the LLC between calls, against a triad measured
// inside the LLC ("l3-triad"); and "cold", against the DRAM triad, where each call takes the
// next of K copies of its buffers, K copies together at least BENCH_ROTATE_LLCS times the LLC,
// so that a call finds none of its data in the caches. One at least that large streams anyway:
// one "stream" row against the DRAM triad. A working set between one and four LLCs gets only the
// cold row (K = 2-4). A row graded against DRAM thus always moves at least 4 LLCs between
// two uses of the same byte.
// ---------------------------------------------------------------------------------------------

typedef enum bench_ceiling { BC_FMA, BC_L3, BC_DRAM, BC_COUNT } bench_ceiling;
static const char *const bench_ceiling_names[] = {"fma", "l3-triad", "dram-triad"};
_Static_assert(sizeof bench_ceiling_names / sizeof *bench_ceiling_names == BC_COUNT,
               "one name per bench_ceiling");

#define BENCH_ROTATE_LLCS 4

typedef struct bench_variant {
    const char *data; // "warm", "cold" (copies rotated) or "stream"
    bench_ceiling ceiling;
    int32_t copies; // buffer sets taken in turn, call after call
} bench_variant;

// The ceilings measured on one thread count.
typedef struct bench_ceilings {
    double fma_gflops, l3_gbps, dram_gbps;
    char fma_label[24]; // "fma-avx2", "fma-avx512"
} bench_ceilings;

static const char *bench_ceiling_label(const bench_ceilings *c, bench_ceiling k) {
    return k == BC_FMA ? c->fma_label : bench_ceiling_names[k];
}

static double bench_ceiling_value(const bench_ceilings *c, bench_ceiling k) {
    return k == BC_FMA ? c->fma_gflops : k == BC_L3 ? c->l3_gbps : c->dram_gbps;
}

// The arrays of the triads: inside the LLC, three of LLC/12, a quarter of the LLC in all (8 MiB
// on the 32 MiB L3, four times the L2s of two cores); over DRAM, three of 128 MiB, or of 4 LLCs
// when that is more.
static int64_t bench_triad_array_bytes(bench_ceiling k, int64_t llc) {
    if (k == BC_L3)
        return llc / 12;
    int64_t rotate = (int64_t)BENCH_ROTATE_LLCS * llc;
    return rotate > (128LL << 20) ? rotate : (128LL << 20);
}

// Measures ceiling k now, on `threads` threads.
static double bench_ceiling_measure(bench_ceiling k, int threads, int64_t llc) {
    if (k == BC_FMA)
        return rt_bench_fma_peak_gflops(threads);
    return rt_bench_triad_gbps(threads, bench_triad_array_bytes(k, llc));
}

// The rows of op o on a machine whose last-level cache holds llc_bytes; returns 1 or 2.
static int bench_plan(const bench_op *o, int64_t llc_bytes, bench_variant out[2]) {
    if (bench_compute_bound(o)) {
        out[0] = (bench_variant){"warm", BC_FMA, 1};
        return 1;
    }
    double ws = bench_bytes(o), rotate = (double)BENCH_ROTATE_LLCS * (double)llc_bytes;
    int32_t copies = ws >= rotate ? 1 : (int32_t)ceil(rotate / ws);
    int n = 0;
    if (ws < (double)llc_bytes)
        out[n++] = (bench_variant){"warm", BC_L3, 1};
    out[n++] = (bench_variant){copies > 1 ? "cold" : "stream", BC_DRAM, copies};
    return n;
}

// ---------------------------------------------------------------------------------------------
// Peers: oneDNN primitives (copies of their arguments taken in turn), OpenBLAS
// ---------------------------------------------------------------------------------------------

typedef struct bench_peer {
    const bench_op *op;
    int threads;
    float *in[3]; // inputs in spec order
    float *out;
    int64_t out_elems;
} bench_peer;

// One oneDNN primitive and `copies` sets of its arguments; each call runs on the next set.
typedef struct bench_dnnl {
    dnnl_primitive_t prim;
    dnnl_stream_t strm;
    char impl[96]; // dnnl_query_impl_info_str
    int nargs;
    int32_t copies, next;
    dnnl_exec_arg_t *args; // [copies][nargs]
    dnnl_memory_t *mem;    // [copies][nargs]
} bench_dnnl;

static void peer_dnnl_run(void *ctx) {
    bench_dnnl *d = ctx;
    dnnl_primitive_execute(d->prim, d->strm, d->nargs, d->args + (size_t)d->next * d->nargs);
    dnnl_stream_wait(d->strm);
    d->next = (d->next + 1) % d->copies;
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

// The arguments of op o's primitive: arg[i] reads the peer's input slot[i] (0-2), or is its
// output (slot 3). Returns their number.
static int bench_dnnl_argmap(const bench_op *o, int arg[4], int slot[4]) {
    int n = 0;
    arg[n] = DNNL_ARG_SRC, slot[n++] = 0;
    if (o->kind == BK_GEMM || o->kind == BK_LGELU || o->kind == BK_CONV || o->kind == BK_DWCONV)
        arg[n] = DNNL_ARG_WEIGHTS, slot[n++] = 1;
    if (o->kind == BK_LGELU)
        arg[n] = DNNL_ARG_BIAS, slot[n++] = 2;
    arg[n] = DNNL_ARG_DST, slot[n++] = 3;
    return n;
}

static bool bench_md(dnnl_memory_desc_t *md, int nd, const int64_t *dims, dnnl_format_tag_t tag) {
    dnnl_dims_t dd;
    for (int i = 0; i < nd; i++)
        dd[i] = dims[i];
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(md, nd, dd, dnnl_f32, tag));
    return true;
}

// Convolution and depthwise convolution descriptors: on plain NCHW / OIHW (GOIHW) layouts, or
// with any = true on the layouts oneDNN chooses (format_tag any).
static bool bench_dnnl_conv_desc(const bench_op *o, bool any, dnnl_convolution_desc_t *desc) {
    const int64_t *d = o->d;
    bool dw = o->kind == BK_DWCONV;
    int64_t src[4] = {d[0], d[1], d[2], d[3]}, dst[4] = {d[0], d[4], d[9], d[10]};
    int64_t wf[4] = {d[4], d[1], d[5], d[6]}, wg[5] = {d[1], 1, 1, d[5], d[6]};
    dnnl_memory_desc_t s, w, t;
    if (!bench_md(&s, 4, src, any ? dnnl_format_tag_any : dnnl_nchw) ||
        !(dw ? bench_md(&w, 5, wg, any ? dnnl_format_tag_any : dnnl_goihw)
             : bench_md(&w, 4, wf, any ? dnnl_format_tag_any : dnnl_oihw)) ||
        !bench_md(&t, 4, dst, any ? dnnl_format_tag_any : dnnl_nchw))
        return false;
    dnnl_dims_t strides = {d[7], d[7]}, pad_l = {d[8], d[8]};
    dnnl_dims_t pad_r = {(d[9] - 1) * d[7] + d[5] - d[2] - d[8],
                         (d[10] - 1) * d[7] + d[6] - d[3] - d[8]};
    DNNL_CHECK(dnnl_convolution_forward_desc_init(desc, dnnl_forward_inference,
                                                  dnnl_convolution_auto, &s, &w, NULL, &t, strides,
                                                  pad_l, pad_r));
    return true;
}

// The descriptors of every op but the convolutions, on plain (NCHW / row-major) layouts.
static bool bench_dnnl_plain_desc(const bench_op *o, void *desc, dnnl_post_ops_t *po,
                                  dnnl_primitive_attr_t *attr) {
    const int64_t *d = o->d;
    dnnl_memory_desc_t a, b, c, e;
    switch (o->kind) {
    case BK_GEMM:
    case BK_LGELU: {
        int64_t src[2] = {d[0], d[2]}, wt[2] = {d[2], d[1]}, bias[2] = {1, d[1]};
        int64_t dst[2] = {d[0], d[1]};
        bool lg = o->kind == BK_LGELU;
        if (!bench_md(&a, 2, src, dnnl_ab) || !bench_md(&b, 2, wt, dnnl_ab) ||
            (lg && !bench_md(&c, 2, bias, dnnl_ab)) || !bench_md(&e, 2, dst, dnnl_ab))
            return false;
        DNNL_CHECK(dnnl_matmul_desc_init(desc, &a, &b, lg ? &c : NULL, &e));
        if (lg) {
            DNNL_CHECK(dnnl_post_ops_create(po));
            DNNL_CHECK(dnnl_post_ops_append_eltwise(*po, 1.0f, dnnl_eltwise_gelu_erf, 0, 0));
            DNNL_CHECK(dnnl_primitive_attr_create(attr));
            DNNL_CHECK(dnnl_primitive_attr_set_post_ops(*attr, *po));
        }
        return true;
    }
    case BK_RELU: {
        int64_t dims[4] = {d[0], d[1], d[2], d[3]};
        if (!bench_md(&a, 4, dims, dnnl_nchw))
            return false;
        DNNL_CHECK(dnnl_eltwise_forward_desc_init(desc, dnnl_forward_inference, dnnl_eltwise_relu,
                                                  &a, 0.0f, 0.0f));
        return true;
    }
    case BK_POOL: {
        int64_t src[4] = {d[0], d[1], d[2], d[3]}, dst[4] = {d[0], d[1], d[9], d[10]};
        if (!bench_md(&a, 4, src, dnnl_nchw) || !bench_md(&b, 4, dst, dnnl_nchw))
            return false;
        dnnl_dims_t strides = {d[7], d[7]}, kernel = {d[5], d[6]}, dil = {0, 0};
        dnnl_dims_t pad_l = {d[8], d[8]};
        dnnl_dims_t pad_r = {(d[9] - 1) * d[7] + d[5] - d[2] - d[8],
                             (d[10] - 1) * d[7] + d[6] - d[3] - d[8]};
        DNNL_CHECK(dnnl_pooling_v2_forward_desc_init(desc, dnnl_forward_inference,
                                                     dnnl_pooling_avg_exclude_padding, &a, &b,
                                                     strides, kernel, dil, pad_l, pad_r));
        return true;
    }
    case BK_RMEAN: {
        int64_t src[3] = {d[0], d[1], d[2]}, dst[3] = {d[0], d[1], 1};
        if (!bench_md(&a, 3, src, dnnl_abc) || !bench_md(&b, 3, dst, dnnl_abc))
            return false;
        DNNL_CHECK(dnnl_reduction_desc_init(desc, dnnl_reduction_mean, &a, &b, 0.0f, 0.0f));
        return true;
    }
    case BK_SOFTMAX: {
        int64_t dims[2] = {d[0], d[1]};
        if (!bench_md(&a, 2, dims, dnnl_ab))
            return false;
        DNNL_CHECK(dnnl_softmax_forward_desc_init(desc, dnnl_forward_inference, &a, 1));
        return true;
    }
    case BK_CONV:
    case BK_DWCONV:
        break;
    }
    return false;
}

// The primitive descriptor of op o: plain layouts (rtgen's), or any = true for a convolution
// on the layouts oneDNN prefers.
static bool bench_dnnl_pd(const bench_op *o, dnnl_engine_t eng, bool any,
                          dnnl_primitive_desc_t *pd) {
    union {
        dnnl_convolution_desc_t conv;
        dnnl_eltwise_desc_t elt;
        dnnl_pooling_v2_desc_t pool;
        dnnl_reduction_desc_t red;
        dnnl_softmax_desc_t smax;
        dnnl_matmul_desc_t mm;
    } desc;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_attr_t attr = NULL;
    bool conv = o->kind == BK_CONV || o->kind == BK_DWCONV;
    bool ok = conv ? bench_dnnl_conv_desc(o, any, &desc.conv)
                   : !any && bench_dnnl_plain_desc(o, &desc, &po, &attr);
    dnnl_status_t st = ok ? dnnl_primitive_desc_create(pd, &desc, attr, eng, NULL) : dnnl_success;
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (po)
        dnnl_post_ops_destroy(po);
    if (ok && st != dnnl_success)
        fprintf(stderr, "bench-ops: %s: no oneDNN primitive (status %d)\n", o->name, (int)st);
    return ok && st == dnnl_success;
}

static void bench_dnnl_impl(const_dnnl_primitive_desc_t pd, char *buf, size_t n) {
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl)
        impl = "";
    snprintf(buf, n, "%s", impl);
}

// Copies the memory `from` into `to` (same engine): a memcpy when the layouts agree, otherwise
// through a reorder primitive. Not timed.
static bool bench_dnnl_copy(dnnl_engine_t eng, dnnl_stream_t strm, dnnl_memory_t from,
                            dnnl_memory_t to) {
    const dnnl_memory_desc_t *fm, *tm;
    void *fp, *tp;
    DNNL_CHECK(dnnl_memory_get_memory_desc(from, &fm));
    DNNL_CHECK(dnnl_memory_get_memory_desc(to, &tm));
    if (dnnl_memory_desc_equal(fm, tm)) {
        DNNL_CHECK(dnnl_memory_get_data_handle(from, &fp));
        DNNL_CHECK(dnnl_memory_get_data_handle(to, &tp));
        memcpy(tp, fp, dnnl_memory_desc_get_size(fm));
        return true;
    }
    dnnl_primitive_desc_t rpd;
    dnnl_primitive_t r;
    DNNL_CHECK(dnnl_reorder_primitive_desc_create(&rpd, fm, eng, tm, eng, NULL));
    dnnl_status_t st = dnnl_primitive_create(&r, rpd);
    dnnl_primitive_desc_destroy(rpd);
    DNNL_CHECK(st);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    st = dnnl_primitive_execute(r, strm, 2, args);
    if (st == dnnl_success)
        st = dnnl_stream_wait(strm);
    dnnl_primitive_destroy(r);
    DNNL_CHECK(st);
    return true;
}

static void bench_dnnl_free(bench_dnnl *d) {
    if (d->prim)
        dnnl_primitive_destroy(d->prim);
    for (int64_t i = 0; d->mem && i < (int64_t)d->copies * d->nargs; i++)
        if (d->mem[i])
            dnnl_memory_destroy(d->mem[i]);
    free(d->mem);
    free(d->args);
    memset(d, 0, sizeof *d);
}

// The user's plain memory of argument i (the peer's arrays, on the plain primitive's layouts).
static bool bench_dnnl_user_mem(const bench_peer *p, dnnl_engine_t eng,
                                const_dnnl_primitive_desc_t plain, int arg, int slot,
                                dnnl_memory_t *out) {
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(plain, dnnl_query_exec_arg_md, arg);
    void *ptr = slot < 3 ? (void *)p->in[slot] : (void *)p->out;
    DNNL_CHECK(md ? dnnl_memory_create(out, md, eng, ptr) : dnnl_invalid_arguments);
    return true;
}

// Creates op p->op's primitive (any: a convolution on oneDNN's own layouts) with `copies`
// argument sets. Set 0 of a plain primitive is the peer's arrays; every other set, and every set
// of an `any` primitive, is allocated by oneDNN and filled from them (reordered when the layout
// differs; outputs zeroed, so that no timed call takes a page fault).
static bool bench_dnnl_new(const bench_peer *p, dnnl_engine_t eng, dnnl_stream_t strm, bool any,
                           int32_t copies, bench_dnnl *d) {
    memset(d, 0, sizeof *d);
    int arg[4], slot[4];
    d->nargs = bench_dnnl_argmap(p->op, arg, slot);
    d->copies = copies;
    d->strm = strm;
    d->mem = calloc((size_t)copies * (size_t)d->nargs, sizeof *d->mem);
    d->args = calloc((size_t)copies * (size_t)d->nargs, sizeof *d->args);
    dnnl_primitive_desc_t plain = NULL, pd = NULL;
    bool ok = d->mem && d->args && bench_dnnl_pd(p->op, eng, false, &plain) &&
              (!any || bench_dnnl_pd(p->op, eng, true, &pd));
    const_dnnl_primitive_desc_t use = any ? pd : plain;
    if (ok) {
        bench_dnnl_impl(use, d->impl, sizeof d->impl);
        ok = dnnl_primitive_create(&d->prim, use) == dnnl_success;
    }
    for (int32_t c = 0; ok && c < copies; c++)
        for (int i = 0; i < d->nargs && ok; i++) {
            dnnl_memory_t *m = &d->mem[(size_t)c * d->nargs + i], user = NULL;
            d->args[(size_t)c * d->nargs + i] = (dnnl_exec_arg_t){arg[i], NULL};
            ok = bench_dnnl_user_mem(p, eng, plain, arg[i], slot[i], &user);
            if (ok && c == 0 && !any) {
                *m = user;
                user = NULL;
            } else if (ok) {
                const dnnl_memory_desc_t *md =
                    dnnl_primitive_desc_query_md(use, dnnl_query_exec_arg_md, arg[i]);
                void *ptr = NULL;
                ok = md && dnnl_memory_create(m, md, eng, DNNL_MEMORY_ALLOCATE) == dnnl_success &&
                     dnnl_memory_get_data_handle(*m, &ptr) == dnnl_success;
                if (ok && slot[i] == 3)
                    memset(ptr, 0, dnnl_memory_desc_get_size(md));
                else if (ok)
                    ok = bench_dnnl_copy(eng, strm, user, *m);
            }
            if (user)
                dnnl_memory_destroy(user);
            d->args[(size_t)c * d->nargs + i].memory = *m;
        }
    if (plain)
        dnnl_primitive_desc_destroy(plain);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (!ok)
        bench_dnnl_free(d);
    return ok;
}

// Copy 0's output in the peer's plain layout, into dst (p->out_elems floats).
static bool bench_dnnl_output(const bench_peer *p, dnnl_engine_t eng, const bench_dnnl *d,
                              float *dst) {
    dnnl_primitive_desc_t plain;
    dnnl_memory_t user;
    if (!bench_dnnl_pd(p->op, eng, false, &plain))
        return false;
    const dnnl_memory_desc_t *md =
        dnnl_primitive_desc_query_md(plain, dnnl_query_exec_arg_md, DNNL_ARG_DST);
    bool ok = md && dnnl_memory_create(&user, md, eng, dst) == dnnl_success;
    dnnl_primitive_desc_destroy(plain);
    if (!ok)
        return false;
    ok = bench_dnnl_copy(eng, d->strm, d->mem[d->nargs - 1], user);
    dnnl_memory_destroy(user);
    return ok;
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
    bench_variant v;
    double rt_min_ns, rt_med_ns;
    double dnnl_min_ns, dnnl_med_ns;
    double any_min_ns, any_med_ns; // 0: no format_tag any peer (not a convolution)
    double wake_ns;    // cold rows on 2+ threads: what waking a runner's sleeping pool adds (0: -)
    double ceil_value; // the row's ceiling, measured right after its timing (0: not measured)
    double oblas_min_ns, oblas_med_ns; // 0: no OpenBLAS peer for this op
    double err;                        // max |rtgen - peer| / max |peer| over the peers
    int32_t winner, n_cands, n_ok;
    char dnnl_impl[96], any_impl[96];
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

static float *bench_alloc_floats(int64_t n) {
    return aligned_alloc(64, (size_t)((n + 15) / 16 * 16) * sizeof(float));
}

static float *bench_floats(const rt_tensor_data *t) {
    float *f = bench_alloc_floats(t->layout.elems);
    if (f)
        for (int64_t i = 0; i < t->layout.elems; i++)
            f[i] = (float)t->data[i];
    return f;
}

// rtgen's winner through `copies` runners, each with buffers of its own; each call runs the
// next one.
typedef struct bench_rt {
    rt_cpu_runner **rn;
    int32_t copies, next;
} bench_rt;

static void bench_rtgen_run(void *ctx) {
    bench_rt *r = ctx;
    rt_err err = {0};
    rt_cpu_runner_run(r->rn[r->next], &err);
    r->next = (r->next + 1) % r->copies;
}

// What one op's rows share: the constructed op, its profiled winner, the inputs the peers read.
typedef struct bench_op_ctx {
    rt_arena *a;
    const rt_op *op;
    rt_bindings *b;
    rt_cpu_report *rep;
    rt_cpu_runner *rn0; // the winner on b's data: the first copy of every row
    const double *got;  // rtgen's output (the runner's first run), in b
    bench_peer p;
} bench_op_ctx;

// Rounds of turns in which rtgen's winner and oneDNN are timed, and the pause before each turn
// (rt_bench_time_turns).
#define BENCH_ROUNDS    5
#define BENCH_SETTLE_MS 20

// Constructs, builds and profiles op o for `threads` threads, runs the winner once in this
// process and copies the inputs for the peers. On failure row->what says why.
static bool bench_prepare(const bench_op *o, const bench_opts *bo, const rt_device *dev,
                          int threads, bench_op_ctx *c, bench_row *row) {
    memset(c, 0, sizeof *c);
    if (!(c->a = rt_arena_new(1 << 20)))
        return false;
    rt_err err = {0};
    rt_size_binding sets[12];
    int n_sets = bench_parse_sets(c->a, o->set, sets, 12);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", RTGEN_SOURCE_DIR, o->spec);
    int top_k = bo->top_k > 0 ? bo->top_k : bo->quick ? 3 : bench_flops(o) > 20e9 ? 4 : 10;
    rt_perf_options popt = {.top_k = top_k};
    rt_cpu_options copt = {
        .profile = true, .threads = threads, .budget_ms = bo->budget_ms, .timeout_ms = 300000};
    rt_op *op;
    rt_perf_result *perf;
    // rtgen constructs for the cores the row runs on, as a user would with a device file of
    // that many units; the peers likewise pick their blocking for the thread count they get.
    rt_device dev_row = *dev;
    if (threads > 0)
        rt_hal_device_on_units(&dev_row, threads); // the peaks scaled with the cores
    if (rt_spec_load(c->a, path, sets, n_sets, &op, &err) ||
        rt_perf_construct(c->a, op, &dev_row, &popt, &perf, &err) ||
        rt_bindings_new(c->a, op, 1, &c->b, &err) ||
        rt_cpu_build_and_profile(c->a, op, &dev_row, c->b, perf, &copt, &c->rep, &err)) {
        snprintf(row->what, sizeof row->what, "rtgen failed: %.120s", err.msg);
        return false;
    }
    c->op = op;
    row->n_cands = c->rep->n;
    row->winner = c->rep->winner;
    for (int32_t i = 0; i < c->rep->n; i++)
        row->n_ok += c->rep->cands[i].status == RT_CPU_CAND_OK;
    if (c->rep->winner < 0) {
        snprintf(row->what, sizeof row->what, "no correct candidate among %d", (int)c->rep->n);
        return false;
    }
    const rt_cpu_cand *w = &c->rep->cands[c->rep->winner];
    snprintf(row->what, sizeof row->what, "%s", w->summary ? w->summary : w->name);
    // The peers read the very inputs rtgen was checked on.
    c->p = (bench_peer){.op = o, .threads = threads};
    int n_in = 0;
    for (int32_t t = 0; t < op->n_tensors && n_in < 3; t++)
        if (op->tensors[t].role == RT_ROLE_INPUT)
            if (!(c->p.in[n_in++] = bench_floats(&c->b->tensors[t])))
                return false;
    int32_t out_t = op->outputs[0];
    c->p.out_elems = c->b->tensors[out_t].layout.elems;
    if (!(c->p.out = bench_alloc_floats(c->p.out_elems)))
        return false;
    // rtgen's winner runs in this process through a runner, on its own copy of the inputs.
    if (rt_cpu_runner_new(c->rep, -1, c->b, &c->rn0, &err) || rt_cpu_runner_run(c->rn0, &err)) {
        snprintf(row->what, sizeof row->what, "run winner: %.120s", err.msg);
        return false;
    }
    rt_cpu_runner_outputs(c->rn0, c->b);
    c->got = c->b->tensors[out_t].data;
    return true;
}

static void bench_op_release(bench_op_ctx *c) {
    rt_cpu_runner_free(c->rn0);
    for (int i = 0; i < 3; i++)
        free(c->p.in[i]);
    free(c->p.out);
    rt_arena_free(c->a);
    memset(c, 0, sizeof *c);
}

// OpenBLAS, timed after the turns on its own: its pthreads spin for tens of milliseconds after
// a call, and would slow whichever contender took the next turn.
static void bench_time_openblas(bench_op_ctx *c, const bench_opts *bo, bench_row *row) {
    bench_peer po = c->p;
    if (!(po.out = bench_alloc_floats(c->p.out_elems)))
        return;
    rt_bench_stats st;
    rt_bench_time(c->p.op->kind == BK_GEMM ? peer_openblas_sgemm : peer_openblas_lgelu, &po,
                  bo->budget_ms, &st);
    row->oblas_min_ns = st.min_ns;
    row->oblas_med_ns = st.median_ns;
    row->err = fmax(row->err, bench_err(c->got, po.out, c->p.out_elems));
    free(po.out);
}

// A runner's thread pool sleeps once idle for 50 us (hal-cpu.c), so on two or more threads
// every call of a cold row, which rotates over K runners, wakes a pool that oneDNN's OpenMP team
// (spinning between its back-to-back calls) never has to. Measured here on runner rn with warm
// data: pairs of calls, the first after BENCH_WAKE_IDLE_US of idling (the pool asleep), the second
// right after it (awake); the median over the pairs of their difference (a pair's two calls see
// the same load, which the difference of two medians did not cancel: on the loaded VM that read
// -3 ms to +3 ms for calls of 1-10 ms).
#define BENCH_WAKE_IDLE_US 300
#define BENCH_WAKE_PAIRS   41

static double bench_wake_ns(rt_cpu_runner *rn) {
    double diff[BENCH_WAKE_PAIRS];
    rt_err err = {0};
    rt_cpu_runner_run(rn, &err);
    for (int i = 0; i < BENCH_WAKE_PAIRS; i++) {
        usleep(BENCH_WAKE_IDLE_US);
        double t0 = rt_bench_now_ns();
        rt_cpu_runner_run(rn, &err);
        double t1 = rt_bench_now_ns();
        rt_cpu_runner_run(rn, &err);
        diff[i] = (t1 - t0) - (rt_bench_now_ns() - t1);
    }
    return rt_bench_median(diff, BENCH_WAKE_PAIRS);
}

// Times one row: rtgen's winner and oneDNN (and, for a warm convolution, oneDNN on its own
// layouts) take turns, each call on the next of v's copies of the buffers; every copy runs once
// untimed first, so that no timed call pays for a first touch or a cold pool.
static void bench_time_row(bench_op_ctx *c, const bench_opts *bo, dnnl_engine_t eng,
                           dnnl_stream_t strm, const bench_variant *v, bench_row *row) {
    row->v = *v;
    rt_cpu_runner **rn = calloc((size_t)v->copies, sizeof *rn);
    bench_rt rt = {rn, v->copies, 0};
    bench_dnnl dn = {0}, any = {0};
    bool conv = c->p.op->kind == BK_CONV || c->p.op->kind == BK_DWCONV;
    bool with_any = conv && v->copies == 1;
    float *any_out = with_any ? bench_alloc_floats(c->p.out_elems) : NULL;
    rt_err err = {0};
    if (!rn || (with_any && !any_out))
        goto done;
    rn[0] = c->rn0;
    for (int32_t k = 1; k < v->copies; k++)
        if (rt_cpu_runner_new(c->rep, -1, c->b, &rn[k], &err)) {
            snprintf(row->what, sizeof row->what, "runner copy %d: %.100s", (int)k, err.msg);
            goto done;
        }
    if (!bench_dnnl_new(&c->p, eng, strm, false, v->copies, &dn) ||
        (with_any && !bench_dnnl_new(&c->p, eng, strm, true, 1, &any))) {
        snprintf(row->what, sizeof row->what, "oneDNN primitive could not be created");
        goto done;
    }
    snprintf(row->dnnl_impl, sizeof row->dnnl_impl, "%s", dn.impl);
    snprintf(row->any_impl, sizeof row->any_impl, "%s", any.impl);
    for (int32_t k = 0; k < v->copies; k++) {
        bench_rtgen_run(&rt);
        peer_dnnl_run(&dn);
    }
    void (*fns[3])(void *) = {bench_rtgen_run, peer_dnnl_run, peer_dnnl_run};
    void *ctxs[3] = {&rt, &dn, &any};
    rt_bench_stats st[3] = {0};
    rt_bench_time_turns(with_any ? 3 : 2, fns, ctxs, bo->budget_ms, BENCH_ROUNDS, BENCH_SETTLE_MS,
                        st);
    row->rt_min_ns = st[0].min_ns;
    row->rt_med_ns = st[0].median_ns;
    row->dnnl_min_ns = st[1].min_ns;
    row->dnnl_med_ns = st[1].median_ns;
    row->any_min_ns = st[2].min_ns;
    row->any_med_ns = st[2].median_ns;
    row->err = bench_err(c->got, c->p.out, c->p.out_elems);
    if (with_any) {
        if (!bench_dnnl_output(&c->p, eng, &any, any_out))
            goto done;
        row->err = fmax(row->err, bench_err(c->got, any_out, c->p.out_elems));
    }
    if (c->p.op->kind == BK_GEMM || c->p.op->kind == BK_LGELU)
        bench_time_openblas(c, bo, row);
    if (v->copies > 1 && c->p.threads > 1)
        row->wake_ns = bench_wake_ns(c->rn0);
    // The VM's load and DRAM bandwidth drift over the minutes a run takes (the triad read 4.4
    // GB/s at the start of one run and 9-11 a while later): each row's ceiling is measured
    // again right after its timing, on its thread count.
    row->ceil_value = bench_ceiling_measure(v->ceiling, c->p.threads, bo->llc_bytes);
    row->ok = true;
done:
    for (int32_t k = 1; rn && k < v->copies; k++)
        rt_cpu_runner_free(rn[k]);
    free(rn);
    bench_dnnl_free(&dn);
    bench_dnnl_free(&any);
    free(any_out);
}

// All rows of op o on `threads` threads (variants v[0..n_v)), sharing one construction.
static void bench_run_op(const bench_op *o, const bench_opts *bo, const rt_device *dev,
                         dnnl_engine_t eng, dnnl_stream_t strm, int threads, const bench_variant *v,
                         int n_v, bench_row *rows) {
    bench_op_ctx c;
    bench_row first = {0};
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    bool ok = bench_prepare(o, bo, dev, threads, &c, &first);
    for (int i = 0; i < n_v; i++) {
        rows[i] = first;
        rows[i].v = v[i];
        if (ok)
            bench_time_row(&c, bo, eng, strm, &v[i], &rows[i]);
        usleep(200000); // let the peers' spinning worker threads go to sleep before the next row
    }
    bench_op_release(&c);
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

// ---------------------------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------------------------

static const char bench_header_fmt[] = "%-18s %-24s %3s %-8s %5s %8s %8s %8s %8s %6s %7s %8s %6s "
                                       "%8s %6s %8s %6s %-10s %7s %6s %8s %6s %-26s %s\n";

static void bench_print_header(void) {
    printf(bench_header_fmt, "op", "shape", "thr", "data", "unit", "rt med", "rt best", "dnnl med",
           "dnnl bst", "x dnnl", "wake us", "any med", "x any", "oblas", "x obl", "blis", "x blis",
           "ceiling", "ceil", "%ceil", "err", "cands", "oneDNN impl (plain any)", "rtgen winner");
}

// One line of the table: row r of op o on thr threads, graded against c (that thread count's
// ceilings); bg: BLIS's GFLOP/s (0: none).
static void bench_format_row(char *buf, size_t n, const bench_op *o, int thr, const bench_row *r,
                             const bench_ceilings *c, double bg) {
    char shape[64], data[24];
    bench_shape(o, shape, sizeof shape);
    if (r->v.copies > 1)
        snprintf(data, sizeof data, "%s x%d", r->v.data, (int)r->v.copies);
    else
        snprintf(data, sizeof data, "%s", r->v.data);
    const char *unit = bench_compute_bound(o) ? "GFLOP" : "GB";
    const char *ceil_label = bench_ceiling_label(c, r->v.ceiling);
    if (!r->ok) {
        snprintf(buf, n, "%-18s %-24s %3d %-8s %5s  -- %s (ceiling %s)\n", o->name, shape, thr,
                 data, unit, r->what, ceil_label);
        return;
    }
    double rt = bench_perf(o, r->rt_med_ns), dn = bench_perf(o, r->dnnl_med_ns);
    double an = bench_perf(o, r->any_med_ns), ob = bench_perf(o, r->oblas_med_ns);
    double ceiling = r->ceil_value > 0 ? r->ceil_value : bench_ceiling_value(c, r->v.ceiling);
    char ans[16] = "-", anx[16] = "-", obs[16] = "-", obx[16] = "-", bls[16] = "-", blx[16] = "-";
    char cands[16], cv[16] = "-", pct[16] = "-", impl[200], wake[16] = "-";
    if (r->wake_ns != 0)
        snprintf(wake, sizeof wake, "%.0f", r->wake_ns * 1e-3);
    if (an > 0) {
        snprintf(ans, sizeof ans, "%.1f", an);
        snprintf(anx, sizeof anx, "%.2f", rt / an);
    }
    if (ob > 0) {
        snprintf(obs, sizeof obs, "%.1f", ob);
        snprintf(obx, sizeof obx, "%.2f", rt / ob);
    }
    if (bg > 0) {
        snprintf(bls, sizeof bls, "%.1f", bg);
        snprintf(blx, sizeof blx, "%.2f", rt / bg);
    }
    if (ceiling > 0) {
        snprintf(cv, sizeof cv, "%.1f", ceiling);
        snprintf(pct, sizeof pct, "%.1f", 100.0 * rt / ceiling);
    }
    snprintf(cands, sizeof cands, "%d/%d", (int)r->n_ok, (int)r->n_cands);
    snprintf(impl, sizeof impl, "%s%s%s", r->dnnl_impl, r->any_impl[0] ? " " : "", r->any_impl);
    snprintf(buf, n,
             "%-18s %-24s %3d %-8s %5s %8.1f %8.1f %8.1f %8.1f %6.2f %7s %8s %6s %8s %6s %8s %6s "
             "%-10s %7s %6s %8.1e %6s %-26s #%d %s\n",
             o->name, shape, thr, data, unit, rt, bench_perf(o, r->rt_min_ns), dn,
             bench_perf(o, r->dnnl_min_ns), rt / dn, wake, ans, anx, obs, obx, bls, blx, ceil_label,
             cv, pct, r->err, cands, impl, (int)r->winner, r->what);
}

// ---------------------------------------------------------------------------------------------
// --self-test: what the table's grading rests on, without timing anything (ctest, label unit)
// ---------------------------------------------------------------------------------------------

static int bench_fails;

static void bench_expect(bool ok, const char *what, const char *op, long long llc) {
    if (!ok) {
        fprintf(stderr, "bench-ops: self-test: %s: %s (LLC %lld bytes)\n", op, what, llc);
        bench_fails++;
    }
}

// The row plan of every op, for the host's LLC and for a much smaller and a much larger one:
// every row names its ceiling; a working set below the LLC is graded against the LLC's triad
// warm and against DRAM only cold; every row graded against DRAM moves at least
// BENCH_ROTATE_LLCS LLCs between two uses of a byte.
static void bench_check_plans(int64_t llc) {
    const int64_t sizes[3] = {llc, 1LL << 20, 1LL << 30};
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < BENCH_N_OPS; i++) {
            const bench_op *o = &bench_ops[i];
            bench_variant v[2];
            int n = bench_plan(o, sizes[s], v);
            double ws = bench_bytes(o);
            bool l3 = false, dram = false, mem = !bench_compute_bound(o);
            bench_expect(n >= 1 && n <= 2, "one or two rows", o->name, sizes[s]);
            for (int k = 0; k < n; k++) {
                bench_expect(v[k].ceiling >= 0 && v[k].ceiling < BC_COUNT && v[k].data,
                             "a row without a ceiling", o->name, sizes[s]);
                bench_expect((v[k].ceiling == BC_FMA) == !mem,
                             "FMA peak for compute-bound rows only", o->name, sizes[s]);
                if (v[k].ceiling == BC_DRAM) {
                    dram = true;
                    bench_expect(ws * v[k].copies >= (double)BENCH_ROTATE_LLCS * sizes[s],
                                 "graded against DRAM with less than 4 LLCs between uses", o->name,
                                 sizes[s]);
                }
                if (v[k].ceiling == BC_L3) {
                    l3 = true;
                    bench_expect(ws < sizes[s] && v[k].copies == 1,
                                 "an l3-triad row whose data does not stay in the LLC", o->name,
                                 sizes[s]);
                }
            }
            bench_expect(!mem || dram, "no DRAM row for a memory-bound op", o->name, sizes[s]);
            bench_expect(!mem || l3 == (ws < sizes[s]),
                         "a working set below the LLC needs a warm row against the LLC triad",
                         o->name, sizes[s]);
        }
}

// oneDNN's implementation of every op (and, for convolutions, on its own layouts) is known,
// and every line of the table carries it and the row's ceiling.
static void bench_check_dnnl(dnnl_engine_t eng, int64_t llc) {
    bench_ceilings c = {.fma_gflops = 100, .l3_gbps = 100, .dram_gbps = 10};
    snprintf(c.fma_label, sizeof c.fma_label, "fma-%s", "test");
    for (int i = 0; i < BENCH_N_OPS; i++) {
        const bench_op *o = &bench_ops[i];
        bool conv = o->kind == BK_CONV || o->kind == BK_DWCONV;
        bench_row r = {
            .ok = true, .rt_min_ns = 1e6, .rt_med_ns = 1e6, .dnnl_min_ns = 1e6, .dnnl_med_ns = 1e6};
        snprintf(r.what, sizeof r.what, "winner");
        dnnl_primitive_desc_t pd;
        for (int any = 0; any <= conv; any++) {
            bool ok = bench_dnnl_pd(o, eng, any, &pd);
            bench_expect(ok, any ? "no oneDNN primitive for format_tag any" : "no oneDNN primitive",
                         o->name, llc);
            if (!ok)
                continue;
            bench_dnnl_impl(pd, any ? r.any_impl : r.dnnl_impl, sizeof r.dnnl_impl);
            dnnl_primitive_desc_destroy(pd);
            bench_expect((any ? r.any_impl : r.dnnl_impl)[0] != 0, "empty impl_info_str", o->name,
                         llc);
        }
        bench_variant v[2];
        int n = bench_plan(o, llc, v);
        for (int k = 0; k < n; k++) {
            char line[1024], word[128];
            r.v = v[k];
            bench_format_row(line, sizeof line, o, 1, &r, &c, 0);
            printf("%-18s %-9s %-10s working set %7.1f MiB x %-3d oneDNN %s%s%s\n", o->name,
                   v[k].data, bench_ceiling_label(&c, v[k].ceiling), bench_bytes(o) / 1048576.0,
                   (int)v[k].copies, r.dnnl_impl, conv ? ", any: " : "", r.any_impl);
            snprintf(word, sizeof word, " %s ", bench_ceiling_label(&c, v[k].ceiling));
            bench_expect(strstr(line, word) != NULL, "a line without its ceiling", o->name, llc);
            snprintf(word, sizeof word, " %s", r.dnnl_impl);
            bench_expect(r.dnnl_impl[0] && strstr(line, word), "a line without oneDNN's impl",
                         o->name, llc);
            snprintf(word, sizeof word, " %s", r.any_impl);
            bench_expect(!conv || (r.any_impl[0] && strstr(line, word)),
                         "a convolution line without the format_tag any impl", o->name, llc);
        }
    }
}

// OpenBLAS runs (and is right) with the kernel it was given: a forced SkylakeX kernel on a CPU
// without AVX-512 dies of an illegal instruction.
static void bench_check_openblas(void) {
    float a[16], b[16], c[16];
    for (int i = 0; i < 16; i++)
        a[i] = (float)(i % 5) - 2, b[i] = (float)(i % 3) - 1;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 4, 4, 4, 1.0f, a, 4, b, 4, 0.0f, c, 4);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            float ref = 0;
            for (int k = 0; k < 4; k++)
                ref += a[i * 4 + k] * b[k * 4 + j];
            bench_expect(c[i * 4 + j] == ref, "OpenBLAS sgemm 4x4x4 differs from the loop", "host",
                         0);
        }
}

static int bench_self_test(dnnl_engine_t eng, int64_t llc) {
    bench_check_openblas();
    bench_expect(llc > 0, "no last-level cache size", "host", llc);
    if (access("/sys/devices/system/cpu/cpu0/cache/index0/size", R_OK) == 0)
        bench_expect(rt_bench_llc_bytes() > 0, "sysfs lists caches but none was read", "host",
                     rt_bench_llc_bytes());
    if (llc > 0)
        bench_check_plans(llc);
    bench_check_dnnl(eng, llc);
    if (__builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2"))
        bench_expect(rt_bench_fma_peak_gflops(1) > 0, "no FMA peak on a CPU with AVX2 and FMA",
                     "host", llc);
    if (bench_fails) {
        fprintf(stderr, "bench-ops: self-test: %d failure%s\n", bench_fails,
                bench_fails > 1 ? "s" : "");
        return 1;
    }
    printf("bench-ops: self-test passed (LLC %lld bytes, FMA %s)\n", (long long)llc,
           rt_bench_fma_isa() ? rt_bench_fma_isa() : "none");
    return 0;
}

static void bench_usage(void) {
    fprintf(stderr, "usage: bench-ops [--quick] [--ops=NAME,...] [--threads=1,2] [--top-k=N]\n"
                    "                 [--budget-ms=MS] [--blis=FILE] [--llc-mib=N] [--list-gemm]\n"
                    "                 [--self-test]\n"
                    "ops (name prefixes):");
    for (int i = 0; i < BENCH_N_OPS; i++)
        fprintf(stderr, " %s", bench_ops[i].name);
    fprintf(stderr, "\n");
}

static bool bench_parse_threads(const char *s, bench_opts *bo) {
    bo->n_threads = 0;
    for (const char *t = s; *t && bo->n_threads < 4;) {
        char *end;
        long v = strtol(t, &end, 10);
        if (end == t || v < 1 || v > 64)
            return false;
        bo->threads[bo->n_threads++] = (int)v;
        t = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return false;
    }
    return bo->n_threads > 0;
}

static bool bench_parse_args(int argc, char **argv, bench_opts *bo) {
    *bo = (bench_opts){.threads = {1, 2}, .n_threads = 2};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "--quick") == 0) {
            bo->quick = true;
        } else if (strcmp(s, "--list-gemm") == 0) {
            bo->list_gemm = true;
        } else if (strcmp(s, "--self-test") == 0) {
            bo->self_test = true;
        } else if (strncmp(s, "--ops=", 6) == 0) {
            bo->ops = s + 6;
        } else if (strncmp(s, "--blis=", 7) == 0) {
            bo->blis = s + 7;
        } else if (strncmp(s, "--top-k=", 8) == 0) {
            bo->top_k = atoi(s + 8);
            if (bo->top_k < 1 || bo->top_k > 64)
                return false;
        } else if (strncmp(s, "--llc-mib=", 10) == 0) {
            bo->llc_bytes = atoll(s + 10) << 20;
            if (bo->llc_bytes <= 0 || bo->llc_bytes > (64LL << 30))
                return false;
        } else if (strncmp(s, "--budget-ms=", 12) == 0) {
            bo->budget_ms = atof(s + 12);
            if (!(bo->budget_ms > 0 && bo->budget_ms < 60000))
                return false;
        } else if (strncmp(s, "--threads=", 10) == 0) {
            if (!bench_parse_threads(s + 10, bo))
                return false;
        } else {
            return false;
        }
    }
    if (bo->budget_ms == 0)
        bo->budget_ms = bo->quick ? 60 : 200;
    return true;
}

// The ceilings of one thread count, measured now: the FMA peak, a triad inside the LLC (three
// arrays of a twelfth of it each, a quarter in all: 8 MiB on the 32 MiB L3, four times the L2s
// of two cores) and a triad over DRAM (three arrays of 128 MiB, or of 4 LLCs when that is more).
// The ceilings of one thread count, measured at the start (each row measures its own again).
static void bench_measure_ceilings(int threads, int64_t llc, bench_ceilings *c) {
    const char *isa = rt_bench_fma_isa();
    snprintf(c->fma_label, sizeof c->fma_label, "fma-%s", isa ? isa : "none");
    c->fma_gflops = bench_ceiling_measure(BC_FMA, threads, llc);
    c->l3_gbps = bench_ceiling_measure(BC_L3, threads, llc);
    c->dram_gbps = bench_ceiling_measure(BC_DRAM, threads, llc);
    printf("measured on %d thread%s at the start: %s peak %.1f GFLOP/s, l3-triad %.1f GB/s (3 x "
           "%.1f MiB), dram-triad %.1f GB/s (3 x %lld MiB)\n",
           threads, threads > 1 ? "s" : "", c->fma_label, c->fma_gflops, c->l3_gbps,
           (double)bench_triad_array_bytes(BC_L3, llc) / (1 << 20), c->dram_gbps,
           (long long)(bench_triad_array_bytes(BC_DRAM, llc) >> 20));
}

static void bench_print_intro(const rt_device *dev, int64_t llc, bool detected) {
    const char *cfg = openblas_get_config();
    bool skx = cfg && strstr(cfg, "SkylakeX"), avx512 = __builtin_cpu_supports("avx512f");
    const dnnl_version_t *dv = dnnl_version();
    printf("host: %s (%s), %d cores, last-level cache %lld MiB (%s)\n", dev->name, dev->arch,
           (int)dev->units, (long long)(llc >> 20), detected ? "sysfs" : "--llc-mib");
    printf("OpenBLAS: %s%s\n", cfg ? cfg : "?",
           skx || !avx512 ? ""
                          : "   <-- NOT SkylakeX on an AVX-512 CPU: OpenBLAS may run its SSE3 "
                            "kernel, ratios are unfair");
    printf("oneDNN: %d.%d.%d (primitives on plain NCHW / row-major layouts; convolutions also on "
           "its own layouts, format_tag any, reorders untimed)\n",
           dv->major, dv->minor, dv->patch);
    printf("BLIS: %s\n", bench_n_blis ? bench_blis_arch : "(no --blis results)");
}

static void bench_print_legend(void) {
    printf("\nunit: GFLOP/s for gemm/conv/linear_gelu, GB/s of compulsory traffic otherwise. "
           "data: warm = the buffers stay in the caches between calls; cold xK = each call takes "
           "the next of K copies (K copies >= %d LLCs); stream = one copy of >= %d LLCs.\n"
           "ceiling: what %%ceil divides by (fma-*: FMA peak; l3-triad: triad inside the LLC; "
           "dram-triad: triad over DRAM), ceil its value measured right after the row. med = at "
           "the median time, best = at the minimum; "
           "x = rtgen / peer at the median (> 1: rtgen faster); any = oneDNN on its own layouts "
           "(format_tag any); err = max|rtgen - peer| / max|peer|.\nwake us: cold rows on 2+ "
           "threads take a different runner each call, whose pool is asleep: what a wake "
           "added to a warm call of the winner (median, measured here), included in rt med.\n\n",
           BENCH_ROTATE_LLCS, BENCH_ROTATE_LLCS);
}

int main(int argc, char **argv) {
    // OpenBLAS reads OPENBLAS_CORETYPE when the library initializes, before main: without it,
    // 0.3.21 takes its SSE3 kernel on a Zen 4 CPU. bench/run.sh exports it on AVX-512 hosts; when
    // run alone there, re-execute. Not on AVX2 hosts: it detects them (Zen 3: Haswell), and the
    // SkylakeX kernels would die of an illegal instruction there.
    if (!getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx512f")) {
        setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
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
    bool detected = bo.llc_bytes == 0;
    int64_t llc = detected ? rt_bench_llc_bytes() : bo.llc_bytes;
    bo.llc_bytes = llc;
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&strm, eng, dnnl_stream_default_flags) != dnnl_success) {
        fprintf(stderr, "bench-ops: error: cannot create the oneDNN CPU engine\n");
        return 1;
    }
    if (bo.self_test)
        return bench_self_test(eng, llc);
    if (llc <= 0) {
        fprintf(stderr, "bench-ops: error: cannot read the last-level cache size from "
                        "/sys/devices/system/cpu/cpu0/cache (give --llc-mib=N)\n");
        return 1;
    }
    if (bo.blis)
        bench_blis_read(bo.blis);
    rt_device dev;
    rt_err err = {0};
    if (rt_hal_detect_host(NULL, &dev, &err) != RT_OK) {
        fprintf(stderr, "bench-ops: error: host: %s\n", err.msg);
        return 1;
    }
    bench_print_intro(&dev, llc, detected);
    bench_ceilings ceil[4];
    for (int t = 0; t < bo.n_threads; t++)
        bench_measure_ceilings(bo.threads[t], llc, &ceil[t]);
    bench_print_legend();
    bench_print_header();
    double log_sum[4][2] = {{0}};
    int log_n[4][2] = {{0}};
    for (int t = 0; t < bo.n_threads; t++) {
        int thr = bo.threads[t];
        for (int i = 0; i < BENCH_N_OPS; i++) {
            const bench_op *o = &bench_ops[i];
            if (!bench_selected(o, &bo))
                continue;
            bench_variant v[2];
            bench_row rows[2];
            int n_v = bench_plan(o, llc, v);
            bench_run_op(o, &bo, &dev, eng, strm, thr, v, n_v, rows);
            const bench_blis_row *bl = bench_blis_find(o, thr);
            for (int k = 0; k < n_v; k++) {
                char line[1024];
                bench_format_row(line, sizeof line, o, thr, &rows[k], &ceil[t],
                                 bl ? bench_perf(o, bl->median_ns) : 0);
                fputs(line, stdout);
                fflush(stdout);
                int cold = rows[k].v.copies > 1 && k > 0; // an op's second row: cold
                if (rows[k].ok) {
                    log_sum[t][cold] += log(rows[k].dnnl_med_ns / rows[k].rt_med_ns);
                    log_n[t][cold]++;
                }
            }
        }
    }
    printf("\n");
    for (int t = 0; t < bo.n_threads; t++)
        if (log_n[t][0] > 0)
            printf("geometric mean rtgen / oneDNN on %d thread%s: %.2f over %d ops (each op's "
                   "first row); cold second rows: %.2f over %d ops\n",
                   bo.threads[t], bo.threads[t] > 1 ? "s" : "", exp(log_sum[t][0] / log_n[t][0]),
                   log_n[t][0], log_n[t][1] ? exp(log_sum[t][1] / log_n[t][1]) : (double)NAN,
                   log_n[t][1]);
    dnnl_stream_destroy(strm);
    dnnl_engine_destroy(eng);
    return 0;
}
