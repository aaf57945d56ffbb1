/*
 * Tar scanner for WebDataset-style shards: walks the 512-byte header blocks
 * of one archive and reports each member's name and the offset and size of
 * its data, so that samples can later be read at random with one pread or
 * one io_uring read each.
 *
 * Why our own parser and not libarchive: libarchive is a streaming API; it
 * hands out member data through read callbacks and does not expose the file
 * offset of a member's data, which is the one thing random access needs.
 * And the headers are untrusted input: a parser of ~400 lines that knows
 * only the formats shards use (ustar, pax 'x' path/size, GNU 'L' long
 * names) is small enough to audit, never allocates more than a fixed cap
 * per header, and never turns a member name into a file-system path.
 *
 * What it accepts:
 *  - ustar / GNU / v7 headers; the checksum is verified (the unsigned sum
 *    with the checksum field read as spaces; the signed-char sum some old
 *    tars wrote is accepted too);
 *  - size as octal digits (leading spaces allowed, ended by NUL, space or
 *    the field's end; an empty field is 0) or GNU base-256 (positive only);
 *    fields we do not use (mode, uid, mtime, ...) are not parsed;
 *  - names: a pax 'x' path= record, else a GNU 'L' long name, else the
 *    ustar prefix + '/' + name (prefix only with the POSIX "ustar\0" magic:
 *    GNU keeps other fields there); pax size= overrides the header's size;
 *  - pax 'g' global headers and GNU 'K' long link names are skipped;
 *  - the end: two zero blocks, or end of file on a block boundary. A lone
 *    zero block followed by more headers is a warning, not the end (as GNU
 *    tar does).
 * Links, devices, FIFOs and directories have no data blocks (whatever their
 * size field says, as GNU tar and Python's tarfile read them); GNU sparse
 * files (type 'S', its map's extension blocks skipped, or pax GNU.sparse.*
 * records) are skipped as sparse; other unknown types are skipped over by
 * their size. Both are reported with a
 * skip reason, as are names that are absolute or hold a ".." component,
 * and members whose own header block does not spell the name or size a
 * pax or GNU header gave them (gf__tar_member_check, which every read
 * runs: what it refuses is never indexed).
 *
 * Reads go through a small window: a header miss just past the window
 * doubles its size (up to 256 KiB), so runs of tiny members cost one
 * pread per window; a far jump (a large member skipped) drops it back to
 * 4 KiB, so big images are not read at index time.
 *
 * Run by the thread that opens the data set (dataset_shards.c), once per
 * shard; a scan's state is its own.
 */
#include "tar.h"

#include "magic.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK 512u
#define WIN_MIN ((size_t)4 << 10)
#define WIN_MAX ((size_t)256 << 10)

struct gf__tar {
    int fd;
    uint64_t file_size;
    const char *shard;
    uint8_t *win;        /* WIN_MAX bytes */
    uint64_t win_start;  /* file offset of win[0] */
    size_t win_len;      /* valid bytes */
    size_t win_want;     /* next refill size */
    int in_fn;           /* the member callback runs: it saw the member */
    gf__tar_damage *dmg; /* the caller's, or the scan's own scratch */
};

/* Records the damage at offset `at` and says it in why; GF_EDATASET. */
static int damage(gf__tar *t, int code, uint64_t at, int header_lost, char *why,
                  size_t why_len, const char *fmt, ...)
{
    gf__tar_damage *d = t->dmg;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->reason, sizeof d->reason, fmt, ap);
    va_end(ap);
    d->offset = at;
    d->code = code;
    d->header_lost = header_lost;
    gf__why(why, why_len, "%s: offset %llu: %s", t->shard, (unsigned long long)at, d->reason);
    return GF_EDATASET;
}

static int read_fully(gf__tar *t, uint64_t off, void *dst, size_t n, char *why,
                      size_t why_len)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(t->fd, (uint8_t *)dst + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return damage(t, GF_EIO, off + got, !t->in_fn, why, why_len, "read: %s",
                          strerror(errno));
        if (r == 0)
            return damage(t, GF_ETRUNC, off + got, !t->in_fn, why, why_len,
                          "file shrank while indexing");
        got += (size_t)r;
    }
    return 0;
}

/* Makes [off, off + n) (n <= WIN_MAX, within the file) available in the
 * window; returns a pointer to it or NULL with why. */
