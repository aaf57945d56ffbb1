/* Remote shard addressing (remote_url.c and the provider table's rows,
 * remote_provider.c, remote_http.c, remote_s3.c) and AWS credentials
 * (remote_auth.c): URL forms and their expansion, the credential,
 * region and endpoint chain against a temporary HOME, and that no
 * message ever carries a secret. `test_remote live` (meson:
 * remote_live) does one signed PUT and GET against the S3 test server
 * named by GF_TEST_S3_ENDPOINT, and exits 77 without one. */
#include "remote_auth.h"
#include "remote_url.h"
#include "testutil.h"

#include "config.h"
#if GF_HAVE_REMOTE
#include "remote_curl.h"
#endif

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYS3CRET"
#define TOKEN "FwoGZXIvYXdzEJr//////////TOKEN+abc="

static char *home;

static void clear_env(void)
{
    static const char *const vars[] = {
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
        "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_REGION", "AWS_DEFAULT_REGION",
        "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        unsetenv(vars[i]);
}

static void setup(void)
{
    clear_env();
    home = tu_mkdtemp();
    setenv("HOME", home, 1);
}

static void teardown(void)
{
    tu_rmrf(home);
    free(home);
    home = NULL;
}

/* Writes HOME/rel. */
static void put(const char *rel, const char *text)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", home, rel);
    tu_write_text(p, text);
}

static gf__remote_auth fake_auth(const char *region, const char *endpoint)
{
    return (gf__remote_auth){.access_key = "AKID", .secret_key = SECRET, .region = region,
                             .endpoint = endpoint};
}

/* ---- addressing ---- */

START_TEST(schemes_are_told_by_their_prefix)
{
    ck_assert_ptr_eq(gf__remote_provider_of("http://h/x.tar"), &gf__remote_http);
    ck_assert_ptr_eq(gf__remote_provider_of("HTTPS://h/x.tar"), &gf__remote_https);
    ck_assert_ptr_eq(gf__remote_provider_of("s3://bkt/x.tar"), &gf__remote_s3);
    ck_assert_ptr_null(gf__remote_provider_of("dir/s3://x.tar"));
    ck_assert_ptr_null(gf__remote_provider_of("train-{0..3}.tar"));
    ck_assert_ptr_null(gf__remote_provider_of(NULL));
    ck_assert_ptr_null(gf__remote_provider_n("s3://bkt/x.tar", 4)); /* the element ends first */
    ck_assert(gf__data_is_remote("s3://bkt/x.tar"));
    ck_assert(!gf__data_is_remote("/data/x.tar"));
    ck_assert_ptr_eq(gf__remote_auth_provider("https://h/a.tar,s3://bkt/b.tar"), &gf__remote_s3);
    ck_assert_ptr_null(gf__remote_auth_provider("https://h/{0..3}.tar,https://h/s3://x.tar"));
    char prefixes[64];
    gf__remote_prefixes(prefixes, sizeof prefixes);
    ck_assert_str_eq(prefixes, "http://, https:// or s3://");
}
END_TEST

/* What a new row must hold for the shared code to take it as it is. */
START_TEST(every_provider_row_is_whole)
{
    size_t n = 0;
    const gf__remote_provider *const *rows = gf__remote_providers(&n);
    ck_assert_uint_eq(n, 3);
    for (size_t i = 0; i < n; i++) {
        const gf__remote_provider *p = rows[i];
        size_t pl = strlen(p->prefix);
        ck_assert_msg(pl > 3 && strcmp(p->prefix + pl - 3, "://") == 0, "%s", p->prefix);
        for (size_t k = 0; k < pl; k++)
            ck_assert_msg(p->prefix[k] < 'A' || p->prefix[k] > 'Z', "%s: lowercase", p->prefix);
        ck_assert_ptr_nonnull(p->authority);
        ck_assert_ptr_nonnull(p->path);
        ck_assert_ptr_nonnull(p->url);
        ck_assert_ptr_eq(gf__remote_provider_of(p->prefix), p); /* no row hides another */
        ck_assert_msg(!p->auth_load == !p->auth_needs, "%s: auth_needs names auth_load's",
                      p->prefix);
#if GF_HAVE_REMOTE
        /* credentials go only to a row that signs with them */
        ck_assert_msg(!p->auth_load == !p->sign, "%s", p->prefix);
        ck_assert_msg(!p->in_region || p->sign, "%s: a region move re-signs", p->prefix);
#endif
        ck_assert_ptr_null(p->list); /* remote_url.c expands every pattern itself */
    }
    ck_assert_int_eq(gf__remote_http.max_redirects, 5);
    ck_assert_int_eq(gf__remote_s3.max_redirects, 0); /* a signed request is for one URL */
}
END_TEST

