/* Python environments on disk (store/pyenv.h). */
#include "store/pyenv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include "error.h"
#include "store/eggs.h"
#include "store/marchive.h"

/* Largest member read from an archive (requirements.txt, METADATA). */
#define MEMBER_MAX (1024 * 1024)

char *pyenv_dir(const char *dbs_dir) {
  char *out = NULL, cwd[PATH_MAX];
  if (dbs_dir[0] == '/') {
    if (asprintf(&out, "%s/envs", dbs_dir) < 0) out = NULL;
  } else if (getcwd(cwd, sizeof(cwd))) {
    if (asprintf(&out, "%s/%s/envs", cwd, dbs_dir) < 0) out = NULL;
  }
  return out;
}

/* ---- requirements ---- */

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* One requirement line trimmed, its comment dropped; NULL for nothing. */
static char *req_line(const char *s, size_t n) {
  /* pip takes a '#' at the start or after a blank as a comment; one inside
   * a URL fragment is not. */
  for (size_t i = 0; i < n; i++)
    if (s[i] == '#' && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) {
      n = i;
      break;
    }
  while (n && (*s == ' ' || *s == '\t')) s++, n--;
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) n--;
  return n ? strndup(s, n) : NULL;
}

int pyenv_normalize(const char *text, size_t len, char **out, char *err, size_t errlen) {
  char **v = NULL;
  size_t n = 0, cap = 0, total = 1;
  int rc = 0;
  *out = NULL;
  for (size_t at = 0; at < len;) {
    const char *nl = memchr(text + at, '\n', len - at);
    size_t ll = nl ? (size_t)(nl - (text + at)) : len - at;
    char *line = req_line(text + at, ll);
    at += ll + 1;
    if (!line) continue;
    if (line[0] == '-') {
      snprintf(err, errlen,
               "requirement line '%.80s' is an option: where packages come from is the "
               "daemon's setting (pip_index_url, pip_find_links), and each requirement is "
               "a line of its own",
               line);
      free(line);
      rc = SPD_EBADPARAM;
      goto out;
    }
    if (strlen(line) > 1000) {
      free(line);
      snprintf(err, errlen, "a requirement line is longer than 1000 bytes");
      rc = SPD_EBADPARAM;
      goto out;
    }
    if (n == cap) {
      size_t nc = cap ? cap * 2 : 16;
      char **nv = realloc(v, nc * sizeof(*v));
      if (!nv) {
        free(line);
        rc = -ENOMEM;
        goto out;
      }
      v = nv;
      cap = nc;
    }
    v[n++] = line;
    total += strlen(line) + 1;
  }
  if (n > 1) qsort(v, n, sizeof(*v), cmp_str);
  char *buf = malloc(total), *w = buf;
  if (!buf) {
    rc = -ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    if (i && !strcmp(v[i], v[i - 1])) continue;
    w += sprintf(w, "%s\n", v[i]);
  }
  *w = '\0';
  *out = buf;
out:
  strv_free(v, n);
  return rc;
}

/* ---- interpreters ---- */

/* X.Y from a real path ending in pythonX.Y; "" when the name says none. */
static void version_of(const char *real, char *out, size_t cap) {
  const char *base = strrchr(real, '/');
  base = base ? base + 1 : real;
  out[0] = '\0';
  if (strncmp(base, "python", 6) || !base[6]) return;
  if (strspn(base + 6, "0123456789.") == strlen(base + 6)) snprintf(out, cap, "%s", base + 6);
}

static int version_matches(const char *have, const char *want) {
  size_t n = strlen(want);
  return have[0] && !strncmp(have, want, n) && (have[n] == '\0' || have[n] == '.');
}

/* The real path of an executable name (searched in PATH without a '/'). */
static char *resolve(const char *name) {
  char buf[PATH_MAX];
  if (strchr(name, '/')) return access(name, X_OK) == 0 ? realpath(name, NULL) : NULL;
  const char *path = getenv("PATH");
  for (const char *p = path ? path : "/usr/bin:/bin"; p && *p;) {
    const char *c = strchr(p, ':');
    size_t n = c ? (size_t)(c - p) : strlen(p);
    if (n && (size_t)snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, p, name) < sizeof(buf) &&
        access(buf, X_OK) == 0)
      return realpath(buf, NULL);
    p = c ? c + 1 : NULL;
  }
  return NULL;
}