static const uint8_t *win_get(gf__tar *t, uint64_t off, size_t n, char *why, size_t why_len)
{
    assert(n <= WIN_MAX && off <= t->file_size && n <= t->file_size - off);
    uint64_t end = t->win_start + t->win_len;
    if (off >= t->win_start && off + n <= end)
        return t->win + (off - t->win_start);
    if (t->win_len && off >= t->win_start && off < end + t->win_want)
        t->win_want = GF__MIN(t->win_want * 2, WIN_MAX); /* dense: read more */
    else
        t->win_want = WIN_MIN;
    size_t want = GF__MAX(t->win_want, n);
    if (want > t->file_size - off)
        want = (size_t)(t->file_size - off);
    if (read_fully(t, off, t->win, want, why, why_len) < 0) {
        t->win_len = 0;
        return NULL;
    }
    t->win_start = off;
    t->win_len = want;
    return t->win;
}

int gf__tar_read(gf__tar *t, uint64_t off, void *dst, size_t n, char *why, size_t why_len)
{
    if (off > t->file_size || n > t->file_size - off)
        return damage(t, GF_ETRUNC, off, !t->in_fn, why, why_len,
                      "read of %zu bytes past the end of the file", n);
    if (n > WIN_MAX / 2)
        return read_fully(t, off, dst, n, why, why_len);
    const uint8_t *p = win_get(t, off, n, why, why_len);
    if (!p)
        return GF_EDATASET;
    memcpy(dst, p, n);
    return 0;
}

/* Octal (or, for GNU, base-256) number in a header field. Returns 0, or -1
 * for a non-octal field, a negative base-256 value or one over 2^63 - 1. */
static int parse_number(const uint8_t *f, size_t len, uint64_t *out)
{
    if (f[0] & 0x80) {
        if (f[0] != 0x80)
            return -1; /* 0xff: negative base-256 */
        uint64_t v = 0;
        for (size_t i = 1; i < len; i++) {
            if (v >> 55)
                return -1;
            v = (v << 8) | f[i];
        }
        if (v > (uint64_t)INT64_MAX)
            return -1;
        *out = v;
        return 0;
    }
    size_t i = 0;
    while (i < len && f[i] == ' ')
        i++;
    uint64_t v = 0;
    for (; i < len && f[i] != '\0' && f[i] != ' '; i++) {
        if (f[i] < '0' || f[i] > '7')
            return -1;
        if (v >> 60)
            return -1;
        v = v * 8 + (uint64_t)(f[i] - '0');
    }
    /* After the terminator only NULs or spaces may follow. */
    for (; i < len; i++)
        if (f[i] != '\0' && f[i] != ' ')
            return -1;
    *out = v;
    return 0;
}

static int all_zero(const uint8_t *h)
{
    for (unsigned i = 0; i < BLOCK; i++)
        if (h[i])
            return 0;
    return 1;
}

static int checksum_ok(const uint8_t *h, uint64_t *stored, uint64_t *computed)
{
    if (parse_number(h + 148, 8, stored) < 0)
        return -1;
    /* Every byte summed, then the checksum field's own taken as spaces:
     * branch-free loops the compiler vectorises (a header a member read). */
    uint32_t u = 0;
    int32_t s = 0;
    for (unsigned i = 0; i < BLOCK; i++)
        u += h[i];
    for (unsigned i = 0; i < BLOCK; i++)
        s += (int8_t)h[i];
    for (unsigned i = 148; i < 156; i++) {
        u += (uint32_t)' ' - h[i];
        s += ' ' - (int8_t)h[i];
    }
    *computed = u;
    return *stored == u || (int64_t)*stored == s;
}

/* A growable byte buffer, capped by the caller. */
typedef struct bytes {
    char *p;
    size_t len, cap;
} bytes;

static int bytes_reserve(bytes *b, size_t n)
{
    if (n + 1 > b->cap) {
        char *q = realloc(b->p, n + 1);
        if (!q)
            return GF_ENOMEM;
        b->p = q;
        b->cap = n + 1;
    }
    return 0;
}

static int bytes_set(bytes *b, const void *src, size_t n)
{
    if (bytes_reserve(b, n) < 0)
        return GF_ENOMEM;
    memcpy(b->p, src, n);
    b->p[n] = '\0';
    b->len = n;
    return 0;
}

/* Parses pax records "LEN key=value\n" in p[0, n). Sets *path (pointing
 * into p, which must outlive it) and *size when present. */