START_TEST(https_braces_and_commas_expand_in_order)
{
    gf__remote_list l;
    char why[512] = "";
    ck_assert_int_eq(gf__remote_targets("https://h.example/d/train-{000000..000002}.tar,"
                                        "http://other:8080/x/a b.TAR",
                                        NULL, &l, why, sizeof why),
                     0);
    ck_assert_uint_eq(l.n, 4);
    ck_assert_str_eq(l.t[0].display, "https://h.example/d/train-000000.tar");
    ck_assert_str_eq(l.t[0].url, "https://h.example/d/train-000000.tar");
    ck_assert_str_eq(l.t[0].sidecar_display, "https://h.example/d/train-000000.idx");
    ck_assert_str_eq(l.t[0].sidecar_url, "https://h.example/d/train-000000.idx");
    ck_assert_str_eq(l.t[2].url, "https://h.example/d/train-000002.tar");
    ck_assert_ptr_eq(l.t[2].provider, &gf__remote_https);
    ck_assert_ptr_null(l.t[2].bucket);
    ck_assert_ptr_null(l.t[2].key);
    /* the user's form shown; what a URL cannot hold encoded */
    ck_assert_str_eq(l.t[3].display, "http://other:8080/x/a b.TAR");
    ck_assert_str_eq(l.t[3].url, "http://other:8080/x/a%20b.TAR");
    ck_assert_str_eq(l.t[3].sidecar_url, "http://other:8080/x/a%20b.idx");
    ck_assert_ptr_eq(l.t[3].provider, &gf__remote_http);
    gf__remote_list_free(&l);
    ck_assert_ptr_null(l.t);
    gf__remote_list_free(&l); /* twice is harmless */
}
END_TEST

START_TEST(s3_on_aws_is_virtual_hosted_and_keys_are_encoded)
{
    gf__remote_auth a = fake_auth("eu-west-1", NULL);
    gf__remote_list l;
    char why[512] = "";
    ck_assert_msg(gf__remote_targets("s3://my-bucket/pre fix/a+b?#%~.tar,s3://my.bucket/k/{8..10}.tar",
                                     &a, &l, why, sizeof why) == 0,
                  "%s", why);
    ck_assert_uint_eq(l.n, 4);
    ck_assert_str_eq(l.t[0].display, "s3://my-bucket/pre fix/a+b?#%~.tar");
    ck_assert_str_eq(l.t[0].url,
                     "https://my-bucket.s3.eu-west-1.amazonaws.com/pre%20fix/a%2Bb%3F%23%25~.tar");
    ck_assert_str_eq(l.t[0].sidecar_url,
                     "https://my-bucket.s3.eu-west-1.amazonaws.com/pre%20fix/a%2Bb%3F%23%25~.idx");
    ck_assert_str_eq(l.t[0].sidecar_display, "s3://my-bucket/pre fix/a+b?#%~.idx");
    ck_assert_str_eq(l.t[0].bucket, "my-bucket");
    ck_assert_str_eq(l.t[0].key, "pre fix/a+b?#%~.tar");
    ck_assert_ptr_eq(l.t[0].provider, &gf__remote_s3);
    /* a dotted bucket: path-style (the certificate's wildcard is one label) */
    ck_assert_str_eq(l.t[1].url, "https://s3.eu-west-1.amazonaws.com/my.bucket/k/8.tar");
    ck_assert_str_eq(l.t[3].display, "s3://my.bucket/k/10.tar");
    ck_assert_str_eq(l.t[3].key, "k/10.tar");
    gf__remote_list_free(&l);
}
END_TEST

/* A store's 301 names the bucket's region: on AWS's own hosts the region
 * is in the host, which is then asked (as the AWS SDKs do); any other
 * host (an endpoint of the user's) is only re-signed. */
