/*
 * gpufeed._gpufeed._Loader: the C half of gpufeed.Loader (gpufeed/__init__.py
 * checks the arguments and names): next, close, stats, state, and the
 * index's observers. Runs on the Python threads that call it, with the
 * GIL; every call that can block drops it (gf_open, the wait for a batch,
 * close, gf_set_state, gf_read_sample).
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

static PyObject *loader_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
    PyObject *data, *fields;
    if (kw || !PyArg_ParseTuple(args, "UO!:_Loader", &data, &PyDict_Type, &fields)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "_Loader(data, settings)");
        return NULL;
    }
    gf_settings s;
    if (gfp_settings_from(&s, data, fields) < 0)
        return NULL;
    gfp_core *c;
    char why[1024];
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = gfp_core_open(&c, &s, why, sizeof why);
    Py_END_ALLOW_THREADS
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
    return (PyObject *)self;
}

static void loader_drop(LoaderObject *self)
{
    gfp_core *c = self->core;
    self->core = NULL;
    if (c) {
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
static PyObject *loader_next(PyObject *op, PyObject *unused)
{
    (void)unused;
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
    } else
        out = gfp_batch_new(c, b);
    loader_leave(c);
    return out;
}

#define STAT_U64(f) if (put(d, #f, PyLong_FromUnsignedLongLong(st.f)) < 0) goto fail;
#define STAT_INT(f) if (put(d, #f, PyLong_FromLong(st.f)) < 0) goto fail;
#define STAT_DBL(f) if (put(d, #f, PyFloat_FromDouble(st.f)) < 0) goto fail;
#define STAT_STR(f) if (put(d, #f, PyUnicode_FromString(st.f)) < 0) goto fail;

static int put(PyObject *d, const char *key, PyObject *v)
{
    int rc = v ? PyDict_SetItemString(d, key, v) : -1;
    Py_XDECREF(v);
    return rc;
}

PyObject *gfp_error_dict(int64_t sample, int code, const char *path, const char *reason)
{
    return Py_BuildValue("{s:L,s:i,s:s,s:N,s:s}", "sample", (long long)sample, "code", code,
                         "error", gf_err_name(code), "path", PyUnicode_DecodeFSDefault(path),
                         "reason", reason);
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
    PyObject *d = PyDict_New(), *l = NULL;
    if (!d)
        return NULL;
    STAT_U64(samples) STAT_U64(batches) STAT_U64(epoch) STAT_U64(position)
    STAT_DBL(elapsed_s) STAT_DBL(wait_s) STAT_DBL(read_busy_s) STAT_DBL(decode_busy_s)
    STAT_U64(bytes_read) STAT_U64(errors) STAT_INT(reader) STAT_U64(decoded_turbo)
    STAT_U64(decoded_stb) STAT_INT(threads) STAT_INT(prefetch_depth) STAT_INT(queue_depth)
    STAT_INT(batch_size) STAT_U64(ring_bytes) STAT_U64(buffer_bytes) STAT_U64(dataset_samples)
    STAT_U64(epoch_samples) STAT_INT(classes) STAT_INT(device) STAT_INT(device_id)
    STAT_STR(device_note) STAT_U64(pinned_bytes) STAT_INT(pageable_slots)
    STAT_U64(device_bytes) STAT_INT(rank) STAT_INT(world) STAT_INT(autotune)
    STAT_U64(autotune_changes) STAT_DBL(convert_busy_s) STAT_U64(shard_members_skipped)
    STAT_U64(shard_keys_skipped) STAT_U64(dataset_warnings) STAT_STR(dataset_warning)
    STAT_U64(shards) STAT_U64(h2d_bytes) STAT_U64(h2d_copies) STAT_DBL(h2d_s)
    STAT_U64(decode_warnings) STAT_U64(decoded_spng) STAT_U64(decoded_webp)
    STAT_U64(folder_dirs) STAT_U64(folder_dirs_again) STAT_U64(read_budget_bytes)
    STAT_U64(read_bytes_peak) STAT_U64(read_budget_waits) STAT_U64(shards_damaged)
    STAT_U64(shard_members_lost)
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

static PyObject *loader_get_state(PyObject *op, PyObject *unused)
{
    (void)unused;
    gfp_core *c = loader_core((LoaderObject *)op);
    if (!c)
        return NULL;
    gf_state st;
    gf_get_state(c->l, &st); /* an observer: also while next() waits */
    return Py_BuildValue("{s:I,s:I,s:I,s:K,s:K,s:K}", "version", st.version, "rank", st.rank,
                         "world", st.world, "seed", (unsigned long long)st.seed, "epoch",
                         (unsigned long long)st.epoch, "position",
                         (unsigned long long)st.position);
}

static PyObject *loader_set_state(PyObject *op, PyObject *arg)
{
    if (!loader_core((LoaderObject *)op))
        return NULL;
    if (!PyDict_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "load_state_dict: a dict from state_dict()");
        return NULL;
    }
    static const char *keys[] = {"version", "rank", "world", "seed", "epoch", "position"};
    unsigned long long v[6];
    for (int i = 0; i < 6; i++) {
        PyObject *o = PyDict_GetItemString(arg, keys[i]);
        if (!o) {
            PyErr_Format(PyExc_ValueError, "load_state_dict: no '%s' in the state", keys[i]);
            return NULL;
        }
        v[i] = PyLong_AsUnsignedLongLong(o);
        if (PyErr_Occurred())
            return NULL;
    }
    gf_state st = {.version = (uint32_t)v[0], .rank = (uint32_t)v[1], .world = (uint32_t)v[2],
                   .seed = v[3], .epoch = v[4], .position = v[5]};
    gfp_core *c = loader_enter((LoaderObject *)op, "load_state_dict");
    if (!c)
        return NULL;
    int rc;
    char why[1024];
    Py_BEGIN_ALLOW_THREADS
    rc = gf_set_state(c->l, &st);
    snprintf(why, sizeof why, "%s", rc < 0 ? gf_last_error(c->l) : "");
    Py_END_ALLOW_THREADS
    if (rc < 0)
        gfp_raise(rc, why, c->l);
    loader_leave(c);
    return rc == 0 ? Py_NewRef(Py_None) : NULL;
}


static int index_arg(PyObject *arg, uint64_t *i)
{
    unsigned long long v = PyLong_AsUnsignedLongLong(arg);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
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
        PyErr_SetString(PyExc_IndexError, "sample index out of range");
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
        PyErr_SetString(PyExc_IndexError, "sample index out of range");
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
        PyErr_SetString(PyExc_IndexError, "sample index out of range");
        return NULL;
    }
    if (rc < 0)
        return gfp_raise(rc, why, NULL);
    PyObject *out = PyBytes_FromStringAndSize(data, (Py_ssize_t)len);
    gf_free(data);
    return out;
}

static PyMethodDef loader_methods[] = {
    {"sample_path", loader_sample_path, METH_O, NULL},
    {"sample_label", loader_sample_label, METH_O, NULL},
    {"read_sample", loader_read_sample, METH_O, NULL},
    {"next", loader_next, METH_NOARGS, "the next Batch, None after the last epoch"},
    {"close", loader_close, METH_NOARGS, NULL},
    {"stats", loader_stats, METH_NOARGS, NULL},
    {"recent_warnings", loader_recent_warnings, METH_NOARGS, NULL},
    {"get_state", loader_get_state, METH_NOARGS, NULL},
    {"set_state", loader_set_state, METH_O, NULL},
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
