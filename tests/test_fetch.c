/* The fetcher's fault logic (src/remote_fetch.c) with no server process:
 * each connection libcurl opens is pointed (its CURLOPT_OPENSOCKETFUNCTION)
 * at a loopback listener made for it alone, and a thread of this test
 * answers that one connection from a script: a body cut short, a 206 for
 * other bytes, a resume answered by another object, a stall, nothing at
 * all. What is checked is what the fetcher asked (each request's Range
 * and If-Range) and what it delivered (the object's bytes, or an error
 * saying why), so a resume from the wrong byte fails here on any machine;
 * the real servers' suites (tests/remote_*.sh) check the same against
 * nginx and Swift. */
#include "remote_fetch.h"

#include "config.h"
#include "run_suite.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if GF_HAVE_REMOTE
#include <curl/curl.h>
#include <poll.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define OBJ 100000
#define MAX_CONN 8

typedef enum {
    CUT_THEN_RESUME,     /* 200 cut at 40000; the resume answered 206 */
    CUT_NO_VALIDATOR,    /* as above, without ETag or Last-Modified */
    WRONG_206,           /* a range answered with other bytes, then right */
    RESUME_CHANGED,      /* the resume answered 200 by another object */
    STALL_THEN_RESUME,   /* 100 bytes, then silence past stall_s */
    NOTHING,             /* every connection closed unanswered */
} script;

typedef struct fake {
    script s;
    pthread_mutex_t mu;
    int n_conn;
    char *request[MAX_CONN]; /* each connection's request head */
    pthread_t th[MAX_CONN];
} fake;

static uint8_t object[OBJ];

static void make_object(void)
{
    for (int i = 0; i < OBJ; i++)
        object[i] = (uint8_t)(i * 7 + i / 251);
}

static void put(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w <= 0)
            return; /* the fetcher hung up: fine */
        c += w, n -= (size_t)w;
    }
}

static void head(int fd, const char *status, const char *extra, size_t len)
{
    char h[512];
    int n = snprintf(h, sizeof h, "HTTP/1.1 %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
                     status, len, extra);
    put(fd, h, (size_t)n);
}

/* The value of header name in request r ("" if absent), into v. */
static void header(const char *r, const char *name, char *v, size_t cap)
{
    v[0] = 0;
    size_t nl = strlen(name);
    for (const char *p = r; p && *p; p = strstr(p, "\r\n"), p = p ? p + 2 : NULL)
        if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *s = p + nl + 1;
            while (*s == ' ')
                s++;
            size_t n = strcspn(s, "\r\n");
            snprintf(v, cap, "%.*s", (int)(n < cap ? n : cap - 1), s);
            return;
        }
}

/* The bytes [first, last] of the object, as a 206. */
static void part(int fd, uint64_t first, uint64_t last, const char *etag)
{
    char extra[256];
    snprintf(extra, sizeof extra, "Content-Range: bytes %llu-%llu/%d\r\n%s",
             (unsigned long long)first, (unsigned long long)last, OBJ, etag);
    head(fd, "206 Partial Content", extra, (size_t)(last - first + 1));
    put(fd, object + first, (size_t)(last - first + 1));
}

/* Answers what r asks (its Range, whole without one), with etag. */
static void honest(int fd, const char *r, const char *etag)
{
    char range[64];
    header(r, "Range", range, sizeof range);
    unsigned long long a, b;
    int k = sscanf(range, "bytes=%llu-%llu", &a, &b);
    if (k >= 1)
        part(fd, a, k == 2 ? b : OBJ - 1, etag);
    else {
        head(fd, "200 OK", etag, OBJ);
        put(fd, object, OBJ);
    }
}

static void respond(fake *fk, int conn, int fd, const char *r)
{
    const char *v1 = "ETag: \"v1\"\r\n";
    switch (fk->s) {
    case CUT_THEN_RESUME:
    case CUT_NO_VALIDATOR:
        if (conn == 0) {
            head(fd, "200 OK", fk->s == CUT_THEN_RESUME ? v1 : "", OBJ);
            put(fd, object, 40000);
        } else
            honest(fd, r, fk->s == CUT_THEN_RESUME ? v1 : "");
        break;
    case WRONG_206:
        if (conn == 0)
            part(fd, 0, 4999, v1); /* asked for 1000-5999 */
        else
            honest(fd, r, v1);
        break;
    case RESUME_CHANGED:
        if (conn == 0) {
            head(fd, "200 OK", v1, OBJ);
            put(fd, object, 40000);
        } else { /* If-Range no longer holds: the whole new object */
            head(fd, "200 OK", "ETag: \"v2\"\r\n", OBJ);
            put(fd, object, OBJ);
        }
        break;
    case STALL_THEN_RESUME:
        if (conn == 0) {
            head(fd, "200 OK", v1, OBJ);
            put(fd, object, 100);
            poll(NULL, 0, 3000); /* past stall_s = 1 */
        } else
            honest(fd, r, v1);
        break;
    case NOTHING:
        break;
    }
}

