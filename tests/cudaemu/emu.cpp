/* cudaemu: the CUDA Runtime on the CPU, for tests (README.md).
 *
 * Model:
 * - A stream is a FIFO of operations run by its own worker thread, so work
 *   on different streams really runs concurrently with each other and with
 *   the host, and an ordering bug shows up as wrong bytes or as a data race
 *   under TSan (every wait below is a mutex handoff, so it is a
 *   happens-before edge to TSan, and a missing wait is not).
 * - The legacy default stream (0) of a device waits for the work queued
 *   before it on every blocking stream of that device, and they wait for
 *   it: CUDA's implicit synchronisation. Non-blocking streams skip both.
 * - An event is a pair of counters: how many times it has been recorded,
 *   and the newest of those records the device has reached.
 * - A kernel runs its grid block by block on the stream's worker. The
 *   threads of a block are fibers: a thread runs until it ends
 *   or reaches __syncthreads, and a barrier opens when every thread of
 *   the block has reached it or ended. Odd blocks and odd barrier phases
 *   run their threads in reverse order, so code that needs a barrier it
 *   lacks tends to compute something else.
 * - Device memory is host memory from posix_memalign, of exactly the size
 *   asked, so ASan sees a kernel or copy that goes past an allocation.
 *   Its address, what cudaMalloc returns, lies in a reserved range no
 *   thread may touch, so host code that dereferences a device pointer
 *   faults as on a GPU; kernel arguments, copies and memsets are
 *   translated to the host bytes. Copies and memsets check that their
 *   pointers lie inside allocations of the kind the direction says.
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
 * has run; what the host does next then always comes after it). */
#include "cuda_runtime.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define EMU_TSAN 1
#endif

