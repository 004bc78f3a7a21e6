/* Static file trees served like Twisted's static.File, as Scrapyd serves
 * /logs/ and /items/: ScrapydWeb parses the directory listing with regexes
 * and fetches files by name, so the page layout and the status codes follow
 * Scrapyd 1.6.0 (its DirectoryLister adds a "Last modified" column). */
#include "http/http.h"
#include "http/server_int.h"
#include "strbuf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- HTML and URL text ---- */

/* Appends s with &, <, >, " and ' as HTML entities (Python's html.escape). */
static void add_escaped(strbuf_t *b, const char *s) {
  for (; *s; s++) {
    switch (*s) {
    case '&': strbuf_adds(b, "&amp;"); break;
    case '<': strbuf_adds(b, "&lt;"); break;
    case '>': strbuf_adds(b, "&gt;"); break;
    case '"': strbuf_adds(b, "&quot;"); break;
    case '\'': strbuf_adds(b, "&#x27;"); break;
    default: strbuf_add(b, s, 1);
    }
  }
}

/* Appends s as Python's urllib.parse.quote(s, safe="/") writes it. */
static void add_quoted(strbuf_t *b, const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
        c == '.' || c == '-' || c == '~' || c == '/') {
      strbuf_add(b, s, 1);
    } else {
      char e[3] = {'%', hex[c >> 4], hex[c & 15]};
      strbuf_add(b, e, 3);
    }
  }
}

char *http_html_escape(const char *s) {
  strbuf_t b = {0};
  strbuf_add(&b, "", 0);
  add_escaped(&b, s ? s : "");
  if (b.failed) {
    strbuf_release(&b);
    return NULL;
  }
  return b.p;
}

/* ---- content types (Python's mimetypes on Debian, as Twisted uses) ---- */

static const struct {
  const char *ext, *type;
} mime_types[] = {
    {".json", "application/json"}, {".html", "text/html"}, {".htm", "text/html"},
    {".txt", "text/plain"}, {".text", "text/plain"}, {".conf", "text/plain"},
    {".diff", "text/plain"}, {".patch", "text/plain"}, {".java", "text/plain"},
    {".csv", "text/csv"}, {".tsv", "text/tab-separated-values"}, {".xml", "application/xml"},
    {".css", "text/css"}, {".js", "text/javascript"}, {".mjs", "text/javascript"},
    {".md", "text/markdown"}, {".py", "text/x-python"}, {".sh", "application/x-sh"},
    {".c", "text/x-csrc"}, {".h", "text/x-chdr"}, {".png", "image/png"},
    {".jpg", "image/jpeg"}, {".jpeg", "image/jpeg"}, {".gif", "image/gif"},
    {".svg", "image/svg+xml"}, {".ico", "image/vnd.microsoft.icon"}, {".webp", "image/webp"},
    {".pdf", "application/pdf"}, {".zip", "application/zip"}, {".tar", "application/x-tar"},
    {".xz", "application/x-xz"}, {".zst", "application/zstd"}, {".wasm", "application/wasm"},
    {".woff", "font/woff"}, {".woff2", "font/woff2"}, {".ttf", "font/ttf"},
};

static const char *ext_of(const char *name, size_t len) {
  for (size_t i = len; i > 0; i--) {
    if (name[i - 1] == '.') return i - 1 == 0 ? NULL : name + i - 1; /* ".bashrc" has none */
    if (name[i - 1] == '/') return NULL;
  }
  return NULL;
}

/* Twisted's getTypeAndEncoding: ".gz"/".bz2" are an encoding and the type
 * comes from the extension before it; unknown types are text/plain. */
static const char *type_and_encoding(const char *name, const char **encoding) {
  size_t len = strlen(name);
  const char *ext = ext_of(name, len);
  *encoding = NULL;
  if (ext && (strcasecmp(ext, ".gz") == 0 || strcasecmp(ext, ".bz2") == 0)) {
    *encoding = strcasecmp(ext, ".gz") == 0 ? "gzip" : "bzip2";
    len = (size_t)(ext - name);
    ext = ext_of(name, len);
  }
  if (ext) {
    size_t elen = len - (size_t)(ext - name);
    for (size_t i = 0; i < sizeof(mime_types) / sizeof(mime_types[0]); i++)
      if (strlen(mime_types[i].ext) == elen && strncasecmp(ext, mime_types[i].ext, elen) == 0)
        return mime_types[i].type;
  }
  return "text/plain";
}

/* ---- small replies ---- */