typedef struct {
    fake *fk;
    int conn, fd;
} conn_arg;

static void *serve(void *arg)
{
    conn_arg a = *(conn_arg *)arg;
    free(arg);
    struct pollfd lp = {.fd = a.fd, .events = POLLIN};
    int c = poll(&lp, 1, 10000) == 1 ? accept4(a.fd, NULL, NULL, SOCK_CLOEXEC) : -1;
    close(a.fd); /* the listener: one connection */
    if (c < 0)
        return NULL;
    a.fd = c;
    char r[4096];
    size_t n = 0;
    while (n + 1 < sizeof r) { /* the request's head */
        struct pollfd p = {.fd = a.fd, .events = POLLIN};
        if (poll(&p, 1, 10000) != 1)
            break;
        ssize_t k = recv(a.fd, r + n, sizeof r - 1 - n, 0);
        if (k <= 0)
            break;
        n += (size_t)k;
        r[n] = 0;
        if (strstr(r, "\r\n\r\n"))
            break;
    }
    r[n] = 0;
    pthread_mutex_lock(&a.fk->mu);
    a.fk->request[a.conn] = strdup(r);
    pthread_mutex_unlock(&a.fk->mu);
    respond(a.fk, a.conn, a.fd, r);
    close(a.fd);
    return NULL;
}

/* A listener on loopback for one connection; its address into *a. */
static int listener(struct sockaddr_in *a)
{
    *a = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof *a;
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l >= 0 && bind(l, (struct sockaddr *)a, sizeof *a) == 0 && listen(l, 1) == 0 &&
        getsockname(l, (struct sockaddr *)a, &al) == 0)
        return l;
    if (l >= 0)
        close(l);
    return -1;
}

/* Each connection libcurl opens goes to a listener of its own, made here,
 * whose one connection a thread of this test answers: libcurl connects
 * where this callback points the address it is given. */
static curl_socket_t open_socket(void *ctx, curlsocktype purpose, struct curl_sockaddr *addr)
{
    (void)purpose;
    fake *fk = ctx;
    struct sockaddr_in la;
    if (addr->family != AF_INET || addr->addrlen < sizeof la)
        return CURL_SOCKET_BAD;
    pthread_mutex_lock(&fk->mu);
    int conn = fk->n_conn, l = conn < MAX_CONN ? listener(&la) : -1;
    conn_arg *a = l >= 0 ? malloc(sizeof *a) : NULL;
    if (a) {
        *a = (conn_arg){fk, conn, l};
        if (pthread_create(&fk->th[conn], NULL, serve, a) == 0)
            fk->n_conn++;
        else
            free(a), a = NULL;
    }
    pthread_mutex_unlock(&fk->mu);
    if (!a) {
        if (l >= 0)
            close(l);
        return CURL_SOCKET_BAD;
    }
    memcpy(&addr->addr, &la, sizeof la);
    return socket(addr->family, addr->socktype, addr->protocol);
}

static int setup(void *ctx, void *easy, const gf__fetch_target *t, struct curl_slist **h,
                 char *why, size_t why_len)
{
    (void)t, (void)h, (void)why, (void)why_len;
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, ctx);
    curl_easy_setopt(easy, CURLOPT_FORBID_REUSE, 1L);
    return 0;
}

typedef struct {
    uint8_t *data;
    size_t len;
    int err;
    char why[256];
} outcome;

static int got(void *ctx, size_t i, gf__buf *b, int err, const char *why)
{
    (void)i;
    outcome *o = ctx;
    o->err = err;
    snprintf(o->why, sizeof o->why, "%s", why ? why : "");
    if (!err && (o->data = malloc(b->len ? b->len : 1)))
        memcpy(o->data, b->data, b->len), o->len = b->len;
    return 0;
}

/* One fetch of [off, off + len) (len GF__WHOLE_FILE: the object) under
 * script s; fk keeps what each connection was asked. */
static outcome fetch(fake *fk, script s, uint64_t off, uint64_t len, unsigned retries)
{
    *fk = (fake){.s = s};
    pthread_mutex_init(&fk->mu, NULL);
    gf__fetch_target t = {.url = "http://127.0.0.1:9/object.tar"};
    gf__fetch_target *tp = &t;
    gf__fetch_opts o = {.requests = 1, .connections = 1, .retries = retries, .backoff_ms = 1,
                        .backoff_max_ms = 1, .stall_s = 1, .deadline_s = 60,
                        .setup = setup, .setup_ctx = fk};
    outcome out = {0};
    char why[256] = "";
    int rc = gf__fetch_each(&tp, &off, &len, 1, &o, got, &out, why, sizeof why);
    ck_assert_msg(rc == 0, "%s", why);
    for (int i = 0; i < fk->n_conn; i++)
        pthread_join(fk->th[i], NULL);
    return out;
}