static int want_valid(const char *want) {
  size_t n = strlen(want);
  if (!n || n > 8 || strspn(want, "0123456789.") != n || want[0] == '.' || want[n - 1] == '.' ||
      strstr(want, ".."))
    return 0;
  return 1;
}

int pyenv_interpreter(const char *default_python, const char *want, char **path, char *err,
                      size_t errlen) {
  char have[32];
  *path = NULL;
  char *real = resolve(default_python);
  if (!want || !*want) {
    if (!real) {
      snprintf(err, errlen, "the daemon's python '%s' cannot be found", default_python);
      return SPD_ECONFIG;
    }
    *path = real;
    return 0;
  }
  if (!want_valid(want)) {
    free(real);
    snprintf(err, errlen, "python must be a version such as 3.11, not '%.40s'", want);
    return SPD_EBADPARAM;
  }
  /* 3.11.7 (a .python-version as pyenv writes it) asks for a 3.11. */
  char minor[16];
  snprintf(minor, sizeof(minor), "%s", want);
  char *dot = strchr(minor, '.');
  if (dot && (dot = strchr(dot + 1, '.'))) *dot = '\0';
  want = minor;
  if (real) {
    version_of(real, have, sizeof(have));
    if (version_matches(have, want)) {
      *path = real;
      return 0;
    }
  }
  /* Installed interpreters only: a name found through PATH may be a
   * version manager's shim for a version that is not installed. */
  char cand[3][PATH_MAX];
  snprintf(cand[0], sizeof(cand[0]), "/usr/bin/python%s", want);
  snprintf(cand[1], sizeof(cand[1]), "/usr/local/bin/python%s", want);
  const char *slash = real ? strrchr(real, '/') : NULL;
  snprintf(cand[2], sizeof(cand[2]), "%.*s/python%s", slash ? (int)(slash - real) : 0,
           real ? real : "", want);
  for (int i = 0; i < 3; i++) {
    char *r = cand[i][0] == '/' ? resolve(cand[i]) : NULL;
    if (!r) continue;
    version_of(r, have, sizeof(have));
    if (version_matches(have, want)) {
      free(real);
      *path = r;
      return 0;
    }
    free(r);
  }
  char dflt[32] = "";
  if (real) version_of(real, dflt, sizeof(dflt));
  snprintf(err, errlen,
           "no installed Python matches python = %s (the daemon's python is %s%s%s; install "
           "python%s or ask for an installed version)",
           want, real ? real : default_python, dflt[0] ? ", version " : "", dflt, want);
  free(real);
  return SPD_EBADPARAM;
}

void pyenv_key(const char *interp, const char *reqs, char out[PYENV_KEY_LEN + 1]) {
  /* FNV-1a over both, with a separator no path or requirement contains. */
  uint64_t h = 1469598103934665603ull;
  const char *parts[] = {interp, "\n\x01\n", reqs};
  for (size_t k = 0; k < 3; k++)
    for (const unsigned char *p = (const unsigned char *)parts[k]; *p; p++) {
      h ^= *p;
      h *= 1099511628211ull;
    }
  snprintf(out, PYENV_KEY_LEN + 1, "%016llx", (unsigned long long)h);
}

/* ---- sidecars ---- */

char *pyenv_sidecar_path(const char *egg_path) {
  size_t n = strlen(egg_path);
  char *out = NULL;
  if (n > 4 && !strcmp(egg_path + n - 4, ".egg")) n -= 4;
  if (asprintf(&out, "%.*s.env", (int)n, egg_path) < 0) return NULL;
  return out;
}

int pyenv_sidecar_write(const char *egg_path, const char *key, const char *interp,
                        const char *reqs) {
  char *path = pyenv_sidecar_path(egg_path), *tmp = NULL;
  json_t *o = json_pack("{s:s, s:s, s:s}", "key", key, "python", interp, "requirements", reqs);
  int rc = -ENOMEM;
  if (!path || !o || asprintf(&tmp, "%s.tmp", path) < 0) {
    tmp = NULL;
    goto out;
  }
  rc = json_dump_file(o, tmp, JSON_COMPACT) ? -EIO : 0;
  if (!rc && rename(tmp, path)) rc = -errno;
  if (rc) unlink(tmp);
out:
  json_decref(o);
  free(path);
  free(tmp);
  return rc;
}

static int key_valid(const char *k) {
  return strlen(k) == PYENV_KEY_LEN && strspn(k, "0123456789abcdef") == PYENV_KEY_LEN;
}

