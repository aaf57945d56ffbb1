/*
 * gpufeed._gpufeed._Loader: the C half of gpufeed.Loader (gpufeed/__init__.py
 * checks the arguments and names): next, close, stats, state, and the
 * index's observers; with samples= the loader over (paths, labels) given
 * in memory, and set_order, the caller's sampler for one epoch. Runs on
 * the Python threads that call it, with the GIL; every call that can
 * block drops it (gf_open, gf_open_samples, the wait for a batch, close,
 * gf_set_state, gf_set_order, gf_read_sample).
 */
#include <string.h>

#include "gpufeed_py.h"

typedef struct {
    PyObject_HEAD
    gfp_core *core; /* NULL once closed */
} LoaderObject;


static gfp_core *loader_core(LoaderObject *self)
{
    if (!self->core)
        PyErr_SetString(PyExc_ValueError, "the loader is closed");
    else if (gfp_refuse_inherited(self->core, "gpufeed.Loader"))
        return NULL;
    return self->core;
}

/* For a call that drops the GIL: a reference of its own, so that close()
 * from another thread meanwhile cannot free the core under it, and the
 * consumer's calls one at a time (gf_next's rule). */
static gfp_core *loader_enter(LoaderObject *self, const char *what)
{
    gfp_core *c = loader_core(self);
    if (!c)
        return NULL;
    if (c->busy) {
        PyErr_Format(PyExc_RuntimeError, "%s: another thread is iterating this loader or "
                     "loading its state (one consumer at a time)", what);
        return NULL;
    }
    c->busy = 1;
    atomic_fetch_add(&c->refs, 1);
    return c;
}

static void loader_leave(gfp_core *c)
{
    c->busy = 0;
    Py_BEGIN_ALLOW_THREADS
    gfp_core_unref(c);
    Py_END_ALLOW_THREADS
}

/* Raises cls with "what is TYPE, not want" (the limited API has no %T). */
static int type_error(const char *what, PyObject *obj, const char *want)
{
    PyObject *name = PyType_GetName(Py_TYPE(obj));
    if (name)
        PyErr_Format(PyExc_TypeError, "%s is %S, not %s", what, name, want);
    Py_XDECREF(name);
    return -1;
}

/* samples=(paths, labels), as gf_open_samples takes them: paths point
 * into the bytes objects `keep` holds. */
typedef struct samples_arg {
    const char **paths;
    int32_t *labels;
    Py_ssize_t n;
    PyObject *keep;
} samples_arg;

static void samples_free(samples_arg *a)
{
    PyMem_Free(a->paths);
    PyMem_Free(a->labels);
    Py_XDECREF(a->keep);
    memset(a, 0, sizeof *a);
}

/* One path as bytes: a str encoded as os.fsencode does (so a name
 * os.listdir decoded with surrogateescape comes back as its bytes),
 * bytes as they are, an os.PathLike through its __fspath__. */
static PyObject *path_bytes(PyObject *item, Py_ssize_t i)
{
    char what[64];
    snprintf(what, sizeof what, "samples: paths[%zd]", i);
    PyObject *fs = PyUnicode_Check(item) || PyBytes_Check(item) ? Py_NewRef(item)
                                                                 : PyOS_FSPath(item);
    if (!fs) {
        PyErr_Clear();
        type_error(what, item, "str, bytes or os.PathLike");
        return NULL;
    }
    PyObject *b = PyUnicode_Check(fs) ? PyUnicode_EncodeFSDefault(fs) : Py_NewRef(fs);
    Py_DECREF(fs);
    if (!b)
        return NULL;
    char *p;
    Py_ssize_t len;
    if (PyBytes_AsStringAndSize(b, &p, &len) < 0) {
        Py_DECREF(b);
        return NULL;
    }
    if (memchr(p, '\0', (size_t)len)) {
        PyErr_Format(PyExc_ValueError, "%s holds a NUL byte", what);
        Py_DECREF(b);
        return NULL;
    }
    return b;
}

