/*
 * gpufeed — command-line front end: dispatches to one subcommand per file
 * (make_dataset.c, prepare.c, index.c, verify.c, bench.c, train.c, doctor.c, settings_cmd.c).
 * Each subcommand
 * parses its own options with getopt_long and returns its exit status:
 * 0 success, 1 the check/benchmark found a failure, 2 usage or setup error.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "gpufeed.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"make-dataset", cmd_make_dataset,
     "write a synthetic, learnable data set (ImageFolder or --shards N tar shards)"},
    {"prepare", cmd_prepare,
     "write a data set as tar shards made for fast loading (resized, indexed)"},
    {"index", cmd_index, "write tar shards' index sidecars (SHARD.idx), for remote shards and CRCs"},
    {"verify", cmd_verify, "decode every sample of a data set, list the bad ones"},
    {"bench", cmd_bench, "measure the input pipeline (images/s, efficiency)"},
    {"train", cmd_train, "demo: train a small CNN, synchronous loop vs gpufeed"},
    {"doctor", cmd_doctor, "check CUDA, io_uring, decoders and cores; say what is missing"},
    {"settings", cmd_settings, "list the loader settings: values, defaults, what each accepts"},
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpufeed <command> [options]\n"
            "       gpufeed --help | --version\n"
            "\n"
            "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-14s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'gpufeed <command> --help' describes a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0 ||
        strcmp(argv[1], "version") == 0) {
        printf("gpufeed %s\n", gf_version());
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    if (argv[1][0] == '-')
        cli_error(NULL, "unknown option '%s' (try 'gpufeed --help')", argv[1]);
    else
        cli_error(NULL, "unknown command '%s' (try 'gpufeed --help')", argv[1]);
    return CLI_USAGE;
}
