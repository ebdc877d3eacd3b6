// bench-ops-blis.c: the BLIS column of bench-ops. BLIS's cblas_sgemm clashes with OpenBLAS's, so
// it lives in its own executable: for each GEMM shape given (as bench-ops --list-gemm prints
// them) and each thread count it times cblas_sgemm with bench-ops' method (bench-util.c),
// checks 64 sampled entries against a double-precision dot product, and prints one line
//   blis M N K THREADS MIN_NS MEDIAN_NS MAXERR ARCH
// that bench-ops --blis=FILE reads. bench/run.sh sets BLIS_ARCH_TYPE=0 (skx kernels).
// usage: bench-ops-blis [--threads=1,2] [--budget-ms=MS] MxNxK ...
#include "bench-util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// From BLIS's cblas.h and blis.h (not installed in a standard include directory).
enum { BLIS_ROW_MAJOR = 101, BLIS_NO_TRANS = 111 };
void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
void bli_init(void);
void bli_thread_set_num_threads(long n);
int bli_arch_query_id(void);
const char *bli_arch_string(int id);

typedef struct blis_gemm {
    int m, n, k;
    float *a, *b, *c;
} blis_gemm;

static void blis_run(void *ctx) {
    blis_gemm *g = ctx;
    cblas_sgemm(BLIS_ROW_MAJOR, BLIS_NO_TRANS, BLIS_NO_TRANS, g->m, g->n, g->k, 1.0f, g->a, g->k,
                g->b, g->n, 0.0f, g->c, g->n);
}

// Max |C - ref| / max |ref| over 64 sampled entries.
static double blis_check(const blis_gemm *g) {
    double max_diff = 0, max_ref = 0;
    unsigned long long s = 12345;
    for (int t = 0; t < 64; t++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        int i = (int)((s >> 33) % (unsigned long long)g->m);
        int j = (int)((s >> 13) % (unsigned long long)g->n);
        double ref = 0;
        for (int p = 0; p < g->k; p++)
            ref += (double)g->a[(size_t)i * g->k + p] * (double)g->b[(size_t)p * g->n + j];
        double diff = fabs((double)g->c[(size_t)i * g->n + j] - ref);
        max_diff = diff > max_diff || diff != diff ? diff : max_diff;
        max_ref = fmax(max_ref, fabs(ref));
    }
    return max_diff / fmax(max_ref, 1e-30);
}

int main(int argc, char **argv) {
    int threads[4] = {1, 2}, n_threads = 2;
    double budget_ms = 200;
    bli_init(); // before the query: with BLIS_ARCH_TYPE set, an early query aborts
    const char *arch = bli_arch_string(bli_arch_query_id());
    fprintf(stderr, "bench-ops-blis: BLIS sub-configuration %s (BLIS_ARCH_TYPE=%s)\n", arch,
            getenv("BLIS_ARCH_TYPE") ? getenv("BLIS_ARCH_TYPE") : "unset");
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strncmp(s, "--threads=", 10) == 0) {
            n_threads =
                sscanf(s + 10, "%d,%d,%d,%d", &threads[0], &threads[1], &threads[2], &threads[3]);
            for (int t = 0; t < n_threads; t++)
                if (threads[t] < 1 || threads[t] > 64)
                    n_threads = 0;
            if (n_threads < 1) {
                fprintf(stderr, "bench-ops-blis: bad %s\n", s);
                return 2;
            }
        } else if (strncmp(s, "--budget-ms=", 12) == 0) {
            budget_ms = atof(s + 12);
        }
    }
    for (int t = 0; t < n_threads; t++) {
        bli_thread_set_num_threads(threads[t]);
        for (int i = 1; i < argc; i++) {
            blis_gemm g;
            if (argv[i][0] == '-')
                continue;
            if (sscanf(argv[i], "%dx%dx%d", &g.m, &g.n, &g.k) != 3 || g.m < 1 || g.n < 1 ||
                g.k < 1) {
                fprintf(stderr, "bench-ops-blis: expected MxNxK (got \"%s\")\n", argv[i]);
                return 2;
            }
            g.a = malloc((size_t)g.m * g.k * sizeof(float));
            g.b = malloc((size_t)g.k * g.n * sizeof(float));
            g.c = malloc((size_t)g.m * g.n * sizeof(float));
            if (!g.a || !g.b || !g.c) {
                fprintf(stderr, "bench-ops-blis: out of memory for %s\n", argv[i]);
                return 1;
            }
            for (size_t e = 0; e < (size_t)g.m * g.k; e++)
                g.a[e] = (float)((e * 7) % 13) / 13.0f - 0.5f;
            for (size_t e = 0; e < (size_t)g.k * g.n; e++)
                g.b[e] = (float)((e * 5) % 11) / 11.0f - 0.5f;
            rt_bench_stats st;
            rt_bench_time(blis_run, &g, budget_ms, &st);
            printf("blis %d %d %d %d %.0f %.0f %.2e %s\n", g.m, g.n, g.k, threads[t], st.min_ns,
                   st.median_ns, blis_check(&g), arch);
            fflush(stdout);
            free(g.a);
            free(g.b);
            free(g.c);
        }
    }
    return 0;
}
