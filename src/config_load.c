/* Configuration loading; the sources and their order are in config.h.
 *
 * INI files are merged first into one raw view, the way Python's
 * ConfigParser merges Scrapyd's files, and only then are the merged values
 * interpolated ("%(name)s", "%%") and validated, each naming the file that
 * gave its final value. So a scrapyd.conf that Scrapyd accepts means the same
 * here, including a value that is overridden by a later file. Environment
 * variables and flags are validated one by one as they are applied.
 *
 * Differences from ConfigParser: a ';' after whitespace starts an inline
 * comment (as in the INI reader spiderd used before, so existing files mean
 * the same), and [DEFAULT] only serves as a fallback for interpolation.
 */
#include "config.h"

#include "config_int.h"
#include "error.h"
#include "strbuf.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* A config file bigger than this is a mistake (a device, a log), not config. */
#define MAX_FILE_SIZE (16 * 1024 * 1024)
/* Python's configparser.MAX_INTERPOLATION_DEPTH. */
#define MAX_INTERPOLATION_DEPTH 10

/* One key of the merged INI view. */
struct raw {
  const char *section; /* one of the SEC_* strings */
  char *name;          /* lower-cased, as ConfigParser's optionxform */
  char *value;         /* uninterpolated */
  const char *src;     /* the file (owned by config_t.sources); NULL: built in */
  int file;            /* which file set it, to catch a key set twice in one */
  int line;
  int used;            /* another key's value refers to it with %(name)s */
};

/* ---- the merged raw view ---- */

static struct raw *raw_find(struct loader *L, const char *section, const char *name) {
  for (size_t i = 0; i < L->nraw; i++)
    if (L->raw[i].section == section && strcmp(L->raw[i].name, name) == 0) return &L->raw[i];
  return NULL;
}

/* Sets section.name = value in the merged view; takes NAME. */
int config_raw_set(struct loader *L, const char *section, char *name, const char *value) {
  char *v = strdup(value);
  if (!v) {
    free(name);
    return -ENOMEM;
  }
  struct raw *r = raw_find(L, section, name);
  if (r) {
    free(name);
    free(r->value);
  } else {
    if (L->nraw == L->capraw) {
      size_t cap = L->capraw ? 2 * L->capraw : 64;
      struct raw *grown = realloc(L->raw, cap * sizeof(*grown));
      if (!grown) {
        free(name);
        free(v);
        return -ENOMEM;
      }
      L->raw = grown;
      L->capraw = cap;
    }
    r = &L->raw[L->nraw++];
    r->section = section;
    r->name = name;
    r->used = 0;
  }
  r->value = v;
  r->src = L->path;
  r->file = L->file;
  r->line = L->lineno;
  return 0;
}

static void raw_free(struct loader *L) {
  for (size_t i = 0; i < L->nraw; i++) {
    free(L->raw[i].name);
    free(L->raw[i].value);
  }
  free(L->raw);
  L->raw = NULL;
  L->nraw = L->capraw = 0;
}

/* ConfigParser's BasicInterpolation: "%%" is '%', "%(name)s" is another key
 * of the same section (or of [DEFAULT]), resolved in the merged view. */