static int samples_from(PyObject *obj, samples_arg *a)
{
    memset(a, 0, sizeof *a);
    if (PyUnicode_Check(obj) || PyBytes_Check(obj) || !PySequence_Check(obj) ||
        PySequence_Size(obj) != 2) {
        PyErr_Clear();
        return type_error("samples", obj, "a pair (paths, labels)");
    }
    PyObject *paths = PySequence_GetItem(obj, 0), *labels = PySequence_GetItem(obj, 1);
    int rc = -1;
    if (!paths || !labels)
        goto out;
    if (PyUnicode_Check(paths) || PyBytes_Check(paths) || !PySequence_Check(paths)) {
        type_error("samples: paths", paths, "a sequence of paths");
        goto out;
    }
    if (PyUnicode_Check(labels) || PyBytes_Check(labels) || !PySequence_Check(labels)) {
        type_error("samples: labels", labels, "a sequence of ints");
        goto out;
    }
    Py_ssize_t n = PySequence_Size(paths), m = PySequence_Size(labels);
    if (n < 0 || m < 0)
        goto out;
    if (n != m) {
        PyErr_Format(PyExc_ValueError, "samples: %zd paths but %zd labels", n, m);
        goto out;
    }
    a->n = n;
    a->keep = PyList_New(n);
    a->paths = PyMem_Calloc(n ? (size_t)n : 1, sizeof *a->paths);
    a->labels = PyMem_Calloc(n ? (size_t)n : 1, sizeof *a->labels);
    if (!a->keep || !a->paths || !a->labels) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_GetItem(paths, i);
        PyObject *b = item ? path_bytes(item, i) : NULL;
        Py_XDECREF(item);
        if (!b)
            goto out;
        a->paths[i] = PyBytes_AsString(b);
        PyList_SetItem(a->keep, i, b); /* steals b, which stays alive */
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_GetItem(labels, i);
        if (!item)
            goto out;
        PyObject *v = PyNumber_Index(item); /* int, numpy's ints, a 0-d tensor */
        if (!v) {
            PyErr_Clear();
            char what[64];
            snprintf(what, sizeof what, "samples: labels[%zd]", i);
            type_error(what, item, "an int");
            Py_DECREF(item);
            goto out;
        }
        Py_DECREF(item);
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        Py_DECREF(v);
        if (overflow || x < INT32_MIN || x > INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "samples: labels[%zd] is out of range 0 .. %d", i,
                         INT32_MAX - 1);
            goto out;
        }
        a->labels[i] = (int32_t)x; /* a negative one: gf_open_samples names it */
    }
    rc = 0;
out:
    Py_XDECREF(paths);
    Py_XDECREF(labels);
    if (rc < 0)
        samples_free(a);
    return rc;
}

/* A UserWarning naming what an ImageFolder walk left out on purpose
 * (gf_skipped_entry): where torchvision's ImageFolder would differ, said
 * at open rather than found in stats. 0, or -1 with the error set. */
static int warn_left_out(gf_loader *l)
{
    uint64_t n = gf_skipped_entry(l, 0, NULL, NULL);
    if (!n)
        return 0;
    char msg[4096];
    size_t len = (size_t)snprintf(msg, sizeof msg, "gpufeed: %llu entries of the folder left out:",
                                  (unsigned long long)n);
    for (uint64_t i = 0; i < n && i < GF_SKIPPED_NAMED_MAX && len < sizeof msg; i++) {
        const char *path = "", *reason = "";
        gf_skipped_entry(l, i, &path, &reason);
        len += (size_t)snprintf(msg + len, sizeof msg - len, "%s %s: %s", i ? ";" : "", path,
                                reason);
    }
    return PyErr_WarnEx(PyExc_UserWarning, msg, 1);
}

/* A UserWarning naming the shard keys skipped at open for a .cls that is
 * no label (gf_recent_warnings' entries of sample -1, the first few), as
 * C's on_sample_warning hears of them. 0, or -1 with the error set. */
static int warn_label_skips(gf_loader *l)
{
    gf_sample_error w[GF_RECENT_WARNINGS];
    int n = gf_recent_warnings(l, w, GF_RECENT_WARNINGS), keys = 0;
    char msg[4096];
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof msg; i++)
        if (w[i].sample < 0)
            len += (size_t)snprintf(msg + len, sizeof msg - len, "%s %s: %s", keys++ ? ";" : "",
                                    w[i].path, w[i].reason);
    if (!keys)
        return 0;
    return PyErr_WarnFormat(PyExc_UserWarning, 1,
                            "gpufeed: %d shard key(s) skipped, their .cls no label:%s", keys,
                            msg);
}

