/*
 * The shared loader options: the CLI's own faces of some settings, every
 * other setting of the library's table by its name, their parser and
 * help, and the getopt_long array of a command; see loader_options.h.
 */
#include "loader_options.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "quote.h"

const char *const cli_io_names[] = {"auto", "uring", "posix", NULL};
const char *const cli_decoder_names[] = {"auto", "stb", "turbo", NULL};
const char *const cli_transform_names[] = {"train", "eval", NULL};
const char *const cli_on_error_names[] = {"skip", "fail", NULL};
/* In enum order (gf_device, gf_dtype, gf_layout). */
const char *const cli_device_names[] = {"auto", "cuda", "cpu", NULL};
const char *const cli_dtype_names[] = {"u8", "f32", "f16", "bf16", NULL};
const char *const cli_layout_names[] = {"nhwc", "nchw", NULL};
const char *const cli_copy_stream_names[] = {"one", "slot", NULL};
/* In gf_strictness order. */
const char *const cli_strictness_names[] = {"strict", "lenient", "whole", NULL};
/* In gf_extensions order. */
const char *const cli_extensions_names[] = {"torchvision", "all", NULL};
/* In gf_folder_walk order. */
const char *const cli_folder_walk_names[] = {"gpufeed", "torchvision", NULL};
/* In gf_on_shard_error order. */
const char *const cli_on_shard_error_names[] = {"follow", "fail", "skip", NULL};

/* The CLI's own face of some settings: an option name, its argument and
 * help as the commands have always shown them; the values are the library
 * table's (gf_settings_set), so its bounds and spellings hold here too.
 * Every other row of the table is an option by its own name (generic). */
typedef struct lopt_def {
    const char *name;
    const char *arg;       /* NULL: a flag */
    const char *list_arg;  /* the argument when it sweeps */
    const char *help;      /* lines after the first start with '\n' */
    const char *setting;   /* the table's row; NULL: image-size (height, width) */
    const char *const *names; /* the CLI's own spellings, value i = "i" (copy-streams) */
} lopt_def;

/* In cli_lopt order. */
static const lopt_def table[CLI_LOPT_COUNT] = {
    [CLI_LOPT_THREADS] = {"threads", "N", "N[,N...]", "decode threads (default: cores - 1, at least 1)", "threads", NULL},
    [CLI_LOPT_PREFETCH_DEPTH] = {"prefetch-depth", "D", "D[,D...]", "batch slots in the ring (default 4)", "prefetch_depth", NULL},
    [CLI_LOPT_BATCH_SIZE] = {"batch-size", "B", "B[,B...]", "samples per batch (default 64)", "batch_size", NULL},
    [CLI_LOPT_IMAGE_SIZE] = {"image-size", "S", NULL, "output size, S or WxH (default 224)", NULL, NULL},
    [CLI_LOPT_EPOCHS] = {"epochs", "E", NULL, "epochs (default 1; 0: unbounded)", "epochs", NULL},
    [CLI_LOPT_DEVICE] = {"device", "D", NULL, "auto|cuda|cpu (default auto: CUDA if there is a GPU)", "device", NULL},
    [CLI_LOPT_DTYPE] = {"dtype", "T", NULL, "u8|f32|f16|bf16 (default u8; also uint8, float32,\nfloat16, bfloat16)", "dtype", NULL},
    [CLI_LOPT_LAYOUT] = {"layout", "L", NULL, "nhwc|nchw (default nhwc; u8 is always nhwc)", "layout", NULL},
    [CLI_LOPT_COPY_STREAMS] = {"copy-streams", "S", NULL, "CUDA: one|slot, one copy stream for the ring or one\nper slot (default one)", "copy_stream_per_slot", cli_copy_stream_names},
    [CLI_LOPT_IO] = {"io", "MODE", NULL, "auto|uring|posix (default auto: io_uring, the decode\nthreads reading what the page cache holds themselves;\nuring: io_uring alone; posix: pread alone)", "io", NULL},
    [CLI_LOPT_DECODER] = {"decoder", "D", NULL, "auto|stb|turbo (default auto)", "decoder", NULL},
    [CLI_LOPT_TRANSFORM] = {"transform", "T", NULL, "train|eval (default train)", "transform", NULL},
    [CLI_LOPT_ON_ERROR] = {"on-error", "E", NULL, "skip|fail (default skip)", "on_error", NULL},
    [CLI_LOPT_SEED] = {"seed", "S", NULL, "seed (default 0)", "seed", NULL},
    [CLI_LOPT_AUTOTUNE] = {"autotune", NULL, NULL, "let the loader add threads and depth while it runs\n(from --threads, up to cores - 1; depth up to\n--prefetch-depth) and report what it chose", "autotune", NULL},
    [CLI_LOPT_STRICTNESS] = {"strictness", "M", NULL, "strict|lenient|whole: a decoder warning (a damaged\nJPEG scan) fails the sample, or is counted and the\nsample used (lenient); whole: strict, and every\nJPEG read to its end (default strict)", "strictness", NULL},
    [CLI_LOPT_RANK] = {"rank", "R", NULL, "read share R of --world (default: the launcher's\nRANK, OMPI_COMM_WORLD_RANK or SLURM_PROCID, else 0)", "rank", NULL},
    [CLI_LOPT_WORLD] = {"world", "W", NULL, "shares the data set is split into (default: the\nlauncher's WORLD_SIZE, OMPI_COMM_WORLD_SIZE or\nSLURM_NTASKS, else 1)", "world", NULL},
    [CLI_LOPT_ON_SHARD_ERROR] = {"on-shard-error", "P", NULL, "follow|fail|skip: a damaged tar shard fails the open,\nor its members before the damage are kept and it is\nreported (default follow: as --on-error)", "on_shard_error", NULL},
    [CLI_LOPT_EXTENSIONS] = {"extensions", "X", NULL, "torchvision|all: the files an ImageFolder indexes:\ntorchvision's (.jpg .jpeg .png .ppm .bmp .pgm .tif\n.tiff .webp; the default), or also .gif .tga .psd\n.pnm .pbm", "extensions", NULL},
};

