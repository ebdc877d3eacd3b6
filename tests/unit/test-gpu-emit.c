// test-gpu-emit.c: the GPU emitter's text and the compilers' verdict on it, no GPU needed.
//   - golden CUDA of matmul, conv2d and relu (small sizes, v100.ini top-1) under
//     tests/golden/gpu/ (RTGEN_UPDATE_GOLDEN=1 rewrites them), also compiled with NVRTC;
//   - the CUDA, HIP and OpenCL texts of one rProgram differ only in the dialect table's
//     constructs: each text, with its dialect's tokens mapped back to neutral names, is the same;
//   - every op of examples/*.spec on every shipped CUDA/HIP device: top-2 emitted and compiled in
//     parallel (NVRTC sm_75/80/90, hipRTC gfx906/gfx90a), the CUDA top-1 without spills, with the
//     table of registers, spills, shared memory, occupancy and predicted time (gpu-emit-run.h).
#include "gpu-emit-run.h"

#include <ctype.h>
#include <stdlib.h>

// Emits rank 1 of spec text (or examples/NAME.spec with sets) for dev in target t.
static bool emit_one(rt_arena *a, const char *spec, const rt_size_binding *sets, int32_t n_sets,
                     const rt_device *dev, rt_gpu_target t, rt_gpu_candidate *out) {
    rt_op *op = NULL;
    rt_perf_result *r = NULL;
    rt_perf_options popt = {.top_k = 1};
    rt_err err = {0};
    if (rt_spec_load(a, spec, sets, n_sets, &op, &err) != RT_OK ||
        rt_perf_construct(a, op, dev, &popt, &r, &err) != RT_OK ||
        rt_gpu_emit_candidate(a, r, 1, t, NULL, out, &err) != RT_OK) {
        fprintf(stderr, "%s: %s\n", spec, err.msg);
        return false;
    }
    return true;
}

// Replaces every occurrence of from (non-empty) by to.
static bool ident_char(char c) {
    return isalnum((unsigned char)c) || c == '_';
}

// Replaces each occurrence of from that is not part of a longer identifier (OpenCL's i64 is
// `long`: the word in "longest" stays).
static char *replace_all(rt_arena *a, const char *s, const char *from, const char *to) {
    if (!from || !*from)
        return rt_arena_strdup(a, s);
    rt_buf b;
    rt_buf_init(&b, a);
    size_t n = strlen(from);
    for (const char *p = s; *p;) {
        const char *q = strstr(p, from);
        while (q && ((ident_char(from[0]) && q > s && ident_char(q[-1])) ||
                     (ident_char(from[n - 1]) && ident_char(q[n]))))
            q = strstr(q + 1, from);
        if (!q) {
            rt_buf_puts(&b, p);
            break;
        }
        rt_buf_putn(&b, p, (size_t)(q - p));
        rt_buf_puts(&b, to);
        p = q + n;
    }
    return b.data ? b.data : rt_arena_strdup(a, "");
}

// The text with the dialect's constructs replaced by neutral names.
static char *normalize(rt_arena *a, const char *text, const rt_gpu_dialect *d, int threads) {
    char bounds[96];
    snprintf(bounds, sizeof bounds, d->bounds_fmt, threads);
    char *s = rt_arena_strdup(a, text);
    s = replace_all(a, s, rt_arena_printf(a, "// %s kernel", d->target), "// @target@ kernel");
    s = replace_all(a, s, d->prelude, ""); // empty for cuda/hip
    s = replace_all(a, s, bounds, "@bounds@");
    s = replace_all(a, s, d->kernel_qual, "@kernel@");
    s = replace_all(a, s, "@kernel@ @bounds@ void", "@kernel@ void @bounds@");
    s = replace_all(a, s, d->fn_qual, "@fn@");
    // the longer spelling first; CUDA spells both alike, so both are one barrier here
    s = replace_all(a, s, d->barrier_global, "@barrier@");
    s = replace_all(a, s, d->barrier, "@barrier@");
    s = replace_all(a, s, d->unroll, "@unroll@");
    s = replace_all(a, s, d->thread_idx, "@tid@");
    for (int i = 0; i < 3; i++)
        s = replace_all(a, s, d->block_idx[i], rt_arena_printf(a, "@bid%d@", i));
    s = replace_all(a, s, d->shared_qual, "@shared@");
    s = replace_all(a, s, d->restrict_kw, "@restrict@");
    s = replace_all(a, s, d->inf, "@inf@");
    s = replace_all(a, s, d->i64, "@i64@");
    s = replace_all(a, s, rt_arena_printf(a, "%s(", d->fmod_f32), "@fmod@(");
    for (int f = 0; f < RT_FN_COUNT; f++)
        if (d->fn_f32[f])
            s = replace_all(a, s, rt_arena_printf(a, "%s(", d->fn_f32[f]),
                            rt_arena_printf(a, "@%s@(", rt_fn_name((rt_fn)f)));
    if (*d->global_qual) // "__global " before buffer types
        s = replace_all(a, s, d->global_qual, "");
    return s;
}

