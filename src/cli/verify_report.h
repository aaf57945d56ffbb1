/*
 * gpufeed verify's output, apart from its options and run (verify.c):
 * text lines or one JSON object on stdout. The command's thread only.
 */
#ifndef GF_CLI_VERIFY_REPORT_H
#define GF_CLI_VERIFY_REPORT_H

#include "verify_prepared.h"
#include "gpufeed.h"

/* A prepared set's findings against its manifest, as text lines and the
 * "manifest ..." summary (before its members are decoded). */
void verify_text_prepared(const cli_prepared *p);
/* A prepared folder with no listed shard there to decode: its findings
 * are the answer. Returns the exit status. */
int verify_no_members(int json, const cli_prepared *p);
/* An open that failed because every shard was damaged (or kept no
 * sample): each damaged shard, and exit 1 (CLI_FAIL). */
int verify_all_damaged(int json, const gf_verify_result *r, const cli_prepared *p);
/* What a run that opened found, under s (the settings verify ran with);
 * paths under root (NULL: as the loader gave them); pp, a prepared set's
 * manifest findings (JSON only: text printed them first), or NULL. */
void verify_report(int json, const gf_verify_result *r, const gf_settings *s, const char *root,
                   const cli_prepared *pp);

#endif
