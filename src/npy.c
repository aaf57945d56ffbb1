/* The .npy header (npy.h), as numpy/lib/format.py writes it:
 *   "\x93NUMPY", major, minor, the header's length (2 bytes little-endian
 *   in 1.0, 4 in 2.0 and 3.0), then the header, a Python dict literal
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (4, 32), }
 *   padded with spaces and ended by '\n', then the data.
 * NumPy evaluates the header as a Python literal. This reads the part of
 * that grammar such a dict takes (either quote, any key order, white
 * space anywhere, a trailing comma) with a scanner that never looks past
 * the header's end, and refuses anything else by name. */
#include "npy.h"

#include "common.h"

#include <inttypes.h>
#include <string.h>

/* The largest dimension taken. No array in memory comes near it, and the
 * bound keeps a dimension's digits from overflowing while read. */
#define DIM_MAX ((int64_t)1 << 40)

enum {
    NDIM_MAX = GF_FIELD_DIMS_MAX - 1, /* the batch's dimension is the first */
    SHOWN_MAX = 24,                   /* bytes of a hostile string put in a message */
};

static const char magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* '=', native order, NumPy never writes (its descr says '<' or '>'):
 * taken as this host's order, so as '<' only where it is known to be. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define NATIVE_IS_LITTLE 1
#else
#define NATIVE_IS_LITTLE 0
#endif

/* The dtypes read, by descr's type code (after the byte order). */
static const struct {
    char code[3];
    gf_dtype dtype;
} readable[] = {
    {"u1", GF_DTYPE_UINT8},   {"i4", GF_DTYPE_INT32},   {"i8", GF_DTYPE_INT64},
    {"f2", GF_DTYPE_FLOAT16}, {"f4", GF_DTYPE_FLOAT32}, {"f8", GF_DTYPE_FLOAT64},
};
#define READABLE_TEXT "'|u1', '<i4', '<i8', '<f2', '<f4', '<f8'"

const char *gf__npy_dtype_name(gf_dtype t)
{
    switch (t) {
    case GF_DTYPE_UINT8:
        return "uint8";
    case GF_DTYPE_FLOAT32:
        return "float32";
    case GF_DTYPE_FLOAT16:
        return "float16";
    case GF_DTYPE_BFLOAT16:
        return "bfloat16";
    case GF_DTYPE_INT32:
        return "int32";
    case GF_DTYPE_INT64:
        return "int64";
    case GF_DTYPE_FLOAT64:
        return "float64";
    }
    return "?";
}

void gf__npy_shape_text(const gf__npy *a, char *out, size_t out_len)
{
    if (!out_len)
        return;
    /* Whole in text first: 5 dimensions of 20 digits fit, so only the
     * copy into out may cut it short. */
    char text[4 + NDIM_MAX * 22];
    int ndim = a->ndim < 0 ? 0 : a->ndim > NDIM_MAX ? NDIM_MAX : a->ndim;
    size_t at = 0;
    text[at++] = '(';
    for (int i = 0; i < ndim; i++)
        at += (size_t)snprintf(text + at, sizeof text - at, i ? ", %" PRId64 : "%" PRId64,
                               a->shape[i]);
    snprintf(text + at, sizeof text - at, ndim == 1 ? ",)" : ")");
    snprintf(out, out_len, "%s", text);
}

/* ---- the header's scanner ---- */

typedef struct scan {
    const uint8_t *member; /* offsets in messages count from its start */
    const uint8_t *at;     /* the next byte of the header to read */
    const uint8_t *end;    /* the header's end */
    char *why;
    size_t why_len;
} scan;