static void test_dialects(const rt_device *v100) {
    static const struct {
        const char *spec;
        const char *sets;
    } cases[] = {
        {"examples/linear_gelu.spec", "M=33"}, // staged + epilogue with erf
        {"examples/softmax.spec", ""},         // exp, max, -inf
        {"examples/qkt.spec", "B=4"},          // ragged: start arrays, grid y/z
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        rt_arena *a = rt_arena_new(1 << 20);
        rt_size_binding set[1];
        int32_t n_set = 0;
        if (*cases[i].sets) {
            char *s = rt_arena_strdup(a, cases[i].sets);
            char *eq = strchr(s, '=');
            *eq = 0;
            set[0].name = s;
            set[0].value = atoll(eq + 1);
            n_set = 1;
        }
        rt_gpu_candidate c[RT_GPU_TARGET_COUNT];
        const char *norm[RT_GPU_TARGET_COUNT];
        bool ok = true;
        for (int t = 0; t < RT_GPU_TARGET_COUNT && ok; t++) {
            ok = emit_one(a, cases[i].spec, set, n_set, v100, (rt_gpu_target)t, &c[t]);
            if (ok)
                norm[t] = normalize(a, c[t].source, rt_gpu_dialect_of((rt_gpu_target)t),
                                    c[t].kernel->phases[0].threads);
        }
        RT_EXPECT(ok);
        if (!ok) {
            rt_arena_free(a);
            continue;
        }
        RT_EXPECT(strcmp(c[0].source, c[2].source) != 0);
        RT_EXPECT(strstr(c[2].source, "__kernel") && strstr(c[2].source, "get_local_id(0)"));
        RT_EXPECT(strstr(c[0].source, "__launch_bounds__(") && strstr(c[0].source, "extern \"C\""));
        for (int t = 1; t < RT_GPU_TARGET_COUNT; t++) {
            if (strcmp(norm[0], norm[t]) != 0) {
                const char *x = norm[0], *y = norm[t];
                while (*x && *x == *y)
                    x++, y++;
                fprintf(stderr, "%s: cuda and %s differ beyond the dialect at:\n%.80s\n%.80s\n",
                        cases[i].spec, rt_gpu_dialect_of((rt_gpu_target)t)->target, x, y);
            }
            RT_EXPECT_STR(norm[0], norm[t]);
        }
        // deterministic: the same candidate emits the same text
        rt_gpu_candidate again;
        if (emit_one(a, cases[i].spec, set, n_set, v100, RT_GPU_TARGET_CUDA, &again))
            RT_EXPECT_STR(again.source, c[0].source);
        rt_arena_free(a);
    }
}

