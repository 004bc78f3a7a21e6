/* http/asset.c's pure parts: content types, path checks, Accept-Encoding
 * and If-None-Match, and the lookup that must not leave its directory, by
 * openat2 and by the segment walk used where openat2 is missing. Serving
 * itself runs against a real daemon (tests/integration/test_console_serve.py). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "http/asset.c"

static void test_types(void **state) {
  (void)state;
  assert_string_equal(http_asset_type("index.html"), "text/html; charset=utf-8");
  assert_string_equal(http_asset_type("assets/app-3f9a1c.js"), "text/javascript; charset=utf-8");
  assert_string_equal(http_asset_type("a/b.MJS"), "text/javascript; charset=utf-8");
  assert_string_equal(http_asset_type("assets/app-77aa.css"), "text/css; charset=utf-8");
  assert_string_equal(http_asset_type("openapi.json"), "application/json");
  assert_string_equal(http_asset_type("assets/app.js.map"), "application/json");
  assert_string_equal(http_asset_type("logo.svg"), "image/svg+xml");
  assert_string_equal(http_asset_type("favicon-32x32.png"), "image/png");
  assert_string_equal(http_asset_type("favicon.ico"), "image/x-icon");
  assert_string_equal(http_asset_type("assets/inter.woff2"), "font/woff2");
  assert_string_equal(http_asset_type("robots.txt"), "text/plain; charset=utf-8");
  assert_string_equal(http_asset_type("queues.md"), "text/markdown; charset=utf-8");
  /* unknown, none, a dot file, a dot in a directory's name only */
  assert_string_equal(http_asset_type("x.exe"), "application/octet-stream");
  assert_string_equal(http_asset_type("LICENSE"), "application/octet-stream");
  assert_string_equal(http_asset_type(".htaccess"), "application/octet-stream");
  assert_string_equal(http_asset_type("v1.2/README"), "application/octet-stream");
  assert_string_equal(http_asset_type("html"), "application/octet-stream");
}

static void test_path_ok(void **state) {
  (void)state;
  const char *ok[] = {"", "index.html", "assets/app.js", "a//b", "./a", "a/./b", "a/", "..a",
                      "a..", "a/...", "x..y/z", "%2e%2e", "é.html"};
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
    assert_int_equal(http_asset_path_ok(ok[i]), 0);
  const char *bad[] = {"..", "../x", "a/..", "a/../b", "a//../b", "/..", "../", "a\\b", "..\\x",
                       "a\tb", "a\nb", "a\x7f", "\x01"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(http_asset_path_ok(bad[i]), -EINVAL);
  assert_int_equal(http_asset_path_ok(NULL), -EINVAL);
}

static void test_clean_rel(void **state) {
  (void)state;
  const char *cases[][2] = {{"", ""},       {"a", "a"},         {"/a", "a"},     {"a//b/", "a/b"},
                            {"./a/./b", "a/b"}, {".", ""},      {"//etc/passwd", "etc/passwd"},
                            {"a/.b", "a/.b"}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char *c = clean_rel(cases[i][0]);
    assert_non_null(c);
    assert_string_equal(c, cases[i][1]);
    free(c);
  }
}

static void test_path_prefix(void **state) {
  (void)state;
  char out[64];
  const char *good[][2] = {{NULL, ""}, {"", ""}, {"/", ""}, {"//", ""}, {"/a", "/a"},
                           {"/a/", "/a"}, {"/spiderd/x", "/spiderd/x"}, {"/a%20b", "/a%20b"},
                           {"/a-b._~!$+,;=:@c", "/a-b._~!$+,;=:@c"}, {"/..a/b..", "/..a/b.."}};
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
    memset(out, 'x', sizeof(out));
    if (http_path_prefix(good[i][0], out, sizeof(out)) || strcmp(out, good[i][1]))
      fail_msg("%s: got %s", good[i][0] ? good[i][0] : "(null)", out);
  }
  const char *bad[] = {"a", "//evil.example", "/a//b", "/a/./b", "/a/..", "/.", "/a b",
                       "/a\"b", "/a<b", "/a>b", "/a'b", "/a&b", "/a\\b", "/a%2", "/a%zz",
                       "/caf\xc3\xa9", "/a\tb", "/a?b", "/a#b", "/a(b)",
                       "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    memset(out, 'x', sizeof(out));
    if (http_path_prefix(bad[i], out, sizeof(out)) != -EINVAL || out[0])
      fail_msg("should refuse %s", bad[i]);
  }
}