namespace gf_cudaemu {

GF_CUDAEMU_TLS uint3 thread_idx, block_idx;
GF_CUDAEMU_TLS dim3 block_dim, grid_dim;

namespace {

[[noreturn]] void violation(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cudaemu: CUDA misuse: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

long env_long(const char *name, long fallback)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : fallback;
}

double now_ms()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

struct config {
    int devices;
    size_t device_bytes;
    long pinned_max; /* bytes, or -1: no cap */
    long delay_us;
    bool sync;
    config()
    {
        devices = (int)env_long("GF_CUDAEMU_DEVICES", 1);
        device_bytes = (size_t)env_long("GF_CUDAEMU_MEM_MB", 2048) << 20;
        long pmb = env_long("GF_CUDAEMU_PINNED_MB", -1);
        pinned_max = pmb < 0 ? -1 : pmb << 20;
        delay_us = env_long("GF_CUDAEMU_DELAY_US", 0);
        sync = env_long("GF_CUDAEMU_SYNC", 0) != 0;
    }
};

const config &cfg()
{
    static const config c;
    return c;
}

/* One lock and one condition for all stream and event state: simple, and
 * the emulator's speed is not the point. Never destroyed: detached stream
 * workers wait on them until exit. */
std::mutex &mu = *new std::mutex;
std::condition_variable &changed = *new std::condition_variable;

enum alloc_kind { DEVICE_MEM, PINNED_MEM };
struct allocation {
    size_t size;
    alloc_kind kind;
    int device;
    unsigned char *bytes; /* where the memory is: for device memory not
                             the address the program sees (the key) */
};
std::map<uintptr_t, allocation> &allocations = *new std::map<uintptr_t, allocation>; /* by start */

/* Device addresses: a range mapped PROT_NONE. Each allocation gets a
 * stretch of it of its own, never reused, with a page's gap after it, so
 * a stale or overrun device pointer is caught when it is translated. */
constexpr size_t device_window = (size_t)256 << 30;
uintptr_t window_base, window_next;

bool in_window(uintptr_t a)
{
    return window_base && a >= window_base && a - window_base < device_window;
}

/* A fresh device address for size bytes. Under mu. */
uintptr_t device_address(size_t size)
{
    if (!window_base) {
        void *w = mmap(NULL, device_window, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (w == MAP_FAILED)
            violation("cannot reserve %zu GiB of addresses for device memory", device_window >> 30);
        window_base = window_next = (uintptr_t)w;
    }
    const size_t span = ((size ? size : 1) + 4096 + 255) & ~(size_t)255;
    if (span > device_window - (window_next - window_base))
        violation("the %zu GiB of device addresses are used up: addresses are never reused",
                  device_window >> 30);
    const uintptr_t d = window_next;
    window_next += span;
    return d;
}
size_t device_used[64];
size_t pinned_used;
cudaError_t sticky[64]; /* a device's fault: every later call fails with it */

/* After a device fault (sticky[device]) work and waits are skipped, and
 * records and callbacks still run, callbacks with the fault, as CUDA's. */
enum op_kind { WORK, WAIT, RECORD, CALLBACK };
struct op {
    std::function<void(cudaError_t)> run; /* the device's fault, or cudaSuccess */
    op_kind kind;
};

}  // namespace
}  // namespace gf_cudaemu

struct CUstream_st {
    int device;
    unsigned flags;
    bool legacy;
    bool destroyed;
    std::deque<gf_cudaemu::op> queue;
    uint64_t queued = 0, finished = 0;
};

struct CUevent_st {
    unsigned flags;
    uint64_t recorded = 0, reached = 0;
    double reached_ms = 0;
};

namespace gf_cudaemu {
namespace {

std::set<CUstream_st *> &streams = *new std::set<CUstream_st *>; /* live handles */
/* Destroyed streams, drained, kept: a wait another thread queued or is in
 * (cudaFree's drain) may still read their counters. */
std::vector<CUstream_st *> &retired = *new std::vector<CUstream_st *>;
std::map<CUevent_st *, std::shared_ptr<CUevent_st>> &events =
    *new std::map<CUevent_st *, std::shared_ptr<CUevent_st>>;

std::shared_ptr<CUevent_st> event_of(cudaEvent_t e)
{
    auto it = events.find(e);
    return it == events.end() ? nullptr : it->second;
}
CUstream_st *legacy_streams[64];

thread_local int current_device;
thread_local cudaError_t last_error = cudaSuccess;
thread_local bool in_callback;

cudaError_t fail(cudaError_t e)
{
    if (e != cudaSuccess)
        last_error = e;
    return e;
}

/* Every entry point: CUDA forbids calls from stream callbacks. */
void enter(const char *fn)
{
    if (in_callback)
        violation("%s called from a stream callback (CUDA: not permitted, may deadlock)", fn);
}

bool have_devices()
{
    return cfg().devices > 0;
}

void release_runner();

void worker_main(CUstream_st *s)
{
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
        changed.wait(lk, [s] { return !s->queue.empty() || s->destroyed; });
        if (s->queue.empty())
            break; /* destroyed and drained */
        op o = std::move(s->queue.front());
        s->queue.pop_front();
        const cudaError_t fault = sticky[s->device];
        lk.unlock();
        if (o.kind == WORK && cfg().delay_us > 0)
            usleep((useconds_t)cfg().delay_us);
        if (!fault || o.kind == RECORD || o.kind == CALLBACK)
            o.run(fault);
        lk.lock();
        s->finished++;
        changed.notify_all();
    }
    retired.push_back(s);
    lk.unlock();
    release_runner();
}

CUstream_st *new_stream(int device, unsigned flags, bool legacy)
{
    CUstream_st *s = new CUstream_st();
    s->device = device;
    s->flags = flags;
    s->legacy = legacy;
    s->destroyed = false;
    std::thread(worker_main, s).detach();
    return s;
}

/* The stream a handle names, with mu held; NULL if it names none. */
CUstream_st *resolve(cudaStream_t h)
{
    if (h == NULL || h == cudaStreamLegacy || h == cudaStreamPerThread) {
        CUstream_st *&l = legacy_streams[current_device];
        if (!l)
            l = new_stream(current_device, cudaStreamDefault, true);
        return l;
    }
    return streams.count(h) ? h : NULL;
}

/* Whether any device has faulted (mu held): waits give up then. */
bool sticky_any()
{
    for (cudaError_t e : sticky)
        if (e)
            return true;
    return false;
}

/* A wait op: runs on s's worker until pred holds. */
op wait_op(std::function<bool()> pred)
{
    return op{[pred](cudaError_t) {
                  std::unique_lock<std::mutex> lk(mu);
                  changed.wait(lk, [&pred] { return pred() || sticky_any(); });
              },
              WAIT};
}

/* Queues o on s with mu held, after the implicit dependencies of the
 * legacy default stream. */
void enqueue(CUstream_st *s, op o)
{
    auto reached = [](CUstream_st *t, uint64_t n) { return [t, n] { return t->finished >= n; }; };
    if (s->legacy) {
        for (CUstream_st *t : streams)
            if (t->device == s->device && !(t->flags & cudaStreamNonBlocking) &&
                t->queued > t->finished) {
                s->queue.push_back(wait_op(reached(t, t->queued)));
                s->queued++;
            }
    } else if (!(s->flags & cudaStreamNonBlocking)) {
        CUstream_st *l = legacy_streams[s->device];
        if (l && l->queued > l->finished) {
            s->queue.push_back(wait_op(reached(l, l->queued)));
            s->queued++;
        }
    }
    s->queue.push_back(std::move(o));
    s->queued++;
    changed.notify_all();
}

void drain(std::unique_lock<std::mutex> &lk, CUstream_st *s)
{
    const uint64_t n = s->queued;
    changed.wait(lk, [s, n] { return s->finished >= n; });
}

/* After queueing on s: with GF_CUDAEMU_SYNC, the work is done on return. */
void settle(std::unique_lock<std::mutex> &lk, CUstream_st *s)
{
    if (cfg().sync)
        drain(lk, s);
}

void drain_device(std::unique_lock<std::mutex> &lk, int device)
{
    std::vector<std::pair<CUstream_st *, uint64_t>> all;
    for (CUstream_st *t : streams)
        if (t->device == device)
            all.emplace_back(t, t->queued);
    if (CUstream_st *l = legacy_streams[device])
        all.emplace_back(l, l->queued);
    changed.wait(lk, [&all] {
        for (auto &p : all)
            if (p.first->finished < p.second)
                return false;
        return true;
    });
}

/* The allocation holding [p, p + n), or NULL. */
/* The allocation that starts at or before address a, or end(). Under mu. */
std::map<uintptr_t, allocation>::iterator at_or_before(uintptr_t a)
{
    auto it = allocations.upper_bound(a);
    return it == allocations.begin() ? allocations.end() : std::prev(it);
}

const allocation *find(const void *p, size_t n)
{
    const uintptr_t a = (uintptr_t)p;
    auto it = at_or_before(a);
    if (it == allocations.end() || a - it->first >= (it->second.size ? it->second.size : 1))
        return NULL;
    if (n > it->second.size - (a - it->first))
        violation("%zu bytes at %p run %zu bytes past the end of an allocation of %zu bytes", n, p,
                  n - (it->second.size - (a - it->first)), it->second.size);
    return &it->second;
}

/* Where the bytes at device address p are (p itself if it is not a
 * device address). A pointer one past an allocation's end is allowed, as
 * in C. Under mu. */
void *host_view(const void *p)
{
    const uintptr_t a = (uintptr_t)p;
    if (!in_window(a))
        return const_cast<void *>(p);
    auto it = at_or_before(a);
    if (it != allocations.end() && it->second.kind == DEVICE_MEM && a - it->first <= it->second.size)
        return it->second.bytes + (a - it->first);
    violation("device address %p is in no live allocation (freed, or past the end of one)", p);
}

bool is_device(const void *p, size_t n)
{
    const allocation *a = find(p, n);
    return a && a->kind == DEVICE_MEM;
}

bool is_pinned(const void *p, size_t n)
{
    const allocation *a = find(p, n);
    return a && a->kind == PINNED_MEM;
}

const char *kind_name(cudaMemcpyKind k)
{
    switch (k) {
    case cudaMemcpyHostToHost: return "HostToHost";
    case cudaMemcpyHostToDevice: return "HostToDevice";
    case cudaMemcpyDeviceToHost: return "DeviceToHost";
    case cudaMemcpyDeviceToDevice: return "DeviceToDevice";
    default: return "Default";
    }
}

/* Checks a copy's pointers against its direction, with mu held. */
cudaError_t check_copy(void *dst, const void *src, size_t n, cudaMemcpyKind kind)
{
    if (n == 0)
        return cudaSuccess;
    if (!dst || !src)
        return cudaErrorInvalidValue;
    const bool dd = is_device(dst, n), sd = is_device(src, n);
    bool ok;
    switch (kind) {
    case cudaMemcpyHostToHost: ok = !dd && !sd; break;
    case cudaMemcpyHostToDevice: ok = dd && !sd; break;
    case cudaMemcpyDeviceToHost: ok = !dd && sd; break;
    case cudaMemcpyDeviceToDevice: ok = dd && sd; break;
    case cudaMemcpyDefault: ok = true; break;
    default: return cudaErrorInvalidMemcpyDirection;
    }
    if (!ok)
        violation("cudaMemcpy%s of %zu bytes from %s memory %p to %s memory %p", kind_name(kind),
                  n, sd ? "device" : "host", src, dd ? "device" : "host", dst);
    return cudaSuccess;
}

/* ---- fibers: the threads of one block ---- */

struct trap_signal {};

/* A context switch: on x86-64 six callee-saved registers and the stack
 * pointer (swapcontext also saves the signal mask, a system call per
 * switch, which made gpufeed train 6x slower); elsewhere ucontext. */
#if defined(__x86_64__)
extern "C" void gf_cudaemu_switch(void **save_sp, void *load_sp);
asm(".text\n"
    ".globl gf_cudaemu_switch\n"
    ".hidden gf_cudaemu_switch\n"
    ".type gf_cudaemu_switch, @function\n"
    "gf_cudaemu_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size gf_cudaemu_switch, .-gf_cudaemu_switch\n");

struct context {
    void *sp;
};
static void context_make(context *c, char *stack, size_t size, void (*entry)())
{
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = NULL;            /* entry's return address: it never returns */
    *--sp = (void *)entry;   /* where the first switch's ret lands */
    for (int i = 0; i < 6; i++)
        *--sp = NULL;        /* rbp rbx r12-r15 */
    c->sp = sp;
}
static void context_swap(context *save, context *load)
{
    gf_cudaemu_switch(&save->sp, load->sp);
}
#else
struct context {
    ucontext_t uc;
};
static void context_make(context *c, char *stack, size_t size, void (*entry)())
{
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = NULL;
    makecontext(&c->uc, entry, 0);
}
static void context_swap(context *save, context *load)
{
    swapcontext(&save->uc, &load->uc);
}
#endif

struct fiber {
    context ctx;
    char *stack;
    size_t stack_size;
    unsigned tid;
    bool finished;
#ifdef EMU_TSAN
    void *tsan;
#endif
};

constexpr size_t FIBER_STACK = 256 << 10;

struct block_runner {
    context sched;
#ifdef EMU_TSAN
    void *tsan_sched;
#endif
#ifdef EMU_ASAN
    const void *sched_bottom = NULL;
    size_t sched_size = 0;
#endif
    std::vector<fiber *> all, idle, parked;
    fiber *current = NULL;
    const std::function<void()> *body = NULL;
    unsigned threads = 0, started = 0;
    bool reverse = false;
    /* A block's shared memory, 48 KiB as on CUDA: the dynamic part (extern
     * __shared__) first, then each static __shared__ array in turn. */
    std::vector<unsigned char> arena = std::vector<unsigned char>(48 * 1024);
    size_t arena_used = 0;
    unsigned long long block_serial = 0;
    bool trapped = false; /* a thread called __trap(): the grid stops */

