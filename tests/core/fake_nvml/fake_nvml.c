/*
 * A scripted stand-in for the NVIDIA Management Library (libnvidia-ml.so.1).
 *
 * Why: the real pynvml bindings must run end to end on machines without a GPU. This library
 * exports the NVML functions trainwatch_lab calls, with the same C signatures, and answers
 * from a text file named by $FAKE_NVML_SCRIPT. The file is re-read whenever it changes
 * (inode, size or mtime), so a test can change values mid-run: utilization to 0, a GPU lost.
 *
 * Script format, one `key=value` per line, `#` comments:
 *   init=0                 return code of nvmlInitWithFlags (9 = driver not loaded)
 *   count=2                device count (default: highest gpuN seen + 1)
 *   gpu0.uuid=GPU-...      gpu0.name=...       gpu0.minor=0 (/dev/nvidia0; default: N)
 *   gpu0.util=37           gpu0.mem_util=12
 *   gpu0.util_seq=0,80,10  successive utilization reads cycle through these (overrides util)
 *   gpu0.mem_total=BYTES   gpu0.mem_used=BYTES
 *   gpu0.power_mw=250000   gpu0.power_limit_mw=700000   gpu0.temp=45
 *   gpu0.pcie_tx_kbs=100   gpu0.pcie_rx_kbs=200         gpu0.reasons=0x1
 *   gpu0.pcie_ms=20        each PCIe throughput read blocks this long, like the driver's bus
 *                          sampling (default 20; 0 for none)
 *   gpu0.duty=200/800      a kernel busy 200 ms of every 1000 (wall clock): the utilization
 *                          sample buffer (nvmlDeviceGetSamples) holds one sample per sample_ms
 *                          (default 100) with the busy share of that period; GetUtilizationRates
 *                          then answers the latest sample only, as the driver's 1/6-1 s window
 *                          does. Without duty the buffer stays empty (NVML_ERROR_NOT_FOUND)
 *   gpu0.mig=2             MIG mode on with 2 instances (MIG-<hex>-...-<k>, a share of the
 *                          memory each, gpu instance k+1, compute instance 0); the parent
 *                          then has no utilization (NOT_SUPPORTED) and refuses memory and
 *                          processes (NO_PERMISSION), as for an unprivileged user
 *   gpu0.mig_used=A,B      memory used in each instance (bytes)
 *   gpu0.mig_procs=0/1234:1073741824,1/5678:2048   compute processes of MIG instance K
 *                          (K/pid:used bytes), answered through the instance's own handle
 *                          with its gpu instance id, as the driver does for an unprivileged user
 *   gpu0.fail=util:2:999   the next 2 calls of util answer 999 (UNKNOWN; 10 = TIMEOUT), then
 *                          it recovers: a transient driver error (any unsupported name)
 *   gpu0.bus_id=00000000:41:00.0   (default 00000000:<0x18+N>:00.0)
 *   gpu0.no_permission=1   nvmlDeviceGetHandleByIndex refuses it (NVML_ERROR_NO_PERMISSION)
 *   gpu0.lost=1            every call on this device returns NVML_ERROR_GPU_IS_LOST
 *   gpu0.unsupported=power,temp   these return NVML_ERROR_NOT_SUPPORTED
 *     (names: util mem power power_limit temp pcie reasons procs)
 *   gpu0.procs=1234:1073741824,5678:2048   compute processes, pid:used bytes
 *   gpu0.proc=1234:1073741824   one more compute process (each such line adds one; the fake
 *                          libcuda of tests/gpu appends these when a process allocates)
 *   gpu0.xids=79,48        XID errors so far: each is delivered once through the event set
 *   gpu0.ecc_uncorrected=2 volatile uncorrectable ECC errors
 *     (unsupported names also: ecc events)
 * Without $FAKE_NVML_SCRIPT, init fails with NVML_ERROR_DRIVER_NOT_LOADED.
 *
 * Built with -DFAKE_NVML_NO_V3 it lacks nvmlDeviceGetComputeRunningProcesses_v3 (drivers before
 * R510): pynvml 13's plain call then raises NVMLLibraryMismatchError.
 *
 * Built with -DFAKE_NVML_OLD_DRIVER it lacks nvmlDeviceGetCurrentClocksEventReasons and
 * nvmlDeviceGetTemperatureV, like a driver older than 535.
 *
 * Built with -DFAKE_NVML_NO_DEPRECATED it lacks nvmlDeviceGetTemperature and
 * nvmlDeviceGetCurrentClocksThrottleReasons (deprecated in NVML 13, gone in CUDA 14).
 *
 * fake_nvml_calls() returns how many NVML functions were called (the benchmark checks the
 * monitor's own counter against it); fake_nvml_reset_calls() zeroes it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>

#define MAX_GPUS 64
#define MAX_PROCS 64

enum {
    OK = 0, ERR_UNINITIALIZED = 1, ERR_INVALID_ARGUMENT = 2, ERR_NOT_SUPPORTED = 3, ERR_NO_PERMISSION = 4,
    ERR_NOT_FOUND = 6, ERR_INSUFFICIENT_SIZE = 7, ERR_DRIVER_NOT_LOADED = 9, ERR_TIMEOUT = 10, ERR_GPU_IS_LOST = 15,
    ERR_UNKNOWN = 999
};

enum {
    U_UTIL = 1, U_MEM = 2, U_POWER = 4, U_POWER_LIMIT = 8, U_TEMP = 16, U_PCIE = 32,
    U_REASONS = 64, U_PROCS = 128, U_ECC = 256, U_EVENTS = 512
};

typedef struct {
    int index;
    int seen;
    unsigned minor;
    char bus_id[32];
    int no_permission; /* the handle itself is refused, like a device in another cgroup */
    char uuid[96];
    char name[96];
    unsigned util, mem_util;
    int nseq, seq_pos;
    unsigned seq[64];
    unsigned long long mem_total, mem_used;
    unsigned power_mw, power_limit_mw, temp, pcie_tx, pcie_rx;
    unsigned long long reasons;
    int lost;
    unsigned unsupported;
    int nprocs;
    unsigned pids[MAX_PROCS];
    int nxids;
    unsigned xids[64];
    unsigned long long ecc_uncorrected;
    unsigned long long pmem[MAX_PROCS];
    unsigned pcie_ms;
    unsigned duty_on_ms, duty_off_ms, sample_ms;
    unsigned fail_what;
    int fail_left, fail_rc;
    int nmig, is_mig, gi;
    unsigned long long mig_used[7];
    int nmig_procs;
    unsigned mig_proc_k[MAX_PROCS], mig_proc_pid[MAX_PROCS];
    unsigned long long mig_proc_used[MAX_PROCS];
} fake_dev;