/* _Loader(data, settings, samples=None): gf_open over data, or with
 * samples = (paths, labels) gf_open_samples (data: their root, or None). */
static PyObject *loader_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"data", "settings", "samples", NULL};
    PyObject *data, *fields, *samples = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO!|O:_Loader", kwlist, &data, &PyDict_Type,
                                     &fields, &samples))
        return NULL;
    bool given = samples != Py_None;
    /* data: the path's bytes (os.fsencode), as the file system has them. */
    if (!PyBytes_Check(data) && !PyUnicode_Check(data) && !(given && data == Py_None)) {
        type_error("_Loader: data", data, given ? "bytes, a str or None" : "bytes or a str");
        return NULL;
    }
    samples_arg sa = {0};
    if (given && samples_from(samples, &sa) < 0)
        return NULL;
    PyObject *root = data == Py_None ? PyBytes_FromString("") : Py_NewRef(data);
    gf_settings s;
    if (!root || gfp_settings_from(&s, root, fields) < 0) {
        Py_XDECREF(root);
        samples_free(&sa);
        return NULL;
    }
    gfp_core *c;
    char why[1024];
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = given ? gfp_core_open_samples(&c, &s, sa.paths, sa.labels, (uint64_t)sa.n, why,
                                       sizeof why)
               : gfp_core_open(&c, &s, why, sizeof why);
    Py_END_ALLOW_THREADS
    Py_DECREF(root); /* s.data pointed into it: gf_open keeps no pointer */
    samples_free(&sa);
    if (rc < 0)
        return gfp_raise(rc, why, NULL);
    LoaderObject *self = (LoaderObject *)((allocfunc)PyType_GetSlot(tp, Py_tp_alloc))(tp, 0);
    if (!self) {
        Py_BEGIN_ALLOW_THREADS
        gfp_core_unref(c);
        Py_END_ALLOW_THREADS
        return NULL;
    }
    self->core = c;
    if (warn_left_out(c->l) < 0 || warn_label_skips(c->l) < 0) { /* warnings as errors */
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static void loader_drop(LoaderObject *self)
{
    gfp_core *c = self->core;
    self->core = NULL;
    if (c && !gfp_inherited(c)) { /* a fork()ed child's copy is leaked, untouched */
        c->closed = 1;
        gfp_core_drop_pending(c);
        Py_BEGIN_ALLOW_THREADS
        gfp_core_unref(c);
        Py_END_ALLOW_THREADS
    }
}

static void loader_dealloc(PyObject *op)
{
    PyTypeObject *tp = Py_TYPE(op);
    loader_drop((LoaderObject *)op);
    ((freefunc)PyType_GetSlot(tp, Py_tp_free))(op);
    Py_DECREF(tp);
}

static PyObject *loader_close(PyObject *op, PyObject *unused)
{
    (void)unused;
    loader_drop((LoaderObject *)op);
    Py_RETURN_NONE;
}

/* The next Batch, or None after the last epoch. */
static PyObject *loader_take(PyObject *op, bool where)
{
    gfp_core *c = loader_enter((LoaderObject *)op, "next");
    if (!c)
        return NULL;
    gf_batch *b;
    int rc = gfp_core_next(c, &b);
    PyObject *out = NULL;
    if (rc == 1)
        ; /* KeyboardInterrupt (or a handler's exception) */
    else if (rc == GF_EOF)
        out = Py_NewRef(Py_None);
    else if (rc < 0) {
        char msg[1200];
        const char *why = gf_last_error(c->l);
        if (rc == GF_EBUSY)
            snprintf(msg, sizeof msg, "%s (a Batch, or a tensor made from one, holds its "
                     "batch: keep copies, tensor.clone(), instead of the batches, or raise "
                     "max_held_batches)", why);
        else
            snprintf(msg, sizeof msg, "%s", why);
        gfp_raise(rc, msg, c->l);
    } else {
        uint64_t epoch = b->epoch, position = b->position;
        out = gfp_batch_new(c, b);
        if (out && where)
            out = Py_BuildValue("NKK", out, (unsigned long long)epoch,
                                (unsigned long long)position);
    }
    loader_leave(c);
    return out;
}

static PyObject *loader_next(PyObject *op, PyObject *unused)
{
    (void)unused;
    return loader_take(op, false);
}

/* (Batch, epoch, position) or None: the Python layer learns where a batch
 * is without touching it, so a batch it has not yet handed on is still
 * "untouched" if an exception (a KeyboardInterrupt) drops it. */
static PyObject *loader_take_where(PyObject *op, PyObject *unused)
{
    (void)unused;
    return loader_take(op, true);
}

/* A row of GF_STATS_MAP as its key and value: STAT_(U64, samples). */
#define STAT_(kind, f) if (put(d, #f, STAT_##kind(st.f)) < 0) goto fail;
#define STAT_U64(v) PyLong_FromUnsignedLongLong(v)
#define STAT_INT(v) PyLong_FromLong(v)
#define STAT_FLAG(v) PyLong_FromLong(v) /* an int, as it has always been */
#define STAT_DBL(v) PyFloat_FromDouble(v)
/* Texts that may hold a path: its bytes survive (os.fsencode gives them back). */
#define STAT_STR(v) PyUnicode_DecodeFSDefault(v)

static int put(PyObject *d, const char *key, PyObject *v)
{
    int rc = v ? PyDict_SetItemString(d, key, v) : -1;
    Py_XDECREF(v);
    return rc;
}

PyObject *gfp_error_dict(int64_t sample, int code, const char *path, const char *reason)
{
    /* A reason may quote a member name or a path: any bytes, decoded as paths
     * are; NULL (a verify entry's, never seen) stays None as "s" made it. */
    return Py_BuildValue("{s:L,s:i,s:s,s:N,s:N}", "sample", (long long)sample, "code", code,
                         "error", gf_err_name(code), "path",
                         path ? PyUnicode_DecodeFSDefault(path) : Py_NewRef(Py_None), "reason",
                         reason ? PyUnicode_DecodeFSDefault(reason) : Py_NewRef(Py_None));
}

PyObject *gfp_sample_error_dict(const gf_sample_error *e)
{
    return gfp_error_dict(e->sample, e->code, e->path, e->reason);
}

static PyObject *loader_stats(PyObject *op, PyObject *unused)
{
    (void)unused;
    gfp_core *c = loader_core((LoaderObject *)op);
    if (!c)
        return NULL;
    gf_stats st;
    gf_get_stats(c->l, &st);
    if (c->pending) { /* taken back after a KeyboardInterrupt: not delivered */
        st.batches--;
        st.samples -= (uint64_t)c->pending->count;
        st.epoch = c->pending_state.epoch;
        st.position = c->pending_state.position;
    }
    PyObject *d = PyDict_New(), *l = NULL;
    if (!d)
        return NULL;
    GF_STATS_MAP(STAT_) /* every value of gf_stats, in its order */
    if (put(d, "held", PyLong_FromLong(atomic_load(&c->held))) < 0)
        goto fail;
    PyObject *kinds = PyDict_New();
    if (put(d, "errors_by_kind", Py_XNewRef(kinds)) < 0) {
        Py_XDECREF(kinds);
        goto fail;
    }
    for (int k = 0; k < GF_SAMPLE_ERROR_KINDS; k++)
        if (put(kinds, gf_err_name(GF_ENOENT - k), PyLong_FromUnsignedLongLong(st.errors_by_kind[k])) < 0) {
            Py_DECREF(kinds);
            goto fail;
        }
    Py_DECREF(kinds);
    l = PyList_New(0);
    if (!l)
        goto fail;
    for (int i = 0; i < st.n_recent; i++) {
        PyObject *e = gfp_sample_error_dict(&st.recent[i]);
        if (!e || PyList_Append(l, e) < 0) {
            Py_XDECREF(e);
            goto fail;
        }
        Py_DECREF(e);
    }
    if (PyDict_SetItemString(d, "recent", l) < 0)
        goto fail;
    Py_DECREF(l);
    return d;
fail:
    Py_XDECREF(l);
    Py_DECREF(d);
    return NULL;
}

/* gf_source_stats of every source (one when data is not a mix), a dict
 * each, by the struct's field names. */
static PyObject *loader_source_stats(PyObject *op, PyObject *unused)
{
    (void)unused;
    gfp_core *c = loader_core((LoaderObject *)op);
    if (!c)
        return NULL;
    int n = gf_sources(c->l);
    gf_source_stats *v = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof *v);
    if (!v)
        return PyErr_NoMemory();
    /* A batch taken back after a KeyboardInterrupt: not delivered (as stats()). */
    const gf_batch *p = c->pending;
    uint64_t all = 0;
    for (int k = 0; k < n; k++) {
        gf_source_stats_get(c->l, k, &v[k]);
        for (int i = 0; p && i < p->count; i++)
            v[k].samples -= p->sources ? p->sources[i] == k : 1;
        all += v[k].samples;
    }
    PyObject *out = PyList_New(n);
    for (int k = 0; out && k < n; k++) {
        const gf_source_stats *st = &v[k];
        PyObject *d = Py_BuildValue(
            "{s:N,s:d,s:K,s:K,s:i,s:i,s:K,s:d,s:d,s:K}", "data",
            PyUnicode_DecodeFSDefault(st->data ? st->data : ""), "weight", st->weight, "size",
            (unsigned long long)st->size, "first_index", (unsigned long long)st->first_index,
            "label_offset", st->label_offset, "n_classes", st->n_classes, "samples",
            (unsigned long long)st->samples, "share",
            p ? (all ? (double)st->samples / (double)all : 0.0) : st->share, "wait_s",
            st->wait_s, "epoch", (unsigned long long)st->epoch);
        if (!d)
            Py_CLEAR(out);
        else
            PyList_SetItem(out, k, d); /* steals d */
    }
    PyMem_Free(v);
    return out;
}