static void fake_free(fake *fk, outcome *o)
{
    for (int i = 0; i < fk->n_conn; i++)
        free(fk->request[i]);
    pthread_mutex_destroy(&fk->mu);
    free(o->data);
}

static void request_has(const fake *fk, int conn, const char *name, const char *want)
{
    char v[128];
    ck_assert_int_lt(conn, fk->n_conn);
    header(fk->request[conn], name, v, sizeof v);
    ck_assert_msg(strcmp(v, want) == 0, "connection %d's %s: '%s', want '%s'", conn, name, v,
                  want);
}

START_TEST(a_cut_body_resumes_from_the_byte_it_reached_naming_the_object)
{
    fake fk;
    outcome o = fetch(&fk, CUT_THEN_RESUME, 0, GF__WHOLE_FILE, 3);
    ck_assert_msg(o.err == 0, "%s", o.why);
    ck_assert_int_eq(fk.n_conn, 2);
    request_has(&fk, 0, "Range", "");
    request_has(&fk, 1, "Range", "bytes=40000-");
    request_has(&fk, 1, "If-Range", "\"v1\"");
    ck_assert_uint_eq(o.len, OBJ);
    ck_assert_msg(memcmp(o.data, object, OBJ) == 0, "the resumed object's bytes differ");
    fake_free(&fk, &o);
}
END_TEST

START_TEST(a_resume_without_a_validator_starts_over)
{
    fake fk;
    outcome o = fetch(&fk, CUT_NO_VALIDATOR, 0, GF__WHOLE_FILE, 3);
    ck_assert_msg(o.err == 0, "%s", o.why);
    ck_assert_int_eq(fk.n_conn, 2);
    request_has(&fk, 1, "Range", ""); /* the whole object again, not bytes=40000- */
    request_has(&fk, 1, "If-Range", "");
    ck_assert_uint_eq(o.len, OBJ);
    ck_assert(memcmp(o.data, object, OBJ) == 0);
    fake_free(&fk, &o);
}
END_TEST

START_TEST(a_206_for_other_bytes_is_asked_again_never_delivered)
{
    fake fk;
    outcome o = fetch(&fk, WRONG_206, 1000, 5000, 3);
    ck_assert_msg(o.err == 0, "%s", o.why);
    ck_assert_int_eq(fk.n_conn, 2);
    request_has(&fk, 0, "Range", "bytes=1000-5999");
    request_has(&fk, 1, "Range", "bytes=1000-5999");
    ck_assert_uint_eq(o.len, 5000);
    ck_assert_msg(memcmp(o.data, object + 1000, 5000) == 0, "another range's bytes delivered");
    fake_free(&fk, &o);
}
END_TEST

START_TEST(a_resume_answered_by_another_object_is_an_error_never_spliced)
{
    fake fk;
    outcome o = fetch(&fk, RESUME_CHANGED, 0, GF__WHOLE_FILE, 3);
    ck_assert_int_eq(fk.n_conn, 2);
    request_has(&fk, 1, "If-Range", "\"v1\"");
    ck_assert_int_eq(o.err, GF_EIO);
    ck_assert_msg(strstr(o.why, "the object changed since it was first read"), "%s", o.why);
    ck_assert_ptr_null(o.data);
    fake_free(&fk, &o);
}
END_TEST

START_TEST(a_stall_is_resumed_after_stall_s)
{
    fake fk;
    outcome o = fetch(&fk, STALL_THEN_RESUME, 0, GF__WHOLE_FILE, 3);
    ck_assert_msg(o.err == 0, "%s", o.why);
    ck_assert_int_eq(fk.n_conn, 2);
    request_has(&fk, 1, "Range", "bytes=100-");
    ck_assert_uint_eq(o.len, OBJ);
    ck_assert(memcmp(o.data, object, OBJ) == 0);
    fake_free(&fk, &o);
}
END_TEST

START_TEST(the_retries_spent_say_how_many_tries)
{
    fake fk;
    outcome o = fetch(&fk, NOTHING, 0, GF__WHOLE_FILE, 2);
    ck_assert_int_eq(fk.n_conn, 3); /* the first try and 2 retries */
    ck_assert_int_ne(o.err, 0);
    ck_assert_msg(strstr(o.why, "(3 tries)"), "%s", o.why);
    fake_free(&fk, &o);
}
END_TEST

static Suite *fetch_suite(void)
{
    Suite *s = suite_create("fetch");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_cut_body_resumes_from_the_byte_it_reached_naming_the_object);
    tcase_add_test(tc, a_resume_without_a_validator_starts_over);
    tcase_add_test(tc, a_206_for_other_bytes_is_asked_again_never_delivered);
    tcase_add_test(tc, a_resume_answered_by_another_object_is_an_error_never_spliced);
    tcase_add_test(tc, a_stall_is_resumed_after_stall_s);
    tcase_add_test(tc, the_retries_spent_say_how_many_tries);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    make_object();
    return tu_run_suite(fetch_suite());
}

#else

int main(void)
{
    puts("built without the remote feature: skipped");
    return 77;
}

#endif
