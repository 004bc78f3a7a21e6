/* Secrets, read once the configuration is loaded (https_key_password_file,
 * store_password_file, SPIDERD_STORE_PASSWORD: each wiped from the process
 * environment once read), the store password carried to the store in its
 * URL, and URLs shown without their passwords (config_redact_url).
 */
#include "config.h"

#include "config_int.h"
#include "error.h"
#include "strbuf.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The first line of a file holding a secret, without its line ending. */
static int read_secret(const char *key, const char *path, char **out, char *err, size_t errlen) {
  FILE *f = fopen(path, "re");
  if (!f) {
    snprintf(err, errlen, "[spiderd] %s '%s': %s", key, path, strerror(errno));
    return SPD_ECONFIG;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t n = getline(&line, &cap, f);
  int failed = ferror(f);
  fclose(f);
  if (n < 0 && !failed) n = 0, line = line ? line : strdup("");
  if (n < 0 || failed || !line) {
    if (line) explicit_bzero(line, cap);
    free(line);
    snprintf(err, errlen, "[spiderd] %s '%s': cannot read it", key, path);
    return SPD_ECONFIG;
  }
  while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
  if (!n) {
    free(line);
    snprintf(err, errlen, "[spiderd] %s '%s': the file is empty", key, path);
    return SPD_ECONFIG;
  }
  *out = line;
  return 0;
}

void config_secret_free(char *p) {
  if (!p) return;
  explicit_bzero(p, strlen(p));
  free(p);
}

/* Does the URL already carry a password (user:password@ or password=)? */
static int url_has_password(const char *url) {
  const char *auth = strstr(url, "://");
  if (auth) {
    auth += 3;
    size_t n = strcspn(auth, "/?#");
    const char *at = memrchr(auth, '@', n);
    if (at && memchr(auth, ':', (size_t)(at - auth))) return 1;
  }
  const char *q = strchr(url, '?');
  for (const char *p = q; p && *p; p = strchr(p + 1, '&'))
    if (!strncasecmp(p + 1, "password=", 9)) return 1;
  return 0;
}

/* The store's password travels to its backend as the URL's password=
 * parameter, which libpq (as its `password` keyword) and the Redis backend
 * both read: every connection the daemon makes, the LISTEN/SUBSCRIBE watch
 * included, then has it, and no process environment does. A password
 * written in the URL itself wins. */
static int store_url_add_password(config_t *c, char *err, size_t errlen) {
  const char *u = c->store;
  if (strncasecmp(u, "postgres", 8) && strncasecmp(u, "redis", 5)) {
    snprintf(err, errlen, "[spiderd] store_password_file / SPIDERD_STORE_PASSWORD: the store "
             "is not PostgreSQL or Redis");
    return SPD_ECONFIG;
  }
  if (url_has_password(u)) return 0;
  strbuf_t b = {0};
  static const char hex[] = "0123456789ABCDEF";
  int bad = strbuf_add(&b, u, strlen(u)) ||
            strbuf_add(&b, strchr(u, '?') ? "&password=" : "?password=", 10);
  for (const unsigned char *p = (const unsigned char *)c->store_password; *p && !bad; p++) {
    char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
    bad = isalnum(*p) || strchr("-._~", *p) ? strbuf_add(&b, (const char *)p, 1)
                                            : strbuf_add(&b, e, 3);
  }
  if (bad) {
    if (b.p) explicit_bzero(b.p, b.len);
    strbuf_release(&b);
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  free(c->store);
  c->store = b.p; /* strbuf keeps its text NUL-terminated */
  return 0;
}

int config_load_secrets(config_t *c, char *err, size_t errlen) {
  int rc = 0;
  if (c->https_key_password_file[0]) {
    char *pw = NULL;
    rc = read_secret("https_key_password_file", c->https_key_password_file, &pw, err, errlen);
    if (rc) return rc;
    config_secret_free(c->https_key_password);
    c->https_key_password = pw;
  }
  const char *env = getenv("SPIDERD_STORE_PASSWORD");
  config_secret_free(c->store_password);
  c->store_password = NULL;
  if (env && *env) {
    c->store_password = strdup(env);
    if (!c->store_password) rc = -ENOMEM;
  } else if (c->store_password_file[0]) {
    rc = read_secret("store_password_file", c->store_password_file, &c->store_password, err,
                     errlen);
  }
  if (env) explicit_bzero((char *)env, strlen(env));
  unsetenv("SPIDERD_STORE_PASSWORD");
  if (!rc && c->store_password) rc = store_url_add_password(c, err, errlen);
  unsetenv("SPIDERD_HTTPS_KEY_PASSWORD");
  if (rc == -ENOMEM) snprintf(err, errlen, "out of memory");
  return rc;
}

void config_redact_url(const char *url, char *out, size_t outlen) {
  if (!outlen) return;
  snprintf(out, outlen, "%s", url ? url : "");
  char *scheme = strstr(out, "://");
  if (scheme) {
    char *auth = scheme + 3;
    size_t hostlen = strcspn(auth, "/?#");
    char *at = memrchr(auth, '@', hostlen);
    char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
    if (colon) {
      char rest[1024];
      snprintf(rest, sizeof(rest), "%s", at);
      snprintf(colon + 1, outlen - (size_t)(colon + 1 - out), "***%s", rest);
    }
  }
  /* libpq also takes password=... among the URL's parameters */
  for (char *p = out; (p = strcasestr(p, "password=")) != NULL;) {
    if (p > out && p[-1] != '?' && p[-1] != '&' && p[-1] != ' ') {
      p += 9;
      continue;
    }
    char *v = p + 9;
    size_t vlen = strcspn(v, "& ");
    char rest[1024];
    snprintf(rest, sizeof(rest), "%s", v + vlen);
    snprintf(v, outlen - (size_t)(v - out), "***%s", rest);
    p = v + 3;
  }
}