/* gf_recent_warnings: samples decoded although their decoder warned. */
static PyObject *loader_recent_warnings(PyObject *op, PyObject *unused)
{
    (void)unused;
    gfp_core *c = loader_core((LoaderObject *)op);
    if (!c)
        return NULL;
    gf_sample_error w[GF_RECENT_WARNINGS];
    int n = gf_recent_warnings(c->l, w, GF_RECENT_WARNINGS);
    PyObject *out = PyList_New(0);
    for (int i = 0; out && i < n; i++) {
        PyObject *e = gfp_sample_error_dict(&w[i]);
        if (!e || PyList_Append(out, e) < 0)
            Py_CLEAR(out);
        Py_XDECREF(e);
    }
    return out;
}

static PyObject *state_dict(const gf_state *st)
{
    return Py_BuildValue("{s:I,s:I,s:I,s:I,s:K,s:K,s:K,s:K,s:K,s:I,s:K,s:K}", "version",
                         st->version, "rank", st->rank, "world", st->world, "shard_window",
                         st->shard_window, "seed", (unsigned long long)st->seed, "epoch",
                         (unsigned long long)st->epoch, "position",
                         (unsigned long long)st->position, "samples",
                         (unsigned long long)st->samples, "index_hash",
                         (unsigned long long)st->index_hash, "rest_world", st->rest_world,
                         "rest_position", (unsigned long long)st->rest_position, "rest_taken",
                         (unsigned long long)st->rest_taken);
}

