#include "store/eggs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include "core/array.h"
#include "core/names.h"
#include "error.h"
#include "fsutil.h"

#define STAGING ".staging"
#define EGG_SUFFIX ".egg"

static const char not_zip_msg[] =
    "egg is not a ZIP file (if using curl, use egg=@path not egg=path)";

static char *path_join(const char *a, const char *b, const char *suffix) {
  char *p = NULL;
  if (asprintf(&p, "%s/%s%s", a, b, suffix ? suffix : "") < 0) return NULL;
  return p;
}

/* mkdir -p. The last component gets mode; parents too (umask applies). */
static int mkdirs(const char *path, mode_t mode) {
  char *p = strdup(path);
  int rc = 0;
  if (!p) return -ENOMEM;
  for (char *s = p + 1; *s; s++) {
    if (*s != '/') continue;
    *s = '\0';
    if (mkdir(p, mode) && errno != EEXIST) {
      rc = -errno;
      goto out;
    }
    *s = '/';
  }
  if (mkdir(p, mode) && errno != EEXIST) rc = -errno;
out:
  free(p);
  return rc;
}

/* Projects beginning with '.' would collide with the staging directory and
 * be hidden from listings, so they are refused along with traversal. */
static int check_project(const char *project) {
  if (!project) return SPD_ETRAVERSAL;
  if (!name_valid("project", project, NULL, 0) || project[0] == '.') return SPD_ETRAVERSAL;
  return 0;
}

/* Checks eggs_dir and project; *pdir (when asked for) is then the
 * project's directory. */
static int project_dir(const char *eggs_dir, const char *project, char **pdir) {
  if (pdir) *pdir = NULL;
  if (!eggs_dir || !*eggs_dir) return -EINVAL;
  int rc = check_project(project);
  if (rc || !pdir) return rc;
  return (*pdir = path_join(eggs_dir, project, NULL)) ? 0 : -ENOMEM;
}

static int fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int rc = fsync(fd) ? -errno : 0;
  close(fd);
  return rc;
}

static int is_zip(const void *data, size_t len) {
  zip_error_t ze;
  zip_source_t *src;
  zip_t *za;

  /* libzip opens an empty buffer as an empty archive; Scrapyd refuses it. */
  if (!data || len == 0) return 0;
  zip_error_init(&ze);
  src = zip_source_buffer_create(data, len, 0, &ze);
  if (!src) {
    zip_error_fini(&ze);
    return 0;
  }
  za = zip_open_from_source(src, ZIP_RDONLY, &ze);
  zip_error_fini(&ze);
  if (!za) {
    zip_source_free(src);
    return 0;
  }
  zip_discard(za);
  return 1;
}