typedef struct { unsigned long long total, free, used; } mem_v1;
typedef struct { unsigned version; unsigned long long total, reserved, free, used; } mem_v2;
typedef struct { unsigned gpu, memory; } util_t;
typedef struct {
    unsigned pid;
    unsigned long long used;
    unsigned gpu_instance, compute_instance;
} proc_v2;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fake_dev devs[MAX_GPUS];
static fake_dev migs[MAX_GPUS][7]; /* MIG device handles, built from their parent */
static int dev_count;
static int init_rc = ERR_DRIVER_NOT_LOADED;
static int initialized;
static unsigned long long calls;
static struct stat loaded_st;
static int loaded;

static void dev_defaults(fake_dev *d, int i) {
    memset(d, 0, sizeof *d);
    d->index = i;
    d->minor = (unsigned)i;
    snprintf(d->bus_id, sizeof d->bus_id, "00000000:%02X:00.0", 0x18 + i);
    snprintf(d->uuid, sizeof d->uuid, "GPU-%08x-1111-2222-3333-44444444444%d", 0xfa4e0000u + i,
             i % 10);
    snprintf(d->name, sizeof d->name, "Fake GPU %d", i);
    d->mem_total = 80ULL << 30;
    d->power_limit_mw = 700000;
    d->pcie_ms = 20;
    d->sample_ms = 100;
}