static int interpolate(struct loader *L, const struct src *s, const char *section,
                       const char *key, const char *value, strbuf_t *out, int depth) {
  if (depth > MAX_INTERPOLATION_DEPTH)
    return config_bad(L, s, section, key, "'%s': interpolation nested deeper than %d", value,
                      MAX_INTERPOLATION_DEPTH);
  const char *p = value;
  while (*p) {
    const char *pc = strchr(p, '%');
    if (!pc) return strbuf_add(out, p, strlen(p)) ? config_oom(L) : 0;
    if (strbuf_add(out, p, (size_t)(pc - p))) return config_oom(L);
    if (pc[1] == '%') {
      if (strbuf_add(out, "%", 1)) return config_oom(L);
      p = pc + 2;
    } else if (pc[1] == '(') {
      const char *close = strchr(pc + 2, ')');
      if (!close || close == pc + 2 || close[1] != 's')
        return config_bad(L, s, section, key,
                          "'%s': bad interpolation reference (write %%(name)s, or %%%% for '%%')",
                          value);
      char *name = config_lower_dup(pc + 2, (size_t)(close - pc - 2));
      if (!name) return config_oom(L);
      struct raw *r = raw_find(L, section, name);
      if (!r) r = raw_find(L, SEC_DEFAULT, name);
      if (!r) {
        int rc = config_bad(L, s, section, key, "'%s' refers to '%s', which is not set in [%s]",
                            value, name, section);
        free(name);
        return rc;
      }
      free(name);
      r->used = 1;
      int rc = interpolate(L, s, section, key, r->value, out, depth + 1);
      if (rc) return rc;
      p = close + 2;
    } else {
      return config_bad(L, s, section, key,
                        "'%s': '%%' must be followed by '%%' or '(' (write %%%% for '%%')", value);
    }
  }
  return 0;
}

/* ---- reading INI files ---- */

static const char *tracked_section(const char *section) {
  static const char *const all[] = {SEC_SCRAPYD, SEC_SPIDERD, SEC_SERVICES, SEC_SETTINGS,
                                    SEC_RETENTION, SEC_CONCURRENCY, SEC_DEFAULT, SEC_HOOKS};
  for (size_t i = 0; i < COUNT(all); i++)
    if (strcmp(section, all[i]) == 0) return all[i];
  return NULL;
}

/* A key's name = value, or a continuation line of the previous key's value
 * (CONT), in section SECTION ("" before the first header). */
static int on_pair(struct loader *L, const char *section, const char *name, const char *value,
                   int cont) {
  if (!*section)
    return config_report(L, SPD_ECONFIG, "%s:%d: '%s' comes before any [section]", L->path,
                         L->lineno, name);
  const char *sec = tracked_section(section);
  if (!sec) return 0;
  /* Project and spider names are case-sensitive (they are paths). */
  char *lname = sec == SEC_RETENTION || sec == SEC_CONCURRENCY
                    ? strdup(name)
                    : config_lower_dup(name, strlen(name));
  if (!lname) return config_oom(L);
  struct raw *r = raw_find(L, sec, lname);

  if (cont) {
    /* ConfigParser joins a multi-line value with newlines */
    free(lname);
    if (!r || r->file != L->file) return 0;
    size_t a = strlen(r->value), b = strlen(value);
    char *v = realloc(r->value, a + b + 2);
    if (!v) return config_oom(L);
    v[a] = '\n';
    memcpy(v + a + 1, value, b + 1);
    r->value = v;
    return 0;
  }
  if (r && r->file == L->file) {
    int rc = config_report(L, SPD_ECONFIG, "%s:%d: [%s] %s: set twice (first on line %d)",
                           L->path, L->lineno, sec, lname, r->line);
    free(lname);
    return rc;
  }
  if (config_raw_set(L, sec, lname, value)) return config_oom(L);
  return 0;
}

static char *skip_space(char *s) {
  while (*s && isspace((unsigned char)*s)) s++;
  return s;
}

static char *strip_end(char *s) {
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
  return s;
}

/* Where a name or value ends: the first of STOP, a ';' after whitespace (an
 * inline comment) or the end of the line. */
static char *token_end(char *s, const char *stop) {
  int after_space = 0;
  for (; *s; s++) {
    if ((stop && strchr(stop, *s)) || (after_space && *s == ';')) break;
    after_space = isspace((unsigned char)*s);
  }
  return s;
}

/* Line N of the file being parsed, shortened for a message. */
static void line_text(struct loader *L, int lineno, char *buf, size_t size) {
  const char *p = L->text, *end = L->text + L->len;
  for (int i = 1; i < lineno && p < end; i++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    p = nl ? nl + 1 : end;
  }
  size_t n = 0;
  while (p + n < end && p[n] != '\n' && p[n] != '\r') n++;
  if (n >= size) {
    n = size > 4 ? size - 4 : 0;
    snprintf(buf, size, "%.*s...", (int)n, p);
  } else {
    snprintf(buf, size, "%.*s", (int)n, p);
  }
}

