// test.h: the tiny assertion kit of the unit and numerical tests. Each failing check prints its
// expression, the values and the location, and the test exits non-zero at the end.
#ifndef RT_TEST_H
#define RT_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rt_test_failures;
static int rt_test_checks;

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

static inline int rt_test_finish(const char *name) {
    printf("%s: %d checks, %d failed\n", name, rt_test_checks, rt_test_failures);
    return rt_test_failures ? 1 : 0;
}

#endif
