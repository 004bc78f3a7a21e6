/* Replays inputs through a harness without libFuzzer: every regular file of
 * each directory argument (sorted by name; dot files skipped) or each file
 * argument, once. A crash, an ASan/UBSan report or a leak fails the run, so
 * CTest keeps every seed and every past crash passing in every build.
 * FUZZ_REPLAY_VERBOSE=1 prints each input with the seconds it took. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fuzz.h"

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return -1;
  }
  uint8_t *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      cap = cap ? cap * 2 : 4096;
      uint8_t *nb = realloc(buf, cap);
      if (!nb) abort();
      buf = nb;
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    if (!n) break;
    len += n;
  }
  fclose(f);
  /* libFuzzer hands over an exactly sized copy: keep ASan's bounds as tight */
  uint8_t *exact = malloc(len ? len : 1);
  if (!exact) abort();
  if (len) memcpy(exact, buf, len);
  free(buf);
  LLVMFuzzerTestOneInput(exact, len);
  free(exact);
  return 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir, size_t *count) {
  DIR *d = opendir(dir);
  if (!d) {
    perror(dir);
    return -1;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      names = realloc(names, cap * sizeof(*names));
      if (!names) abort();
    }
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  if (n) qsort(names, n, sizeof(*names), by_name);
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
    if (!rc && !stat(path, &st) && S_ISREG(st.st_mode)) {
      struct timespec a, b;
      clock_gettime(CLOCK_MONOTONIC, &a);
      if (run_file(path)) rc = -1;
      else (*count)++;
      clock_gettime(CLOCK_MONOTONIC, &b);
      if (getenv("FUZZ_REPLAY_VERBOSE"))
        fprintf(stderr, "%8.3f s  %s\n",
                (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9, path);
    }
    free(names[i]);
  }
  free(names);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
    return 2;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  size_t count = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st)) {
      perror(argv[i]);
      return 1;
    }
    if (S_ISDIR(st.st_mode) ? run_dir(argv[i], &count) : run_file(argv[i])) return 1;
    if (!S_ISDIR(st.st_mode)) count++;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("%s: %zu inputs in %.2f s\n", argv[0], count,
         (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
  return 0;
}