static PyObject *loader_get_state(PyObject *op, PyObject *unused)
{
    (void)unused;
    gfp_core *c = loader_core((LoaderObject *)op);
    if (!c)
        return NULL;
    gf_state st;
    gfp_core_state(c, &st); /* an observer: also while next() waits */
    return state_dict(&st);
}

/* The state before the last batch take() returned: the Loader's own
 * held-back batch (the next epoch's first, taken to see an epoch end)
 * resumes from there, whatever epoch the batch ended in. */
static PyObject *loader_state_before_last(PyObject *op, PyObject *unused)
{
    (void)unused;
    gfp_core *c = loader_core((LoaderObject *)op);
    return c ? state_dict(&c->last_state) : NULL;
}

/* gf_set_state(st) when st is given, else gf_seek(epoch, 0): who's call,
 * the held-back batch dropped, the lock let go while the loader restarts. */
static PyObject *restart(PyObject *op, const char *who, const gf_state *st, uint64_t epoch)
{
    gfp_core *c = loader_enter((LoaderObject *)op, who);
    if (!c)
        return NULL;
    gfp_core_drop_pending(c);
    int rc;
    char why[1024];
    Py_BEGIN_ALLOW_THREADS
    rc = st ? gf_set_state(c->l, st) : gf_seek(c->l, epoch, 0);
    snprintf(why, sizeof why, "%s", rc < 0 ? gf_last_error(c->l) : "");
    Py_END_ALLOW_THREADS
    if (rc < 0)
        gfp_raise(rc, why, c->l);
    loader_leave(c);
    return rc == 0 ? Py_NewRef(Py_None) : NULL;
}

