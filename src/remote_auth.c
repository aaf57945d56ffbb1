/* AWS credentials, region and endpoint (remote_auth.h), in the AWS CLI's
 * precedence, and the redaction of credentials from messages. On
 * gf_open's thread.
 *
 * Secrets pass through file buffers and the result's block: both are
 * zeroed before they are freed, and no message quotes a value or a line
 * of a file (a malformed line may be a secret). */
#include "remote_auth.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Shared files are a few lines; bigger is not one. */
#define INI_MAX_BYTES ((size_t)1 << 20)

typedef struct ini_entry {
    const char *section;
    const char *parent; /* the key an indented line is under, else NULL */
    const char *key, *value;
} ini_entry;

typedef struct ini_file {
    char *path;      /* as shown in messages */
    const char *env; /* the variable that named it, or NULL: the default */
    int present;     /* read and parsed */
    const char *absent; /* why not, for "where it looked" */
    char *text;
    size_t text_len;
    ini_entry *e;
    size_t n;
} ini_file;

static void ini_free(ini_file *f)
{
    if (f->text) {
        explicit_bzero(f->text, f->text_len);
        free(f->text);
    }
    free(f->e);
    free(f->path);
    memset(f, 0, sizeof *f);
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* "~/x" as the CLI expands it; NULL on no memory or no HOME. */
static char *expand_home(const char *p)
{
    const char *home = env("HOME");
    if (p[0] == '~' && p[1] == '/') {
        if (!home)
            return NULL;
        size_t hl = strlen(home), pl = strlen(p + 1);
        char *r = malloc(hl + pl + 1);
        if (r) {
            memcpy(r, home, hl);
            memcpy(r + hl, p + 1, pl + 1);
        }
        return r;
    }
    return strdup(p);
}

static char *trim(char *s, char *e)
{
    while (s < e && (*s == ' ' || *s == '\t'))
        s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        e--;
    *e = '\0';
    return s;
}

/* Parses f->text in place into f->e; 0 or GF_EINVAL/GF_ENOMEM with why
 * naming the file and line (never its text). */
static int ini_parse(ini_file *f, char *why, size_t why_len)
{
    size_t lines = 1;
    for (size_t i = 0; i < f->text_len; i++)
        lines += f->text[i] == '\n';
    f->e = calloc(lines, sizeof *f->e);
    if (!f->e)
        return GF_ENOMEM;
    const char *section = NULL, *open_key = NULL; /* a top-level key with no value */
    int after_value = 0;                          /* the last key line had a value */
    char *p = f->text, *end = f->text + f->text_len;
    for (unsigned line = 1; p < end; line++) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end;
        int indented = p < le && (*p == ' ' || *p == '\t');
        char *s = trim(p, le);
        p = nl ? nl + 1 : end;
        if (*s == '\0' || *s == '#' || *s == ';')
            continue;
        const char *bad = NULL;
        if (*s == '[') {
            size_t sl = strlen(s);
            if (indented || s[sl - 1] != ']')
                bad = "a section header is \"[name]\" at the start of a line";
            else {
                s[sl - 1] = '\0';
                section = trim(s + 1, s + sl - 1);
                open_key = NULL;
                after_value = 0;
                continue;
            }
        }
        char *eq = bad ? NULL : strpbrk(s, "=:");
        if (!bad && !section)
            bad = "a key before any [section]";
        else if (!bad && !eq)
            bad = "neither [section] nor key = value";
        if (!bad) {
            *eq = '\0';
            char *k = trim(s, eq);
            char *v = trim(eq + 1, eq + 1 + strlen(eq + 1));
            if (!*k)
                bad = "no key before '='";
            else if (indented && !open_key)
                bad = after_value ? "an indented line continuing a value (not supported)"
                                  : "an indented key under no \"key =\" line";
            else {
                f->e[f->n++] = (ini_entry){section, indented ? open_key : NULL, k, v};
                if (!indented) {
                    open_key = *v ? NULL : k;
                    after_value = *v != '\0';
                }
                continue;
            }
        }
        gf__why(why, why_len, "%s%s%s line %u: %s", f->env ? f->env : "", f->env ? "=" : "",
                f->path, line, bad);
        return GF_EINVAL;
    }
    return 0;
}

