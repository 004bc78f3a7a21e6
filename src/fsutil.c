#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  int r = (flag == FTW_DP) ? rmdir(path) : unlink(path);
  return (r && errno != ENOENT) ? -1 : 0;
}

int fs_rmtree(const char *path) {
  if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS)) return errno ? -errno : -EIO;
  return 0;
}

FILE *fs_tmpfile(void) {
  int fd = open(P_tmpdir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) { /* a file system without O_TMPFILE */
    char path[] = P_tmpdir "/spiderd-XXXXXX";
    if ((fd = mkostemp(path, O_CLOEXEC)) >= 0) unlink(path);
  }
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "w+");
  if (!f) {
    int e = errno;
    close(fd);
    errno = e;
  }
  return f;
}
