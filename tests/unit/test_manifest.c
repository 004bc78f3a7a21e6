/* spiderd.json parsing and validation (core/manifest.c), and the checks and
 * extraction of project archives (store/marchive.c) on archives built here
 * with libarchive's writer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/manifest.h"
#include "error.h"
#include "store/marchive.h"

static char err[512];

static int parse(const char *text, manifest_t *m) {
  err[0] = '\0';
  return manifest_parse(text, strlen(text), m, err, sizeof(err));
}

/* The text must be refused with a message containing want. */
static void refused(const char *text, const char *want) {
  manifest_t m;
  int rc = parse(text, &m);
  if (rc != SPD_EBADEGG || !strstr(err, want))
    fail_msg("%s: rc %d, err '%s', wanted '%s'", text, rc, err, want);
  assert_int_equal(m.n, 0);
  assert_null(m.spiders);
  assert_non_null(strstr(err, "spiderd.json: "));
}

static void test_parse_object(void **state) {
  manifest_t m;
  assert_int_equal(parse("{\"spiders\": {\"zeta\": {\"command\": [\"node\", \"crawl.js\", "
                         "\"--name={spider}\"]}, \"alpha\": {\"command\": [\"sh\", \"a.sh\"]}}}",
                         &m),
                   0);
  assert_int_equal(m.n, 2);
  /* Sorted, as `scrapy list` sorts. */
  assert_string_equal(m.spiders[0].name, "alpha");
  assert_string_equal(m.spiders[1].name, "zeta");
  const manifest_spider_t *z = manifest_find(&m, "zeta");
  assert_non_null(z);
  assert_null(manifest_find(&m, "nosuch"));
  char **argv = manifest_argv(z, "zeta");
  assert_string_equal(argv[0], "node");
  assert_string_equal(argv[1], "crawl.js");
  assert_string_equal(argv[2], "--name=zeta");
  assert_null(argv[3]);
  manifest_argv_free(argv);
  manifest_release(&m);
  assert_int_equal(m.n, 0);
}

static void test_parse_default_command(void **state) {
  manifest_t m;
  assert_int_equal(parse("{\"command\": [\"python3\", \"run.py\", \"{spider}{spider}\"], "
                         "\"spiders\": [\"b\", \"a\"]}",
                         &m),
                   0);
  assert_int_equal(m.n, 2);
  assert_string_equal(m.spiders[0].name, "a");
  char **argv = manifest_argv(&m.spiders[1], "b");
  assert_string_equal(argv[2], "bb");
  manifest_argv_free(argv);
  manifest_release(&m);
  /* The default serves spiders that give no command of their own. */
  assert_int_equal(parse("{\"command\": [\"x\"], \"spiders\": {\"a\": {}, \"b\": {\"command\": "
                         "[\"y\"]}}}",
                         &m),
                   0);
  assert_string_equal(m.spiders[0].command[0], "x");
  assert_string_equal(m.spiders[1].command[0], "y");
  manifest_release(&m);
}

static void test_parse_literal_braces(void **state) {
  manifest_t m;
  /* Only {identifier} is a placeholder: JSON or shell braces stay. */
  assert_int_equal(parse("{\"spiders\": {\"s\": {\"command\": [\"node\", \"-e\", "
                         "\"f({a: 1}); {} ${ x }\"]}}}",
                         &m),
                   0);
  char **argv = manifest_argv(&m.spiders[0], "s");
  assert_string_equal(argv[2], "f({a: 1}); {} ${ x }");
  manifest_argv_free(argv);
  manifest_release(&m);
}

