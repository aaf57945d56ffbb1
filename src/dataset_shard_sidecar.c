/* A tar shard's samples from its index sidecar instead of its headers:
 * SHARD.idx beside SHARD.tar, in the text format NVIDIA DALI's wds2idx
 * writes (and readers.webdataset's index_paths read), version v1.2:
 *
 *   v1.2 N [shard_bytes=B] [shard_crc32c=XXXXXXXX] [labels=L1,L2,...,LN]
 *        [member_crc32c=C1,C2,...,CN]
 *   EXT OFFSET SIZE NAME [EXT OFFSET SIZE NAME ...]     (N lines, one a key)
 *
 * OFFSET is a member's data offset, NAME its whole member name. DALI
 * reads the first line's first two tokens only, and exactly N lines
 * after it; a line's tokens must come in fours (a lone extra token is an
 * error there), so gpufeed's own facts live on the first line:
 * "shard_bytes=B", the shard's size when the sidecar was written
 * (prepare, gpufeed index), "shard_crc32c=", the CRC32C of the whole
 * shard then (8 hex digits; a remote shard fetched whole is checked
 * against it before any of it is decoded, so a sidecar beside the wrong
 * shard of the same size is caught), and "labels=...", each line's label in line
 * order (prepare, gpufeed index), so a reader that cannot afford a read per .cls
 * (remote shards) need not read the shard for labels, and
 * "member_crc32c=...", each line's image member's CRC32C (8 hex digits) in
 * line order (a line without an image, from `gpufeed index --fields`: its
 * first member other than the .cls), checked wherever that member's bytes are read for decoding
 * (a sidecar beside another shard of the same layout, a byte flipped
 * since): kept only when it is exactly one well-formed value a line.
 * A local shard is never read whole to check shard_crc32c=, and its
 * headers are always scanned (a sidecar's text cannot say what a pax
 * path, a GNU long name, a second image or .cls of a key, or a key split
 * by another's member make of the shard; only the scanner knows): its
 * sidecar is taken, for its member CRCs, only where it "matches": the
 * shard's size as recorded (or, for a sidecar without one, not older
 * than the shard: a plain copy that loses mtimes then costs a warning,
 * never a wrong index), the text's own checks, and then exactly the
 * scan's samples, in order, each the same image member (name, data
 * offset, size) with the same label (labels=, if it gives them, against
 * the .cls the scan read). Anything else is a warning, and the scan's
 * index stands: a sidecar is a shortcut, never a second truth.
 * gf__sidecar_parse checks the text alone (no file system: the remote
 * reader's too); gf__shard_sidecar_load adds the file's part (mtime) and
 * gf__shard_sidecar_match the scan's. Run by the thread that opens the
 * data set. */
#include "dataset_indexers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Larger sidecars are ignored (the headers are scanned): about 200,000
 * samples of long names, far above a shard's usual few thousand. */
#define SIDECAR_MAX_BYTES ((size_t)64 << 20)
#define CLS_MAX 64
#define BLOCK 512

typedef gf__sidecar_entry entry;

/* "SHARD.tar" -> "SHARD.idx" (the caller checked the suffix). */
static char *sidecar_path(const char *shard)
{
    size_t n = strlen(shard);
    if (n < 4 || strcasecmp(shard + n - 4, ".tar") != 0)
        return NULL;
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, shard, n - 4);
        memcpy(p + n - 4, ".idx", 5);
    }
    return p;
}

