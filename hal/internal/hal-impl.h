// hal-impl.h: internal to the HAL — the ops instances the registry in hal.c lists, each defined
// in its class's backend file, and the character tests the classes' arch validation shares.
#ifndef RT_HAL_IMPL_H
#define RT_HAL_IMPL_H

#include "hal-ops.h"

extern const struct rt_hal_ops rt_hal_cuda_ops;   // hal-cuda.c
extern const struct rt_hal_ops rt_hal_hip_ops;    // hal-hip.c
extern const struct rt_hal_ops rt_hal_opencl_ops; // hal-opencl.c
extern const struct rt_hal_ops rt_hal_cpu_ops;    // hal-cpu.c

static inline bool rt_hal_is_digit(char c) {
    return c >= '0' && c <= '9';
}

static inline bool rt_hal_is_lower(char c) {
    return c >= 'a' && c <= 'z';
}

#endif
