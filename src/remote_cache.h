/* The local cache of whole remote shards (src/remote_cache.c), off unless
 * settings.cache_dir names a directory. A shard is a file there named by
 * its URL and ETag, so a changed object is never served from an older
 * copy; written by a thread of the cache's own (write, fsync, rename: a
 * file under its final name is whole), evicted least recently used first
 * to stay under the byte cap. A cache that cannot be written (read-only,
 * full, a cap under one shard) only stops caching: shards stream as
 * without it, and `warning` says why once. Opened on gf_open's thread,
 * used on gf-control; _counts and _warning from any thread. */
#ifndef GF_REMOTE_CACHE_H
#define GF_REMOTE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gf__shard_cache gf__shard_cache;

/* dir is created if missing (one level); cap_bytes 0: 80% of the space
 * free on its file system now. Never fails but for memory: a directory
 * that cannot be used gives a cache that caches nothing, with the warning
 * set. urls[0, n) are the shards' URLs (borrowed; they outlive the cache). */
int gf__shard_cache_open(gf__shard_cache **out, const char *dir, uint64_t cap_bytes,
                         const char *const *urls, uint32_t n);
/* Waits for the writes queued (at most QUEUE_MAX shards), frees. NULL is
 * a no-op. */
void gf__shard_cache_close(gf__shard_cache *c);

/* Whether some copy of shard k was in the directory at open, or written
 * since: worth a request that learns its ETag before fetching it whole. */
bool gf__shard_cache_may_hold(const gf__shard_cache *c, uint32_t k);
/* Maps shard k's copy for etag, when there is one of `size` bytes (0:
 * any size) whose checksum holds (checked whole, here). The mapping is read-only and stays valid while mapped,
 * whatever happens to the file (eviction unlinks; nothing is rewritten in
 * place). Returns true with *data, *len and *crc (its CRC32C, as
 * checked) set (a hit, counted), else false. */
bool gf__shard_cache_map(gf__shard_cache *c, uint32_t k, const char *etag, uint64_t size,
                         uint8_t **data, size_t *len, uint32_t *crc);
void gf__shard_cache_unmap(uint8_t *data, size_t len);
/* A shard was fetched whole with the cache on (gf_stats' miss). */
void gf__shard_cache_count_miss(gf__shard_cache *c);
/* Queues shard k's data[0, len) to be written. Returns 0 when queued:
 * the caller keeps the bytes as they are until gf__shard_cache_done
 * returns k; 1 when the queue is full (QUEUE_MAX: offer it again later);
 * -1 when the cache will not take it (no ETag, over the cap, writes
 * failed). */
int gf__shard_cache_put(gf__shard_cache *c, uint32_t k, const char *etag, const uint8_t *data,
                        size_t len);
/* Shards whose write finished (or was given up), at most max, into ks:
 * their bytes are the caller's again. */
unsigned gf__shard_cache_done(gf__shard_cache *c, uint32_t *ks, unsigned max);
/* fn(ctx) is called (on the writer, under its lock: it must only signal)
 * each time a shard is done; NULL: not. */
void gf__shard_cache_set_notify(gf__shard_cache *c, void (*fn)(void *), void *ctx);

typedef struct gf__cache_counts {
    uint64_t hits, misses, written, write_bytes;
} gf__cache_counts;
void gf__shard_cache_counts(gf__shard_cache *c, gf__cache_counts *out);
/* "" until something made the cache stop caching, or a copy failed its
 * checksum (dropped, fetched again); then the first of those, naming the
 * directory (and the copy and its URL). Copied into out (len bytes). */
void gf__shard_cache_warning(gf__shard_cache *c, char *out, size_t len);
/* Waits until nothing is queued or being written (a restart, before the
 * shard buffers change hands). */
void gf__shard_cache_flush(gf__shard_cache *c);
/* gf-control (which queues): shards queued whose write has not finished. */
unsigned gf__shard_cache_unwritten(const gf__shard_cache *c);

#endif
