// run.h: the run layer — what turns the emitted candidates of an operator into a report: one
// candidate loop for every backend (compile, check against the reference, time the kernel
// alone, pick, report), with each backend's steps as hooks (rtgen.c for CPUs, gpu-cands.c and
// gpu-profile.c for GPUs), and the host data the kernels run on. Above codegen and the HAL's
// runtime headers, below the CLIs.
#ifndef RT_RUN_H
#define RT_RUN_H

#include "rt.h"
#include "interp.h"
#include "kir.h"

// The host array of tree t that a kernel's TREE buffer of field f holds (as the bindings
// linearized it), and its length in *n; NULL for an unknown field.
const int32_t *rt_run_tree_array(const rt_tree_data *t, rt_kir_tree_field f, int64_t *n);

#endif
