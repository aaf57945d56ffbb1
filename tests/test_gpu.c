/* The CUDA stage on a real device: the kernel against its CPU twin, the
 * loader's device batches against its CPU path, ordering under a slow
 * consumer, events and streams, device memory limits, pinned and pageable
 * memory, the copies' timing, consumers bound to another device, augment's
 * mix (kernel and soft targets) against the CPU path's.
 * Exits 77 (skipped) without CUDA in the build or a device in the machine. */
#include "gpufeed.h"
#include "config.h"
#include "convert.h"
#include "loader_impl.h" /* l->dev: who queued the copies */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>

#if !GF_HAVE_CUDA
int main(void)
{
    printf("SKIP: this build has no CUDA\n");
    return 77;
}
#else

#include <check.h>
#include <cuda_runtime_api.h>
#include "cuda_present.h"
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CK_CUDA(x)                                                                           \
    do {                                                                                     \
        cudaError_t e_ = (x);                                                                \
        ck_assert_msg(e_ == cudaSuccess, "%s: %s", #x, cudaGetErrorString(e_));             \
    } while (0)

static char *root;

static void setup(void)
{
    root = tu_image_folder(3, 11, 40, 30, "png");
}

static void teardown(void)
{
    tu_rmrf(root);
    free(root);
}

/* Widths 11 (the general kernel), 12 and 16 (the 4-pixel fast one). */
static const int twin_widths[] = {11, 12, 16};

START_TEST(kernel_matches_the_cpu_twin_bit_for_bit)
{
    const int n = 7, h = 13, w = twin_widths[_i];
    for (int c = 1; c <= 4; c += (c == 1 ? 2 : 1)) {
        size_t in_bytes = (size_t)n * h * w * c;
        uint8_t *in = malloc(in_bytes), flips[7] = {0, 1, 1, 0, 1, 0, 0};
        for (size_t i = 0; i < in_bytes; i++)
            in[i] = (uint8_t)(tu_pixel(5, (int)i, 0, 0));
        uint8_t *d_in, *d_flips;
        void *d_out;
        CK_CUDA(cudaMalloc((void **)&d_in, in_bytes));
        CK_CUDA(cudaMalloc((void **)&d_flips, n));
        CK_CUDA(cudaMemcpy(d_in, in, in_bytes, cudaMemcpyHostToDevice));
        CK_CUDA(cudaMemcpy(d_flips, flips, n, cudaMemcpyHostToDevice));
        for (int dt = GF_DTYPE_UINT8; dt <= GF_DTYPE_BFLOAT16; dt++)
            for (int lay = 0; lay < 2; lay++)
                for (int fl = 0; fl < 2; fl++) {
                    gf_settings s;
                    gf_default_settings(&s);
                    s.height = h;
                    s.width = w;
                    s.channels = c;
                    s.dtype = (gf_dtype)dt;
                    s.layout = (gf_layout)lay;
                    for (int k = 0; k < 4; k++) {
                        s.mean[k] = 120.5f - 7 * k;
                        s.std[k] = 57.3f + 3 * k;
                    }
                    gf__convert cv;
                    gf__convert_init(&cv, &s);
                    size_t out_bytes = gf__convert_sample_bytes(&cv) * n;
                    uint8_t *want = malloc(out_bytes), *got = malloc(out_bytes);
                    gf__convert_cpu(&cv, in, want, fl ? flips : NULL, 0, n);
                    CK_CUDA(cudaMalloc(&d_out, out_bytes));
                    CK_CUDA(cudaMemset(d_out, 0xA5, out_bytes)); /* poison */
                    char why[160];
                    ck_assert_int_eq(gf__convert_cuda(&cv, d_in, d_out, fl ? d_flips : NULL, n,
                                                      NULL, why, sizeof why),
                                     0);
                    CK_CUDA(cudaMemcpy(got, d_out, out_bytes, cudaMemcpyDeviceToHost));
                    ck_assert_msg(memcmp(want, got, out_bytes) == 0,
                                  "w=%d c=%d dtype=%d layout=%d flip=%d differ", w, c, dt, lay,
                                  fl);
                    CK_CUDA(cudaFree(d_out));
                    free(want);
                    free(got);
                }
        CK_CUDA(cudaFree(d_in));
        CK_CUDA(cudaFree(d_flips));
        free(in);
    }
}
END_TEST

static void gpu_settings(gf_settings *s)
{
    gf_default_settings(s);
    s->data = root;
    s->width = 24;
    s->height = 20;
    s->batch_size = 4;
    s->seed = 9;
    s->epochs = 2;
    s->threads = 4;
    s->dtype = GF_DTYPE_FLOAT16;
    s->layout = GF_LAYOUT_NCHW;
    s->flip_on_device = 1;
    for (int k = 0; k < 3; k++) {
        s->mean[k] = 110.0f + k;
        s->std[k] = 60.0f - k;
    }
}

/* Every batch of a CPU-path run, concatenated. */
static uint8_t *cpu_reference(gf_settings s, size_t *len)
{
    s.device = GF_DEVICE_CPU;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    uint8_t *all = NULL;
    *len = 0;
    gf_batch *b;
    while (gf_next(l, &b) == 0) {
        size_t n = (size_t)b->count * b->height * b->width * b->channels * gf_dtype_size(b->dtype);
        all = realloc(all, *len + n);
        memcpy(all + *len, b->data, n);
        *len += n;
        gf_release(l, b);
    }
    gf_close(&l);
    return all;
}

/* The consumer's kernel runs `spin_ns` before it reads the batch (a copy to
 * the host), then releases it on its stream: if the loader reused a device
 * slot before the consumer's work on it had run, the bytes read would be a
 * later batch's. Depth 2 and a fast input make that reuse likely.
 * pageable: no slot pinned (pinned_max_bytes), so every copy is queued by
 * the copy thread, none by the controller, which must not block in one. */
static void run_slow_consumer(uint64_t spin_ns, int depth, int per_slot, int pageable)
{
    gf_settings s;
    gpu_settings(&s);
    s.device = GF_DEVICE_CUDA;
    s.prefetch_depth = depth;
    s.copy_stream_per_slot = per_slot;
    s.pinned_max_bytes = pageable ? 1 : 0;
    size_t want_len;
    uint8_t *want = cpu_reference(s, &want_len);

    gf_loader *l = NULL;
    int rc = gf_open(&l, &s);
    ck_assert_msg(rc == 0, "%s", gf_last_error(l));
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_int_eq(st.device, GF_DEVICE_CUDA);
    if (pageable) {
        ck_assert_uint_eq(st.pinned_bytes, 0);
        ck_assert_int_eq(st.pageable_slots, depth);
        ck_assert_msg(strstr(st.device_note, "pageable") && strstr(st.device_note, "cap"),
                      "note: %s", st.device_note);
    } else {
        ck_assert_uint_gt(st.pinned_bytes, 0);
        ck_assert_int_eq(st.pageable_slots, 0);
    }
    cudaStream_t stream;
    CK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    uint8_t *got;
    CK_CUDA(cudaMallocHost((void **)&got, want_len));
    memset(got, 0x5A, want_len);
    size_t off = 0;
    uint64_t batches = 0;
    gf_batch *b;
    while (gf_next(l, &b) == 0) {
        batches++;
        ck_assert_int_eq(b->device, GF_DEVICE_CUDA);
        ck_assert_ptr_null(b->pixels);
        ck_assert_ptr_nonnull(b->ready_event);
        size_t n = (size_t)b->count * b->height * b->width * b->channels * gf_dtype_size(b->dtype);
        ck_assert_uint_le(off + n, want_len);
        ck_assert_int_eq(gf_batch_wait(b, stream), 0);
        ck_assert_int_eq(gf__cuda_spin(spin_ns, stream), 0);
        CK_CUDA(cudaMemcpyAsync(got + off, b->data, n, cudaMemcpyDeviceToHost, stream));
        off += n;
        ck_assert_int_eq(gf_release_stream(l, b, stream), 0);
    }
    CK_CUDA(cudaStreamSynchronize(stream));
    ck_assert_uint_eq(off, want_len);
    ck_assert_msg(memcmp(got, want, want_len) == 0, "device batches differ from the CPU path");
    uint64_t by_controller, by_copy_thread;
    gf__device_queued(l->dev, &by_controller, &by_copy_thread);
    ck_assert_uint_eq(by_controller, pageable ? 0 : batches);
    ck_assert_uint_eq(by_copy_thread, pageable ? batches : 0);
    gf_close(&l);
    CK_CUDA(cudaFreeHost(got));
    CK_CUDA(cudaStreamDestroy(stream));
    free(want);
}

/* Every batch's bytes after an optional seek, read back to the host. On
 * CUDA the consumer works on `stream` (NULL: the legacy default stream),
 * for spin_ns before it reads each batch, and releases it there. */
static uint8_t *collect(gf_settings s, int seek, cudaStream_t stream, uint64_t spin_ns,
                        size_t *len)
{
    gf_loader *l = NULL;
    int rc = gf_open(&l, &s);
    ck_assert_msg(rc == 0, "%s", gf_last_error(l));
    gf_batch *b;
    if (seek) { /* two batches in, then back to sample 5 of epoch 0 */
        for (int i = 0; i < 2; i++) {
            ck_assert_int_eq(gf_next(l, &b), 0);
            ck_assert_int_eq(gf_release_stream(l, b, stream), 0);
        }
        ck_assert_int_eq(gf_seek(l, 0, 5), 0);
    }
    size_t cap = 1 << 20;
    uint8_t *all = NULL;
    if (s.device == GF_DEVICE_CUDA)
        CK_CUDA(cudaMallocHost((void **)&all, cap));
    else
        all = malloc(cap);
    *len = 0;
    while ((rc = gf_next(l, &b)) == 0) {
        size_t n = (size_t)b->count * b->height * b->width * b->channels * gf_dtype_size(b->dtype);
        ck_assert_uint_le(*len + n, cap);
        if (b->device == GF_DEVICE_CUDA) {
            ck_assert_int_eq(gf_batch_wait(b, stream), 0);
            if (spin_ns)
                ck_assert_int_eq(gf__cuda_spin(spin_ns, stream), 0);
            CK_CUDA(cudaMemcpyAsync(all + *len, b->data, n, cudaMemcpyDeviceToHost, stream));
        } else {
            memcpy(all + *len, b->data, n);
        }
        *len += n;
        ck_assert_int_eq(gf_release_stream(l, b, stream), 0);
    }
    ck_assert_int_eq(rc, GF_EOF);
    if (s.device == GF_DEVICE_CUDA)
        CK_CUDA(cudaStreamSynchronize(stream));
    gf_close(&l);
    return all;
}

static void free_collected(const gf_settings *s, uint8_t *p)
{
    if (s->device == GF_DEVICE_CUDA)
        cudaFreeHost(p);
    else
        free(p);
}

/* Depths 1 to 6, 1 and 3 threads, consumers on the legacy default stream
 * and on their own, from the start and after a seek: the bytes of the CPU
 * path every time. */
static const int ring_depths[] = {1, 2, 3, 6};

START_TEST(every_depth_thread_count_stream_and_seek_gives_the_cpu_bytes)
{
    cudaStream_t own;
    CK_CUDA(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
    for (int threads = 1; threads <= 3; threads += 2)
        for (int seek = 0; seek < 2; seek++) {
            gf_settings s;
            gpu_settings(&s);
            s.prefetch_depth = ring_depths[_i];
            s.threads = threads;
            s.device = GF_DEVICE_CPU;
            size_t want_len, got_len;
            uint8_t *want = collect(s, seek, NULL, 0, &want_len);
            s.device = GF_DEVICE_CUDA;
            for (int on_own = 0; on_own < 2; on_own++)
                for (int per_slot = 0; per_slot < 2; per_slot++) {
                    /* a slow consumer on its own stream, a quick one on the default */
                    s.copy_stream_per_slot = per_slot;
                    uint8_t *got = collect(s, seek, on_own ? own : NULL, on_own ? 200000 : 0,
                                           &got_len);
                    ck_assert_uint_eq(got_len, want_len);
                    ck_assert_msg(memcmp(got, want, want_len) == 0,
                                  "depth %d, %d threads, seek %d, %s stream, %s copy stream: "
                                  "bytes differ",
                                  s.prefetch_depth, threads, seek, on_own ? "own" : "default",
                                  per_slot ? "per-slot" : "one");
                    free_collected(&s, got);
                }
            s.copy_stream_per_slot = 0;
            s.device = GF_DEVICE_CPU;
            free_collected(&s, want);
        }
    CK_CUDA(cudaStreamDestroy(own));
}
END_TEST

static size_t device_batch_bytes(const gf_batch *b);

/* Every batch's data and soft targets (mix), read back to the host. */
static uint8_t *collect_mixed(gf_settings s, size_t *len, float **targets, size_t *n_targets)
{
    gf_loader *l = NULL;
    int rc = gf_open(&l, &s);
    ck_assert_msg(rc == 0, "%s", gf_last_error(l));
    size_t cap = 1 << 20, tcap = 1 << 16;
    uint8_t *all = malloc(cap);
    float *t = malloc(tcap * sizeof *t);
    *len = *n_targets = 0;
    gf_batch *b;
    while ((rc = gf_next(l, &b)) == 0) {
        size_t n = device_batch_bytes(b), nt = (size_t)b->count * (size_t)b->n_classes;
        ck_assert_ptr_nonnull(b->targets);
        ck_assert_int_eq(b->n_classes, 5);
        ck_assert_uint_le(*len + n, cap);
        ck_assert_uint_le(*n_targets + nt, tcap);
        if (b->device == GF_DEVICE_CUDA) {
            ck_assert_int_eq(gf_batch_wait(b, NULL), 0);
            CK_CUDA(cudaMemcpy(all + *len, b->data, n, cudaMemcpyDeviceToHost));
            CK_CUDA(cudaMemcpy(t + *n_targets, b->targets, nt * sizeof *t,
                               cudaMemcpyDeviceToHost));
        } else {
            memcpy(all + *len, b->data, n);
            memcpy(t + *n_targets, b->targets, nt * sizeof *t);
        }
        *len += n;
        *n_targets += nt;
        ck_assert_int_eq(gf_release(l, b), 0);
    }
    ck_assert_int_eq(rc, GF_EOF);
    gf_close(&l);
    *targets = t;
    return all;
}

/* MixUp, CutMix and the switch between them, in each float dtype and both
 * layouts, the copies queued by the controller (pinned) or gf-copy
 * (pageable): the device's mixed bytes and targets are the CPU path's. */
static const struct {
    const char *spec;
    gf_dtype dtype;
    gf_layout layout;
} mix_cases[] = {
    {"mix cutmix=0 classes=5", GF_DTYPE_FLOAT32, GF_LAYOUT_NCHW},
    {"mix mixup=0 classes=5", GF_DTYPE_FLOAT16, GF_LAYOUT_NHWC},
    {"mix mixup=0.3 cutmix=1 classes=5", GF_DTYPE_BFLOAT16, GF_LAYOUT_NCHW},
    {"mix mixup=2 cutmix=0.5 switch=0.7 classes=5", GF_DTYPE_FLOAT32, GF_LAYOUT_NHWC},
};

START_TEST(mixed_device_batches_and_targets_are_the_cpu_paths)
{
    for (int pageable = 0; pageable < 2; pageable++) {
        gf_settings s;
        gpu_settings(&s);
        s.augment = mix_cases[_i].spec;
        s.dtype = mix_cases[_i].dtype;
        s.layout = mix_cases[_i].layout;
        s.device = GF_DEVICE_CPU;
        size_t want_len, got_len, want_nt, got_nt;
        float *want_t, *got_t;
        uint8_t *want = collect_mixed(s, &want_len, &want_t, &want_nt);
        s.device = GF_DEVICE_CUDA;
        if (pageable)
            s.pinned_max_bytes = 1;
        uint8_t *got = collect_mixed(s, &got_len, &got_t, &got_nt);
        ck_assert_uint_eq(got_len, want_len);
        ck_assert_uint_eq(got_nt, want_nt);
        ck_assert_msg(memcmp(got, want, want_len) == 0, "%s, %s: data differ",
                      mix_cases[_i].spec, pageable ? "pageable" : "pinned");
        ck_assert_msg(memcmp(got_t, want_t, want_nt * sizeof *got_t) == 0,
                      "%s: targets differ", mix_cases[_i].spec);
        free(want), free(got), free(want_t), free(got_t);
    }
}
END_TEST

START_TEST(device_batches_equal_the_cpu_path)
{
    run_slow_consumer(0, 4, 0, 0);
}
END_TEST

START_TEST(a_slow_consumer_never_sees_its_batch_overwritten)
{
    run_slow_consumer(2000000, 2, 0, 0); /* 2 ms of GPU work per batch */
    run_slow_consumer(500000, 1, 0, 0);
    run_slow_consumer(2000000, 3, 1, 0); /* a copy stream per slot */
}
END_TEST

START_TEST(ready_events_complete_and_default_stream_works)
{
    gf_settings s;
    gpu_settings(&s);
    s.device = GF_DEVICE_CUDA;
    s.dtype = GF_DTYPE_UINT8;
    s.flip_on_device = 0;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    gf_batch *b;
    ck_assert_int_eq(gf_next(l, &b), 0);
    ck_assert_int_eq(gf_batch_wait(b, NULL), 0);
    CK_CUDA(cudaEventSynchronize((cudaEvent_t)b->ready_event));
    CK_CUDA(cudaEventQuery((cudaEvent_t)b->ready_event));
    ck_assert_int_eq(gf_release(l, b), 0);
    ck_assert_int_eq(gf_release(l, b), GF_EINVAL);
    gf_close(&l);
}
END_TEST

#ifdef GF_CUDA_EMU
/* A stream that is no stream (here one already destroyed: undefined
 * behaviour on a real GPU, so only on cudaemu) is the caller's mistake:
 * GF_EINVAL, the batch stays held, and the loader goes on. */
START_TEST(a_bad_stream_is_refused_and_the_batch_stays_held)
{
    gf_settings s;
    gpu_settings(&s);
    s.device = GF_DEVICE_CUDA;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    cudaStream_t gone;
    CK_CUDA(cudaStreamCreateWithFlags(&gone, cudaStreamNonBlocking));
    CK_CUDA(cudaStreamDestroy(gone));
    gf_batch *b;
    ck_assert_int_eq(gf_next(l, &b), 0);
    ck_assert_int_eq(gf_release_stream(l, b, gone), GF_EINVAL);
    ck_assert_msg(strstr(gf_last_error(l), "not a stream"), "message: %s", gf_last_error(l));
    ck_assert_int_eq(gf_release_stream(l, b, NULL), 0);
    int n = 0;
    while (gf_next(l, &b) == 0) {
        n++;
        ck_assert_int_eq(gf_release(l, b), 0);
    }
    ck_assert_int_eq(n, 2 * 9 - 1); /* 2 epochs of 9 batches (33 samples, batch 4) */
    gf_close(&l);
}
END_TEST

/* 1 if a child process that reads *p dies (its report goes nowhere). */
static int dies_reading(const volatile uint8_t *p)
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        uint8_t x = p[0];
        (void)x;
        _exit(0);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    return !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* On a GPU, host code that reads b->data crashes. The emulator's device
 * addresses must fault the same way, or such code passes here. */
START_TEST(host_reads_of_device_memory_fault_as_on_a_gpu)
{
    gf_settings s;
    gpu_settings(&s);
    s.device = GF_DEVICE_CUDA;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    gf_batch *b;
    ck_assert_int_eq(gf_next(l, &b), 0);
    ck_assert_int_eq(b->device, GF_DEVICE_CUDA);
    ck_assert_msg(dies_reading(b->data), "the host read a device batch");
    uint8_t first;
    CK_CUDA(cudaMemcpy(&first, b->data, 1, cudaMemcpyDeviceToHost)); /* the right way */
    ck_assert_int_eq(gf_release(l, b), 0);
    gf_close(&l);

    uint8_t *raw;
    CK_CUDA(cudaMalloc((void **)&raw, 16));
    ck_assert_msg(dies_reading(raw), "the host read cudaMalloc memory");
    CK_CUDA(cudaFree(raw));
}
END_TEST
#endif

/* Threads this process has started: pthread_create, counted on the way
 * to the real one (the loader's calls resolve to this definition). */
static atomic_int threads_started;

int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
    atomic_fetch_add(&threads_started, 1);
    return real(t, a, fn, arg);
}

/* A consumer whose thread is bound to another device waits
 * (gf_batch_wait(b, NULL)) and releases (gf_release, and
 * gf_release_stream(l, b, NULL) on every other batch) on the legacy
 * default stream of the loader's device: through the device's one helper
 * thread, not a thread started per batch. Two devices: the emulator's
 * (main sets them), or a machine's. */
START_TEST(a_consumer_bound_to_another_device_starts_no_thread_per_batch)
{
    int count = 0;
    CK_CUDA(cudaGetDeviceCount(&count));
    if (count < 2)
        return;
    gf_settings s;
    gpu_settings(&s);
    s.device = GF_DEVICE_CUDA;
    s.device_id = 0;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    /* Device 0's legacy stream in use before counting: the emulator starts
     * a stream's worker on its first use. */
    CK_CUDA(cudaStreamSynchronize(0));
    CK_CUDA(cudaSetDevice(1));
    int before = atomic_load(&threads_started), batches = 0;
    gf_batch *b;
    while (gf_next(l, &b) == 0) {
        ck_assert_int_eq(gf_batch_wait(b, NULL), 0);
        if (batches % 2)
            ck_assert_int_eq(gf_release_stream(l, b, NULL), 0);
        else
            ck_assert_int_eq(gf_release(l, b), 0);
        batches++;
    }
    int started = atomic_load(&threads_started) - before;
    ck_assert_int_eq(batches, 2 * 9);
#ifdef GF_CUDA_EMU
    /* None: a wait or release on device 1's legacy stream would have
     * started its worker. */
    ck_assert_msg(started == 0, "%d threads started for %d batches", started, batches);
#else
    ck_assert_msg(started <= 1, "%d threads started for %d batches", started, batches);
#endif
    gf_close(&l);
    CK_CUDA(cudaSetDevice(0));
}
END_TEST

START_TEST(a_ring_over_the_device_budget_is_refused_with_sizes)
{
    gf_settings s;
    gpu_settings(&s);
    s.device = GF_DEVICE_CUDA;
    s.width = s.height = 512;
    s.batch_size = 64;
    s.dtype = GF_DTYPE_FLOAT32;
    s.device_max_bytes = 1 << 20;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), GF_ENOMEM);
    const char *m = gf_last_error(l);
    ck_assert_msg(strstr(m, "MiB") && strstr(m, "needs"), "message: %s", m);
    gf_close(&l);
    s.device = GF_DEVICE_AUTO; /* a GPU that is too small is an error, not a fallback */
    ck_assert_int_eq(gf_open(&l, &s), GF_ENOMEM);
    gf_close(&l);
}
END_TEST