static unsigned unsupported_mask(const char *list) {
    static const struct { const char *name; unsigned bit; } names[] = {
        {"util", U_UTIL}, {"mem", U_MEM}, {"power", U_POWER}, {"power_limit", U_POWER_LIMIT},
        {"temp", U_TEMP}, {"pcie", U_PCIE}, {"reasons", U_REASONS}, {"procs", U_PROCS},
        {"ecc", U_ECC}, {"events", U_EVENTS}};
    unsigned mask = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ", "); tok; tok = strtok(NULL, ", "))
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
            if (strcmp(tok, names[k].name) == 0) mask |= names[k].bit;
    return mask;
}

static void parse_procs(fake_dev *d, const char *list) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", list);
    d->nprocs = 0;
    for (char *tok = strtok(buf, ", "); tok && d->nprocs < MAX_PROCS; tok = strtok(NULL, ", ")) {
        unsigned pid;
        unsigned long long used;
        if (sscanf(tok, "%u:%llu", &pid, &used) == 2) {
            d->pids[d->nprocs] = pid;
            d->pmem[d->nprocs] = used;
            d->nprocs++;
        }
    }
}

static void parse_mig_procs(fake_dev *d, const char *list) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", list);
    d->nmig_procs = 0;
    for (char *tok = strtok(buf, ", "); tok && d->nmig_procs < MAX_PROCS; tok = strtok(NULL, ", ")) {
        unsigned k, pid;
        unsigned long long used;
        if (sscanf(tok, "%u/%u:%llu", &k, &pid, &used) == 3 && k < 7) {
            d->mig_proc_k[d->nmig_procs] = k;
            d->mig_proc_pid[d->nmig_procs] = pid;
            d->mig_proc_used[d->nmig_procs] = used;
            d->nmig_procs++;
        }
    }
}

static void parse_seq(fake_dev *d, const char *list) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    d->nseq = 0;
    d->seq_pos = 0;
    for (char *tok = strtok(buf, ", "); tok && d->nseq < 64; tok = strtok(NULL, ", "))
        d->seq[d->nseq++] = (unsigned)strtoul(tok, NULL, 0);
}

static void parse_xids(fake_dev *d, const char *list) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    d->nxids = 0;
    for (char *tok = strtok(buf, ", "); tok && d->nxids < 64; tok = strtok(NULL, ", "))
        d->xids[d->nxids++] = (unsigned)strtoul(tok, NULL, 0);
}

static void set_field(fake_dev *d, const char *key, const char *val) {
    unsigned long long n = strtoull(val, NULL, 0);
    if (!strcmp(key, "uuid")) snprintf(d->uuid, sizeof d->uuid, "%s", val);
    else if (!strcmp(key, "minor")) d->minor = (unsigned)n;
    else if (!strcmp(key, "bus_id")) snprintf(d->bus_id, sizeof d->bus_id, "%s", val);
    else if (!strcmp(key, "no_permission")) d->no_permission = n != 0;
    else if (!strcmp(key, "name")) snprintf(d->name, sizeof d->name, "%s", val);
    else if (!strcmp(key, "util")) d->util = (unsigned)n;
    else if (!strcmp(key, "mem_util")) d->mem_util = (unsigned)n;
    else if (!strcmp(key, "util_seq")) parse_seq(d, val);
    else if (!strcmp(key, "mem_total")) d->mem_total = n;
    else if (!strcmp(key, "mem_used")) d->mem_used = n;
    else if (!strcmp(key, "power_mw")) d->power_mw = (unsigned)n;
    else if (!strcmp(key, "power_limit_mw")) d->power_limit_mw = (unsigned)n;
    else if (!strcmp(key, "temp")) d->temp = (unsigned)n;
    else if (!strcmp(key, "pcie_tx_kbs")) d->pcie_tx = (unsigned)n;
    else if (!strcmp(key, "pcie_rx_kbs")) d->pcie_rx = (unsigned)n;
    else if (!strcmp(key, "reasons")) d->reasons = n;
    else if (!strcmp(key, "lost")) d->lost = n != 0;
    else if (!strcmp(key, "unsupported")) d->unsupported = unsupported_mask(val);
    else if (!strcmp(key, "procs")) parse_procs(d, val);
    else if (!strcmp(key, "proc") && d->nprocs < MAX_PROCS) {
        if (sscanf(val, "%u:%llu", &d->pids[d->nprocs], &d->pmem[d->nprocs]) == 2) d->nprocs++;
    }
    else if (!strcmp(key, "xids")) parse_xids(d, val);
    else if (!strcmp(key, "ecc_uncorrected")) d->ecc_uncorrected = n;
    else if (!strcmp(key, "pcie_ms")) d->pcie_ms = (unsigned)n;
    else if (!strcmp(key, "mig")) d->nmig = n > 7 ? 7 : (int)n;
    else if (!strcmp(key, "mig_used")) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", val);
        int k = 0;
        for (char *tok = strtok(buf, ", "); tok && k < 7; tok = strtok(NULL, ", "))
            d->mig_used[k++] = strtoull(tok, NULL, 0);
    }
    else if (!strcmp(key, "mig_procs")) parse_mig_procs(d, val);
    else if (!strcmp(key, "sample_ms")) d->sample_ms = n ? (unsigned)n : 100;
    else if (!strcmp(key, "duty")) sscanf(val, "%u/%u", &d->duty_on_ms, &d->duty_off_ms);
    else if (!strcmp(key, "fail")) {
        char what[32] = "";
        if (sscanf(val, "%31[^:]:%d:%d", what, &d->fail_left, &d->fail_rc) == 3)
            d->fail_what = unsupported_mask(what);
    }
}