/* Reads and parses path into f. Unreadable: an error when env named it,
 * else f->present = 0 and f->absent says why. */
static int ini_load(ini_file *f, const char *path_env, const char *default_rel, char *why,
                    size_t why_len)
{
    memset(f, 0, sizeof *f);
    const char *given = env(path_env);
    if (given) {
        f->env = path_env;
        f->path = expand_home(given);
        if (!f->path && !(given[0] == '~' && given[1] == '/'))
            return GF_ENOMEM;
        if (!f->path) {
            gf__why(why, why_len, "%s=%s: cannot expand '~': HOME is not set", path_env, given);
            return GF_EINVAL;
        }
    } else {
        const char *home = env("HOME");
        if (!home) {
            f->absent = "HOME is not set";
            f->path = strdup(default_rel);
            return f->path ? 0 : GF_ENOMEM;
        }
        size_t hl = strlen(home), rl = strlen(default_rel);
        f->path = malloc(hl + 1 + rl + 1);
        if (!f->path)
            return GF_ENOMEM;
        memcpy(f->path, home, hl);
        f->path[hl] = '/';
        memcpy(f->path + hl + 1, default_rel, rl + 1);
    }
    int fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    const char *no = NULL;
    int err = 0;
    if (fd < 0 || fstat(fd, &st) != 0)
        err = errno;
    else if (!S_ISREG(st.st_mode))
        no = "not a regular file";
    else if ((uint64_t)st.st_size > INI_MAX_BYTES)
        no = "larger than 1 MiB";
    if (!err && !no) {
        f->text = malloc((size_t)st.st_size + 1);
        if (!f->text) {
            close(fd);
            return GF_ENOMEM;
        }
        size_t got = 0;
        while (got < (size_t)st.st_size) {
            ssize_t r = read(fd, f->text + got, (size_t)st.st_size - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                err = r < 0 ? errno : 0;
                break;
            }
            got += (size_t)r;
        }
        f->text_len = got;
        f->text[got] = '\0';
    }
    if (fd >= 0)
        close(fd);
    if (err || no) {
        if (f->env) {
            gf__why(why, why_len, "%s=%s: cannot read it: %s", f->env, f->path,
                    no ? no : strerror(err));
            return GF_EINVAL;
        }
        f->absent = no ? no : err == ENOENT ? "no such file" : "cannot be read";
        return 0;
    }
    f->present = 1;
    return ini_parse(f, why, why_len);
}

/* 1 if a section header names profile name: the credentials file's
 * "[name]"; the config file's "[profile name]", or "[default]". */
static int is_profile(const char *section, const char *name, int config)
{
    if (!config)
        return strcmp(section, name) == 0;
    if (strcmp(name, "default") == 0 && strcmp(section, "default") == 0)
        return 1;
    if (strncmp(section, "profile", 7) != 0 || (section[7] != ' ' && section[7] != '\t'))
        return 0;
    const char *s = section + 8;
    while (*s == ' ' || *s == '\t')
        s++;
    return strcmp(s, name) == 0;
}

static int has_profile(const ini_file *f, const char *name, int config)
{
    for (size_t i = 0; f->present && i < f->n; i++)
        if (is_profile(f->e[i].section, name, config))
            return 1;
    return 0;
}

/* The value of key (under parent, or top-level when NULL) in profile
 * name's section; the first one. */
static const char *profile_get(const ini_file *f, const char *name, int config, const char *key)
{
    for (size_t i = 0; f->present && i < f->n; i++) {
        const ini_entry *e = &f->e[i];
        if (!e->parent && strcmp(e->key, key) == 0 && is_profile(e->section, name, config))
            return e->value;
    }
    return NULL;
}

/* `[services NAME]`'s  "s3 =" / "  endpoint_url = URL". */
static const char *services_s3_endpoint(const ini_file *f, const char *services)
{
    for (size_t i = 0; f->present && i < f->n; i++) {
        const ini_entry *e = &f->e[i];
        if (strncmp(e->section, "services", 8) != 0 ||
            (e->section[8] != ' ' && e->section[8] != '\t'))
            continue;
        const char *s = e->section + 9;
        while (*s == ' ' || *s == '\t')
            s++;
        if (strcmp(s, services) == 0 && e->parent && strcmp(e->parent, "s3") == 0 &&
            strcmp(e->key, "endpoint_url") == 0)
            return e->value;
    }
    return NULL;
}

