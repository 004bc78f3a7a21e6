#include "store/marchive.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include "error.h"
#include "fsutil.h"
#include "store/archive_lazy.h"
#include "store/eggs.h"

#define EGG_SUFFIX ".egg"
#define COPY_CHUNK (64 * 1024)

/* ---- what the bytes are ---- */

static int is_gzip(const unsigned char *p, size_t len) {
  return len >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}

/* A ZIP is a manifest project when spiderd.json is at its root and nothing
 * is under EGG-INFO/ (an egg that happens to ship a spiderd.json stays an
 * egg). Reads the central directory only. */
static int zip_kind(zip_t *za) {
  zip_int64_t n = zip_get_num_entries(za, 0);
  int manifest = 0;
  for (zip_int64_t i = 0; i < n; i++) {
    const char *name = zip_get_name(za, (zip_uint64_t)i, ZIP_FL_ENC_RAW);
    if (!name) continue;
    if (!strncmp(name, "EGG-INFO/", 9)) return MARCHIVE_EGG;
    if (!strcmp(name, MANIFEST_NAME) || !strcmp(name, "./" MANIFEST_NAME)) manifest = 1;
  }
  return manifest ? MARCHIVE_MANIFEST : MARCHIVE_EGG;
}

int marchive_kind_mem(const void *data, size_t len) {
  if (!data || !len) return MARCHIVE_EGG;
  if (is_gzip(data, len)) return MARCHIVE_MANIFEST;
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t *src = zip_source_buffer_create(data, len, 0, &ze);
  zip_t *za = src ? zip_open_from_source(src, ZIP_RDONLY, &ze) : NULL;
  zip_error_fini(&ze);
  if (!za) {
    if (src) zip_source_free(src);
    return MARCHIVE_EGG;
  }
  int kind = zip_kind(za);
  zip_discard(za);
  return kind;
}

int marchive_kind_file(const char *path) {
  unsigned char magic[2];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  ssize_t r = read(fd, magic, sizeof(magic));
  close(fd);
  if (r == 2 && is_gzip(magic, 2)) return MARCHIVE_MANIFEST;
  int zerr = 0;
  zip_t *za = zip_open(path, ZIP_RDONLY, &zerr);
  if (!za) return MARCHIVE_EGG;
  int kind = zip_kind(za);
  zip_discard(za);
  return kind;
}

/* ---- walking the members ---- */

typedef struct walk {
  const char *dest;      /* extracting into dest; NULL: only checking */
  int fd;                /* the member being extracted, or -1 */
  char *manifest;        /* checking: spiderd.json's bytes */
  size_t manifest_len;
  int manifest_seen;
  size_t members;
  long long bytes;
} walk_t;

static int bad(char *err, size_t errlen, const char *fmt, const char *a, const char *b) {
  if (err && errlen) snprintf(err, errlen, fmt, a, b ? b : "");
  return SPD_EBADEGG;
}

/* libarchive is opened here, on the first archive: a daemon that only runs
 * eggs never maps it (store/archive_lazy.h). */
static int reader_new(struct archive **out, char *err, size_t errlen) {
  int rc = archive_lazy_load(err, errlen);
  if (rc) return rc;
  struct archive *a = archive_read_new();
  if (!a) return -ENOMEM;
  archive_read_support_filter_gzip(a);
  archive_read_support_format_tar(a);
  archive_read_support_format_zip(a);
  *out = a;
  return 0;
}

/* Reads the current member's data: into w->manifest (want_manifest), or
 * to w->fd; counts every byte against the limit. */