static int parse_pax(char *p, size_t n, const char **path, size_t *path_len, int *has_size,
                     uint64_t *size, int *sparse)
{
    size_t pos = 0;
    while (pos < n) {
        if (p[pos] == '\0')
            break; /* NUL padding after the last record */
        size_t rec = 0, i = pos;
        while (i < n && p[i] >= '0' && p[i] <= '9') {
            rec = rec * 10 + (size_t)(p[i] - '0');
            if (rec > n)
                return -1;
            i++;
        }
        if (i == pos || i >= n || p[i] != ' ' || rec > n - pos || rec < i - pos + 3)
            return -1;
        size_t kv = i + 1, end = pos + rec - 1; /* p[end] is the '\n' */
        if (p[end] != '\n')
            return -1;
        char *eq = memchr(p + kv, '=', end - kv);
        if (!eq)
            return -1;
        size_t klen = (size_t)(eq - (p + kv));
        char *val = eq + 1;
        size_t vlen = (size_t)(p + end - val);
        if (klen > 11 && memcmp(p + kv, "GNU.sparse.", 11) == 0)
            *sparse = 1; /* GNU tar's pax sparse formats (0.0, 0.1, 1.0) */
        if ((klen == 4 && memcmp(p + kv, "path", 4) == 0) ||
            (klen == 15 && memcmp(p + kv, "GNU.sparse.name", 15) == 0)) { /* its real name */
            *path = val;
            *path_len = vlen;
        } else if (klen == 4 && memcmp(p + kv, "size", 4) == 0) {
            uint64_t v = 0;
            if (vlen == 0 || vlen > 19)
                return -1;
            for (size_t k = 0; k < vlen; k++) {
                if (val[k] < '0' || val[k] > '9')
                    return -1;
                v = v * 10 + (uint64_t)(val[k] - '0');
            }
            if (v > (uint64_t)INT64_MAX)
                return -1;
            *has_size = 1;
            *size = v;
        }
        pos += rec;
    }
    return 0;
}

/* Why a name cannot be a sample's, or NULL. Names are keys only, but a
 * name that would escape a directory if someone did extract it is a red
 * flag worth counting. */
static const char *name_problem(const char *name, size_t len)
{
    if (len == 0)
        return "empty name";
    if (memchr(name, '\0', len))
        return "NUL byte in name";
    if (name[0] == '/')
        return "absolute name";
    if (name[len - 1] == '/')
        return "name ends in '/'";
    for (size_t i = 0; i < len;) {
        const char *slash = memchr(name + i, '/', len - i);
        size_t cl = slash ? (size_t)(slash - (name + i)) : len - i;
        if (cl == 2 && name[i] == '.' && name[i + 1] == '.')
            return "'..' in name";
        i += cl + 1;
    }
    return NULL;
}

static const char *type_problem(char type)
{
    switch (type) {
    case '0':
    case '\0':
    case '7':
        return NULL;
    case '1':
        return "a hard link";
    case '2':
        return "a symbolic link";
    case '3':
        return "a character device";
    case '4':
        return "a block device";
    case '5':
        return "a directory";
    case '6':
        return "a FIFO";
    case 'S':
        return "a GNU sparse file, not supported (store it whole: tar without --sparse)";
    default:
        return "an unsupported member type";
    }
}

/* Types whose size field does not announce data blocks. */
static int has_no_data(char type)
{
    return type >= '1' && type <= '6';
}

/* What a file that is no tar starts like, for the reason at offset 0. */
static const char *image_kind(const uint8_t *h)
{
    static const char *const names[] = {
        [GF__MAGIC_JPEG] = "a JPEG", [GF__MAGIC_PNG] = "a PNG",   [GF__MAGIC_GIF] = "a GIF",
        [GF__MAGIC_BMP] = "a BMP",   [GF__MAGIC_PSD] = "a PSD",   [GF__MAGIC_PNM] = "a PNM",
        [GF__MAGIC_WEBP] = "a WebP", [GF__MAGIC_TIFF] = "a TIFF",
    };
    int k = gf__magic(h, BLOCK);
    return k == GF__MAGIC_NONE ? NULL : names[k];
}

/* A ustar header's own name: its prefix field, '/', its name field (the
 * prefix only in a ustar header). NUL-terminated; returns the length. */
#define USTAR_NAME_MAX (155 + 1 + 100)
static size_t ustar_name(const uint8_t *h, char out[USTAR_NAME_MAX + 1])
{
    size_t nl = strnlen((const char *)h, 100), pl = 0;
    if (memcmp(h + 257, "ustar\0", 6) == 0)
        pl = strnlen((const char *)h + 345, 155);
    memcpy(out, h + 345, pl);
    if (pl)
        out[pl++] = '/';
    memcpy(out + pl, h, nl);
    out[pl + nl] = '\0';
    return pl + nl;
}

