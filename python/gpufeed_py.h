/*
 * gpufeed._gpufeed internals: the objects the module's C files share.
 *
 * Lifetimes (README's "From Python": the user's side). A gfp_core owns
 * the gf_loader; the Python Loader holds one reference, every batch slot
 * still held holds one. A gfp_slot is one delivered batch: the Batch holds
 * one reference until it is released or freed, every live export (a DLPack
 * tensor, a buffer view) one more. The last slot reference gives the slot
 * back (gf_release_stream, ordered after the stream recorded at export);
 * the last core reference closes the loader. Both
 * counts are atomic and their last drop touches no Python object, so a
 * DLPack deleter may run on any thread, without the GIL, after close().
 * An Array holds a slot reference too: torch.frombuffer keeps the Array
 * (view.obj), not the buffer view.
 *
 * fork(): the loader's threads are the parent's. In a child every call on
 * an inherited loader raises, and dropping the loader, a Batch or an
 * export there frees nothing (gfp_inherited): the core is the parent's.
 *
 * Ctrl-C. A batch is delivered once Python touches its Batch. One that
 * was not, freed while an exception is set (a KeyboardInterrupt raised
 * between gf_next and the caller's first use unwinds it off the stack),
 * goes back as the core's pending batch, which next() returns first;
 * state_dict and stats count it undelivered.
 */
#ifndef GPUFEED_PY_H
#define GPUFEED_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpufeed.h"

typedef struct gfp_core {
    atomic_int refs;
    atomic_int held;          /* slots Python holds (Batch or exports) */
    gf_loader *l;
    int prefetch_depth;
    int device_id;            /* CUDA ordinal, -1 on the CPU */
    int busy;                 /* a Python thread is in next() or set_state
                                 (under the GIL): gf_next's calls never overlap */
    pid_t pid;                /* the process that opened it */
    /* Under the GIL. pending: taken back (Ctrl-C), next() returns it
     * first; pending_state the state before it. last: what next()
     * returned last, with last_state the state before it. */
    int closed;               /* close(): nothing is taken back any more */
    gf_batch *pending, *last;
    gf_state pending_state, last_state;
} gfp_core;

typedef struct gfp_slot {
    atomic_int refs;
    atomic_uintptr_t stream; /* CUDA stream of the last export; 0 = legacy */
    gfp_core *core;
    gf_batch *b;
    /* The labels as int64, what torch's losses take (the C batch's are
     * int32): the slot's, so a tensor of them outlives the Batch. */
    int64_t labels64[];
} gfp_slot;

/* core.c */
int gfp_core_open(gfp_core **out, const gf_settings *s, char *why, size_t why_len);
/* gf_open_samples when paths is not NULL, else gf_open. */
int gfp_core_open_samples(gfp_core **out, const gf_settings *s, const char *const *paths,
                          const int32_t *labels, uint64_t n, char *why, size_t why_len);
void gfp_core_unref(gfp_core *c); /* the last one closes: call without the GIL */
/* 1 in a fork()ed child of the process that opened c. */
int gfp_inherited(const gfp_core *c);
/* With the GIL: -1 and gpufeed.InvalidArgument ("what: ... fork() ...")
 * in such a child, else 0. */
int gfp_refuse_inherited(const gfp_core *c, const char *what);
/* The next batch: the pending one, else 0 and *b, GF_EOF, a negative
 * code, or 1 when a signal handler raised (the Python error is set;
 * nothing was delivered: the next call returns the batch this one waited
 * for). Waits in slices of gf_next_timed with the GIL released. Call with
 * the GIL. */
int gfp_core_next(gfp_core *c, gf_batch **b);
/* With the GIL: gives the pending batch back to the ring (close,
 * load_state_dict); the state and stats are the loader's again. */
void gfp_core_drop_pending(gfp_core *c);
/* With the GIL: what state_dict reports (the pending batch undelivered). */
void gfp_core_state(gfp_core *c, gf_state *st);
/* With the GIL, from a Batch freed untouched while an exception is set:
 * 1 if s was the last batch delivered and is now pending (s is freed),
 * else 0 (s untouched). */
int gfp_slot_take_back(gfp_slot *s);
gfp_slot *gfp_slot_new(gfp_core *c, gf_batch *b);
void gfp_slot_ref(gfp_slot *s);
void gfp_slot_unref(gfp_slot *s); /* any thread, GIL or not */

/* settings.c: s from (data, {gf_settings field: value}); data is borrowed. */
int gfp_settings_from(gf_settings *s, PyObject *data, PyObject *fields);
/* augment_hooks.c: the tests' view of the augmentation draws */
PyObject *gfp_augment_draws(PyObject *m, PyObject *args);
PyObject *gfp_erase_rects(PyObject *m, PyObject *args);
PyObject *gfp_mix_draw(PyObject *m, PyObject *args);
PyObject *gfp_beta_draws(PyObject *m, PyObject *args);
/* settings.c: one field from its text (a str; a PATH's kept as borrowed),
 * TypeError/ValueError set as the table says. 0 or -1. */
int gfp_setting_set(gf_settings *s, PyObject *key, PyObject *value);
PyObject *gfp_sample_error_dict(const gf_sample_error *e);
/* loader.c: {sample, code, error, path, reason}, as gfp_sample_error_dict. */
PyObject *gfp_error_dict(int64_t sample, int code, const char *path, const char *reason);
/* loader.c */
int gfp_loader_type_init(PyObject *module);

/* errors.c: raises the gpufeed.Error subclass of code with message msg
 * (and, for a sample error, the path of the newest bad sample of l). */
PyObject *gfp_raise(int code, const char *msg, gf_loader *l);
extern PyObject *gfp_error_base;
PyObject *gfp_error_class(int code); /* gpufeed.Error for a code it has none for */
int gfp_errors_init(PyObject *module);

/* batch.c */
extern PyObject *gfp_batch_type, *gfp_array_type;
int gfp_batch_types_init(PyObject *module);
PyObject *gfp_batch_new(gfp_core *c, gf_batch *b);

#endif