static int region_ok(const char *r)
{
    size_t n = strlen(r);
    if (n == 0 || n > 32)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((r[i] >= 'a' && r[i] <= 'z') || (r[i] >= '0' && r[i] <= '9') || r[i] == '-'))
            return 0;
    return 1;
}

/* An endpoint URL: http(s)://HOST..., no userinfo, query or fragment;
 * NULL, or why not (the URL may be quoted only when there is no '@'). */
static const char *endpoint_bad(const char *u)
{
    size_t sl = strncasecmp(u, "https://", 8) == 0 ? 8 : strncasecmp(u, "http://", 7) == 0 ? 7 : 0;
    if (!sl)
        return "not an http:// or https:// URL";
    const char *host = u + sl;
    size_t hl = strcspn(host, "/");
    if (strchr(u, '@'))
        return "a URL with a user name or password is refused";
    if (hl == 0)
        return "no host";
    if (strpbrk(u, "?# \t\r\n"))
        return "a query, fragment or space is refused";
    return NULL;
}

typedef struct found {
    const char *ak, *sk, *token, *region, *endpoint;
    char from[PATH_MAX + 160];
} found;

/* The pair from profile name's section of f, if any; GF_EINVAL for half
 * a pair. */
static int creds_in(const ini_file *f, const char *name, int config, found *c, char *why,
                    size_t why_len)
{
    const char *ak = profile_get(f, name, config, "aws_access_key_id");
    const char *sk = profile_get(f, name, config, "aws_secret_access_key");
    if (ak && !*ak)
        ak = NULL;
    if (sk && !*sk)
        sk = NULL;
    if (!ak && !sk)
        return 0;
    if (!ak || !sk) {
        gf__why(why, why_len, "%s [%s%s]: %s without %s", f->path,
                config && strcmp(name, "default") ? "profile " : "", name,
                ak ? "aws_access_key_id" : "aws_secret_access_key",
                ak ? "aws_secret_access_key" : "aws_access_key_id");
        return GF_EINVAL;
    }
    c->ak = ak;
    c->sk = sk;
    c->token = profile_get(f, name, config, "aws_session_token");
    if (c->token && !*c->token)
        c->token = NULL;
    snprintf(c->from, sizeof c->from, "%s [%s%s]", f->path,
             config && strcmp(name, "default") ? "profile " : "", name);
    return 1;
}

/* "no AWS credentials: ..." naming each place looked at. */
static void no_creds(const ini_file *cf, const ini_file *cfg, const char *profile, char *why,
                     size_t why_len)
{
    char looked[2][PATH_MAX + 96];
    const ini_file *fs[2] = {cf, cfg};
    for (int i = 0; i < 2; i++) {
        const ini_file *f = fs[i];
        const char *state = !f->present                        ? f->absent
                            : !has_profile(f, profile, i == 1) ? "no such section"
                                                               : "no keys there";
        snprintf(looked[i], sizeof looked[i], "%s%s%s [%s%s]: %s", f->env ? f->env : "",
                 f->env ? "=" : "", f->path, i == 1 && strcmp(profile, "default") ? "profile " : "",
                 profile, state);
    }
    /* Kinds of credentials we do not read yet, named so the user knows. */
    static const char *const other[] = {"role_arn", "credential_process", "sso_session",
                                        "sso_start_url", "web_identity_token_file"};
    const char *uses = NULL;
    for (size_t k = 0; k < sizeof other / sizeof *other && !uses; k++)
        if (profile_get(cf, profile, 0, other[k]) || profile_get(cfg, profile, 1, other[k]))
            uses = other[k];
    char extra[160] = "";
    if (uses)
        snprintf(extra, sizeof extra, "; the profile's %s is not supported (only static keys)",
                 uses);
    gf__why(why, why_len,
            "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile in "
            "~/.aws/credentials (looked in: the environment; %s; %s)%s; anonymous access is not "
            "supported yet",
            looked[0], looked[1], extra);
}

static char *put(char **w, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *r = memcpy(*w, s, n);
    *w += n;
    return r;
}