static void test_goldens(const rt_device *v100) {
    static const struct {
        const char *name, *spec;
        rt_size_binding sets[7];
        int32_t n_sets;
    } cases[] = {
        {"matmul", "examples/matmul.spec", {{"M", 96}, {"N", 80}, {"K", 40}}, 3},
        {"conv2d",
         "examples/conv2d.spec",
         {{"N", 2}, {"C", 8}, {"H", 10}, {"W", 10}, {"F", 16}, {"OH", 5}, {"OW", 5}},
         7},
        {"relu", "tests/golden/gpu/relu-small.spec", {{0}}, 0},
        // rows mode on a work list: strided rows, shared-memory trees, no branch around them
        {"ragged_softmax", "examples/ragged_softmax.spec", {{"B", 4}, {"H", 2}}, 2},
    };
    bool update = getenv("RTGEN_UPDATE_GOLDEN") != NULL;
    bool nvrtc = backend_built(v100);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        rt_arena *a = rt_arena_new(1 << 20);
        rt_gpu_candidate c;
        char path[256];
        snprintf(path, sizeof path, "tests/golden/gpu/%s.v100.cu", cases[i].name);
        if (!emit_one(a, cases[i].spec, cases[i].sets, cases[i].n_sets, v100, RT_GPU_TARGET_CUDA,
                      &c)) {
            RT_EXPECT(0);
            rt_arena_free(a);
            continue;
        }
        if (update) {
            FILE *f = fopen(path, "w");
            RT_EXPECT(f != NULL);
            if (f) {
                fputs(c.source, f);
                fclose(f);
            }
            printf("updated %s\n", path);
        }
        char *want = NULL;
        size_t len = 0;
        rt_err err = {0};
        RT_EXPECT_EQ(rt_read_file(a, path, &want, &len, &err), RT_OK);
        if (want && strcmp(want, c.source) != 0) {
            fprintf(stderr,
                    "%s differs from the emitted text (RTGEN_UPDATE_GOLDEN=1 rewrites "
                    "it)\n",
                    path);
            RT_EXPECT(0);
        }
        if (nvrtc) { // goldens compile
            rt_gpu_binary *bin = NULL;
            rt_gpu_compile_options o = {.threads_per_block = c.kernel->phases[0].threads};
            rt_status st =
                rt_gpu_compile(a, v100, c.source, c.kernel->phases[0].kernel_name, &o, &bin, &err);
            if (st != RT_OK)
                fprintf(stderr, "%s: %s\n%s\n", path, err.msg, err.log ? err.log : "");
            RT_EXPECT_EQ(st, RT_OK);
        }
        rt_arena_free(a);
    }
}

// Serial loops of many constant trips carry a bounded unroll (NVRTC took 46 s to unroll
// softmax's 1024-trip loops in full), in every dialect; short ones keep the compiler's choice.
static void test_long_loops(const rt_device *v100) {
    rt_arena *a = rt_arena_new(1 << 20);
    for (int t = 0; t < RT_GPU_TARGET_COUNT; t++) {
        rt_gpu_candidate c;
        if (!emit_one(a, "tests/data/softmax-acc.spec", NULL, 0, v100, (rt_gpu_target)t, &c)) {
            RT_EXPECT(0);
            continue;
        }
        RT_EXPECT(strstr(c.source, "// kernel 0: direct:") != NULL);
        int32_t long_loops = 0, bounded = 0;
        const char *pragma = "#pragma unroll 4\n";
        for (const char *p = strstr(c.source, " < 1024; "); p; p = strstr(p + 1, " < 1024; ")) {
            const char *line = p; // start of the loop's line, then of the line before it
            while (line > c.source && line[-1] != '\n')
                line--;
            long_loops += strncmp(strstr(line, "for ("), "for (", 5) == 0;
            const char *end = line;
            if (line > c.source)
                line--;
            while (line > c.source && line[-1] != '\n')
                line--;
            while (*line == ' ')
                line++;
            bounded += (size_t)(end - line) == strlen(pragma) &&
                       strncmp(line, pragma, strlen(pragma)) == 0;
        }
        RT_EXPECT(long_loops >= 4);
        RT_EXPECT_EQ(bounded, long_loops);
        RT_EXPECT(strstr(c.source, "#pragma unroll 4\n") != NULL);
    }
    rt_arena_free(a);
}

int main(void) {
    rt_device v100;
    rt_err err = {0};
    RT_EXPECT_EQ(rt_hal_load_device("devices/v100.ini", &v100, &err), RT_OK);
    test_goldens(&v100);
    test_dialects(&v100);
    test_long_loops(&v100);
    // top-2 (compiled in parallel) on the V100 and MI50 tile programs, top-1 elsewhere
    static const char *const devs2[] = {"devices/v100.ini", "devices/mi50.ini"};
    static const char *const devs1[] = {"devices/t4.ini", "devices/a100.ini", "devices/h100.ini",
                                        "devices/k80.ini", "devices/mi250x.ini"};
    // A device whose backend is not built in is skipped (rt_test_skip): the test then reports 77.
    compile_table(devs2, 2, false, 2);
    compile_table(devs1, 5, false, 1);
    return rt_test_finish("test-gpu-emit");
}
