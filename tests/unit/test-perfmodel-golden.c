// test-perfmodel-golden.c: the golden table of chosen top-1 rTiles per (op, device) in
// tests/golden/rtiles.txt. Regenerates the table for Roller-style operators (GEMM, Conv2D,
// ReLU, ReduceMean, a small GEMM and a ragged projection) on every shipped device and diffs it;
// RTGEN_UPDATE_GOLDEN=1 rewrites the file for review instead.
#include "test.h"
#include "test-perfmodel-ops.h"

#include <dirent.h>

#define GOLDEN "tests/golden/rtiles.txt"

static int cmp_str(const void *a, const void *b) {
    return strcmp((const char *)a, (const char *)b);
}

int main(void) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_buf out;
    rt_buf_init(&out, a);
    rt_buf_puts(&out, "# top-1 rTile per (op, device): tiles from level 1 to the registers over "
                      "the listed axes\n# regenerate: RTGEN_UPDATE_GOLDEN=1 ctest -R "
                      "test-perfmodel-golden\n");
    char names[32][300];
    int n = 0;
    DIR *d = opendir("devices");
    RT_EXPECT(d != NULL);
    struct dirent *e;
    while (d && (e = readdir(d)) && n < 32) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".ini") == 0 && strcmp(e->d_name, "host.ini"))
            snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    }
    if (d)
        closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_str);
    for (int i = 0; i < n; i++) {
        char path[320];
        snprintf(path, sizeof path, "devices/%.300s", names[i]);
        rt_device dev;
        rt_err err = {0};
        if (rt_hal_load_device(path, &dev, &err) != RT_OK) {
            fprintf(stderr, "%s: %s\n", path, err.msg);
            RT_EXPECT(false);
            continue;
        }
        struct {
            const char *label;
            rt_op *op;
        } ops[] = {
            {"gemm-4096x4096x1024", tp_matmul(a, 4096, 4096, 1024, RT_DTYPE_F32)},
            {"gemm-M1-128x1000x4032", tp_matmul(a, 128, 1000, 4032, RT_DTYPE_F32)},
            {"conv-C1", tp_conv(a, 128, 128, 58, 128, 3, 2, 1)},
            {"relu-E0", tp_relu(a, (int64_t[]){128, 1008, 42, 42})},
            {"reduce_mean-R0", tp_reduce_mean(a, 128, 512, 1024)},
            {"proj-ragged", tp_ragged_proj(a, 32, 512)},
        };
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            rt_perf_result *r;
            rt_perf_options opt = {0};
            opt.top_k = 10;
            rt_buf_printf(&out, "%s %s: ", ops[k].label, names[i]);
            if (rt_perf_construct(a, ops[k].op, &dev, &opt, &r, &err) != RT_OK) {
                rt_buf_printf(&out, "error: %s\n", err.msg);
                rt_err_clear(&err);
                continue;
            }
            rt_perf_print_top1(r, &out);
            rt_buf_puts(&out, "\n");
        }
    }
    RT_EXPECT(!out.oom);
    const char *upd = getenv("RTGEN_UPDATE_GOLDEN");
    if (upd && strcmp(upd, "1") == 0) {
        FILE *f = fopen(GOLDEN, "w");
        RT_EXPECT(f != NULL);
        if (f) {
            fputs(out.data, f);
            fclose(f);
            printf("updated %s\n", GOLDEN);
        }
    } else {
        char *want = NULL;
        size_t len = 0;
        rt_err err = {0};
        RT_EXPECT_EQ(rt_read_file(a, GOLDEN, &want, &len, &err), RT_OK);
        if (want && strcmp(want, out.data) != 0) {
            // Print the first differing line of each.
            const char *p = want, *q = out.data;
            while (*p && *p == *q) {
                p++;
                q++;
            }
            while (p > want && p[-1] != '\n') {
                p--;
                q--;
            }
            fprintf(stderr, "golden %s differs:\n  want %.*s\n  got  %.*s\n", GOLDEN,
                    (int)strcspn(p, "\n"), p, (int)strcspn(q, "\n"), q);
            RT_EXPECT(false);
        }
    }
    rt_arena_free(a);
    return rt_test_finish("test-perfmodel-golden");
}