static int syntax_error(struct loader *L) {
  char text_of_line[80];
  line_text(L, L->lineno, text_of_line, sizeof(text_of_line));
  return config_report(L, SPD_ECONFIG,
                       "%s:%d: syntax error: '%s' is neither a [section] nor a 'name = value' line",
                       L->path, L->lineno, text_of_line);
}

/* One line, in place. SECTION and PREV (the last key of this section, whose
 * value an indented line continues) are owned by the caller. */
static int parse_line(struct loader *L, char *line, char **section, char **prev) {
  char *start = skip_space(strip_end(line));
  if (!*start || *start == ';' || *start == '#') return 0;
  if (start > line && *prev) {
    *token_end(start, NULL) = '\0';
    return on_pair(L, *section, *prev, strip_end(start), 1);
  }
  char *end;
  if (*start == '[') {
    end = token_end(start + 1, "]");
    if (*end != ']') return syntax_error(L);
    *end = '\0';
    free(*section);
    free(*prev);
    *prev = NULL;
    *section = strdup(start + 1);
    return *section ? 0 : config_oom(L);
  }
  end = token_end(start, "=:");
  if (*end != '=' && *end != ':') return syntax_error(L);
  *end = '\0';
  char *value = skip_space(end + 1);
  *token_end(value, NULL) = '\0';
  free(*prev);
  *prev = strdup(strip_end(start));
  if (!*prev) return config_oom(L);
  return on_pair(L, *section, *prev, strip_end(value), 0);
}

/* Parses L->text the way ConfigParser reads scrapyd.conf: [section] headers,
 * "name = value" or "name: value", '#' and ';' comment lines, indented lines
 * continuing a value. Lines may be of any length. */
static int parse_text(struct loader *L) {
  char *section = strdup(""), *prev = NULL, *line = NULL;
  size_t cap = 0, pos = 0;
  int rc = section ? 0 : config_oom(L);
  if (L->len >= 3 && memcmp(L->text, "\xEF\xBB\xBF", 3) == 0) pos = 3;
  while (!rc && pos < L->len) {
    const char *p = L->text + pos;
    const char *nl = memchr(p, '\n', L->len - pos);
    size_t n = nl ? (size_t)(nl - p) : L->len - pos;
    pos += n + (nl != NULL);
    L->lineno++;
    if (n + 1 > cap) {
      char *grown = realloc(line, n + 1);
      if (!grown) {
        rc = config_oom(L);
        break;
      }
      line = grown;
      cap = n + 1;
    }
    memcpy(line, p, n);
    line[n] = '\0';
    if (memchr(line, '\0', n)) {
      rc = syntax_error(L);
      break;
    }
    rc = parse_line(L, line, &section, &prev);
  }
  free(line);
  free(prev);
  free(section);
  return rc;
}

static int slurp(const char *path, char **out, size_t *len) {
  FILE *f = fopen(path, "rbe");
  if (!f) return -errno;
  char *buf = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? 2 * cap : 4096;
      if (cap > MAX_FILE_SIZE + 1) cap = MAX_FILE_SIZE + 1;
      if (n == cap) {
        rc = -EFBIG;
        goto out;
      }
      char *grown = realloc(buf, cap);
      if (!grown) {
        rc = -ENOMEM;
        goto out;
      }
      buf = grown;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) rc = errno ? -errno : -EIO;
      break;
    }
  }
out:
  fclose(f);
  if (rc) {
    free(buf);
    return rc;
  }
  *out = buf;
  *len = n;
  return 0;
}

static int add_source(struct loader *L, const char *path, const char **stored) {
  config_t *c = L->c;
  char *copy = strdup(path);
  char **grown = copy ? realloc(c->sources, (c->nsources + 1) * sizeof(*grown)) : NULL;
  if (!grown) {
    free(copy);
    return config_oom(L);
  }
  c->sources = grown;
  c->sources[c->nsources++] = copy;
  *stored = copy;
  return 0;
}

