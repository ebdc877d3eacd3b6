// hal-cpu.c: the CPU class at run time. It owns the LLVM 16 ORC LLJIT that turns modules from
// codegen/emit-llvm.c into callable kernels (host CPU name and features, PIC, aggressive
// codegen, libm resolved from the process), the thread pool that runs a kernel's phases over
// the cores (spinning workers, a counting barrier between phases, futex sleep when idle), and
// the fork-based isolation the profiler uses so that a crashing or hanging candidate is
// reported and skipped instead of taking rtgen down.
#define _GNU_SOURCE // sched_getcpu, cpu_set_t (a worker moving off a shared core)
#include "hal-cpu.h"
#include "hal-impl.h"

#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/ExecutionEngine.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/OrcEE.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------------
// JIT
// ---------------------------------------------------------------------------------------------

struct rt_cpu_jit {
    LLVMOrcThreadSafeContextRef tsc;
    LLVMOrcLLJITRef jit; // NULL for a target that only emits (rt_cpu_target_new)
    LLVMTargetMachineRef tm;
    bool avx512;
    char cpu[64];
    char triple[64];
};

static rt_status rt_cpu_llvm_error(rt_err *err, LLVMErrorRef e, const char *what) {
    char *msg = LLVMGetErrorMessage(e);
    rt_status st = rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "llvm: %s: %s", what, msg ? msg : "?");
    LLVMDisposeErrorMessage(msg);
    return st;
}

static void rt_cpu_jit_release(void *h) {
    rt_cpu_jit *j = h;
    if (j->jit)
        LLVMOrcDisposeLLJIT(j->jit);
    if (j->tsc)
        LLVMOrcDisposeThreadSafeContext(j->tsc);
    if (j->tm)
        LLVMDisposeTargetMachine(j->tm);
}

// Device feature names whose LLVM name differs on an instruction set (beyond the avx512_
// spelling rt_cpu_llvm_features handles): Arm's FP16 arithmetic is LLVM's fullfp16.
static const struct {
    rt_cpu_isa isa;
    const char *name, *llvm;
} rt_cpu_feature_alias[] = {
    {RT_CPU_ISA_AARCH64, "fp16", "fullfp16"},
    {RT_CPU_ISA_AARCH64, "asimd", "neon"},
};

// "avx512f,fma" -> "+avx512f,+fma" (features already signed are kept). Device files spell
// features as /proc/cpuinfo does; LLVM's names drop the underscore after avx512 (avx512_bf16 ->
// avx512bf16) and use '-' elsewhere (amx_tile -> amx-tile).
static char *rt_cpu_llvm_features(rt_arena *a, rt_cpu_isa isa, const char *list) {
    rt_buf b;
    rt_buf_init(&b, a);
    const char *s = list;
    while (*s) {
        while (*s == ',' || *s == ' ')
            s++;
        size_t n = strcspn(s, ", ");
        if (n) {
            if (b.len)
                rt_buf_puts(&b, ",");
            bool signed_ = *s == '+' || *s == '-';
            rt_buf_putn(&b, signed_ ? s : "+", 1);
            const char *name = signed_ ? s + 1 : s;
            size_t len = (size_t)(s + n - name);
            const char *alias = NULL;
            for (size_t i = 0; i < sizeof rt_cpu_feature_alias / sizeof *rt_cpu_feature_alias; i++)
                if (rt_cpu_feature_alias[i].isa == isa &&
                    strlen(rt_cpu_feature_alias[i].name) == len &&
                    strncmp(name, rt_cpu_feature_alias[i].name, len) == 0)
                    alias = rt_cpu_feature_alias[i].llvm;
            if (alias)
                rt_buf_puts(&b, alias);
            for (const char *c = name; !alias && c < name + len; c++) {
                if (*c != '_')
                    rt_buf_putn(&b, c, 1);
                else if (c - name != 6 || strncmp(name, "avx512", 6) != 0)
                    rt_buf_puts(&b, "-");
            }
        }
        s += n;
    }
    return b.oom ? NULL : b.data ? b.data : rt_arena_strdup(a, "");
}

static void rt_cpu_llvm_diagnostic(LLVMDiagnosticInfoRef info, void *ctx) {
    (void)info;
    (void)ctx;
}

static pthread_once_t rt_cpu_llvm_once = PTHREAD_ONCE_INIT;
static void rt_cpu_llvm_init(void) {
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
}

