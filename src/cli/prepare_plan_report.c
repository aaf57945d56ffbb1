/*
 * gpufeed prepare --plan's report (prepare_plan.c measures): the table of
 * settings, the recommendation and the rule it followed, as text or as
 * one JSON document. The recommendation:
 *   - with --need-rate N: the smallest whole set among the settings whose
 *     images/s reach N (what `gpufeed bench` says the compute takes);
 *   - without: the fastest setting whose PSNR is at least PSNR_FLOOR dB,
 *     fewer bytes breaking a tie. A fixed floor is cruder than a rate the
 *     trainer needs, which is why the output asks for --need-rate.
 * The command's thread.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "prepare.h"
#include "quote.h"

#define PSNR_FLOOR 35.0

static const char *const transform_names[] = {"train", "eval"};

/* The row recommended (-1: none reaches --need-rate), and the fastest. */
static int recommend(const prep_opts *o, const plan_result *p, int *fastest)
{
    int rec = -1;
    *fastest = 0;
    for (int r = 0; r < PLAN_ROWS; r++) {
        const plan_row *q = &p->rows[r];
        if (q->images_per_s > p->rows[*fastest].images_per_s)
            *fastest = r;
        if (o->need_rate > 0) {
            if (q->images_per_s >= o->need_rate &&
                (rec < 0 || q->set_bytes < p->rows[rec].set_bytes))
                rec = r;
        } else if (q->psnr >= PSNR_FLOOR &&
                   (rec < 0 || q->images_per_s > p->rows[rec].images_per_s ||
                    (q->images_per_s == p->rows[rec].images_per_s &&
                     q->set_bytes < p->rows[rec].set_bytes))) {
            rec = r;
        }
    }
    return rec;
}

static void rule_text(const prep_opts *o, char *buf, size_t n)
{
    if (o->need_rate > 0)
        snprintf(buf, n, "the fewest bytes among the settings that reach --need-rate %.0f "
                 "images/s", o->need_rate);
    else
        snprintf(buf, n, "no --need-rate: the most images/s among the settings within "
                 "%.0f dB PSNR, fewer bytes on a tie", PSNR_FLOOR);
}

/* "1.2 GB": decimal units, as prepare's summary counts KB. */
static const char *human(double b, char *buf, size_t n)
{
    static const char *const unit[] = {"B", "KB", "MB", "GB", "TB", "PB"};
    int u = 0;
    while (b >= 1000 && u < 5) {
        b /= 1000;
        u++;
    }
    snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
    return buf;
}

/* The prepare options that make row r's set (never the original's). */
static void row_flags(const prep_opts *o, const plan_row *q, char *buf, size_t n)
{
    if (q->format == PREP_RAW)
        snprintf(buf, n, "--max-side %d --format raw", q->max_side);
    else
        snprintf(buf, n, "--max-side %d --format jpeg --quality %d --subsampling %s",
                 q->max_side, o->quality, prep_subsampling_names[o->subsampling]);
}

/* SRC as a shell word: bare when it is plain, else in single quotes
 * (a shard pattern's braces would be expanded by the shell), or as bash's
 * $'...' when it holds bytes a terminal must not get raw. */
static void put_src(FILE *f, const char *s)
{
    int plain = s[0] && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                   "0123456789_./-+:,=") == strlen(s);
    if (plain) {
        fputs(s, f);
        return;
    }
    int printable = 1;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        printable &= *p >= 0x20 && *p < 0x7f;
    if (printable) { /* '...', each ' as '\'' */
        fputc('\'', f);
        for (const char *p = s; *p; p++)
            if (*p == '\'')
                fputs("'\\''", f);
            else
                fputc(*p, f);
        fputc('\'', f);
        return;
    }
    /* bash's $'...': control and non-ASCII bytes as \xNN, never raw to the terminal */
    fputs("$'", f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\\' || *p == '\'')
            fprintf(f, "\\%c", *p);
        else if (*p >= 0x20 && *p < 0x7f)
            fputc(*p, f);
        else
            fprintf(f, "\\x%02x", *p);
    }
    fputc('\'', f);
}

