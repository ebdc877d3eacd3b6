// test-cpu-diff.c: differential test of the two CPU emitters. The top candidate of a few ops
// (packed GEMM on prime shapes, a GEMM with a fused bias + GELU epilogue, a padded convolution,
// row-fused softmax, a ragged op) is lowered once, then built
// twice — LLVM IR through the ORC JIT and portable C through the system cc into a shared object
// loaded with dlopen — and both run on the same inputs; outputs must agree to rounding.
#include "test.h"
#include "num-host.h"

#include "emit.h"
#include "hal-cpu.h"
#include "interp.h"
#include "compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void diff_case(const rt_device *dev, const char *spec, const char *text) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    rt_bindings *b = NULL;
    rt_kir_kernel *k = NULL;
    rt_cpu_jit *jit = NULL;
    rt_perf_options popt = {.top_k = 1};
    rt_lower_options lopt = {false, 0, spec};
    const char *c_text = NULL, *ll = NULL;
    void *mod = NULL;
    if (rt_spec_parse(a, text, spec, NULL, 0, &op, &err) != RT_OK ||
        rt_perf_construct(a, op, dev, &popt, &perf, &err) != RT_OK ||
        rt_bindings_new(a, op, 7, &b, &err) != RT_OK || rt_bindings_prepare(b, &err) != RT_OK ||
        rt_lower_cpu(a, op, dev, perf->model, &perf->cands[0], &lopt, &k, &err) != RT_OK ||
        rt_cpu_jit_new(a, dev, &jit, &err) != RT_OK || rt_emit_c(a, k, &c_text, &err) != RT_OK) {
        fprintf(stderr, "%s: %s\n", spec, err.msg);
        RT_EXPECT(0);
        rt_arena_free(a);
        return;
    }
    rt_llvm_target t = {rt_cpu_jit_context(jit), rt_cpu_jit_target_machine(jit),
                        rt_cpu_jit_avx512(jit)};
    RT_EXPECT_EQ(rt_emit_llvm(a, k, &t, true, &mod, &ll, &err), RT_OK);
    RT_EXPECT_EQ(rt_cpu_jit_add_module(jit, mod, &err), RT_OK);
    const char *names[16];
    void *fl[16], *fc[16];
    int64_t items[16];
    RT_EXPECT(k->n_phases <= 16);
    for (int32_t i = 0; i < k->n_phases && i < 16; i++) {
        names[i] = rt_arena_printf(a, "%s_%s", k->name, k->phases[i].name);
        items[i] = k->phases[i].n_items;
        RT_EXPECT_EQ(rt_cpu_jit_lookup(jit, names[i], &fl[i], &err), RT_OK);
    }
    if (rt_cpu_cc_load(a, c_text, names, k->n_phases, fc, &err) != RT_OK) {
        fprintf(stderr, "%s: %s\n%s\n", spec, err.msg, err.log ? err.log : "");
        RT_EXPECT(0);
        rt_arena_free(a);
        return;
    }
    // Two copies of every buffer: one per target.
    void **args[2];
    for (int w = 0; w < 2; w++) {
        args[w] = rt_arena_calloc(a, (size_t)k->n_bufs, sizeof(void *));
        for (int32_t i = 1; i < k->n_bufs; i++) {
            const rt_kir_buf *bf = &k->bufs[i];
            const rt_tensor_data *td = &b->tensors[bf->tensor];
            if (bf->role == RT_KIR_BUF_START) {
                args[w][i] = td->layout.start[bf->dim];
                continue;
            }
            int64_t n = td->layout.elems;
            void *p = rt_arena_calloc(a, (size_t)rt_at_least_one((size_t)n), 8);
            for (int64_t e = 0; e < n; e++) {
                if (bf->type == RT_KIR_F32)
                    ((float *)p)[e] = (float)td->data[e];
                else if (bf->type == RT_KIR_I32)
                    ((int32_t *)p)[e] = (int32_t)td->data[e];
                else
                    ((double *)p)[e] = td->data[e];
            }
            args[w][i] = p;
        }
    }
    rt_cpu_pool *pool = rt_cpu_pool_new(2);
    RT_EXPECT(pool != NULL);
    rt_cpu_launch l0 = {k->n_phases, (rt_cpu_phase_fn *)fl, items, args[0], k->scratch_bytes, NULL};
    rt_cpu_launch l1 = {k->n_phases, (rt_cpu_phase_fn *)fc, items, args[1], k->scratch_bytes, NULL};
    RT_EXPECT(rt_cpu_pool_run(pool, &l0));
    RT_EXPECT(rt_cpu_pool_run(pool, &l1));
    rt_cpu_pool_free(pool);
    for (int32_t i = 1; i < k->n_bufs; i++) {
        const rt_kir_buf *bf = &k->bufs[i];
        if (bf->role != RT_KIR_BUF_DATA || !bf->written || bf->type != RT_KIR_F32)
            continue;
        int64_t n = b->tensors[bf->tensor].layout.elems;
        rt_compare_result cr; // the one acceptance rule, the LLVM kernel as the reference
        rt_compare_begin(&cr);
        for (int64_t e = 0; e < n; e++)
            rt_compare_add(&cr, (double)((float *)args[0][i])[e], (double)((float *)args[1][i])[e]);
        rt_compare_end(&cr);
        bool ok = rt_compare_accept(&cr, op->tensors[bf->tensor].dtype);
        if (!ok)
            fprintf(stderr, "%s: %s differs between LLVM and C by %g (nmse %g)\n", spec, bf->name,
                    cr.max_abs_err, cr.nmse);
        RT_EXPECT(ok);
    }
    RT_EXPECT(strstr(c_text, "#pragma omp parallel") != NULL);
    rt_arena_free(a);
}