// Is dev the host itself (its CPU name and features are the host's)?
static bool rt_cpu_is_host(const rt_device *dev) {
    return !dev || dev->detected || dev->arch[0] == 0 || strcmp(dev->arch, "native") == 0;
}

static rt_cpu_isa rt_cpu_isa_of(const rt_device *dev) {
    return dev && dev->isa != RT_CPU_ISA_NONE ? dev->isa : rt_hal_host_isa();
}

bool rt_cpu_runs_here(rt_arena *a, const rt_device *dev, const char **why) {
    *why = NULL;
    if (rt_cpu_is_host(dev))
        return true;
    rt_cpu_isa isa = rt_cpu_isa_of(dev), host = rt_hal_host_isa();
    if (isa != host) {
        *why = rt_arena_printf(a, "not this host (device isa %s, host isa %s)",
                               rt_cpu_isa_name(isa), rt_cpu_isa_name(host));
        return false;
    }
    // Every feature the device has must be one this CPU has: code for the device uses them.
    const char *feat = rt_cpu_llvm_features(a, isa, dev->features);
    char *hfeat = LLVMGetHostCPUFeatures();
    rt_buf lacks;
    rt_buf_init(&lacks, a);
    for (const char *s = feat ? feat : ""; *s;) {
        size_t n = strcspn(s, ",");
        bool has = *s != '+';
        for (const char *h = hfeat ? hfeat : ""; !has && *h;) {
            size_t m = strcspn(h, ",");
            has = m == n && strncmp(h, s, n) == 0;
            h += m + (h[m] == ',');
        }
        if (!has)
            rt_buf_printf(&lacks, "%s%.*s", lacks.len ? ", " : "", (int)n - 1, s + 1);
        s += n + (s[n] == ',');
    }
    LLVMDisposeMessage(hfeat);
    if (lacks.len == 0)
        return true;
    *why = rt_arena_printf(a, "not this host (this CPU lacks %s)", lacks.data);
    return false;
}

// Registers the LLVM backend of a foreign instruction set once; false when this build of
// rtgen has none for it (hal-cpu-targets.c).
static pthread_mutex_t rt_cpu_target_lock = PTHREAD_MUTEX_INITIALIZER;
static bool rt_cpu_target_ready(rt_cpu_isa isa) {
    static bool tried[RT_CPU_ISA_COUNT], ok[RT_CPU_ISA_COUNT];
    if ((unsigned)isa >= RT_CPU_ISA_COUNT)
        return false;
    pthread_mutex_lock(&rt_cpu_target_lock);
    if (!tried[isa]) {
        tried[isa] = true;
        ok[isa] = rt_cpu_llvm_target_init(isa);
    }
    bool r = ok[isa];
    pthread_mutex_unlock(&rt_cpu_target_lock);
    return r;
}

// The target machine of the device's code: the host's triple, CPU and features for the host;
// the device's triple (its isa), arch and features otherwise. *out_tm NULL (and RT_OK) when the
// device's isa has no LLVM backend in this build.
static rt_status rt_cpu_tm_new(rt_arena *a, const rt_device *dev, rt_cpu_jit *j,
                               LLVMTargetMachineRef *out_tm, rt_err *err) {
    *out_tm = NULL;
    rt_cpu_isa isa = rt_cpu_isa_of(dev);
    bool native = isa == rt_hal_host_isa();
    if (!native && !rt_cpu_target_ready(isa))
        return RT_OK;
    char *dtriple = native ? LLVMGetDefaultTargetTriple() : NULL;
    if (native)
        snprintf(j->triple, sizeof j->triple, "%s", dtriple);
    else
        snprintf(j->triple, sizeof j->triple, "%s-unknown-linux-gnu", rt_cpu_isa_name(isa));
    if (dtriple)
        LLVMDisposeMessage(dtriple);
    LLVMTargetRef target;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(j->triple, &target, &msg)) {
        rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "llvm: no target for %s: %s", j->triple,
                msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return err->status;
    }
    bool host = rt_cpu_is_host(dev);
    char *cpu = host ? LLVMGetHostCPUName() : NULL;
    char *hfeat = host ? LLVMGetHostCPUFeatures() : NULL;
    const char *feat = host ? hfeat : rt_cpu_llvm_features(a, isa, dev->features);
    const char *cpu_name = host ? cpu : dev->arch;
    // An LLVM older than the host CPU names it "generic" (LLVM 16 on Zen 5): tune for the
    // nearest core the detection chose instead, with the host's own features.
    if (host && dev && strcmp(cpu_name, "generic") == 0 && dev->arch[0] &&
        strcmp(dev->arch, "native") != 0)
        cpu_name = dev->arch;
    snprintf(j->cpu, sizeof j->cpu, "%s", cpu_name);
    if (feat) {
        j->avx512 = strstr(feat, "+avx512f") != NULL;
        *out_tm =
            LLVMCreateTargetMachine(target, j->triple, cpu_name, feat, LLVMCodeGenLevelAggressive,
                                    LLVMRelocPIC, LLVMCodeModelJITDefault);
    }
    if (cpu)
        LLVMDisposeMessage(cpu);
    if (hfeat)
        LLVMDisposeMessage(hfeat);
    if (!feat)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    if (!*out_tm)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       "llvm: cannot create a target machine for cpu %s", j->cpu);
    return RT_OK;
}

