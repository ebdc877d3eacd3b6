// test.h: the tiny assertion kit of the unit and numerical tests. Each failing check prints its
// expression, the values and the location, and the test exits non-zero at the end. A part of a
// test that cannot run here (a backend not built in) calls rt_test_skip: the test then exits 77,
// which ctest reports as skipped (SKIP_RETURN_CODE), unless a check failed.
#ifndef RT_TEST_H
#define RT_TEST_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rt_test_failures;
static int rt_test_checks;
static int rt_test_skips;

// Records that a part of the test did not run, and why (printed as "skipped: WHY").
__attribute__((format(printf, 1, 2), unused)) static void rt_test_skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("skipped: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    rt_test_skips++;
}

#define RT_EXPECT(cond)                                                                            \
    do {                                                                                           \
        rt_test_checks++;                                                                          \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);                    \
            rt_test_failures++;                                                                    \
        }                                                                                          \
    } while (0)

#define RT_EXPECT_EQ(a, b)                                                                         \
    do {                                                                                           \
        long long rt_a_ = (long long)(a), rt_b_ = (long long)(b);                                  \
        rt_test_checks++;                                                                          \
        if (rt_a_ != rt_b_) {                                                                      \
            fprintf(stderr, "%s:%d: %s == %s: %lld != %lld\n", __FILE__, __LINE__, #a, #b, rt_a_,  \
                    rt_b_);                                                                        \
            rt_test_failures++;                                                                    \
        }                                                                                          \
    } while (0)

#define RT_EXPECT_STR(a, b)                                                                        \
    do {                                                                                           \
        const char *rt_a_ = (a), *rt_b_ = (b);                                                     \
        rt_test_checks++;                                                                          \
        if (!rt_a_ || !rt_b_ || strcmp(rt_a_, rt_b_) != 0) {                                       \
            fprintf(stderr, "%s:%d: %s == %s:\n  got      \"%s\"\n  expected \"%s\"\n", __FILE__,  \
                    __LINE__, #a, #b, rt_a_ ? rt_a_ : "(null)", rt_b_ ? rt_b_ : "(null)");         \
            rt_test_failures++;                                                                    \
        }                                                                                          \
    } while (0)

#define RT_EXPECT_NEAR(a, b, tol)                                                                  \
    do {                                                                                           \
        double rt_a_ = (double)(a), rt_b_ = (double)(b);                                           \
        rt_test_checks++;                                                                          \
        if (!(fabs(rt_a_ - rt_b_) <= (tol))) {                                                     \
            fprintf(stderr, "%s:%d: %s ~ %s: %.9g vs %.9g\n", __FILE__, __LINE__, #a, #b, rt_a_,   \
                    rt_b_);                                                                        \
            rt_test_failures++;                                                                    \
        }                                                                                          \
    } while (0)

// 1 when a check failed, else 77 when a part was skipped, else 0.
static inline int rt_test_finish(const char *name) {
    printf("%s: %d checks, %d failed, %d parts skipped\n", name, rt_test_checks, rt_test_failures,
           rt_test_skips);
    return rt_test_failures ? 1 : rt_test_skips ? 77 : 0;
}

#endif
