/* Decode + CPU transform of one sample, straight into its batch cell. */
#ifndef GF_DECODE_H
#define GF_DECODE_H

#include "decoder.h"

void gf__transform_from_settings(gf__transform *t, const gf_settings *s);

int gf__decoder_create(gf__decoder **out);
void gf__decoder_destroy(gf__decoder *d);
/* Scratch bytes held now (for stats). */
size_t gf__decoder_scratch_bytes(const gf__decoder *d);
/* Seconds spent in the resampler, and in all of gf__decode, since create
 * (for benchmarks: decode cost = total - resample). */
void gf__decoder_times(const gf__decoder *d, double *total_s, double *resample_s);
/* The last decoded sample's source size and crop plan, in its pixels. */
void gf__decoder_geometry(const gf__decoder *d, int *src_w, int *src_h, gf__crop *crop);
/* The reason (and *code) STRICT would have given the last sample, when it
 * decoded with GF__WARNED; never NULL. */
const char *gf__decoder_warning(const gf__decoder *d, int *code);
/* A flag a decode polls where a decoder loops on untrusted input (the
 * JPEG progress monitor, the PNG inflate loop): once it is nonzero the decode ends with
 * GF_EBUSY, "cancelled". The loader points its workers' decoders at the
 * flag stop_pipeline raises, so gf_close does not wait out a long decode.
 * NULL (the default): never cancelled. */
void gf__decoder_set_cancel(gf__decoder *d, const atomic_int *cancel);

/* *used: the decoder, plus GF__FLIPPED when t->defer_flip is set and the
 * sample is to be mirrored (by the device kernel, not here), plus
 * GF__WARNED when it decoded although the decoder warned (LENIENT).
 * GF__USED_RAW: a binary PNM read in place or scaled by gpufeed
 * (decode_pnm_raw.c), counted in the stats as stb_image's path. */
enum {
    GF__USED_STB = 1,
    GF__USED_TURBO = 2,
    GF__FLIPPED = 4,
    GF__WARNED = 8,
    GF__USED_SPNG = 16,
    GF__USED_WEBP = 32,
    GF__USED_RAW = 64,
};

/* The decoders the stats count by (GF_DECODED_MAP): GF__DECODED_turbo ..,
 * indexes of the loader's decoded[] and gf_stats' decoded_<name>. */
enum {
#define GF__DECODED_ENUM_(name) GF__DECODED_##name,
    GF_DECODED_MAP(GF__DECODED_ENUM_)
#undef GF__DECODED_ENUM_
    GF__DECODERS
};

/* The counter a decoded sample's used (GF__USED_*) goes to: its own
 * library's, else stb_image's (gpufeed's raw PNM reader included). */
static inline int gf__decoded_by(int used)
{
    return used & GF__USED_TURBO  ? GF__DECODED_turbo
           : used & GF__USED_SPNG ? GF__DECODED_spng
           : used & GF__USED_WEBP ? GF__DECODED_webp
                                  : GF__DECODED_stb;
}

/* Decodes data[0..len) and writes t->out_h * t->out_w * t->channels bytes
 * (HWC) to dst. All randomness comes from key. Returns 0 and *used
 * (GF__USED_*), or GF_ETRUNC / GF_ECORRUPT / GF_EFORMAT / GF_ETOOBIG /
 * GF_EEMPTY / GF_ENOMEM with a reason in why. No allocation is sized by
 * the header before the pixel limit is checked. */
int gf__decode(gf__decoder *d, const uint8_t *data, size_t len, const gf__transform *t,
               uint64_t key, uint8_t *dst, int *used, char *why, size_t why_len);

#endif