/* Re-read the script when it changed; caller holds the lock. */
static void reload(void) {
    const char *path = getenv("FAKE_NVML_SCRIPT");
    struct stat st;
    if (!path || stat(path, &st) != 0) {
        loaded = 0;
        init_rc = ERR_DRIVER_NOT_LOADED;
        dev_count = 0;
        return;
    }
    if (loaded && st.st_ino == loaded_st.st_ino && st.st_size == loaded_st.st_size &&
        st.st_mtim.tv_sec == loaded_st.st_mtim.tv_sec &&
        st.st_mtim.tv_nsec == loaded_st.st_mtim.tv_nsec)
        return;
    FILE *f = fopen(path, "r");
    if (!f) return;
    for (int i = 0; i < MAX_GPUS; i++) dev_defaults(&devs[i], i);
    init_rc = OK;
    int count = -1, highest = -1;
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        if (*s == '#' || *s == '\n' || *s == 0) continue;
        s[strcspn(s, "\r\n")] = 0;
        char *eq = strchr(s, '=');
        if (!eq) continue;
        *eq = 0;
        const char *key = s, *val = eq + 1;
        if (!strcmp(key, "init")) init_rc = (int)strtol(val, NULL, 0);
        else if (!strcmp(key, "count")) count = (int)strtol(val, NULL, 0);
        else if (!strncmp(key, "gpu", 3)) {
            char *dot;
            long i = strtol(key + 3, &dot, 10);
            if (*dot != '.' || i < 0 || i >= MAX_GPUS) continue;
            devs[i].seen = 1;
            if (i > highest) highest = (int)i;
            set_field(&devs[i], dot + 1, val);
        }
    }
    fclose(f);
    dev_count = count >= 0 ? (count > MAX_GPUS ? MAX_GPUS : count) : highest + 1;
    for (int i = 0; i < dev_count; i++)
        for (int k = 0; k < devs[i].nmig; k++) {
            fake_dev *m = &migs[i][k];
            dev_defaults(m, i);
            m->is_mig = 1;
            m->gi = k + 1;
            m->mem_total = devs[i].mem_total / (unsigned long long)devs[i].nmig;
            m->mem_used = devs[i].mig_used[k];
            snprintf(m->uuid, sizeof m->uuid, "MIG-%08x-aaaa-bbbb-cccc-%012d", 0xfa4e0000u + i, k);
            for (int j = 0; j < devs[i].nmig_procs && m->nprocs < MAX_PROCS; j++)
                if (devs[i].mig_proc_k[j] == (unsigned)k) {
                    m->pids[m->nprocs] = devs[i].mig_proc_pid[j];
                    m->pmem[m->nprocs] = devs[i].mig_proc_used[j];
                    m->nprocs++;
                }
        }
    loaded_st = st;
    loaded = 1;
}

