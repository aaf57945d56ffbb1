/*
 * The shared loader options' table and its parser and help; see
 * loader_options.h.
 */
#include "loader_options.h"

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
/* In gf_on_shard_error order. */
const char *const cli_on_shard_error_names[] = {"follow", "fail", "skip", NULL};

typedef struct lopt_def {
    const char *name;
    const char *arg;       /* NULL: a flag */
    const char *list_arg;  /* the argument when it sweeps */
    const char *help;      /* lines after the first start with '\n' */
    int (*set)(const char *cmd, const struct lopt_def *d, const char *arg, cli_loader_args *a);
    long min, max;         /* integers */
    const char *const *names; /* choices */
} lopt_def;

static int set_int(const char *cmd, const lopt_def *d, const char *arg, cli_loader_args *a);
static int set_size(const char *cmd, const lopt_def *d, const char *arg, cli_loader_args *a);
static int set_u64(const char *cmd, const lopt_def *d, const char *arg, cli_loader_args *a);
static int set_choice(const char *cmd, const lopt_def *d, const char *arg, cli_loader_args *a);
static int set_flag(const char *cmd, const lopt_def *d, const char *arg, cli_loader_args *a);

/* In cli_lopt order. */
static const lopt_def table[CLI_LOPT_COUNT] = {
    [CLI_LOPT_THREADS] = {"threads", "N", "N[,N...]", "decode threads (default: cores - 1, at least 1)", set_int, 1, 1024, NULL},
    [CLI_LOPT_PREFETCH_DEPTH] = {"prefetch-depth", "D", "D[,D...]", "batch slots in the ring (default 4)", set_int, 1, 1024, NULL},
    [CLI_LOPT_BATCH_SIZE] = {"batch-size", "B", "B[,B...]", "samples per batch (default 64)", set_int, 1, 65536, NULL},
    [CLI_LOPT_IMAGE_SIZE] = {"image-size", "S", NULL, "output size, S or WxH (default 224)", set_size, 1, 16384, NULL},
    [CLI_LOPT_EPOCHS] = {"epochs", "E", NULL, "epochs (default 1)", set_u64, 1, 0, NULL},
    [CLI_LOPT_DEVICE] = {"device", "D", NULL, "auto|cuda|cpu (default auto: CUDA if there is a GPU)", set_choice, 0, 0, cli_device_names},
    [CLI_LOPT_DTYPE] = {"dtype", "T", NULL, "u8|f32|f16|bf16 (default u8)", set_choice, 0, 0, cli_dtype_names},
    [CLI_LOPT_LAYOUT] = {"layout", "L", NULL, "nhwc|nchw (default nhwc; u8 is always nhwc)", set_choice, 0, 0, cli_layout_names},
    [CLI_LOPT_COPY_STREAMS] = {"copy-streams", "S", NULL, "CUDA: one|slot, one copy stream for the ring or one\nper slot (default one)", set_choice, 0, 0, cli_copy_stream_names},
    [CLI_LOPT_IO] = {"io", "MODE", NULL, "auto|uring|posix (default auto)", set_choice, 0, 0, cli_io_names},
    [CLI_LOPT_DECODER] = {"decoder", "D", NULL, "auto|stb|turbo (default auto)", set_choice, 0, 0, cli_decoder_names},
    [CLI_LOPT_TRANSFORM] = {"transform", "T", NULL, "train|eval (default train)", set_choice, 0, 0, cli_transform_names},
    [CLI_LOPT_ON_ERROR] = {"on-error", "E", NULL, "skip|fail (default skip)", set_choice, 0, 0, cli_on_error_names},
    [CLI_LOPT_SEED] = {"seed", "S", NULL, "seed (default 0)", set_u64, 0, 0, NULL},
    [CLI_LOPT_AUTOTUNE] = {"autotune", NULL, NULL, "let the loader add threads and depth while it runs\n(from --threads, up to cores - 1; depth up to\n--prefetch-depth) and report what it chose", set_flag, 0, 0, NULL},
    [CLI_LOPT_STRICTNESS] = {"strictness", "M", NULL, "strict|lenient|whole: a decoder warning (a damaged\nJPEG scan) fails the sample, or is counted and the\nsample used (lenient); whole: strict, and every\nJPEG read to its end (default strict)", set_choice, 0, 0, cli_strictness_names},
    [CLI_LOPT_RANK] = {"rank", "R", NULL, "read share R of --world (default: the launcher's\nRANK, OMPI_COMM_WORLD_RANK or SLURM_PROCID, else 0)", set_int, 0, (1L << 30) - 1, NULL},
    [CLI_LOPT_WORLD] = {"world", "W", NULL, "shares the data set is split into (default: the\nlauncher's WORLD_SIZE, OMPI_COMM_WORLD_SIZE or\nSLURM_NTASKS, else 1)", set_int, 1, 1L << 30, NULL},
    [CLI_LOPT_ON_SHARD_ERROR] = {"on-shard-error", "P", NULL, "follow|fail|skip: a damaged tar shard fails the open,\nor its members before the damage are kept and it is\nreported (default follow: as --on-error)", set_choice, 0, 0, cli_on_shard_error_names},
    [CLI_LOPT_EXTENSIONS] = {"extensions", "X", NULL, "torchvision|all: the files an ImageFolder indexes:\ntorchvision's (.jpg .jpeg .png .ppm .bmp .pgm .tif\n.tiff .webp; the default), or also .gif .tga .psd\n.pnm .pbm", set_choice, 0, 0, cli_extensions_names},
};