static int read_file(struct loader *L, const char *path, int required) {
  char *text = NULL;
  size_t len = 0;
  int rc = slurp(path, &text, &len);
  if (rc == -ENOENT && !required) return 0;
  if (rc == -ENOMEM) return config_oom(L);
  if (rc == -EFBIG)
    return config_report(L, SPD_ECONFIG, "%s: larger than %d bytes, not a config file", path,
                         MAX_FILE_SIZE);
  if (rc) return config_report(L, rc, "%s: cannot read: %s", path, strerror(-rc));

  rc = add_source(L, path, &L->path);
  if (rc) goto out;
  L->text = text;
  L->len = len;
  L->file++;
  L->lineno = 0;
  rc = parse_text(L);
out:
  L->text = NULL;
  L->path = NULL;
  free(text);
  return rc;
}

static int visible(const struct dirent *d) { return d->d_name[0] != '.'; }

/* Python's sorted() on str: code point order, which is byte order in UTF-8 */
static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

/* Every regular file of DIR not starting with a dot, sorted: Scrapyd globs
 * conf.d with "*" and sorts the names. */
static int read_dir(struct loader *L, const char *dir) {
  struct dirent **list = NULL;
  int n = scandir(dir, &list, visible, by_name);
  if (n < 0) return config_report(L, -errno, "%s: cannot read: %s", dir, strerror(errno));
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    char *path = NULL;
    struct stat st;
    if (asprintf(&path, "%s/%s", dir, list[i]->d_name) < 0) {
      rc = config_oom(L);
      break;
    }
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) rc = read_file(L, path, 0);
    free(path);
  }
  for (int i = 0; i < n; i++) free(list[i]);
  free(list);
  return rc;
}

/* A missing path is skipped unless REQUIRED; a directory stands for its files. */
static int read_path(struct loader *L, const char *path, int required) {
  struct stat st;
  if (stat(path, &st)) {
    int e = errno;
    if ((e == ENOENT || e == ENOTDIR) && !required) return 0;
    return config_report(L, e == ENOENT ? SPD_ECONFIG : -e, "%s: cannot read: %s", path,
                         strerror(e));
  }
  if (S_ISDIR(st.st_mode)) return read_dir(L, path);
  return read_file(L, path, required);
}

/* Scrapy's closest_scrapy_cfg(): the first scrapy.cfg from cwd upwards. */
static int find_scrapy_cfg(const char *cwd, char **out) {
  *out = NULL;
  char *dir = strdup(cwd);
  if (!dir) return -ENOMEM;
  for (;;) {
    char *path = NULL;
    struct stat st;
    if (asprintf(&path, "%s/scrapy.cfg", strcmp(dir, "/") == 0 ? "" : dir) < 0) {
      free(dir);
      return -ENOMEM;
    }
    if (stat(path, &st) == 0) {
      /* Scrapy stops at the first one that exists, whatever it is */
      if (S_ISREG(st.st_mode)) *out = path;
      else free(path);
      break;
    }
    free(path);
    char *slash = strrchr(dir, '/');
    if (!slash || strcmp(dir, "/") == 0) break;
    if (slash == dir) slash[1] = '\0';
    else *slash = '\0';
  }
  free(dir);
  return 0;
}

static const char *home_dir(void) {
  const char *home = getenv("HOME");
  if (home && *home) return home;
  struct passwd *pw = getpwuid(getuid());
  return pw ? pw->pw_dir : NULL;
}

