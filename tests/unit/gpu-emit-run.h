// gpu-emit-run.h: the compile table shared by test-gpu-emit.c (examples/*.spec) and
// test-gpu-emit-bench.c (examples/bench/*.spec): for every spec and GPU device, construct,
// emit and compile the top-K in parallel in-process (NVRTC / hipRTC), expect every candidate to
// compile and the CUDA top-1 not to spill, and print registers, spills, shared memory, occupancy
// and predicted time of the top-1 (treernn with its tree's node count bound as rtgen binds it
// without a tree file, its recursion level by level). Devices whose backend is not built in are
// skipped.
#ifndef RT_TEST_GPU_EMIT_RUN_H
#define RT_TEST_GPU_EMIT_RUN_H

#include "test.h"

#include "run-gpu.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int cmp_str(const void *x, const void *y) {
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

// examples/*.spec and examples/bench/*.spec, sorted.
static int32_t list_specs(rt_arena *a, const char **out, int32_t cap) {
    static const char *const dirs[] = {"examples", "examples/bench"};
    int32_t n = 0;
    for (int i = 0; i < 2; i++) {
        DIR *d = opendir(dirs[i]);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d)) && n < cap) {
            size_t len = strlen(e->d_name);
            if (len > 5 && strcmp(e->d_name + len - 5, ".spec") == 0)
                out[n++] = rt_arena_printf(a, "%s/%s", dirs[i], e->d_name);
        }
        closedir(d);
    }
    qsort(out, (size_t)n, sizeof *out, cmp_str);
    return n;
}

static bool backend_built(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_gpu_binary *bin;
    rt_err e;
    rt_err_clear(&e);
    rt_status st = rt_gpu_compile(a, dev, "", "k", NULL, &bin, &e);
    bool built = !(st == RT_ERR_BACKEND && strstr(e.msg, "not built with"));
    rt_arena_free(a);
    return built;
}

// Compiles the top_k candidates of every spec under dirs (with `bench` in the path or not,
// as want_bench says) on every device of dev_paths; prints the top-1 table. Returns the number
// of devices whose backend is built in.
static int32_t compile_table(const char *const *dev_paths, int32_t n_dev_paths, bool want_bench,
                             int32_t top_k) {
    rt_arena *la = rt_arena_new(1 << 16);
    const char *specs[64];
    int32_t n_specs = list_specs(la, specs, 64);
    RT_EXPECT(n_specs >= 30);
    int32_t n_devs_run = 0, n_compiled = 0;
    double t0 = (double)clock();
    printf("%-26s %-7s %-9s %4s %6s %8s %6s %11s  %s\n", "op", "device", "arch", "regs", "spill",
           "smem_B", "occ", "predict_us", "kernel");
    for (int32_t di = 0; di < n_dev_paths; di++) {
        rt_device dev;
        rt_err err = {0};
        RT_EXPECT_EQ(rt_hal_load_device(dev_paths[di], &dev, &err), RT_OK);
        if (!backend_built(&dev)) {
            rt_test_skip("%s: %s backend not built in", dev_paths[di],
                         rt_devclass_name(dev.devclass));
            continue;
        }
        n_devs_run++;
        for (int32_t si = 0; si < n_specs; si++) {
            if ((strstr(specs[si], "/bench/") != NULL) != want_bench)
                continue;
            rt_arena *a = rt_arena_new(1 << 20);
            rt_op *op = NULL;
            rt_perf_result *r = NULL;
            rt_perf_options popt = {.top_k = top_k};
            rt_gpu_candidate *cands = NULL;
            rt_err_clear(&err);
            rt_status st = rt_spec_load(a, specs[si], NULL, 0, &op, &err);
            // A tree's node count as rtgen binds it without a tree file (treernn).
            rt_size_binding tree_sets[4];
            int32_t n_tree_sets = 0;
            for (int32_t t = 0; st == RT_OK && t < op->n_trees && n_tree_sets < 4; t++)
                tree_sets[n_tree_sets++] =
                    (rt_size_binding){op->sizes[op->trees[t].n_sym].name, RT_TREE_DEFAULT_NODES};
            if (st == RT_OK && n_tree_sets > 0)
                st = rt_spec_load(a, specs[si], tree_sets, n_tree_sets, &op, &err);
            if (st == RT_OK)
                st = rt_perf_construct(a, op, &dev, &popt, &r, &err);
            if (st == RT_OK)
                st = rt_gpu_compile_topk(a, r, &dev, top_k, 2, &cands, &err);
            if (st != RT_OK) {
                char msg[1024];
                rt_err_format(&err, "test", true, msg, sizeof msg);
                fprintf(stderr, "%s on %s: %s\n", specs[si], dev_paths[di], msg);
                RT_EXPECT(0);
                rt_arena_free(a);
                continue;
            }
            for (int32_t c = 0; c < r->n_cands && c < top_k; c++) {
                const rt_gpu_candidate *cd = &cands[c];
                if (!cd->compiled)
                    fprintf(stderr, "%s on %s rank %d: %s\n%s\n", specs[si], dev_paths[di],
                            (int)c + 1, cd->compile_err.msg,
                            cd->compile_err.log ? cd->compile_err.log : "");
                RT_EXPECT(cd->compiled);
                n_compiled += cd->compiled;
            }
            const rt_gpu_candidate *top = &cands[0];
            if (top->compiled) {
                if (top->spill_bytes != 0)
                    fprintf(stderr, "%s on %s: top-1 spills %lld bytes\n", specs[si], dev_paths[di],
                            (long long)top->spill_bytes);
                if (dev.devclass == RT_DEVCLASS_CUDA)
                    RT_EXPECT_EQ(top->spill_bytes, 0);
                RT_EXPECT(top->regs > 0 && top->occupancy > 0.0);
                RT_EXPECT(strstr(top->source, dev.name) != NULL); // header names the device
                const char *slash = strrchr(specs[si], '/');
                printf("%-26s %-7s %-9s %4d %6lld %8lld %6.2f %11.2f  %s\n", slash + 1,
                       strrchr(dev_paths[di], '/') + 1, top->compiled_arch, (int)top->regs,
                       (long long)top->spill_bytes, (long long)top->smem_bytes, top->occupancy,
                       top->prog->predicted_ns / 1000.0, top->kernel->phases[0].what);
                if (top->note && si == 0)
                    printf("  note: %s\n", top->note);
            }
            rt_arena_free(a);
        }
    }
    printf("%d kernels compiled on %d devices in %.1f s of CPU\n", (int)n_compiled, (int)n_devs_run,
           ((double)clock() - t0) / CLOCKS_PER_SEC);
    rt_arena_free(la);
    return n_devs_run;
}

#endif