/* White space as Python's tokenizer takes it inside brackets. */
static int is_blank(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

static int peek(const scan *s)
{
    return s->at < s->end ? *s->at : -1;
}

static void skip_blanks(scan *s)
{
    while (s->at < s->end && is_blank(*s->at))
        s->at++;
}

/* The byte at s->at is not what the grammar wants there. */
static int unexpected(const scan *s, const char *wanted)
{
    int c = peek(s);
    size_t offset = (size_t)(s->at - s->member);
    if (c < 0)
        gf__why(s->why, s->why_len, "npy: the header ends where %s should be", wanted);
    else if (c >= 0x20 && c < 0x7f)
        gf__why(s->why, s->why_len, "npy: header byte %zu is '%c', not %s", offset, c, wanted);
    else
        gf__why(s->why, s->why_len, "npy: header byte %zu is 0x%02x, not %s", offset, c, wanted);
    return GF_ECORRUPT;
}

/* A quoted string without escapes (none of the keys or dtypes has one),
 * of printable ASCII, so that messages may quote it. */
static int read_string(scan *s, const char **str, size_t *len, const char *wanted)
{
    int quote = peek(s);
    if (quote != '\'' && quote != '"')
        return unexpected(s, wanted);
    const uint8_t *start = ++s->at;
    for (; s->at < s->end && *s->at != quote; s->at++)
        if (*s->at < 0x20 || *s->at >= 0x7f || *s->at == '\\')
            return unexpected(s, "a string's printable ASCII");
    if (s->at == s->end)
        return unexpected(s, "a string's closing quote");
    *str = (const char *)start;
    *len = (size_t)(s->at - start);
    s->at++;
    return 0;
}

static int parse_descr(scan *s, gf_dtype *dtype)
{
    if (peek(s) == '[') {
        gf__why(s->why, s->why_len,
                "npy: a structured dtype (descr is a list) is not read; only " READABLE_TEXT
                " are");
        return GF_EFORMAT;
    }
    const char *d;
    size_t len;
    int rc = read_string(s, &d, &len, "a quoted dtype");
    if (rc)
        return rc;
    if (len == 3) {
        for (size_t i = 0; i < sizeof readable / sizeof readable[0]; i++) {
            if (memcmp(d + 1, readable[i].code, 2) != 0)
                continue;
            /* One byte has no byte order: NumPy writes '|', takes any. */
            int one_byte = gf_dtype_size(readable[i].dtype) == 1;
            int little = d[0] == '<' || (d[0] == '=' && NATIVE_IS_LITTLE);
            int big = d[0] == '>' || (d[0] == '=' && !NATIVE_IS_LITTLE);
            if (one_byte ? (little || big || d[0] == '|') : little) {
                *dtype = readable[i].dtype;
                return 0;
            }
            if (big) {
                gf__why(s->why, s->why_len,
                        "npy: dtype '%.3s' is big-endian, not read; save little-endian ('<%.2s')",
                        d, d + 1);
                return GF_EFORMAT;
            }
        }
    }
    gf__why(s->why, s->why_len, "npy: dtype '%.*s' is not read; only " READABLE_TEXT " are",
            (int)GF__MIN(len, SHOWN_MAX), d);
    return GF_EFORMAT;
}

static int parse_bool(scan *s, int *value)
{
    size_t left = (size_t)(s->end - s->at);
    if (left >= 4 && memcmp(s->at, "True", 4) == 0) {
        s->at += 4;
        *value = 1;
        return 0;
    }
    if (left >= 5 && memcmp(s->at, "False", 5) == 0) {
        s->at += 5;
        *value = 0;
        return 0;
    }
    return unexpected(s, "True or False");
}

/* Decimal digits, as NumPy writes a dimension. */
static int read_dim(scan *s, int64_t *dim)
{
    if (peek(s) == '-') {
        gf__why(s->why, s->why_len, "npy: the shape has a negative dimension");
        return GF_ECORRUPT;
    }
    if (peek(s) < '0' || peek(s) > '9')
        return unexpected(s, "a dimension");
    int64_t v = 0;
    for (; s->at < s->end && *s->at >= '0' && *s->at <= '9'; s->at++) {
        v = v * 10 + (*s->at - '0');
        if (v > DIM_MAX) {
            gf__why(s->why, s->why_len, "npy: the shape has a dimension over 2^40");
            return GF_ECORRUPT;
        }
    }
    *dim = v;
    return 0;
}

/* A tuple of dimensions: "()", "(3,)" (the comma makes it a tuple),
 * "(4, 32, 32)", a trailing comma allowed. Beyond NDIM_MAX dimensions
 * they are counted, not kept, for the message. */
static int parse_shape(scan *s, gf__npy *a)
{
    if (peek(s) != '(')
        return unexpected(s, "the shape's '('");
    s->at++;
    size_t count = 0;
    int comma = 0; /* after the last dimension */
    for (skip_blanks(s); peek(s) != ')';) {
        int64_t dim = 0;
        int rc = read_dim(s, &dim);
        if (rc)
            return rc;
        if (count < NDIM_MAX)
            a->shape[count] = dim;
        count++;
        skip_blanks(s);
        comma = peek(s) == ',';
        if (comma) {
            s->at++;
            skip_blanks(s);
        } else if (peek(s) != ')') {
            return unexpected(s, "',' or ')' in the shape");
        }
    }
    s->at++;
    if (count == 1 && !comma) {
        gf__why(s->why, s->why_len, "npy: shape (%" PRId64 ") is no tuple; (%" PRId64 ",) is",
                a->shape[0], a->shape[0]);
        return GF_ECORRUPT;
    }
    if (count > NDIM_MAX) {
        gf__why(s->why, s->why_len, "npy: the shape has %zu dimensions; at most %d are read", count,
                NDIM_MAX);
        return GF_EFORMAT;
    }
    a->ndim = (int)count;
    return 0;
}

/* The dict: each of the three keys once, in any order. */
static int parse_dict(scan *s, gf__npy *a)
{
    static const char *const key_name[] = {"descr", "fortran_order", "shape"};
    enum { DESCR, FORTRAN_ORDER, SHAPE, N_KEYS };
    int seen[N_KEYS] = {0};
    int fortran = 0;
    skip_blanks(s);
    if (peek(s) != '{')
        return unexpected(s, "the header's '{'");
    s->at++;
    for (;;) {
        skip_blanks(s);
        if (peek(s) == '}')
            break;
        const char *k;
        size_t len;
        int rc = read_string(s, &k, &len, "a quoted key or '}'");
        if (rc)
            return rc;
        int key = 0;
        while (key < N_KEYS &&
               !(strlen(key_name[key]) == len && memcmp(key_name[key], k, len) == 0))
            key++;
        if (key == N_KEYS) {
            gf__why(s->why, s->why_len,
                    "npy: header key '%.*s' is none of 'descr', 'fortran_order', 'shape'",
                    (int)GF__MIN(len, SHOWN_MAX), k);
            return GF_ECORRUPT;
        }
        if (seen[key]) {
            gf__why(s->why, s->why_len, "npy: header key '%s' twice", key_name[key]);
            return GF_ECORRUPT;
        }
        seen[key] = 1;
        skip_blanks(s);
        if (peek(s) != ':')
            return unexpected(s, "':'");
        s->at++;
        skip_blanks(s);
        rc = key == DESCR           ? parse_descr(s, &a->dtype)
             : key == FORTRAN_ORDER ? parse_bool(s, &fortran)
                                    : parse_shape(s, a);
        if (rc)
            return rc;
        skip_blanks(s);
        if (peek(s) == '}')
            break;
        if (peek(s) != ',')
            return unexpected(s, "',' or '}'");
        s->at++;
    }
    s->at++;
    skip_blanks(s);
    if (s->at != s->end)
        return unexpected(s, "the padding's spaces after '}'");
    for (int key = 0; key < N_KEYS; key++)
        if (!seen[key]) {
            gf__why(s->why, s->why_len, "npy: the header has no '%s'", key_name[key]);
            return GF_ECORRUPT;
        }
    if (fortran) {
        gf__why(s->why, s->why_len,
                "npy: Fortran order (fortran_order True) is not read; save C order");
        return GF_EFORMAT;
    }
    return 0;
}

/* ---- the member ---- */

/* The data's bytes as the shape claims them into *bytes; 0 when they
 * pass 2^64. */
static int shape_bytes(const gf__npy *a, uint64_t *bytes)
{
    uint64_t size = gf_dtype_size(a->dtype), elements = 1;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] == 0) { /* empty, however large the others */
            *bytes = 0;
            return 1;
        }
    for (int i = 0; i < a->ndim; i++) {
        if (elements > UINT64_MAX / size / (uint64_t)a->shape[i])
            return 0;
        elements *= (uint64_t)a->shape[i];
    }
    *bytes = elements * size;
    return 1;
}