static int load(gf__remote_auth *a, int need, ini_file *cf, ini_file *cfg, char *why,
                size_t why_len)
{
    found c = {0};
    int rc;
    const char *eak = env("AWS_ACCESS_KEY_ID"), *esk = env("AWS_SECRET_ACCESS_KEY");
    if (!eak != !esk) {
        gf__why(why, why_len, "%s is set but %s is not (or is empty)",
                eak ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                eak ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
        return GF_EINVAL;
    }
    const char *profile = env("AWS_PROFILE");
    int explicit_profile = profile != NULL;
    if (!profile)
        profile = "default";
    if ((rc = ini_load(cf, "AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials", why, why_len)) < 0 ||
        (rc = ini_load(cfg, "AWS_CONFIG_FILE", ".aws/config", why, why_len)) < 0)
        return rc;
    if (explicit_profile && !has_profile(cf, profile, 0) && !has_profile(cfg, profile, 1)) {
        gf__why(why, why_len, "AWS_PROFILE=%s: no such profile in %s (%s) or %s (%s)", profile,
                cf->path, cf->present ? "no [NAME]" : cf->absent, cfg->path,
                cfg->present ? "no [profile NAME]" : cfg->absent);
        return GF_EINVAL;
    }
    if (eak) {
        c.ak = eak;
        c.sk = esk;
        c.token = env("AWS_SESSION_TOKEN");
        snprintf(c.from, sizeof c.from, "environment");
    } else if ((rc = creds_in(cf, profile, 0, &c, why, why_len)) < 0 ||
               (rc == 0 && (rc = creds_in(cfg, profile, 1, &c, why, why_len)) < 0)) {
        return rc;
    }
    if (!c.ak && need) {
        no_creds(cf, cfg, profile, why, why_len);
        return GF_EINVAL;
    }

    const char *region_from = "AWS_REGION";
    if (!(c.region = env("AWS_REGION"))) {
        region_from = "AWS_DEFAULT_REGION";
        c.region = env("AWS_DEFAULT_REGION");
    }
    if (!c.region) {
        region_from = cf->path;
        c.region = profile_get(cf, profile, 0, "region");
    }
    if (!c.region || !*c.region) {
        region_from = cfg->path;
        c.region = profile_get(cfg, profile, 1, "region");
    }
    if (!c.region || !*c.region)
        c.region = "us-east-1";
    if (!region_ok(c.region)) {
        /* Not quoted: a value misplaced in a file may be a secret. */
        gf__why(why, why_len, "%s: the region is not a region name ([a-z0-9-], e.g. eu-west-1)",
                region_from);
        return GF_EINVAL;
    }

    const char *ignore = env("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
    const char *ep_from = NULL;
    if (!(ignore && strcasecmp(ignore, "true") == 0)) {
        if ((c.endpoint = env("AWS_ENDPOINT_URL_S3")))
            ep_from = "AWS_ENDPOINT_URL_S3";
        else if ((c.endpoint = env("AWS_ENDPOINT_URL")))
            ep_from = "AWS_ENDPOINT_URL";
        if (!c.endpoint) {
            const char *svc = profile_get(cf, profile, 0, "services");
            if (!svc || !*svc)
                svc = profile_get(cfg, profile, 1, "services");
            if (svc && *svc && (c.endpoint = services_s3_endpoint(cfg, svc)))
                ep_from = cfg->path;
        }
        if (!c.endpoint || !*c.endpoint) {
            ep_from = cf->path;
            c.endpoint = profile_get(cf, profile, 0, "endpoint_url");
        }
        if (!c.endpoint || !*c.endpoint) {
            ep_from = cfg->path;
            c.endpoint = profile_get(cfg, profile, 1, "endpoint_url");
        }
        if (c.endpoint && !*c.endpoint)
            c.endpoint = NULL;
    }
    const char *bad = c.endpoint ? endpoint_bad(c.endpoint) : NULL;
    if (bad) {
        int quote = strchr(c.endpoint, '@') == NULL;
        gf__why(why, why_len, "%s: the S3 endpoint%s%.200s%s: %s", ep_from, quote ? " '" : "",
                quote ? c.endpoint : "", quote ? "'" : "", bad);
        return GF_EINVAL;
    }

    size_t n = 0;
    const char *all[] = {c.ak, c.sk, c.token, c.region, c.endpoint, c.ak ? c.from : NULL};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        n += all[i] ? strlen(all[i]) + 1 : 0;
    a->block = malloc(n);
    if (!a->block)
        return GF_ENOMEM;
    a->block_len = n;
    char *w = a->block;
    a->access_key = put(&w, c.ak);
    a->secret_key = put(&w, c.sk);
    a->session_token = put(&w, c.token);
    a->region = put(&w, c.region);
    char *ep = put(&w, c.endpoint);
    if (ep) {
        /* gf__remote_targets joins "ENDPOINT/BUCKET". */
        size_t el = strlen(ep);
        while (el > 0 && ep[el - 1] == '/')
            ep[--el] = '\0';
    }
    a->endpoint = ep;
    a->creds_from = put(&w, c.ak ? c.from : NULL);
    return 0;
}

int gf__remote_auth_load(gf__remote_auth *a, int need_credentials, char *why, size_t why_len)
{
    if (!a)
        return GF_EINVAL;
    memset(a, 0, sizeof *a);
    if (why && why_len)
        why[0] = '\0';
    ini_file cf, cfg;
    memset(&cf, 0, sizeof cf);
    memset(&cfg, 0, sizeof cfg);
    int rc = load(a, need_credentials, &cf, &cfg, why, why_len);
    ini_free(&cf);
    ini_free(&cfg);
    if (rc == GF_ENOMEM)
        gf__why(why, why_len, "out of memory reading the AWS configuration");
    if (rc < 0)
        gf__remote_auth_free(a);
    return rc;
}

void gf__remote_auth_free(gf__remote_auth *a)
{
    if (!a)
        return;
    if (a->block) {
        explicit_bzero(a->block, a->block_len);
        free(a->block);
    }
    memset(a, 0, sizeof *a);
}

/* Replaces msg[at, at + n) with "<redacted>", within len. */
static size_t redact_span(char *msg, size_t len, size_t at, size_t n)
{
    static const char r[] = "<redacted>";
    size_t rl = sizeof r - 1, ml = strlen(msg);
    size_t tail = ml - (at + n);
    if (at + rl + tail + 1 > len) /* no room: drop the tail */
        tail = at + rl + 1 <= len ? len - 1 - at - rl : 0;
    if (at + rl + 1 > len) {
        msg[at] = '\0';
        return 0;
    }
    memmove(msg + at + rl, msg + at + n, tail);
    memcpy(msg + at, r, rl);
    msg[at + rl + tail] = '\0';
    return rl;
}

static void redact_value(char *msg, size_t len, const char *v)
{
    size_t vl = v ? strlen(v) : 0;
    if (vl == 0)
        return;
    char *p;
    size_t from = 0;
    while ((p = strstr(msg + from, v)) != NULL) {
        size_t at = (size_t)(p - msg);
        from = at + redact_span(msg, len, at, vl);
        if (from >= strlen(msg))
            break;
    }
    /* A message cut short may end in the value's first bytes. */
    size_t ml = strlen(msg);
    for (size_t k = GF__MIN(vl - 1, ml); k >= 4 && vl > 4; k--)
        if (memcmp(msg + ml - k, v, k) == 0) {
            redact_span(msg, len, ml - k, k);
            break;
        }
}

/* The value after each name (any case) up to a character in stop. */
static void redact_after(char *msg, size_t len, const char *name, const char *stop)
{
    size_t nl = strlen(name), from = 0;
    for (;;) {
        size_t ml = strlen(msg), at = from;
        while (at + nl <= ml && strncasecmp(msg + at, name, nl) != 0)
            at++;
        if (at + nl > ml)
            return;
        at += nl;
        while (msg[at] == ' ')
            at++;
        size_t vl = strcspn(msg + at, stop);
        from = at + (vl ? redact_span(msg, len, at, vl) : 0);
        if (from >= strlen(msg))
            return;
    }
}

void gf__remote_redact(char *msg, size_t len, const gf__remote_auth *a)
{
    if (!msg || !len)
        return;
    msg[len - 1] = '\0';
    if (a) {
        redact_value(msg, len, a->secret_key);
        redact_value(msg, len, a->session_token);
    }
    redact_after(msg, len, "authorization:", "\r\n");
    redact_after(msg, len, "x-amz-security-token:", "\r\n");
    redact_after(msg, len, "x-amz-security-token=", "& \r\n");
    redact_after(msg, len, "x-amz-signature=", "& \r\n");
}