    ~block_runner()
    {
        for (fiber *f : all) {
#ifdef EMU_TSAN
            __tsan_destroy_fiber(f->tsan);
#endif
            munmap(f->stack, f->stack_size);
            delete f;
        }
    }

    fiber *get_fiber()
    {
        if (!idle.empty()) {
            fiber *f = idle.back();
            idle.pop_back();
            return f;
        }
        fiber *f = new fiber();
        f->stack_size = FIBER_STACK;
        f->stack = (char *)mmap(NULL, f->stack_size, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
        if (f->stack == MAP_FAILED)
            violation("cudaemu: no memory for a fiber stack");
#ifdef EMU_TSAN
        f->tsan = __tsan_create_fiber(0);
#endif
        all.push_back(f);
        return f;
    }

    void set_thread(unsigned t)
    {
        thread_idx.x = t % block_dim.x;
        thread_idx.y = t / block_dim.x % block_dim.y;
        thread_idx.z = t / (block_dim.x * block_dim.y);
    }

    void resume(fiber *f)
    {
        current = f;
        set_thread(f->tid);
#ifdef EMU_ASAN
        void *fake = NULL;
        __sanitizer_start_switch_fiber(&fake, f->stack, f->stack_size);
#endif
#ifdef EMU_TSAN
        __tsan_switch_to_fiber(f->tsan, 0);
#endif
        context_swap(&sched, &f->ctx);
#ifdef EMU_ASAN
        __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
        current = NULL;
    }

    void to_scheduler(fiber *f, bool ending)
    {
#ifdef EMU_ASAN
        void *fake = NULL;
        __sanitizer_start_switch_fiber(ending ? NULL : &fake, sched_bottom, sched_size);
#endif
#ifdef EMU_TSAN
        __tsan_switch_to_fiber(tsan_sched, 0);
#endif
        context_swap(&f->ctx, &sched);
#ifdef EMU_ASAN
        __sanitizer_finish_switch_fiber(fake, &sched_bottom, &sched_size);
#endif
        (void)ending;
    }

    static void fiber_main();

    void start(fiber *f)
    {
        f->finished = false;
#ifdef EMU_ASAN
        /* frames a trap abandoned may have left poisoned */
        __asan_unpoison_memory_region(f->stack, f->stack_size);
#endif
        context_make(&f->ctx, f->stack, f->stack_size, fiber_main);
        resume(f); /* fiber_main takes its thread */
        if (f->finished)
            idle.push_back(f);
    }

    /* The next thread to start, or false. */
    bool take(unsigned *t)
    {
        if (started == threads)
            return false;
        *t = reverse ? threads - 1 - started : started;
        started++;
        return true;
    }

    void run_block(const std::function<void()> &fn, unsigned n, bool rev)
    {
        body = &fn;
        threads = n;
        started = 0;
        reverse = rev;
        parked.clear();
        while (started < threads && !trapped)
            start(get_fiber());
        for (int phase = 1; !parked.empty() && !trapped; phase++) {
            /* Thread order alternates per phase, and per block. */
            std::vector<fiber *> waiting;
            waiting.swap(parked);
            std::sort(waiting.begin(), waiting.end(),
                      [](const fiber *a, const fiber *b) { return a->tid < b->tid; });
            if ((phase + (int)rev) % 2 == 1)
                std::reverse(waiting.begin(), waiting.end());
            for (size_t i = 0; i < waiting.size(); i++) {
                resume(waiting[i]);
                if (waiting[i]->finished)
                    idle.push_back(waiting[i]);
                if (trapped) { /* the other threads are abandoned */
                    idle.insert(idle.end(), waiting.begin() + (long)i + 1, waiting.end());
                    break;
                }
            }
        }
        if (trapped) {
            idle.insert(idle.end(), parked.begin(), parked.end());
            parked.clear();
        }
    }

    void barrier()
    {
        fiber *f = current;
        if (!f)
            violation("__syncthreads outside a kernel");
        parked.push_back(f);
        to_scheduler(f, false);
    }
};

GF_CUDAEMU_TLS block_runner *runner;

block_runner &get_runner()
{
    if (!runner) {
        runner = new block_runner();
#ifdef EMU_TSAN
        runner->tsan_sched = __tsan_get_current_fiber();
#endif
    }
    return *runner;
}

void release_runner()
{
    delete runner;
    runner = NULL;
}

void block_runner::fiber_main()
{
    block_runner &r = *runner;
    fiber *f = r.current;
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(NULL, &r.sched_bottom, &r.sched_size);
#endif
    unsigned t;
    while (r.take(&t)) {
        f->tid = t;
        r.set_thread(t);
        try {
            (*r.body)();
        } catch (const trap_signal &) {
            r.trapped = true;
            r.started = r.threads;
        }
    }
    f->finished = true;
    r.to_scheduler(f, true);
    violation("cudaemu: a finished fiber was resumed");
}

void run_grid(int device, dim3 grid, dim3 block, size_t shared,
              const std::function<void()> &body)
{
    block_runner &r = get_runner();
    r.trapped = false;
    grid_dim = grid;
    block_dim = block;
    const unsigned n = block.x * block.y * block.z;
    uint64_t linear = 0;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++, linear++) {
                block_idx = uint3{x, y, z};
                /* 0x7f7f7f7f: 3.4e38 as a float, huge as an int; a sum or a
                 * max that reads a value no thread wrote goes wrong */
                memset(r.arena.data(), 0x7f, shared);
                r.arena_used = shared;
                r.block_serial++;
                r.run_block(body, n, linear % 2 == 1);
                if (r.trapped) { /* CUDA: the context is lost, every later call fails */
                    std::lock_guard<std::mutex> lk(mu);
                    sticky[device] = cudaErrorLaunchFailure;
                    changed.notify_all();
                    return;
                }
            }
}

}  // namespace

void syncthreads()
{
    if (!runner)
        violation("__syncthreads outside a kernel");
    runner->barrier();
}

void *shared_site::get(size_t bytes)
{
    if (!runner || !runner->current)
        violation("__shared__ outside a kernel");
    block_runner &r = *runner;
    if (block != r.block_serial) {
        const size_t at = (r.arena_used + 15) & ~(size_t)15;
        if (at > r.arena.size() || bytes > r.arena.size() - at)
            violation("over 48 KiB of shared memory in one block");
        ptr = r.arena.data() + at;
        memset(ptr, 0x7f, bytes);
        r.arena_used = at + bytes;
        block = r.block_serial;
    }
    return ptr;
}

void trap()
{
    if (!runner || !runner->current)
        violation("__trap outside a kernel");
    throw trap_signal{};
}

void *dynamic_shared()
{
    if (!runner || !runner->current)
        violation("extern __shared__ outside a kernel");
    return runner->arena.data();
}

unsigned long long globaltimer_ns()
{
    /* Spin kernels poll this: sleep a little so a 2-core machine is not
     * burnt on busy-waiting. */
    struct timespec nap = {0, 20000}, ts;
    nanosleep(&nap, NULL);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

void *kernel_pointer(const void *p)
{
    std::unique_lock<std::mutex> lk(mu);
    return host_view(p);
}

void launch(const char *name, dim3 grid, dim3 block, size_t shared, cudaStream_t stream,
            std::function<void()> body)
{
    enter(name);
    if (!have_devices()) {
        fail(cudaErrorNoDevice);
        return;
    }
    const uint64_t threads = (uint64_t)block.x * block.y * block.z;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 ||
        grid.z > 65535 || threads == 0 || threads > 1024 || block.z > 64 || shared > 48 * 1024) {
        fail(cudaErrorInvalidConfiguration);
        return;
    }
    std::unique_lock<std::mutex> lk(mu);
    CUstream_st *s = resolve(stream);
    if (!s) {
        fail(cudaErrorInvalidResourceHandle);
        return;
    }
    const int device = s->device;
    enqueue(s, op{[device, grid, block, shared, body](cudaError_t) {
                      run_grid(device, grid, block, shared, body);
                  },
                  WORK});
    settle(lk, s);
}

}  // namespace gf_cudaemu

