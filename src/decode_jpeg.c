/* JPEG through libjpeg-turbo, on the decode threads; each decoder owns one
 * decompress handle, reused across samples. Compiled only where meson found
 * libjpeg-turbo (GF_HAVE_TURBO).
 *
 * Decodes at the smallest DCT scale that still leaves the crop at least as
 * large as the output (never upsampling from a reduced decode), crops
 * columns with jpeg_crop_scanline (a column more on each side, so that
 * fancy upsampling sees the chroma a whole decode sees), skips rows above
 * with jpeg_skip_scanlines and stops after the last row needed: the span
 * resampled is the whole decode's, byte for byte (test_decode).
 *
 * libjpeg's error_exit longjmps back to gf__decode_jpeg; its messages are
 * captured into the reason, never printed. Its progress monitor longjmps
 * the same way to bound the time one file may take: past
 * GF__JPEG_MAX_SCANS scans (each costs a pass over every coefficient
 * block, so a repeated scan is a CPU-time bomb), or once the loader
 * cancels. */
#include "decode_formats.h"

#include "grow.h"

#include <assert.h>
#include <jerror.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

enum { J_STOP_SCANS = 1, J_STOP_CANCEL = 2 };

static void j_error_exit(j_common_ptr ci)
{
    gf__jerr *e = (gf__jerr *)ci->err;
    ci->err->format_message(ci, e->msg);
    longjmp(e->jb, 1);
}

/* Level -1 is a warning: libjpeg goes on with grey or smeared blocks
 * (damaged entropy data) or a guess (an unknown Adobe transform). The first
 * one's text is kept for the reason; under strictness STRICT* it ends the
 * decode at once, as an error would. Levels >= 0 are trace messages. */
static void j_emit_message(j_common_ptr ci, int level)
{
    gf__jerr *e = (gf__jerr *)ci->err;
    if (level >= 0)
        return;
    if (!e->warned++) {
        e->warn_code = ci->err->msg_code;
        ci->err->format_message(ci, e->warn);
    }
    if (ci->err->msg_code == JWRN_JPEG_EOF)
        e->eof = 1;
    ci->err->num_warnings++;
    if (e->strict || e->eof)
        longjmp(e->jb, 1);
}

static void j_output_message(j_common_ptr ci)
{
    (void)ci;
}

/* Called between input steps (per scan and per iMCU row while a
 * progressive file is read in, per jpeg_read_scanlines call after). The
 * scan cap is libjpeg-turbo's own tools' (djpeg -maxscans,
 * TJPARAM_SCANLIMIT). */
static void j_progress(j_common_ptr cc)
{
    j_decompress_ptr ci = (j_decompress_ptr)cc;
    gf__decoder *d = (gf__decoder *)((char *)ci - offsetof(gf__decoder, ci));
    int scans = ci->input_scan_number;
    if (scans > GF__JPEG_LONG_SCANS && !d->err.long_seen) {
        d->err.long_seen = 1;
        atomic_fetch_add_explicit(&gf__jpeg_long_decodes, 1, memory_order_relaxed);
    }
    if (d->err.long_seen && atomic_load_explicit(&gf__jpeg_hold, memory_order_relaxed)) {
        atomic_fetch_add(&gf__jpeg_held, 1); /* the tests' hold (decode.h) */
        while (atomic_load(&gf__jpeg_hold) && !(d->cancel && atomic_load(d->cancel)))
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        atomic_fetch_sub(&gf__jpeg_held, 1);
    }
    if (scans > GF__JPEG_MAX_SCANS) {
        d->err.stop = J_STOP_SCANS;
        longjmp(d->err.jb, 1);
    }
    if (d->cancel && atomic_load_explicit(d->cancel, memory_order_relaxed)) {
        d->err.stop = J_STOP_CANCEL;
        atomic_fetch_add_explicit(&gf__decode_cancels, 1, memory_order_relaxed);
        longjmp(d->err.jb, 1);
    }
}