static int read_default_files(struct loader *L) {
  int rc = read_path(L, "/etc/scrapyd/scrapyd.conf", 0);
  if (!rc) rc = read_path(L, "/etc/scrapyd/conf.d", 0);
  if (rc) return rc;

  char *cwd = getcwd(NULL, 0);
  char *path = NULL;
  if (cwd) {
    if (asprintf(&path, "%s/scrapyd.conf", cwd) < 0) path = NULL;
  } else {
    path = strdup("scrapyd.conf");
  }
  if (!path) rc = config_oom(L);
  if (!rc) rc = read_path(L, path, 0);
  free(path);
  path = NULL;

  const char *home = home_dir();
  if (!rc && home) {
    if (asprintf(&path, "%s/.scrapyd.conf", home) < 0) rc = config_oom(L);
    else rc = read_path(L, path, 0);
    free(path);
    path = NULL;
  }

  if (!rc && cwd) {
    if (find_scrapy_cfg(cwd, &path)) rc = config_oom(L);
    else if (path) rc = read_file(L, path, 0);
    free(path);
  }
  free(cwd);
  return rc;
}

/* SPIDERD_CONFIG_FILES, when set, stands for sources 2-6 (not --config). */
static int read_listed_files(struct loader *L, const char *list) {
  char *copy = strdup(list);
  if (!copy) return config_oom(L);
  int rc = 0;
  char *save = NULL;
  for (char *p = strtok_r(copy, ":", &save); p && !rc; p = strtok_r(NULL, ":", &save))
    rc = read_path(L, p, 0);
  free(copy);
  return rc;
}

/* ---- applying the merged files ---- */

static int resolve(struct loader *L, const struct src *s, const struct raw *r, strbuf_t *v) {
  v->len = 0;
  if (strbuf_add(v, "", 0)) return config_oom(L);
  return interpolate(L, s, r->section, r->name, r->value, v, 1);
}

/* The [scrapyd] keys of files that neither Scrapyd nor spiderd knows, for a
 * warning at start: a plugin's setting is lost on spiderd. A key only other
 * values refer to (ConfigParser's way of naming a common part) is left out:
 * it did its work. */
static int note_unknown(struct loader *L) {
  int rc = 0;
  for (size_t i = 0; i < L->nraw && !rc; i++) {
    const struct raw *r = &L->raw[i];
    if (r->section != SEC_SCRAPYD || !r->src || r->used || config_is_class_key(r->name) ||
        config_key_find(SEC_SCRAPYD, r->name))
      continue;
    struct src s = {SRC_FILE, r->src};
    rc = config_class_note(L, &s, CONFIG_CLASS_OTHER, r->name, NULL);
  }
  return rc;
}

static int apply_files(struct loader *L) {
  config_t *c = L->c;
  strbuf_t v = {0};
  int rc = 0;

  for (size_t i = 0; i < L->nraw && !rc; i++) {
    const struct raw *r = &L->raw[i];
    struct src s = {r->src ? SRC_FILE : SRC_DEFAULT, r->src};
    if (r->section == SEC_SERVICES) {
      /* an empty value disables a service but keeps its place (Scrapyd 1.5) */
      rc = resolve(L, &s, r, &v);
      if (!rc && v.len && config_pairs_put(&c->services, &c->nservices, r->name, v.p))
        rc = config_oom(L);
      if (!rc && r->src) rc = config_class_note(L, &s, CONFIG_CLASS_SERVICE, r->name, v.p);
    } else if (r->section == SEC_SETTINGS) {
      rc = resolve(L, &s, r, &v);
      if (!rc && config_pairs_put(&c->settings, &c->nsettings, r->name, v.p)) rc = config_oom(L);
    } else if (r->section == SEC_RETENTION) {
      rc = resolve(L, &s, r, &v);
      if (!rc) rc = config_retention_put(L, &s, r->name, v.p);
    } else if (r->section == SEC_CONCURRENCY) {
      rc = resolve(L, &s, r, &v);
      if (!rc) rc = config_limit_put(L, &s, r->name, v.p);
    } else if (r->src &&
               (r->section == SEC_SCRAPYD || r->section == SEC_SPIDERD || r->section == SEC_HOOKS)) {
      const struct key *k = config_key_find(r->section, r->name);
      if (!k) {
        /* only a class is resolved: other unknown keys stay ignored, even
         * with a value ConfigParser could not interpolate */
        if (r->section == SEC_SCRAPYD && config_is_class_key(r->name) &&
            (rc = resolve(L, &s, r, &v)))
          continue;
        rc = config_unknown_key(L, &s, r->section, r->name,
                                r->section == SEC_SCRAPYD ? v.p : NULL);
        continue;
      }
      rc = resolve(L, &s, r, &v);
      if (!rc) rc = config_apply(L, k, v.p, &s);
    }
  }
  strbuf_release(&v);
  return rc ? rc : note_unknown(L);
}