using namespace gf_cudaemu;

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

static cudaError_t sticky_of(int device)
{
    std::lock_guard<std::mutex> lk(mu);
    return sticky[device];
}

extern "C" {

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
#define NAME(x) case x: return #x;
    NAME(cudaSuccess)
    NAME(cudaErrorInvalidValue)
    NAME(cudaErrorMemoryAllocation)
    NAME(cudaErrorInitializationError)
    NAME(cudaErrorInvalidConfiguration)
    NAME(cudaErrorInvalidMemcpyDirection)
    NAME(cudaErrorInsufficientDriver)
    NAME(cudaErrorInvalidDeviceFunction)
    NAME(cudaErrorNoDevice)
    NAME(cudaErrorInvalidDevice)
    NAME(cudaErrorInvalidResourceHandle)
    NAME(cudaErrorNotReady)
    NAME(cudaErrorIllegalAddress)
    NAME(cudaErrorLaunchFailure)
    NAME(cudaErrorNotPermitted)
    NAME(cudaErrorNotSupported)
    NAME(cudaErrorUnknown)
#undef NAME
    }
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    default: return "unknown error (cudaemu)";
    }
}

cudaError_t cudaGetLastError(void)
{
    if (cudaError_t fault = have_devices() ? sticky_of(current_device) : cudaSuccess)
        return fault; /* sticky: never cleared */
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    if (cudaError_t fault = have_devices() ? sticky_of(current_device) : cudaSuccess)
        return fault;
    return last_error;
}