/* The reason of a failed decode: a warning's (strict, or the data ran out,
 * which no mode accepts: PIL refuses a truncated file too), else the
 * error's. libjpeg's own text, its first letter lowered to read on. */
static int j_code(const gf__jerr *e, const char *fallback, char *why, size_t why_len)
{
    if (e->stop == J_STOP_SCANS) {
        gf__why(why, why_len, "JPEG: more than %d scans (a decompression-time bomb?)",
                GF__JPEG_MAX_SCANS);
        return GF_ECORRUPT;
    }
    if (e->stop == J_STOP_CANCEL) {
        gf__why(why, why_len, "JPEG: decode cancelled (the loader is stopping)");
        return GF_EBUSY;
    }
    if (e->warned) {
        char w[JMSG_LENGTH_MAX];
        snprintf(w, sizeof w, "%s", e->warn);
        if (w[0] >= 'A' && w[0] <= 'Z' && w[1] >= 'a' && w[1] <= 'z')
            w[0] = (char)(w[0] - 'A' + 'a');
        if (e->eof) {
            gf__why(why, why_len, "JPEG: %s (truncated?)", w);
            return GF_ETRUNC;
        }
        gf__why(why, why_len, "%s (a libjpeg warning; strictness lenient decodes it)", w);
        return GF_ECORRUPT;
    }
    int code = GF_ECORRUPT;
    switch (e->pub.msg_code) {
    case JERR_BAD_PRECISION: /* a 12- or 16-bit file: valid, not ours */
        gf__why(why, why_len, "JPEG: %d-bit samples are not supported", e->pub.msg_parm.i[0]);
        return GF_EFORMAT;
    case JERR_SOF_UNSUPPORTED: /* lossless or hierarchical */
    case JERR_ARITH_NOTIMPL:
    case JERR_NO_SOI: code = GF_EFORMAT; break;
    case JERR_OUT_OF_MEMORY: code = GF_ENOMEM; break;
    case JERR_IMAGE_TOO_BIG:
    case JERR_WIDTH_OVERFLOW: code = GF_ETOOBIG; break;
    default: break;
    }
    gf__why(why, why_len, "JPEG: %s", e->msg[0] ? e->msg : fallback);
    return code;
}

/* STRICT_WHOLE: entropy-decodes what the crop left below it and reads to
 * EOI, so damage anywhere is seen. jpeg_skip_scanlines runs decode_mcu on
 * skipped single-scan rows (no IDCT), but skipping *to* the bottom reads
 * nothing, so the last row is read. Progressive files were read whole by
 * jpeg_start_decompress already. */
static void read_to_end(struct jpeg_decompress_struct *ci, JSAMPROW scratch)
{
    JDIMENSION left = ci->output_height - ci->output_scanline;
    if (left > 1)
        jpeg_skip_scanlines(ci, left - 1);
    while (ci->output_scanline < ci->output_height)
        if (jpeg_read_scanlines(ci, &scratch, 1) == 0)
            break;
}

/* Smallest DCT scale num/8 keeping the crop >= the output in both dims
 * (for the filters; NEAREST decodes at full scale).
 * Only 1/8, 2/8, 4/8: libjpeg-turbo has SIMD IDCTs for those (and 8/8),
 * while 3/8, 5/8-7/8 run scaled C IDCTs (12x12, 14x14 for 4:2:0 chroma)
 * that cost more than a full-size decode (measured on 500x375 q90 4:2:0:
 * 1/8 0.26 ms, 2/8 0.30, 3/8 0.39, 4/8 0.34, 5/8 0.61, 6/8 0.82, 7/8 1.65,
 * 8/8 0.55). */
static int pick_scale(const gf__crop *c, const gf__transform *t)
{
    /* A scaled IDCT averages pixels: NEAREST's picks are PIL's only at 8/8 */
    if (t->interp == GF_INTERP_NEAREST)
        return 8;
    for (int num = 1; num < 8; num *= 2)
        if (c->w * num / 8 >= t->out_w && c->h * num / 8 >= t->out_h)
            return num;
    return 8;
}