int gf__tar_member_check(const uint8_t *h, const char *name, size_t name_len, uint64_t size,
                         char *why, size_t why_len)
{
    uint64_t stored = 0, computed = 0, hsize = 0;
    if (checksum_ok(h, &stored, &computed) <= 0) {
        gf__why(why, why_len, "the block before the member is no tar header (bad checksum): "
                              "the index points elsewhere than the shard's member");
        return GF_ECORRUPT;
    }
    char type = (char)h[156];
    if (type == 'S') {
        gf__why(why, why_len, "a GNU sparse member, not supported");
        return GF_ECORRUPT;
    }
    if (type_problem(type)) {
        gf__why(why, why_len, "the header before the member is of type '%c' (%s), not a "
                              "regular file: the index points at another member",
                (unsigned char)type >= 32 && (unsigned char)type < 127 ? type : '?',
                type_problem(type));
        return GF_ECORRUPT;
    }
    char full[USTAR_NAME_MAX + 1];
    size_t fl = ustar_name(h, full);
    size_t nl = strnlen((const char *)h, 100); /* 100: the name field full, a long name cut */
    const char *f = full;
    while (fl >= 2 && f[0] == '.' && f[1] == '/') {
        f += 2, fl -= 2;
        while (fl && f[0] == '/')
            f++, fl--;
    }
    /* A longer name came from a pax or GNU header before this block;
     * the block holds its first 100 bytes (Python's tarfile, GNU tar),
     * "./" included where the name had it (GNU tar's "tar cf x.tar ./"). */
    int same = (fl == name_len && memcmp(f, name, fl) == 0) ||
               (nl == 100 && fl < name_len && memcmp(f, name, fl) == 0);
    /* A name not in ASCII came from a pax path; tarfile writes the block's
     * copy with '?' for each character: its ASCII ends must agree. */
    size_t lead = 0, tail = 0;
    while (!same && lead < name_len && (unsigned char)name[lead] < 0x80)
        lead++;
    while (!same && tail < name_len && (unsigned char)name[name_len - 1 - tail] < 0x80)
        tail++;
    if (!same && lead < name_len)
        same = fl >= GF__MIN(lead, (size_t)100) && memcmp(f, name, GF__MIN(lead, fl)) == 0 &&
               (nl == 100 || (fl >= tail && memcmp(f + fl - tail, name + name_len - tail,
                                                   tail) == 0));
    if (!same) {
        gf__why(why, why_len, "the shard's header there names '%.*s', not '%.*s': the index "
                              "points at another member",
                (int)GF__MIN(fl, (size_t)80), f, (int)GF__MIN(name_len, (size_t)80), name);
        return GF_ECORRUPT;
    }
    /* pax size= overrides the block's size only past 8 GiB, where an
     * image member is no sample anyway. */
    if (parse_number(h + 124, 12, &hsize) < 0 || hsize != size) {
        gf__why(why, why_len, "the shard's header gives %llu bytes, the index %llu",
                (unsigned long long)hsize, (unsigned long long)size);
        return GF_ECORRUPT;
    }
    return 0;
}

/* A metadata member's data (a pax header, a GNU long name): size bytes
 * at data into b, NUL-terminated, b->len = size. Returns 0 or a code. */
static int read_data(gf__tar *t, uint64_t data, size_t size, bytes *b, char *why,
                     size_t why_len)
{
    int rc;
    if ((rc = bytes_reserve(b, size)) < 0)
        return rc;
    if ((rc = gf__tar_read(t, data, b->p, size, why, why_len)) < 0)
        return rc;
    b->p[size] = '\0';
    b->len = size;
    return 0;
}

/* An old GNU sparse header's map blocks, from *data on: *data moved past
 * the last (byte 504 of each says another follows). Returns 0, 1 if the
 * file ends inside the map, or GF_EDATASET (a read failed, why says). */
static int sparse_map_end(gf__tar *t, uint64_t *data, char *why, size_t why_len)
{
    for (int more = 1; more; *data += BLOCK) {
        if (t->file_size - *data < BLOCK)
            return 1;
        const uint8_t *x = win_get(t, *data, BLOCK, why, why_len);
        if (!x)
            return GF_EDATASET;
        more = x[504] != 0;
    }
    return 0;
}