static void error_page(http_req_t *r, int status, const char *brief, const char *detail) {
  strbuf_t b = {0};
  char code[16];
  snprintf(code, sizeof(code), "%d", status);
  strbuf_adds(&b, "\n<html>\n  <head><title>");
  strbuf_adds(&b, code);
  strbuf_adds(&b, " - ");
  strbuf_adds(&b, brief);
  strbuf_adds(&b, "</title></head>\n  <body>\n    <h1>");
  strbuf_adds(&b, brief);
  strbuf_adds(&b, "</h1>\n    <p>");
  strbuf_adds(&b, detail);
  strbuf_adds(&b, "</p>\n  </body>\n</html>\n");
  if (b.failed) http_reply(r, 500, NULL, NULL, 0);
  else http_reply(r, status, "text/html; charset=utf-8", b.p, b.len);
  strbuf_release(&b);
}

static void not_found(http_req_t *r) { error_page(r, 404, "No Such Resource", "File not found."); }

static void redirect_slash(http_req_t *r, const char *url_path) {
  strbuf_t loc = {0}, body = {0};
  add_quoted(&loc, url_path);
  strbuf_adds(&loc, "/");
  strbuf_adds(&body, "\n<html>\n    <head>\n        <meta http-equiv=\"refresh\" content=\"0;URL=");
  add_escaped(&body, loc.p ? loc.p : "");
  strbuf_adds(&body, "\">\n    </head>\n    <body bgcolor=\"#FFFFFF\" text=\"#000000\">\n    <a href=\"");
  add_escaped(&body, loc.p ? loc.p : "");
  strbuf_adds(&body, "\">click here</a>\n    </body>\n</html>\n");
  if (loc.failed || body.failed) {
    http_reply(r, 500, NULL, NULL, 0);
  } else {
    http_reply_header(r, "Location", loc.p);
    http_reply(r, 302, "text/html; charset=utf-8", body.p, body.len);
  }
  strbuf_release(&loc);
  strbuf_release(&body);
}

/* ---- dates ---- */

static const char wdays[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

static void http_date(time_t t, char *out, size_t n) {
  struct tm tm;
  gmtime_r(&t, &tm);
  snprintf(out, n, "%s, %02d %s %04d %02d:%02d:%02d GMT", wdays[tm.tm_wday], tm.tm_mday,
           months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* IMF-fixdate only ("Sun, 06 Nov 1994 08:49:37 GMT"); what browsers send. */
static int parse_http_date(const char *s, time_t *out) {
  char wd[4], mon[4];
  struct tm tm = {0};
  if (sscanf(s, "%3[A-Za-z], %d %3s %d %d:%d:%d", wd, &tm.tm_mday, mon, &tm.tm_year, &tm.tm_hour,
             &tm.tm_min, &tm.tm_sec) != 7)
    return -EINVAL;
  int m = -1;
  for (int i = 0; i < 12; i++)
    if (strcmp(mon, months[i]) == 0) m = i;
  if (m < 0) return -EINVAL;
  tm.tm_mon = m;
  tm.tm_year -= 1900;
  *out = timegm(&tm);
  return 0;
}

/* ---- files ---- */

/* A single "bytes=a-b" range as Twisted parses it. Returns 1 with the range,
 * 0 to ignore the header (malformed, or several ranges: served whole), or
 * -1 when unsatisfiable. */
static int parse_range(const char *h, uint64_t size, uint64_t *off, uint64_t *len) {
  while (*h == ' ' || *h == '\t') h++;
  if (strncmp(h, "bytes", 5) != 0) return 0;
  h += 5;
  while (*h == ' ' || *h == '\t') h++;
  if (*h++ != '=') return 0;
  while (*h == ' ' || *h == '\t' || *h == ',') h++;
  const char *spec = h;
  size_t slen = strcspn(spec, ",");
  for (const char *rest = spec + slen; *rest; rest++)
    if (*rest != ',' && *rest != ' ' && *rest != '\t') return 0; /* several ranges */
  while (slen && (spec[slen - 1] == ' ' || spec[slen - 1] == '\t')) slen--;
  const char *dash = memchr(spec, '-', slen);
  if (!dash) return 0;
  bool has_start = dash > spec, has_end = dash + 1 < spec + slen;
  uint64_t start = 0, end = 0;
  for (const char *p = spec; p < dash; p++) {
    if (*p < '0' || *p > '9' || start > UINT64_MAX / 10 - 1) return 0;
    start = start * 10 + (uint64_t)(*p - '0');
  }
  for (const char *p = dash + 1; p < spec + slen; p++) {
    if (*p < '0' || *p > '9' || end > UINT64_MAX / 10 - 1) return 0;
    end = end * 10 + (uint64_t)(*p - '0');
  }
  if (!has_start && !has_end) return 0;
  if (has_start && has_end && start > end) return 0;
  uint64_t stop;
  if (!has_start) { /* the last `end` bytes */
    start = end > size ? 0 : size - end;
    stop = size;
  } else if (!has_end || end >= size) {
    stop = size;
  } else {
    stop = end + 1;
  }
  if (start >= size) return -1;
  *off = start;
  *len = stop - start;
  return 1;
}

static void serve_file(http_req_t *r, const char *path, const char *name) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    if (errno == EACCES) error_page(r, 403, "Forbidden Resource", "Sorry, resource is forbidden.");
    else not_found(r);
    return;
  }
  struct stat st;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    close(fd);
    not_found(r);
    return;
  }
  const char *encoding;
  const char *type = type_and_encoding(name, &encoding);
  char date[64];
  http_date(st.st_mtime, date, sizeof(date));
  http_reply_header(r, "Accept-Ranges", "bytes");
  http_reply_header(r, "Last-Modified", date);
  if (encoding) http_reply_header(r, "Content-Encoding", encoding);

  const char *ims = http_req_header(r, "If-Modified-Since");
  time_t since;
  if (ims && parse_http_date(ims, &since) == 0 && since >= st.st_mtime) {
    close(fd);
    http_reply(r, 304, NULL, NULL, 0);
    return;
  }
  uint64_t size = (uint64_t)st.st_size, off = 0, len = size;
  const char *range = http_req_is_head(r) ? NULL : http_req_header(r, "Range");
  int rc = range ? parse_range(range, size, &off, &len) : 0;
  char cr[96];
  if (rc < 0) {
    close(fd);
    snprintf(cr, sizeof(cr), "bytes */%" PRIu64, size);
    http_reply_header(r, "Content-Range", cr);
    http_reply(r, 416, type, NULL, 0);
    return;
  }
  if (rc > 0) {
    snprintf(cr, sizeof(cr), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off, off + len - 1, size);
    http_reply_header(r, "Content-Range", cr);
  }
  http_reply_fd(r, rc > 0 ? 206 : 200, type, fd, off, len);
}

