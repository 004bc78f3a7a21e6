/* store/pyenv.c: requirements normalised into one key, interpreters looked
 * for where installed, what an archive carries and what an upload writes
 * into it, and the per-version record. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#include "error.h"
#include "fsutil.h"
#include "store/pyenv.h"

static char *norm(const char *text, int *rc) {
  char *out = NULL, err[256] = "";
  *rc = pyenv_normalize(text, strlen(text), &out, err, sizeof(err));
  return out;
}

static void test_normalize(void **state) {
  (void)state;
  int rc;
  char *a = norm("# deps\nb==2  # pinned\r\n\n  a>=1\nb==2\nc @ https://x/c.whl#sha=1\n", &rc);
  assert_int_equal(rc, 0);
  assert_string_equal(a, "a>=1\nb==2\nc @ https://x/c.whl#sha=1\n");
  char *b = norm("a>=1\nc @ https://x/c.whl#sha=1\nb==2", &rc);
  assert_string_equal(a, b);
  free(a);
  free(b);
  assert_null(norm("a\n--index-url http://evil/\n", &rc));
  assert_int_equal(rc, SPD_EBADPARAM);
  assert_null(norm("-r other.txt", &rc));
  a = norm("# nothing\n\n", &rc);
  assert_string_equal(a, "");
  free(a);
}

static void test_key(void **state) {
  (void)state;
  char k1[PYENV_KEY_LEN + 1], k2[PYENV_KEY_LEN + 1], k3[PYENV_KEY_LEN + 1];
  pyenv_key("/usr/bin/python3.11", "a==1\n", k1);
  pyenv_key("/usr/bin/python3.11", "a==1\n", k2);
  pyenv_key("/usr/bin/python3.12", "a==1\n", k3);
  assert_int_equal(strlen(k1), PYENV_KEY_LEN);
  assert_string_equal(k1, k2);
  assert_string_not_equal(k1, k3);
  pyenv_key("/usr/bin/python3.11", "a==2\n", k2);
  assert_string_not_equal(k1, k2);
}

static void test_interpreter(void **state) {
  (void)state;
  char *path = NULL, err[256] = "";
  if (access("/usr/bin/python3", X_OK)) skip();
  assert_int_equal(pyenv_interpreter("/usr/bin/python3", NULL, &path, err, sizeof(err)), 0);
  assert_non_null(strstr(path, "/python3"));
  free(path);
  assert_int_equal(pyenv_interpreter("/usr/bin/python3", "3", &path, err, sizeof(err)), 0);
  free(path);
  /* A full version (pyenv's .python-version) asks for its minor version. */
  char *real = realpath("/usr/bin/python3", NULL), full[64];
  const char *base = strrchr(real, '/') + 1; /* python3.X */
  snprintf(full, sizeof(full), "%s.99", base + strlen("python"));
  assert_int_equal(pyenv_interpreter("/usr/bin/python3", full, &path, err, sizeof(err)), 0);
  assert_string_equal(path, real);
  free(path);
  free(real);
  assert_int_equal(pyenv_interpreter("/usr/bin/python3", "1.5", &path, err, sizeof(err)),
                   SPD_EBADPARAM);
  assert_non_null(strstr(err, "no installed Python matches python = 1.5"));
  assert_int_equal(pyenv_interpreter("/usr/bin/python3", "3.x", &path, err, sizeof(err)),
                   SPD_EBADPARAM);
  assert_int_equal(pyenv_interpreter("/usr/bin/python3", "../../bin/sh", &path, err,
                                     sizeof(err)),
                   SPD_EBADPARAM);
}

