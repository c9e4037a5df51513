/*
 * A scripted stand-in for the CUDA driver library (libcuda.so.1), for tests/gpu/gpu_report.py
 * on machines without a GPU: the calls tests/gpu/cuda_backend.py's DriverApi makes, with the
 * same C signatures. Devices are the fake NVML's (tests/core/fake_nvml): FAKE_CUDA_COUNT of
 * them, with the UUIDs the fake NVML gives by default, so the numbering check compares like
 * with like. cuMemAlloc_v2 appends "gpu<N>.proc=<pid>:<bytes + 256 MiB context>" to the fake
 * NVML's script ($FAKE_NVML_SCRIPT), so NVML then lists the allocating process, as a driver
 * does. cuMemsetD8_v2 takes 1 ms.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int current = -1;

int cuInit(unsigned flags) { (void)flags; return 0; }

int cuDeviceGetCount(int *count) {
    const char *n = getenv("FAKE_CUDA_COUNT");
    *count = n ? atoi(n) : 1;
    return 0;
}

int cuDeviceGet(int *dev, int ordinal) {
    int count;
    cuDeviceGetCount(&count);
    if (ordinal < 0 || ordinal >= count) return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *dev = ordinal;
    return 0;
}

int cuCtxCreate_v2(void **ctx, unsigned flags, int dev) {
    (void)flags;
    current = dev;
    *ctx = &current;
    return 0;
}

int cuMemAlloc_v2(unsigned long long *ptr, size_t bytes) {
    const char *script = getenv("FAKE_NVML_SCRIPT");
    if (current < 0) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
    if (script) {
        char line[128];
        int n = snprintf(line, sizeof line, "gpu%d.proc=%d:%llu\n", current, (int)getpid(),
                         (unsigned long long)bytes + (256ULL << 20));
        int fd = open(script, O_WRONLY | O_APPEND);
        if (fd >= 0) {
            if (write(fd, line, (size_t)n) != n) { close(fd); return 2; }
            close(fd);
        }
    }
    *ptr = 0x100000;
    return 0;
}

int cuMemsetD8_v2(unsigned long long ptr, unsigned char value, size_t bytes) {
    (void)ptr; (void)value; (void)bytes;
    usleep(1000);
    return current < 0 ? 201 : 0;
}

int cuCtxSynchronize(void) { return current < 0 ? 201 : 0; }

int cuDeviceGetUuid_v2(unsigned char *uuid, int dev) {
    /* GPU-fa4e000N-1111-2222-3333-44444444444N, as fake_nvml.c's dev_defaults */
    static const unsigned char base[16] = {0xfa, 0x4e, 0x00, 0x00, 0x11, 0x11, 0x22, 0x22,
                                           0x33, 0x33, 0x44, 0x44, 0x44, 0x44, 0x44, 0x40};
    memcpy(uuid, base, 16);
    uuid[3] = (unsigned char)dev;
    uuid[15] = (unsigned char)(0x40 + dev % 10);
    return 0;
}