int pyenv_sidecar_read(const char *egg_path, char key[PYENV_KEY_LEN + 1], char **interp,
                       char **reqs) {
  char *path = pyenv_sidecar_path(egg_path);
  if (!path) return -ENOMEM;
  if (interp) *interp = NULL;
  if (reqs) *reqs = NULL;
  if (access(path, F_OK)) {
    int e = errno;
    free(path);
    return e == ENOENT ? -ENOENT : -e;
  }
  json_t *o = json_load_file(path, 0, NULL);
  free(path);
  const char *k = NULL, *i = NULL, *r = NULL;
  if (!o || json_unpack(o, "{s:s, s:s, s:s}", "key", &k, "python", &i, "requirements", &r) ||
      !key_valid(k)) {
    json_decref(o);
    return -EINVAL;
  }
  snprintf(key, PYENV_KEY_LEN + 1, "%s", k);
  int rc = 0;
  if (interp && !(*interp = strdup(i))) rc = -ENOMEM;
  if (reqs && !(*reqs = strdup(r))) rc = -ENOMEM;
  json_decref(o);
  return rc;
}

int pyenv_ready(const char *envs_dir, const char *key) {
  char path[PATH_MAX];
  if ((size_t)snprintf(path, sizeof(path), "%s/%s/" PYENV_READY, envs_dir, key) >= sizeof(path))
    return 0;
  return access(path, F_OK) == 0;
}

char *pyenv_python(const char *envs_dir, const char *key) {
  char *out = NULL;
  if (asprintf(&out, "%s/%s/bin/python", envs_dir, key) < 0) return NULL;
  return out;
}

int pyenv_for_egg(const char *envs_dir, const char *egg_path, char **python,
                  char key[PYENV_KEY_LEN + 1]) {
  *python = NULL;
  key[0] = '\0';
  int rc = pyenv_sidecar_read(egg_path, key, NULL, NULL);
  if (rc == -ENOENT) return 0;
  if (rc) return rc;
  if (!pyenv_ready(envs_dir, key)) return SPD_ENOFILE;
  *python = pyenv_python(envs_dir, key);
  return *python ? 0 : -ENOMEM;
}

/* ---- keys in use ---- */

static int keys_add(char ***keys, size_t *n, const char *k) {
  for (size_t i = 0; i < *n; i++)
    if (!strcmp((*keys)[i], k)) return 0;
  char **nv = realloc(*keys, (*n + 1) * sizeof(**keys));
  if (!nv) return -ENOMEM;
  *keys = nv;
  if (!(nv[*n] = strdup(k))) return -ENOMEM;
  (*n)++;
  return 0;
}

static int keys_of_project(const char *pdir, char ***keys, size_t *n) {
  DIR *d = opendir(pdir);
  if (!d) return 0;
  struct dirent *de;
  int rc = 0;
  while (!rc && (de = readdir(d))) {
    size_t l = strlen(de->d_name);
    if (de->d_name[0] == '.' || l < 5 || strcmp(de->d_name + l - 4, ".env")) continue;
    char egg[PATH_MAX], key[PYENV_KEY_LEN + 1];
    if ((size_t)snprintf(egg, sizeof(egg), "%s/%.*s.egg", pdir, (int)(l - 4), de->d_name) >=
        sizeof(egg))
      continue;
    if (pyenv_sidecar_read(egg, key, NULL, NULL) == 0) rc = keys_add(keys, n, key);
  }
  closedir(d);
  return rc;
}

