// test-lower-oom.c: the CPU lowering and the C emitter under injected out-of-memory
// (rt_arena_fail_after), for the top-1 of a dense GEMM, a window reduction (and an empty one), a
// per-entry ragged GEMM, a triangular GEMM and the naive kernel; the same through the GPU
// lowering and the CUDA emitter, and through the run layer's build of the top K (no profile).
// Every failure is RT_ERR_NOMEM with "out of memory", never a crash and never the lowering's
// internal error (an incomplete node that the arena did not cause), and the sweep ends in a
// kernel and its text.
#include "test.h"

#include "emit.h"
#include "gpu.h"
#include "hal.h"
#include "perfmodel.h"
#include "bindings.h"
#include "rtgen.h"
#include "spec.h"

#include <stdio.h>
#include <string.h>

static int64_t n_failures;

// Lowers the top-1 (naive: the naive kernel) of text on dev with allocation n + 1 failing, for
// every n from 0, until the lowering and the emitter succeed.
static void sweep(const rt_device *dev, const char *text, bool naive) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op = NULL;
    rt_perf_result *res = NULL;
    if (rt_spec_parse(a, text, "oom.spec", NULL, 0, &op, &err) != RT_OK ||
        rt_perf_construct(a, op, dev, NULL, &res, &err) != RT_OK || res->n_cands < 1) {
        fprintf(stderr, "%.40s: %s\n", text, err.msg);
        RT_EXPECT(false);
        rt_arena_free(a);
        return;
    }
    bool done = false;
    for (long n = 0; !done && n < 1000000; n++) {
        rt_arena *b = rt_arena_new(4096);
        rt_arena_fail_after(b, n);
        rt_err_clear(&err);
        const char *c = NULL;
        const rt_rprog *p = naive ? NULL : &res->cands[0];
        rt_status st;
        if (dev->devclass == RT_DEVCLASS_CPU) {
            rt_lower_options lo = {.naive = naive, .spec_path = "oom.spec"};
            rt_kir_kernel *k = NULL;
            st = rt_lower_cpu(b, op, dev, naive ? NULL : res->model, p, &lo, &k, &err);
            if (st == RT_OK)
                st = rt_emit_c(b, k, &c, &err);
        } else {
            rt_gpu_lower_options go = {.rank = 1, .spec_path = "oom.spec"};
            rt_gpu_kernel *k = NULL;
            st = rt_gpu_lower(b, op, dev, res->model, p, &go, &k, &err);
            if (st == RT_OK)
                st = rt_gpu_emit(b, k, &rt_gpu_dialect_cuda, &c, &err);
        }
        if (st != RT_OK) {
            n_failures++;
            if (st != RT_ERR_NOMEM || strcmp(err.msg, "out of memory") != 0)
                fprintf(stderr, "%.40s, allocation %ld failing: %s\n", text, n + 1, err.msg);
            RT_EXPECT_EQ(st, RT_ERR_NOMEM);
            RT_EXPECT_STR(err.msg, "out of memory");
        }
        done = st == RT_OK && c && c[0];
        rt_arena_free(b);
    }
    RT_EXPECT(done);
    rt_arena_free(a);
}

// The run layer's build without a profile (lowering and C emission of the top K, the report)
// on a fresh arena with allocation n + 1 failing, n growing by a sixteenth (each try builds LLVM
// modules), until it succeeds.
static void sweep_build(const rt_device *dev, const char *text) {
    bool done = false;
    for (long n = 0; !done && n < 1000000; n += 1 + n / 16) {
        rt_arena *b = rt_arena_new(4096);
        rt_err err = {0};
        rt_op *op = NULL;
        rt_perf_result *res = NULL;
        rt_bindings *bd = NULL;
        rt_perf_options po = {.top_k = 3};
        if (rt_spec_parse(b, text, "oom.spec", NULL, 0, &op, &err) != RT_OK ||
            rt_perf_construct(b, op, dev, &po, &res, &err) != RT_OK ||
            rt_bindings_new(b, op, 1, &bd, &err) != RT_OK) {
            RT_EXPECT(false);
            rt_arena_free(b);
            return;
        }
        rt_arena_fail_after(b, n);
        rt_cpu_options co = {.emit = RT_CPU_EMIT_C};
        rt_cpu_report *rep = NULL;
        rt_status st = rt_cpu_build_and_profile(b, op, dev, bd, res, &co, &rep, &err);
        if (st != RT_OK) {
            n_failures++;
            if (st != RT_ERR_NOMEM || strcmp(err.msg, "out of memory") != 0)
                fprintf(stderr, "build %.30s, allocation %ld failing: %s\n", text, n + 1, err.msg);
            RT_EXPECT_EQ(st, RT_ERR_NOMEM);
        }
        done = st == RT_OK && rep && rep->n == res->n_cands;
        rt_arena_free(b);
    }
    RT_EXPECT(done);
}

int main(void) {
    rt_device dev;
    rt_err err = {0};
    if (rt_hal_load_device("devices/x86-avx512.ini", &dev, &err) != RT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    static const char *const gemm = "def mm(float(37, 53) A, float(53, 29) B) -> (C) {\n"
                                    " C(m, n) +=! A(m, k) * B(k, n)\n}";
    static const char *const pool =
        "def p(float(2, 3, 9, 37) I pad 0) -> (float(2, 3, 5, 19) O) {\n"
        " O(n, c, y, x) +=! I(n, c, 2*y + r - 1, 2*x + s - 1) / 9"
        "   where r in 0:3, s in 0:3\n}";
    static const char *const empty =
        "def e(float(2, 3, 9, 37) I pad 0) -> (float(2, 3, 5, 19) O) {\n"
        " O(n, c, y, x) +=! I(n, c, 2*y + r - 1, 2*x + s - 1) / 9"
        "   where r in 1:1, s in 0:3\n}";
    static const char *const attn_v =
        "size B = 3\nsize H = 2\nsize D = 16\n"
        "def attn_v(int32(B) len, float(b:B, H, i:len(b), len(b)) P, float(b:B, len(b), H, D) V)"
        " -> (O) {\n O(b, i, h, d) +=! P(b, h, i, j) * V(b, j, h, d)\n}";
    static const char *const trmm = "def trmm(float(i:41, i + 1) L, float(41, 23) X) -> (Y) {\n"
                                    " Y(i, p) +=! L(i, k) * X(k, p)\n}";
    const char *const specs[] = {gemm, pool, empty, attn_v, trmm};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++)
        sweep(&dev, specs[i], false);
    sweep(&dev, gemm, true);
    sweep(&dev, attn_v, true);
    sweep_build(&dev, gemm);
    sweep_build(&dev, attn_v);
    // The GPU lowering and the CUDA emitter (a100.ini), the plan's kernel and the naive one.
    rt_device gpu;
    if (rt_hal_load_device("devices/a100.ini", &gpu, &err) != RT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++)
        sweep(&gpu, specs[i], false);
    sweep(&gpu, attn_v, true);
    printf("%lld injected failures reported as out of memory\n", (long long)n_failures);
    return rt_test_finish("test-lower-oom");
}