// RTGEN_PERF_JIT=1: the JIT's code is announced to perf (a jitdump file per process, for
// `perf record -k 1` then `perf inject --jit`), so a profile names the kernels' functions.
static LLVMOrcObjectLayerRef rt_cpu_perf_layer(void *ctx, LLVMOrcExecutionSessionRef es,
                                               const char *triple) {
    (void)ctx;
    (void)triple;
    LLVMOrcObjectLayerRef layer = LLVMOrcCreateRTDyldObjectLinkingLayerWithSectionMemoryManager(es);
    LLVMJITEventListenerRef listener = LLVMCreatePerfJITEventListener();
    if (listener)
        LLVMOrcRTDyldObjectLinkingLayerRegisterJITEventListener(layer, listener);
    return layer;
}

rt_status rt_cpu_jit_new(rt_arena *a, const rt_device *dev, rt_cpu_jit **out, rt_err *err) {
    pthread_once(&rt_cpu_llvm_once, rt_cpu_llvm_init);
    const char *why;
    if (!rt_cpu_runs_here(a, dev, &why))
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "cannot JIT-compile for %s: %s", dev->name,
                       why);
    rt_cpu_jit *j;
    RT_ALLOC(a, j, 1, err);
    if (rt_arena_defer(a, rt_cpu_jit_release, j) != RT_OK)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    LLVMTargetMachineRef tm2 = NULL;
    RT_TRY(rt_cpu_tm_new(a, dev, j, &j->tm, err));
    RT_TRY(rt_cpu_tm_new(a, dev, j, &tm2, err));
    LLVMOrcLLJITBuilderRef jb = LLVMOrcCreateLLJITBuilder();
    LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(
        jb, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(tm2));
    const char *perf = getenv("RTGEN_PERF_JIT");
    if (perf && strcmp(perf, "1") == 0)
        LLVMOrcLLJITBuilderSetObjectLinkingLayerCreator(jb, rt_cpu_perf_layer, NULL);
    LLVMErrorRef e = LLVMOrcCreateLLJIT(&j->jit, jb);
    if (e) {
        j->jit = NULL;
        return rt_cpu_llvm_error(err, e, "cannot create the JIT");
    }
    LLVMOrcDefinitionGeneratorRef gen;
    e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
        &gen, LLVMOrcLLJITGetGlobalPrefix(j->jit), NULL, NULL);
    if (e)
        return rt_cpu_llvm_error(err, e, "cannot resolve process symbols");
    LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(j->jit), gen);
    j->tsc = LLVMOrcCreateNewThreadSafeContext();
    // Vectorizer remarks and warnings are not errors: keep them off stderr.
    LLVMContextSetDiagnosticHandler(LLVMOrcThreadSafeContextGetContext(j->tsc),
                                    rt_cpu_llvm_diagnostic, NULL);
    *out = j;
    return RT_OK;
}

rt_status rt_cpu_target_new(rt_arena *a, const rt_device *dev, rt_cpu_jit **out, rt_err *err) {
    pthread_once(&rt_cpu_llvm_once, rt_cpu_llvm_init);
    *out = NULL;
    rt_cpu_jit *j;
    RT_ALLOC(a, j, 1, err);
    if (rt_arena_defer(a, rt_cpu_jit_release, j) != RT_OK)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    RT_TRY(rt_cpu_tm_new(a, dev, j, &j->tm, err));
    if (!j->tm)
        return RT_OK;
    j->tsc = LLVMOrcCreateNewThreadSafeContext();
    LLVMContextSetDiagnosticHandler(LLVMOrcThreadSafeContextGetContext(j->tsc),
                                    rt_cpu_llvm_diagnostic, NULL);
    *out = j;
    return RT_OK;
}