/* A device batch's bytes, read back on stream (synchronised). */
static void read_back(const gf_batch *b, cudaStream_t stream, uint8_t *to, size_t n)
{
    ck_assert_int_eq(gf_batch_wait(b, stream), 0);
    CK_CUDA(cudaMemcpyAsync(to, b->data, n, cudaMemcpyDeviceToHost, stream));
    CK_CUDA(cudaStreamSynchronize(stream));
}

static size_t device_batch_bytes(const gf_batch *b)
{
    return (size_t)b->count * b->height * b->width * b->channels * gf_dtype_size(b->dtype);
}

/* Batches held 4 at a time at depth 2: each keeps its device slot (the
 * next ones go to other device slots, fed from any host slot) and its
 * bytes while later batches are copied; the run is the CPU path's bytes,
 * also with a batch held across a seek. 2 + 3 slots, pinned and on the
 * device. */
START_TEST(held_device_batches_keep_their_bytes_and_take_slots_of_their_own)
{
    gf_settings s;
    gpu_settings(&s);
    s.device = GF_DEVICE_CUDA;
    s.prefetch_depth = 2;
    s.copy_stream_per_slot = _i;
    size_t want_len;
    uint8_t *want = cpu_reference(s, &want_len);
    gf_loader *l = NULL;
    int rc = gf_open(&l, &s);
    ck_assert_msg(rc == 0, "%s", gf_last_error(l));
    gf_stats st0, st;
    gf_get_stats(l, &st0);
    cudaStream_t stream;
    CK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    uint8_t *got, *again;
    CK_CUDA(cudaMallocHost((void **)&got, want_len));
    CK_CUDA(cudaMallocHost((void **)&again, want_len));
    size_t off = 0;
    gf_batch *group[4];
    size_t at[4];
    for (rc = 0; rc == 0;) {
        int k = 0;
        for (; k < 4 && (rc = gf_next(l, &group[k])) == 0; k++) {
            size_t n = device_batch_bytes(group[k]);
            ck_assert_uint_le(off + n, want_len);
            read_back(group[k], stream, got + off, n);
            at[k] = off;
            off += n;
        }
        for (int i = 0; i < k; i++) {
            size_t n = device_batch_bytes(group[i]);
            read_back(group[i], stream, again + at[i], n);
            ck_assert_msg(memcmp(again + at[i], got + at[i], n) == 0,
                          "a held batch changed while later ones came");
            ck_assert_int_eq(gf_release_stream(l, group[i], stream), 0);
        }
    }
    ck_assert_msg(rc == GF_EOF, "%s: %s", gf_err_name(rc), gf_last_error(l));
    ck_assert_uint_eq(off, want_len);
    ck_assert_msg(memcmp(got, want, want_len) == 0, "device batches differ from the CPU path");
    gf_get_stats(l, &st);
    ck_assert_uint_eq(st.device_bytes, st0.device_bytes / 2 * 5);
    ck_assert_uint_eq(st.pinned_bytes, st0.pinned_bytes / 2 * 5);
    ck_assert_uint_eq(st.ring_bytes, st0.ring_bytes / 2 * 5);

    /* Held across a seek to the start: the run again, the batch intact. */
    gf_batch *kept, *b;
    ck_assert_int_eq(gf_seek(l, 0, 0), 0);
    ck_assert_int_eq(gf_next(l, &kept), 0);
    size_t kept_n = device_batch_bytes(kept);
    ck_assert_int_eq(gf_seek(l, 0, 0), 0);
    off = 0;
    while ((rc = gf_next(l, &b)) == 0) {
        size_t n = device_batch_bytes(b);
        read_back(b, stream, got + off, n);
        off += n;
        ck_assert_int_eq(gf_release_stream(l, b, stream), 0);
    }
    ck_assert_int_eq(rc, GF_EOF);
    ck_assert_msg(off == want_len && memcmp(got, want, want_len) == 0,
                  "after a seek with a batch held, the batches differ");
    read_back(kept, stream, again, kept_n);
    ck_assert_msg(memcmp(again, want, kept_n) == 0, "the batch held across the seek changed");
    ck_assert_int_eq(gf_release_stream(l, kept, stream), 0);
    gf_close(&l);
    CK_CUDA(cudaFreeHost(got));
    CK_CUDA(cudaFreeHost(again));
    CK_CUDA(cudaStreamDestroy(stream));
    free(want);
}
END_TEST