/* ---- flags ---- */

static int parse_flags(struct loader *L, int argc, char **argv) {
  if (argc <= 0) return 0;
  L->flags = calloc((size_t)argc, sizeof(*L->flags));
  if (!L->flags) return config_oom(L);
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    if (arg[0] != '-') return config_report(L, SPD_ECONFIG, "unexpected argument '%s'", arg);
    const char *eq = strchr(arg, '=');
    size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
    struct flag f = {NULL, NULL, NULL};
    if (n == 5 && strncmp(arg, "--set", 5) == 0) {
      f.name = "--set";
    } else if (n == 8 && strncmp(arg, "--config", 8) == 0) {
      f.name = "--config";
    } else if ((f.key = config_key_of_flag(arg, n)) != NULL) {
      f.name = config_key_flag(f.key);
    }
    if (!f.name) return config_report(L, SPD_ECONFIG, "unknown option '%.*s'", (int)n, arg);
    if (eq) f.value = eq + 1;
    else if (f.key && config_key_is_bool(f.key)) f.value = "on"; /* "--insecure" alone */
    else if (i + 1 < argc) f.value = argv[++i];
    else return config_report(L, SPD_ECONFIG, "option '%s' requires a value", f.name);
    L->flags[L->nflags++] = f;
  }
  return 0;
}

/* --set SECTION.KEY=VALUE: the same rules as a file's key. */
static int apply_set(struct loader *L, const char *arg) {
  config_t *c = L->c;
  const char *eq = strchr(arg, '=');
  const char *dot = eq ? memchr(arg, '.', (size_t)(eq - arg)) : NULL;
  if (!dot || dot == arg || dot + 1 == eq)
    return config_report(L, SPD_ECONFIG, "flag --set: '%s' is not SECTION.KEY=VALUE", arg);
  char section[32];
  size_t sn = (size_t)(dot - arg);
  snprintf(section, sizeof(section), "%.*s", (int)sn, arg);
  const char *sec = sn < sizeof(section) ? tracked_section(section) : NULL;
  if (!sec || sec == SEC_DEFAULT)
    return config_report(L, SPD_ECONFIG,
                         "flag --set: unknown section '%.*s' (scrapyd, spiderd, services, "
                         "settings, retention, concurrency or hooks)",
                         (int)sn, arg);
  size_t nn = (size_t)(eq - dot - 1);
  char *name = sec == SEC_RETENTION || sec == SEC_CONCURRENCY
                   ? strndup(dot + 1, nn)
                   : config_lower_dup(dot + 1, nn);
  if (!name) return config_oom(L);
  const char *value = eq + 1;
  struct src s = {SRC_SET, "--set"};
  int rc = 0;
  if (sec == SEC_SERVICES) {
    if (!*value) config_pairs_del(c->services, &c->nservices, name);
    else if (config_pairs_put(&c->services, &c->nservices, name, value)) rc = config_oom(L);
    if (!rc) rc = config_class_note(L, &s, CONFIG_CLASS_SERVICE, name, value);
  } else if (sec == SEC_SETTINGS) {
    if (config_pairs_put(&c->settings, &c->nsettings, name, value)) rc = config_oom(L);
  } else if (sec == SEC_RETENTION) {
    rc = config_retention_put(L, &s, name, value);
  } else if (sec == SEC_CONCURRENCY) {
    rc = config_limit_put(L, &s, name, value);
  } else {
    const struct key *k = config_key_find(sec, name);
    rc = k ? config_apply(L, k, value, &s) : config_unknown_key(L, &s, sec, name, value);
    if (!rc && !k && sec == SEC_SCRAPYD && !config_is_class_key(name))
      rc = config_class_note(L, &s, CONFIG_CLASS_OTHER, name, NULL);
  }
  free(name);
  return rc;
}