START_TEST(an_aws_url_moves_to_the_region_the_store_names)
{
    static const struct {
        const char *url, *region, *want; /* want NULL: not an AWS regional URL */
    } cases[] = {
        {"https://my-bucket.s3.us-east-1.amazonaws.com/pre%20fix/a.tar", "eu-west-1",
         "https://my-bucket.s3.eu-west-1.amazonaws.com/pre%20fix/a.tar"},
        {"https://s3.us-east-1.amazonaws.com/my.bucket/k/8.tar", "ap-southeast-2",
         "https://s3.ap-southeast-2.amazonaws.com/my.bucket/k/8.tar"},
        {"https://my-bucket.s3.us-east-1.amazonaws.com", "eu-west-1",
         "https://my-bucket.s3.eu-west-1.amazonaws.com"},
        {"http://127.0.0.1:9000/bucket/a.tar", "eu-west-1", NULL},
        {"https://example.com/s3.us-east-1.amazonaws.com/a.tar", "eu-west-1", NULL},
        {"https://evils3.us-east-1.amazonaws.com/a.tar", "eu-west-1", NULL},
        {"https://my-bucket.s3.us-east-1.amazonaws.com/a.tar", "eu-west-1/../x", NULL},
        {"https://my-bucket.s3.us-east-1.amazonaws.com/a.tar", "EU", NULL},
        {"https://my-bucket.s3.us-east-1.amazonaws.com/a.tar", "", NULL},
        {"https://amazonaws.com/a.tar", "eu-west-1", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t n = gf__s3_url_in_region(cases[i].url, cases[i].region, NULL, 0);
        if (!cases[i].want) {
            ck_assert_msg(n == 0, "%s in %s: %zu", cases[i].url, cases[i].region, n);
            continue;
        }
        char got[256];
        ck_assert_uint_eq(n, strlen(cases[i].want));
        ck_assert_uint_eq(gf__s3_url_in_region(cases[i].url, cases[i].region, got, sizeof got), n);
        ck_assert_str_eq(got, cases[i].want);
    }
}
END_TEST

START_TEST(s3_with_an_endpoint_is_path_style)
{
    gf__remote_auth a = fake_auth("us-east-1", "http://127.0.0.1:8080");
    gf__remote_list l;
    char why[512] = "";
    ck_assert_msg(gf__remote_targets("s3://bkt/p/train-{000..001}.tar", &a, &l, why, sizeof why) == 0,
                  "%s", why);
    ck_assert_uint_eq(l.n, 2);
    ck_assert_str_eq(l.t[0].url, "http://127.0.0.1:8080/bkt/p/train-000.tar");
    ck_assert_str_eq(l.t[1].sidecar_url, "http://127.0.0.1:8080/bkt/p/train-001.idx");
    ck_assert_str_eq(l.t[1].display, "s3://bkt/p/train-001.tar");
    gf__remote_list_free(&l);
    /* an endpoint with a path keeps it */
    a.endpoint = "https://store.example/s3";
    ck_assert_int_eq(gf__remote_targets("s3://bkt/a/../b.tar", &a, &l, why, sizeof why), 0);
    ck_assert_str_eq(l.t[0].url, "https://store.example/s3/bkt/a/../b.tar");
    gf__remote_list_free(&l);
}
END_TEST

START_TEST(sigv4_encoding_keeps_only_unreserved_and_slash)
{
    char src[256], dst[3 * 256 + 1];
    for (int i = 0; i < 256; i++)
        src[i] = (char)(i + 1 == 256 ? 0 : i + 1); /* 1..255, then 0 */
    size_t n = gf__remote_uri_encode(dst, src, 256);
    ck_assert_uint_eq(n, strlen(dst));
    size_t at = 0;
    for (int i = 0; i < 256; i++) {
        unsigned char c = (unsigned char)src[i];
        int keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                   strchr("-._~/", c) != NULL;
        if (keep && c) {
            ck_assert_int_eq(dst[at], c);
            at++;
        } else {
            char want[4];
            snprintf(want, sizeof want, "%%%02X", c);
            ck_assert_msg(strncmp(dst + at, want, 3) == 0, "byte %d: %.3s", c, dst + at);
            at += 3;
        }
    }
    ck_assert_uint_eq(at, n);
}
END_TEST

START_TEST(bad_buckets_are_refused)
{
    gf__remote_auth a = fake_auth("us-east-1", NULL);
    static const char *const bad[] = {
        "s3://b1/x.tar", "s3://Bucket/x.tar", "s3://-abc/x.tar", "s3://abc-/x.tar",
        "s3://a_b/x.tar", "s3://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/x.tar"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        gf__remote_list l;
        char why[512] = "";
        ck_assert_int_eq(gf__remote_targets(bad[i], &a, &l, why, sizeof why), GF_EINVAL);
        ck_assert_msg(strstr(why, "bad bucket name") != NULL, "%s: %s", bad[i], why);
        ck_assert_ptr_null(l.t);
    }
    ck_assert(gf__remote_bucket_ok("a.b-3", 5));
    ck_assert(gf__remote_bucket_ok("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 63));
}
END_TEST

/* Each bad source, its code and a part of its message. */
START_TEST(bad_sources_say_why)
{
    gf__remote_auth a = fake_auth("us-east-1", NULL);
    static const struct {
        const char *src;
        int code;
        const char *says;
    } cases[] = {
        {"https://h/x.zip", GF_EINVAL, "must end in .tar"},
        {"https://h/x?.tar", GF_EINVAL, "query or fragment"},
        {"https://h/x.tar#a.tar", GF_EINVAL, "query or fragment"},
        {"https://h/x.tar,local/y.tar", GF_EINVAL, "mixes local paths and URLs"},
        {"https:///x.tar", GF_EINVAL, "no host"},
        {"https://h", GF_EINVAL, "no path"},
        {"s3://bkt", GF_EINVAL, "no key"},
        {"s3://bkt/", GF_EINVAL, "no key"},
        {"s3:///x.tar", GF_EINVAL, "no bucket"},
        {"https://h/{5..1}.tar", GF_EDATASET, "descending"},
        {"https://h/{0..2000000}.tar", GF_EDATASET, "more than"},
        {"", GF_EINVAL, "no data set"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        gf__remote_list l;
        char why[512] = "";
        ck_assert_msg(gf__remote_targets(cases[i].src, &a, &l, why, sizeof why) == cases[i].code,
                      "%s: %s", cases[i].src, why);
        ck_assert_msg(strstr(why, cases[i].says) != NULL, "%s: %s", cases[i].src, why);
    }
    /* s3 without credentials */
    gf__remote_list l;
    char why[512] = "";
    ck_assert_int_eq(gf__remote_targets("s3://bkt/x.tar", NULL, &l, why, sizeof why), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "need AWS credentials"));
}
END_TEST

START_TEST(userinfo_is_refused_without_echo)
{
    gf__remote_auth a = fake_auth("us-east-1", NULL);
    static const char *const srcs[] = {
        "https://alice:" SECRET "@h.example/x.tar",
        "http://alice:" SECRET "@h.example/{5..1}.tar", /* a bad range too: never quoted */
        "https://h/ok.tar,s3://AKID:" SECRET "@bkt/x.tar",
        "s3://" SECRET "@bkt/{0..1}.tar",
    };
    for (size_t i = 0; i < sizeof srcs / sizeof *srcs; i++) {
        gf__remote_list l;
        char why[512] = "";
        ck_assert_int_eq(gf__remote_targets(srcs[i], &a, &l, why, sizeof why), GF_EINVAL);
        ck_assert_msg(strstr(why, "user name or password") != NULL, "%s", why);
        ck_assert_msg(strstr(why, SECRET) == NULL && strstr(why, "alice") == NULL, "%s", why);
    }
    /* '@' in a path is only a path */
    gf__remote_list l;
    char why[512] = "";
    ck_assert_int_eq(gf__remote_targets("https://h/v@1/x.tar", &a, &l, why, sizeof why), 0);
    ck_assert_str_eq(l.t[0].url, "https://h/v@1/x.tar");
    gf__remote_list_free(&l);
}
END_TEST

/* ---- credentials, region, endpoint ---- */

static int load(gf__remote_auth *a, int need, char *why, size_t len)
{
    int rc = gf__remote_auth_load(a, need, why, len);
    if (rc < 0)
        ck_assert_msg(strstr(why, SECRET) == NULL && strstr(why, TOKEN) == NULL,
                      "a secret in: %s", why);
    return rc;
}

START_TEST(the_environment_beats_the_profile)
{
    put(".aws/credentials", "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = filesecret\n");
    setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
    setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
    setenv("AWS_SESSION_TOKEN", TOKEN, 1);
    gf__remote_auth a;
    char why[1024] = "";
    ck_assert_msg(load(&a, 1, why, sizeof why) == 0, "%s", why);
    ck_assert_str_eq(a.access_key, "ENVKEY");
    ck_assert_str_eq(a.secret_key, SECRET);
    ck_assert_str_eq(a.session_token, TOKEN);
    ck_assert_str_eq(a.creds_from, "environment");
    ck_assert_str_eq(a.region, "us-east-1");
    ck_assert_ptr_null(a.endpoint);
    gf__remote_auth_free(&a);
    ck_assert_ptr_null(a.secret_key);
    gf__remote_auth_free(&a);
    /* half a pair is an error, not a fallback to the profile */
    unsetenv("AWS_ACCESS_KEY_ID");
    ck_assert_int_eq(load(&a, 1, why, sizeof why), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID"));
}
END_TEST

START_TEST(profiles_from_both_files)
{
    put(".aws/credentials",
        "# comment\n; another\n[default]\naws_access_key_id=DEFKEY\naws_secret_access_key = defsecret\n"
        "\n[work]\n  \naws_access_key_id = WORKKEY\r\naws_secret_access_key = " SECRET "\r\n"
        "aws_session_token = " TOKEN "\n");
    put(".aws/config",
        "[default]\nregion = eu-central-1\n[profile work]\nregion=ap-south-1\n"
        "[profile cfgonly]\naws_access_key_id = CFGKEY\naws_secret_access_key = cfgsecret\n"
        "region = us-west-2\n[work]\nregion = not-this-one\n");
    gf__remote_auth a;
    char why[1024] = "";
    ck_assert_msg(load(&a, 1, why, sizeof why) == 0, "%s", why);
    ck_assert_str_eq(a.access_key, "DEFKEY");
    ck_assert_str_eq(a.secret_key, "defsecret");
    ck_assert_ptr_null(a.session_token);
    ck_assert_str_eq(a.region, "eu-central-1");
    ck_assert_ptr_nonnull(strstr(a.creds_from, ".aws/credentials [default]"));
    gf__remote_auth_free(&a);

    setenv("AWS_PROFILE", "work", 1);
    ck_assert_msg(load(&a, 1, why, sizeof why) == 0, "%s", why);
    ck_assert_str_eq(a.access_key, "WORKKEY");
    ck_assert_str_eq(a.secret_key, SECRET);
    ck_assert_str_eq(a.session_token, TOKEN);
    ck_assert_str_eq(a.region, "ap-south-1"); /* [profile work], not [work] */
    gf__remote_auth_free(&a);

    setenv("AWS_PROFILE", "cfgonly", 1);
    ck_assert_msg(load(&a, 1, why, sizeof why) == 0, "%s", why);
    ck_assert_str_eq(a.access_key, "CFGKEY");
    ck_assert_str_eq(a.region, "us-west-2");
    ck_assert_ptr_nonnull(strstr(a.creds_from, ".aws/config [profile cfgonly]"));
    gf__remote_auth_free(&a);

    setenv("AWS_PROFILE", "nosuch", 1);
    ck_assert_int_eq(load(&a, 1, why, sizeof why), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "AWS_PROFILE=nosuch: no such profile"));
}
END_TEST

START_TEST(files_named_by_the_environment)
{
    char cred[4096], conf[4096];
    snprintf(cred, sizeof cred, "%s/elsewhere/creds", home);
    snprintf(conf, sizeof conf, "%s/elsewhere/conf", home);
    tu_write_text(cred, "[default]\naws_access_key_id = K2\naws_secret_access_key = S2\n");
    tu_write_text(conf, "[profile default]\nregion = sa-east-1\n");
    put(".aws/credentials", "[default]\naws_access_key_id = K1\naws_secret_access_key = S1\n");
    setenv("AWS_SHARED_CREDENTIALS_FILE", cred, 1);
    setenv("AWS_CONFIG_FILE", conf, 1);
    gf__remote_auth a;
    char why[1024] = "";
    ck_assert_msg(load(&a, 1, why, sizeof why) == 0, "%s", why);
    ck_assert_str_eq(a.access_key, "K2");
    ck_assert_str_eq(a.region, "sa-east-1");
    gf__remote_auth_free(&a);
    /* named and unreadable: an error; a default one missing is not */
    setenv("AWS_CONFIG_FILE", "/nonexistent/gpufeed/config", 1);
    ck_assert_int_eq(load(&a, 1, why, sizeof why), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "AWS_CONFIG_FILE=/nonexistent/gpufeed/config: cannot read"));
    setenv("AWS_SHARED_CREDENTIALS_FILE", home, 1); /* a directory */
    unsetenv("AWS_CONFIG_FILE");
    ck_assert_int_eq(load(&a, 1, why, sizeof why), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "AWS_SHARED_CREDENTIALS_FILE="));
}
END_TEST

START_TEST(region_order)
{
    put(".aws/config", "[default]\nregion = eu-north-1\n");
    setenv("AWS_ACCESS_KEY_ID", "K", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "S", 1);
    gf__remote_auth a;
    char why[1024] = "";
    setenv("AWS_DEFAULT_REGION", "us-west-1", 1);
    setenv("AWS_REGION", "ca-central-1", 1);
    ck_assert_int_eq(load(&a, 1, why, sizeof why), 0);
    ck_assert_str_eq(a.region, "ca-central-1");
    gf__remote_auth_free(&a);
    unsetenv("AWS_REGION");
    ck_assert_int_eq(load(&a, 1, why, sizeof why), 0);
    ck_assert_str_eq(a.region, "us-west-1");
    gf__remote_auth_free(&a);
    unsetenv("AWS_DEFAULT_REGION");
    ck_assert_int_eq(load(&a, 1, why, sizeof why), 0);
    ck_assert_str_eq(a.region, "eu-north-1");
    gf__remote_auth_free(&a);
    put(".aws/config", "[default]\n");
    ck_assert_int_eq(load(&a, 1, why, sizeof why), 0);
    ck_assert_str_eq(a.region, "us-east-1");
    gf__remote_auth_free(&a);
    setenv("AWS_REGION", "us-east-1:evil", 1);
    ck_assert_int_eq(load(&a, 1, why, sizeof why), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "AWS_REGION: the region is not"));
}
END_TEST