int pyenv_keys_in_use(const char *eggs_dir, char ***keys, size_t *n) {
  *keys = NULL;
  *n = 0;
  DIR *d = opendir(eggs_dir);
  if (!d) return errno == ENOENT ? 0 : -errno;
  struct dirent *de;
  int rc = 0;
  while (!rc && (de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    char pdir[PATH_MAX];
    if ((size_t)snprintf(pdir, sizeof(pdir), "%s/%s", eggs_dir, de->d_name) >= sizeof(pdir))
      continue;
    rc = keys_of_project(pdir, keys, n);
  }
  closedir(d);
  if (rc) {
    strv_free(*keys, *n);
    *keys = NULL;
    *n = 0;
  }
  return rc;
}

/* ---- what an archive carries ---- */

static zip_t *zip_mem(const void *data, size_t len) {
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t *src = zip_source_buffer_create(data, len, 0, &ze);
  zip_t *za = src ? zip_open_from_source(src, ZIP_RDONLY, &ze) : NULL;
  if (src && !za) zip_source_free(src);
  zip_error_fini(&ze);
  return za;
}

/* A member's text (NUL-terminated), NULL when absent or too big. */
static char *member(zip_t *za, const char *name) {
  zip_stat_t st;
  if (zip_stat(za, name, 0, &st) || !(st.valid & ZIP_STAT_SIZE) || st.size > MEMBER_MAX)
    return NULL;
  zip_file_t *f = zip_fopen(za, name, 0);
  char *buf = f ? malloc(st.size + 1) : NULL;
  if (buf && zip_fread(f, buf, st.size) != (zip_int64_t)st.size) {
    free(buf);
    buf = NULL;
  }
  if (buf) buf[st.size] = '\0';
  if (f) zip_fclose(f);
  return buf;
}

/* The name of the wheel's <dist>.dist-info/METADATA, if any. */
static const char *wheel_metadata(zip_t *za) {
  zip_int64_t n = zip_get_num_entries(za, 0);
  const char *found = NULL;
  for (zip_int64_t i = 0; i < n; i++) {
    const char *name = zip_get_name(za, (zip_uint64_t)i, ZIP_FL_ENC_RAW);
    if (!name) continue;
    if (!strncmp(name, "EGG-INFO/", 9)) return NULL;
    const char *slash = strchr(name, '/');
    if (slash && !strcmp(slash, "/METADATA") && slash - name > 10 &&
        !strncmp(slash - 10, ".dist-info", 10))
      found = name;
  }
  return found;
}

int pyenv_is_wheel(const void *data, size_t len) {
  zip_t *za = zip_mem(data, len);
  int yes = za && wheel_metadata(za) != NULL;
  if (za) zip_discard(za);
  return yes;
}

/* Requires-Dist lines of METADATA, one requirement a line; those only an
 * extra needs are left out. */
static char *requires_dist(const char *meta) {
  size_t cap = strlen(meta) + 1;
  char *out = malloc(cap), *w = out;
  if (!out) return NULL;
  for (const char *p = meta; p && *p;) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    if (n == 0 || (n == 1 && p[0] == '\r')) break; /* the headers end */
    if (!strncmp(p, "Requires-Dist:", 14)) {
      char *line = strndup(p + 14, n - 14);
      if (line && !strstr(line, "extra ==") && !strstr(line, "extra==")) {
        char *s = line;
        while (*s == ' ') s++;
        w += sprintf(w, "%s\n", s);
      }
      free(line);
    }
    p = nl ? nl + 1 : NULL;
  }
  *w = '\0';
  return out;
}

/* python = X.Y of scrapy.cfg's [deploy] section. */
static char *cfg_python(const char *cfg) {
  int in_deploy = 0;
  for (const char *p = cfg; p && *p;) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    char line[256];
    snprintf(line, sizeof(line), "%.*s", (int)(n < 255 ? n : 255), p);
    char *s = line;
    while (*s == ' ' || *s == '\t') s++;
    if (*s == '[') {
      in_deploy = !strncmp(s, "[deploy", 7);
    } else if (in_deploy && !strncmp(s, "python", 6)) {
      char *v = s + 6;
      while (*v == ' ' || *v == '\t') v++;
      if (*v == '=' || *v == ':') {
        v++;
        while (*v == ' ' || *v == '\t') v++;
        size_t l = strcspn(v, " \t\r#;");
        return strndup(v, l);
      }
    }
    p = nl ? nl + 1 : NULL;
  }
  return NULL;
}

static int from_zip(zip_t *za, char **reqs, char **python) {
  int rc = 0;
  char *cfg = member(za, ".python-version");
  if (cfg) {
    cfg[strcspn(cfg, " \t\r\n")] = '\0';
    *python = cfg;
  } else if ((cfg = member(za, "scrapy.cfg"))) {
    *python = cfg_python(cfg);
    free(cfg);
  }
  *reqs = member(za, "requirements.txt");
  if (!*reqs) {
    const char *meta = wheel_metadata(za);
    char *text = meta ? member(za, meta) : NULL;
    if (text && !(*reqs = requires_dist(text))) rc = -ENOMEM;
    free(text);
  }
  return rc;
}

/* A command project's tar.gz: its requirements.txt and .python-version
 * (texts from marchive_texts_*; rc theirs). Not a readable archive: none. */
static int from_tar(int rc, char *texts[2], char **reqs, char **python) {
  if (rc == -ENOMEM) return rc;
  if (rc) return 0;
  *reqs = texts[0];
  if ((*python = texts[1])) (*python)[strcspn(*python, " \t\r\n")] = '\0';
  return 0;
}

