/*
 * The loader options that several commands share (bench, verify, train),
 * made from the library's settings table (gf_setting_at): a setting is
 * set through gf_settings_set, so its bounds and spellings are the
 * library's, and its --help line says its default. Some settings have a
 * face of the CLI's own (cli_lopt: --image-size S|WxH for height and
 * width, --copy-streams one|slot, the help texts the commands have always
 * shown), picked per command with a mask of CLI_LOPT(NAME) bits; every
 * other row of the table is an option of every loader command by its own
 * name ("max_pixels": --max-pixels N; "height": --height beside
 * --image-size), so a setting added to the table is one with no change
 * here. Values land in a gf_settings. Main thread.
 *
 * Those a command lets sweep (bench's default mode: --threads 1,2,4) take
 * comma-separated lists, kept in cli_loader_args.list (the first value
 * also goes into the settings).
 */
#ifndef GF_CLI_LOADER_OPTIONS_H
#define GF_CLI_LOADER_OPTIONS_H

#include <getopt.h>
#include <stdio.h>

#include "gpufeed.h"

typedef enum cli_lopt {
    CLI_LOPT_THREADS,        /* the three that may sweep come first */
    CLI_LOPT_PREFETCH_DEPTH,
    CLI_LOPT_BATCH_SIZE,
    CLI_LOPT_IMAGE_SIZE,
    CLI_LOPT_EPOCHS,
    CLI_LOPT_DEVICE,
    CLI_LOPT_DTYPE,
    CLI_LOPT_LAYOUT,
    CLI_LOPT_COPY_STREAMS,
    CLI_LOPT_IO,
    CLI_LOPT_DECODER,
    CLI_LOPT_TRANSFORM,
    CLI_LOPT_ON_ERROR,
    CLI_LOPT_SEED,
    CLI_LOPT_AUTOTUNE,
    CLI_LOPT_STRICTNESS,
    CLI_LOPT_RANK,           /* the share read: settings.rank, world */
    CLI_LOPT_WORLD,
    CLI_LOPT_EXTENSIONS,     /* ImageFolder files: settings.extensions */
    CLI_LOPT_ON_SHARD_ERROR, /* a damaged tar shard: settings.on_shard_error */
    CLI_LOPT_COUNT
} cli_lopt;
#define CLI_LOPT(name) (1u << CLI_LOPT_##name)
#define CLI_LOPT_SWEEPABLE (CLI_LOPT(THREADS) | CLI_LOPT(PREFETCH_DEPTH) | CLI_LOPT(BATCH_SIZE))
/* getopt_long's val for option k: keep the command's own vals below it. */
#define CLI_LOPT_VAL 0x4000
enum { CLI_LOPT_LIST_MAX = 16 };

typedef struct cli_loader_args {
    gf_settings *s;
    unsigned sweep;  /* options that take lists (a subset of CLI_LOPT_SWEEPABLE) */
    unsigned given;  /* options seen on the command line */
    /* Swept options' values, indexed by cli_lopt (THREADS .. BATCH_SIZE). */
    int list[3][CLI_LOPT_LIST_MAX];
    int n_list[3];
} cli_loader_args;

/* The help lines of the table's settings that no cli_lopt shows (not
 * shown per option: cli_loader_help prints them when `which` has it). */
#define CLI_LOPT_GENERIC (1u << CLI_LOPT_COUNT)
enum { CLI_OPTIONS_MAX = 128 };
/* A command's getopt_long array: its own options (up to one whose name is
 * NULL), then the cli_lopt options in `which`, then every setting no
 * cli_lopt shows, but those in `fixed` (names of settings the command
 * decides itself, NULL-terminated; may be NULL) and one the command has
 * an option by the name of; NULL-terminated. Valid until the next call (a
 * static array: one command per process). */
const struct option *cli_options(const struct option *own, unsigned which,
                                 const char *const *fixed);
/* ch is getopt_long's return: for one of the table's options, parses arg
 * into a and returns 1, or -1 with "gpufeed <cmd>: --<opt>: ..." printed;
 * 0 if ch is not one of them. */
int cli_loader_parse(const char *cmd, int ch, const char *arg, cli_loader_args *a);
/* For the default: of a command's option switch: cli_loader_parse, and an
 * option that is not the table's either is "unknown option 'seen'". Returns
 * 0, or -1 with the message printed. */
int cli_loader_parse_or_reject(const char *cmd, int ch, const char *arg, cli_loader_args *a,
                               const char *seen);
/* The --help lines of the options in `which` (lists shown for `sweep`;
 * CLI_LOPT_GENERIC: the settings no cli_lopt shows, after them),
 * the description starting at column `col`. own_help (may be NULL), by
 * cli_lopt: a command's own text for an option whose default or meaning
 * differs there (train's batch size); NULL entries take the table's.
 * fixed: as cli_options'. */
void cli_loader_help(FILE *f, unsigned which, unsigned sweep, int col,
                     const char *const own_help[CLI_LOPT_COUNT], const char *const *fixed);

/* Choice names, in enum order, for commands that print them back. */
extern const char *const cli_io_names[], *const cli_decoder_names[],
    *const cli_transform_names[], *const cli_on_error_names[], *const cli_device_names[],
    *const cli_dtype_names[], *const cli_layout_names[], *const cli_copy_stream_names[],
    *const cli_strictness_names[], *const cli_extensions_names[],
    *const cli_folder_walk_names[], *const cli_on_shard_error_names[];

/* After a gf_open that succeeded: one "warning: damaged shard PATH: offset
 * N: reason; K members kept, L lost" line on stderr per shard the loader
 * took in part (gf_damaged_shards), the first time this process opens
 * `data` (bench and train open one data set many times). */
void cli_warn_damaged_shards(const char *cmd, gf_loader *l, const char *data);

#endif /* GF_CLI_LOADER_OPTIONS_H */
