// fuzz-gen.c: libFuzzer target for the pipeline behind the front end. A spec that parses is
// constructed on a CPU device (x86-avx512.ini) and a GPU device (a100.ini); the top candidates
// (and the CPU's naive reference kernel) are lowered and emitted, as C for the CPU and CUDA for
// the GPU (nothing is compiled or run). Any step may refuse the op with an error, which must
// carry a message; none may crash, hang, leak or trip a sanitizer. Seed the corpus with
// examples/ and bench/specs/. Build with -DRTGEN_FUZZ=ON and CC=clang-16.
#include "fuzz-text.h"
#include "emit.h"
#include "gpu.h"
#include "hal.h"
#include "perfmodel.h"
#include "spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static rt_device *devs[2]; // CPU, GPU

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    static const char *const files[2] = {RTGEN_SOURCE_DIR "/devices/x86-avx512.ini",
                                         RTGEN_SOURCE_DIR "/devices/a100.ini"};
    for (int i = 0; i < 2; i++) {
        rt_err err;
        rt_err_clear(&err);
        devs[i] = malloc(sizeof *devs[i]);
        if (!devs[i] || rt_hal_load_device(files[i], devs[i], &err) != RT_OK) {
            fprintf(stderr, "fuzz-gen: %s: %s\n", files[i], err.msg);
            abort();
        }
    }
    return 0;
}

// A refusal carries a message (a location is optional: a backend limit may have none).
static void expect_message(rt_status st, const rt_err *err) {
    if (st != RT_OK && !err->msg[0])
        abort();
}

// Lowers and emits candidate p (NULL: the naive kernel on the CPU) of the result on dev.
static void emit_one(rt_arena *a, const rt_op *op, const rt_device *dev, const rt_perf_result *res,
                     const rt_rprog *p, int32_t rank) {
    rt_err err;
    rt_err_clear(&err);
    const char *text = NULL;
    rt_status st;
    if (dev->devclass == RT_DEVCLASS_CPU) {
        rt_lower_options lo = {.naive = p == NULL, .rank = rank, .spec_path = "fuzz.spec"};
        rt_kir_kernel *k = NULL;
        st = rt_lower_cpu(a, op, dev, p ? res->model : NULL, p, &lo, &k, &err);
        if (st == RT_OK)
            st = rt_emit_c(a, k, &text, &err);
    } else {
        rt_gpu_lower_options go = {.rank = rank + 1, .spec_path = "fuzz.spec"};
        rt_gpu_kernel *k = NULL;
        st = rt_gpu_lower(a, op, dev, res->model, p, &go, &k, &err);
        if (st == RT_OK)
            st = rt_gpu_emit(a, k, &rt_gpu_dialect_cuda, &text, &err);
    }
    expect_message(st, &err);
    if (st == RT_OK && (!text || !text[0]))
        abort(); // an emitted kernel has a text
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rt_arena *a;
    char *text = rt_fuzz_text(data, size, 1 << 12, &a);
    if (!text)
        return 0;
    rt_err err;
    rt_err_clear(&err);
    rt_op *op = NULL;
    if (rt_spec_parse(a, text, "fuzz.spec", NULL, 0, &op, &err) == RT_OK) {
        for (int d = 0; d < 2; d++) {
            rt_perf_options popt = {.top_k = 2, .max_evals = 200};
            rt_perf_result *res = NULL;
            rt_err_clear(&err);
            rt_status st = rt_perf_construct(a, op, devs[d], &popt, &res, &err);
            expect_message(st, &err);
            for (int32_t i = 0; st == RT_OK && i < res->n_cands; i++)
                emit_one(a, op, devs[d], res, &res->cands[i], i);
            if (d == 0)
                emit_one(a, op, devs[d], NULL, NULL, 0);
        }
    }
    rt_arena_free(a);
    return 0;
}