static PyObject *loader_set_state(PyObject *op, PyObject *arg)
{
    if (!loader_core((LoaderObject *)op))
        return NULL;
    if (!PyDict_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "load_state_dict: a dict from state_dict()");
        return NULL;
    }
    /* The optional keys: states saved before the shard order lack
     * shard_window (global: 0), those before version 3 the data set's
     * identity and the rest (no change of world in their epoch). 32-bit
     * fields are never truncated. */
    gf_state st = {0};
    static const struct {
        const char *key;
        bool required;
        size_t at, size;
    } fields[] = {
#define F_(name, req) {#name, req, offsetof(gf_state, name), sizeof(((gf_state *)0)->name)}
        F_(version, true), F_(rank, true), F_(world, true), F_(seed, true), F_(epoch, true),
        F_(position, true), F_(shard_window, false), F_(samples, false), F_(index_hash, false),
        F_(rest_world, false), F_(rest_position, false), F_(rest_taken, false),
#undef F_
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const char *key = fields[i].key;
        PyObject *o = PyDict_GetItemString(arg, key);
        if (!o) {
            if (!fields[i].required)
                continue;
            PyErr_Format(PyExc_ValueError, "load_state_dict: no '%s' in the state", key);
            return NULL;
        }
        bool u32 = fields[i].size == sizeof(uint32_t), is_int = PyLong_Check(o) && !PyBool_Check(o);
        if (!is_int && fields[i].required) {
            PyErr_Format(PyExc_TypeError, "load_state_dict: '%s': an int, not %R", key, o);
            return NULL;
        }
        unsigned long long v = is_int ? PyLong_AsUnsignedLongLong(o) : 0;
        if (!is_int || (v == (unsigned long long)-1 && PyErr_Occurred()) ||
            (u32 && v > UINT32_MAX)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "load_state_dict: '%s': %R is %s 0..%s", key, o,
                         fields[i].required ? "out of range" : "not an int in",
                         u32 ? "2^32-1" : "2^64-1");
            return NULL;
        }
        if (u32) {
            uint32_t x = (uint32_t)v;
            memcpy((char *)&st + fields[i].at, &x, sizeof x);
        } else {
            uint64_t x = v;
            memcpy((char *)&st + fields[i].at, &x, sizeof x);
        }
    }
    return restart(op, "load_state_dict", &st, 0);
}

/* gf_seek(epoch, 0): the Loader's own seeks (set_epoch, a `for` after a
 * break), which keep an epoch a change of world split while they stay in
 * it, as gf_seek does. */