START_TEST(endpoint_order)
{
    put(".aws/config", "[default]\nendpoint_url = http://profile:1/\nservices = local\n"
                       "[services local]\ns3 =\n  endpoint_url = http://services:2\n"
                       "ec2 =\n  endpoint_url = http://not-s3:3\n");
    setenv("AWS_ACCESS_KEY_ID", "K", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "S", 1);
    gf__remote_auth a;
    char why[1024] = "";
    setenv("AWS_ENDPOINT_URL", "http://global:4", 1);
    setenv("AWS_ENDPOINT_URL_S3", "https://s3only:5/", 1);
    ck_assert_msg(load(&a, 1, why, sizeof why) == 0, "%s", why);
    ck_assert_str_eq(a.endpoint, "https://s3only:5"); /* its '/' dropped */
    gf__remote_auth_free(&a);
    unsetenv("AWS_ENDPOINT_URL_S3");
    ck_assert_int_eq(load(&a, 1, why, sizeof why), 0);
    ck_assert_str_eq(a.endpoint, "http://global:4");
    gf__remote_auth_free(&a);
    unsetenv("AWS_ENDPOINT_URL");
    ck_assert_msg(load(&a, 1, why, sizeof why) == 0, "%s", why);
    ck_assert_str_eq(a.endpoint, "http://services:2");
    gf__remote_auth_free(&a);
    put(".aws/config", "[default]\nendpoint_url = http://profile:1/\n");
    ck_assert_int_eq(load(&a, 1, why, sizeof why), 0);
    ck_assert_str_eq(a.endpoint, "http://profile:1");
    gf__remote_auth_free(&a);
    setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true", 1);
    ck_assert_int_eq(load(&a, 1, why, sizeof why), 0);
    ck_assert_ptr_null(a.endpoint);
    gf__remote_auth_free(&a);
    unsetenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
    setenv("AWS_ENDPOINT_URL_S3", "ftp://x", 1);
    ck_assert_int_eq(load(&a, 1, why, sizeof why), GF_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "not an http:// or https:// URL"));
}
END_TEST