static void test_parse_refusals(void **state) {
  refused("", "not valid JSON");
  refused("{\"spiders\": ", "not valid JSON");
  refused("[]", "must be a JSON object");
  refused("{}", "no \"spiders\"");
  refused("{\"spiders\": {}}", "\"spiders\" is empty");
  refused("{\"spiders\": 3}", "\"spiders\" must be an object");
  refused("{\"spiders\": {\"a\": {\"command\": [\"x\"]}}, \"env\": {}}", "unknown key 'env'");
  refused("{\"spiders\": {\"a\": {\"command\": [\"x\"], \"cwd\": \"/\"}}}",
          "unknown key 'cwd' in spider 'a'");
  refused("{\"spiders\": {\"a\": {\"command\": []}}}", "the command of spider 'a' is empty");
  refused("{\"spiders\": {\"a\": {\"command\": \"sh x\"}}}", "must be an array of strings");
  refused("{\"spiders\": {\"a\": {\"command\": [\"sh\", 3]}}}",
          "entry 1 of the command of spider 'a' is not a string");
  refused("{\"spiders\": {\"a\": {\"command\": [\"\"]}}}", "empty program name");
  refused("{\"spiders\": {\"a\": {\"command\": [\"sh\", \"{job}\"]}}}",
          "unknown placeholder '{job}'");
  refused("{\"spiders\": {\"a\": {}}}", "spider 'a' has no command");
  refused("{\"spiders\": {\"a\": [\"sh\"]}}", "spider 'a' must be an object");
  refused("{\"spiders\": [\"a\"]}", "a top-level \"command\" is needed");
  refused("{\"command\": [\"x\"], \"spiders\": [\"a\", \"a\"]}", "spider 'a' is listed twice");
  refused("{\"command\": [\"x\"], \"spiders\": [1]}", "entry 0 of \"spiders\" is not a string");
  refused("{\"command\": [\"x\"], \"spiders\": [\"../x\"]}", "spider");
  refused("{\"command\": [\"x\"], \"spiders\": [\"\"]}", "must not be empty");
  refused("{\"command\": [], \"spiders\": [\"a\"]}", "the command of the project is empty");
  refused("{\"spiders\": {\"a\": {\"command\": [\"x\"]}}, \"spiders\": {}}", "not valid JSON");
}

static void test_member_names(void **state) {
  assert_int_equal(manifest_member_check("spiderd.json", err, sizeof(err)), 0);
  assert_int_equal(manifest_member_check("./lib/a.js", err, sizeof(err)), 0);
  assert_int_equal(manifest_member_check("dir/", err, sizeof(err)), 0);
  assert_int_equal(manifest_member_check("a..b/c", err, sizeof(err)), 0);
  assert_int_equal(manifest_member_check("../x", err, sizeof(err)), SPD_EBADEGG);
  assert_non_null(strstr(err, "archive member '../x': '..' is not allowed"));
  assert_int_equal(manifest_member_check("a/../../x", err, sizeof(err)), SPD_EBADEGG);
  assert_int_equal(manifest_member_check("a/..", err, sizeof(err)), SPD_EBADEGG);
  assert_int_equal(manifest_member_check("/etc/passwd", err, sizeof(err)), SPD_EBADEGG);
  assert_non_null(strstr(err, "absolute"));
  assert_int_equal(manifest_member_check("a\\..\\x", err, sizeof(err)), SPD_EBADEGG);
  assert_int_equal(manifest_member_check("a\nb", err, sizeof(err)), SPD_EBADEGG);
  assert_int_equal(manifest_member_check("", err, sizeof(err)), SPD_EBADEGG);
  assert_int_equal(manifest_link_check("l", "lib/x", err, sizeof(err)), 0);
  assert_int_equal(manifest_link_check("l", "../x", err, sizeof(err)), SPD_EBADEGG);
  assert_non_null(strstr(err, "may point outside the project"));
  assert_int_equal(manifest_link_check("l", "/etc", err, sizeof(err)), SPD_EBADEGG);
  assert_int_equal(manifest_link_check("l", "a/..", err, sizeof(err)), SPD_EBADEGG);
  assert_int_equal(manifest_link_check("l", "", err, sizeof(err)), SPD_EBADEGG);
}

/* ---- archives ---- */

typedef struct member {
  const char *name;
  const char *data; /* NULL with link NULL: a directory */
  const char *link; /* a symlink's target */
} member_t;

