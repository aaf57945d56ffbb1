/* cudaemu: what the emulator's files share (README.md for the whole).
 * emu_api.cpp: devices, errors, the checks every entry point makes.
 * emu_memory.cpp: allocations, device addresses, copies and memsets.
 * emu_streams.cpp: streams, their workers, events.
 * emu_launch.cpp: kernels: blocks of fibers, shared memory, barriers.
 *
 * Model:
 * - A stream is a FIFO of operations run by its own worker thread, so work
 *   on different streams really runs concurrently with each other and with
 *   the host, and an ordering bug shows up as wrong bytes or as a data race
 *   under TSan (every wait is a mutex handoff, so it is a happens-before
 *   edge to TSan, and a missing wait is not).
 * - Misuse that CUDA leaves undefined (wrong copy direction, a CUDA call
 *   from a stream callback, __syncthreads outside a kernel) aborts with a
 *   message: the tests that use the emulator must not get past it.
 *
 * Environment: GF_CUDAEMU_DEVICES (default 1; 0 is "no device"),
 * GF_CUDAEMU_MEM_MB (device memory per device, default 2048),
 * GF_CUDAEMU_PINNED_MB (cap on pinned host memory, default none),
 * GF_CUDAEMU_DELAY_US (sleep before each stream operation, default 0:
 * a slow device), GF_CUDAEMU_SYNC=1 (a device with no latency at all:
 * each call that queues work returns after the work, callbacks included,
 * has run; what the host does next then always comes after it),
 * GF_CUDAEMU_LAZY_DEFAULT=1 (the legacy default stream's copies, memsets
 * and kernels run late, after ~100 ms, unless something waits for them;
 * N > 1: after N ms. What CUDA does not order with non-blocking streams
 * then visibly is not).
 *
 * The functions and variables here are hidden: the library and a program
 * that links both it and the emulator each keep their own, as they did
 * when these were file-local. */
#ifndef GF_CUDAEMU_INTERNAL_H
#define GF_CUDAEMU_INTERNAL_H

#include "cuda_runtime.h"

#include <stdint.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>

namespace gf_cudaemu {

struct config {
    int devices;
    size_t device_bytes;
    long pinned_max; /* bytes, or -1: no cap */
    long delay_us;
    bool sync;
    long lazy_ms; /* > 0: the legacy stream's work is held this long */
};

/* After a device fault (sticky[device]) work and waits are skipped, and
 * records and callbacks still run, callbacks with the fault, as CUDA's. */
enum op_kind { WORK, WAIT, RECORD, CALLBACK };
struct op {
    std::function<void(cudaError_t)> run; /* the device's fault, or cudaSuccess */
    op_kind kind;
};

}  // namespace gf_cudaemu

/* A stream: its worker runs queue in order; queued and finished count
 * its ops, so a wait for "what was queued so far" is a number. */
struct CUstream_st {
    int device;
    unsigned flags;
    bool legacy;
    bool destroyed;
    std::deque<gf_cudaemu::op> queue;
    uint64_t queued = 0, finished = 0;
    uint64_t force = 0; /* lazy legacy stream: ops up to here are waited for */
};

#pragma GCC visibility push(hidden)

namespace gf_cudaemu {

[[noreturn]] void violation(const char *fmt, ...);
const config &cfg(); /* read from the environment once */

/* One lock and one condition for all stream, event and memory state:
 * simple, and the emulator's speed is not the point. Never destroyed:
 * detached stream workers wait on them until exit. */
extern std::mutex &mu;
extern std::condition_variable &changed;

constexpr int MAX_DEVICES = 64;
extern cudaError_t sticky[MAX_DEVICES]; /* a device's fault: every later call fails with it */
extern thread_local int current_device;
extern thread_local bool in_callback;

/* Records the error for cudaGetLastError; returns it. */
cudaError_t fail(cudaError_t e);
/* Every entry point: CUDA forbids calls from stream callbacks. */
void enter(const char *fn);
bool have_devices();
cudaError_t sticky_of(int device);

/* Streams (emu_streams.cpp), all with mu held. */
CUstream_st *resolve(cudaStream_t h); /* NULL if h names no stream */
void enqueue(CUstream_st *s, op o);
void drain(std::unique_lock<std::mutex> &lk, CUstream_st *s);
/* Lazy legacy stream: someone waits for its ops up to n, so they run now. */
void hurry(CUstream_st *s, uint64_t n);
/* After queueing on s: with GF_CUDAEMU_SYNC, the work is done on return. */
void settle(std::unique_lock<std::mutex> &lk, CUstream_st *s);
void drain_device(std::unique_lock<std::mutex> &lk, int device);

/* Frees the exiting stream worker's fibers (emu_launch.cpp). */
void release_runner();

}  // namespace gf_cudaemu

#pragma GCC visibility pop

/* Entry of a call that does nothing after a device fault, and of one
 * (freeing, destroying) that still releases what it was given. */
#define ENTER()                                                                              \
    do {                                                                                     \
        enter(__func__);                                                                     \
        if (!have_devices())                                                                 \
            return fail(cudaErrorNoDevice);                                                  \
        if (cudaError_t fault_ = sticky_of(current_device))                                  \
            return fail(fault_);                                                             \
    } while (0)
#define ENTER_RELEASE()                                                                      \
    do {                                                                                     \
        enter(__func__);                                                                     \
        if (!have_devices())                                                                 \
            return fail(cudaErrorNoDevice);                                                  \
    } while (0)

#endif
