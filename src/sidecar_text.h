/* The one writer of a tar shard's index sidecar text (SHARD.idx: DALI
 * wds2idx's v1.2 with gpufeed's tokens; dataset_shard_sidecar.c parses
 * it), so `gpufeed index` (gf__shard_index_fd) and `gpufeed prepare`
 * write the same bytes for the same shard:
 *
 *   v1.2 N shard_bytes=B shard_crc32c=XXXXXXXX labels=L1,... member_crc32c=C1,...
 *   EXT OFFSET SIZE NAME [EXT OFFSET SIZE NAME ...]     (N lines, one a sample)
 *
 * Built a sample at a time: its members into the open line, then the
 * line ended with its label and its image's CRC32C. One writer a shard;
 * any thread. The CLI compiles this file too (the library's symbols are
 * hidden). */
#ifndef GF_SIDECAR_TEXT_H
#define GF_SIDECAR_TEXT_H

#include <stddef.h>
#include <stdint.h>

typedef struct gf__sidecar_text {
    char *lines;  /* the ended lines */
    char *labels; /* the labels= value: "L1,L2,..." */
    char *crcs;   /* the member_crc32c= value: "C1,C2,..." */
    char *cur;    /* the open line's components, each after a space */
    size_t len, cap, llen, lcap, crlen, crcap, clen, ccap;
    uint64_t samples;
    int cur_bad; /* the open line has a name the format cannot hold */
} gf__sidecar_text;

/* Empties t for another shard, its buffers kept. */
void gf__sidecar_text_clear(gf__sidecar_text *t);
void gf__sidecar_text_free(gf__sidecar_text *t);

/* Drops the open line (a key that was no sample): the next member starts
 * a new one. */
void gf__sidecar_text_new_line(gf__sidecar_text *t);
/* A member into the open line: EXT OFFSET SIZE NAME, ext being the
 * extension of name[0, name_len). A name with white space or no
 * extension marks the line (gf__sidecar_text_line_ok). 0 or GF_ENOMEM. */
int gf__sidecar_text_member(gf__sidecar_text *t, const char *ext, size_t ext_len, uint64_t off,
                            uint64_t size, const char *name, size_t name_len);
/* 1 if the open line can be written: tokens are split at white space,
 * and the extension is the token DALI matches. */
int gf__sidecar_text_line_ok(const gf__sidecar_text *t);
/* Ends the open line as a sample with its label and its image member's
 * CRC32C. 0, GF_ENOMEM, or GF_EDATASET (nothing added) for a line that
 * is not ok. */
int gf__sidecar_text_sample(gf__sidecar_text *t, int32_t label, uint32_t image_crc);
/* The whole text, header and lines, for a shard of shard_bytes bytes
 * whose CRC32C is shard_crc: *text malloc'd (NUL-terminated), *len its
 * length. 0 or GF_ENOMEM. */
int gf__sidecar_text_finish(const gf__sidecar_text *t, uint64_t shard_bytes, uint32_t shard_crc,
                            char **text, size_t *len);

#endif
