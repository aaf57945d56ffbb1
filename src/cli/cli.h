/*
 * What every gpufeed command shares: exit statuses, errors in one format
 * ("gpufeed <cmd>: <reason>" on stderr), strict parsing of option values,
 * mkdir -p, and the commands' entry points (main.c dispatches). Main thread only.
 *
 * Only the public API (gpufeed.h) is used in src/cli: the CLI is a client
 * of the library like any trainer.
 */
#ifndef GF_CLI_H
#define GF_CLI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exit statuses shared by every subcommand. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

#if defined(__GNUC__)
#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLI_PRINTF(a, b)
#endif

/* "gpufeed <cmd>: <message>\n" on stderr. */
void cli_error(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);
/* cli_error with the library's message (gf_last_error or
 * gf_index_last_error), or the name of rc when it has none. */
void cli_error_msg(const char *cmd, const char *msg, int rc);

/* Strict parsers: the whole string must be a number within [min, max].
 * On failure they print "gpufeed <cmd>: --<opt>: ..." and return -1. */
int cli_parse_int(const char *cmd, const char *opt, const char *s, long min,
                  long max, int *out);
int cli_parse_u64(const char *cmd, const char *opt, const char *s,
                  uint64_t *out);
/* A finite number in [min, max]. */
int cli_parse_double(const char *cmd, const char *opt, const char *s,
                     double min, double max, double *out);
/* "WxH" (or a single "S" meaning SxS) into w, h, each in [1, max]. */
int cli_parse_size(const char *cmd, const char *opt, const char *s, int max,
                   int *w, int *h);
/* Index of s in the NULL-terminated names, or -1 with an error printed. */
int cli_parse_choice(const char *cmd, const char *opt, const char *s,
                     const char *const *names);

/* A comma-separated list ("1,2,4") of 1..max_n integers, each in
 * [min, max], into out[0, *n). On failure prints "gpufeed <cmd>: --<opt>:
 * ..." and returns -1. A single number is a list of one. */
int cli_parse_int_list(const char *cmd, const char *opt, const char *s, long min, long max,
                       int *out, int max_n, int *n);

/* mkdir -p: path and its missing parents (mode 0777 before the umask).
 * Returns 0 or -errno (-ENAMETOOLONG past 4095 bytes). */
int cli_mkdir_p(const char *path);

/* make-dataset as a call (make_dataset.c): writes classes x
 * per_class width x height quality-90 JPEGs into dir (made if missing,
 * refused if not empty) with `threads` workers (0: all cores). Prints its
 * one-line summary unless quiet. Returns 0, or -1 with the reason printed
 * as "gpufeed <cmd>: ...". */
int cli_make_dataset(const char *cmd, const char *dir, int classes, int per_class, int width,
                     int height, uint64_t seed, int threads, int quiet);

/* Subcommands: argv[0] is the subcommand's name; returns the exit status. */
int cmd_make_dataset(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_prepare(int argc, char **argv);
int cmd_index(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_settings(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif /* GF_CLI_H */
