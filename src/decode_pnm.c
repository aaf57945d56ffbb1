/* The PNM kinds stb_image does not read: plain (ASCII) PBM, PGM and PPM
 * (P1, P2, P3) and binary PBM (P4), on the decode threads. stb_image reads
 * P5 and P6 (decode_stb.c, after decode_check.c).
 *
 * Bounded: the header's size meets the pixel limit before the one buffer
 * (W x H x 1 or 3 bytes, the decoder's own) grows; one pass over the data.
 * Samples are scaled to 8 bits, round(v / maxval * 255) half to even
 * (scaled_sample): torchvision's pil_loader pixels, but for grey over
 * maxval 255, which PIL reads as mode I and convert('RGB') clips to 255
 * (8321 of 65535 white); that is scaled here, as a 16-bit grey PNG is,
 * so the same samples give the same pixels in either format (README says
 * so). PBM's 1 is black. The data running out is GF_ETRUNC, a
 * sample over maxval or a byte that is no digit GF_ECORRUPT; bytes after
 * the last pixel are allowed (as stb_image allows them after P5/P6). No
 * warnings: every strictness decodes alike.
 *
 * Also P5 and P6 at a maxval other than 255 (gf__decode_pnm_scaled, from
 * decode_pnm_raw.c's header walk, whatever t->decoder): stb_image keeps
 * the low byte of a 16-bit sample and leaves an 8-bit one unscaled. */
#include "decode_formats.h"

#include "grow.h"

#include <math.h>
#include <string.h>

/* A sample as PIL's PpmImagePlugin reads it, then convert('RGB'):
 * round(v / maxval * 255), half to even, in doubles. Binary samples over
 * maxval are not refused there: clipped. */
static uint8_t scaled_sample(uint32_t v, uint32_t maxval)
{
    double x = rint((double)v / maxval * 255.0);
    return x >= 255.0 ? 255 : (uint8_t)x;
}

typedef struct pnm_in {
    const uint8_t *p;
    size_t n, pos;
} pnm_in;

