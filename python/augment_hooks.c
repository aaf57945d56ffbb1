/*
 * Test hooks into the library's augmentation stages (src/augment.h), for
 * python/tests/test_augment.py: the draws a spec makes per sample key, so
 * their distributions can be held to torchvision's; and for test_mix.py,
 * mix's draw for a batch and the Beta draws it is made of. Not API: the names
 * start with an underscore and may change with the library.
 */
#include "gpufeed_py.h"

#include "augment.h"

static const char *draw_name(int op)
{
    static const char *const jitter[] = {"brightness", "contrast", "saturation", "hue"};
    return op >= GF__JITTER_BRIGHTNESS ? jitter[op - GF__JITTER_BRIGHTNESS]
                                       : gf__aug_op_name((gf__aug_op)op);
}

static int parse(const char *spec, int w, int h, int c, gf__augment *a)
{
    char why[256] = "";
    if (w < 1 || h < 1 || w > 1 << 16 || h > 1 << 16) {
        PyErr_SetString(PyExc_ValueError, "bad image size");
        return -1;
    }
    int rc = gf__augment_parse(spec, w, h, c, a, why, sizeof why);
    if (rc < 0) {
        PyErr_SetString(PyExc_ValueError, why);
        return -1;
    }
    return 0;
}

/* _augment_draws(spec, w, h, c, seed, n): per sample k (key
 * gf__sample_key(seed, 0, k)), the list of (op name, magnitude) drawn. */
PyObject *gfp_augment_draws(PyObject *m, PyObject *args)
{
    (void)m;
    const char *spec;
    int w, h, c, n;
    unsigned long long seed;
    gf__augment a;
    if (!PyArg_ParseTuple(args, "siiiKi:_augment_draws", &spec, &w, &h, &c, &seed, &n) ||
        parse(spec, w, h, c, &a) < 0)
        return NULL;
    PyObject *out = PyList_New(0);
    for (int k = 0; out && k < n; k++) {
        gf__aug_draw d[GF__AUG_DRAWS_MAX];
        int nd = gf__augment_draws(&a, gf__sample_key(seed, 0, (uint64_t)k), d, GF__AUG_DRAWS_MAX);
        PyObject *one = PyList_New(0);
        for (int i = 0; one && i < nd; i++) {
            PyObject *t = Py_BuildValue("(sd)", draw_name(d[i].op), d[i].magnitude);
            if (!t || PyList_Append(one, t) < 0)
                Py_CLEAR(one);
            Py_XDECREF(t);
        }
        if (!one || PyList_Append(out, one) < 0)
            Py_CLEAR(out);
        Py_XDECREF(one);
    }
    return out;
}

/* _erase_rects(spec, w, h, c, seed, n): per sample k, None or (i, j, h, w). */
PyObject *gfp_erase_rects(PyObject *m, PyObject *args)
{
    (void)m;
    const char *spec;
    int w, h, c, n;
    unsigned long long seed;
    gf__augment a;
    if (!PyArg_ParseTuple(args, "siiiKi:_erase_rects", &spec, &w, &h, &c, &seed, &n) ||
        parse(spec, w, h, c, &a) < 0)
        return NULL;
    PyObject *out = PyList_New(0);
    for (int k = 0; out && k < n; k++) {
        int i, j, eh, ew;
        PyObject *t = gf__erase_rect(&a, gf__sample_key(seed, 0, (uint64_t)k), &i, &j, &eh, &ew)
                          ? Py_BuildValue("(iiii)", i, j, eh, ew)
                          : (Py_INCREF(Py_None), Py_None);
        if (!t || PyList_Append(out, t) < 0)
            Py_CLEAR(out);
        Py_XDECREF(t);
    }
    return out;
}

/* _mix_draw(spec, w, h, c, seed, epoch, position): the draw of the batch
 * whose gf_batch.position is position, as the loader makes it:
 * ("mixup" | "cutmix", lam, lam_target, (x1, y1, x2, y2)). */
PyObject *gfp_mix_draw(PyObject *m, PyObject *args)
{
    (void)m;
    const char *spec;
    int w, h, c;
    unsigned long long seed, epoch, position;
    gf__augment a;
    if (!PyArg_ParseTuple(args, "siiiKKK:_mix_draw", &spec, &w, &h, &c, &seed, &epoch, &position) ||
        parse(spec, w, h, c, &a) < 0)
        return NULL;
    if (!a.mix) {
        PyErr_SetString(PyExc_ValueError, "the spec has no mix stage");
        return NULL;
    }
    gf__mix_draw d;
    gf__mix_draw_of(&a, gf__mix_key(seed, epoch, position), &d);
    return Py_BuildValue("(sdd(iiii))", d.kind == GF__MIX_CUTMIX ? "cutmix" : "mixup",
                         (double)d.lam, d.lam_target, d.x1, d.y1, d.x2, d.y2);
}

/* _beta_draws(alpha, beta, seed, n): n Beta draws, draw k from the key
 * gf__mix_key(seed, 0, k) (the batch keys' own). */
PyObject *gfp_beta_draws(PyObject *m, PyObject *args)
{
    (void)m;
    double alpha, beta;
    unsigned long long seed;
    int n;
    if (!PyArg_ParseTuple(args, "ddKi:_beta_draws", &alpha, &beta, &seed, &n))
        return NULL;
    if (!(alpha > 0) || !(beta > 0) || n < 0) {
        PyErr_SetString(PyExc_ValueError, "alpha and beta must be > 0, n >= 0");
        return NULL;
    }
    PyObject *out = PyList_New(n);
    for (int k = 0; out && k < n; k++) {
        PyObject *v = PyFloat_FromDouble(gf__beta_draw(alpha, beta, gf__mix_key(seed, 0, (uint64_t)k)));
        if (!v)
            Py_CLEAR(out);
        else
            PyList_SetItem(out, k, v); /* steals v */
    }
    return out;
}
