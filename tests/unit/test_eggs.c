#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include "error.h"
#include "store/eggs.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

struct fx {
  char root[64];
  char *eggs; /* root/eggs (not created: eggs_stage must create it) */
};

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *f) {
  return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static int setup(void **state) {
  struct fx *f = calloc(1, sizeof(*f));
  strcpy(f->root, "/tmp/spiderd-eggs-XXXXXX");
  if (!mkdtemp(f->root)) return -1;
  if (asprintf(&f->eggs, "%s/data/eggs", f->root) < 0) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;
  nftw(f->root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
  free(f->eggs);
  free(f);
  return 0;
}

/* A real ZIP holding one file whose content is `content`, built with libzip
 * through a temporary file. */
static void make_zip(const struct fx *f, const char *content, char **data, size_t *len) {
  char path[128];
  int err = 0;
  snprintf(path, sizeof(path), "%s/build.zip", f->root);
  zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &err);
  assert_non_null(za);
  zip_source_t *src = zip_source_buffer(za, content, strlen(content), 0);
  assert_non_null(src);
  assert_true(zip_file_add(za, "EGG-INFO/PKG-INFO", src, ZIP_FL_OVERWRITE) >= 0);
  assert_int_equal(zip_close(za), 0);

  FILE *fp = fopen(path, "rb");
  assert_non_null(fp);
  fseek(fp, 0, SEEK_END);
  *len = (size_t)ftell(fp);
  rewind(fp);
  *data = malloc(*len);
  assert_int_equal(fread(*data, 1, *len, fp), *len);
  fclose(fp);
  unlink(path);
}

static char *slurp(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  *len = (size_t)ftell(fp);
  rewind(fp);
  char *d = malloc(*len + 1);
  assert_int_equal(fread(d, 1, *len, fp), *len);
  fclose(fp);
  return d;
}

static int exists(const char *fmt, const char *a, const char *b) {
  char p[512];
  struct stat st;
  snprintf(p, sizeof(p), fmt, a, b);
  return stat(p, &st) == 0;
}

/* Stages and commits a small egg as project/version. */
static void add(const struct fx *f, const char *project, const char *version) {
  char *zip, *tmp = NULL, err[256];
  size_t len;
  make_zip(f, version, &zip, &len);
  assert_int_equal(eggs_stage(f->eggs, zip, len, &tmp, err, sizeof(err)), 0);
  assert_int_equal(eggs_commit(f->eggs, project, version, tmp, NULL), 0);
  free(tmp);
  free(zip);
}

static void assert_strv(char **v, size_t n, const char **want, size_t nwant) {
  if (n != nwant) fail_msg("got %zu entries, want %zu", n, nwant);
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i], want[i]) != 0) fail_msg("entry %zu: '%s', want '%s'", i, v[i], want[i]);
}

static void test_stage_refuses_non_zip(void **state) {
  struct fx *f = *state;
  const char *bodies[] = {"", "not a zip", "PK\x03\x04 truncated"};
  for (size_t i = 0; i < N_ELEMS(bodies); i++) {
    char err[256] = "", *tmp = (char *)"sentinel";
    int rc = eggs_stage(f->eggs, bodies[i], strlen(bodies[i]), &tmp, err, sizeof(err));
    assert_int_equal(rc, SPD_EBADEGG);
    assert_null(tmp);
    assert_string_equal(err, "egg is not a ZIP file (if using curl, use egg=@path not egg=path)");
  }
  char *tmp = NULL;
  assert_int_equal(eggs_stage(f->eggs, NULL, 0, &tmp, NULL, 0), SPD_EBADEGG);

  /* A ZIP cut short loses its central directory. */
  char *zip;
  size_t len;
  make_zip(f, "hello", &zip, &len);
  assert_int_equal(eggs_stage(f->eggs, zip, len / 2, &tmp, NULL, 0), SPD_EBADEGG);
  free(zip);
  /* Nothing was created for a refused body. */
  assert_false(exists("%s%s", f->eggs, ""));
}

/* Python's zipfile.is_zipfile, which Scrapyd asks, accepts an archive with
 * no members: so do we. */
static void test_stage_accepts_empty_archive(void **state) {
  struct fx *f = *state;
  static const char eocd[22] = "PK\x05\x06";
  char *tmp = NULL;
  assert_int_equal(eggs_stage(f->eggs, eocd, sizeof(eocd), &tmp, NULL, 0), 0);
  eggs_discard(tmp);
  free(tmp);
}