static int apply_flags(struct loader *L) {
  int rc = 0;
  for (size_t i = 0; i < L->nflags && !rc; i++) {
    const struct flag *f = &L->flags[i];
    struct src s = {SRC_FLAG, f->name};
    if (f->key) rc = config_apply(L, f->key, f->value, &s);
    else if (strcmp(f->name, "--set") == 0) rc = apply_set(L, f->value);
  }
  return rc;
}

static int read_config_flags(struct loader *L) {
  int rc = 0;
  for (size_t i = 0; i < L->nflags && !rc; i++)
    if (!L->flags[i].key && strcmp(L->flags[i].name, "--config") == 0)
      rc = read_path(L, L->flags[i].value, 1);
  return rc;
}

/* ---- derived values ---- */

/* What is derived from the rest, and what no single key can check. */
static int finish(struct loader *L) {
  config_t *c = L->c;
  int rc = 0;

  /* derived last, so that a dbs_dir from any source moves the database */
  if (!c->store || !*c->store) {
    char *store = NULL;
    size_t n = strlen(c->dbs_dir);
    while (n > 1 && c->dbs_dir[n - 1] == '/') n--;
    if (strcmp(c->dbs_dir, ":memory:") == 0) store = strdup("sqlite::memory:");
    else if (n == 0) store = strdup("sqlite:spiderd.db");
    else if (n == 1 && c->dbs_dir[0] == '/') store = strdup("sqlite:/spiderd.db");
    else if (asprintf(&store, "sqlite:%.*s/spiderd.db", (int)n, c->dbs_dir) < 0) store = NULL;
    if (!store) return config_oom(L);
    free(c->store);
    c->store = store;
  }

  /* half a TLS set-up would silently serve plain HTTP */
  if (!c->https_cert[0] != !c->https_key[0])
    return config_report(L, SPD_ECONFIG,
                         "[spiderd] https_cert and https_key go together: %s is set, %s is not",
                         c->https_cert[0] ? "https_cert" : "https_key",
                         c->https_cert[0] ? "https_key" : "https_cert");
  if (c->https_key_password[0] && c->https_key_password_file[0])
    return config_report(L, SPD_ECONFIG,
                         "[spiderd] https_key_password and https_key_password_file: "
                         "set one of them");

  /* Scrapyd treats a file: URL as the local directory of its path; keeping
   * items_dir a plain path means "not remote" always means "a directory" */
  const char *it = c->items_dir;
  if (strncasecmp(it, "file://", 7) == 0) {
    const char *slash = strchr(it + 7, '/');
    rc = config_set_string(L, &c->items_dir, slash ? slash : "");
  }
  return rc;
}

/* ---- public ---- */

int config_load(config_t *c, int argc, char **argv, char *err, size_t errlen) {
  struct loader L;
  int rc;

  memset(c, 0, sizeof(*c));
  memset(&L, 0, sizeof(L));
  L.c = c;
  L.err = err;
  L.errlen = errlen;
  if (err && errlen) err[0] = '\0';

  rc = parse_flags(&L, argc, argv);
  if (rc) goto out;
  rc = config_set_defaults(&L);
  if (rc) goto out;
  const char *list = getenv("SPIDERD_CONFIG_FILES");
  rc = list ? read_listed_files(&L, list) : read_default_files(&L);
  if (rc) goto out;
  rc = read_config_flags(&L);
  if (rc) goto out;
  rc = apply_files(&L);
  if (rc) goto out;
  rc = config_apply_env(&L);
  if (rc) goto out;
  rc = apply_flags(&L);
  if (rc) goto out;
  rc = finish(&L);
out:
  raw_free(&L);
  free(L.flags);
  if (rc) config_release(c);
  return rc;
}