/* Common prologue of every device call: count, reload, validate the handle. */
static int enter_dev(void *handle, fake_dev **out, unsigned need_supported) {
    calls++;
    reload();
    if (!initialized) return ERR_UNINITIALIZED;
    fake_dev *d = (fake_dev *)handle;
    int is_mig = d >= &migs[0][0] && d < &migs[0][0] + MAX_GPUS * 7;
    if (!is_mig && (d < devs || d >= devs + dev_count)) return ERR_INVALID_ARGUMENT;
    if (is_mig && devs[d->index].nmig <= d->gi - 1) return ERR_INVALID_ARGUMENT;
    if (d->lost || (is_mig && devs[d->index].lost)) return ERR_GPU_IS_LOST;
    if (d->unsupported & need_supported) return ERR_NOT_SUPPORTED;
    if ((d->nmig || is_mig) && (need_supported & U_UTIL)) return ERR_NOT_SUPPORTED;
    if (d->nmig && (need_supported & (U_MEM | U_PROCS))) return ERR_NO_PERMISSION;
    if ((d->fail_what & need_supported) && d->fail_left > 0) {
        d->fail_left--;
        return d->fail_rc;
    }
    *out = d;
    return OK;
}

#define DEV_CALL(handle, bit, ...)                  \
    do {                                            \
        pthread_mutex_lock(&lock);                  \
        fake_dev *d = NULL;                         \
        int rc_ = enter_dev(handle, &d, bit);       \
        if (rc_ == OK) { __VA_ARGS__; }             \
        pthread_mutex_unlock(&lock);                \
        return rc_;                                 \
    } while (0)

int nvmlInitWithFlags(unsigned flags) {
    (void)flags;
    pthread_mutex_lock(&lock);
    calls++;
    reload();
    int rc = init_rc;
    if (rc == OK) initialized++;
    pthread_mutex_unlock(&lock);
    return rc;
}

int nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

int nvmlShutdown(void) {
    pthread_mutex_lock(&lock);
    calls++;
    int rc = initialized ? OK : ERR_UNINITIALIZED;
    if (initialized) initialized--;
    pthread_mutex_unlock(&lock);
    return rc;
}

const char *nvmlErrorString(int result) {
    pthread_mutex_lock(&lock);
    calls++;
    pthread_mutex_unlock(&lock);
    switch (result) {
    case OK: return "Success";
    case ERR_UNINITIALIZED: return "Uninitialized";
    case ERR_NOT_SUPPORTED: return "Not Supported";
    case ERR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case ERR_GPU_IS_LOST: return "GPU is lost";
    case ERR_NO_PERMISSION: return "Insufficient Permissions";
    case ERR_TIMEOUT: return "Timeout";
    default: return "Unknown Error";
    }
}

int nvmlDeviceGetCount_v2(unsigned *count) {
    pthread_mutex_lock(&lock);
    calls++;
    reload();
    int rc = initialized ? OK : ERR_UNINITIALIZED;
    if (rc == OK) *count = (unsigned)dev_count;
    pthread_mutex_unlock(&lock);
    return rc;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void **device) {
    pthread_mutex_lock(&lock);
    calls++;
    reload();
    int rc = !initialized ? ERR_UNINITIALIZED
             : index >= (unsigned)dev_count ? ERR_INVALID_ARGUMENT
             : devs[index].lost ? ERR_GPU_IS_LOST
             : devs[index].no_permission ? ERR_NO_PERMISSION
             : OK;
    if (rc == OK) *device = &devs[index];
    pthread_mutex_unlock(&lock);
    return rc;
}

int nvmlDeviceGetIndex(void *h, unsigned *index) { DEV_CALL(h, 0, *index = (unsigned)d->index); }

typedef struct {
    char legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
} pci_info;

int nvmlDeviceGetPciInfo_v3(void *h, pci_info *p) {
    DEV_CALL(h, 0, {
        memset(p, 0, sizeof *p);
        snprintf(p->bus_id, sizeof p->bus_id, "%s", d->bus_id);
        snprintf(p->legacy, sizeof p->legacy, "%.15s", d->bus_id + 4);
        p->bus = (unsigned)(0x18 + d->index);
    });
}

