/* The fuzz targets: each file defines LLVMFuzzerTestOneInput (libFuzzer's
 * entry point) and fuzz_seeds, the valid inputs it starts from. Built two
 * ways: with clang's -fsanitize=fuzzer (-Dfuzz=true, tests/fuzz/run.sh),
 * or with replay.c's main, which runs the seeds and files given, plus
 * deterministic mutations of them, in any build (the `fuzz` test suite). */
#ifndef GF_FUZZ_H
#define GF_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef void (*fuzz_emit)(const char *name, const void *data, size_t size);
void fuzz_seeds(fuzz_emit emit);

/* An invariant the code under test broke: a crash, so both libFuzzer and
 * replay.c report the input. */
#define FUZZ_CHECK(cond)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);         \
            abort();                                                                         \
        }                                                                                    \
    } while (0)

/* A private directory for this process's files, removed at exit. */
const char *fuzz_dir(void);
/* Removes the tree at path (malloc'd; freed then) when the process exits. */
void fuzz_remove_at_exit(char *path);
/* Writes data to fuzz_dir()/name; returns the path (static buffer). */
const char *fuzz_file(const char *name, const void *data, size_t size);

#endif