int main(void) {
    rt_device dev;
    if (!rt_num_host(&dev))
        return 77;
    diff_case(&dev, "matmul.spec",
              "def matmul(float(67, 43) A, float(43, 89) B) -> (C) {\n"
              "    C(m, n) +=! A(m, k) * B(k, n)\n}\n");
    // The fused bias + GELU epilogue of the micro-kernel, over several k blocks.
    diff_case(&dev, "linear_gelu.spec",
              "def linear_gelu(float(37, 300) X, float(300, 53) Wt, float(53) bias) -> (Y) {\n"
              "    t(m, n) +=! X(m, k) * Wt(k, n)\n"
              "    Y(m, n) = 0.5 * (t(m, n) + bias(n)) * (1 + erf((t(m, n) + bias(n)) * "
              "0.70710678))\n}\n");
    // Implicit GEMM with masked contiguous packs and the batch folded into the work items.
    diff_case(&dev, "conv.spec",
              "def conv(float(3, 29, 9, 11) I pad 0, float(13, 29, 3, 3) Wt) -> "
              "(float(3, 13, 9, 11) O) {\n"
              "    O(n, f, y, x) +=! I(n, c, y + r - 1, x + s - 1) * Wt(f, c, r, s)\n}\n");
    diff_case(&dev, "softmax.spec",
              "def softmax(float(29, 71) X) -> (Y) {\n"
              " mx(n) max=! X(n, d)\n e(n, d) = exp(X(n, d) - mx(n))\n"
              " s(n) +=! e(n, d)\n Y(n, d) = e(n, d) / s(n)\n}\n");
    diff_case(&dev, "qkt.spec",
              "size B = 4\nsize H = 2\nsize D = 8\n"
              "def qkt(int32(B) len, float(b:B, len(b), H, D) Q, "
              "float(b:B, len(b), H, D) K) -> (S) {\n"
              " S(b, h, i, j) +=! Q(b, i, h, d) * K(b, j, h, d) * 0.125\n}\n");
    return rt_test_finish("test-cpu-diff");
}