int nvmlDeviceGetMigMode(void *h, unsigned *current, unsigned *pending) {
    DEV_CALL(h, 0, *current = *pending = d->nmig ? 1u : 0u);
}

int nvmlDeviceGetMaxMigDeviceCount(void *h, unsigned *count) {
    DEV_CALL(h, 0, *count = d->nmig ? 7u : 0u);
}

int nvmlDeviceGetMigDeviceHandleByIndex(void *h, unsigned index, void **mig) {
    DEV_CALL(h, 0, {
        if (d->is_mig || !d->nmig) rc_ = ERR_INVALID_ARGUMENT;
        else if (index >= (unsigned)d->nmig) rc_ = ERR_NOT_FOUND; /* an empty slot */
        else *mig = &migs[d->index][index];
    });
}

int nvmlDeviceGetGpuInstanceId(void *h, unsigned *id) {
    DEV_CALL(h, 0, { if (d->is_mig) *id = (unsigned)d->gi; else rc_ = ERR_NOT_SUPPORTED; });
}

int nvmlDeviceGetComputeInstanceId(void *h, unsigned *id) {
    DEV_CALL(h, 0, { if (d->is_mig) *id = 0; else rc_ = ERR_NOT_SUPPORTED; });
}

int nvmlDeviceGetMinorNumber(void *h, unsigned *minor) { DEV_CALL(h, 0, *minor = d->minor); }

int nvmlDeviceGetName(void *h, char *name, unsigned length) {
    DEV_CALL(h, 0, {
        if (strlen(d->name) + 1 > length) rc_ = ERR_INSUFFICIENT_SIZE;
        else snprintf(name, length, "%s", d->name);
    });
}

int nvmlDeviceGetUUID(void *h, char *uuid, unsigned length) {
    DEV_CALL(h, 0, {
        if (strlen(d->uuid) + 1 > length) rc_ = ERR_INSUFFICIENT_SIZE;
        else snprintf(uuid, length, "%s", d->uuid);
    });
}

int nvmlDeviceGetMemoryInfo(void *h, mem_v1 *m) {
    DEV_CALL(h, U_MEM, {
        m->total = d->mem_total;
        m->used = d->mem_used;
        m->free = d->mem_total > d->mem_used ? d->mem_total - d->mem_used : 0;
    });
}

int nvmlDeviceGetMemoryInfo_v2(void *h, mem_v2 *m) {
    DEV_CALL(h, U_MEM, {
        m->total = d->mem_total;
        m->reserved = 0;
        m->used = d->mem_used;
        m->free = d->mem_total > d->mem_used ? d->mem_total - d->mem_used : 0;
    });
}

static unsigned long long now_us(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (unsigned long long)tv.tv_sec * 1000000ULL + (unsigned long long)tv.tv_usec;
}

/* Busy microseconds of the duty cycle in [0, t). */
static unsigned long long busy_until(const fake_dev *d, unsigned long long t) {
    unsigned long long on = d->duty_on_ms * 1000ULL, cycle = on + d->duty_off_ms * 1000ULL;
    unsigned long long rest = t % cycle;
    return t / cycle * on + (rest < on ? rest : on);
}

/* Busy percentage of the sample period ending at t. */
static unsigned duty_sample(const fake_dev *d, unsigned long long t) {
    unsigned long long period = d->sample_ms * 1000ULL;
    return (unsigned)((busy_until(d, t) - busy_until(d, t - period)) * 100ULL / period);
}

int nvmlDeviceGetUtilizationRates(void *h, util_t *u) {
    DEV_CALL(h, U_UTIL, {
        unsigned long long period = d->sample_ms * 1000ULL;
        u->gpu = d->duty_on_ms ? duty_sample(d, now_us() / period * period)
                 : d->nseq ? d->seq[d->seq_pos++ % d->nseq] : d->util;
        u->memory = d->mem_util;
    });
}

int nvmlDeviceGetPowerUsage(void *h, unsigned *mw) { DEV_CALL(h, U_POWER, *mw = d->power_mw); }