int eggs_write_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len) {
    ssize_t w = write(fd, p, len);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

int eggs_stage(const char *eggs_dir, const void *data, size_t len, char **tmp_path, char *err,
               size_t errlen) {
  char *dir = NULL, *path = NULL;
  int fd = -1, rc;

  *tmp_path = NULL;
  if (!eggs_dir || !*eggs_dir) return -EINVAL;
  /* A gzip stream may be a tar.gz project (store/marchive.h), which the
   * caller checks member by member; anything else must be a ZIP. */
  int gzip = len >= 2 && ((const unsigned char *)data)[0] == 0x1f &&
             ((const unsigned char *)data)[1] == 0x8b;
  if (!gzip && !is_zip(data, len)) {
    if (err && errlen) snprintf(err, errlen, "%s", not_zip_msg);
    return SPD_EBADEGG;
  }
  rc = -ENOMEM;
  dir = path_join(eggs_dir, STAGING, NULL);
  if (!dir) goto out;
  rc = mkdirs(dir, 0755);
  if (rc) goto out;
  rc = -ENOMEM;
  path = path_join(dir, "egg-XXXXXX", NULL);
  if (!path) goto out;
  /* O_CLOEXEC: the daemon spawns crawls concurrently and they must not
   * inherit a half-written egg. */
  fd = mkostemp(path, O_CLOEXEC);
  if (fd < 0) {
    rc = -errno;
    free(path);
    path = NULL;
    goto out;
  }
  /* mkstemp's 0600 would hide the egg from a runner under another user. */
  if (fchmod(fd, 0644)) {
    rc = -errno;
    goto out;
  }
  rc = eggs_write_all(fd, data, len);
  if (rc) goto out;
  /* Before the rename in eggs_commit, so a crash never exposes a short egg. */
  if (fsync(fd)) {
    rc = -errno;
    goto out;
  }
  rc = 0;
out:
  if (fd >= 0 && close(fd) && !rc) rc = -errno;
  if (rc) {
    if (path) unlink(path);
    free(path);
    if (err && errlen) snprintf(err, errlen, "cannot store egg: %s", spd_strerror(rc));
  } else {
    *tmp_path = path;
  }
  free(dir);
  return rc;
}

static int version_file(const char *eggs_dir, const char *project, const char *version,
                        char **path);

int eggs_commit(const char *eggs_dir, const char *project, const char *version,
                const char *tmp_path, char **final_path) {
  char *pdir = NULL, *stem = NULL, *path = NULL;
  int rc;

  if (final_path) *final_path = NULL;
  rc = project_dir(eggs_dir, project, &pdir);
  if (rc) return rc;
  /* An empty version would make ".egg", a hidden file no listing shows. */
  rc = SPD_EBADPARAM;
  if (!version || !*version || !tmp_path) goto out;
  rc = -ENOMEM;
  stem = version_sanitize(version);
  if (!stem) goto out;
  path = path_join(pdir, stem, EGG_SUFFIX);
  if (!path) goto out;
  rc = mkdirs(pdir, 0755);
  if (rc) goto out;
  if (rename(tmp_path, path)) {
    rc = -errno;
    goto out;
  }
  rc = fsync_dir(pdir);
  if (rc) goto out;
  if (final_path) {
    *final_path = path;
    path = NULL;
  }
out:
  free(pdir);
  free(stem);
  free(path);
  return rc;
}

int eggs_path_for(const char *eggs_dir, const char *project, const char *version, char **path) {
  char *pdir = NULL;
  *path = NULL;
  int rc = project_dir(eggs_dir, project, &pdir);
  if (rc) return rc;
  rc = mkdirs(pdir, 0755);
  free(pdir);
  if (!rc) rc = version_file(eggs_dir, project, version, path);
  return rc;
}

void eggs_discard(const char *tmp_path) {
  if (tmp_path) unlink(tmp_path);
}

int eggs_clean_staging(const char *eggs_dir) {
  char dir[4096];
  snprintf(dir, sizeof(dir), "%s/" STAGING, eggs_dir);
  DIR *d = opendir(dir);
  if (!d) return errno == ENOENT ? 0 : -errno;
  int removed = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.' && unlinkat(dirfd(d), e->d_name, 0) == 0) removed++;
  closedir(d);
  return removed;
}

static int strv_push(char ***v, size_t *n, size_t *cap, const char *s, size_t len) {
  if (array_reserve((void **)v, cap, *n + 1, sizeof(**v))) return -ENOMEM;
  char *copy = strndup(s, len);
  if (!copy) return -ENOMEM;
  (*v)[(*n)++] = copy;
  return 0;
}

/* Is the entry a regular file (want_dir 0) or a directory (1)? d_type may be
 * DT_UNKNOWN on some file systems, hence the stat fallback. */
static int entry_is(int dfd, const struct dirent *de, int want_dir) {
  unsigned char t = de->d_type;
  if (t == DT_UNKNOWN || t == DT_LNK) {
    struct stat st;
    if (fstatat(dfd, de->d_name, &st, 0)) return 0;
    return want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode);
  }
  return want_dir ? t == DT_DIR : t == DT_REG;
}

/* The stems of dir's visible *.egg files, unsorted. A missing dir gives an
 * empty list. */
static int list_stems(const char *dir, char ***out, size_t *n) {
  char **v = NULL;
  size_t cnt = 0, cap = 0;
  struct dirent *de;
  int rc = 0;
  DIR *d = opendir(dir);

  *out = NULL;
  *n = 0;
  if (!d) return (errno == ENOENT || errno == ENOTDIR) ? 0 : -errno;
  for (;;) {
    /* Reset each time: a failed fstatat in entry_is leaves errno set. */
    errno = 0;
    if (!(de = readdir(d))) break;
    size_t len = strlen(de->d_name), sl = sizeof(EGG_SUFFIX) - 1;
    if (de->d_name[0] == '.' || len <= sl || strcmp(de->d_name + len - sl, EGG_SUFFIX) != 0)
      continue;
    if (!entry_is(dirfd(d), de, 0)) continue;
    rc = strv_push(&v, &cnt, &cap, de->d_name, len - sl);
    if (rc) goto out;
  }
  if (errno) rc = -errno;
out:
  closedir(d);
  if (rc) {
    strv_free(v, cnt);
    return rc;
  }
  *out = v;
  *n = cnt;
  return 0;
}

int eggs_versions(const char *eggs_dir, const char *project, char ***out, size_t *n) {
  char *pdir;
  int rc;

  *out = NULL;
  *n = 0;
  rc = project_dir(eggs_dir, project, &pdir);
  if (rc) return rc;
  rc = list_stems(pdir, out, n);
  free(pdir);
  if (rc) return rc;
  if (*n > 1) qsort(*out, *n, sizeof(**out), version_compare_qsort);
  return 0;
}