rt_status rt_cpu_jit_emit_object(rt_cpu_jit *j, void *module, size_t *out_bytes, rt_err *err) {
    char *msg = NULL;
    LLVMMemoryBufferRef obj = NULL;
    LLVMBool bad = LLVMTargetMachineEmitToMemoryBuffer(j->tm, module, LLVMObjectFile, &msg, &obj);
    LLVMDisposeModule(module);
    if (bad) {
        rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "llvm: cannot compile for %s (%s): %s", j->triple,
                j->cpu, msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return err->status;
    }
    *out_bytes = LLVMGetBufferSize(obj);
    LLVMDisposeMemoryBuffer(obj);
    return RT_OK;
}

const char *rt_cpu_jit_triple(const rt_cpu_jit *j) {
    return j->triple;
}

void *rt_cpu_jit_context(rt_cpu_jit *j) {
    return LLVMOrcThreadSafeContextGetContext(j->tsc);
}
void *rt_cpu_jit_target_machine(rt_cpu_jit *j) {
    return j->tm;
}
bool rt_cpu_jit_avx512(const rt_cpu_jit *j) {
    return j->avx512;
}
const char *rt_cpu_jit_cpu_name(const rt_cpu_jit *j) {
    return j->cpu;
}

rt_status rt_cpu_jit_add_module(rt_cpu_jit *j, void *module, rt_err *err) {
    if (!j->jit) {
        if (module)
            LLVMDisposeModule(module);
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       "no JIT for %s (%s): its code does not run here", j->triple, j->cpu);
    }
    // The JIT takes the module even when adding it fails (LLVM's C API consumes the TSM).
    LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(module, j->tsc);
    LLVMErrorRef e = LLVMOrcLLJITAddLLVMIRModule(j->jit, LLVMOrcLLJITGetMainJITDylib(j->jit), tsm);
    if (e)
        return rt_cpu_llvm_error(err, e, "cannot add a module");
    return RT_OK;
}

rt_status rt_cpu_jit_lookup(rt_cpu_jit *j, const char *name, void **out_fn, rt_err *err) {
    if (!j->jit)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                       "no JIT for %s (%s): its code does not run here", j->triple, j->cpu);
    LLVMOrcExecutorAddress addr = 0;
    LLVMErrorRef e = LLVMOrcLLJITLookup(j->jit, &addr, name);
    if (e)
        return rt_cpu_llvm_error(err, e, name);
    *out_fn = (void *)(uintptr_t)addr;
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Thread pool
//
// A launch costs what two cache-line transfers cost when the workers are awake: the caller
// (thread 0) publishes the launch by bumping `go`, every thread runs its chunk of each phase and
// meets the others at a counting barrier after it, and the caller returns from the last barrier.
// With a condition variable every launch and every barrier was a round trip through the
// scheduler (3 us at best, 60 us typical on the shared 2-core VM), more than a 256^3 GEMM gained
// from a second thread.
// ---------------------------------------------------------------------------------------------

// Waiting first spins with pause: when both threads run on their own cores the other arrives
// within RT_CPU_PAUSE_NS (a launch or a barrier then costs 0.2-0.5 us). On a loaded machine
// the scheduler may put both on one core, where a spinning waiter holds the core the awaited
// thread needs (every barrier cost the whole spin, 50 us, when the waiter only paused): past
// RT_CPU_PAUSE_NS it yields between checks (2-6 us per barrier then, as with a condition
// variable). Past RT_CPU_SPIN_NS, long enough to cover the gap between back-to-back launches
// and the imbalance of one phase, it sleeps on a futex so that an idle pool costs no core.
#define RT_CPU_PAUSE_NS 2000.0
#define RT_CPU_SPIN_NS  50000.0

// A 32-bit word that only moves forward, with the number of threads asleep on it (the waker
// makes the futex call only when someone sleeps). Each on its own cache line.
typedef struct rt_cpu_event {
    _Alignas(64) atomic_uint word;
    atomic_int sleepers;
} rt_cpu_event;
_Static_assert(sizeof(atomic_uint) == sizeof(uint32_t), "futex words are 32-bit");