int gf__npy_parse(const uint8_t *p, size_t n, gf__npy *out, char *why, size_t why_len)
{
    if (n == 0 || memcmp(p, magic, GF__MIN(n, sizeof magic)) != 0) {
        gf__why(why, why_len, "npy: not a .npy (no \\x93NUMPY magic)");
        return GF_ECORRUPT;
    }
    if (n < 8) {
        gf__why(why, why_len, "npy: %zu bytes, cut short before the version", n);
        return GF_ECORRUPT;
    }
    unsigned major = p[6], minor = p[7];
    if (major < 1 || major > 3 || minor != 0) {
        gf__why(why, why_len, "npy: format version %u.%u is not read (1.0, 2.0, 3.0 are)", major,
                minor);
        return GF_EFORMAT;
    }
    size_t prefix = major == 1 ? 10 : 12;
    if (n < prefix) {
        gf__why(why, why_len, "npy: %zu bytes, cut short in the header's length", n);
        return GF_ECORRUPT;
    }
    uint32_t header_len = (uint32_t)p[8] | (uint32_t)p[9] << 8;
    if (major > 1)
        header_len |= (uint32_t)p[10] << 16 | (uint32_t)p[11] << 24;
    if (header_len > n - prefix) {
        gf__why(why, why_len, "npy: a header of %" PRIu32 " bytes, the member has %zu after %zu",
                header_len, n - prefix, prefix);
        return GF_ECORRUPT;
    }
    const uint8_t *header = p + prefix;
    if (header_len == 0 || header[header_len - 1] != '\n') {
        gf__why(why, why_len, "npy: the header does not end in '\\n'");
        return GF_ECORRUPT;
    }

    gf__npy a = {0};
    scan s = {
        .member = p, .at = header, .end = header + header_len, .why = why, .why_len = why_len};
    int rc = parse_dict(&s, &a);
    if (rc)
        return rc;
    a.header_bytes = prefix + header_len;
    size_t have = n - a.header_bytes;
    int fits = shape_bytes(&a, &a.data_bytes);
    if (!fits || a.data_bytes != have) {
        char text[128];
        gf__npy_shape_text(&a, text, sizeof text);
        if (fits)
            gf__why(why, why_len,
                    "npy: shape %s claims %" PRIu64 " bytes of %s, the member has %zu", text,
                    a.data_bytes, gf__npy_dtype_name(a.dtype), have);
        else
            gf__why(why, why_len, "npy: shape %s claims over 2^64 bytes of %s, the member has %zu",
                    text, gf__npy_dtype_name(a.dtype), have);
        return GF_ECORRUPT;
    }
    *out = a;
    return 0;
}
