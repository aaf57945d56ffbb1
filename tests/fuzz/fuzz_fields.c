/* settings.fields, the sample schema's spec: refused with a message, or a
 * schema within its bounds that reads back the same from its own
 * formatting. */
#include "fuzz.h"
#include "fields.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char spec[512];
    size_t n = size < sizeof spec - 1 ? size : sizeof spec - 1;
    memcpy(spec, data, n);
    spec[n] = '\0';
    gf__schema s;
    char why[256] = "";
    int rc = gf__schema_parse(spec, &s, why, sizeof why);
    if (rc != 0) {
        FUZZ_CHECK(rc == GF_EINVAL && why[0] != '\0');
        return 0;
    }
    FUZZ_CHECK(s.n >= 1 && s.n <= GF__FIELDS_MAX);
    FUZZ_CHECK(s.image < s.n && s.label < s.n);
    for (int f = 0; f < s.n; f++) {
        FUZZ_CHECK(s.field[f].n_ext <= GF__FIELD_ALTS_MAX);
        for (int a = 0; a < s.field[f].n_ext; a++) {
            int alt, got = gf__schema_match(&s, s.field[f].ext[a], strlen(s.field[f].ext[a]), &alt);
            FUZZ_CHECK(got == f && alt == a); /* no extension in two fields */
        }
    }
    char text[2048];
    FUZZ_CHECK(gf__schema_format(&s, text, sizeof text) < sizeof text);
    gf__schema back;
    if (s.field[0].n_ext > 0) { /* the default's "*" is no extension */
        FUZZ_CHECK(gf__schema_parse(text, &back, why, sizeof why) == 0);
        FUZZ_CHECK(back.n == s.n && back.image == s.image && back.label == s.label);
        for (int f = 0; f < s.n; f++)
            FUZZ_CHECK(back.field[f].kind == s.field[f].kind &&
                       back.field[f].n_ext == s.field[f].n_ext &&
                       memcmp(back.field[f].ext, s.field[f].ext, sizeof s.field[f].ext) == 0);
    }
    return 0;
}

void fuzz_seeds(fuzz_emit emit)
{
    static const char *const seeds[] = {
        "jpg;png,cls,txt", "jpg,seg.png:mask", "latent.npy", "webp, cls:label ,json:bytes",
        "jpg,,cls", "a;b;c;d,e:text",
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "fields-%zu", i);
        emit(name, seeds[i], strlen(seeds[i]));
    }
}
