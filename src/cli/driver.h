// driver.h: the rtgen pipeline as one call, shared by the CLI (main.c) and the library entry
// points: load device and spec, bind lengths and trees, then dry-run printing, interpretation,
// or construction + emission + profiling. Top layer: may include every other layer's header.
#ifndef RT_DRIVER_H
#define RT_DRIVER_H

#include "rt.h"
#include "spec.h"

#include <stdio.h>

typedef struct rt_file_binding {
    const char *name; // tensor or tree name
    const char *path;
} rt_file_binding;

typedef struct rt_driver_options {
    const char *spec_path;
    const char *device_path; // NULL: the host CPU
    const char *out_dir;     // default "rtgen-out"
    const char *emit;        // NULL: the device's class
    int32_t top_k;
    int32_t n_sets, n_lengths, n_trees;
    rt_size_binding *sets;
    rt_file_binding *lengths, *trees;
    int64_t batch; // 0: the length tensor's extent
    uint64_t seed;
    int profile; // -1: when the device is present; 0 no; 1 yes
    bool json, explain, dry_run, ir_only, interpret, verbose;
    bool keep_failed; // a profile no candidate passed still writes them, as <op>.failed.*
} rt_driver_options;

void rt_driver_options_init(rt_driver_options *o);
// Runs the pipeline; reports go to out. Output files are written only on success, through a
// temporary directory renamed into place, so a failed run leaves nothing behind. A profile in
// which no candidate passed its check (CPU or GPU) is a failure, RT_ERR_BACKEND: one line per
// candidate (rank, status, reason) goes to stderr, and nothing is written unless keep_failed,
// which writes the report and the sources as <op>.failed.json and <op>.failed.rankN.<ext>.
rt_status rt_driver_run(rt_arena *a, const rt_driver_options *o, FILE *out, rt_err *err);

#endif