int nvmlDeviceGetEnforcedPowerLimit(void *h, unsigned *mw) {
    DEV_CALL(h, U_POWER_LIMIT, *mw = d->power_limit_mw);
}

int nvmlDeviceGetPowerManagementLimit(void *h, unsigned *mw) {
    DEV_CALL(h, U_POWER_LIMIT, *mw = d->power_limit_mw);
}

typedef struct { unsigned version; int sensor; int temperature; } temp_v1;

#ifndef FAKE_NVML_OLD_DRIVER /* nvmlDeviceGetTemperatureV came with R550-era drivers */
int nvmlDeviceGetTemperatureV(void *h, temp_v1 *t) {
    DEV_CALL(h, U_TEMP, {
        if (t->version != 0x100000Cu) rc_ = 25; /* NVML_ERROR_ARGUMENT_VERSION_MISMATCH */
        else if (t->sensor != 0) rc_ = ERR_NOT_SUPPORTED;
        else t->temperature = (int)d->temp;
    });
}
#endif

#ifndef FAKE_NVML_NO_DEPRECATED /* deprecated in NVML 13, to be removed in CUDA 14 */
int nvmlDeviceGetTemperature(void *h, int sensor, unsigned *temp) {
    DEV_CALL(h, U_TEMP, {
        if (sensor != 0) rc_ = ERR_NOT_SUPPORTED;
        else *temp = d->temp;
    });
}
#endif

typedef struct { unsigned long long ts; unsigned long long value; } sample_t;

/* The utilization sample buffer: one sample per sample_ms, the last 120 kept (a ring, like
 * the driver's); only samples newer than last_ts; NOT_FOUND when there is none. */
int nvmlDeviceGetSamples(void *h, int type, unsigned long long last_ts, int *value_type,
                         unsigned *count, sample_t *samples) {
    DEV_CALL(h, U_UTIL, {
        unsigned long long period = d->sample_ms * 1000ULL, now = now_us() / period * period;
        unsigned long long first = now - 119 * period;
        if (last_ts + period > first) first = (last_ts / period + 1) * period;
        unsigned n = d->duty_on_ms && first <= now ? (unsigned)((now - first) / period + 1) : 0;
        if (type != 1) rc_ = ERR_NOT_SUPPORTED;
        else if (n == 0) rc_ = ERR_NOT_FOUND;
        else if (samples == NULL) *count = n;
        else {
            if (*count < n) n = *count;
            for (unsigned i = 0; i < n; i++) {
                samples[i].ts = first + i * period;
                samples[i].value = duty_sample(d, samples[i].ts); /* uiVal in the union */
            }
            *count = n;
            *value_type = 1; /* NVML_VALUE_TYPE_UNSIGNED_INT */
        }
    });
}

int nvmlDeviceGetPcieThroughput(void *h, int counter, unsigned *kbs) {
    DEV_CALL(h, U_PCIE, {
        struct timespec pause = {0, (long)d->pcie_ms * 1000000L};
        if (d->pcie_ms) nanosleep(&pause, NULL); /* the driver samples the bus this long */
        if (counter == 0) *kbs = d->pcie_tx;
        else if (counter == 1) *kbs = d->pcie_rx;
        else rc_ = ERR_INVALID_ARGUMENT;
    });
}

#ifndef FAKE_NVML_OLD_DRIVER /* drivers before 535 only have the "Throttle" name */
int nvmlDeviceGetCurrentClocksEventReasons(void *h, unsigned long long *reasons) {
    DEV_CALL(h, U_REASONS, *reasons = d->reasons);
}
#endif

#ifndef FAKE_NVML_NO_DEPRECATED
int nvmlDeviceGetCurrentClocksThrottleReasons(void *h, unsigned long long *reasons) {
    DEV_CALL(h, U_REASONS, *reasons = d->reasons);
}
#endif

typedef struct { unsigned pid; unsigned long long used; } proc_v1;