/* Runs under gf__decode_jpeg's setjmp: may longjmp out of any libjpeg call.
 * Holds nothing that is not in d. */
static int turbo_body(gf__decoder *d, const uint8_t *data, size_t len, const gf__transform *t,
                      uint64_t key, uint8_t *dst, char *why, size_t why_len)
{
    struct jpeg_decompress_struct *ci = &d->ci;
    /* The handle keeps the last file's quantization tables (abbreviated
     * streams may rely on them): a file without DQT decoded with another's
     * tables, as good. Zeroed, a table this file did not define shows. */
    for (int i = 0; i < NUM_QUANT_TBLS; i++)
        if (ci->quant_tbl_ptrs[i])
            memset(ci->quant_tbl_ptrs[i]->quantval, 0, sizeof ci->quant_tbl_ptrs[i]->quantval);
    jpeg_mem_src(ci, data, (unsigned long)len);
    jpeg_read_header(ci, TRUE);
    if (d->err.eof)
        return j_code(&d->err, "", why, why_len);
    for (int k = 0; k < ci->comps_in_scan; k++) {
        int q = ci->cur_comp_info[k]->quant_tbl_no;
        const JQUANT_TBL *tbl = q >= 0 && q < NUM_QUANT_TBLS ? ci->quant_tbl_ptrs[q] : NULL;
        int defined = 0;
        for (int i = 0; tbl && i < DCTSIZE2 && !defined; i++)
            defined = tbl->quantval[i] != 0;
        if (!defined) { /* libjpeg's words, as on a fresh handle */
            gf__why(why, why_len, "JPEG: Quantization table 0x%02x was not defined", q);
            return GF_ECORRUPT;
        }
    }
    int W = (int)ci->image_width, H = (int)ci->image_height;
    if (gf__too_big(t, F_JPEG, (uint64_t)W, (uint64_t)H, why, why_len))
        return GF_ETOOBIG;
    gf__crop c;
    if (!(t = gf__plan(d, t, W, H, key, &c, &dst))) {
        gf__why(why, why_len, "out of memory for the output");
        return GF_ENOMEM;
    }
    int num = t->full_decode ? 8 : pick_scale(&c, t);
    ci->scale_num = (unsigned)num;
    ci->scale_denom = 8;
    int C = t->channels, kind;
    if (ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK) {
        ci->out_color_space = JCS_CMYK;
        kind = K_CMYK;
    } else {
        ci->out_color_space = C == 1 ? JCS_GRAYSCALE : C == 3 ? JCS_RGB : JCS_EXT_RGBA;
        kind = C;
    }
    jpeg_start_decompress(ci);
    int bpp = ci->output_components;
    if (gf__decode_set_axes(d, (int)ci->output_width, (int)ci->output_height, num / 8.0, &c, t)) {
        gf__why(why, why_len, "out of memory for the resampler");
        return GF_ENOMEM;
    }
    const gf__rs_axis *h = &d->rs.h, *v = &d->rs.v;
    JDIMENSION xoff = (JDIMENSION)h->lo, cw = (JDIMENSION)(h->hi - h->lo);
    int whole = t->full_decode || t->uncropped;
    int first = whole ? 0 : v->lo, nrows = whole ? (int)ci->output_height : v->hi - first;
    if (cw < ci->output_width && !whole) {
        /* Fancy upsampling replicates the edge chroma samples of a crop,
         * where the whole decode reads their neighbours: a column more on
         * the left (jpeg_crop_scanline then widens to the iMCU before when
         * h->lo is on an iMCU edge) and two more on the right (the next
         * chroma sample of a 2x subsampled column; an iMCU column more only
         * when they cross into it), all dropped, keep the span exact. */
        JDIMENSION hi = (JDIMENSION)h->hi, W_out = ci->output_width;
        xoff = h->lo > 0 ? (JDIMENSION)h->lo - 1 : 0;
        cw = (W_out - hi > 2 ? hi + 2 : W_out) - xoff;
        jpeg_crop_scanline(ci, &xoff, &cw); /* widens the left edge to an iMCU's */
    } else
        xoff = 0;
    size_t row = (size_t)ci->output_width * bpp; /* cropped width now */
    /* nrows rows, and one past them for read_to_end to discard into */
    /* the decoded rows and (widened) columns hold the span resampled */
    assert((int)xoff <= h->lo && h->hi <= (int)(xoff + ci->output_width));
    assert(first <= v->lo && v->hi <= first + nrows);
    if (GF__GROW(&d->buf, &d->buf_cap, row * (nrows + 1), 4096) ||
        GF__GROW(&d->rows, &d->rows_cap, (size_t)nrows, 4096 / sizeof *d->rows)) {
        gf__why(why, why_len, "out of memory for JPEG scanlines");
        return GF_ENOMEM;
    }
    for (int i = 0; i < nrows; i++)
        d->rows[i] = d->buf + row * i;
    if (first > 0 && jpeg_skip_scanlines(ci, (JDIMENSION)first) != (JDIMENSION)first)
        return j_code(&d->err, "cannot skip to the crop", why, why_len);
    for (int got = 0; got < nrows;) {
        JDIMENSION k = jpeg_read_scanlines(ci, d->rows + got, (JDIMENSION)(nrows - got));
        if (k == 0)
            return j_code(&d->err, "no scanlines", why, why_len);
        got += (int)k;
    }
    if (t->strictness == GF_STRICT_WHOLE)
        read_to_end(ci, d->buf + row * (size_t)nrows);
    /* At the bottom (always, for STRICT_WHOLE), what follows the scan up to
     * EOI is cheap to read: junk there is a warning too. */
    if (t->strictness != GF_LENIENT && ci->output_scanline == ci->output_height)
        jpeg_finish_decompress(ci);
    if (d->err.eof)
        return j_code(&d->err, "", why, why_len);
    const uint8_t *span = d->buf + row * (size_t)(v->lo - first) + (size_t)(h->lo - (int)xoff) * bpp;
    return gf__decode_finish(d, span, row, kind, t, c.flip, dst, why, why_len);
}

