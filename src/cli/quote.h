/*
 * Names printed safely. File and tar member names are bytes an untrusted
 * data set chose: printed raw, a '\r', a '\n' or an escape sequence in one
 * can erase or forge lines on the terminal. Every human-readable line that
 * shows a name (or a library message, which names files) goes through
 * cli_put_quoted; JSON output keeps the exact bytes (json.c escapes them
 * per JSON). Main thread, like every command.
 */
#ifndef GF_CLI_QUOTE_H
#define GF_CLI_QUOTE_H

#include <stdio.h>

/* Writes s to f as `ls -b` and git show such names: '\\' for a backslash,
 * C escapes \a \b \t \n \v \f \r, three octal digits for the other control
 * bytes and DEL (ESC is \033), and \xNN for each byte that is not part of
 * valid UTF-8 (and for the two bytes of a C1 control, U+0080..U+009F,
 * which some terminals obey). Printable ASCII and valid UTF-8 are written
 * as they are, so ordinary names print unchanged. */
void cli_put_quoted(FILE *f, const char *s);
/* Length of the valid UTF-8 sequence at p (1..4), or 0 if invalid
 * (overlong, a surrogate, past U+10FFFF, cut short). */
int cli_utf8_len(const unsigned char *p);

/* "<head><s quoted>\n": a report's first line, naming its data set. */
void cli_put_heading(FILE *f, const char *head, const char *s);

#endif /* GF_CLI_QUOTE_H */
