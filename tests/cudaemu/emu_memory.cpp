/* cudaemu: memory: device and pinned allocations, the device address
 * window, the host bytes behind a device address, copies and memsets.
 * Any host thread calls these; all state is under mu. Copies and memsets
 * run on a stream's worker, on the host bytes translated at the call.
 *
 * Device memory is host memory from posix_memalign, of exactly the size
 * asked, so ASan sees a kernel or copy that goes past an allocation. Its
 * address, what cudaMalloc returns, lies in a reserved range no thread
 * may touch, so host code that dereferences a device pointer faults as
 * on a GPU; kernel arguments, copies and memsets are translated to the
 * host bytes. Copies and memsets check that their pointers lie inside
 * allocations of the kind the direction says. */
#include "emu_internal.h"

#include <stdlib.h>
#include <sys/mman.h>

#include <map>
#include <memory>

namespace gf_cudaemu {
namespace {

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

size_t device_used[MAX_DEVICES];
size_t pinned_used;

/* The allocation that starts at or before address a, or end(). Under mu. */
std::map<uintptr_t, allocation>::iterator at_or_before(uintptr_t a)
{
    auto it = allocations.upper_bound(a);
    return it == allocations.begin() ? allocations.end() : std::prev(it);
}

/* The allocation holding [p, p + n), or NULL; one it starts in but runs
 * past is misuse. Under mu. */
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

}  // namespace

void *kernel_pointer(const void *p)
{
    std::unique_lock<std::mutex> lk(mu);
    return host_view(p);
}

}  // namespace gf_cudaemu

using namespace gf_cudaemu;

extern "C" {

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

/* Whether cudaMemcpy returns before its copy is done: CUDA's "API
 * synchronization behavior". From pageable host memory to the device it
 * returns once the source is staged; device to device it does not wait
 * at all. Every other direction returns with the copy done. */
static bool returns_early(const void *dst, const void *src, size_t n)
{
    std::unique_lock<std::mutex> lk(mu);
    const bool dd = is_device(dst, n), sd = is_device(src, n);
    return dd && (sd || !is_pinned(src, n));
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    ENTER();
    cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, 0);
    if (e != cudaSuccess)
        return e;
    /* Lazy default stream: only what CUDA promises. Otherwise the copy is
     * done on return, whatever its direction. */
    if (cfg().lazy_ms > 0 && n > 0 && returns_early(dst, src, n))
        return cudaSuccess;
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
    if (e != cudaSuccess || cfg().lazy_ms > 0)
        return e; /* lazy: as CUDA's on device memory, it does not wait */
    std::unique_lock<std::mutex> lk(mu);
    drain(lk, resolve(0));
    return fail(sticky[current_device]); /* a fault in what it waited for */
}

}  /* extern "C" */
