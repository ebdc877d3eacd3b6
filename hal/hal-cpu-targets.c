// hal-cpu-targets.c: the LLVM backends of the CPU instruction sets rtgen emits code for, beyond
// the host's own (hal-cpu.c initializes that one as LLVM's native target). CMake defines
// RT_LLVM_TARGET_X86 and RT_LLVM_TARGET_AARCH64 on this file for the backends this LLVM has
// built (LLVM_TARGETS_TO_BUILD) and links their libraries; an instruction set without one gets
// C only (rtgen says so).
#include "hal-cpu.h"

#include <llvm-c/Target.h>

bool rt_cpu_llvm_target_init(rt_cpu_isa isa) {
    switch (isa) {
    case RT_CPU_ISA_X86_64:
#if defined(RT_LLVM_TARGET_X86)
        LLVMInitializeX86TargetInfo();
        LLVMInitializeX86Target();
        LLVMInitializeX86TargetMC();
        LLVMInitializeX86AsmPrinter();
        return true;
#else
        return false;
#endif
    case RT_CPU_ISA_AARCH64:
#if defined(RT_LLVM_TARGET_AARCH64)
        LLVMInitializeAArch64TargetInfo();
        LLVMInitializeAArch64Target();
        LLVMInitializeAArch64TargetMC();
        LLVMInitializeAArch64AsmPrinter();
        return true;
#else
        return false;
#endif
    case RT_CPU_ISA_NONE:
    case RT_CPU_ISA_COUNT:
        break;
    }
    return false;
}