static const char good_manifest[] = "{\"spiders\": {\"s\": {\"command\": [\"sh\", \"s.sh\"]}}}";

/* An archive (zip: format 1, tar.gz: 0) of the members, in memory. */
static void *build(int zip, const member_t *mv, size_t n, size_t *len) {
  size_t cap = 1 << 20;
  void *buf = malloc(cap);
  struct archive *a = archive_write_new();
  if (zip) {
    archive_write_set_format_zip(a);
  } else {
    archive_write_set_format_pax_restricted(a);
    archive_write_add_filter_gzip(a);
  }
  assert_int_equal(archive_write_open_memory(a, buf, cap, len), ARCHIVE_OK);
  for (size_t i = 0; i < n; i++) {
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, mv[i].name);
    if (mv[i].link) {
      archive_entry_set_filetype(e, AE_IFLNK);
      archive_entry_set_symlink(e, mv[i].link);
      archive_entry_set_perm(e, 0777);
    } else if (mv[i].data) {
      archive_entry_set_filetype(e, AE_IFREG);
      archive_entry_set_perm(e, 04755);
      archive_entry_set_size(e, (la_int64_t)strlen(mv[i].data));
    } else {
      archive_entry_set_filetype(e, AE_IFDIR);
      archive_entry_set_perm(e, 0755);
    }
    assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
    if (mv[i].data && !mv[i].link) archive_write_data(a, mv[i].data, strlen(mv[i].data));
    archive_entry_free(e);
  }
  assert_int_equal(archive_write_close(a), ARCHIVE_OK);
  archive_write_free(a);
  return buf;
}

static void check_refused(int zip, const member_t *mv, size_t n, const char *want) {
  size_t len;
  void *buf = build(zip, mv, n, &len);
  manifest_t m;
  err[0] = '\0';
  int rc = marchive_check_mem(buf, len, &m, err, sizeof(err));
  if (rc != SPD_EBADEGG || !strstr(err, want))
    fail_msg("%s archive: rc %d, err '%s', wanted '%s'", zip ? "zip" : "tar.gz", rc, err, want);
  assert_int_equal(m.n, 0);
  free(buf);
}

static void test_archive_kind_and_check(void **state) {
  for (int zip = 0; zip <= 1; zip++) {
    member_t ok[] = {{"spiderd.json", good_manifest, NULL}, {"lib", NULL, NULL},
                     {"lib/s.sh", "echo hi\n", NULL}, {"s.sh", NULL, "lib/s.sh"}};
    size_t len;
    void *buf = build(zip, ok, 4, &len);
    assert_int_equal(marchive_kind_mem(buf, len), MARCHIVE_MANIFEST);
    manifest_t m;
    assert_int_equal(marchive_check_mem(buf, len, &m, err, sizeof(err)), 0);
    assert_int_equal(m.n, 1);
    assert_string_equal(m.spiders[0].name, "s");
    manifest_release(&m);
    free(buf);

    member_t dotdot[] = {{"spiderd.json", good_manifest, NULL}, {"../x", "x", NULL}};
    check_refused(zip, dotdot, 2, "archive member '../x': '..' is not allowed");
    member_t abs[] = {{"spiderd.json", good_manifest, NULL}, {"/tmp/x", "x", NULL}};
    check_refused(zip, abs, 2, "absolute");
    member_t link_out[] = {{"spiderd.json", good_manifest, NULL}, {"l", NULL, "../../etc"}};
    check_refused(zip, link_out, 2, "may point outside the project");
    member_t link_abs[] = {{"spiderd.json", good_manifest, NULL}, {"l", NULL, "/etc/passwd"}};
    check_refused(zip, link_abs, 2, "may point outside the project");
    member_t bad_json[] = {{"spiderd.json", "{\"spiders\": ", NULL}};
    check_refused(zip, bad_json, 1, "spiderd.json: not valid JSON");
    member_t none[] = {{"s.sh", "x", NULL}};
    check_refused(zip, none, 1, "no spiderd.json at the archive's root");
    member_t nested[] = {{"sub/spiderd.json", good_manifest, NULL}};
    check_refused(zip, nested, 1, "no spiderd.json");
    member_t mlink[] = {{"spiderd.json", NULL, "x.json"}};
    check_refused(zip, mlink, 1, "spiderd.json must be a regular file");
  }
  /* An egg stays an egg, even with a spiderd.json inside. */
  member_t egg[] = {{"EGG-INFO/PKG-INFO", "x", NULL}, {"spiderd.json", good_manifest, NULL}};
  size_t len;
  void *buf = build(1, egg, 2, &len);
  assert_int_equal(marchive_kind_mem(buf, len), MARCHIVE_EGG);
  free(buf);
  assert_int_equal(marchive_kind_mem("PK", 2), MARCHIVE_EGG);
  assert_int_equal(marchive_kind_mem("\x1f\x8b", 2), MARCHIVE_MANIFEST);
  /* Random gzip bytes are no archive: refused with a reason. */
  manifest_t m;
  assert_int_equal(marchive_check_mem("\x1f\x8bxyz", 5, &m, err, sizeof(err)), SPD_EBADEGG);
  assert_non_null(strstr(err, "not a readable zip or tar.gz archive"));
}

