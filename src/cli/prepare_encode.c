/*
 * prepare's sample encoder (prepare.h): the source bytes decoded whole by
 * the library (gf_decoder_decode_fit: full size, then the loader's
 * antialiased triangle filter down to --max-side), then either
 *   - JPEG: baseline, TurboJPEG's tjCompress2 at --quality and
 *     --subsampling (grey for one channel);
 *   - raw: binary PPM (P6, RGB) or PGM (P5, one channel), maxval 255,
 *     the header "P6\nW H\n255\n": what PIL, OpenCV and every WebDataset
 *     decoder read, and gpufeed decodes with no codec at all;
 *   - auto: raw when the image is small (FFCV's "smart" mode: for small
 *     images a JPEG saves little and its decode costs more than the read);
 *   - --keep-original: a JPEG source that needs no downscale goes in as
 *     it was, bit for bit (still decoded first, so a bad file is found).
 * One encoder per worker thread; nothing shared.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prepare.h"

#if GF_CLI_HAVE_TJ
#include <turbojpeg.h>
#endif

const char *const prep_format_names[] = {"jpeg", "raw", "auto", NULL};
const char *const prep_subsampling_names[] = {"444", "422", "420", NULL};
const char *const prep_out_names[] = {"jpeg", "raw", "original", NULL};

struct prep_encoder {
    const prep_opts *o;
    gf_decoder *dec;
    uint8_t *buf; /* raw members, and JPEG output (TurboJPEG's allocator) */
    size_t cap;
#if GF_CLI_HAVE_TJ
    tjhandle tj;
    unsigned char *jbuf;
    unsigned long jcap;
#endif
};

prep_encoder *prep_encoder_new(const prep_opts *o, char *why, size_t why_len)
{
    prep_encoder *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    e->o = o;
    if (gf_decoder_open(&e->dec, &o->s) < 0) {
        snprintf(why, why_len, "could not open a decoder");
        free(e);
        return NULL;
    }
#if GF_CLI_HAVE_TJ
    if (o->format != PREP_RAW && !(e->tj = tjInitCompress())) {
        snprintf(why, why_len, "turbojpeg: %s", tjGetErrorStr());
        prep_encoder_free(e);
        return NULL;
    }
#endif
    return e;
}

void prep_encoder_free(prep_encoder *e)
{
    if (!e)
        return;
    gf_decoder_close(&e->dec);
#if GF_CLI_HAVE_TJ
    if (e->jbuf)
        tjFree(e->jbuf);
    if (e->tj)
        tjDestroy(e->tj);
#endif
    free(e->buf);
    free(e);
}

static int is_jpeg(const uint8_t *p, size_t n)
{
    return n >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF;
}

/* auto's choice: raw when small, by pixels when a pixel threshold is set. */
static int wants_raw(const prep_opts *o, int w, int h, int c)
{
    uint64_t px = (uint64_t)w * (uint64_t)h;
    if (o->format != PREP_AUTO)
        return o->format == PREP_RAW;
    return o->raw_max_pixels ? px <= o->raw_max_pixels : px * (uint64_t)c <= o->raw_max_bytes;
}

static int raw_member(prep_encoder *e, const uint8_t *px, int w, int h, int c,
                      const uint8_t **member, size_t *len, char *why, size_t why_len)
{
    char head[48];
    int hn = snprintf(head, sizeof head, "P%c\n%d %d\n255\n", c == 1 ? '5' : '6', w, h);
    size_t body = (size_t)w * (size_t)h * (size_t)c, need = (size_t)hn + body;
    if (need > e->cap) {
        uint8_t *p = realloc(e->buf, need);
        if (!p) {
            snprintf(why, why_len, "out of memory for a %dx%d raw image", w, h);
            return GF_ENOMEM;
        }
        e->buf = p;
        e->cap = need;
    }
    memcpy(e->buf, head, (size_t)hn);
    memcpy(e->buf + hn, px, body);
    *member = e->buf;
    *len = need;
    return 0;
}

static int jpeg_member(prep_encoder *e, const uint8_t *px, int w, int h, int c,
                       const uint8_t **member, size_t *len, char *why, size_t why_len)
{
#if GF_CLI_HAVE_TJ
    static const int samp[] = {TJSAMP_444, TJSAMP_422, TJSAMP_420};
    int ss = c == 1 ? TJSAMP_GRAY : samp[e->o->subsampling];
    unsigned long need = tjBufSize(w, h, ss);
    if (need > e->jcap) {
        if (e->jbuf)
            tjFree(e->jbuf);
        e->jcap = 0;
        if (!(e->jbuf = tjAlloc((int)need))) {
            snprintf(why, why_len, "out of memory for a %dx%d JPEG", w, h);
            return GF_ENOMEM;
        }
        e->jcap = need;
    }
    unsigned long size = e->jcap;
    if (tjCompress2(e->tj, px, w, 0, h, c == 1 ? TJPF_GRAY : TJPF_RGB, &e->jbuf, &size, ss,
                    e->o->quality, TJFLAG_NOREALLOC) != 0) {
        snprintf(why, why_len, "turbojpeg: %s", tjGetErrorStr2(e->tj));
        return GF_ENOMEM; /* not the source's fault: the run stops */
    }
    *member = e->jbuf;
    *len = size;
    return 0;
#else
    (void)e, (void)px, (void)w, (void)h, (void)c, (void)member, (void)len;
    snprintf(why, why_len, "this build has no TurboJPEG encoder");
    return GF_ENODEV;
#endif
}

int prep_encode(prep_encoder *e, const void *src, size_t src_len, const uint8_t **member,
                size_t *len, const char **ext, int *kind, prep_fit *fit, char *why,
                size_t why_len)
{
    const prep_opts *o = e->o;
    const uint8_t *px;
    int w, h, sw, sh, c = o->s.channels;
    int rc = gf_decoder_decode_fit(e->dec, src, src_len, o->max_side, &px, &w, &h, &sw, &sh,
                                   why, why_len);
    if (rc < 0)
        return rc;
    if (fit)
        *fit = (prep_fit){w, h, sw, sh};
    if (wants_raw(o, w, h, c)) {
        *ext = c == 1 ? "pgm" : "ppm";
        *kind = PREP_OUT_RAW;
        return raw_member(e, px, w, h, c, member, len, why, why_len);
    }
    *ext = "jpg";
    if (o->keep_original && w == sw && h == sh && is_jpeg(src, src_len)) {
        *kind = PREP_OUT_ORIGINAL;
        *member = src;
        *len = src_len;
        return 0;
    }
    *kind = PREP_OUT_JPEG;
    return jpeg_member(e, px, w, h, c, member, len, why, why_len);
}