/* ---- directory listings ---- */

static const char listing_head[] =
    "<html>\n<head>\n<title>%s</title>\n<style>\n"
    ".even-dir { background-color: #efe0ef }\n"
    ".even { background-color: #eee }\n"
    ".odd-dir {background-color: #f0d0ef }\n"
    ".odd { background-color: #dedede }\n"
    ".icon { text-align: center }\n"
    ".listing {\n    margin-left: auto;\n    margin-right: auto;\n    width: 50%%;\n"
    "    padding: 0.1em;\n    }\n\n"
    "body { border: 0; padding: 0; margin: 0; background-color: #efefef; }\n"
    "h1 {padding: 0.1em; background-color: #777; color: white; border-bottom: thin white "
    "dashed;}\n\n</style>\n</head>\n\n<body>\n<h1>%s</h1>\n\n<table>\n    <thead>\n"
    "        <tr>\n            <th>Filename</th>\n            <th>Size</th>\n"
    "            <th>Last modified</th>\n            <th>Content type</th>\n"
    "            <th>Content encoding</th>\n        </tr>\n    </thead>\n    <tbody>\n";
static const char listing_foot[] = "\n    </tbody>\n</table>\n\n</body>\n</html>\n";

typedef struct entry {
  char *name;
  bool dir;
  uint64_t size;
  time_t mtime;
} entry;

static int entry_cmp(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->dir != y->dir) return x->dir ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Twisted's formatFileSize. */
static void format_size(uint64_t n, char *out, size_t len) {
  if (n < 1024) snprintf(out, len, "%" PRIu64 "B", n);
  else if (n < ((uint64_t)1 << 20)) snprintf(out, len, "%" PRIu64 "K", n >> 10);
  else if (n < ((uint64_t)1 << 30)) snprintf(out, len, "%" PRIu64 "M", n >> 20);
  else snprintf(out, len, "%" PRIu64 "G", n >> 30);
}

static bool inside(const char *real, const char *root) {
  size_t n = strlen(root);
  if (n == 1 && root[0] == '/') return real[0] == '/';
  return strncmp(real, root, n) == 0 && (real[n] == '\0' || real[n] == '/');
}

/* Reads the directory; symlinks leading out of root are left out, as they
 * could not be fetched. */