static int is_space(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Skips whitespace and comments (# to the end of the line). */
static void skip_space(pnm_in *in)
{
    while (in->pos < in->n) {
        if (in->p[in->pos] == '#')
            while (in->pos < in->n && in->p[in->pos] != '\n' && in->p[in->pos] != '\r')
                in->pos++;
        else if (is_space(in->p[in->pos]))
            in->pos++;
        else
            break;
    }
}

/* The next decimal number, at most `max` (digits digits at most; 0: any
 * count). 0, or GF_ETRUNC (no data left) / GF_ECORRUPT (no digit, or over
 * max). */
static int number(pnm_in *in, uint32_t max, int digits, uint32_t *v)
{
    skip_space(in);
    if (in->pos >= in->n)
        return GF_ETRUNC;
    uint32_t x = 0;
    int k = 0;
    while (in->pos < in->n && in->p[in->pos] >= '0' && in->p[in->pos] <= '9' &&
           (!digits || k < digits)) {
        x = x * 10 + (uint32_t)(in->p[in->pos++] - '0');
        k++;
        if (x > max)
            return GF_ECORRUPT;
    }
    *v = x;
    return k ? 0 : GF_ECORRUPT;
}

int gf__decode_pnm_plain(gf__decoder *d, const uint8_t *data, size_t len,
                         const gf__transform *t, uint64_t key, uint8_t *dst, char *why,
                         size_t why_len)
{
    int kind = data[1] - '0'; /* 1..4, as sniffed */
    int bits = kind == 1 || kind == 4, K = kind == 3 ? 3 : 1;
    pnm_in in = {data, len, 2};
    uint32_t W, H, maxval = 1;
    int rc = number(&in, 0x7fffffff, 0, &W);
    if (!rc)
        rc = number(&in, 0x7fffffff, 0, &H);
    if (!rc && !bits)
        rc = number(&in, 65535, 0, &maxval);
    if (rc == GF_ETRUNC) {
        gf__why(why, why_len, "PNM: the header ends at byte %zu (truncated?)", len);
        return rc;
    }
    if (rc || W == 0 || H == 0 || maxval == 0) {
        gf__why(why, why_len, "PNM: P%d header is not width, height%s (numbers, maxval "
                "1..65535)", kind, bits ? "" : ", maxval");
        return GF_ECORRUPT;
    }
    if (gf__too_big(t, F_PNM, W, H, why, why_len))
        return GF_ETOOBIG;
    size_t count = (size_t)W * H * K;
    if (GF__GROW(&d->buf, &d->buf_cap, count, 4096)) {
        gf__why(why, why_len, "PNM: out of memory for %ux%u pixels", W, H);
        return GF_ENOMEM;
    }
    uint8_t *px = d->buf;
    if (kind == 4) { /* one whitespace byte, then rows of packed bits */
        size_t row = ((size_t)W + 7) / 8, start = in.pos + 1;
        if (start > len || (len - start) / row < H) {
            gf__why(why, why_len, "PNM: the data holds %zu of the %u rows (truncated?)",
                    start > len ? 0 : (len - start) / row, H);
            return GF_ETRUNC;
        }
        for (uint32_t y = 0; y < H; y++)
            for (uint32_t x = 0; x < W; x++)
                px[(size_t)y * W + x] =
                    data[start + row * y + x / 8] >> (7 - x % 8) & 1 ? 0 : 255;
    } else {
        for (size_t i = 0; i < count; i++) {
            uint32_t v;
            /* P1's digits need no space between them */
            if ((rc = number(&in, maxval, bits, &v))) {
                if (rc == GF_ETRUNC)
                    gf__why(why, why_len, "PNM: the data ends at sample %zu of %zu "
                            "(truncated?)", i, count);
                else
                    gf__why(why, why_len, "PNM: sample %zu is not a number up to the "
                            "maxval %u", i, maxval);
                return rc;
            }
            px[i] = bits ? (v ? 0 : 255) : scaled_sample(v, maxval);
        }
    }
    gf__crop c;
    if (!(t = gf__plan_whole(d, t, (int)W, (int)H, key, &c, &dst, why, why_len)))
        return GF_ENOMEM;
    size_t stride = (size_t)W * K;
    const uint8_t *src = px + stride * d->rs.v.lo + (size_t)d->rs.h.lo * K;
    return gf__decode_finish(d, src, stride, K, t, c.flip, dst, why, why_len);
}

int gf__decode_pnm_scaled(gf__decoder *d, const uint8_t *data, const gf__pnm_header *hdr,
                          const gf__transform *t, uint64_t key, uint8_t *dst, char *why,
                          size_t why_len)
{
    int W = (int)hdr->w, H = (int)hdr->h, K = data[1] == '6' ? K_RGB : K_GRAY;
    int wide = hdr->maxval > 255;
    gf__crop c;
    if (!(t = gf__plan_whole(d, t, W, H, key, &c, &dst, why, why_len)))
        return GF_ENOMEM;
    /* only the span the resampler reads is scaled */
    int x0 = d->rs.h.lo, y0 = d->rs.v.lo;
    size_t span = (size_t)(d->rs.h.hi - x0) * K, rows = (size_t)(d->rs.v.hi - y0);
    if (GF__GROW(&d->buf, &d->buf_cap, span * rows, 4096)) {
        gf__why(why, why_len, "PNM: out of memory for %dx%d pixels", W, H);
        return GF_ENOMEM;
    }
    size_t row_bytes = (size_t)W * K << wide;
    for (size_t y = 0; y < rows; y++) {
        const uint8_t *s = data + hdr->raster + row_bytes * (y0 + y) + ((size_t)x0 * K << wide);
        uint8_t *o = d->buf + span * y;
        for (size_t i = 0; i < span; i++) {
            uint32_t v = wide ? (uint32_t)s[2 * i] << 8 | s[2 * i + 1] : s[i];
            o[i] = scaled_sample(v, hdr->maxval);
        }
    }
    return gf__decode_finish(d, d->buf, span, K, t, c.flip, dst, why, why_len);
}