static const char *const tar_names[2] = {"requirements.txt", ".python-version"};

int pyenv_from_archive(const void *data, size_t len, char **reqs, char **python) {
  *reqs = NULL;
  *python = NULL;
  zip_t *za = zip_mem(data, len);
  if (!za) {
    if (marchive_kind_mem(data, len) != MARCHIVE_MANIFEST) return 0;
    char *texts[2];
    return from_tar(marchive_texts_mem(data, len, tar_names, 2, MEMBER_MAX, texts), texts, reqs,
                    python);
  }
  int rc = from_zip(za, reqs, python);
  zip_discard(za);
  return rc;
}

int pyenv_from_file(const char *path, char **reqs, char **python) {
  *reqs = NULL;
  *python = NULL;
  zip_t *za = zip_open(path, ZIP_RDONLY, NULL);
  if (!za) {
    if (marchive_kind_file(path) != MARCHIVE_MANIFEST) return 0;
    char *texts[2];
    return from_tar(marchive_texts_file(path, tar_names, 2, MEMBER_MAX, texts), texts, reqs,
                    python);
  }
  int rc = from_zip(za, reqs, python);
  zip_discard(za);
  return rc;
}

int pyenv_embed(const void *data, size_t len, const char *reqs, const char *python,
                void **out, size_t *outlen) {
  zip_error_t ze;
  zip_error_init(&ze);
  *out = NULL;
  *outlen = 0;
  int rc = SPD_EBADEGG;
  /* Writing replaces the buffer source's data, and may free it: the
   * source gets a copy of its own. */
  void *copy_in = malloc(len ? len : 1);
  if (!copy_in) return -ENOMEM;
  memcpy(copy_in, data, len);
  zip_source_t *src = zip_source_buffer_create(copy_in, len, 1, &ze);
  if (!src) free(copy_in);
  zip_t *za = src ? zip_open_from_source(src, 0, &ze) : NULL;
  if (!za) goto out;
  zip_source_keep(src); /* read back after zip_close */
  const char *names[2] = {"requirements.txt", ".python-version"};
  const char *texts[2] = {reqs, python};
  for (int i = 0; i < 2; i++) {
    if (!texts[i]) continue;
    char *copy = strdup(texts[i]);
    zip_source_t *m = copy ? zip_source_buffer(za, copy, strlen(copy), 1) : NULL;
    if (!m || zip_file_add(za, names[i], m, ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8) < 0) {
      if (m) zip_source_free(m);
      else free(copy);
      zip_discard(za);
      goto out;
    }
  }
  if (zip_close(za) < 0) {
    zip_discard(za);
    goto out;
  }
  zip_stat_t st;
  if (zip_source_stat(src, &st) || !(st.valid & ZIP_STAT_SIZE) || zip_source_open(src)) goto out;
  void *buf = malloc(st.size ? st.size : 1);
  if (buf && zip_source_read(src, buf, st.size) == (zip_int64_t)st.size) {
    *out = buf;
    *outlen = st.size;
    rc = 0;
  } else {
    free(buf);
    rc = -ENOMEM;
  }
  zip_source_close(src);
out:
  if (src) zip_source_free(src);
  zip_error_fini(&ze);
  return rc;
}

int pyenv_spec(const char *default_python, const char *reqs, const char *want, char **interp,
               char **norm, char key[PYENV_KEY_LEN + 1], char *err, size_t errlen) {
  char *dflt = NULL;
  *interp = *norm = NULL;
  key[0] = '\0';
  if (!reqs && (!want || !*want)) return 0;
  int rc = pyenv_normalize(reqs ? reqs : "", reqs ? strlen(reqs) : 0, norm, err, errlen);
  if (!rc) rc = pyenv_interpreter(default_python, want, interp, err, errlen);
  /* Nothing to install on the daemon's own interpreter: no environment. */
  if (!rc && !**norm &&
      (!want || !*want ||
       (pyenv_interpreter(default_python, NULL, &dflt, err, errlen) == 0 &&
        !strcmp(dflt, *interp)))) {
    err[0] = '\0';
    free(*interp);
    free(*norm);
    *interp = *norm = NULL;
  }
  free(dflt);
  if (rc) {
    free(*interp);
    free(*norm);
    *interp = *norm = NULL;
  } else if (*interp) {
    pyenv_key(*interp, *norm, key);
  }
  return rc;
}