static void test_accepts_gzip(void **state) {
  (void)state;
  const char *yes[] = {"gzip", "GZIP", "gzip, deflate, br", "br;q=1.0, gzip;q=0.8", "deflate,gzip",
                       "x-gzip", "*", "*;q=0.1", "gzip;q=0.001", "gzip ; q=1", "identity, gzip"};
  for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
    if (!http_accepts_gzip(yes[i])) fail_msg("should accept gzip: %s", yes[i]);
  }
  const char *no[] = {NULL, "", "identity", "br", "deflate, br", "gzip;q=0", "gzip;q=0.0",
                      "gzip; q=0.000", "gzip;q=0, *", "*;q=0", "gzipx", "xgzip", "gzip2"};
  for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
    if (http_accepts_gzip(no[i])) fail_msg("should refuse gzip: %s", no[i] ? no[i] : "(none)");
  }
}

static void test_etag_matches(void **state) {
  (void)state;
  const char *e = "\"1a-2b-3c\"";
  assert_true(etag_matches("\"1a-2b-3c\"", e));
  assert_true(etag_matches("W/\"1a-2b-3c\"", e));
  assert_true(etag_matches("\"x\", \"1a-2b-3c\"", e));
  assert_true(etag_matches("\"x\",W/\"1a-2b-3c\" ", e));
  assert_true(etag_matches("*", e));
  assert_true(etag_matches("\"a,b\", \"1a-2b-3c\"", e)); /* a comma inside a tag */
  assert_false(etag_matches(NULL, e));
  assert_false(etag_matches("", e));
  assert_false(etag_matches("\"1a-2b-3c-gz\"", e));
  assert_false(etag_matches("\"1a-2b-3\"", e));
  assert_false(etag_matches("1a-2b-3c", e));
  assert_false(etag_matches("\"1a-2b-3c", e));
}

/* ---- the lookup ---- */

typedef struct tree {
  char base[64]; /* holds root/ and what lies outside it */
  char root[128];
} tree_t;

static void put(const char *dir, const char *rel, const char *text) {
  char path[PATH_MAX * 2];
  snprintf(path, sizeof(path), "%s/%s", dir, rel);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void link_at(const char *dir, const char *rel, const char *target) {
  char path[PATH_MAX * 2];
  snprintf(path, sizeof(path), "%s/%s", dir, rel);
  assert_int_equal(symlink(target, path), 0);
}

static void sub(const char *dir, const char *rel) {
  char path[PATH_MAX * 2];
  snprintf(path, sizeof(path), "%s/%s", dir, rel);
  assert_int_equal(mkdir(path, 0755), 0);
}

static int setup(void **state) {
  tree_t *t = calloc(1, sizeof(*t));
  snprintf(t->base, sizeof(t->base), "/tmp/spiderd-asset-XXXXXX");
  if (!mkdtemp(t->base)) return -1;
  snprintf(t->root, sizeof(t->root), "%s/root", t->base);
  sub(t->base, "root");
  sub(t->base, "out");
  put(t->base, "secret.txt", "secret\n");
  put(t->base, "out/s.txt", "secret\n");
  put(t->root, "index.html", "index\n");
  sub(t->root, "assets");
  put(t->root, "assets/app.js", "app\n");
  link_at(t->root, "alias.html", "index.html");           /* inside, relative */
  link_at(t->root, "assets/up.html", "../index.html");    /* inside, through .. */
  link_at(t->root, "leak.txt", "../secret.txt");          /* outside, relative */
  char abs[PATH_MAX + 16];
  snprintf(abs, sizeof(abs), "%s/secret.txt", t->base);
  link_at(t->root, "abs.txt", abs);                       /* outside, absolute */
  link_at(t->root, "outdir", "../out");                   /* a directory outside */
  link_at(t->root, "dangling.js", "nowhere.js");
  char fifo[PATH_MAX + 16];
  snprintf(fifo, sizeof(fifo), "%s/pipe.js", t->root);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  *state = t;
  return 0;
}

static int teardown(void **state) {
  tree_t *t = *state;
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->base);
  int rc = system(cmd);
  free(t);
  return rc == 0 ? 0 : -1;
}

/* asset_open's answer for rel: the file's first line, or the error. */
static int lookup(const char *root, const char *rel, char *line, size_t n) {
  struct stat st;
  int fd = asset_open(root, rel, &st);
  if (fd < 0) return fd;
  ssize_t got = read(fd, line, n - 1);
  close(fd);
  line[got > 0 ? got : 0] = '\0';
  return 0;
}