static int parse_u64(const char *s, size_t n, uint64_t *out)
{
    if (n == 0 || n > 19)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

/* Exactly 8 hex digits (either case). */
static int parse_hex32(const char *s, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 8; i++) {
        int d = s[i] >= '0' && s[i] <= '9'   ? s[i] - '0'
                : s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 10
                : s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 10
                                             : -1;
        if (d < 0)
            return -1;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return 0;
}

/* The next token of [*p, end) on this line; 0 at the line's end. */
static size_t token(const char **p, const char *end, const char **tok)
{
    const char *s = *p;
    while (s < end && (*s == ' ' || *s == '\t' || *s == '\r'))
        s++;
    const char *e = s;
    while (e < end && *e != ' ' && *e != '\t' && *e != '\r')
        e++;
    *tok = s;
    *p = e;
    return (size_t)(e - s);
}

/* 1 if a scan takes the name as it is: not absolute, no "." or ".."
 * component, no empty one (the scanner strips "./" and refuses ".."). */
static int name_as_scanned(const char *s, size_t n)
{
    if (n == 0 || n >= 65536 || s[0] == '/')
        return 0;
    size_t a = 0;
    for (size_t i = 0; i <= n; i++)
        if (i == n || s[i] == '/') {
            size_t c = i - a;
            if (c == 0 || (c == 1 && s[a] == '.') || (c == 2 && s[a] == '.' && s[a + 1] == '.'))
                return 0;
            a = i + 1;
        }
    return 1;
}

/* One line: its components checked against the file and each other; the
 * label and the line's sample member kept: its image, or in a line
 * without one (a set without images: KEY.latent.npy, KEY.cls) its first
 * member other than the .cls, the member its member_crc32c= value is of
 * (the writer's rule, dataset_shards.c's list_member). Which keys are
 * samples is the scan rule's to say, under the loader's schema; a line
 * holds at most one image and one .cls. *end: where the last member's
 * data ends. */
static const char *parse_line(const char *p, const char *eol, uint64_t file_size,
                              uint64_t *end, entry *e)
{
    const char *line = p;
    const char *key = NULL;
    size_t key_len = 0;
    int imgs = 0, clss = 0, first = 0;
    for (;;) {
        const char *ext, *off_s, *size_s, *name;
        size_t ext_n = token(&p, eol, &ext);
        if (ext_n == 0)
            break;
        size_t off_n = token(&p, eol, &off_s), size_n = token(&p, eol, &size_s),
               name_n = token(&p, eol, &name);
        uint64_t off, size;
        if (!name_n || parse_u64(off_s, off_n, &off) || parse_u64(size_s, size_n, &size))
            return "a component is not 'EXT OFFSET SIZE NAME'";
        uint64_t room = (*end + BLOCK - 1) / BLOCK * BLOCK + BLOCK; /* a header first */
        if (off % BLOCK || off < room)
            return "member offsets out of order or not 512-aligned";
        if (off > file_size || size > file_size - off)
            return "a member runs past the end of the shard";
        if (!name_as_scanned(name, name_n))
            return "a member name a scan would not take as it is";
        const char *base = memrchr(name, '/', name_n);
        base = base ? base + 1 : name;
        const char *dot = memchr(base, '.', (size_t)(name + name_n - base));
        size_t k_n = dot ? (size_t)(dot - name) : name_n;
        if (!dot || (size_t)(name + name_n - dot - 1) != ext_n || memcmp(dot + 1, ext, ext_n))
            return "an extension that is not its name's";
        if (key && (k_n != key_len || memcmp(key, name, k_n)))
            return "two keys on one line";
        key = name;
        key_len = k_n;
        *end = off + size;
        if (ext_n == 3 && strncasecmp(ext, "cls", 3) == 0) {
            clss++;
            e->cls_off = off;
            e->cls_size = size;
        } else if (gf__is_image_suffix(ext, ext_n) || (!imgs && !first)) {
            imgs += gf__is_image_suffix(ext, ext_n);
            first = 1;
            e->name = name;
            e->name_len = name_n;
            e->img_off = off;
            e->img_size = size;
        }
        if (!e->name) { /* a .cls first: its name stands for the key till then */
            e->name = name;
            e->name_len = name_n;
        }
    }
    if (!key)
        return "an empty line";
    e->line = line;
    e->line_len = (size_t)(eol - line);
    if (imgs > 1 || clss > 1)
        return "a key with two images or two .cls";
    if (!first)
        return "a key of a .cls alone";
    if ((clss && e->cls_size > CLS_MAX) || (imgs && e->img_size > UINT32_MAX))
        return "a .cls over 64 bytes or an image over 4 GiB";
    return NULL;
}

int gf__sidecar_member_next(const gf__sidecar_entry *e, const char **at, gf__sidecar_member *m)
{
    const char *p = *at ? *at : e->line, *eol = e->line + e->line_len;
    const char *off_s, *size_s;
    m->ext_len = token(&p, eol, &m->ext);
    if (m->ext_len == 0)
        return 0;
    size_t off_n = token(&p, eol, &off_s), size_n = token(&p, eol, &size_s);
    m->name_len = token(&p, eol, &m->name);
    /* parse_line took the line: these cannot fail */
    (void)parse_u64(off_s, off_n, &m->off);
    (void)parse_u64(size_s, size_n, &m->size);
    *at = p;
    return 1;
}

/* Reads the whole sidecar (regular, not over SIDECAR_MAX_BYTES); *older:
 * its mtime is before the shard's. Returns 0, 1 if there is none, 2 with
 * *bad, or GF_ENOMEM. */
static int load(int root_fd, const char *path, const struct stat *shard_st, char **text,
                size_t *len, int *older, const char **bad)
{
    int fd = openat(root_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT ? 1 : (*bad = "cannot be opened", 2);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return *bad = "not a regular file", 2;
    }
    *older = st.st_mtim.tv_sec < shard_st->st_mtim.tv_sec ||
             (st.st_mtim.tv_sec == shard_st->st_mtim.tv_sec &&
              st.st_mtim.tv_nsec < shard_st->st_mtim.tv_nsec);
    int rc = 2;
    if ((uint64_t)st.st_size > SIDECAR_MAX_BYTES)
        *bad = "over 64 MiB";
    else if (!(*text = malloc((size_t)st.st_size + 1)))
        rc = GF_ENOMEM;
    else {
        size_t got = 0, want = (size_t)st.st_size;
        while (got < want) {
            ssize_t r = pread(fd, *text + got, want - got, (off_t)got);
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        if (got == want) {
            (*text)[want] = '\0';
            *len = want;
            rc = 0;
        } else {
            *bad = "could not be read";
        }
    }
    close(fd);
    return rc;
}

/* The key of an image member name: up to the first '.' of its base name. */
static size_t key_len_of(const entry *e)
{
    const char *base = memrchr(e->name, '/', e->name_len);
    base = base ? base + 1 : e->name;
    return (size_t)((const char *)memchr(base, '.', (size_t)(e->name + e->name_len - base)) -
                    e->name);
}

/* "labels=L1,...,Ln" into each entry; NULL or why not. */
static const char *parse_labels(const char *t, size_t n, entry *v, size_t count)
{
    size_t i = 0, a = 0;
    for (size_t k = 0; k <= n; k++) {
        if (k < n && t[k] != ',')
            continue;
        uint64_t x;
        if (i == count || parse_u64(t + a, k - a, &x) || x > GF__LABEL_MAX)
            return "labels= is not one label (0..2147483646) a line";
        v[i++].label = (int32_t)x;
        a = k + 1;
    }
    return i == count ? NULL : "labels= is not one label (0..2147483646) a line";
}

/* "member_crc32c=C1,...,Cn" into each entry; 0, or -1 (then none kept). */
static int parse_member_crcs(const char *t, size_t n, entry *v, size_t count)
{
    if (n != count * 9 - 1)
        return -1;
    for (size_t i = 0; i < count; i++) {
        uint32_t crc;
        if ((i + 1 < count && t[i * 9 + 8] != ',') || parse_hex32(t + i * 9, &crc) < 0)
            return -1;
        v[i].img_crc32c = crc;
    }
    return 0;
}

/* Every line parsed into v (count of them); the first line's tokens into
 * out. Returns 0, or 2 with *bad and *line (1: the first; 0: none). */
static int parse_text(const char *text, size_t len, uint64_t file_size, gf__sidecar *out,
                      const char **bad, size_t *line)
{
    const char *p = text, *end = text + len;
    const char *eol = memchr(p, '\n', len);
    if (!eol)
        eol = end;
    const char *tok;
    size_t tn = token(&p, eol, &tok);
    uint64_t count;
    *line = 1;
    if (tn != 4 || memcmp(tok, "v1.2", 4) != 0)
        return *bad = "not a v1.2 index", 2;
    tn = token(&p, eol, &tok);
    /* the shard's size, known or recorded, bounds the members */
    uint64_t bound = file_size;
    const char *labels = NULL, *crcs = NULL;
    size_t labels_n = 0, crcs_n = 0;
    const char *t2;
    for (size_t n2; (n2 = token(&p, eol, &t2)) != 0;) {
        uint64_t sz;
        uint32_t crc;
        if (n2 > 12 && memcmp(t2, "shard_bytes=", 12) == 0 &&
            parse_u64(t2 + 12, n2 - 12, &sz) == 0 && sz <= INT64_MAX && out->shard_bytes < 0)
            out->shard_bytes = (int64_t)sz;
        else if (n2 == 13 + 8 && memcmp(t2, "shard_crc32c=", 13) == 0 &&
                 parse_hex32(t2 + 13, &crc) == 0 && out->shard_crc32c < 0)
            out->shard_crc32c = crc;
        else if (n2 >= 7 && memcmp(t2, "labels=", 7) == 0 && !labels)
            labels = t2 + 7, labels_n = n2 - 7;
        else if (n2 >= 14 && memcmp(t2, "member_crc32c=", 14) == 0 && !crcs)
            crcs = t2 + 14, crcs_n = n2 - 14;
    }
    if (out->shard_bytes >= 0 && file_size != GF__SIDECAR_SIZE_UNKNOWN &&
        (uint64_t)out->shard_bytes != file_size)
        return *bad = "written for a shard of another size", 2;
    if (out->shard_bytes >= 0)
        bound = (uint64_t)out->shard_bytes;
    /* a sample takes two members (1 KiB of shard at least) and a line of
     * 24 bytes at least: the entries allocated are bounded by both */
    if (parse_u64(tok, tn, &count) || count == 0 || count > bound / (2 * BLOCK) ||
        count > len / 24)
        return *bad = "no plausible sample count", 2;
    entry *v = calloc((size_t)count, sizeof *v);
    if (!v)
        return GF_ENOMEM;
    for (size_t i = 0; i < count; i++)
        v[i].label = v[i].img_crc32c = -1;
    if (crcs && parse_member_crcs(crcs, crcs_n, v, (size_t)count) < 0)
        for (size_t i = 0; i < count; i++)
            v[i].img_crc32c = -1; /* a malformed list: as an older sidecar without one */
    const char *why = labels ? parse_labels(labels, labels_n, v, (size_t)count) : NULL;
    uint64_t data_end = 0;
    size_t got = 0;
    for (p = eol < end ? eol + 1 : end; p < end && !why; p = eol < end ? eol + 1 : end) {
        (*line)++;
        eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        if (got < count) {
            why = parse_line(p, eol, bound, &data_end, &v[got++]);
        } else {
            const char *q = p;
            if (token(&q, eol, &tok))
                why = "more lines than its sample count";
        }
    }
    if (!why && got != count) {
        why = "fewer lines than its sample count";
        *line = 0;
    }
    for (size_t i = 1; !why && i < got; i++) {
        size_t ka = key_len_of(&v[i - 1]), kb = key_len_of(&v[i]);
        if (ka == kb && memcmp(v[i - 1].name, v[i].name, ka) == 0) {
            why = "one key on two lines";
            *line = i + 2;
        }
    }
    if (why) {
        free(v);
        return *bad = why, 2;
    }
    out->e = v;
    out->n = got;
    out->labelled = labels != NULL;
    return 0;
}

int gf__sidecar_parse(const char *text, size_t len, uint64_t shard_bytes, const char *name,
                      gf__sidecar *out, char *why, size_t why_len)
{
    *out = (gf__sidecar){.shard_bytes = -1, .shard_crc32c = -1};
    const char *bad = NULL;
    size_t line = 0;
    int rc = len > SIDECAR_MAX_BYTES ? (bad = "over 64 MiB", 2)
                                     : parse_text(text, len, shard_bytes, out, &bad, &line);
    if (rc == 2 && line)
        gf__why(why, why_len, "%s: line %zu: %s", name, line, bad);
    else if (rc == 2)
        gf__why(why, why_len, "%s: %s", name, bad);
    if (rc != 0)
        out->shard_bytes = out->shard_crc32c = -1;
    return rc;
}

void gf__sidecar_free(gf__sidecar *sc)
{
    free(sc->e);
    *sc = (gf__sidecar){.shard_bytes = -1, .shard_crc32c = -1};
}

int gf__shard_sidecar_load(int root_fd, const char *shard_path, const struct stat *shard_st,
                           gf__shard_sidecar *out, char *why, size_t why_len)
{
    *out = (gf__shard_sidecar){.sc = {.shard_bytes = -1, .shard_crc32c = -1}};
    out->path = sidecar_path(shard_path);
    if (!out->path)
        return 1;
    size_t len = 0;
    const char *bad = NULL;
    int older = 0;
    int rc = load(root_fd, out->path, shard_st, &out->text, &len, &older, &bad);
    if (rc == 2)
        gf__why(why, why_len, "%s: %s", out->path, bad);
    if (rc == 0)
        rc = gf__sidecar_parse(out->text, len, (uint64_t)shard_st->st_size, out->path, &out->sc,
                               why, why_len);
    if (rc == 0 && out->sc.shard_bytes < 0 && older) {
        gf__why(why, why_len, "%s: %s", out->path, "older than its shard");
        rc = 2;
    }
    return rc;
}

/* The line (2: the first after the header) listing the member whose
 * data is at off; for a message, so found only then. */
static size_t line_of(const gf__sidecar *sc, uint64_t off)
{
    for (size_t j = 0; j < sc->n; j++) {
        gf__sidecar_member m;
        for (const char *at = NULL; gf__sidecar_member_next(&sc->e[j], &at, &m);)
            if (m.off == off)
                return j + 2;
    }
    return 0;
}

int gf__shard_sidecar_match(gf__shard_sidecar *s, gf__builder *b, size_t first,
                            const gf__builder *want, size_t prefix_len, char *why,
                            size_t why_len)
{
    const gf__sidecar *sc = &s->sc;
    size_t got = b->n - first;
    for (size_t i = 0; i < want->n && i < got; i++) {
        size_t j = first + i;
        const char *name = b->arena + b->off[j] + prefix_len;
        const char *listed = want->arena + want->off[i] + prefix_len;
        const char *bad = NULL;
        if (strcmp(name, listed) != 0)
            bad = "its sample's member is not the one the headers give";
        else if (want->doff[i] != b->doff[j] || want->dlen[i] != b->dlen[j])
            bad = "its sample's member lies elsewhere in the shard, or is of another size";
        else if (sc->labelled && want->labels[i] != b->labels[j])
            bad = "labels= differs from the .cls";
        for (int k = 0; k < b->n_var && !bad; k++)
            if (want->voff[k][i] != b->voff[k][j] || want->vlen[k][i] != b->vlen[k][j])
                bad = "a field's member lies elsewhere in the shard, or is of another size";
        if (bad) {
            gf__why(why, why_len, "%s: line %zu: %s ('%.80s'; the headers: '%.80s' at %llu, "
                                  "%llu bytes, label %d)",
                    s->path, line_of(sc, want->doff[i]), bad, listed, name,
                    (unsigned long long)b->doff[j], (unsigned long long)b->dlen[j],
                    (int)b->labels[j]);
            return 2;
        }
    }
    if (want->n != got) {
        gf__why(why, why_len, "%s: %zu samples listed, the shard's headers give %zu", s->path,
                want->n, got);
        return 2;
    }
    for (size_t i = 0; i < got; i++)
        b->dcrc[first + i] = want->dcrc[i];
    return 0;
}

void gf__shard_sidecar_free(gf__shard_sidecar *s)
{
    gf__sidecar_free(&s->sc);
    free(s->text);
    free(s->path);
    *s = (gf__shard_sidecar){.sc = {.shard_bytes = -1, .shard_crc32c = -1}};
}
