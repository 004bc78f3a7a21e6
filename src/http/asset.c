/* The files of a built web application (a single-page app, rendered docs),
 * served as browsers and caches expect: strong validators, precompressed
 * siblings, no sniffing, and a lookup that cannot leave its directory.
 * Unlike static.c (Twisted's static.File for Scrapyd's trees) there are no
 * listings, no ranges and no redirects: the caller decides what a missing
 * file means (another file, a fallback page, a 404). */
#include "http/http.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- content types ---- */

static const struct {
  const char *ext, *type;
} asset_types[] = {
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"cjs", "text/javascript; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"json", "application/json"},
    {"map", "application/json"}, /* source maps are JSON */
    {"webmanifest", "application/manifest+json"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"avif", "image/avif"},
    {"ico", "image/x-icon"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"ttf", "font/ttf"},
    {"otf", "font/otf"},
    {"txt", "text/plain; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
    {"xml", "application/xml"},
    {"yaml", "application/yaml"},
    {"yml", "application/yaml"},
    {"wasm", "application/wasm"},
    {"pdf", "application/pdf"},
    {"gz", "application/gzip"},
};

const char *http_asset_type(const char *name) {
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  const char *dot = strrchr(base, '.');
  if (dot && dot != base) /* ".htaccess" has no extension */
    for (size_t i = 0; i < sizeof(asset_types) / sizeof(asset_types[0]); i++)
      if (strcasecmp(dot + 1, asset_types[i].ext) == 0) return asset_types[i].type;
  /* with nosniff, a browser neither runs nor renders what it cannot name */
  return "application/octet-stream";
}

/* ---- paths ---- */

int http_asset_path_ok(const char *rel) {
  if (!rel) return -EINVAL;
  for (const char *p = rel; *p;) {
    size_t n = strcspn(p, "/");
    if (n == 2 && p[0] == '.' && p[1] == '.') return -EINVAL;
    for (size_t i = 0; i < n; i++) {
      unsigned char c = (unsigned char)p[i];
      if (c == '\\' || c < 0x20 || c == 0x7f) return -EINVAL;
    }
    p += n;
    while (*p == '/') p++;
  }
  return 0;
}

int http_path_prefix(const char *v, char *out, size_t outlen) {
  if (!outlen) return -EINVAL;
  out[0] = '\0';
  if (!v || !*v) return 0;
  size_t n = strlen(v);
  while (n > 1 && v[n - 1] == '/') n--; /* "/a/" is "/a" */
  if (v[0] != '/' || n >= outlen) return -EINVAL;
  if (n == 1) return 0; /* "/" is no prefix */
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)v[i];
    if (c == '/') {
      /* "//host" would name another server; "." and ".." another path */
      size_t seg = strcspn(v + i + 1, "/");
      if (i + 1 + seg > n) seg = n - i - 1;
      if (seg == 0 || (seg == 1 && v[i + 1] == '.') ||
          (seg == 2 && v[i + 1] == '.' && v[i + 2] == '.'))
        return -EINVAL;
    } else if (c == '%') {
      if (i + 2 >= n || !isxdigit((unsigned char)v[i + 1]) ||
          !isxdigit((unsigned char)v[i + 2]))
        return -EINVAL;
    } else if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) &&
               !strchr("-._~!$+,;=:@", c)) {
      return -EINVAL; /* quotes, <, >, &, spaces, controls, non-ASCII... */
    }
  }
  memcpy(out, v, n);
  out[n] = '\0';
  return 0;
}

/* rel without empty and "." segments ("a//./b/" -> "a/b"); malloc'd. */
static char *clean_rel(const char *rel) {
  size_t len = strlen(rel);
  char *out = malloc(len + 1), *o = out;
  if (!out) return NULL;
  for (const char *p = rel; *p;) {
    size_t n = strcspn(p, "/");
    if (n && !(n == 1 && p[0] == '.')) {
      if (o != out) *o++ = '/';
      memcpy(o, p, n);
      o += n;
    }
    p += n;
    while (*p == '/') p++;
  }
  *o = '\0';
  return out;
}

/* The opening flags of a file to serve: O_NONBLOCK so that a FIFO left in
 * the tree cannot stall the loop in open(); it changes nothing for reads of
 * a regular file. */
#define FILE_FLAGS (O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)

