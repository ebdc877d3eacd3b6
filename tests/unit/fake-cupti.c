// fake-cupti.c: a stand-in for libcupti (built as a shared library that test-gpu-cupti points
// $RTGEN_LIBCUPTI at), with the entry points hal-cupti.c opens, their CUPTI 13 signatures, and
// the activity API's buffer protocol: records go into buffers the client's request callback
// hands out and come back through its completion callback (when a buffer holds the records a
// test asks for, as CUPTI's own thread would, and on a flush). A kernel "executes" when the
// test's fake driver calls fake_cupti_kernel; while CONCURRENT_KERNEL is enabled, that writes a
// CUpti_ActivityKernel10 record, after a memcpy record the client must skip. The test can make
// any entry point fail at its n-th call, report dropped records, lose a record, and hold back
// the buffer being filled from a plain (unforced) flush.
#include <cupti.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

// The test's controls (test-gpu-cupti.c finds them with dlsym).
FAKE_EXPORT void fake_cupti_reset(void);
FAKE_EXPORT void fake_cupti_fail(const char *fn, int at, int result);
FAKE_EXPORT void fake_cupti_options(int per_buffer, int dropped, int lose, int hold_unforced);
FAKE_EXPORT int fake_cupti_calls(const char *fn);
FAKE_EXPORT void fake_cupti_kernel(const char *name, uint64_t start_ns, uint64_t end_ns);

enum { FAKE_SLOT = sizeof(CUpti_ActivityKernel10), FAKE_FNS = 8 };

static const char *const fake_fn_names[FAKE_FNS] = {"cuptiGetResultString",
                                                    "cuptiActivityRegisterCallbacks",
                                                    "cuptiActivityEnable",
                                                    "cuptiActivityDisable",
                                                    "cuptiActivityFlushAll",
                                                    "cuptiActivityGetNextRecord",
                                                    "cuptiActivityGetNumDroppedRecords",
                                                    "fake_cupti_kernel"};

static struct {
    CUpti_BuffersCallbackRequestFunc request;
    CUpti_BuffersCallbackCompleteFunc complete;
    int calls[FAKE_FNS];
    int fail_fn, fail_at; // the fail_at-th call of fail_fn returns fail_result
    CUptiResult fail_result;
    bool enabled;
    uint8_t *buf;
    size_t size, used;
    uint32_t correlation;
    int per_buffer;     // deliver a buffer once it holds this many kernel records (0: on flush)
    int in_buffer;      // kernel records in buf
    size_t dropped;     // reported by the next cuptiActivityGetNumDroppedRecords
    int lose;           // the lose-th kernel record (from 1) is not written; 0: none
    int kernels;        // kernel records asked for since the reset
    bool hold_unforced; // a plain flush keeps the buffer being filled
} fake;

static int fake_fn(const char *name) {
    for (int i = 0; i < FAKE_FNS; i++)
        if (strcmp(fake_fn_names[i], name) == 0)
            return i;
    return -1;
}

// Counts a call of entry point fn; the injected failure or CUPTI_SUCCESS.
static CUptiResult fake_call(int fn) {
    fake.calls[fn]++;
    if (fake.fail_fn == fn && fake.fail_at == fake.calls[fn])
        return fake.fail_result;
    return CUPTI_SUCCESS;
}

FAKE_EXPORT void fake_cupti_reset(void) {
    memset(fake.calls, 0, sizeof fake.calls);
    fake.fail_fn = -1;
    fake.fail_at = 0;
    fake.per_buffer = 0;
    fake.dropped = 0;
    fake.lose = 0;
    fake.kernels = 0;
    fake.hold_unforced = false;
}

FAKE_EXPORT void fake_cupti_fail(const char *fn, int at, int result) {
    fake.fail_fn = fake_fn(fn);
    fake.fail_at = at;
    fake.fail_result = (CUptiResult)result;
}