static void report_text(const prep_opts *o, const plan_result *p, int rec, int fastest)
{
    char a[32], b[32], rule[160];
    cli_put_heading(stdout, "gpufeed prepare --plan  ", o->src);
    printf("  %llu samples in the set; %llu sampled, evenly spread (--seed %llu): %llu "
           "decoded, %zu bad (left out of every setting)\n",
           (unsigned long long)p->set_samples, (unsigned long long)p->sampled,
           (unsigned long long)o->s.seed, (unsigned long long)p->good, p->bad.n_bad);
    for (size_t i = 0; i < p->bad.n_bad; i++) {
        fputs("  BAD ", stdout);
        cli_put_quoted(stdout, p->bad.bad[i].reason);
        printf(" (%s)\n", gf_err_name(p->bad.bad[i].code));
    }
    printf("  whole set: the sample's bytes x %llu / %llu (tar headers, .cls, .key and the "
           "index sidecar counted; the original: its bytes alone)\n",
           (unsigned long long)p->set_samples, (unsigned long long)p->sampled);
    printf("  images/s: the loader over the prepared sample, %s %dx%d, %d thread%s, batch %d, "
           "on the CPU; median of %d passes of %llu images, in the page cache (decode, not "
           "storage)\n",
           transform_names[o->s.transform == GF_TRANSFORM_EVAL], o->s.width, o->s.height,
           p->threads, p->threads == 1 ? "" : "s", p->batch, p->passes,
           (unsigned long long)p->pass_images);
    printf("  PSNR: the eval %dx%d centre crop against the same crop of the original's "
           "decode (exact: identical)\n\n",
           o->s.width, o->s.height);
    printf("   %-16s %11s %11s %10s %8s\n", "setting", "whole set", "per image", "images/s",
           "PSNR dB");
    for (int r = 0; r < PLAN_ROWS; r++) {
        const plan_row *q = &p->rows[r];
        char psnr[16];
        if (isinf(q->psnr))
            snprintf(psnr, sizeof psnr, "exact");
        else
            snprintf(psnr, sizeof psnr, "%.1f", q->psnr);
        printf(" %c %-16s %11s %11s %10.0f %8s\n", r == rec ? '+' : ' ', q->name,
               human(q->set_bytes, a, sizeof a),
               human((double)q->bytes / (double)p->good, b, sizeof b), q->images_per_s, psnr);
    }
    rule_text(o, rule, sizeof rule);
    printf("  + recommended: %s\n\n", rule);
    if (rec < 0) {
        if (o->need_rate > 0)
            printf("  recommendation: no setting reaches %.0f images/s; the fastest is %s "
                   "(%.0f): more --threads, a smaller --image-size or more cores\n",
                   o->need_rate, p->rows[fastest].name, p->rows[fastest].images_per_s);
        else
            printf("  recommendation: no setting keeps %.0f dB PSNR\n", PSNR_FLOOR);
    } else if (rec == 0) {
        printf("  recommendation: keep the originals (%.0f images/s, %s)\n",
               p->rows[0].images_per_s, human(p->rows[0].set_bytes, a, sizeof a));
    } else {
        char flags[128];
        row_flags(o, &p->rows[rec], flags, sizeof flags);
        printf("  recommendation: %s (%.0f images/s, %s, %.1f dB):\n    gpufeed prepare ",
               p->rows[rec].name, p->rows[rec].images_per_s,
               human(p->rows[rec].set_bytes, a, sizeof a), p->rows[rec].psnr);
        put_src(stdout, o->src);
        printf(" OUT %s\n", flags);
    }
    if (o->need_rate <= 0)
        printf("  the rate your trainer needs decides best: `gpufeed bench` prints it as "
               "\"compute ... images/s\"; pass it as --need-rate N\n");
}

static void report_json(const prep_opts *o, gf_index *ix, const plan_result *p, int rec,
                        int fastest)
{
    char rule[160], flags[128];
    cli_json j;
    cli_json_init(&j, stdout);
    cli_json_object(&j);
    cli_json_kstr(&j, "source", o->src);
    cli_json_kuint(&j, "samples", p->set_samples);
    cli_json_kuint(&j, "sampled", p->sampled);
    cli_json_kuint(&j, "decoded", p->good);
    cli_json_kuint(&j, "bad", p->bad.n_bad);
    cli_json_kuint(&j, "seed", o->s.seed);
    cli_json_kstr(&j, "transform", transform_names[o->s.transform == GF_TRANSFORM_EVAL]);
    int size[2] = {o->s.height, o->s.width};
    cli_json_kints(&j, "image_size", size, 2);
    cli_json_kint(&j, "threads", p->threads);
    cli_json_kint(&j, "batch_size", p->batch);
    cli_json_kint(&j, "passes", p->passes);
    cli_json_kuint(&j, "pass_images", p->pass_images);
    cli_json_key(&j, "settings");
    cli_json_array(&j);
    for (int r = 0; r < PLAN_ROWS; r++) {
        const plan_row *q = &p->rows[r];
        cli_json_object(&j);
        cli_json_kstr(&j, "name", q->name);
        cli_json_kstr(&j, "format", q->format < 0 ? "original" : prep_format_names[q->format]);
        cli_json_kint(&j, "max_side", q->max_side);
        if (q->format == PREP_JPEG)
            cli_json_kint(&j, "quality", o->quality);
        else
            cli_json_knull(&j, "quality");
        cli_json_kuint(&j, "bytes", (uint64_t)llround(q->set_bytes)); /* %g would round it */
        cli_json_key(&j, "bytes_per_image");
        cli_json_fixed(&j, (double)q->bytes / (double)p->good, 1);
        cli_json_kuint(&j, "sample_bytes", q->bytes);
        cli_json_knum(&j, "images_per_s", q->images_per_s);
        cli_json_knum(&j, "psnr_db", q->psnr); /* null when exact */
        cli_json_kbool(&j, "exact", isinf(q->psnr));
        if (q->format < 0)
            cli_json_knull(&j, "prepare_args");
        else {
            row_flags(o, q, flags, sizeof flags);
            cli_json_kstr(&j, "prepare_args", flags);
        }
        cli_json_object_end(&j);
    }
    cli_json_array_end(&j);
    if (o->need_rate > 0)
        cli_json_knum(&j, "need_rate", o->need_rate);
    else
        cli_json_knull(&j, "need_rate");
    rule_text(o, rule, sizeof rule);
    cli_json_kstr(&j, "rule", rule);
    cli_json_kstr_or_null(&j, "recommended", rec >= 0 ? p->rows[rec].name : NULL);
    cli_json_kstr(&j, "fastest", p->rows[fastest].name);
    cli_json_knum(&j, "seconds", p->seconds);
    prep_put_bad_samples(&j, ix, &p->bad);
    cli_json_object_end(&j);
    cli_json_end(&j);
}

void prep_plan_report(const prep_opts *o, gf_index *ix, const plan_result *p)
{
    int fastest, rec = recommend(o, p, &fastest);
    if (o->json)
        report_json(o, ix, p, rec, fastest);
    else
        report_text(o, p, rec, fastest);
}