static PyObject *loader_seek_epoch(PyObject *op, PyObject *arg)
{
    unsigned long long epoch = PyLong_AsUnsignedLongLong(arg);
    if (epoch == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    return restart(op, "set_epoch", NULL, epoch);
}

/* gf_epoch_samples: this rank's positions in an epoch (each its own
 * after a change of world, or in a mix under mix_epoch first). */
static PyObject *loader_epoch_samples(PyObject *op, PyObject *arg)
{
    unsigned long long epoch = PyLong_AsUnsignedLongLong(arg);
    if (epoch == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    gfp_core *c = loader_core((LoaderObject *)op);
    if (!c)
        return NULL;
    return PyLong_FromUnsignedLongLong(gf_epoch_samples(c->l, epoch));
}

/* A sample index: TypeError unless an int; a negative one is out of range. */
static int index_arg(PyObject *arg, uint64_t *i)
{
    if (!PyLong_Check(arg) || PyBool_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "index: an int, not %R", arg);
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(arg);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        v = UINT64_MAX; /* out of range, said by the caller */
    }
    *i = v;
    return 0;
}

static PyObject *loader_sample_path(PyObject *op, PyObject *arg)
{
    gfp_core *c = loader_core((LoaderObject *)op);
    uint64_t i;
    if (!c || index_arg(arg, &i) < 0)
        return NULL;
    const char *path = gf_sample_path(c->l, i);
    if (!path) {
        PyErr_Format(PyExc_IndexError, "index %R: out of range", arg);
        return NULL;
    }
    return PyUnicode_DecodeFSDefault(path);
}

static PyObject *loader_sample_label(PyObject *op, PyObject *arg)
{
    gfp_core *c = loader_core((LoaderObject *)op);
    uint64_t i;
    if (!c || index_arg(arg, &i) < 0)
        return NULL;
    int32_t label = gf_sample_label(c->l, i);
    if (label == GF_EINVAL) {
        PyErr_Format(PyExc_IndexError, "index %R: out of range", arg);
        return NULL;
    }
    return PyLong_FromLong(label);
}

/* The encoded bytes of a sample, as stored. */
static PyObject *loader_read_sample(PyObject *op, PyObject *arg)
{
    gfp_core *c = loader_core((LoaderObject *)op);
    uint64_t i;
    if (!c || index_arg(arg, &i) < 0)
        return NULL;
    atomic_fetch_add(&c->refs, 1); /* a close() meanwhile must not free it */
    void *data;
    size_t len;
    char why[512];
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = gf_read_sample(c->l, i, &data, &len, why, sizeof why);
    gfp_core_unref(c);
    Py_END_ALLOW_THREADS
    if (rc == GF_EINVAL) {
        PyErr_Format(PyExc_IndexError, "index %R: out of range", arg);
        return NULL;
    }
    if (rc < 0)
        return gfp_raise(rc, why, NULL);
    PyObject *out = PyBytes_FromStringAndSize(data, (Py_ssize_t)len);
    gf_free(data);
    return out;
}

/* An unsigned 64-bit argument of set_order, named in its errors. */
static int u64_arg(PyObject *o, const char *what, uint64_t *out)
{
    PyObject *v = PyNumber_Index(o);
    if (!v) {
        PyErr_Clear();
        return type_error(what, o, "an int");
    }
    unsigned long long x = PyLong_AsUnsignedLongLong(v);
    Py_DECREF(v);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s is out of range 0 .. 2**64 - 1", what);
        return -1;
    }
    *out = x;
    return 0;
}

/* Whether a buffer's struct format is one native-order int64. */
static bool int64_format(const Py_buffer *v)
{
    const char *f = v->format ? v->format : "B";
    const int little = 1;
    bool native_little = *(const char *)&little == 1;
    if (*f == '@' || *f == '=' || (*f == '<' && native_little) ||
        ((*f == '>' || *f == '!') && !native_little))
        f++;
    return v->itemsize == 8 && (strcmp(f, "q") == 0 || strcmp(f, "l") == 0);
}

/* set_order(seed, epoch, order): gf_set_order. order: an object with a
 * C-contiguous one-dimensional buffer of int64 (array('q'), a numpy int64
 * array, torch's .numpy()), read in place; else a sequence of ints. */