/* The process list in either entry layout: v2/v3 (24 bytes) or v1 (16 bytes). */
#define FILL_PROCS(h, infos, EXTRA)                                                   \
    DEV_CALL(h, U_PROCS, {                                                           \
        if (d->nprocs == 0) {                                                        \
            *count = 0;                                                              \
        } else if (infos == NULL || *count < (unsigned)d->nprocs) {                  \
            *count = (unsigned)d->nprocs;                                            \
            rc_ = ERR_INSUFFICIENT_SIZE;                                             \
        } else {                                                                     \
            for (int i = 0; i < d->nprocs; i++) {                                    \
                infos[i].pid = d->pids[i];                                           \
                infos[i].used = d->pmem[i];                                          \
                EXTRA;                                                               \
            }                                                                        \
            *count = (unsigned)d->nprocs;                                            \
        }                                                                            \
    })

#define V2_EXTRA                                                                      \
    (infos[i].gpu_instance = d->is_mig ? (unsigned)d->gi : 0xffffffffu,                 \
     infos[i].compute_instance = d->is_mig ? 0u : 0xffffffffu)

#ifndef FAKE_NVML_NO_V3 /* drivers before R510 have no _v3 */
int nvmlDeviceGetComputeRunningProcesses_v3(void *h, unsigned *count, proc_v2 *infos) {
    FILL_PROCS(h, infos, V2_EXTRA);
}
#endif

int nvmlDeviceGetComputeRunningProcesses_v2(void *h, unsigned *count, proc_v2 *infos) {
    FILL_PROCS(h, infos, V2_EXTRA);
}

int nvmlDeviceGetComputeRunningProcesses(void *h, unsigned *count, proc_v1 *infos) {
    FILL_PROCS(h, infos, (void)0);
}

/* XID events: one process-wide set; delivered[i] counts gpu i's XIDs handed out so far (kept
 * across script reloads, like a driver's event queue). */
static int event_set_live, registered[MAX_GPUS], delivered[MAX_GPUS];
static int event_set_token;

typedef struct {
    void *device;
    unsigned long long type, data;
    unsigned gpu_instance, compute_instance;
} event_data;

int nvmlEventSetCreate(void **set) {
    pthread_mutex_lock(&lock);
    calls++;
    int rc = initialized ? OK : ERR_UNINITIALIZED;
    if (rc == OK) {
        event_set_live = 1;
        *set = &event_set_token;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

int nvmlDeviceRegisterEvents(void *h, unsigned long long types, void *set) {
    DEV_CALL(h, U_EVENTS, {
        if (set != &event_set_token || !event_set_live) rc_ = ERR_INVALID_ARGUMENT;
        else if (types & 0x8) registered[d - devs] = 1;
    });
}

int nvmlEventSetWait_v2(void *set, event_data *data, unsigned timeout_ms) {
    (void)timeout_ms; /* never blocks: the monitor only polls with 0 */
    pthread_mutex_lock(&lock);
    calls++;
    reload();
    int rc = !initialized ? ERR_UNINITIALIZED
             : (set != &event_set_token || !event_set_live) ? ERR_INVALID_ARGUMENT
             : ERR_TIMEOUT;
    for (int i = 0; rc == ERR_TIMEOUT && i < dev_count; i++) {
        if (registered[i] && delivered[i] < devs[i].nxids) {
            memset(data, 0, sizeof *data);
            data->device = &devs[i];
            data->type = 0x8;
            data->data = devs[i].xids[delivered[i]++];
            rc = OK;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

int nvmlEventSetFree(void *set) {
    pthread_mutex_lock(&lock);
    calls++;
    int rc = set == &event_set_token && event_set_live ? OK : ERR_INVALID_ARGUMENT;
    if (rc == OK) {
        event_set_live = 0;
        memset(registered, 0, sizeof registered);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

int nvmlDeviceGetTotalEccErrors(void *h, int type, int counter, unsigned long long *count) {
    DEV_CALL(h, U_ECC, {
        if (type != 1 || counter != 0) rc_ = ERR_NOT_SUPPORTED; /* only what we ask for */
        else *count = d->ecc_uncorrected;
    });
}

unsigned long long fake_nvml_calls(void) {
    pthread_mutex_lock(&lock);
    unsigned long long n = calls;
    pthread_mutex_unlock(&lock);
    return n;
}

void fake_nvml_reset_calls(void) {
    pthread_mutex_lock(&lock);
    calls = 0;
    pthread_mutex_unlock(&lock);
}