struct rt_cpu_pool {
    int32_t n;
    pthread_t *threads;
    uint64_t fork_epoch;             // rt_cpu_fork_epoch when the threads were started
    rt_cpu_event go;                 // bumped by the caller once per launch
    rt_cpu_event phase;              // bumped by the last thread to reach a barrier
    _Alignas(64) atomic_int arrived; // threads at the current barrier
    atomic_int *cpu;                 // per thread: the core it started its last launch on
    double *moved_ns;                // per thread: when it last moved off a shared core
    // Written by the caller before it bumps go, read by the workers after they see it.
    const rt_cpu_launch *job; // NULL with go bumped: quit
    float **scratch;
    int64_t scratch_bytes;
};

typedef struct rt_cpu_worker {
    rt_cpu_pool *p;
    int32_t id;
} rt_cpu_worker;

// A fork copies only the calling thread: a pool made before it has no workers in the child. The
// child handler moves the epoch on, and a pool from an older epoch runs every chunk on the caller
// (and frees without joining), instead of waiting forever for threads that do not exist.
static atomic_uint_fast64_t rt_cpu_fork_epoch;
static pthread_once_t rt_cpu_fork_once = PTHREAD_ONCE_INIT;

static void rt_cpu_fork_child(void) {
    atomic_fetch_add_explicit(&rt_cpu_fork_epoch, 1, memory_order_relaxed);
}

static void rt_cpu_fork_hook(void) {
    pthread_atfork(NULL, NULL, rt_cpu_fork_child);
}

static bool rt_cpu_pool_orphaned(const rt_cpu_pool *p) {
    return p->fork_epoch != atomic_load_explicit(&rt_cpu_fork_epoch, memory_order_relaxed);
}

static inline void rt_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

// Returns once e->word differs from old (acquire: what the waker wrote before bumping it is
// visible). The futex word is read by the kernel as a plain uint32_t.
static void rt_cpu_event_wait(rt_cpu_event *e, unsigned old) {
    if (atomic_load_explicit(&e->word, memory_order_acquire) != old)
        return;
    double t0 = rt_cpu_now_ns();
    bool yield = false;
    for (uint32_t i = 1;; i++) {
        if (yield)
            sched_yield();
        else
            rt_cpu_relax();
        if (atomic_load_explicit(&e->word, memory_order_acquire) != old)
            return;
        if ((i & 15) == 0) {
            double waited_ns = rt_cpu_now_ns() - t0;
            if (waited_ns > RT_CPU_SPIN_NS)
                break;
            yield = waited_ns > RT_CPU_PAUSE_NS;
        }
    }
    // seq_cst on both sides (here and in rt_cpu_event_bump): either the waker sees the sleeper,
    // or this thread sees the new word before it sleeps.
    atomic_fetch_add_explicit(&e->sleepers, 1, memory_order_seq_cst);
    while (atomic_load_explicit(&e->word, memory_order_seq_cst) == old)
        syscall(SYS_futex, (uint32_t *)&e->word, FUTEX_WAIT_PRIVATE, old, NULL, NULL, 0);
    atomic_fetch_sub_explicit(&e->sleepers, 1, memory_order_relaxed);
}

