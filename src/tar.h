/* Tar archive scanner: finds the members of one shard and where their data
 * lies, for random access later. Headers are untrusted input. */
#ifndef GF_TAR_H
#define GF_TAR_H

#include "common.h"

/* Caps on what a header may make us allocate or read. */
#define GF__TAR_PAX_MAX ((size_t)1 << 20)      /* pax 'x' extended header */
#define GF__TAR_LONGNAME_MAX ((size_t)1 << 16) /* GNU 'L' long name */

#define GF__TAR_BLOCK 512u /* a header block; members' data starts on one */

typedef struct gf__tar gf__tar; /* one scan in progress */

/* Where and why a scan stopped on a malformed archive (gf__tar_scan's
 * GF_EDATASET): the offset of the damage (the header block, or the byte a
 * read failed at), a sample-error code saying what kind (GF_EEMPTY: zero
 * bytes or no member at all; GF_ETRUNC: the file ends inside a header or
 * a member; GF_EIO: a read failed; GF_ECORRUPT: a header is not a valid
 * one), the reason without the "shard: offset N: " prefix, and whether the
 * damaged thing was a member header the callback never saw. */
typedef struct gf__tar_damage {
    uint64_t offset;
    int code;
    int header_lost;
    char reason[160];
} gf__tar_damage;

typedef struct gf__tar_member {
    const char *name;       /* NUL-terminated, leading "./" removed; only a key,
                               never a file-system path */
    size_t name_len;        /* strlen(name), except in a skipped member whose
                               (pax) name holds a NUL: skip says so */
    uint64_t header_offset; /* its (first) header block */
    uint64_t offset, size;  /* its data: size bytes at offset, inside the file */
    char type;              /* typeflag ('0' for a regular file) */
    const char *skip;       /* NULL: a regular file with a safe name; else
                               why it cannot be a sample ("a symlink",
                               "unsafe name (..)", ...) */
} gf__tar_member;

/* Called for each member that is not a metadata header (pax 'x'/'g', GNU
 * 'L'/'K'), in archive order. m and its name are valid during the call.
 * Return 0 to go on, a negative GF_E* to stop the scan with it. */
typedef int (*gf__tar_member_fn)(void *ctx, gf__tar *t, const gf__tar_member *m);

/* Scans fd (a regular file of file_size bytes; shard names it in
 * messages). Stops at two zero blocks or at end of file on a block
 * boundary. A malformed archive (zero bytes or no member, bad checksum, a
 * non-octal size, a member or header past the end of the file, a bad pax
 * record, an oversized pax header or long name, a failed read) fails with
 * GF_EDATASET, why = "shard: offset N: reason" and, if dmg is not NULL,
 * *dmg filled; the members fn saw before were all wholly before the
 * damage. Archive-level oddities that do not stop the scan (a lone zero
 * block) add to *warnings and, if warning[0] is 0, are described there.
 * Returns 0, GF_EDATASET, GF_ENOMEM or what fn returned. */
int gf__tar_scan(int fd, uint64_t file_size, const char *shard, gf__tar_member_fn fn,
                 void *ctx, uint64_t *warnings, char *warning, size_t warning_len,
                 gf__tar_damage *dmg, char *why, size_t why_len);

/* From inside fn: copies n bytes at offset off of the file being scanned
 * (e.g. a small member's data) into dst. off + n must lie within the file.
 * Returns 0 or GF_EDATASET with why (and the scan's damage record: fn
 * returns the error, and the scan stops with it). */
int gf__tar_read(gf__tar *t, uint64_t off, void *dst, size_t n, char *why, size_t why_len);

/* Whether the header block h (the GF__TAR_BLOCK bytes just before a
 * member's data, read with it) announces the member an index says lies
 * there: a valid checksum, a regular file (or sparse: refused by name),
 * size bytes, and name (its whole member name) as the block spells it:
 * the ustar prefix/name; a name longer than the block holds (a pax path
 * or GNU long name came before) must start with the block's name when its
 * 100 bytes are full ("./" first stripped from both, as the scan does).
 * Returns 0, or GF_ECORRUPT with why saying what disagreed. gf__tar_scan
 * runs it on each member's own block and skips one it refuses, so what a
 * scan indexes every read can check. */
int gf__tar_member_check(const uint8_t *h, const char *name, size_t name_len, uint64_t size,
                         char *why, size_t why_len);

#endif