static int member_data(struct archive *a, walk_t *w, const char *name, int want_manifest,
                       char *err, size_t errlen) {
  char *buf = malloc(COPY_CHUNK);
  int rc = 0;
  if (!buf) return -ENOMEM;
  for (;;) {
    la_ssize_t n = archive_read_data(a, buf, COPY_CHUNK);
    if (n == 0) break;
    if (n < 0) {
      const char *why = archive_error_string(a);
      rc = bad(err, errlen, "archive member '%s' cannot be read: %s", name,
               why ? why : "unknown error");
      break;
    }
    w->bytes += n;
    if (w->bytes > MARCHIVE_MAX_BYTES) {
      snprintf(err, errlen, "the archive holds more than %lld bytes once extracted",
               MARCHIVE_MAX_BYTES);
      rc = SPD_EBADEGG;
      break;
    }
    if (want_manifest) {
      if (w->manifest_len + (size_t)n > MANIFEST_MAX_BYTES) {
        snprintf(err, errlen, MANIFEST_NAME ": larger than %d bytes", MANIFEST_MAX_BYTES);
        rc = SPD_EBADEGG;
        break;
      }
      char *grown = realloc(w->manifest, w->manifest_len + (size_t)n + 1);
      if (!grown) {
        rc = -ENOMEM;
        break;
      }
      w->manifest = grown;
      memcpy(w->manifest + w->manifest_len, buf, (size_t)n);
      w->manifest_len += (size_t)n;
    }
    if (w->fd >= 0 && (rc = eggs_write_all(w->fd, buf, (size_t)n))) {
      rc = bad(err, errlen, "cannot extract '%s': %s", name, strerror(-rc));
      break;
    }
  }
  free(buf);
  return rc;
}

/* Writes one checked member under w->dest by hand rather than with
 * archive_write_disk, which flips the process's umask to read it: a race
 * with every other thread of the daemon creating files. Files get their
 * archived permission bits (no set-id or sticky bits, always readable and
 * writable by the daemon's user) under the umask; directories 0755. */
