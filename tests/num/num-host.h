// num-host.h: the host CPU as the numerical tests' device. A test that cannot detect it skips
// (ctest's SKIP_RETURN_CODE 77) after saying why.
#ifndef RT_NUM_HOST_H
#define RT_NUM_HOST_H

#include "hal.h"

#include <stdio.h>

// False (after a line on stderr) when the host cannot be described; main then returns 77.
static inline bool rt_num_host(rt_device *dev) {
    rt_err err = {0};
    if (rt_hal_detect_host(NULL, dev, &err) == RT_OK)
        return true;
    fprintf(stderr, "host: %s\n", err.msg);
    return false;
}

#endif