int gf__decode_jpeg(gf__decoder *d, const uint8_t *data, size_t len, const gf__transform *t,
                    uint64_t key, uint8_t *dst, char *why, size_t why_len)
{
    d->err.eof = d->err.warned = d->err.warn_code = d->err.stop = d->err.long_seen = 0;
    d->err.strict = t->strictness != GF_LENIENT;
    d->err.msg[0] = d->err.warn[0] = 0;
    d->err.pub.num_warnings = 0;
    d->err.pub.msg_code = 0;
    int rc;
    if (setjmp(d->err.jb))
        rc = j_code(&d->err, "", why, why_len);
    else
        rc = turbo_body(d, data, len, t, key, dst, why, why_len);
    if (rc == 0 && d->err.warned) { /* LENIENT: what STRICT would have said */
        d->warned = 1;
        j_code(&d->err, "", d->warn, sizeof d->warn);
    }
    jpeg_abort_decompress(&d->ci);
    return rc;
}

int gf__decode_jpeg_init(gf__decoder *d)
{
    d->ci.err = jpeg_std_error(&d->err.pub);
    d->err.pub.error_exit = j_error_exit;
    d->err.pub.emit_message = j_emit_message;
    d->err.pub.output_message = j_output_message;
    if (setjmp(d->err.jb)) { /* out of memory in jpeg_create_decompress */
        jpeg_destroy_decompress(&d->ci);
        return GF_ENOMEM;
    }
    jpeg_create_decompress(&d->ci); /* zeroes all but ci.err */
    d->progress.progress_monitor = j_progress;
    d->ci.progress = &d->progress;
    return 0;
}

void gf__decode_jpeg_free(gf__decoder *d)
{
    jpeg_destroy_decompress(&d->ci);
    free(d->rows);
}