// Moves e->word from old to old + 1 (release) and wakes the sleepers.
static void rt_cpu_event_bump(rt_cpu_event *e, unsigned old) {
    atomic_store_explicit(&e->word, old + 1, memory_order_seq_cst);
    if (atomic_load_explicit(&e->sleepers, memory_order_seq_cst) > 0)
        syscall(SYS_futex, (uint32_t *)&e->word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

// All n threads meet here; the last one to arrive releases the others. The phase word is read
// before arriving: it cannot move until this thread has arrived.
static void rt_cpu_barrier(rt_cpu_pool *p) {
    unsigned g = atomic_load_explicit(&p->phase.word, memory_order_relaxed);
    if (atomic_fetch_add_explicit(&p->arrived, 1, memory_order_acq_rel) == p->n - 1) {
        atomic_store_explicit(&p->arrived, 0, memory_order_relaxed);
        rt_cpu_event_bump(&p->phase, g);
    } else {
        rt_cpu_event_wait(&p->phase, g);
    }
}

// Two threads of a pool on one core stay there: each runs while the other waits at a barrier,
// so the scheduler always sees one runnable thread per core and a freshly run (cache-hot) one
// it will not migrate. A 2-thread launch then took the 1-thread time for whole profiling runs
// (measured: both threads on one core for every one of 600 launches of a 256^3 GEMM). A
// worker that starts a launch on the core of a lower-numbered thread moves itself: for a
// moment its affinity leaves that core out (the kernel migrates it at once), then its own
// mask comes back. The move costs two system calls and only happens on such a collision, at
// most once per RT_CPU_MOVE_NS: on a loaded machine the scheduler may keep putting the threads
// together, and a move per launch would then cost more than the collision.
#define RT_CPU_MOVE_NS 1e6
static void rt_cpu_move_off_shared(rt_cpu_pool *p, int32_t t) {
    int cpu = sched_getcpu();
    atomic_store_explicit(&p->cpu[t], cpu, memory_order_relaxed);
    if (t == 0 || cpu < 0)
        return;
    bool shared = false;
    for (int32_t u = 0; u < t && !shared; u++)
        shared = atomic_load_explicit(&p->cpu[u], memory_order_relaxed) == cpu;
    if (!shared) // the common case: no system call on the launch path
        return;
    double now = rt_cpu_now_ns();
    if (now - p->moved_ns[t] < RT_CPU_MOVE_NS)
        return;
    cpu_set_t mine, others;
    if (sched_getaffinity(0, sizeof mine, &mine) != 0)
        return;
    others = mine;
    for (int32_t u = 0; u < t; u++) {
        int c = atomic_load_explicit(&p->cpu[u], memory_order_relaxed);
        if (c >= 0 && c < CPU_SETSIZE)
            CPU_CLR(c, &others);
    }
    if (CPU_COUNT(&others) == 0)
        return;
    p->moved_ns[t] = now;
    if (sched_setaffinity(0, sizeof others, &others) == 0) {
        atomic_store_explicit(&p->cpu[t], sched_getcpu(), memory_order_relaxed);
        sched_setaffinity(0, sizeof mine, &mine);
    }
}

// Thread t's share of every phase of l, with the barrier after each. Once past the last barrier
// the caller may return and l may be gone: nothing of it is read after that.
static void rt_cpu_pool_work(rt_cpu_pool *p, const rt_cpu_launch *l, int32_t t) {
    if (t > 0) // the caller's core was recorded before the launch was published
        rt_cpu_move_off_shared(p, t);
    int32_t n_phases = l->n_phases;
    for (int32_t i = 0; i < n_phases; i++) {
        int64_t n = l->n_items[i], at = l->first_item ? l->first_item[i] : 0;
        int64_t lo = n * t / p->n, hi = n * (t + 1) / p->n;
        if (lo < hi)
            l->fns[i](l->args, at + lo, at + hi, p->scratch[t]);
        rt_cpu_barrier(p);
    }
}

static void *rt_cpu_worker_main(void *arg) {
    rt_cpu_worker *w = arg;
    rt_cpu_pool *p = w->p;
    unsigned seen = 0; // go's value when the pool was made
    for (;;) {
        rt_cpu_event_wait(&p->go, seen);
        seen++;
        const rt_cpu_launch *l = p->job;
        if (!l)
            break;
        rt_cpu_pool_work(p, l, w->id);
    }
    free(w);
    return NULL;
}

rt_cpu_pool *rt_cpu_pool_new(int32_t threads) {
    pthread_once(&rt_cpu_fork_once, rt_cpu_fork_hook);
    if (threads < 1)
        threads = 1;
    rt_cpu_pool *p = aligned_alloc(64, sizeof *p); // a multiple of its 64-byte alignment
    if (!p)
        return NULL;
    memset(p, 0, sizeof *p);
    p->n = threads;
    p->fork_epoch = atomic_load_explicit(&rt_cpu_fork_epoch, memory_order_relaxed);
    atomic_init(&p->go.word, 0);
    atomic_init(&p->go.sleepers, 0);
    atomic_init(&p->phase.word, 0);
    atomic_init(&p->phase.sleepers, 0);
    atomic_init(&p->arrived, 0);
    p->threads = calloc((size_t)threads, sizeof *p->threads);
    p->scratch = calloc((size_t)threads, sizeof *p->scratch);
    p->cpu = calloc((size_t)threads, sizeof *p->cpu);
    p->moved_ns = calloc((size_t)threads, sizeof *p->moved_ns);
    if (!p->threads || !p->scratch || !p->cpu || !p->moved_ns) {
        free(p->threads);
        free(p->scratch);
        free(p->cpu);
        free(p->moved_ns);
        free(p);
        return NULL;
    }
    for (int32_t t = 0; t < threads; t++)
        atomic_init(&p->cpu[t], -1);
    for (int32_t t = 1; t < threads; t++) {
        rt_cpu_worker *w = malloc(sizeof *w);
        if (w) {
            w->p = p;
            w->id = t;
        }
        if (!w || pthread_create(&p->threads[t], NULL, rt_cpu_worker_main, w) != 0) {
            free(w);
            p->n = t; // the threads started so far
            rt_cpu_pool_free(p);
            return NULL;
        }
    }
    return p;
}

void rt_cpu_pool_free(rt_cpu_pool *p) {
    if (!p)
        return;
    if (!rt_cpu_pool_orphaned(p)) {
        p->job = NULL;
        rt_cpu_event_bump(&p->go, atomic_load_explicit(&p->go.word, memory_order_relaxed));
        for (int32_t t = 1; t < p->n; t++)
            pthread_join(p->threads[t], NULL);
    }
    for (int32_t t = 0; t < p->n; t++)
        free(p->scratch[t]);
    free(p->threads);
    free(p->scratch);
    free(p->cpu);
    free(p->moved_ns);
    free(p);
}

int32_t rt_cpu_pool_threads(const rt_cpu_pool *p) {
    return p->n;
}

bool rt_cpu_pool_run(rt_cpu_pool *p, const rt_cpu_launch *l) {
    if (l->scratch_bytes > p->scratch_bytes) {
        size_t bytes = (size_t)rt_round_up(l->scratch_bytes, 64);
        for (int32_t t = 0; t < p->n; t++) {
            free(p->scratch[t]);
            p->scratch[t] = aligned_alloc(64, bytes);
            if (!p->scratch[t]) {
                p->scratch_bytes = 0;
                return false;
            }
        }
        p->scratch_bytes = l->scratch_bytes;
    }
    if (l->n_phases == 0)
        return true; // no barrier would hold the next launch back until the workers saw this one
    if (p->n == 1 || rt_cpu_pool_orphaned(p)) {
        // The same chunks in the same order as n threads would run them.
        for (int32_t i = 0; i < l->n_phases; i++) {
            int64_t n = l->n_items[i], at = l->first_item ? l->first_item[i] : 0;
            for (int32_t t = 0; t < p->n; t++) {
                int64_t lo = n * t / p->n, hi = n * (t + 1) / p->n;
                if (lo < hi)
                    l->fns[i](l->args, at + lo, at + hi, p->scratch[t]);
            }
        }
        return true;
    }
    p->job = l;
    rt_cpu_move_off_shared(p, 0);
    rt_cpu_event_bump(&p->go, atomic_load_explicit(&p->go.word, memory_order_relaxed));
    rt_cpu_pool_work(p, l, 0);
    return true;
}

// ---------------------------------------------------------------------------------------------
// Isolation and timing
// ---------------------------------------------------------------------------------------------

double rt_cpu_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int32_t rt_cpu_online(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int32_t)n : 1;
}

void *rt_cpu_shared_alloc(size_t bytes) {
    void *p =
        mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void rt_cpu_shared_free(void *p, size_t bytes) {
    if (p)
        munmap(p, bytes ? bytes : 1);
}

rt_status rt_cpu_run_isolated(int (*fn)(void *ctx), void *ctx, double timeout_ms,
                              rt_cpu_child_status *out_status, int *out_code, rt_err *err) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "cannot fork a profiling child: %s",
                       strerror(errno));
    if (pid == 0)
        _exit(fn(ctx) & 0xff);
    double t0 = rt_cpu_now_ns();
    long sleep_ns = 20000;
    int st = 0;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR) {
            kill(pid, SIGKILL);
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "lost the profiling child: %s",
                           strerror(errno));
        }
        if ((rt_cpu_now_ns() - t0) * 1e-6 > timeout_ms) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
            }
            *out_status = RT_CPU_CHILD_TIMEOUT;
            *out_code = 0;
            return RT_OK;
        }
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 2000000)
            sleep_ns *= 2;
    }
    if (WIFSIGNALED(st)) {
        *out_status = RT_CPU_CHILD_CRASHED;
        *out_code = WTERMSIG(st);
    } else {
        *out_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        *out_status = *out_code == 0 ? RT_CPU_CHILD_OK : RT_CPU_CHILD_FAILED;
    }
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// System C compiler
// ---------------------------------------------------------------------------------------------