static PyObject *loader_set_order(PyObject *op, PyObject *args)
{
    PyObject *seed_o, *epoch_o, *obj;
    if (!PyArg_ParseTuple(args, "OOO:set_order", &seed_o, &epoch_o, &obj))
        return NULL;
    uint64_t seed, epoch;
    if (!loader_core((LoaderObject *)op) || u64_arg(seed_o, "set_order: seed", &seed) < 0 ||
        u64_arg(epoch_o, "set_order: epoch", &epoch) < 0)
        return NULL;
    Py_buffer view;
    bool viewed = false;
    const int64_t *idx = NULL;
    int64_t *owned = NULL;
    Py_ssize_t n = 0;
    if (PyObject_CheckBuffer(obj) && !PyBytes_Check(obj) && !PyByteArray_Check(obj)) {
        if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) == 0) {
            viewed = view.ndim == 1 && int64_format(&view);
            if (viewed) {
                idx = view.buf;
                n = view.len / 8;
            } else {
                PyBuffer_Release(&view);
            }
        } else {
            PyErr_Clear(); /* not contiguous: read it as a sequence */
        }
    }
    if (!viewed) {
        if (PyUnicode_Check(obj) || PyBytes_Check(obj) || PyByteArray_Check(obj) ||
            !PySequence_Check(obj)) {
            type_error("set_order: order", obj, "a sequence of ints or an int64 buffer");
            return NULL;
        }
        n = PySequence_Size(obj);
        if (n < 0)
            return NULL;
        owned = PyMem_Malloc(n ? (size_t)n * sizeof *owned : 1);
        if (!owned)
            return PyErr_NoMemory();
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PySequence_GetItem(obj, i);
            PyObject *v = item ? PyNumber_Index(item) : NULL;
            char what[64];
            snprintf(what, sizeof what, "set_order: order[%zd]", i);
            if (item && !v) {
                PyErr_Clear();
                type_error(what, item, "an int");
            }
            Py_XDECREF(item);
            int overflow = 0;
            long long x = v ? PyLong_AsLongLongAndOverflow(v, &overflow) : -1;
            Py_XDECREF(v);
            if (v && overflow)
                PyErr_Format(PyExc_ValueError, "%s is out of the int64 range", what);
            if (!v || overflow || (x == -1 && PyErr_Occurred())) {
                PyMem_Free(owned);
                return NULL;
            }
            owned[i] = x; /* an index out of range: gf_set_order names it */
        }
        idx = owned;
    }
    PyObject *out = NULL;
    gfp_core *c = loader_enter((LoaderObject *)op, "set_order");
    if (c) {
        int rc;
        char why[1024];
        Py_BEGIN_ALLOW_THREADS
        rc = gf_set_order(c->l, seed, epoch, idx, (uint64_t)n);
        snprintf(why, sizeof why, "%s", rc < 0 ? gf_last_error(c->l) : "");
        Py_END_ALLOW_THREADS
        if (rc < 0)
            gfp_raise(rc, why, c->l);
        else
            out = Py_NewRef(Py_None);
        loader_leave(c);
    }
    if (viewed)
        PyBuffer_Release(&view);
    PyMem_Free(owned);
    return out;
}

/* gf_class_name for every class: the folder names (any bytes, decoded as
 * paths are), or None for a set whose labels are bare numbers. */
static PyObject *loader_class_names(PyObject *op, PyObject *unused)
{
    (void)unused;
    gfp_core *c = loader_core((LoaderObject *)op);
    if (!c)
        return NULL;
    int n = gf_class_count(c->l);
    PyObject *out = PyList_New(n);
    for (int i = 0; out && i < n; i++) {
        const char *name = gf_class_name(c->l, i);
        PyObject *v = name ? PyUnicode_DecodeFSDefault(name) : Py_NewRef(Py_None);
        if (!v)
            Py_CLEAR(out);
        else
            PyList_SetItem(out, i, v);
    }
    return out;
}

static PyMethodDef loader_methods[] = {
    {"class_names", loader_class_names, METH_NOARGS, NULL},
    {"sample_path", loader_sample_path, METH_O, NULL},
    {"sample_label", loader_sample_label, METH_O, NULL},
    {"read_sample", loader_read_sample, METH_O, NULL},
    {"next", loader_next, METH_NOARGS, "the next Batch, None after the last epoch"},
    {"take", loader_take_where, METH_NOARGS, "(the next Batch, its epoch, its position), "
                                             "None after the last epoch"},
    {"close", loader_close, METH_NOARGS, NULL},
    {"stats", loader_stats, METH_NOARGS, NULL},
    {"recent_warnings", loader_recent_warnings, METH_NOARGS, NULL},
    {"source_stats", loader_source_stats, METH_NOARGS, NULL},
    {"get_state", loader_get_state, METH_NOARGS, NULL},
    {"state_before_last", loader_state_before_last, METH_NOARGS, NULL},
    {"seek_epoch", loader_seek_epoch, METH_O, NULL},
    {"epoch_samples", loader_epoch_samples, METH_O, NULL},
    {"set_state", loader_set_state, METH_O, NULL},
    {"set_order", loader_set_order, METH_VARARGS,
     "set_order(seed, epoch, order): the caller's sampler for one epoch (gf_set_order)"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot loader_slots[] = {
    {Py_tp_new, loader_new},
    {Py_tp_dealloc, loader_dealloc},
    {Py_tp_methods, loader_methods},
    {0, NULL},
};

static PyType_Spec loader_spec = {"gpufeed._gpufeed._Loader", sizeof(LoaderObject), 0,
                                  Py_TPFLAGS_DEFAULT, loader_slots};
int gfp_loader_type_init(PyObject *m)
{
    PyObject *type = PyType_FromSpec(&loader_spec);
    return type ? PyModule_AddObject(m, "_Loader", type) : -1;
}