/* A version as sent ("1.0") or as listed ("1_0") names the same file. */
static int version_file(const char *eggs_dir, const char *project, const char *version,
                        char **path) {
  char *stem, *pdir;
  *path = NULL;
  if (!version || !*version) return -ENOENT;
  stem = version_sanitize(version);
  pdir = path_join(eggs_dir, project, NULL);
  if (stem && pdir) *path = path_join(pdir, stem, EGG_SUFFIX);
  free(stem);
  free(pdir);
  return *path ? 0 : -ENOMEM;
}

int eggs_path(const char *eggs_dir, const char *project, const char *version, char **path) {
  char **v = NULL;
  size_t n = 0;
  struct stat st;
  int rc;

  *path = NULL;
  rc = project_dir(eggs_dir, project, NULL);
  if (rc) return rc;
  if (version) {
    rc = version_file(eggs_dir, project, version, path);
    if (rc) return rc;
    if (stat(*path, &st) || !S_ISREG(st.st_mode)) {
      free(*path);
      *path = NULL;
      return -ENOENT;
    }
    return 0;
  }
  rc = eggs_versions(eggs_dir, project, &v, &n);
  if (rc) return rc;
  if (n == 0) {
    rc = -ENOENT;
    goto out;
  }
  rc = version_file(eggs_dir, project, v[n - 1], path);
out:
  strv_free(v, n);
  return rc;
}

static int cmp_str_qsort(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int eggs_projects(const char *eggs_dir, char ***out, size_t *n) {
  char **v = NULL;
  size_t cnt = 0, cap = 0;
  struct dirent *de;
  int rc = 0;
  DIR *d;

  *out = NULL;
  *n = 0;
  if (!eggs_dir || !*eggs_dir) return -EINVAL;
  d = opendir(eggs_dir);
  if (!d) return (errno == ENOENT || errno == ENOTDIR) ? 0 : -errno;
  for (;;) {
    errno = 0;
    if (!(de = readdir(d))) break;
    char **stems = NULL, *pdir;
    size_t ns = 0;
    if (de->d_name[0] == '.' || !entry_is(dirfd(d), de, 1)) continue;
    rc = -ENOMEM;
    pdir = path_join(eggs_dir, de->d_name, NULL);
    if (!pdir) goto out;
    rc = list_stems(pdir, &stems, &ns);
    free(pdir);
    if (rc) goto out;
    strv_free(stems, ns);
    if (ns) {
      rc = strv_push(&v, &cnt, &cap, de->d_name, strlen(de->d_name));
      if (rc) goto out;
    }
  }
  rc = errno ? -errno : 0;
out:
  closedir(d);
  if (rc) {
    strv_free(v, cnt);
    return rc;
  }
  if (cnt > 1) qsort(v, cnt, sizeof(*v), cmp_str_qsort);
  *out = v;
  *n = cnt;
  return 0;
}


/* The version's environment record (store/pyenv.h): <stem>.env. */
static void unlink_sidecar(const char *egg_path) {
  size_t n = strlen(egg_path);
  char side[4096];
  if (n > 4 && (size_t)snprintf(side, sizeof(side), "%.*s.env", (int)(n - 4), egg_path) <
                   sizeof(side))
    unlink(side);
}

int eggs_delete_version(const char *eggs_dir, const char *project, const char *version) {
  char *path = NULL, *pdir = NULL, **left = NULL;
  size_t nleft = 0;
  int rc;

  rc = project_dir(eggs_dir, project, &pdir);
  if (rc) return rc;
  rc = version_file(eggs_dir, project, version, &path);
  if (rc) goto out;
  if (unlink(path)) {
    rc = (errno == ENOENT || errno == ENOTDIR || errno == EISDIR) ? -ENOENT : -errno;
    goto out;
  }
  unlink_sidecar(path);
  rc = list_stems(pdir, &left, &nleft);
  if (rc) goto out;
  if (nleft == 0) rc = fs_rmtree(pdir);
out:
  strv_free(left, nleft);
  free(path);
  free(pdir);
  return rc;
}

int eggs_delete_project(const char *eggs_dir, const char *project) {
  struct stat st;
  char *pdir;
  int rc;

  rc = project_dir(eggs_dir, project, &pdir);
  if (rc) return rc;
  if (lstat(pdir, &st) || !S_ISDIR(st.st_mode))
    rc = -ENOENT;
  else
    rc = fs_rmtree(pdir);
  free(pdir);
  return rc;
}

void strv_free(char **v, size_t n) {
  if (!v) return;
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}