/* device_max_bytes with room for the prefetch slots only: holding
 * batches runs on the slots there are; when all are held, gf_next is
 * GF_EBUSY saying the budget refused one and which batches are held, and
 * goes on once one is released. */
START_TEST(when_the_device_budget_refuses_a_slot_all_held_is_busy_and_recovers)
{
    gf_settings s;
    gpu_settings(&s);
    s.device = GF_DEVICE_CUDA;
    s.prefetch_depth = 2;
    s.epochs = 1;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    gf_stats st;
    gf_get_stats(l, &st);
    gf_close(&l);
    s.device_max_bytes = st.device_bytes;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    gf_batch *a, *b, *c;
    ck_assert_int_eq(gf_next(l, &a), 0);
    ck_assert_int_eq(gf_next(l, &b), 0); /* no third slot: runs on two */
    ck_assert_int_eq(gf_next(l, &c), GF_EBUSY);
    const char *m = gf_last_error(l);
    ck_assert_msg(strstr(m, "device_max_bytes") && strstr(m, "2 batches are held") &&
                      strstr(m, "(epoch 0, position 4), (epoch 0, position 8)"),
                  "message: %s", m);
    ck_assert_int_eq(gf_release(l, a), 0);
    ck_assert_int_eq(gf_next(l, &c), 0);
    ck_assert_uint_eq(c->position, 12);
    ck_assert_int_eq(gf_release(l, b), 0);
    ck_assert_int_eq(gf_release(l, c), 0);
    int n = 3;
    while (gf_next(l, &c) == 0) {
        n++;
        gf_release(l, c);
    }
    ck_assert_int_eq(n, (33 + 3) / 4);
    gf_get_stats(l, &st);
    ck_assert_uint_eq(st.device_bytes, s.device_max_bytes);
    gf_close(&l);
}
END_TEST

