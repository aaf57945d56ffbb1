/* cudaemu: kernels. A launch queues its grid on the stream; the stream's
 * worker runs it block by block. The threads of a block are fibers on
 * that worker: a thread runs until it ends or reaches __syncthreads, and
 * a barrier opens when every thread of the block has reached it or ended.
 * Odd blocks and odd barrier phases run their threads in reverse order,
 * so code that needs a barrier it lacks tends to compute something else.
 * Each block has its own shared memory, poisoned when it starts. */
#include "emu_internal.h"

#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#include <algorithm>
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
#ifdef EMU_ASAN
            /* ASan leaves a region's shadow as it was at munmap: a shard
             * buffer mmap()ed here later read as this stack's redzones. */
            __asan_unpoison_memory_region(f->stack, f->stack_size);
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

void release_runner()
{
    delete runner;
    runner = NULL;
}

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
