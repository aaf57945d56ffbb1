/*
 * --data given once or several times, and --weights: the text a command's
 * loader opens as settings.data (bench, verify; train's --train-data).
 * One is taken as it is, a "mix:..." text too (the library reads it);
 * several make a mix, "mix:W1=D1|W2=D2|...", one weight of --weights each
 * in their order (default 1 each: drawn equally, whatever their sizes).
 * What a mix's text is, its sources' kinds and its limits are the
 * library's to check (gpufeed.h, settings.data); here only what the
 * options themselves get wrong, named by option. Main thread.
 */
#ifndef GF_CLI_DATA_OPTION_H
#define GF_CLI_DATA_OPTION_H

typedef struct cli_data {
    const char **list;   /* each --data, in order (argv's strings) */
    int n;
    const char *weights; /* --weights as given; NULL: not given */
    char *mix;           /* the text several made (malloc'd), or NULL */
} cli_data;

/* The --help lines of --weights, at column 24 as the commands print. */
#define CLI_DATA_WEIGHTS_HELP                                                             \
    "  --weights W[,W...]    with --data given more than once: the mix's weights,\n"      \
    "                        one per --data in their order (positive numbers; a\n"        \
    "                        sample is drawn from each with probability weight /\n"       \
    "                        sum; default 1 each); --mix-epoch, --mix-labels: below\n"

/* One --data (opt: its name in messages, "data" or "train-data"). Returns
 * 0, or -1 with the reason printed. */
int cli_data_add(const char *cmd, const char *opt, cli_data *d, const char *arg);
/* After the options: *data is what to open, the one given as it is or the
 * mix of several; NULL when none was given (the command says whether one
 * is required). Valid until cli_data_free. Returns 0, or -1 with the
 * reason printed as "gpufeed <cmd>: --weights: ..." or "--<opt> ...". */
int cli_data_text(const char *cmd, const char *opt, cli_data *d, const char **data);
void cli_data_free(cli_data *d);

#endif /* GF_CLI_DATA_OPTION_H */