START_TEST(no_credentials_names_where_it_looked)
{
    gf__remote_auth a;
    char why[2048] = "";
    /* without need, no keys is fine: the region and endpoint still come */
    setenv("AWS_REGION", "eu-west-3", 1);
    ck_assert_int_eq(load(&a, 0, why, sizeof why), 0);
    ck_assert_ptr_null(a.access_key);
    ck_assert_ptr_null(a.creds_from);
    ck_assert_str_eq(a.region, "eu-west-3");
    gf__remote_auth_free(&a);
    ck_assert_int_eq(load(&a, 1, why, sizeof why), GF_EINVAL);
    ck_assert_msg(strstr(why, "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                              "or a profile in ~/.aws/credentials") == why,
                  "%s", why);
    char want[4200];
    snprintf(want, sizeof want, "%s/.aws/credentials [default]: no such file", home);
    ck_assert_msg(strstr(why, want) != NULL, "%s", why);
    ck_assert_ptr_nonnull(strstr(why, "anonymous access is not supported yet"));
    put(".aws/config", "[profile other]\nregion = x\n[default]\nrole_arn = arn:aws:iam::1:role/r\n");
    ck_assert_int_eq(load(&a, 1, why, sizeof why), GF_EINVAL);
    snprintf(want, sizeof want, "%s/.aws/config [default]: no keys there", home);
    ck_assert_msg(strstr(why, want) != NULL, "%s", why);
    ck_assert_msg(strstr(why, "role_arn is not supported") != NULL, "%s", why);
}
END_TEST

/* Every failing path with a secret about: none in the message. */
START_TEST(no_secret_in_any_message)
{
    gf__remote_auth a;
    char why[2048];
    static const char *const files[] = {
        /* a line that is not key = value, holding the secret */
        "[default]\naws_access_key_id AKID\naws_secret_access_key " SECRET "\n",
        "[default]\naws_secret_access_key = " SECRET "\naws_session_token = " TOKEN "\n",
        "aws_secret_access_key = " SECRET "\n",
        "[default]\naws_access_key_id = K\n  " SECRET "\n",
        "[default]\naws_access_key_id = K\naws_secret_access_key = " SECRET "\n[" TOKEN "\n",
        "[default]\naws_access_key_id = K\naws_secret_access_key = " SECRET "\n"
        "endpoint_url = http://K:" SECRET "@host/\n",
        "[default]\naws_access_key_id = K\naws_secret_access_key = " SECRET "\nregion = " TOKEN "\n",
    };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        put(".aws/credentials", files[i]);
        why[0] = '\0';
        int rc = gf__remote_auth_load(&a, 1, why, sizeof why);
        ck_assert_msg(rc == GF_EINVAL, "file %zu: %d %s", i, rc, why);
        ck_assert_msg(strstr(why, SECRET) == NULL && strstr(why, TOKEN) == NULL, "file %zu: %s", i,
                      why);
        ck_assert_msg(strstr(why, "redacted") == NULL && why[0], "file %zu: %s", i, why);
    }
    tu_rmrf(home);
    mkdir(home, 0700);
    /* the environment */
    setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
    setenv("AWS_SESSION_TOKEN", TOKEN, 1);
    ck_assert_int_eq(gf__remote_auth_load(&a, 1, why, sizeof why), GF_EINVAL);
    ck_assert(strstr(why, SECRET) == NULL && strstr(why, TOKEN) == NULL);
    setenv("AWS_ACCESS_KEY_ID", "K", 1);
    setenv("AWS_ENDPOINT_URL", "http://K:" SECRET "@h", 1);
    ck_assert_int_eq(gf__remote_auth_load(&a, 1, why, sizeof why), GF_EINVAL);
    ck_assert_msg(strstr(why, SECRET) == NULL && strstr(why, "user name or password"), "%s", why);
    setenv("AWS_ENDPOINT_URL", "http://h", 1);
    ck_assert_int_eq(gf__remote_auth_load(&a, 1, why, sizeof why), 0);
    /* the addressing's messages with these credentials */
    static const char *const srcs[] = {"s3://K:" SECRET "@bkt/x.tar", "s3://b/x.zip",
                                       "s3://B/x.tar", "s3://bkt/{2..1}.tar"};
    for (size_t i = 0; i < sizeof srcs / sizeof *srcs; i++) {
        gf__remote_list l;
        why[0] = '\0';
        ck_assert_int_lt(gf__remote_targets(srcs[i], &a, &l, why, sizeof why), 0);
        ck_assert_msg(strstr(why, SECRET) == NULL && strstr(why, TOKEN) == NULL && why[0], "%s",
                      why);
    }
    /* and a message from elsewhere (curl's, a server's) is redacted */
    char msg[512];
    snprintf(msg, sizeof msg,
             "GET /bkt/x: Authorization: AWS4-HMAC-SHA256 Credential=K/2026, Signature=ab12\r\n"
             "x-amz-security-token: %s\r\nbody said %s; url ?X-Amz-Signature=ffee&a=1",
             TOKEN, SECRET);
    gf__remote_redact(msg, sizeof msg, &a);
    ck_assert_msg(strstr(msg, SECRET) == NULL && strstr(msg, TOKEN) == NULL, "%s", msg);
    ck_assert_msg(strstr(msg, "ab12") == NULL && strstr(msg, "ffee") == NULL, "%s", msg);
    ck_assert_msg(strstr(msg, "Authorization: <redacted>\r\n") != NULL, "%s", msg);
    ck_assert_msg(strstr(msg, "body said <redacted>;") != NULL, "%s", msg);
    ck_assert_msg(strstr(msg, "&a=1") != NULL, "%s", msg);
    /* a short buffer stays terminated */
    char small[24];
    memcpy(small, "x " SECRET, sizeof small - 1); /* cut, as a short buffer would */
    small[sizeof small - 1] = '\0';
    gf__remote_redact(small, sizeof small, &a);
    ck_assert_msg(strlen(small) < sizeof small && strstr(small, "wJalrX") == NULL, "%s", small);
    gf__remote_auth_free(&a);
}
END_TEST