static void test_stage_and_commit(void **state) {
  struct fx *f = *state;
  char *zip, *tmp = NULL, *final = NULL, err[256];
  size_t len, got_len;
  struct stat st;

  make_zip(f, "first", &zip, &len);
  assert_int_equal(eggs_stage(f->eggs, zip, len, &tmp, err, sizeof(err)), 0);
  assert_non_null(tmp);
  /* Staged under eggs_dir/.staging, parents created, readable by others. */
  char staging[512];
  snprintf(staging, sizeof(staging), "%s/.staging/", f->eggs);
  assert_memory_equal(tmp, staging, strlen(staging));
  assert_int_equal(stat(staging, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0755); /* umask 022, set in main */
  assert_int_equal(stat(tmp, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0644);
  char *got = slurp(tmp, &got_len);
  assert_int_equal(got_len, len);
  assert_memory_equal(got, zip, len);
  free(got);
  /* A staging file is not a project or version. */
  char **v;
  size_t n;
  assert_int_equal(eggs_projects(f->eggs, &v, &n), 0);
  assert_int_equal(n, 0);
  strv_free(v, n);

  assert_int_equal(eggs_commit(f->eggs, "proj", "1.0", tmp, &final), 0);
  char want[512];
  snprintf(want, sizeof(want), "%s/proj/1_0.egg", f->eggs);
  assert_string_equal(final, want);
  assert_int_not_equal(stat(tmp, &st), 0);
  got = slurp(final, &got_len);
  assert_memory_equal(got, zip, len);
  free(got);
  free(tmp);
  free(final);
  free(zip);

  /* "1_0" sanitizes to the same stem: it overwrites. */
  make_zip(f, "second, longer content", &zip, &len);
  assert_int_equal(eggs_stage(f->eggs, zip, len, &tmp, err, sizeof(err)), 0);
  assert_int_equal(eggs_commit(f->eggs, "proj", "1_0", tmp, NULL), 0);
  got = slurp(want, &got_len);
  assert_int_equal(got_len, len);
  assert_memory_equal(got, zip, len);
  free(got);
  free(tmp);
  free(zip);
  assert_int_equal(eggs_versions(f->eggs, "proj", &v, &n), 0);
  const char *w1[] = {"1_0"};
  assert_strv(v, n, w1, 1);
  strv_free(v, n);
}

static void test_commit_refuses_bad_names(void **state) {
  struct fx *f = *state;
  char *zip, *tmp = NULL, *final = (char *)"sentinel";
  size_t len;
  make_zip(f, "x", &zip, &len);
  assert_int_equal(eggs_stage(f->eggs, zip, len, &tmp, NULL, 0), 0);
  const char *bad[] = {"../p", "..", ".", "a/b", "", ".staging", ".hidden", "a\\b"};
  for (size_t i = 0; i < N_ELEMS(bad); i++)
    assert_int_equal(eggs_commit(f->eggs, bad[i], "1", tmp, &final), SPD_ETRAVERSAL);
  assert_null(final);
  assert_int_equal(eggs_commit(f->eggs, NULL, "1", tmp, NULL), SPD_ETRAVERSAL);
  assert_int_equal(eggs_commit(f->eggs, "p", "", tmp, NULL), SPD_EBADPARAM);
  /* The version is sanitized, so it cannot traverse either. */
  assert_int_equal(eggs_commit(f->eggs, "p", "../../x", tmp, &final), 0);
  char want[512];
  snprintf(want, sizeof(want), "%s/p/______x.egg", f->eggs);
  assert_string_equal(final, want);
  free(final);
  free(tmp);
  free(zip);
}

static void test_discard(void **state) {
  struct fx *f = *state;
  char *zip, *tmp = NULL;
  size_t len;
  struct stat st;
  make_zip(f, "x", &zip, &len);
  assert_int_equal(eggs_stage(f->eggs, zip, len, &tmp, NULL, 0), 0);
  assert_int_equal(stat(tmp, &st), 0);
  eggs_discard(tmp);
  assert_int_not_equal(stat(tmp, &st), 0);
  eggs_discard(NULL);
  free(tmp);
  free(zip);
}

static void test_clean_staging(void **state) {
  struct fx *f = *state;
  char *zip, *a = NULL, *b = NULL;
  size_t len;
  struct stat st;
  assert_int_equal(eggs_clean_staging(f->eggs), 0); /* nothing staged yet */
  make_zip(f, "x", &zip, &len);
  assert_int_equal(eggs_stage(f->eggs, zip, len, &a, NULL, 0), 0);
  assert_int_equal(eggs_stage(f->eggs, zip, len, &b, NULL, 0), 0);
  add(f, "kept", "1.0");
  assert_int_equal(eggs_clean_staging(f->eggs), 2);
  assert_int_not_equal(stat(a, &st), 0);
  assert_int_not_equal(stat(b, &st), 0);
  char *path = NULL;
  assert_int_equal(eggs_path(f->eggs, "kept", NULL, &path), 0); /* versions untouched */
  free(path);
  free(a);
  free(b);
  free(zip);
}

static void test_versions_order(void **state) {
  struct fx *f = *state;
  const char *in[] = {"10.0", "1.5", "2.0", "2.0rc1", "abc"};
  for (size_t i = 0; i < N_ELEMS(in); i++) add(f, "p", in[i]);
  /* Not eggs: ignored by the listing. */
  char p[512];
  snprintf(p, sizeof(p), "%s/p/notes.txt", f->eggs);
  fclose(fopen(p, "w"));
  snprintf(p, sizeof(p), "%s/p/.9_9.egg", f->eggs);
  fclose(fopen(p, "w"));
  snprintf(p, sizeof(p), "%s/p/sub.egg", f->eggs);
  mkdir(p, 0755);

  char **v;
  size_t n;
  assert_int_equal(eggs_versions(f->eggs, "p", &v, &n), 0);
  const char *want[] = {"abc", "1_5", "2_0rc1", "2_0", "10_0"};
  assert_strv(v, n, want, N_ELEMS(want));
  strv_free(v, n);

  assert_int_equal(eggs_versions(f->eggs, "nosuch", &v, &n), 0);
  assert_int_equal(n, 0);
  strv_free(v, n);
  assert_int_equal(eggs_versions(f->eggs, "../p", &v, &n), SPD_ETRAVERSAL);
  assert_int_equal(n, 0);

  /* scrapyd-deploy's default versions are timestamps: numeric order. */
  const char *ts[] = {"1700000000", "999999999", "1699999999"};
  for (size_t i = 0; i < N_ELEMS(ts); i++) add(f, "t", ts[i]);
  assert_int_equal(eggs_versions(f->eggs, "t", &v, &n), 0);
  const char *wts[] = {"999999999", "1699999999", "1700000000"};
  assert_strv(v, n, wts, N_ELEMS(wts));
  strv_free(v, n);
}

static void test_path(void **state) {
  struct fx *f = *state;
  char *path = NULL, want[512];
  add(f, "p", "2.0rc1");
  add(f, "p", "10.0");
  add(f, "p", "2.0");

  assert_int_equal(eggs_path(f->eggs, "p", NULL, &path), 0);
  snprintf(want, sizeof(want), "%s/p/10_0.egg", f->eggs);
  assert_string_equal(path, want);
  free(path);

  snprintf(want, sizeof(want), "%s/p/2_0rc1.egg", f->eggs);
  assert_int_equal(eggs_path(f->eggs, "p", "2.0rc1", &path), 0);
  assert_string_equal(path, want);
  free(path);
  assert_int_equal(eggs_path(f->eggs, "p", "2_0rc1", &path), 0);
  assert_string_equal(path, want);
  free(path);

  path = (char *)"sentinel";
  assert_int_equal(eggs_path(f->eggs, "p", "9.9", &path), -ENOENT);
  assert_null(path);
  assert_int_equal(eggs_path(f->eggs, "p", "", &path), -ENOENT);
  assert_int_equal(eggs_path(f->eggs, "nosuch", NULL, &path), -ENOENT);
  assert_int_equal(eggs_path(f->eggs, "nosuch", "1", &path), -ENOENT);
  assert_int_equal(eggs_path(f->eggs, "../p", NULL, &path), SPD_ETRAVERSAL);
  assert_null(path);
}

static void test_projects(void **state) {
  struct fx *f = *state;
  char **v;
  size_t n;
  /* A missing eggs_dir is an empty list. */
  assert_int_equal(eggs_projects(f->eggs, &v, &n), 0);
  assert_int_equal(n, 0);
  strv_free(v, n);

  add(f, "zeta", "1");
  add(f, "alpha", "1");
  add(f, "Mid", "1");
  char p[512];
  snprintf(p, sizeof(p), "%s/empty", f->eggs);
  mkdir(p, 0755);
  snprintf(p, sizeof(p), "%s/.hidden", f->eggs);
  mkdir(p, 0755);
  snprintf(p, sizeof(p), "%s/.hidden/1.egg", f->eggs);
  fclose(fopen(p, "w"));
  snprintf(p, sizeof(p), "%s/file.egg", f->eggs);
  fclose(fopen(p, "w"));

  assert_int_equal(eggs_projects(f->eggs, &v, &n), 0);
  const char *want[] = {"Mid", "alpha", "zeta"};
  assert_strv(v, n, want, N_ELEMS(want));
  strv_free(v, n);
}

static void test_delete_version(void **state) {
  struct fx *f = *state;
  char **v;
  size_t n;
  add(f, "p", "1.0");
  add(f, "p", "2.0");

  assert_int_equal(eggs_delete_version(f->eggs, "p", "3.0"), -ENOENT);
  assert_int_equal(eggs_delete_version(f->eggs, "nosuch", "1.0"), -ENOENT);
  assert_int_equal(eggs_delete_version(f->eggs, "p", NULL), -ENOENT);
  assert_int_equal(eggs_delete_version(f->eggs, "../p", "1.0"), SPD_ETRAVERSAL);

  assert_int_equal(eggs_delete_version(f->eggs, "p", "2.0"), 0); /* raw */
  assert_int_equal(eggs_versions(f->eggs, "p", &v, &n), 0);
  const char *want[] = {"1_0"};
  assert_strv(v, n, want, 1);
  strv_free(v, n);
  assert_true(exists("%s/%s", f->eggs, "p"));

  /* The last version takes the directory with it, whatever else is in it. */
  char p[512];
  snprintf(p, sizeof(p), "%s/p/leftover.txt", f->eggs);
  fclose(fopen(p, "w"));
  assert_int_equal(eggs_delete_version(f->eggs, "p", "1_0"), 0); /* sanitized */
  assert_false(exists("%s/%s", f->eggs, "p"));
  assert_int_equal(eggs_projects(f->eggs, &v, &n), 0);
  assert_int_equal(n, 0);
  strv_free(v, n);
  assert_int_equal(eggs_delete_version(f->eggs, "p", "1_0"), -ENOENT);
}

static void test_delete_project(void **state) {
  struct fx *f = *state;
  add(f, "p", "1.0");
  add(f, "p", "2.0");
  add(f, "q", "1.0");
  assert_int_equal(eggs_delete_project(f->eggs, "nosuch"), -ENOENT);
  assert_int_equal(eggs_delete_project(f->eggs, ".."), SPD_ETRAVERSAL);
  assert_int_equal(eggs_delete_project(f->eggs, ".staging"), SPD_ETRAVERSAL);
  assert_int_equal(eggs_delete_project(f->eggs, "p"), 0);
  assert_false(exists("%s/%s", f->eggs, "p"));
  assert_true(exists("%s/%s", f->eggs, "q"));
  assert_int_equal(eggs_delete_project(f->eggs, "p"), -ENOENT);
  char *path;
  assert_int_equal(eggs_path(f->eggs, "p", NULL, &path), -ENOENT);
}

static void test_strv_free_null(void **state) {
  char **none, *p;
  size_t n;
  /* An unset eggs_dir must not turn into paths under "/". */
  assert_int_equal(eggs_versions("", "p", &none, &n), -EINVAL);
  assert_int_equal(eggs_projects(NULL, &none, &n), -EINVAL);
  assert_int_equal(eggs_path("", "p", NULL, &p), -EINVAL);
  assert_int_equal(eggs_stage("", "PK", 2, &p, NULL, 0), -EINVAL);
  strv_free(NULL, 0);
  char **v = malloc(2 * sizeof(*v));
  v[0] = strdup("a");
  v[1] = strdup("b");
  strv_free(v, 2);
}

int main(void) {
  umask(022);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_stage_refuses_non_zip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stage_accepts_empty_archive, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stage_and_commit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_commit_refuses_bad_names, setup, teardown),
      cmocka_unit_test_setup_teardown(test_discard, setup, teardown),
      cmocka_unit_test_setup_teardown(test_clean_staging, setup, teardown),
      cmocka_unit_test_setup_teardown(test_versions_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_path, setup, teardown),
      cmocka_unit_test_setup_teardown(test_projects, setup, teardown),
      cmocka_unit_test_setup_teardown(test_delete_version, setup, teardown),
      cmocka_unit_test_setup_teardown(test_delete_project, setup, teardown),
      cmocka_unit_test(test_strv_free_null),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