static int extract_member(struct archive *a, struct archive_entry *e, walk_t *w,
                          const char *raw, const char *name, size_t nlen, char *err,
                          size_t errlen) {
  char *full = NULL;
  int rc = 0;
  mode_t type = archive_entry_filetype(e);
  if (asprintf(&full, "%s/%.*s", w->dest, (int)nlen, name) < 0) return -ENOMEM;
  if (type == AE_IFDIR) {
    rc = fs_mkdirs(full, 0755);
    goto out;
  }
  /* Parent directories a zip often leaves out. A parent that is an earlier
   * symlink member is followed: its target was checked to stay inside. */
  char *slash = strrchr(full, '/');
  *slash = '\0';
  rc = fs_mkdirs(full, 0755);
  *slash = '/';
  if (rc) goto out;
  /* A member named twice: the last one wins, as tar would have it. */
  if (unlink(full) && errno != ENOENT) {
    rc = -errno;
    goto out;
  }
  if (type == AE_IFLNK) {
    if (symlink(archive_entry_symlink(e), full)) rc = -errno;
    goto out;
  }
  mode_t mode = (archive_entry_perm(e) & 0777) | 0600;
  w->fd = open(full, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (w->fd < 0) {
    rc = -errno;
    goto out;
  }
  rc = member_data(a, w, raw, 0, err, errlen);
  if (close(w->fd) && !rc) rc = -errno;
  w->fd = -1;
  free(full);
  return rc; /* err is set already */
out:
  if (rc) snprintf(err, errlen, "cannot extract '%s': %s", raw, strerror(-rc));
  free(full);
  return rc;
}

static int walk(struct archive *a, walk_t *w, char *err, size_t errlen) {
  struct archive_entry *e;
  int rc;
  for (;;) {
    int r = archive_read_next_header(a, &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN)
      return bad(err, errlen, "not a readable zip or tar.gz archive: %s%s",
                 archive_error_string(a) ? archive_error_string(a) : "unknown error", NULL);
    if (++w->members > MARCHIVE_MAX_MEMBERS) {
      snprintf(err, errlen, "the archive has more than %d members", MARCHIVE_MAX_MEMBERS);
      return SPD_EBADEGG;
    }
    const char *raw = archive_entry_pathname(e);
    /* A UTF-8 name the daemon's locale cannot show: judge it as UTF-8. */
    if (!raw) raw = archive_entry_pathname_utf8(e);
    if (!raw) return bad(err, errlen, "an archive member has no readable name%s%s", "", NULL);
    if ((rc = manifest_member_check(raw, err, errlen))) return rc;
    const char *name = raw;
    while (name[0] == '.' && name[1] == '/') name += 2;
    while (name[0] == '/') name++; /* "./" then "/": still relative to the root */
    size_t nlen = strlen(name);
    while (nlen && name[nlen - 1] == '/') nlen--;
    if (nlen == 0 || (nlen == 1 && name[0] == '.')) continue; /* the root itself */
    if (archive_entry_hardlink(e))
      return bad(err, errlen, "archive member '%s': hard links are not allowed%s", raw, NULL);
    mode_t type = archive_entry_filetype(e);
    int is_manifest = nlen == sizeof(MANIFEST_NAME) - 1 && !strncmp(name, MANIFEST_NAME, nlen);
    if (type == AE_IFLNK) {
      if ((rc = manifest_link_check(raw, archive_entry_symlink(e), err, errlen))) return rc;
    } else if (type != AE_IFREG && type != AE_IFDIR) {
      return bad(err, errlen,
                 "archive member '%s': only files, directories and symlinks are allowed%s", raw,
                 NULL);
    }
    if (is_manifest && type != AE_IFREG)
      return bad(err, errlen, MANIFEST_NAME " must be a regular file%s%s", "", NULL);
    if (is_manifest) {
      if (w->manifest_seen)
        return bad(err, errlen, "the archive holds " MANIFEST_NAME " twice%s%s", "", NULL);
      w->manifest_seen = 1;
    }
    if (archive_entry_size_is_set(e) && archive_entry_size(e) > MARCHIVE_MAX_BYTES - w->bytes) {
      snprintf(err, errlen, "the archive holds more than %lld bytes once extracted",
               MARCHIVE_MAX_BYTES);
      return SPD_EBADEGG;
    }
    if (w->dest) {
      rc = extract_member(a, e, w, raw, name, nlen, err, errlen);
      if (rc) return rc;
    } else if (type == AE_IFREG && is_manifest) {
      rc = member_data(a, w, raw, 1, err, errlen);
      if (rc) return rc;
    } else if (type == AE_IFREG && archive_entry_size_is_set(e)) {
      w->bytes += archive_entry_size(e); /* checking only: as declared */
    }
  }
  if (!w->manifest_seen)
    return bad(err, errlen, "no " MANIFEST_NAME " at the archive's root%s%s", "", NULL);
  return 0;
}

static int check_open(struct archive *a, int r, manifest_t *m, char *err, size_t errlen) {
  walk_t w = {.fd = -1};
  int rc;
  if (r != ARCHIVE_OK) {
    rc = bad(err, errlen, "not a readable zip or tar.gz archive: %s%s",
             archive_error_string(a) ? archive_error_string(a) : "unknown error", NULL);
  } else {
    rc = walk(a, &w, err, errlen);
    if (!rc) rc = manifest_parse(w.manifest ? w.manifest : "", w.manifest_len, m, err, errlen);
  }
  free(w.manifest);
  archive_read_free(a);
  return rc;
}

int marchive_check_mem(const void *data, size_t len, manifest_t *m, char *err, size_t errlen) {
  memset(m, 0, sizeof(*m));
  struct archive *a = NULL;
  int rc = reader_new(&a, err, errlen);
  if (rc) return rc;
  return check_open(a, archive_read_open_memory(a, data, len), m, err, errlen);
}

int marchive_check_file(const char *path, manifest_t *m, char *err, size_t errlen) {
  memset(m, 0, sizeof(*m));
  struct archive *a = NULL;
  int rc = reader_new(&a, err, errlen);
  if (rc) return rc;
  return check_open(a, archive_read_open_filename(a, path, 64 * 1024), m, err, errlen);
}

/* ---- named members' texts ---- */

static int texts_open(struct archive *a, int r, const char *const *names, size_t n, size_t max,
                      char **texts) {
  int rc = r == ARCHIVE_OK ? 0 : SPD_EBADEGG;
  size_t found = 0;
  struct archive_entry *e;
  for (int members = 0; !rc && found < n && members < MARCHIVE_MAX_MEMBERS; members++) {
    r = archive_read_next_header(a, &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) {
      rc = SPD_EBADEGG;
      break;
    }
    const char *name = archive_entry_pathname(e);
    if (!name || archive_entry_filetype(e) != AE_IFREG) continue;
    while (name[0] == '.' && name[1] == '/') name += 2;
    while (name[0] == '/') name++;
    for (size_t i = 0; i < n; i++) {
      if (texts[i] || strcmp(name, names[i])) continue;
      la_int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : -1;
      if (size < 0 || (size_t)size > max) break;
      char *buf = malloc((size_t)size + 1);
      if (!buf) {
        rc = -ENOMEM;
        break;
      }
      if (archive_read_data(a, buf, (size_t)size) != (la_ssize_t)size) {
        free(buf);
        rc = SPD_EBADEGG;
        break;
      }
      buf[size] = '\0';
      texts[i] = buf;
      found++;
      break;
    }
  }
  archive_read_free(a);
  if (rc)
    for (size_t i = 0; i < n; i++) {
      free(texts[i]);
      texts[i] = NULL;
    }
  return rc;
}

int marchive_texts_mem(const void *data, size_t len, const char *const *names, size_t n,
                       size_t max, char **texts) {
  struct archive *a = NULL;
  memset(texts, 0, n * sizeof(*texts));
  int rc = reader_new(&a, NULL, 0);
  if (rc) return rc;
  return texts_open(a, archive_read_open_memory(a, data, len), names, n, max, texts);
}

int marchive_texts_file(const char *path, const char *const *names, size_t n, size_t max,
                        char **texts) {
  struct archive *a = NULL;
  memset(texts, 0, n * sizeof(*texts));
  int rc = reader_new(&a, NULL, 0);
  if (rc) return rc;
  return texts_open(a, archive_read_open_filename(a, path, 64 * 1024), names, n, max, texts);
}

/* ---- extracting ---- */


/* Reads dir/spiderd.json into *m. -ENOENT when there is none. */
static int load_extracted(const char *dir, manifest_t *m, char *err, size_t errlen) {
  char *path = NULL, *buf = NULL;
  int rc;
  if (asprintf(&path, "%s/" MANIFEST_NAME, dir) < 0) return -ENOMEM;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  free(path);
  if (fd < 0) return -errno;
  struct stat st;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > MANIFEST_MAX_BYTES) {
    close(fd);
    snprintf(err, errlen, "%s/" MANIFEST_NAME " is not a readable manifest", dir);
    return SPD_EBADEGG;
  }
  buf = malloc((size_t)st.st_size + 1);
  size_t got = 0;
  while (buf && got < (size_t)st.st_size) {
    ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (!buf) return -ENOMEM;
  rc = manifest_parse(buf, got, m, err, errlen);
  free(buf);
  return rc;
}

static int extract_into(const char *path, const char *dest, char *err, size_t errlen) {
  struct archive *a = NULL;
  walk_t w = {.dest = dest, .fd = -1};
  int rc = reader_new(&a, err, errlen);
  if (rc) return rc;
  if (archive_read_open_filename(a, path, 64 * 1024) != ARCHIVE_OK) {
    rc = bad(err, errlen, "%s is not a readable zip or tar.gz archive: %s", path,
             archive_error_string(a));
    goto out;
  }
  rc = walk(a, &w, err, errlen);
out:
  free(w.manifest);
  archive_read_free(a);
  return rc;
}

/* FNV-1a of what names one version of a file on this machine. */
static uint64_t file_id(const struct stat *st) {
  uint64_t h = 0xcbf29ce484222325ull;
  uint64_t parts[] = {(uint64_t)st->st_dev, (uint64_t)st->st_ino, (uint64_t)st->st_size,
                      (uint64_t)st->st_mtim.tv_sec, (uint64_t)st->st_mtim.tv_nsec};
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
    for (int b = 0; b < 8; b++) {
      h ^= (parts[i] >> (8 * b)) & 0xff;
      h *= 0x100000001b3ull;
    }
  return h;
}

int marchive_prepare(const char *path, const char *root, const char *project, manifest_t *m,
                     char **dir, char *err, size_t errlen) {
  char *pdir = NULL, *final = NULL, *tmp = NULL, *stem = NULL;
  struct stat st;
  int rc;

  memset(m, 0, sizeof(*m));
  *dir = NULL;
  if (stat(path, &st)) {
    rc = -errno;
    snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
    return rc;
  }
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t blen = strlen(base), sl = sizeof(EGG_SUFFIX) - 1;
  if (blen > sl && !strcmp(base + blen - sl, EGG_SUFFIX)) blen -= sl;
  rc = -ENOMEM;
  if (!(stem = strndup(base, blen))) goto out;
  if (asprintf(&pdir, "%s/%s", root, project) < 0) {
    pdir = NULL;
    goto out;
  }
  if (asprintf(&final, "%s/%s-%016llx", pdir, stem, (unsigned long long)file_id(&st)) < 0) {
    final = NULL;
    goto out;
  }
  rc = load_extracted(final, m, err, errlen);
  if (rc != -ENOENT) goto out; /* there already (or broken: the reason is in err) */
  rc = fs_mkdirs(pdir, 0755);
  if (rc) {
    snprintf(err, errlen, "cannot create %s: %s", pdir, strerror(-rc));
    goto out;
  }
  rc = -ENOMEM;
  if (asprintf(&tmp, "%s/.tmp-%s-XXXXXX", pdir, stem) < 0) {
    tmp = NULL;
    goto out;
  }
  if (!mkdtemp(tmp)) {
    rc = -errno;
    snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
    free(tmp);
    tmp = NULL;
    goto out;
  }
  chmod(tmp, 0755);
  rc = extract_into(path, tmp, err, errlen);
  if (!rc) rc = load_extracted(tmp, m, err, errlen);
  if (rc) goto out;
  if (rename(tmp, final)) {
    /* Another daemon sharing this directory got there first. */
    if (errno != EEXIST && errno != ENOTEMPTY) {
      rc = -errno;
      snprintf(err, errlen, "cannot rename %s: %s", tmp, strerror(errno));
      manifest_release(m);
      goto out;
    }
  } else {
    free(tmp);
    tmp = NULL;
  }
out:
  if (tmp) fs_rmtree(tmp);
  free(tmp);
  free(stem);
  free(pdir);
  if (!rc) {
    *dir = final;
    final = NULL;
  }
  free(final);
  return rc;
}

int marchive_prune(const char *root, const char *project, const char *eggs_dir,
                   int (*in_use)(void *ud, const char *dir), void *ud) {
  char *pdir = NULL;
  int removed = 0;
  if (asprintf(&pdir, "%s/%s", root, project) < 0) return 0;
  DIR *d = opendir(pdir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    const char *name = e->d_name;
    if (!strcmp(name, ".") || !strcmp(name, "..")) continue;
    char *dir = NULL, *egg = NULL;
    if (asprintf(&dir, "%s/%s", pdir, name) < 0) break;
    int stale = 1;
    const char *dash = strrchr(name, '-');
    if (name[0] != '.' && dash && strlen(dash + 1) == 16) {
      struct stat st;
      char idhex[17];
      if (asprintf(&egg, "%s/%s/%.*s" EGG_SUFFIX, eggs_dir, project, (int)(dash - name), name) <
          0)
        egg = NULL;
      if (egg && stat(egg, &st) == 0) {
        snprintf(idhex, sizeof(idhex), "%016llx", (unsigned long long)file_id(&st));
        stale = strcmp(idhex, dash + 1) != 0;
      } else if (!egg) {
        stale = 0; /* no memory: judge another time */
      }
    }
    if (stale && !(in_use && in_use(ud, dir))) {
      fs_rmtree(dir);
      removed++;
    }
    free(egg);
    free(dir);
  }
  if (d) closedir(d);
  free(pdir);
  return removed;
}

int marchive_ready(const char *path, const char *root, const char *project) {
  struct stat st;
  if (stat(path, &st)) return 0;
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t blen = strlen(base), sl = sizeof(EGG_SUFFIX) - 1;
  if (blen > sl && !strcmp(base + blen - sl, EGG_SUFFIX)) blen -= sl;
  char *mf = NULL;
  if (asprintf(&mf, "%s/%s/%.*s-%016llx/" MANIFEST_NAME, root, project, (int)blen, base,
               (unsigned long long)file_id(&st)) < 0)
    return 0;
  int ok = stat(mf, &st) == 0;
  free(mf);
  return ok;
}
