/* cudaemu: streams and events. Each stream has a worker thread that runs
 * its queue in order; the host threads that call these queue work and
 * wait on counters, all under mu.
 * - The legacy default stream (0) of a device waits for the work queued
 *   before it on every blocking stream of that device, and they wait for
 *   it: CUDA's implicit synchronisation. Non-blocking streams skip both.
 * - An event is a pair of counters: how many times it has been recorded,
 *   and the newest of those records the device has reached.
 * - GF_CUDAEMU_LAZY_DEFAULT: the legacy stream's worker holds each copy,
 *   memset and kernel (cfg().lazy_ms) until a host call or another stream
 *   waits for it (hurry): CUDA orders that work with nothing on a
 *   non-blocking stream, and a GPU may well run it after their kernels. */
#include "emu_internal.h"

#include <time.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

struct CUevent_st {
    unsigned flags;
    uint64_t recorded = 0, reached = 0;
    double reached_ms = 0;
    CUstream_st *stream = nullptr; /* of the newest record (streams are never freed) */
};

namespace gf_cudaemu {
namespace {

double now_ms()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

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
CUstream_st *legacy_streams[MAX_DEVICES];

/* Whether any device has faulted (mu held): waits give up then. */
bool sticky_any()
{
    for (cudaError_t e : sticky)
        if (e)
            return true;
    return false;
}

void worker_main(CUstream_st *s)
{
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
        changed.wait(lk, [s] { return !s->queue.empty() || s->destroyed; });
        if (s->queue.empty())
            break; /* destroyed and drained */
        op o = std::move(s->queue.front());
        s->queue.pop_front();
        if (s->legacy && o.kind == WORK && cfg().lazy_ms > 0) {
            const uint64_t pos = s->finished + 1;
            changed.wait_for(lk, std::chrono::milliseconds(cfg().lazy_ms),
                             [s, pos] { return s->force >= pos || sticky_any(); });
        }
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

/* A wait op: runs on s's worker until pred holds. */
op wait_op(std::function<bool()> pred)
{
    return op{[pred](cudaError_t) {
                  std::unique_lock<std::mutex> lk(mu);
                  changed.wait(lk, [&pred] { return pred() || sticky_any(); });
              },
              WAIT};
}

}  // namespace

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

/* Queues o on s after the implicit dependencies of the legacy default
 * stream. */
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
            hurry(l, l->queued); /* a blocking stream waits for it */
            s->queue.push_back(wait_op(reached(l, l->queued)));
            s->queued++;
        }
    }
    s->queue.push_back(std::move(o));
    s->queued++;
    changed.notify_all();
}

void hurry(CUstream_st *s, uint64_t n)
{
    if (s && n > s->force) {
        s->force = n;
        changed.notify_all();
    }
}

void drain(std::unique_lock<std::mutex> &lk, CUstream_st *s)
{
    const uint64_t n = s->queued;
    hurry(s, n);
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
    if (CUstream_st *l = legacy_streams[device]) {
        all.emplace_back(l, l->queued);
        hurry(l, l->queued);
    }
    changed.wait(lk, [&all] {
        for (auto &p : all)
            if (p.first->finished < p.second)
                return false;
        return true;
    });
}

}  // namespace gf_cudaemu

using namespace gf_cudaemu;

extern "C" {

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

/* One priority level in effect, reported as CUDA reports a device's
 * range: least 0, greatest -1 (lower is higher). Work is not reordered by
 * priority here; the range is checked as CUDA checks it. */
cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
    ENTER();
    if (least)
        *least = 0;
    if (greatest)
        *greatest = -1;
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *stream, unsigned int flags, int priority)
{
    /* CUDA clamps a priority outside the range. */
    (void)priority;
    return cudaStreamCreateWithFlags(stream, flags);
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
    e->stream = s;
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
    if (e->stream && e->stream->legacy)
        hurry(e->stream, e->stream->queued);
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
    if (e->stream && e->stream->legacy)
        hurry(e->stream, e->stream->queued);
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

}  /* extern "C" */