typedef struct rt_cpu_cc {
    char dir[64];
    void *handle;
} rt_cpu_cc;

static void rt_cpu_cc_release(void *h) {
    rt_cpu_cc *c = h;
    if (c->handle)
        dlclose(c->handle);
    char path[128];
    const char *files[] = {"kernel.c", "kernel.so", "cc.log"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(path, sizeof path, "%s/%s", c->dir, files[i]);
        unlink(path);
    }
    rmdir(c->dir);
}

// The OpenMP runtime the emitted C links against is loaded once for the process and never
// unloaded: dlclose of a kernel would otherwise unmap libgomp together with the globals that
// hold its start-up allocations (LeakSanitizer then reports them as leaked).
static pthread_once_t rt_cpu_gomp_once = PTHREAD_ONCE_INIT;

static void rt_cpu_gomp_pin(void) {
    void *h = dlopen("libgomp.so.1", RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
    if (h)
        dlclose(h);
}

rt_status rt_cpu_cc_load(rt_arena *a, const char *c_text, const char *const *names, int32_t n,
                         void **out_fns, rt_err *err) {
    pthread_once(&rt_cpu_gomp_once, rt_cpu_gomp_pin);
    rt_cpu_cc *c;
    RT_ALLOC(a, c, 1, err);
    const char *tmp = getenv("TMPDIR");
    snprintf(c->dir, sizeof c->dir, "%s/rtgen-cc-XXXXXX",
             tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
    if (!mkdtemp(c->dir))
        return rt_fail(err, RT_ERR_IO, RT_NOLOC, "cannot create a temporary directory: %s",
                       strerror(errno));
    if (rt_arena_defer(a, rt_cpu_cc_release, c) != RT_OK) {
        rt_cpu_cc_release(c);
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    }
    char *src = rt_arena_printf(a, "%s/kernel.c", c->dir);
    char *so = rt_arena_printf(a, "%s/kernel.so", c->dir);
    char *log = rt_arena_printf(a, "%s/cc.log", c->dir);
    if (!src || !so || !log)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    FILE *f = fopen(src, "w");
    if (!f || fputs(c_text, f) < 0 || fclose(f) != 0)
        return rt_fail(err, RT_ERR_IO, RT_NOLOC, "cannot write %s", src);
    const char *cc = getenv("CC");
    char *cmd = rt_arena_printf(a,
                                "%s -O3 -march=native -fopenmp -shared -fPIC -o %s %s -lm "
                                "> %s 2>&1",
                                cc && *cc ? cc : "cc", so, src, log);
    if (!cmd)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    int rc = system(cmd);
    if (rc != 0) {
        char *text = NULL;
        size_t len = 0;
        rt_err ignore = {0};
        if (rt_read_file(a, log, &text, &len, &ignore) == RT_OK)
            err->log = text;
        rt_status st = rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                               "cc failed on the emitted C "
                               "(exit status %d)",
                               rc);
        if (text)
            err->log = text;
        return st;
    }
    c->handle = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!c->handle)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "dlopen: %s", dlerror());
    for (int32_t i = 0; i < n; i++) {
        out_fns[i] = dlsym(c->handle, names[i]);
        if (!out_fns[i])
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "the compiled C has no symbol %s",
                           names[i]);
    }
    return RT_OK;
}

// cpu: an LLVM CPU name (lower case, digits, '-', '_', '.') or "native".
static rt_status rt_hal_cpu_validate(const rt_device *dev, rt_err *err) {
    const char *a = dev->arch;
    bool ok = a[0] != '\0';
    for (const char *p = a; ok && *p; p++)
        ok = rt_hal_is_lower(*p) || rt_hal_is_digit(*p) || *p == '-' || *p == '_' || *p == '.';
    if (!ok)
        return rt_fail(err, RT_ERR_DEVICE, dev->arch_loc,
                       "bad arch for class cpu (expected an LLVM CPU name or native, got \"%s\")",
                       a);
    return RT_OK;
}

// The cpu class compiles no source text and has no GPU-style runtime: its kernels are LLVM
// modules that codegen builds and the JIT above (rt_cpu_jit_*) compiles, and the run layer runs
// them on rt_cpu_pool in a profiling child (rt_cpu_run_isolated).
const struct rt_hal_ops rt_hal_cpu_ops = {
    .class_name = "cpu",
    .validate = rt_hal_cpu_validate,
};