/* getopt_long's val of the table's row i, when it is a generic option. */
#define GENERIC_VAL (CLI_LOPT_VAL + CLI_LOPT_COUNT)

/* "max_pixels" -> "max-pixels" in out. */
static const char *option_name(const char *setting, char *out, size_t len)
{
    size_t i = 0;
    for (; setting[i] && i + 1 < len; i++)
        out[i] = setting[i] == '_' ? '-' : setting[i];
    out[i] = '\0';
    return out;
}

/* 1 if row r's option name is one of the CLI's own faces (--threads):
 * then that face is its option, in the commands that take it. */
static int curated(const gf_setting_info *r)
{
    char opt[40];
    option_name(r->name, opt, sizeof opt);
    for (int k = 0; k < CLI_LOPT_COUNT; k++)
        if (strcmp(table[k].name, opt) == 0)
            return 1;
    return 0;
}

/* gf_settings_set, its reason printed as "--opt: reason" (the library's
 * starts with the setting's name, which the option's replaces). */
static int set(const char *cmd, const char *opt, const char *setting, const char *value,
               gf_settings *s)
{
    char why[320];
    if (gf_settings_set(s, setting, value, why, sizeof why) == 0)
        return 0;
    size_t n = strlen(setting);
    const char *reason = strncmp(why, setting, n) == 0 && why[n] == ':' ? why + n + 2 : why;
    cli_error(cmd, "--%s: %s", opt, reason);
    return -1;
}

/* A sweepable option's comma-separated list: each value checked as the
 * setting, the first left in the settings. */
static int set_list(const char *cmd, const lopt_def *d, int k, const char *arg,
                    cli_loader_args *a)
{
    const char *p = arg;
    int *v = (int *)((char *)a->s + gf_setting_find(d->setting)->offset);
    a->n_list[k] = 0;
    for (;;) {
        char item[32];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof item) {
            cli_error(cmd, "--%s: '%s' is not a list of integers (e.g. 1,2,4)", d->name, arg);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = 0;
        if (a->n_list[k] == CLI_LOPT_LIST_MAX) {
            cli_error(cmd, "--%s: at most %d values", d->name, CLI_LOPT_LIST_MAX);
            return -1;
        }
        if (set(cmd, d->name, d->setting, item, a->s) < 0)
            return -1;
        a->list[k][a->n_list[k]++] = *v;
        p += len;
        if (!*p)
            break;
        p++; /* the comma: a trailing one leaves an empty item, refused above */
    }
    *v = a->list[k][0];
    return 0;
}