/* Without the feature a remote data set is refused at open, by name,
 * never quoting a password; with it, gf_open's dispatch is the
 * fetcher's (not here). */
#if !GF_HAVE_REMOTE
START_TEST(without_the_feature_open_names_it)
{
    static const char *const srcs[] = {"https://h.example/train-{0..3}.tar", "s3://bkt/x.tar",
                                       "http://u:" SECRET "@h/x.tar"};
    for (size_t i = 0; i < sizeof srcs / sizeof *srcs; i++) {
        gf_settings s;
        tu_cpu_settings(&s);
        s.data = srcs[i];
        gf_loader *l = NULL;
        ck_assert_int_eq(gf_open(&l, &s), GF_EINVAL);
        const char *m = gf_last_error(l);
        ck_assert_msg(strstr(m, "remote shards need libcurl: this build has the `remote` feature "
                                "off (meson -Dremote=enabled)") != NULL,
                      "%s", m);
        ck_assert_msg(strncmp(m, srcs[i], 5) == 0 && strstr(m, SECRET) == NULL, "%s", m);
        gf_close(&l);
        gf_index *ix = NULL;
        ck_assert_int_eq(gf_index_open(&ix, &s), GF_EINVAL);
        gf_index_close(&ix);
    }
}
END_TEST
#endif