static int read_entries(const char *dir, const char *root, entry **out, size_t *count) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return -errno;
  DIR *d = fdopendir(dfd);
  if (!d) {
    int rc = -errno;
    close(dfd);
    return rc;
  }
  entry *v = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    struct stat st, lst;
    if (fstatat(dfd, de->d_name, &st, 0)) continue; /* dangling link */
    if (fstatat(dfd, de->d_name, &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lst.st_mode)) {
      char *link = NULL;
      if (asprintf(&link, "%s/%s", dir, de->d_name) < 0) continue;
      char *real = realpath(link, NULL);
      bool ok = real && inside(real, root);
      free(link);
      free(real);
      if (!ok) continue;
    }
    if (n == cap) {
      cap = cap ? cap * 2 : 32;
      entry *nv = realloc(v, cap * sizeof(*nv));
      if (!nv) {
        rc = -ENOMEM;
        break;
      }
      v = nv;
    }
    v[n].name = strdup(de->d_name);
    if (!v[n].name) {
      rc = -ENOMEM;
      break;
    }
    v[n].dir = S_ISDIR(st.st_mode);
    v[n].size = (uint64_t)st.st_size;
    v[n].mtime = st.st_mtime;
    n++;
  }
  closedir(d);
  if (rc) {
    for (size_t i = 0; i < n; i++) free(v[i].name);
    free(v);
    return rc;
  }
  if (n > 1) qsort(v, n, sizeof(*v), entry_cmp); /* an empty directory has v == NULL */
  *out = v;
  *count = n;
  return 0;
}

/* One entry's row; i counts from 0 (odd and even rows alternate). */
static void listing_row(strbuf_t *b, const entry *e, size_t i) {
  char size[32] = "", mtime[32];
  struct tm tm;
  localtime_r(&e->mtime, &tm);
  strftime(mtime, sizeof(mtime), "%Y-%m-%d %H:%M", &tm);
  const char *encoding = NULL;
  const char *type = e->dir ? NULL : type_and_encoding(e->name, &encoding);
  if (!e->dir) format_size(e->size, size, sizeof(size));
  strbuf_adds(b, i % 2 ? "<tr class=\"even\">\n    <td><a href=\"" : "<tr class=\"odd\">\n    <td><a href=\"");
  add_quoted(b, e->name);
  if (e->dir) strbuf_adds(b, "/");
  strbuf_adds(b, "\">");
  add_escaped(b, e->name);
  if (e->dir) strbuf_adds(b, "/");
  strbuf_adds(b, "</a></td>\n    <td>");
  strbuf_adds(b, size);
  strbuf_adds(b, "</td>\n    <td>");
  strbuf_adds(b, mtime);
  strbuf_adds(b, "</td>\n    <td>");
  if (e->dir) {
    strbuf_adds(b, "[Directory]");
  } else {
    strbuf_adds(b, "[");
    strbuf_adds(b, type);
    strbuf_adds(b, "]");
  }
  strbuf_adds(b, "</td>\n    <td>");
  if (encoding) {
    strbuf_adds(b, "[");
    strbuf_adds(b, encoding);
    strbuf_adds(b, "]");
  }
  strbuf_adds(b, "</td>\n</tr>\n");
}

/* A directory listing: the directory is read and sorted on libuv's thread
 * pool (a job's log directory may hold 100,000 files, each stat'ed), then
 * the page is written LISTING_ROWS rows at a time as the client takes it,
 * so neither the loop nor memory holds the whole page. */
#define LISTING_ROWS 512

typedef struct dir_listing {
  uv_work_t work;
  http_req_t *r;
  char *dir, *root, *url_path;
  entry *v;
  size_t n, next; /* entries, and the next to write */
  int rc;
  http_stream_t *st;
} dir_listing;

static void dl_free(dir_listing *l) {
  for (size_t i = 0; i < l->n; i++) free(l->v[i].name);
  free(l->v);
  free(l->dir);
  free(l->root);
  free(l->url_path);
  free(l);
}

static void dl_work(uv_work_t *w) {
  dir_listing *l = w->data;
  l->rc = read_entries(l->dir, l->root, &l->v, &l->n);
}

/* The rows from l->next, at most LISTING_ROWS, and the foot after the last. */
static void dl_rows(dir_listing *l, strbuf_t *b) {
  size_t end = l->n - l->next > LISTING_ROWS ? l->next + LISTING_ROWS : l->n;
  for (; l->next < end; l->next++) listing_row(b, &l->v[l->next], l->next);
  if (l->next == l->n) strbuf_adds(b, listing_foot);
}

static void dl_more(void *ud) {
  dir_listing *l = ud;
  if (l->next == l->n) {
    http_stream_end(l->st);
    return;
  }
  strbuf_t b = {0};
  dl_rows(l, &b);
  if (b.failed || http_stream_write(l->st, b.p, b.len)) http_stream_fail(l->st);
  strbuf_release(&b);
}

