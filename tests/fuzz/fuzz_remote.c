/* Remote sources, AWS shared files and HTTP answers: the first byte
 * picks which. 2: the rest is a Content-Range value, 4: an S3 error body
 * (remote_answer.c's parsers: a range is whole, first <= last < total, and
 * prints back as read; the error's fields bounded, no control
 * character). Other even: the rest is a remote `data` (remote_url.c), expanded against an
 * AWS endpoint and a custom one; every target must be whole, and every
 * refusal say why without quoting what came before an '@'. Odd: the rest
 * is ~/.aws/credentials (remote_auth.c's INI reader) holding a known
 * secret, which no message may carry. */
#include "fuzz.h"
#include "remote_auth.h"
#include "remote_fetch.h"
#include "remote_url.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define SECRET "fuzzSECRETfuzz"

static void targets(const char *src)
{
    gf__remote_auth a[2] = {{.region = "us-east-1"},
                            {.region = "eu-west-1", .endpoint = "http://127.0.0.1:9/s3"}};
    for (int k = 0; k < 2; k++) {
        gf__remote_list l;
        char why[256] = "";
        int rc = gf__remote_targets(src, &a[k], &l, why, sizeof why);
        if (rc < 0) {
            FUZZ_CHECK(why[0] != '\0' && l.t == NULL);
            /* nothing of a userinfo is shown: what the message holds
             * before "<userinfo>@" is at most a scheme (unless the input
             * spelled that token itself, in a path the message may quote) */
            const char *u = strstr(why, "<userinfo>@");
            FUZZ_CHECK(!u || u - why <= 8 || strstr(src, "<userinfo>"));
            continue;
        }
        FUZZ_CHECK(l.n > 0);
        for (size_t i = 0; i < l.n; i++) {
            const gf__remote_target *t = &l.t[i];
            size_t ul = strlen(t->url), dl = strlen(t->display);
            FUZZ_CHECK(strncmp(t->url, "http", 4) == 0 && ul >= 4 && dl >= 4);
            FUZZ_CHECK(strcmp(t->sidecar_url + ul - 4, ".idx") == 0);
            FUZZ_CHECK(strlen(t->sidecar_display) == dl);
            FUZZ_CHECK(strcmp(t->sidecar_display + dl - 4, ".idx") == 0);
            FUZZ_CHECK(!memchr(t->url, ' ', ul) && !memchr(t->url, '{', ul));
            FUZZ_CHECK(t->provider && t->provider->bucket_key == (t->bucket != NULL && t->key != NULL));
        }
        gf__remote_list_free(&l);
    }
}

static void shared_file(const uint8_t *d, size_t n)
{
    static int ready;
    if (!ready) {
        setenv("HOME", fuzz_dir(), 1);
        unsetenv("AWS_ACCESS_KEY_ID");
        unsetenv("AWS_SECRET_ACCESS_KEY");
        unsetenv("AWS_PROFILE");
        unsetenv("AWS_REGION");
        unsetenv("AWS_DEFAULT_REGION");
        unsetenv("AWS_ENDPOINT_URL");
        unsetenv("AWS_ENDPOINT_URL_S3");
        unsetenv("AWS_CONFIG_FILE");
        ready = 1;
    }
    const char *path = fuzz_file("credentials", d, n);
    setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
    gf__remote_auth a;
    char why[1024] = "";
    int rc = gf__remote_auth_load(&a, 1, why, sizeof why);
    if (rc < 0) {
        FUZZ_CHECK(why[0] != '\0' && strstr(why, SECRET) == NULL);
        return;
    }
    FUZZ_CHECK(a.access_key && a.secret_key && a.region && a.creds_from);
    FUZZ_CHECK(strstr(a.creds_from, SECRET) == NULL);
    gf__remote_auth_free(&a);
}

static void content_range(const char *v, size_t n)
{
    uint64_t first, last, total;
    if (gf__content_range_parse(v, n, &first, &last, &total) < 0)
        return;
    if (first > last) { /* "bytes STAR/TOTAL" */
        FUZZ_CHECK(first == 1 && last == 0);
        return;
    }
    FUZZ_CHECK(total == 0 || last < total);
    char again[96];
    int k = total ? snprintf(again, sizeof again, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, first,
                             last, total)
                  : snprintf(again, sizeof again, "bytes %" PRIu64 "-%" PRIu64 "/*", first, last);
    uint64_t f2, l2, t2;
    FUZZ_CHECK(gf__content_range_parse(again, (size_t)k, &f2, &l2, &t2) == 0);
    FUZZ_CHECK(f2 == first && l2 == last && t2 == total);
}

static void s3_error(const char *body, size_t n)
{
    char code[16], msg[64], region[8];
    gf__s3_error_parse(body, n, code, sizeof code, msg, sizeof msg, region, sizeof region);
    const char *out[] = {code, msg, region};
    size_t cap[] = {sizeof code, sizeof msg, sizeof region};
    for (int i = 0; i < 3; i++) {
        size_t l = strnlen(out[i], cap[i]);
        FUZZ_CHECK(l < cap[i]);
        for (size_t j = 0; j < l; j++)
            FUZZ_CHECK((unsigned char)out[i][j] >= 0x20 && out[i][j] != 0x7f);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t n = size - 1 < 2048 ? size - 1 : 2048;
    if (data[0] == 2 || data[0] == 4) { /* not NUL-terminated: the parsers take lengths */
        (data[0] == 2 ? content_range : s3_error)((const char *)data + 1, size - 1);
        return 0;
    }
    if (data[0] & 1) {
        shared_file(data + 1, n);
        return 0;
    }
    char src[2049];
    memcpy(src, data + 1, n);
    src[n] = '\0';
    targets(src);
    return 0;
}

void fuzz_seeds(fuzz_emit emit)
{
    static const char *const seeds[] = {
        "\0https://h.example/d/train-{000000..000003}.tar,http://o:80/a b.tar",
        "\0s3://my-bucket/pre fix/a+b?#%~-{08..10}.tar,s3://my.bucket/k.TAR",
        "\0https://u:" SECRET "@h/x.tar,s3://K:" SECRET "/x@bkt/{1..2}.tar",
        "\1# c\n[default]\naws_access_key_id = K\naws_secret_access_key = " SECRET "\n"
        "aws_session_token=T\nregion = eu-west-1\nservices = s\n[services s]\ns3 =\n"
        "  endpoint_url = http://127.0.0.1:9\n",
        "\1[default]\naws_access_key_id K\n  " SECRET "\n[x\n",
        "\2bytes 0-511/41000",
        "\2bytes */41000",
        "\2bytes 16384-19333/*",
        "\4<?xml version='1.0' encoding='UTF-8'?>\n<Error><Code>AuthorizationHeaderMalformed</Code>"
        "<Message>the region 'eu-west-1' is wrong; expecting 'us-east-1'</Message>"
        "<Region>us-east-1</Region></Error>",
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "remote-%zu", i);
        emit(name, seeds[i], 1 + strlen(seeds[i] + 1));
    }
}