/* The member whose header is h (at pos; its data at `data`, size bytes):
 * its name from a pax path, a GNU long name (longname, NULL if none) or
 * h itself, kept in name, "./" dropped; and why it is skipped, if it is.
 * Returns 0 or GF_ENOMEM. */
static int member_of(gf__tar_member *m, bytes *name, const uint8_t *h, uint64_t pos,
                     uint64_t data, uint64_t size, const char *pax_path, size_t pax_path_len,
                     const bytes *longname, int has_pax_size, int pax_sparse)
{
    char type = (char)h[156];
    int rc;
    /* The member: its name from pax, GNU or the header itself. */
    if (pax_path) {
        rc = bytes_set(name, pax_path, pax_path_len);
    } else if (longname) {
        rc = bytes_set(name, longname->p, longname->len);
    } else {
        char own[USTAR_NAME_MAX + 1];
        rc = bytes_set(name, own, ustar_name(h, own));
    }
    if (rc < 0)
        return rc;
    const char *nm = name->p;
    size_t nml = name->len;
    while (nml >= 2 && nm[0] == '.' && nm[1] == '/') {
        nm += 2; /* "./a.jpg" is "a.jpg" */
        nml -= 2;
        while (nml && nm[0] == '/') {
            nm++;
            nml--;
        }
    }
    *m = (gf__tar_member){
        .name = nm,
        .name_len = nml,
        .header_offset = pos,
        .offset = data,
        .size = size,
        .type = type,
    };
    m->skip = type_problem(type);
    if (!m->skip && pax_sparse)
        m->skip = "a GNU sparse file (pax), not supported (store it whole: tar "
                  "without --sparse)";
    if (!m->skip)
        m->skip = name_problem(nm, nml);
    /* Every read of a member checks the block before its data
     * against the index (gf__tar_member_check): one whose pax
     * path, GNU long name or pax size= that block does not spell
     * would be indexed and then fail every read. (A member named
     * and sized by its block alone passes by construction: the
     * same name, checksum and type checks; not run, to keep a
     * scan of small members as fast.) */
    char unused[8];
    if (!m->skip && (pax_path || longname || has_pax_size) &&
        gf__tar_member_check(h, nm, nml, size, unused, sizeof unused) < 0)
        m->skip = "its header block does not spell the name or size its pax or GNU "
                  "header gives, so no read of it could be checked";
    return 0;
}