/* A zip in memory with the given members (name, text, ..., NULL). */
static void *zip_of(size_t *len, ...) {
  char path[] = "/tmp/pyenv-test-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  unlink(path);
  zip_t *za = zip_open(path, ZIP_CREATE, NULL);
  va_list ap;
  va_start(ap, len);
  for (const char *name; (name = va_arg(ap, const char *));) {
    const char *text = va_arg(ap, const char *);
    zip_file_add(za, name, zip_source_buffer(za, text, strlen(text), 0), 0);
  }
  va_end(ap);
  assert_int_equal(zip_close(za), 0);
  FILE *f = fopen(path, "rb");
  static char buf[65536];
  *len = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  unlink(path);
  void *out = malloc(*len);
  memcpy(out, buf, *len);
  return out;
}

static void test_archive(void **state) {
  (void)state;
  size_t len;
  char *reqs, *py;
  void *egg = zip_of(&len, "EGG-INFO/PKG-INFO", "x", "requirements.txt", "a==1\n", "scrapy.cfg",
                     "[settings]\ndefault = p.settings\n[deploy]\nurl = http://x\npython = 3.11\n",
                     NULL);
  assert_int_equal(pyenv_from_archive(egg, len, &reqs, &py), 0);
  assert_string_equal(reqs, "a==1\n");
  assert_string_equal(py, "3.11");
  assert_false(pyenv_is_wheel(egg, len));
  free(reqs);
  free(py);
  /* An upload's fields replace what the archive says. */
  void *out;
  size_t outlen;
  assert_int_equal(pyenv_embed(egg, len, "b==2", "3", &out, &outlen), 0);
  assert_int_equal(pyenv_from_archive(out, outlen, &reqs, &py), 0);
  assert_string_equal(reqs, "b==2");
  assert_string_equal(py, "3");
  free(reqs);
  free(py);
  free(out);
  free(egg);
  void *whl = zip_of(&len, "p/__init__.py", "", "p-1.0.dist-info/METADATA",
                     "Name: p\nVersion: 1.0\nRequires-Dist: a (>=1)\nRequires-Dist: b; "
                     "extra == 'x'\nRequires-Dist: c==2\n\nlong description\nRequires-Dist: no\n",
                     NULL);
  assert_true(pyenv_is_wheel(whl, len));
  assert_int_equal(pyenv_from_archive(whl, len, &reqs, &py), 0);
  assert_string_equal(reqs, "a (>=1)\nc==2\n");
  assert_null(py);
  free(reqs);
  free(whl);
  assert_int_equal(pyenv_embed("not a zip", 9, "a", NULL, &out, &outlen), SPD_EBADEGG);
}

static void test_sidecar(void **state) {
  (void)state;
  char dir[] = "/tmp/pyenv-side-XXXXXX", egg[256], key[PYENV_KEY_LEN + 1], *py, *reqs;
  assert_non_null(mkdtemp(dir));
  snprintf(egg, sizeof(egg), "%s/p/1.egg", dir);
  char pdir[256];
  snprintf(pdir, sizeof(pdir), "%s/p", dir);
  fs_mkdirs(pdir, 0755);
  assert_int_equal(pyenv_sidecar_read(egg, key, NULL, NULL), -ENOENT);
  assert_int_equal(pyenv_for_egg(dir, egg, &py, key), 0);
  assert_null(py);
  assert_int_equal(pyenv_sidecar_write(egg, "0123456789abcdef", "/usr/bin/python3", "a\n"), 0);
  assert_int_equal(pyenv_sidecar_read(egg, key, &py, &reqs), 0);
  assert_string_equal(key, "0123456789abcdef");
  assert_string_equal(py, "/usr/bin/python3");
  assert_string_equal(reqs, "a\n");
  free(py);
  free(reqs);
  assert_int_equal(pyenv_for_egg(dir, egg, &py, key), SPD_ENOFILE);
  char **keys;
  size_t n;
  assert_int_equal(pyenv_keys_in_use(dir, &keys, &n), 0);
  assert_int_equal(n, 1);
  assert_string_equal(keys[0], "0123456789abcdef");
  free(keys[0]);
  free(keys);
  fs_rmtree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_normalize),   cmocka_unit_test(test_key),
      cmocka_unit_test(test_interpreter), cmocka_unit_test(test_archive),
      cmocka_unit_test(test_sidecar),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