static void dl_gone(void *ud) { dl_free(ud); }

static void dl_head(dir_listing *l, strbuf_t *b) {
  strbuf_t title = {0};
  strbuf_adds(&title, "Directory listing for ");
  add_escaped(&title, l->url_path);
  if (title.failed) b->failed = 1;
  else strbuf_addf(b, listing_head, title.p, title.p);
  strbuf_release(&title);
}

static void dl_done(uv_work_t *w, int status) {
  dir_listing *l = w->data;
  http_req_t *r = l->r;
  if (status || l->rc) {
    if (l->rc == -EACCES) error_page(r, 403, "Forbidden Resource", "Sorry, resource is forbidden.");
    else not_found(r);
    dl_free(l);
    return;
  }
  strbuf_t b = {0};
  dl_head(l, &b);
  /* One reply, with its length, when it is short, and for HEAD: a streamed
   * reply to HEAD ends with a stray last chunk (libmicrohttpd 0.9.75). */
  if (l->n <= LISTING_ROWS || r->is_head) {
    while (l->next < l->n && !b.failed) dl_rows(l, &b);
    if (l->n == 0) dl_rows(l, &b);
    if (b.failed) http_reply(r, 500, NULL, NULL, 0);
    else http_reply(r, 200, "text/html; charset=utf-8", b.p, b.len);
    strbuf_release(&b);
    dl_free(l);
    return;
  }
  if (b.failed) {
    strbuf_release(&b);
    http_reply(r, 500, NULL, NULL, 0);
    dl_free(l);
    return;
  }
  /* NULL: it could not start, and dl_gone has freed l. */
  http_stream_t *st = http_reply_pull(r, 200, "text/html; charset=utf-8", dl_more, dl_gone, l);
  if (st) {
    l->st = st;
    if (http_stream_write(st, b.p, b.len)) http_stream_fail(st);
  }
  strbuf_release(&b);
}

static void listing(http_req_t *r, const char *dir, const char *root, const char *url_path) {
  dir_listing *l = calloc(1, sizeof(*l));
  if (!l || !(l->dir = strdup(dir)) || !(l->root = strdup(root)) ||
      !(l->url_path = strdup(url_path))) {
    if (l) dl_free(l);
    http_reply(r, 500, NULL, NULL, 0);
    return;
  }
  l->r = r;
  l->work.data = l;
  if (!r->srv || uv_queue_work(r->srv->loop, &l->work, dl_work, dl_done)) {
    dl_work(&l->work); /* no pool to be had: read it here */
    dl_done(&l->work, 0);
  }
}

/* ---- the tree ---- */

/* Joins root and the clean segments of rel; NULL for a ".." segment, which
 * Twisted refuses (InsecurePath) before touching the file system. */
static char *join_clean(const char *root, const char *rel) {
  strbuf_t b = {0};
  strbuf_adds(&b, root);
  for (const char *p = rel; *p;) {
    while (*p == '/') p++;
    size_t n = strcspn(p, "/");
    if (n == 2 && p[0] == '.' && p[1] == '.') {
      strbuf_release(&b);
      return NULL;
    }
    if (n && !(n == 1 && p[0] == '.')) {
      strbuf_adds(&b, "/");
      strbuf_add(&b, p, n);
    }
    p += n;
  }
  if (b.failed) {
    strbuf_release(&b);
    return NULL;
  }
  return b.p;
}

void http_serve_tree(http_req_t *r, const char *root_dir, const char *rel_path,
                     const char *url_path) {
  if (!rel_path) rel_path = "";
  if (!url_path || !*url_path) url_path = rel_path;
  size_t ulen = strlen(url_path);
  bool slash = ulen > 0 && url_path[ulen - 1] == '/';
  char *root = realpath(root_dir, NULL);
  char *joined = root ? join_clean(root, rel_path) : NULL;
  char *real = joined ? realpath(joined, NULL) : NULL;
  struct stat st;
  if (!real || !inside(real, root) || stat(real, &st)) {
    not_found(r);
  } else if (S_ISDIR(st.st_mode)) {
    if (slash) listing(r, real, root, url_path);
    else redirect_slash(r, url_path);
  } else if (S_ISREG(st.st_mode) && !slash) {
    const char *base = strrchr(joined, '/'); /* the name asked for, not a link's target */
    serve_file(r, real, base ? base + 1 : joined);
  } else {
    not_found(r); /* a file asked for as a directory, or a fifo, device... */
  }
  free(root);
  free(joined);
  free(real);
}