#if GF_HAVE_REMOTE
START_TEST(easy_setup_signs_only_s3)
{
    gf__remote_auth a = fake_auth("eu-west-1", "http://127.0.0.1:9");
    a.session_token = TOKEN;
    gf__remote_list l;
    char why[512] = "";
    ck_assert_int_eq(gf__remote_targets("s3://bkt/x.tar,https://h/y.tar", &a, &l, why, sizeof why), 0);
    CURL *e = curl_easy_init();
    ck_assert_ptr_nonnull(e);
    struct curl_slist *h = NULL;
    ck_assert_msg(gf__remote_easy_setup(e, &l.t[0], &a, NULL, &h, why, sizeof why) == 0, "%s", why);
    ck_assert_ptr_nonnull(h);
    ck_assert_str_eq(h->data, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    ck_assert_ptr_nonnull(h->next);
    ck_assert_str_eq(h->next->data, "x-amz-security-token: " TOKEN);
    curl_slist_free_all(h);
    curl_easy_reset(e);
    h = NULL;
    ck_assert_int_eq(gf__remote_easy_setup(e, &l.t[1], &a, "/etc/ssl/certs/ca-certificates.crt", &h,
                                           why, sizeof why),
                     0);
    ck_assert_ptr_null(h); /* no AWS header goes to a plain https host */
    gf__remote_auth none = {.region = "us-east-1"};
    ck_assert_int_eq(gf__remote_easy_setup(e, &l.t[0], &none, NULL, &h, why, sizeof why), GF_EINVAL);
    curl_easy_cleanup(e);
    gf__remote_list_free(&l);
}
END_TEST

static size_t keep_body(char *p, size_t sz, size_t n, void *ctx)
{
    char *buf = ctx;
    size_t have = strlen(buf), add = sz * n, room = 255 - have;
    memcpy(buf + have, p, GF__MIN(add, room)); /* the start of an error's XML */
    buf[have + GF__MIN(add, room)] = '\0';
    return add;
}

/* One signed PUT, then GET, on the S3 test server (tests/remote/servers.sh). */
START_TEST(live_signed_put_and_get)
{
    gf__remote_auth a;
    char why[1024] = "", src[512];
    ck_assert_msg(gf__remote_auth_load(&a, 1, why, sizeof why) == 0, "%s", why);
    ck_assert_ptr_nonnull(a.endpoint);
    snprintf(src, sizeof src, "s3://%s/gpufeed test/key+with?odd=chars.tar",
             getenv("GF_TEST_S3_BUCKET"));
    gf__remote_list l;
    ck_assert_msg(gf__remote_targets(src, &a, &l, why, sizeof why) == 0, "%s", why);
    static const char body[] = "gpufeed remote test\n";
    for (int get = 0; get < 2; get++) {
        CURL *e = curl_easy_init();
        struct curl_slist *h = NULL;
        char got[256] = "", err[CURL_ERROR_SIZE] = "";
        ck_assert_msg(gf__remote_easy_setup(e, &l.t[0], &a, NULL, &h, why, sizeof why) == 0, "%s",
                      why);
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, err);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, keep_body);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, got);
        if (!get) {
            curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "PUT");
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
        }
        CURLcode c = curl_easy_perform(e);
        long status = 0;
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
        gf__remote_redact(err, sizeof err, &a);
        gf__remote_redact(got, sizeof got, &a);
        ck_assert_msg(c == CURLE_OK && status / 100 == 2, "%s %s: curl %d (%s), HTTP %ld: %s",
                      get ? "GET" : "PUT", l.t[0].url, c, err, status, got);
        if (get)
            ck_assert_str_eq(got, body);
        curl_slist_free_all(h);
        curl_easy_cleanup(e);
    }
    gf__remote_list_free(&l);
    gf__remote_auth_free(&a);
}
END_TEST
#endif

