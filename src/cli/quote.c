/*
 * cli_put_quoted and cli_put_heading (quote.h): names escaped for a
 * terminal; and the one UTF-8 check, which json.c's escaping shares.
 */
#include "quote.h"

#include <stddef.h>
#include <stdint.h>

int cli_utf8_len(const unsigned char *p)
{
    unsigned c = p[0];
    int n;
    unsigned min;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0) {
        n = 2;
        cp = c & 0x1F;
        min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        n = 3;
        cp = c & 0x0F;
        min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        n = 4;
        cp = c & 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

void cli_put_quoted(FILE *f, const char *str)
{
    static const char letter[] = {['\a'] = 'a', ['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n',
                                  ['\v'] = 'v', ['\f'] = 'f', ['\r'] = 'r'};
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        if (*s == '\\') {
            fputs("\\\\", f);
            s++;
        } else if (*s < 0x20 || *s == 0x7f) {
            if (*s < sizeof letter && letter[*s])
                fprintf(f, "\\%c", letter[*s]);
            else
                fprintf(f, "\\%03o", *s);
            s++;
        } else if (*s < 0x80) {
            fputc(*s++, f);
        } else {
            /* U+0080..U+009F, C1 controls, are 0xc2 0x80..0x9f. */
            int n = *s == 0xc2 && s[1] < 0xa0 ? 0 : cli_utf8_len(s);
            if (n) {
                fwrite(s, 1, (size_t)n, f);
                s += n;
            } else {
                fprintf(f, "\\x%02x", *s++);
            }
        }
    }
}

void cli_put_heading(FILE *f, const char *head, const char *s)
{
    fputs(head, f);
    cli_put_quoted(f, s);
    fputc('\n', f);
}
