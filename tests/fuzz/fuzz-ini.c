// fuzz-ini.c: libFuzzer target for the device loader (hal/hal-ini.c). iniparser reads from a
// path, so each input goes to a fresh mkstemp file in /tmp, removed afterwards. A loaded device
// is also printed and turned into JSON, so every field the loader accepted is exercised. Build
// with -DRTGEN_FUZZ=ON and CC=clang-16; seed the corpus with devices/ and tests/err/ini/.
// An input the pre-scan accepts but iniparser reads differently aborts: that is a loader bug.
#include "hal.h"

#include <jansson.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[] = "/tmp/rtgen-fuzz-ini-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 0;
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    close(fd);
    if (done == size) {
        rt_device *dev = malloc(sizeof *dev);
        rt_err err = {0};
        if (dev && rt_hal_load_device(path, dev, &err) == RT_OK) {
            rt_arena *a = rt_arena_new(1 << 16);
            if (a) {
                rt_buf b;
                rt_buf_init(&b, a);
                rt_hal_print_device(dev, &b);
                rt_arena_free(a);
            }
            json_decref((json_t *)rt_hal_device_to_json(dev));
            for (int i = 0; i < dev->n_levels; i++)
                (void)rt_hal_level_gbps(&dev->level[i], 4096.0);
        } else if (dev) {
            char msg[1024];
            rt_err_format(&err, "rtgen", true, msg, sizeof msg);
            // The pre-scan must model iniparser exactly: a disagreement is a loader bug.
            if (strncmp(err.msg, "iniparser ", 10) == 0) {
                fprintf(stderr, "%s\n", msg);
                abort();
            }
        }
        free(dev);
    }
    unlink(path);
    return 0;
}
