// test-kit.c: the assertion kit itself (test.h). A test with a part skipped (rt_test_skip)
// exits 77, which ctest reports as skipped rather than passed; a failed check wins over a skip;
// a test with neither exits 0.
#include "test.h"

#include <stdbool.h>

int main(void) {
    bool ok = rt_test_finish("nothing checked") == 0;
    RT_EXPECT(1 + 1 == 2);
    ok = ok && rt_test_finish("one check passed") == 0;
    rt_test_skip("a part that cannot run here");
    ok = ok && rt_test_finish("a part skipped") == 77;
    rt_test_failures++; // as a failed RT_EXPECT leaves it
    ok = ok && rt_test_finish("a check failed, a part skipped") == 1;
    printf("test-kit: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