static int set_curated(const char *cmd, int k, const char *arg, cli_loader_args *a)
{
    const lopt_def *d = &table[k];
    if (!d->setting)
        return cli_parse_size(cmd, d->name, arg, (int)gf_setting_find("height")->max_int,
                              &a->s->width, &a->s->height);
    if (a->sweep & (1u << k))
        return set_list(cmd, d, k, arg, a);
    if (d->names) { /* the CLI's own spellings of the values 0, 1, ... */
        int v = cli_parse_choice(cmd, d->name, arg, d->names);
        char text[16];
        snprintf(text, sizeof text, "%d", v);
        return v < 0 ? -1 : set(cmd, d->name, d->setting, text, a->s);
    }
    return set(cmd, d->name, d->setting, arg ? arg : "1", a->s);
}

/* 1 if row r is an option by its own name: no CLI face covers it and the
 * command does not fix it (fixed: setting names, NULL-terminated, or NULL). */
static int generic(const gf_setting_info *r, const char *const *fixed)
{
    for (; fixed && *fixed; fixed++)
        if (strcmp(*fixed, r->name) == 0)
            return 0;
    return !curated(r);
}

/* 1 if the command has an option of its own by that name. */
static int own_name(const struct option *own, const char *name)
{
    for (; own->name; own++)
        if (strcmp(own->name, name) == 0)
            return 1;
    return 0;
}

const struct option *cli_options(const struct option *own, unsigned which,
                                 const char *const *fixed)
{
    /* One command runs per process, on the main thread: the names live here. */
    static struct option opts[CLI_OPTIONS_MAX];
    static char names[CLI_OPTIONS_MAX][40];
    int n = 0;
    for (; own[n].name; n++)
        opts[n] = own[n];
    for (int k = 0; k < CLI_LOPT_COUNT; k++)
        if (which & (1u << k))
            opts[n++] = (struct option){table[k].name,
                                        table[k].arg ? required_argument : optional_argument,
                                        NULL, CLI_LOPT_VAL + k};
    for (int i = 0; i < gf_setting_count() && n + 1 < CLI_OPTIONS_MAX; i++) {
        const gf_setting_info *r = gf_setting_at(i);
        const char *name = option_name(r->name, names[n], sizeof names[n]);
        if (!generic(r, fixed) || own_name(own, name))
            continue;
        opts[n++] = (struct option){name,
                                    r->type == GF_SETTING_FLAG ? optional_argument
                                                               : required_argument,
                                    NULL, GENERIC_VAL + i};
    }
    opts[n] = (struct option){NULL, 0, NULL, 0};
    return opts;
}

int cli_loader_parse(const char *cmd, int ch, const char *arg, cli_loader_args *a)
{
    if (ch >= CLI_LOPT_VAL && ch < GENERIC_VAL) {
        a->given |= 1u << (ch - CLI_LOPT_VAL);
        return set_curated(cmd, ch - CLI_LOPT_VAL, arg, a) < 0 ? -1 : 1;
    }
    const gf_setting_info *r = gf_setting_at(ch - GENERIC_VAL);
    if (ch < GENERIC_VAL || !r)
        return 0;
    char opt[40]; /* a PATH keeps arg: argv outlives every loader */
    return set(cmd, option_name(r->name, opt, sizeof opt), r->name, arg ? arg : "1", a->s) < 0
               ? -1
               : 1;
}

int cli_loader_parse_or_reject(const char *cmd, int ch, const char *arg, cli_loader_args *a,
                               const char *seen)
{
    int rc = cli_loader_parse(cmd, ch, arg, a);
    if (rc == 0)
        cli_error(cmd, "unknown option '%s' (try --help)", seen);
    return rc == 1 ? 0 : -1;
}