static void test_open_beneath(void **state) {
  tree_t *t = *state;
  char line[64];
  assert_int_equal(lookup(t->root, "index.html", line, sizeof(line)), 0);
  assert_string_equal(line, "index\n");
  assert_int_equal(lookup(t->root, "/assets//app.js", line, sizeof(line)), 0);
  assert_string_equal(line, "app\n");
  assert_int_equal(lookup(t->root, "./assets/./app.js", line, sizeof(line)), 0);
  /* symlinks that stay inside are followed */
  assert_int_equal(lookup(t->root, "alias.html", line, sizeof(line)), 0);
  assert_string_equal(line, "index\n");
  assert_int_equal(lookup(t->root, "assets/up.html", line, sizeof(line)), 0);
  assert_string_equal(line, "index\n");
  /* refused */
  assert_int_equal(lookup(t->root, "../secret.txt", line, sizeof(line)), -EINVAL);
  assert_int_equal(lookup(t->root, "assets/../../secret.txt", line, sizeof(line)), -EINVAL);
  assert_int_equal(lookup(t->root, "leak.txt", line, sizeof(line)), -EXDEV);
  assert_int_equal(lookup(t->root, "abs.txt", line, sizeof(line)), -EXDEV);
  assert_int_equal(lookup(t->root, "outdir/s.txt", line, sizeof(line)), -EXDEV);
  /* not files */
  assert_int_equal(lookup(t->root, "", line, sizeof(line)), -EISDIR);
  assert_int_equal(lookup(t->root, "/", line, sizeof(line)), -EISDIR);
  assert_int_equal(lookup(t->root, "assets", line, sizeof(line)), -EISDIR);
  assert_int_equal(lookup(t->root, "nope.js", line, sizeof(line)), -ENOENT);
  assert_int_equal(lookup(t->root, "index.html/x", line, sizeof(line)), -ENOENT);
  assert_int_equal(lookup(t->root, "dangling.js", line, sizeof(line)), -ENOENT);
  assert_int_equal(lookup(t->root, "pipe.js", line, sizeof(line)), -ENOENT); /* and no hang */
  char missing[PATH_MAX + 16];
  snprintf(missing, sizeof(missing), "%s/none", t->base);
  assert_int_equal(lookup(missing, "index.html", line, sizeof(line)), -ENOENT);
  char file_root[PATH_MAX + 16];
  snprintf(file_root, sizeof(file_root), "%s/secret.txt", t->base);
  assert_int_equal(lookup(file_root, "index.html", line, sizeof(line)), -ENOENT);
}

/* walk_open's answer for rel: 0 (the file's first line) or the error. */
static int walk(const char *root, const char *rel, char *line, size_t n) {
  int dir = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  assert_true(dir >= 0);
  int fd = open_walk(dir, rel);
  close(dir);
  if (fd < 0) return fd;
  ssize_t got = read(fd, line, n - 1);
  close(fd);
  line[got > 0 ? got : 0] = '\0';
  return 0;
}

/* Without openat2, no symlink at all is followed. */
static void test_open_walk(void **state) {
  tree_t *t = *state;
  char line[64];
  assert_int_equal(walk(t->root, "index.html", line, sizeof(line)), 0);
  assert_string_equal(line, "index\n");
  assert_int_equal(walk(t->root, "assets/app.js", line, sizeof(line)), 0);
  assert_string_equal(line, "app\n");
  assert_int_equal(walk(t->root, "alias.html", line, sizeof(line)), -ELOOP);
  assert_int_equal(walk(t->root, "leak.txt", line, sizeof(line)), -ELOOP);
  assert_int_equal(walk(t->root, "abs.txt", line, sizeof(line)), -ELOOP);
  assert_int_equal(walk(t->root, "outdir/s.txt", line, sizeof(line)), -ELOOP);
  assert_int_equal(walk(t->root, "nope.js", line, sizeof(line)), -ENOENT);
  assert_int_equal(walk(t->root, "nodir/x.js", line, sizeof(line)), -ENOENT);
  assert_int_equal(walk(t->root, "index.html/x", line, sizeof(line)), -ENOTDIR);
  int fd = -1;
  {
    int dir = open(t->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    fd = open_walk(dir, "pipe.js"); /* O_NONBLOCK: opens at once, no writer needed */
    close(dir);
  }
  assert_true(fd >= 0);
  close(fd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_types),
      cmocka_unit_test(test_path_ok),
      cmocka_unit_test(test_clean_rel),
      cmocka_unit_test(test_accepts_gzip),
      cmocka_unit_test(test_path_prefix),
      cmocka_unit_test(test_etag_matches),
      cmocka_unit_test_setup_teardown(test_open_beneath, setup, teardown),
      cmocka_unit_test_setup_teardown(test_open_walk, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