/* Pageable slots: the CPU path's bytes, copies queued off the controller,
 * also under a slow consumer and with a copy stream per slot. */
START_TEST(over_the_pinned_cap_slots_are_pageable_and_copied_off_the_controller)
{
    run_slow_consumer(0, 4, 0, 1);
    run_slow_consumer(2000000, 2, 0, 1);
    run_slow_consumer(2000000, 3, 1, 1);
}
END_TEST

/* stats.h2d_*: every batch's copy in (pixels and flips) timed by events on
 * the copy stream, pinned (_i 0) or pageable (_i 1). After a seek to the
 * end, all of them have been read. */
START_TEST(each_batch_copy_is_timed_at_its_size)
{
    gf_settings s;
    gpu_settings(&s);
    s.device = GF_DEVICE_CUDA;
    s.pinned_max_bytes = _i ? 1 : 0;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    gf_batch *b;
    uint64_t batches = 0, bytes = 0;
    const uint64_t cell = (uint64_t)s.height * s.width * 3 + 1; /* pixels and a flip */
    while (gf_next(l, &b) == 0) {
        batches++;
        bytes += (uint64_t)b->count * cell;
        ck_assert_int_eq(gf_release(l, b), 0);
    }
    ck_assert_int_eq(gf_seek(l, 2, 0), 0); /* past the last epoch: nothing more */
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_uint_eq(batches, 2 * 9);
    ck_assert_uint_eq(st.h2d_copies, batches);
    ck_assert_uint_eq(st.h2d_bytes, bytes);
    ck_assert_msg(st.h2d_s > 0 && st.h2d_s < 60, "h2d_s %g", st.h2d_s);
    ck_assert_int_eq(gf_next(l, &b), GF_EOF);
    gf_close(&l);
}
END_TEST