/* Linux 5.6+: the kernel resolves path under dirfd and fails with EXDEV
 * when a "..", an absolute symlink or a symlink's target would leave it,
 * with no window for a rename to slip in between a check and the open. */
static int open_beneath(int dirfd, const char *path) {
  struct open_how how = {
      .flags = FILE_FLAGS,
      .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
  };
  long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
  return fd < 0 ? -errno : (int)fd;
}

/* Without openat2 (an older kernel, or a seccomp filter that refuses it):
 * one segment at a time, following no symlink at all. */
static int open_walk(int dirfd, const char *path) {
  int dir = dirfd;
  int rc = 0;
  for (const char *p = path;;) {
    size_t n = strcspn(p, "/");
    char seg[NAME_MAX + 1];
    if (n > NAME_MAX) {
      rc = -ENAMETOOLONG;
      break;
    }
    memcpy(seg, p, n);
    seg[n] = '\0';
    bool last = p[n] == '\0';
    int fd = openat(dir, seg,
                    last ? FILE_FLAGS | O_NOFOLLOW : O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      rc = -errno;
      /* O_NOFOLLOW on a symlink: ELOOP for the file, ENOTDIR for a
       * directory (as for a plain file in the middle of the path) */
      struct stat lst;
      if (rc == -ENOTDIR && fstatat(dir, seg, &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(lst.st_mode))
        rc = -ELOOP;
      break;
    }
    if (dir != dirfd) close(dir);
    dir = fd;
    if (last) return fd;
    p += n + 1;
  }
  if (dir != dirfd) close(dir);
  return rc;
}

/* Opens the regular file rel under root_dir. Returns an fd with *st, or
 * -EINVAL (refused path), -EXDEV / -ELOOP (it leads out of the tree, or
 * through a symlink where symlinks are not followed), -ENOENT (no such file,
 * no root_dir, or a non-file in the middle), -EISDIR (a directory or the
 * root), -EACCES, -ENOMEM. */
static int asset_open(const char *root_dir, const char *rel, struct stat *st) {
  int rc = http_asset_path_ok(rel);
  if (rc) return rc;
  char *clean = clean_rel(rel);
  if (!clean) return -ENOMEM;
  int root = -1, fd = -1;
  if (!*clean) {
    rc = -EISDIR;
    goto out;
  }
  root = open(root_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) {
    rc = errno == ENOTDIR ? -ENOENT : -errno;
    goto out;
  }
  fd = open_beneath(root, clean);
  if (fd == -ENOSYS || fd == -EPERM) fd = open_walk(root, clean);
  if (fd < 0) {
    rc = fd == -ENOTDIR ? -ENOENT : fd;
    goto out;
  }
  if (fstat(fd, st)) {
    rc = -errno;
  } else if (S_ISDIR(st->st_mode)) {
    rc = -EISDIR;
  } else if (!S_ISREG(st->st_mode)) {
    rc = -ENOENT; /* a FIFO, a device, a socket: nothing to serve */
  } else {
    rc = fd;
    fd = -1;
  }
out:
  if (fd >= 0) close(fd);
  if (root >= 0) close(root);
  free(clean);
  return rc;
}

/* ---- negotiation ---- */

/* Does If-None-Match name etag? Weak comparison (RFC 9110 §13.1.2): a W/
 * prefix on either side is ignored; "*" matches any current file. */
static bool etag_matches(const char *inm, const char *etag) {
  if (!inm) return false;
  if (etag[0] == 'W' && etag[1] == '/') etag += 2;
  size_t elen = strlen(etag);
  for (const char *p = inm; *p;) {
    p += strspn(p, " \t,");
    if (!*p) break;
    if (*p == '*') return true;
    if (p[0] == 'W' && p[1] == '/') p += 2;
    size_t len;
    if (*p == '"') {
      const char *close = strchr(p + 1, '"');
      len = close ? (size_t)(close - p) + 1 : strlen(p);
    } else {
      len = strcspn(p, ",");
    }
    if (len == elen && !memcmp(p, etag, elen)) return true;
    p += len;
  }
  return false;
}

/* ---- the reply ---- */

#define REWRITE_MAX (1 << 20)

/* FNV-1a: tells one html_to from another in an ETag. */
static uint64_t fnv1a(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

/* The file's text with the first from replaced by to; malloc'd. */
static int rewrite(int fd, uint64_t size, const char *from, const char *to, char **out,
                   size_t *outlen) {
  if (size > REWRITE_MAX) return -EFBIG;
  size_t flen = strlen(from), tlen = strlen(to);
  char *text = malloc(size + 1), *res = NULL;
  if (!text) return -ENOMEM;
  size_t got = 0;
  while (got < size) {
    ssize_t n = pread(fd, text + got, size - got, (off_t)got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      free(text);
      return n < 0 ? -errno : -EIO;
    }
    got += (size_t)n;
  }
  text[size] = '\0';
  const char *at = flen ? memmem(text, size, from, flen) : NULL;
  if (!at) { /* nothing to replace: as it is */
    *out = text;
    *outlen = size;
    return 0;
  }
  res = malloc(size - flen + tlen + 1);
  if (!res) {
    free(text);
    return -ENOMEM;
  }
  size_t head = (size_t)(at - text);
  memcpy(res, text, head);
  memcpy(res + head, to, tlen);
  memcpy(res + head + tlen, at + flen, size - head - flen + 1);
  free(text);
  *out = res;
  *outlen = size - flen + tlen;
  return 0;
}

static bool wants_rewrite(const char *rel, const http_asset_opts_t *o) {
  return o && o->html_from && o->html_to && strcmp(o->html_from, o->html_to) &&
         !strncmp(http_asset_type(rel), "text/html", 9);
}

int http_serve_asset(http_req_t *r, const char *root_dir, const char *rel,
                     const http_asset_opts_t *o) {
  struct stat st;
  int fd = asset_open(root_dir, rel, &st);
  if (fd < 0) return fd;
  bool gz = false, rw = wants_rewrite(rel, o);
  size_t rlen = strlen(rel);
  if (o && o->gzip && !rw && !(rlen > 3 && !strcasecmp(rel + rlen - 3, ".gz")) &&
      http_accepts_gzip(http_req_header(r, "Accept-Encoding"))) {
    char *gzrel = NULL;
    struct stat gst;
    int gfd = asprintf(&gzrel, "%s.gz", rel) < 0 ? -ENOMEM : asset_open(root_dir, gzrel, &gst);
    free(gzrel);
    if (gfd >= 0) {
      close(fd);
      fd = gfd;
      st = gst;
      gz = true;
    }
  }
  /* The inode changes when a build replaces the file (a new file renamed
   * over it), the size and the mtime when it is rewritten in place. */
  char etag[128], tag[24] = "";
  if (gz) snprintf(tag, sizeof(tag), "-gz");
  if (rw) snprintf(tag, sizeof(tag), "-%llx", (unsigned long long)fnv1a(o->html_to));
  snprintf(etag, sizeof(etag), "\"%llx-%llx-%llx%s\"", (unsigned long long)st.st_ino,
           (unsigned long long)st.st_size,
           (unsigned long long)st.st_mtim.tv_sec * 1000000000ULL +
               (unsigned long long)st.st_mtim.tv_nsec,
           tag);
  char *text = NULL;
  size_t tlen = 0;
  if (rw) {
    int rc = rewrite(fd, (uint64_t)st.st_size, o->html_from, o->html_to, &text, &tlen);
    if (rc) {
      close(fd);
      return rc;
    }
    close(fd);
    fd = -1;
  }
  http_reply_header(r, "ETag", etag);
  if (o && o->cache_control) http_reply_header(r, "Cache-Control", o->cache_control);
  if (o && o->gzip) http_reply_header(r, "Vary", "Accept-Encoding");
  http_reply_header(r, "X-Content-Type-Options", "nosniff");
  /* libmicrohttpd sends no body with a 304 but the Content-Length it is
   * given, which must then be the 200's (RFC 9110 §8.6), not 0 */
  int status = etag_matches(http_req_header(r, "If-None-Match"), etag) ? 304 : 200;
  const char *type = status == 304 ? NULL : http_asset_type(rel);
  if (rw) {
    http_reply(r, status, type, text, tlen);
    free(text);
    return 0;
  }
  if (gz && status == 200) http_reply_header(r, "Content-Encoding", "gzip");
  http_reply_fd(r, status, type, fd, 0, (uint64_t)st.st_size);
  return 0;
}
