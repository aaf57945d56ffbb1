/* Binary PGM and PPM (P5, P6) at maxval 255, what `gpufeed prepare
 * --format raw` stores, on the decode threads. The file's bytes are the
 * pixels, so nothing is decoded or copied: the resampler reads the crop's
 * span straight from the data, rows W x channels bytes apart, and
 * channels are converted (decoder.c) only when the file's are not the
 * output's.
 *
 * Same pixels and errors as stb_image's path, by construction: the header
 * is walked by the very check that path runs first (decode_check.c: its
 * reasons, GF_ETRUNC for a short raster), then the pixel limit, the crop
 * plan (gf__plan) and gf__decode_finish, as there; stb_image hands back
 * these same bytes at maxval 255. Any other maxval is scaled as PIL
 * scales it (gf__decode_pnm_scaled, decode_pnm.c), under every decoder;
 * maxval 255 under decoder = STB, and what stb_image refuses by size (a
 * side over 2^24, data over 2 GiB), are declined to stb_image. */
#include "decode_formats.h"

enum { STB_MAX_SIDE = 1 << 24 }; /* stb_image's STBI_MAX_DIMENSIONS */

int gf__decode_pnm_raw(gf__decoder *d, const uint8_t *data, size_t len,
                       const gf__transform *t, uint64_t key, uint8_t *dst, char *why,
                       size_t why_len)
{
    if (len > INT32_MAX) /* stb_image's refusal comes before the header's */
        return GF__DECLINED;
    gf__pnm_header hdr;
    int rc = gf__check_pnm_binary(data, len, &hdr, why, why_len);
    if (rc < 0)
        return rc;
    if (hdr.maxval == 255 && t->decoder == GF_DECODER_STB)
        return GF__DECLINED;
    if (gf__too_big(t, F_PNM, hdr.w, hdr.h, why, why_len))
        return GF_ETOOBIG;
    if (hdr.w > STB_MAX_SIDE || hdr.h > STB_MAX_SIDE)
        return GF__DECLINED;
    if (hdr.maxval != 255)
        return gf__decode_pnm_scaled(d, data, &hdr, t, key, dst, why, why_len);
    int W = (int)hdr.w, H = (int)hdr.h, K = data[1] == '6' ? K_RGB : K_GRAY;
    gf__crop c;
    if (!(t = gf__plan_whole(d, t, W, H, key, &c, &dst, why, why_len)))
        return GF_ENOMEM;
    size_t stride = (size_t)W * K;
    const uint8_t *src = data + hdr.raster + stride * d->rs.v.lo + (size_t)d->rs.h.lo * K;
    return gf__decode_finish(d, src, stride, K, t, c.flip, dst, why, why_len);
}
