// pocl-devices.h: the devices of the PoCL tests (test-gpu-opencl-run.h, test-gpu-opencl-tree.c):
// PoCL's OpenCL device that runs the kernels, and the v100 and mi50 device files whose tile
// programs are emitted for it.
#ifndef RT_TEST_POCL_DEVICES_H
#define RT_TEST_POCL_DEVICES_H

#include "run-gpu.h"

#include <stdio.h>

// Loads devices/pocl-cpu.ini into ocl and v100, mi50 into devs, and opens PoCL's runtime in a.
// 0 when ready; 77 when no OpenCL device matches (printed as a skip), 1 on any other error.
static inline int pocl_open(rt_arena *a, rt_device *ocl, rt_device devs[2], rt_gpu_runtime **rt) {
    rt_err err = {0};
    if (rt_hal_load_device("devices/pocl-cpu.ini", ocl, &err) != RT_OK ||
        rt_hal_load_device("devices/v100.ini", &devs[0], &err) != RT_OK ||
        rt_hal_load_device("devices/mi50.ini", &devs[1], &err) != RT_OK) {
        fprintf(stderr, "devices: %s\n", err.msg);
        return 1;
    }
    if (rt_gpu_runtime_open(a, ocl, rt, &err) != RT_OK) {
        printf("skip: %s\n", err.msg);
        return rt_gpu_err_is_absent(&err) ? 77 : 1;
    }
    return 0;
}

#endif