static Suite *remote_suite(int live)
{
    Suite *su = suite_create(live ? "remote_live" : "remote");
    if (live) {
#if GF_HAVE_REMOTE
        TCase *tc = tcase_create("live");
        tcase_add_test(tc, live_signed_put_and_get);
        suite_add_tcase(su, tc);
#endif
        return su;
    }
    TCase *tc = tcase_create("addressing");
    tcase_add_test(tc, schemes_are_told_by_their_prefix);
    tcase_add_test(tc, every_provider_row_is_whole);
    tcase_add_test(tc, https_braces_and_commas_expand_in_order);
    tcase_add_test(tc, s3_on_aws_is_virtual_hosted_and_keys_are_encoded);
    tcase_add_test(tc, s3_with_an_endpoint_is_path_style);
    tcase_add_test(tc, an_aws_url_moves_to_the_region_the_store_names);
    tcase_add_test(tc, sigv4_encoding_keeps_only_unreserved_and_slash);
    tcase_add_test(tc, bad_buckets_are_refused);
    tcase_add_test(tc, bad_sources_say_why);
    tcase_add_test(tc, userinfo_is_refused_without_echo);
#if !GF_HAVE_REMOTE
    tcase_add_test(tc, without_the_feature_open_names_it);
#else
    tcase_add_test(tc, easy_setup_signs_only_s3);
#endif
    suite_add_tcase(su, tc);
    tc = tcase_create("credentials");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, the_environment_beats_the_profile);
    tcase_add_test(tc, profiles_from_both_files);
    tcase_add_test(tc, files_named_by_the_environment);
    tcase_add_test(tc, region_order);
    tcase_add_test(tc, endpoint_order);
    tcase_add_test(tc, no_credentials_names_where_it_looked);
    tcase_add_test(tc, no_secret_in_any_message);
    suite_add_tcase(su, tc);
    return su;
}

int main(int argc, char **argv)
{
    int live = argc > 1 && strcmp(argv[1], "live") == 0;
    if (live && (!GF_HAVE_REMOTE || !getenv("GF_TEST_S3_ENDPOINT") || !getenv("GF_TEST_S3_BUCKET"))) {
        printf("remote_live: skipped (%s)\n", GF_HAVE_REMOTE ? "no GF_TEST_S3_ENDPOINT/_BUCKET"
                                                             : "built without the remote feature");
        return 77;
    }
    if (live)
        setenv("AWS_ENDPOINT_URL_S3", getenv("GF_TEST_S3_ENDPOINT"), 1);
    SRunner *sr = srunner_create(remote_suite(live));
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