START_TEST(local_rank_picks_the_device)
{
    int count = 0;
    CK_CUDA(cudaGetDeviceCount(&count));
    gf_settings s;
    gpu_settings(&s);
    s.device = GF_DEVICE_CUDA;
    setenv("LOCAL_RANK", "0", 1);
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    gf_stats st;
    gf_get_stats(l, &st);
    ck_assert_int_eq(st.device_id, 0);
    gf_close(&l);
    /* A local rank past the visible devices wraps: the launcher gave each
     * rank its own devices (CUDA_VISIBLE_DEVICES), numbered from 0. */
    char v[16];
    snprintf(v, sizeof v, "%d", count + 1);
    setenv("LOCAL_RANK", v, 1);
    ck_assert_int_eq(gf_open(&l, &s), 0);
    gf_get_stats(l, &st);
    ck_assert_int_eq(st.device_id, (count + 1) % count);
    gf_close(&l);
    unsetenv("LOCAL_RANK");
    /* A device the settings name must exist. */
    s.device_id = count;
    ck_assert_int_eq(gf_open(&l, &s), GF_ENODEV);
    ck_assert_msg(strstr(gf_last_error(l), "present"), "message: %s", gf_last_error(l));
    gf_close(&l);
}
END_TEST

int main(void)
{
#ifdef GF_CUDA_EMU
    setenv("GF_CUDAEMU_DEVICES", "2", 0); /* for the other-device consumer */
#endif
    int present = tu_cuda_present();
    if (present != 0)
        return present;
    Suite *s = suite_create("gpu");
    TCase *t = tcase_create("gpu");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 120);
    tcase_add_loop_test(t, kernel_matches_the_cpu_twin_bit_for_bit, 0,
                        (int)(sizeof twin_widths / sizeof twin_widths[0]));
    tcase_add_test(t, device_batches_equal_the_cpu_path);
    tcase_add_loop_test(t, mixed_device_batches_and_targets_are_the_cpu_paths, 0,
                        (int)(sizeof mix_cases / sizeof mix_cases[0]));
    tcase_add_loop_test(t, every_depth_thread_count_stream_and_seek_gives_the_cpu_bytes, 0,
                        (int)(sizeof ring_depths / sizeof ring_depths[0]));
    tcase_add_test(t, a_slow_consumer_never_sees_its_batch_overwritten);
    tcase_add_test(t, ready_events_complete_and_default_stream_works);
    tcase_add_test(t, a_ring_over_the_device_budget_is_refused_with_sizes);
    tcase_add_loop_test(t, held_device_batches_keep_their_bytes_and_take_slots_of_their_own, 0, 2);
    tcase_add_test(t, when_the_device_budget_refuses_a_slot_all_held_is_busy_and_recovers);
#ifdef GF_CUDA_EMU
    tcase_add_test(t, a_bad_stream_is_refused_and_the_batch_stays_held);
    tcase_add_test(t, host_reads_of_device_memory_fault_as_on_a_gpu);
#endif
    tcase_add_test(t, over_the_pinned_cap_slots_are_pageable_and_copied_off_the_controller);
    tcase_add_loop_test(t, each_batch_copy_is_timed_at_its_size, 0, 2);
    tcase_add_test(t, local_rank_picks_the_device);
    tcase_add_test(t, a_consumer_bound_to_another_device_starts_no_thread_per_batch);
    suite_add_tcase(s, t);
    return tu_run_cuda_suite(s);
}
#endif