/* The texts of named root members, from either format; "./" names count as
 * the root's, nested and over-long ones do not. */
static void test_archive_texts(void **state) {
  static const char *const names[3] = {"requirements.txt", ".python-version", "absent"};
  for (int zip = 0; zip <= 1; zip++) {
    member_t mv[] = {{"spiderd.json", good_manifest, NULL},
                     {"./requirements.txt", "othermod==1.0\n", NULL},
                     {"sub/.python-version", "3.9", NULL},
                     {".python-version", "3.11\n", NULL}};
    size_t len;
    void *buf = build(zip, mv, 4, &len);
    char *t[3];
    assert_int_equal(marchive_texts_mem(buf, len, names, 3, 1024, t), 0);
    assert_string_equal(t[0], "othermod==1.0\n");
    assert_string_equal(t[1], "3.11\n");
    assert_null(t[2]);
    free(t[0]);
    free(t[1]);
    assert_int_equal(marchive_texts_mem(buf, len, names, 3, 4, t), 0); /* over max */
    assert_null(t[0]);
    free(t[1]);
    free(buf);
  }
  char *t[1];
  assert_int_equal(marchive_texts_mem("\x1f\x8bxyz", 5, (const char *const[]){"a"}, 1, 9, t),
                   SPD_EBADEGG);
  assert_null(t[0]);
}

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *f) {
  return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = calloc(1, 4096);
  size_t n = fread(buf, 1, 4095, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static int busy_in_use(void *ud, const char *dir) { return strstr(dir, "/busy-") != NULL; }

static void test_prepare_extracts_once(void **state) {
  char root[] = "/tmp/spiderd-manifest-XXXXXX";
  assert_non_null(mkdtemp(root));
  char eggs[128];
  snprintf(eggs, sizeof(eggs), "%s/eggs", root);
  assert_int_equal(mkdir(eggs, 0755), 0);
  snprintf(eggs, sizeof(eggs), "%s/eggs/proj", root);
  assert_int_equal(mkdir(eggs, 0755), 0);
  snprintf(eggs, sizeof(eggs), "%s/eggs", root);
  for (int zip = 0; zip <= 1; zip++) {
    member_t mv[] = {{"./", NULL, NULL}, {"spiderd.json", good_manifest, NULL},
                     {"lib/", NULL, NULL}, {"lib/s.sh", "echo hi\n", NULL},
                     {"s.sh", NULL, "lib/s.sh"}};
    size_t len;
    void *buf = build(zip, mv, 5, &len);
    char path[256];
    snprintf(path, sizeof(path), "%s/proj/v%d.egg", eggs, zip);
    FILE *f = fopen(path, "wb");
    assert_int_equal(fwrite(buf, 1, len, f), len);
    fclose(f);
    free(buf);
    assert_int_equal(marchive_kind_file(path), MARCHIVE_MANIFEST);
    manifest_t m;
    assert_int_equal(marchive_check_file(path, &m, err, sizeof(err)), 0);
    manifest_release(&m);

    char work[256], *dir = NULL, *dir2 = NULL;
    snprintf(work, sizeof(work), "%s/work", root);
    err[0] = '\0';
    assert_false(marchive_ready(path, work, "proj"));
    if (marchive_prepare(path, work, "proj", &m, &dir, err, sizeof(err)))
      fail_msg("prepare: %s", err);
    assert_true(marchive_ready(path, work, "proj"));
    assert_int_equal(m.n, 1);
    manifest_release(&m);
    char want[512];
    snprintf(want, sizeof(want), "%s/proj/v%d-", work, zip);
    assert_memory_equal(dir, want, strlen(want));
    char p[1024];
    snprintf(p, sizeof(p), "%s/s.sh", dir);
    char *text = slurp(p); /* through the symlink */
    assert_non_null(text);
    assert_string_equal(text, "echo hi\n");
    free(text);
    struct stat st;
    snprintf(p, sizeof(p), "%s/lib/s.sh", dir);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07000, 0); /* no set-id bit survives */
    assert_true(st.st_mode & 0100);          /* the executable bit does */
    /* Once per file: a second call finds the directory. */
    unlink(p);
    assert_int_equal(marchive_prepare(path, work, "proj", &m, &dir2, err, sizeof(err)), 0);
    manifest_release(&m);
    assert_string_equal(dir, dir2);
    assert_int_not_equal(stat(p, &st), 0);
    free(dir);
    free(dir2);
  }
  /* Pruning: what no stored archive names goes, unless a job runs there. */
  char work[256], p[512];
  snprintf(work, sizeof(work), "%s/work", root);
  const char *stale[] = {"v0-0000000000000000", ".tmp-v0-abcdef", "gone-1111111111111111",
                         "busy-2222222222222222"};
  for (size_t i = 0; i < 4; i++) {
    snprintf(p, sizeof(p), "%s/proj/%s", work, stale[i]);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/proj/%s/f", work, stale[i]);
    fclose(fopen(p, "w"));
  }
  assert_int_equal(marchive_prune(work, "proj", eggs, busy_in_use, NULL), 3);
  struct stat st;
  for (size_t i = 0; i < 3; i++) {
    snprintf(p, sizeof(p), "%s/proj/%s", work, stale[i]);
    assert_int_not_equal(stat(p, &st), 0);
  }
  snprintf(p, sizeof(p), "%s/proj/busy-2222222222222222", work);
  assert_int_equal(stat(p, &st), 0);
  /* The two current extractions stay. */
  manifest_t m;
  char *dir = NULL;
  snprintf(p, sizeof(p), "%s/proj/v1.egg", eggs);
  assert_int_equal(marchive_prepare(p, work, "proj", &m, &dir, err, sizeof(err)), 0);
  manifest_release(&m);
  assert_int_equal(stat(dir, &st), 0);
  free(dir);
  assert_int_equal(marchive_prune(work, "proj", eggs, NULL, NULL), 1); /* busy, now idle */
  snprintf(p, sizeof(p), "%s/proj/v0.egg", eggs);
  unlink(p);
  assert_int_equal(marchive_prune(work, "proj", eggs, NULL, NULL), 1); /* v0 deleted */
  nftw(root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void) {
  umask(022);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_object),
      cmocka_unit_test(test_parse_default_command),
      cmocka_unit_test(test_parse_literal_braces),
      cmocka_unit_test(test_parse_refusals),
      cmocka_unit_test(test_member_names),
      cmocka_unit_test(test_archive_kind_and_check),
      cmocka_unit_test(test_archive_texts),
      cmocka_unit_test(test_prepare_extracts_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
