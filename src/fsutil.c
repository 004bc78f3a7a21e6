#include "fsutil.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int fs_mkdirs(const char *path, mode_t mode) {
  char *p = strdup(path);
  if (!p) return -ENOMEM;
  int rc = 0;
  for (char *s = p + 1;; s++) {
    if (*s == '/' || *s == '\0') {
      char c = *s;
      *s = '\0';
      if (mkdir(p, mode) != 0 && errno != EEXIST) {
        rc = -errno;
        break;
      }
      *s = c;
      if (!c) break;
    }
  }
  free(p);
  return rc;
}