int gf__tar_scan(int fd, uint64_t file_size, const char *shard, gf__tar_member_fn fn,
                 void *ctx, uint64_t *warnings, char *warning, size_t warning_len,
                 gf__tar_damage *dmg, char *why, size_t why_len)
{
    gf__tar_damage scratch;
    gf__tar t = {.fd = fd, .file_size = file_size, .shard = shard, .win_want = WIN_MIN,
                 .dmg = dmg ? dmg : &scratch};
    t.win = malloc(WIN_MAX);
    if (!t.win)
        return GF_ENOMEM;
    bytes pax = {0}, longname = {0}, name = {0};
    const char *pax_path = NULL;
    size_t pax_path_len = 0;
    int has_pax_size = 0, has_longname = 0, lone_zero = 0, pax_sparse = 0;
    uint64_t pax_size = 0, lone_zero_at = 0;
    int rc = 0;
    uint64_t pos = 0, members = 0;

    /* The damaged header at pos: the member it announced is lost. */
#define FAIL(code, ...)                                                                \
    do {                                                                               \
        rc = damage(&t, code, pos, 1, why, why_len, __VA_ARGS__);                      \
        goto out;                                                                      \
    } while (0)

    if (file_size == 0) {
        rc = damage(&t, GF_EEMPTY, 0, 0, why, why_len, "zero bytes: not a tar archive");
        goto out;
    }
    for (;;) {
        if (pos == file_size)
            break; /* end of file on a block boundary */
        if (file_size - pos < BLOCK)
            FAIL(GF_ETRUNC, "truncated header: %llu bytes left, a header is 512",
                 (unsigned long long)(file_size - pos));
        const uint8_t *h = win_get(&t, pos, BLOCK, why, why_len);
        if (!h) {
            rc = GF_EDATASET;
            goto out;
        }
        if (all_zero(h)) {
            if (lone_zero)
                break; /* two zero blocks */
            lone_zero = 1;
            lone_zero_at = pos;
            pos += BLOCK;
            continue;
        }
        if (lone_zero) {
            lone_zero = 0;
            (*warnings)++;
            if (warning && warning_len && !warning[0])
                gf__why(warning, warning_len, "%s: offset %llu: lone zero block", shard,
                        (unsigned long long)lone_zero_at);
        }
        uint64_t stored = 0, computed = 0;
        int ck = checksum_ok(h, &stored, &computed);
        const char *kind = pos == 0 && ck <= 0 ? image_kind(h) : NULL;
        if (kind)
            FAIL(GF_ECORRUPT, "not a tar archive: the file starts like %s image", kind);
        if (pos == 0 && ck <= 0 && h[0] == 0x1f && h[1] == 0x8b)
            FAIL(GF_ECORRUPT, "not a tar archive but a gzip-compressed one: gpufeed reads "
                              "uncompressed shards only; decompress it first (gunzip)");
        if (ck < 0)
            FAIL(GF_ECORRUPT, "header checksum field is not octal");
        if (!ck)
            FAIL(GF_ECORRUPT,
                 "header checksum mismatch (stored %llu, computed %llu): not a tar "
                 "header, or a corrupt one",
                 (unsigned long long)stored, (unsigned long long)computed);
        uint64_t size;
        if (parse_number(h + 124, 12, &size) < 0)
            FAIL(GF_ECORRUPT, "size field is not an octal or base-256 number");
        char type = (char)h[156];
        int meta = type == 'x' || type == 'g' || type == 'L' || type == 'K';
        if (!meta && has_pax_size)
            size = pax_size;
        if (has_no_data(type))
            size = 0;
        uint64_t data = pos + BLOCK;
        /* An old GNU sparse header's map goes on in blocks of its own
         * (byte 482, then 504 of each, says another follows); reading
         * them moves the window, so the header is kept aside. */
        uint8_t sparse_hdr[BLOCK];
        if (type == 'S' && h[482])
            h = memcpy(sparse_hdr, h, BLOCK);
        if (type == 'S' && h[482] && (rc = sparse_map_end(&t, &data, why, why_len)) != 0) {
            if (rc > 0)
                FAIL(GF_ETRUNC, "truncated archive: the file ends inside a sparse map");
            goto out;
        }
        if (size > file_size - data)
            FAIL(GF_ETRUNC, "member size %llu runs past the end of the file (%llu bytes)",
                 (unsigned long long)size, (unsigned long long)file_size);
        uint64_t padded = (size + BLOCK - 1) / BLOCK * BLOCK;
        if (padded > file_size - data)
            FAIL(GF_ETRUNC, "truncated archive: the file ends inside the member's last block");
        uint64_t next = data + padded;

        if (type == 'x') {
            if (size > GF__TAR_PAX_MAX)
                FAIL(GF_ECORRUPT, "pax header of %llu bytes, over the %zu-byte limit",
                     (unsigned long long)size, GF__TAR_PAX_MAX);
            if ((rc = read_data(&t, data, (size_t)size, &pax, why, why_len)) < 0)
                goto out;
            pax_path = NULL;
            has_pax_size = 0;
            pax_sparse = 0;
            if (parse_pax(pax.p, pax.len, &pax_path, &pax_path_len, &has_pax_size,
                          &pax_size, &pax_sparse) < 0)
                FAIL(GF_ECORRUPT, "malformed pax extended header record");
        } else if (type == 'L') {
            if (size > GF__TAR_LONGNAME_MAX)
                FAIL(GF_ECORRUPT, "GNU long name of %llu bytes, over the %zu-byte limit",
                     (unsigned long long)size, GF__TAR_LONGNAME_MAX);
            if ((rc = read_data(&t, data, (size_t)size, &longname, why, why_len)) < 0)
                goto out;
            longname.len = strlen(longname.p); /* NUL-terminated in the data */
            has_longname = 1;
        } else if (!meta) {
            gf__tar_member m;
            rc = member_of(&m, &name, h, pos, data, size, pax_path, pax_path_len,
                           has_longname ? &longname : NULL, has_pax_size, pax_sparse);
            if (rc < 0)
                goto out;
            members++;
            t.in_fn = 1;
            rc = fn(ctx, &t, &m);
            t.in_fn = 0;
            if (rc < 0)
                goto out;
            pax_path = NULL;
            has_pax_size = 0;
            pax_sparse = 0;
            has_longname = 0;
        }
        /* 'g' and 'K': nothing to keep. */
        pos = next;
    }
    if (members == 0)
        rc = damage(&t, GF_EEMPTY, 0, 0, why, why_len, "no members: an empty archive");
out:
#undef FAIL
    free(t.win);
    free(pax.p);
    free(longname.p);
    free(name.p);
    return rc;
}