cudaError_t cudaDriverGetVersion(int *v)
{
    enter(__func__);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    enter(__func__);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    enter(__func__);
    *count = cfg().devices > 0 ? cfg().devices : 0;
    return have_devices() ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaGetDevice(int *device)
{
    ENTER_RELEASE();
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    ENTER_RELEASE();
    if (device < 0 || device >= cfg().devices || device >= 64)
        return fail(cudaErrorInvalidDevice);
    current_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
    ENTER();
    if (device < 0 || device >= cfg().devices)
        return fail(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cudaemu %d (CPU emulation, not a GPU)", device);
    p->totalGlobalMem = cfg().device_bytes;
    p->sharedMemPerBlock = 48 * 1024;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 1;
    p->asyncEngineCount = 1;
    p->pciBusID = device;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *bus_id, int len, int device)
{
    ENTER();
    if (device < 0 || device >= cfg().devices)
        return fail(cudaErrorInvalidDevice);
    snprintf(bus_id, (size_t)len, "0000:%02x:00.0", device);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    ENTER();
    std::unique_lock<std::mutex> lk(mu);
    drain_device(lk, current_device);
    return fail(sticky[current_device]); /* a fault in what it waited for */
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    ENTER();
    std::unique_lock<std::mutex> lk(mu);
    *total_bytes = cfg().device_bytes;
    *free_bytes = cfg().device_bytes - device_used[current_device];
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t size)
{
    ENTER();
    if (!ptr)
        return fail(cudaErrorInvalidValue);
    std::unique_lock<std::mutex> lk(mu);
    const size_t charged = (size + 255) & ~(size_t)255;
    if (charged > cfg().device_bytes - device_used[current_device]) {
        *ptr = NULL;
        return fail(cudaErrorMemoryAllocation);
    }
    void *p = NULL;
    if (posix_memalign(&p, 256, size ? size : 1) != 0)
        return fail(cudaErrorMemoryAllocation);
    memset(p, 0xff, size);
    const uintptr_t d = device_address(size);
    allocations[d] = allocation{size, DEVICE_MEM, current_device, (unsigned char *)p};
    device_used[current_device] += charged;
    *ptr = (void *)d;
    return cudaSuccess;
}

cudaError_t cudaFree(void *ptr)
{
    ENTER_RELEASE();
    if (!ptr)
        return cudaSuccess;
    std::unique_lock<std::mutex> lk(mu);
    auto it = allocations.find((uintptr_t)ptr);
    if (it == allocations.end() || it->second.kind != DEVICE_MEM)
        violation("cudaFree(%p): not a pointer cudaMalloc returned", ptr);
    const int dev = it->second.device;
    drain_device(lk, dev); /* cudaFree synchronises the device */
    it = allocations.find((uintptr_t)ptr);
    device_used[dev] -= (it->second.size + 255) & ~(size_t)255;
    free(it->second.bytes);
    allocations.erase(it);
    return fail(sticky[current_device]); /* released, and still failed */
}

cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    ENTER();
    if (!ptr || (flags & ~0x7u))
        return fail(cudaErrorInvalidValue);
    std::unique_lock<std::mutex> lk(mu);
    if (cfg().pinned_max >= 0 && size > (size_t)cfg().pinned_max - pinned_used) {
        *ptr = NULL;
        return fail(cudaErrorMemoryAllocation);
    }
    void *p = NULL;
    if (posix_memalign(&p, 4096, size ? size : 1) != 0)
        return fail(cudaErrorMemoryAllocation);
    allocations[(uintptr_t)p] = allocation{size, PINNED_MEM, current_device, (unsigned char *)p};
    pinned_used += size;
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

cudaError_t cudaFreeHost(void *ptr)
{
    ENTER_RELEASE();
    if (!ptr)
        return cudaSuccess;
    std::unique_lock<std::mutex> lk(mu);
    auto it = allocations.find((uintptr_t)ptr);
    if (it == allocations.end() || it->second.kind != PINNED_MEM)
        violation("cudaFreeHost(%p): not a pointer cudaHostAlloc returned", ptr);
    drain_device(lk, it->second.device);
    it = allocations.find((uintptr_t)ptr);
    pinned_used -= it->second.size;
    allocations.erase(it);
    free(ptr);
    return fail(sticky[current_device]); /* released, and still failed */
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    ENTER();
    std::unique_lock<std::mutex> lk(mu);
    CUstream_st *s = resolve(stream);
    if (!s)
        return fail(cudaErrorInvalidResourceHandle);
    cudaError_t e = check_copy(dst, src, n, kind);
    if (e != cudaSuccess || n == 0)
        return fail(e);
    const bool host_src = !is_device(src, n), host_dst = !is_device(dst, n);
    void *to = host_view(dst);
    const void *from = host_view(src);
    if (host_src && !is_pinned(src, n)) {
        /* Pageable source: CUDA stages it before returning, so the caller
         * may reuse it at once. */
        std::shared_ptr<unsigned char> staged(new unsigned char[n],
                                              std::default_delete<unsigned char[]>());
        memcpy(staged.get(), src, n);
        enqueue(s, op{[to, staged, n](cudaError_t) { memcpy(to, staged.get(), n); }, WORK});
    } else {
        enqueue(s, op{[to, from, n](cudaError_t) { memcpy(to, from, n); }, WORK});
    }
    if (host_dst && !is_pinned(dst, n))
        drain(lk, s); /* pageable destination: returns when the copy is done */
    settle(lk, s);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    ENTER();
    cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, 0);
    if (e != cudaSuccess)
        return e;
    std::unique_lock<std::mutex> lk(mu);
    drain(lk, resolve(0));
    return fail(sticky[current_device]); /* a fault in what it waited for */
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t n, cudaStream_t stream)
{
    ENTER();
    std::unique_lock<std::mutex> lk(mu);
    CUstream_st *s = resolve(stream);
    if (!s)
        return fail(cudaErrorInvalidResourceHandle);
    if (n == 0)
        return cudaSuccess;
    if (!is_device(ptr, n))
        violation("cudaMemset of %zu bytes at %p: not device memory", n, ptr);
    void *at = host_view(ptr);
    enqueue(s, op{[at, value, n](cudaError_t) { memset(at, value, n); }, WORK});
    settle(lk, s);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *ptr, int value, size_t n)
{
    ENTER();
    cudaError_t e = cudaMemsetAsync(ptr, value, n, 0);
    if (e != cudaSuccess)
        return e;
    std::unique_lock<std::mutex> lk(mu);
    drain(lk, resolve(0));
    return fail(sticky[current_device]); /* a fault in what it waited for */
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
    ENTER();
    if (!stream || (flags & ~1u))
        return fail(cudaErrorInvalidValue);
    std::unique_lock<std::mutex> lk(mu);
    CUstream_st *s = new_stream(current_device, flags, false);
    streams.insert(s);
    *stream = s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream)
{
    return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    ENTER_RELEASE();
    std::unique_lock<std::mutex> lk(mu);
    if (!stream || !streams.count(stream))
        return fail(cudaErrorInvalidResourceHandle);
    /* CUDA returns at once and lets queued work finish: so does the
     * worker, which then retires the stream. */
    streams.erase(stream);
    stream->destroyed = true;
    changed.notify_all();
    return fail(sticky[current_device]); /* released, and still failed */
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    ENTER();
    std::unique_lock<std::mutex> lk(mu);
    CUstream_st *s = resolve(stream);
    if (!s)
        return fail(cudaErrorInvalidResourceHandle);
    drain(lk, s);
    return fail(sticky[current_device]); /* a fault in what it waited for */
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    ENTER();
    std::unique_lock<std::mutex> lk(mu);
    CUstream_st *s = resolve(stream);
    if (!s)
        return fail(cudaErrorInvalidResourceHandle);
    return s->finished >= s->queued ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void *user,
                                  unsigned int flags)
{
    ENTER();
    if (!callback || flags != 0)
        return fail(cudaErrorInvalidValue);
    std::unique_lock<std::mutex> lk(mu);
    CUstream_st *s = resolve(stream);
    if (!s)
        return fail(cudaErrorInvalidResourceHandle);
    enqueue(s, op{[stream, callback, user](cudaError_t fault) {
                      in_callback = true;
                      callback(stream, fault, user);
                      in_callback = false;
                  },
                  CALLBACK});
    settle(lk, s);
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    ENTER();
    if (!event || (flags & ~0x7u))
        return fail(cudaErrorInvalidValue);
    std::unique_lock<std::mutex> lk(mu);
    auto e = std::make_shared<CUevent_st>();
    e->flags = flags;
    events[e.get()] = e;
    *event = e.get();
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    ENTER_RELEASE();
    std::unique_lock<std::mutex> lk(mu);
    if (!events.erase(event))
        return fail(cudaErrorInvalidResourceHandle);
    /* queued records and waits keep it alive */
    return fail(sticky[current_device]); /* released, and still failed */
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    ENTER();
    std::unique_lock<std::mutex> lk(mu);
    std::shared_ptr<CUevent_st> e = event_of(event);
    CUstream_st *s = resolve(stream);
    if (!e || !s)
        return fail(cudaErrorInvalidResourceHandle);
    const uint64_t gen = ++e->recorded;
    enqueue(s, op{[e, gen](cudaError_t) {
                      std::lock_guard<std::mutex> g(mu);
                      if (gen > e->reached) {
                          e->reached = gen;
                          e->reached_ms = now_ms();
                      }
                      changed.notify_all();
                  },
                  RECORD});
    settle(lk, s);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
    ENTER();
    std::unique_lock<std::mutex> lk(mu);
    std::shared_ptr<CUevent_st> e = event_of(event);
    if (!e)
        return fail(cudaErrorInvalidResourceHandle);
    return e->reached >= e->recorded ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    ENTER();
    std::unique_lock<std::mutex> lk(mu);
    std::shared_ptr<CUevent_st> e = event_of(event);
    if (!e)
        return fail(cudaErrorInvalidResourceHandle);
    const uint64_t gen = e->recorded;
    changed.wait(lk, [&e, gen] { return e->reached >= gen; });
    return fail(sticky[current_device]); /* a fault in what it waited for */
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    ENTER();
    if (flags != 0)
        return fail(cudaErrorInvalidValue);
    std::unique_lock<std::mutex> lk(mu);
    std::shared_ptr<CUevent_st> e = event_of(event);
    CUstream_st *s = resolve(stream);
    if (!e || !s)
        return fail(cudaErrorInvalidResourceHandle);
    const uint64_t gen = e->recorded; /* the record this call sees, as CUDA's */
    enqueue(s, wait_op([e, gen] { return e->reached >= gen; }));
    settle(lk, s);
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    ENTER();
    std::unique_lock<std::mutex> lk(mu);
    std::shared_ptr<CUevent_st> a = event_of(start), b = event_of(end);
    if (!a || !b || ((a->flags | b->flags) & cudaEventDisableTiming))
        return fail(cudaErrorInvalidResourceHandle);
    if (!a->recorded || !b->recorded)
        return fail(cudaErrorInvalidResourceHandle);
    if (a->reached < a->recorded || b->reached < b->recorded)
        return fail(cudaErrorNotReady);
    *ms = (float)(b->reached_ms - a->reached_ms);
    return cudaSuccess;
}

cudaError_t gf_cudaemu_func_attributes(struct cudaFuncAttributes *attr, const void *func)
{
    ENTER();
    if (!attr || !func)
        return fail(cudaErrorInvalidDeviceFunction);
    memset(attr, 0, sizeof *attr);
    attr->maxThreadsPerBlock = 1024;
    attr->ptxVersion = 90;
    attr->binaryVersion = 90;
    return cudaSuccess;
}

}  /* extern "C" */