static int index_of(const lopt_def *d)
{
    return (int)(d - table);
}

static int set_int(const char *cmd, const lopt_def *d, const char *arg, cli_loader_args *a)
{
    int k = index_of(d), v;
    if (a->sweep & (1u << k)) {
        if (cli_parse_int_list(cmd, d->name, arg, d->min, d->max, a->list[k], CLI_LOPT_LIST_MAX,
                               &a->n_list[k]))
            return -1;
        v = a->list[k][0];
    } else if (cli_parse_int(cmd, d->name, arg, d->min, d->max, &v)) {
        return -1;
    }
    switch (k) {
    case CLI_LOPT_THREADS: a->s->threads = v; break;
    case CLI_LOPT_PREFETCH_DEPTH: a->s->prefetch_depth = v; break;
    case CLI_LOPT_RANK: a->s->rank = v; break;
    case CLI_LOPT_WORLD: a->s->world = v; break;
    default: a->s->batch_size = v; break;
    }
    return 0;
}

static int set_size(const char *cmd, const lopt_def *d, const char *arg, cli_loader_args *a)
{
    return cli_parse_size(cmd, d->name, arg, (int)d->max, &a->s->width, &a->s->height);
}

static int set_u64(const char *cmd, const lopt_def *d, const char *arg, cli_loader_args *a)
{
    uint64_t u;
    if (cli_parse_u64(cmd, d->name, arg, &u))
        return -1;
    if (u < (uint64_t)d->min) {
        cli_error(cmd, "--%s: at least %ld", d->name, d->min);
        return -1;
    }
    if (index_of(d) == CLI_LOPT_EPOCHS)
        a->s->epochs = u;
    else
        a->s->seed = u;
    return 0;
}

static int set_choice(const char *cmd, const lopt_def *d, const char *arg, cli_loader_args *a)
{
    int v = cli_parse_choice(cmd, d->name, arg, d->names);
    if (v < 0)
        return -1;
    switch (index_of(d)) {
    case CLI_LOPT_DEVICE: a->s->device = (gf_device)v; break;
    case CLI_LOPT_DTYPE: a->s->dtype = (gf_dtype)v; break;
    case CLI_LOPT_LAYOUT: a->s->layout = (gf_layout)v; break;
    case CLI_LOPT_COPY_STREAMS: a->s->copy_stream_per_slot = v; break;
    case CLI_LOPT_IO: a->s->io = (gf_io)v; break;
    case CLI_LOPT_DECODER: a->s->decoder = (gf_decoder_kind)v; break;
    case CLI_LOPT_TRANSFORM: a->s->transform = (gf_transform)v; break;
    case CLI_LOPT_STRICTNESS: a->s->strictness = (gf_strictness)v; break;
    case CLI_LOPT_EXTENSIONS: a->s->extensions = (gf_extensions)v; break;
    case CLI_LOPT_ON_SHARD_ERROR: a->s->on_shard_error = (gf_on_shard_error)v; break;
    default: a->s->on_error = (gf_on_error)v; break;
    }
    return 0;
}

static int set_flag(const char *cmd, const lopt_def *d, const char *arg, cli_loader_args *a)
{
    (void)cmd, (void)d, (void)arg;
    a->s->autotune = 1;
    return 0;
}

void cli_loader_longopts(unsigned which, struct option *opts, int *n)
{
    for (int k = 0; k < CLI_LOPT_COUNT; k++)
        if (which & (1u << k))
            opts[(*n)++] = (struct option){table[k].name,
                                           table[k].arg ? required_argument : no_argument, NULL,
                                           CLI_LOPT_VAL + k};
}

int cli_loader_parse(const char *cmd, int ch, const char *arg, cli_loader_args *a)
{
    if (ch < CLI_LOPT_VAL || ch >= CLI_LOPT_VAL + CLI_LOPT_COUNT)
        return 0;
    const lopt_def *d = &table[ch - CLI_LOPT_VAL];
    a->given |= 1u << (ch - CLI_LOPT_VAL);
    return d->set(cmd, d, arg, a) < 0 ? -1 : 1;
}

int cli_loader_parse_or_reject(const char *cmd, int ch, const char *arg, cli_loader_args *a,
                               const char *seen)
{
    int rc = cli_loader_parse(cmd, ch, arg, a);
    if (rc == 0)
        cli_error(cmd, "unknown option '%s' (try --help)", seen);
    return rc == 1 ? 0 : -1;
}

void cli_loader_help(FILE *f, unsigned which, unsigned sweep, int col,
                     const char *const own_help[CLI_LOPT_COUNT])
{
    for (int k = 0; k < CLI_LOPT_COUNT; k++) {
        const lopt_def *d = &table[k];
        char head[64];
        if (!(which & (1u << k)))
            continue;
        const char *arg = (sweep & (1u << k)) && d->list_arg ? d->list_arg : d->arg;
        snprintf(head, sizeof head, "--%s%s%s", d->name, arg ? " " : "", arg ? arg : "");
        /* A head that overflows the column pushes the text along by two. */
        int pad = col - 2 - (int)strlen(head);
        fprintf(f, "  %s%*s", head, pad < 1 ? 2 : pad, "");
        const char *help = own_help && own_help[k] ? own_help[k] : d->help;
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
