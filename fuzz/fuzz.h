/* The libFuzzer entry point every fuzz/fuzz_*.c defines, declared once so
 * -Wmissing-prototypes is satisfied. The same harness links either with
 * libFuzzer (-DSPIDERD_FUZZ=ON, clang) or with replay.c's main(), which runs
 * it over every file of the corpus and crash directories (CTest). */
#ifndef SPIDERD_FUZZ_H
#define SPIDERD_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A private scratch directory for the process (created on first use, removed
 * at exit), for harnesses that need files: configs, eggs, a SQLite store. */
const char *fuzz_tmpdir(void);

/* A NUL-terminated copy of data (malloc'd; aborts when out of memory). */
char *fuzz_strndup(const uint8_t *data, size_t size);

#endif