/* "  --head    help" lines, the help's later lines ('\n') at column col. */
static void help_lines(FILE *f, const char *head, const char *help, int col)
{
    /* A head that overflows the column pushes the text along by two. */
    int pad = col - 2 - (int)strlen(head);
    fprintf(f, "  %s%*s", head, pad < 1 ? 2 : pad, "");
    for (const char *p = help; *p;) {
        size_t len = strcspn(p, "\n");
        fprintf(f, "%.*s\n", (int)len, p);
        p += len;
        if (*p == '\n') {
            p++;
            fprintf(f, "%*s", col, "");
        }
    }
}

/* A generic option's argument: its choices, or what kind of value. */
static void generic_arg(const gf_setting_info *r, char *out, size_t len)
{
    static const char *const kind[] = {[GF_SETTING_INT] = " N", [GF_SETTING_U64] = " N",
                                       [GF_SETTING_FLOAT] = " X",
                                       [GF_SETTING_FLOAT4] = " X[,X,X,X]",
                                       [GF_SETTING_FLAG] = "[=0|1]",
                                       [GF_SETTING_PATH] = " PATH",
                                       [GF_SETTING_TEXT] = " TEXT"};
    if (r->type != GF_SETTING_CHOICE) {
        snprintf(out, len, "%s", kind[r->type]);
        return;
    }
    size_t used = snprintf(out, len, " ");
    for (int i = 0; r->choices[i] && used < len; i++)
        used += snprintf(out + used, len - used, "%s%s", i ? "|" : "", r->choices[i]);
}

void cli_loader_help(FILE *f, unsigned which, unsigned sweep, int col,
                     const char *const own_help[CLI_LOPT_COUNT], const char *const *fixed)
{
    char head[128], opt[40], arg[64], help[320];
    for (int k = 0; k < CLI_LOPT_COUNT; k++) {
        const lopt_def *d = &table[k];
        if (!(which & (1u << k)))
            continue;
        const char *a = (sweep & (1u << k)) && d->list_arg ? d->list_arg : d->arg;
        snprintf(head, sizeof head, "--%s%s%s", d->name, a ? " " : "", a ? a : "");
        help_lines(f, head, own_help && own_help[k] ? own_help[k] : d->help, col);
    }
    if (!(which & CLI_LOPT_GENERIC))
        return;
    for (int i = 0; i < gf_setting_count(); i++) {
        const gf_setting_info *r = gf_setting_at(i);
        if (!generic(r, fixed))
            continue;
        generic_arg(r, arg, sizeof arg);
        snprintf(head, sizeof head, "--%s%s", option_name(r->name, opt, sizeof opt), arg);
        if (r->type == GF_SETTING_PATH || r->type == GF_SETTING_TEXT)
            snprintf(help, sizeof help, "%s\n(default: %s)", r->help, r->zero);
        else if (r->flags & GF_SETTING_ZERO_PICKS)
            snprintf(help, sizeof help, "%s\n(default %s; 0: %s)", r->help, r->default_text,
                     r->zero);
        else
            snprintf(help, sizeof help, "%s\n(default %s)", r->help, r->default_text);
        help_lines(f, head, help, col);
    }
}

void cli_warn_damaged_shards(const char *cmd, gf_loader *l, const char *data)
{
    static char *warned[8]; /* data sets already warned about; main thread */
    int k = 0;
    for (; k < 8 && warned[k]; k++)
        if (strcmp(warned[k], data) == 0)
            return;
    int n = gf_damaged_shards(l, NULL, 0);
    if (n <= 0)
        return;
    if (k < 8)
        warned[k] = strdup(data); /* NULL: warned again next time, no harm */
    gf_sample_error *v = malloc((size_t)n * sizeof *v);
    if (!v) {
        fprintf(stderr, "gpufeed %s: warning: %d damaged shards taken in part\n", cmd, n);
        return;
    }
    n = gf_damaged_shards(l, v, n);
    for (int i = 0; i < n; i++) {
        fprintf(stderr, "gpufeed %s: warning: damaged shard ", cmd);
        cli_put_quoted(stderr, v[i].path);
        fputs(": ", stderr);
        cli_put_quoted(stderr, v[i].reason);
        fputc('\n', stderr);
    }
    free(v);
}
