/* What the harnesses share: a scratch directory and string copies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsutil.h"
#include "fuzz.h"

static char tmpdir[256];

static void rm_tmpdir(void) {
  if (tmpdir[0]) fs_rmtree(tmpdir);
}

const char *fuzz_tmpdir(void) {
  if (!tmpdir[0]) {
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%.200s/spiderd-fuzz-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) {
      perror("mkdtemp");
      abort();
    }
    atexit(rm_tmpdir);
  }
  return tmpdir;
}

char *fuzz_strndup(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) abort();
  if (size) memcpy(s, data, size);
  s[size] = '\0';
  return s;
}
