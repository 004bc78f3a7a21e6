/* The store's writes that keep an admin (store.h:
 * store_principal_put_keep_admin, store_principal_delete_keep_admin): what
 * counts as a usable admin credential, what a refusal leaves (nothing
 * written, the auth generation unchanged), and that two connections
 * taking away the last two admins at once cannot both succeed. On every
 * backend SPIDERD_TEST_STORE_URL names (store_fx.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "store_fx.h"

#define NOW 1800000000000LL /* the time the checks judge expiry by */

static principal_t mk(principal_kind_t kind, const char *name, role_t role, int64_t expires_ms) {
  return (principal_t){.kind = kind,
                       .name = (char *)name,
                       .label = kind == PRINCIPAL_TOKEN ? "t" : "",
                       .secret = "pbkdf2-sha256$1000$00ff$abcd",
                       .owner = "",
                       .role = role,
                       .projects = "",
                       .created_ms = 1700000000000LL,
                       .expires_ms = expires_ms};
}

static void put(store_t *s, principal_t p) { assert_int_equal(store_principal_put(s, &p), 0); }

/* "u:name role" or "t:name role" of every principal, space-separated. */
static void expect(store_t *s, const char *want) {
  principal_list_t l = {0};
  char got[1024] = "";
  assert_int_equal(store_principals_list(s, &l), 0);
  for (size_t i = 0; i < l.n; i++) {
    size_t n = strlen(got);
    snprintf(got + n, sizeof(got) - n, "%s%c:%s %d", i ? " " : "",
             l.v[i].kind == PRINCIPAL_USER ? 'u' : 't', l.v[i].name, (int)l.v[i].role);
  }
  principal_list_release(&l);
  assert_string_equal(got, want);
}

static char *gen(store_t *s) {
  char *g = NULL;
  assert_int_equal(store_auth_gen(s, &g), 0);
  return g;
}

static int del(store_t *s, principal_kind_t kind, const char *name, int *n) {
  return store_principal_delete_keep_admin(s, kind, name, NOW, n);
}