FAKE_EXPORT void fake_cupti_options(int per_buffer, int dropped, int lose, int hold_unforced) {
    fake.per_buffer = per_buffer;
    fake.dropped = (size_t)dropped;
    fake.lose = lose;
    fake.hold_unforced = hold_unforced != 0;
}

FAKE_EXPORT int fake_cupti_calls(const char *fn) {
    int i = fake_fn(fn);
    return i < 0 ? -1 : fake.calls[i];
}

static void fake_deliver(void) {
    if (!fake.buf)
        return;
    uint8_t *b = fake.buf;
    size_t used = fake.used;
    fake.buf = NULL;
    fake.used = 0;
    fake.in_buffer = 0;
    fake.complete(NULL, 0, b, fake.size, used);
}

// One record slot in the buffer being filled (a new one from the client when full); NULL when
// the client gave none.
static uint8_t *fake_slot(void) {
    if (fake.buf && fake.used + FAKE_SLOT > fake.size)
        fake_deliver();
    if (!fake.buf) {
        size_t max_records = 0;
        fake.request(&fake.buf, &fake.size, &max_records);
        fake.used = 0;
        if (!fake.buf || fake.size < 2 * FAKE_SLOT)
            return NULL;
    }
    uint8_t *p = fake.buf + fake.used;
    memset(p, 0, FAKE_SLOT);
    fake.used += FAKE_SLOT;
    return p;
}

// A kernel ran from start_ns to end_ns on the device (the test's fake driver calls this per
// launch).
FAKE_EXPORT void fake_cupti_kernel(const char *name, uint64_t start_ns, uint64_t end_ns) {
    fake.calls[fake_fn("fake_cupti_kernel")]++;
    uint32_t id = ++fake.correlation;
    if (!fake.enabled || !fake.request)
        return;
    if (++fake.kernels == fake.lose)
        return;
    CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)(void *)fake_slot();
    if (m)
        m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)(void *)fake_slot();
    if (!k)
        return;
    k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k->start = start_ns;
    k->end = end_ns;
    k->correlationId = id;
    k->name = name;
    if (fake.per_buffer > 0 && ++fake.in_buffer == fake.per_buffer)
        fake_deliver();
}

FAKE_EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char **str) {
    CUptiResult r = fake_call(0);
    if (r != CUPTI_SUCCESS)
        return r;
    switch (result) {
    case CUPTI_ERROR_UNKNOWN:
        *str = "CUPTI_ERROR_UNKNOWN";
        break;
    case CUPTI_ERROR_NOT_INITIALIZED:
        *str = "CUPTI_ERROR_NOT_INITIALIZED";
        break;
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
        *str = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES";
        break;
    default:
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                       CUpti_BuffersCallbackCompleteFunc complete) {
    CUptiResult r = fake_call(1);
    if (r == CUPTI_SUCCESS) {
        fake.request = request;
        fake.complete = complete;
    }
    return r;
}

FAKE_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
    CUptiResult r = fake_call(2);
    if (r == CUPTI_SUCCESS && kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
        fake.enabled = true;
    return r;
}

FAKE_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
    CUptiResult r = fake_call(3);
    if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
        fake.enabled = false;
    return r;
}

FAKE_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag) {
    CUptiResult r = fake_call(4);
    if (r != CUPTI_SUCCESS)
        return r;
    if (!fake.hold_unforced || (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED))
        fake_deliver();
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid_bytes,
                                                   CUpti_Activity **record) {
    CUptiResult r = fake_call(5);
    if (r != CUPTI_SUCCESS)
        return r;
    uint8_t *p = *record ? (uint8_t *)*record + FAKE_SLOT : buffer;
    if (p + FAKE_SLOT > buffer + valid_bytes)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = (CUpti_Activity *)(void *)p;
    return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream,
                                                          size_t *dropped) {
    (void)ctx, (void)stream;
    CUptiResult r = fake_call(6);
    if (r == CUPTI_SUCCESS) {
        *dropped = fake.dropped;
        fake.dropped = 0;
    }
    return r;
}