/* The last admin stays; an expired, secretless or lesser one is none. */
static void test_last_admin_delete(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  int n = -1;
  put(s, mk(PRINCIPAL_TOKEN, "root", ROLE_ADMIN, 0));
  put(s, mk(PRINCIPAL_TOKEN, "old", ROLE_ADMIN, NOW)); /* expires exactly now: gone */
  principal_t nosecret = mk(PRINCIPAL_USER, "ghost", ROLE_ADMIN, 0);
  nosecret.secret = "";
  put(s, nosecret);
  put(s, mk(PRINCIPAL_USER, "reader", ROLE_READ, 0));
  put(s, mk(PRINCIPAL_TOKEN, "deployer", ROLE_DEPLOY, 0));
  char *g0 = gen(s);
  assert_int_equal(del(s, PRINCIPAL_TOKEN, "root", &n), SPD_ECONFLICT);
  assert_int_equal(n, 0);
  char *g1 = gen(s);
  assert_string_equal(g1, g0); /* nothing written: caches stay */
  expect(s, "u:ghost 4 u:reader 1 t:deployer 3 t:old 4 t:root 4");
  /* the others are no admin credential: they go */
  assert_int_equal(del(s, PRINCIPAL_TOKEN, "old", &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(del(s, PRINCIPAL_USER, "ghost", &n), 0);
  assert_int_equal(del(s, PRINCIPAL_USER, "reader", &n), 0);
  assert_int_equal(del(s, PRINCIPAL_TOKEN, "deployer", &n), 0);
  /* a user and a token of one name are two principals */
  assert_int_equal(del(s, PRINCIPAL_USER, "root", &n), 0);
  assert_int_equal(n, 0);
  assert_int_equal(del(s, PRINCIPAL_TOKEN, "root", &n), SPD_ECONFLICT);
  put(s, mk(PRINCIPAL_USER, "root", ROLE_ADMIN, 0));
  /* an expiry after now is a usable admin: then the token may go */
  put(s, mk(PRINCIPAL_TOKEN, "later", ROLE_ADMIN, NOW + 1));
  assert_int_equal(del(s, PRINCIPAL_TOKEN, "root", &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(del(s, PRINCIPAL_USER, "root", &n), 0);
  assert_int_equal(del(s, PRINCIPAL_TOKEN, "later", &n), SPD_ECONFLICT);
  /* deleting what is not there is still no error */
  assert_int_equal(del(s, PRINCIPAL_TOKEN, "nobody", &n), 0);
  assert_int_equal(n, 0);
  expect(s, "t:later 4");
  /* without the check, the last goes (loopback, --insecure) */
  assert_int_equal(store_principal_delete(s, PRINCIPAL_TOKEN, "later", &n), 0);
  assert_int_equal(n, 1);
  expect(s, "");
  assert_int_equal(store_principal_delete_keep_admin(s, PRINCIPAL_TOKEN, "x", 0, &n), -EINVAL);
  free(g0);
  free(g1);
}

/* A put that would leave the last admin none is refused; one that keeps
 * it an admin, or changes another, is not. */
static void test_last_admin_put(void **state) {
  struct fx *f = *state;
  store_t *s = f->s;
  put(s, mk(PRINCIPAL_USER, "root", ROLE_ADMIN, 0));
  put(s, mk(PRINCIPAL_USER, "bob", ROLE_RUN, 0));
  char *g0 = gen(s);
  for (role_t r = ROLE_READ; r < ROLE_ADMIN; r++) {
    principal_t p = mk(PRINCIPAL_USER, "root", r, 0);
    assert_int_equal(store_principal_put_keep_admin(s, &p, NOW), SPD_ECONFLICT);
  }
  principal_t p = mk(PRINCIPAL_USER, "root", ROLE_ADMIN, 0);
  p.secret = "";
  assert_int_equal(store_principal_put_keep_admin(s, &p, NOW), SPD_ECONFLICT);
  p = mk(PRINCIPAL_USER, "root", ROLE_ADMIN, NOW);
  assert_int_equal(store_principal_put_keep_admin(s, &p, NOW), SPD_ECONFLICT);
  char *g1 = gen(s);
  assert_string_equal(g1, g0);
  expect(s, "u:bob 2 u:root 4");
  /* still an admin: a new secret, projects */
  p = mk(PRINCIPAL_USER, "root", ROLE_ADMIN, 0);
  p.secret = "pbkdf2-sha256$1000$0011$beef";
  p.projects = "a";
  assert_int_equal(store_principal_put_keep_admin(s, &p, NOW), 0);
  /* another principal, and a new one, change freely */
  p = mk(PRINCIPAL_USER, "bob", ROLE_READ, 0);
  assert_int_equal(store_principal_put_keep_admin(s, &p, NOW), 0);
  p = mk(PRINCIPAL_TOKEN, "newbie", ROLE_READ, 0);
  assert_int_equal(store_principal_put_keep_admin(s, &p, NOW), 0);
  /* with a second admin, the first may step down */
  put(s, mk(PRINCIPAL_USER, "bob", ROLE_ADMIN, 0));
  p = mk(PRINCIPAL_USER, "root", ROLE_DEPLOY, 0);
  assert_int_equal(store_principal_put_keep_admin(s, &p, NOW), 0);
  p = mk(PRINCIPAL_USER, "bob", ROLE_RUN, 0);
  assert_int_equal(store_principal_put_keep_admin(s, &p, NOW), SPD_ECONFLICT);
  expect(s, "u:bob 4 u:root 3 t:newbie 1");
  assert_int_equal(store_principal_put_keep_admin(s, &p, 0), -EINVAL);
  free(g0);
  free(g1);
}

/* ---- two connections ---- */

struct holder {
  const char *url;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int deleted; /* the first delete ran, uncommitted */
  int rc;
};

/* Deletes "x" inside a transaction, says so, and commits a while later:
 * the other connection's check runs while this delete is uncommitted. */
static void *holder_run(void *arg) {
  struct holder *h = arg;
  store_t *s = fx_open(h->url);
  int n = 0;
  int rc = store_tx_begin(s);
  if (!rc) rc = del(s, PRINCIPAL_TOKEN, "x", &n);
  pthread_mutex_lock(&h->lock);
  h->deleted = 1;
  h->rc = rc ? rc : n == 1 ? 0 : -ENOENT;
  pthread_cond_signal(&h->cond);
  pthread_mutex_unlock(&h->lock);
  usleep(300 * 1000);
  if (!rc) h->rc = store_tx_commit(s);
  else store_tx_rollback(s);
  store_close(s);
  return NULL;
}

/* Two nodes, each revoking the other's admin: the one that comes second
 * waits for the first or sees its delete, and is refused. */
static void test_two_connections(void **state) {
  struct fx *f = *state;
  put(f->s, mk(PRINCIPAL_TOKEN, "x", ROLE_ADMIN, 0));
  put(f->s, mk(PRINCIPAL_TOKEN, "y", ROLE_ADMIN, 0));
  struct holder h = {.url = f->url};
  pthread_mutex_init(&h.lock, NULL);
  pthread_cond_init(&h.cond, NULL);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, holder_run, &h), 0);
  pthread_mutex_lock(&h.lock);
  while (!h.deleted) pthread_cond_wait(&h.cond, &h.lock);
  pthread_mutex_unlock(&h.lock);
  store_t *s = fx_open(f->url);
  int n = 0;
  int rc = store_tx_begin(s);
  if (!rc) rc = del(s, PRINCIPAL_TOKEN, "y", &n);
  if (!rc) rc = store_tx_commit(s);
  else store_tx_rollback(s);
  store_close(s);
  pthread_join(t, NULL);
  assert_int_equal(h.rc, 0);
  assert_int_equal(rc, SPD_ECONFLICT);
  expect(f->s, "t:y 4");
  pthread_mutex_destroy(&h.lock);
  pthread_cond_destroy(&h.cond);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
  const struct CMUnitTest tests[] = {
      T(test_last_admin_delete),
      T(test_last_admin_put),
      T(test_two_connections),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
