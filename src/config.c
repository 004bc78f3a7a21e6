/* Configuration loading; the sources and their order are in config.h.
 *
 * INI files are merged first into one raw view, the way Python's
 * ConfigParser merges Scrapyd's files, and only then are the merged values
 * interpolated ("%(name)s", "%%") and validated, each naming the file that
 * gave its final value. So a scrapyd.conf that Scrapyd accepts means the same
 * here, including a value that is overridden by a later file. Environment
 * variables and flags are validated one by one as they are applied.
 *
 * Differences from ConfigParser that come from libinih and are kept: a ';'
 * after whitespace starts an inline comment, lines are limited to inih's
 * buffer (a longer line is an error, not a silent split), and [DEFAULT] only
 * serves as a fallback for interpolation.
 */
#include "config.h"

#include "core/names.h"
#include "error.h"
#include "http/trust.h"
#include "strbuf.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef SPIDERD_DEFAULT_PYTHON
#error "SPIDERD_DEFAULT_PYTHON must be defined by the build"
#endif
#ifndef SPIDERD_PYTHONDIR
#error "SPIDERD_PYTHONDIR must be defined by the build"
#endif
#ifndef SPIDERD_UI_DIR
#error "SPIDERD_UI_DIR must be defined by the build"
#endif

#define FORMAT(a, b) __attribute__((format(printf, a, b)))

/* A config file bigger than this is a mistake (a device, a log), not config. */
#define MAX_FILE_SIZE (16 * 1024 * 1024)
/* Python's configparser.MAX_INTERPOLATION_DEPTH. */
#define MAX_INTERPOLATION_DEPTH 10

static const char SEC_SCRAPYD[] = "scrapyd";
static const char SEC_SPIDERD[] = "spiderd";
static const char SEC_SERVICES[] = "services";
static const char SEC_SETTINGS[] = "settings";
static const char SEC_RETENTION[] = "retention";
static const char SEC_CONCURRENCY[] = "concurrency";
static const char SEC_DEFAULT[] = "DEFAULT";

enum ktype { T_STR, T_USER, T_LEVEL, T_MECH, T_NETS, T_INT, T_PORT, T_BOOL, T_REAL, T_SIZE };
enum kmin { M_NONE, M_GE0, M_GE1, M_GT0, M_GE1024 };

struct key {
  const char *section;
  const char *name;
  enum ktype type;
  enum kmin min;
  size_t off;
  const char *def; /* NULL: computed (node_name) or derived at the end (store) */
  const char *flag;
};

#define KEY(sec, field, type, min, def, flag) \
  {sec, #field, type, min, offsetof(config_t, field), def, flag}

static const struct key keys[] = {
    KEY(SEC_SCRAPYD, bind_address, T_STR, M_NONE, "127.0.0.1", "--bind"),
    KEY(SEC_SCRAPYD, http_port, T_PORT, M_NONE, "6800", "--port"),
    KEY(SEC_SCRAPYD, unix_socket_path, T_STR, M_NONE, "", "--unix-socket"),
    KEY(SEC_SCRAPYD, username, T_USER, M_NONE, "", NULL),
    KEY(SEC_SCRAPYD, password, T_STR, M_NONE, "", NULL),
    KEY(SEC_SCRAPYD, poll_interval, T_REAL, M_GT0, "5.0", NULL),
    KEY(SEC_SCRAPYD, max_proc, T_INT, M_GE0, "0", "--max-proc"),
    KEY(SEC_SCRAPYD, max_proc_per_cpu, T_INT, M_GE1, "4", NULL),
    KEY(SEC_SCRAPYD, logs_dir, T_STR, M_NONE, "logs", "--logs-dir"),
    KEY(SEC_SCRAPYD, items_dir, T_STR, M_NONE, "", "--items-dir"),
    KEY(SEC_SCRAPYD, jobs_dir, T_STR, M_NONE, "", NULL),
    KEY(SEC_SCRAPYD, jobs_to_keep, T_INT, M_GE0, "5", NULL),
    KEY(SEC_SCRAPYD, runner, T_STR, M_NONE, "scrapyd.runner", NULL),
    KEY(SEC_SCRAPYD, prefix_header, T_STR, M_NONE, "x-forwarded-prefix", NULL),
    KEY(SEC_SCRAPYD, node_name, T_STR, M_NONE, NULL, "--node-name"),
    KEY(SEC_SCRAPYD, debug, T_BOOL, M_NONE, "off", NULL),
    KEY(SEC_SCRAPYD, eggs_dir, T_STR, M_NONE, "eggs", "--eggs-dir"),
    KEY(SEC_SCRAPYD, finished_to_keep, T_INT, M_GE0, "100", NULL),
    KEY(SEC_SCRAPYD, dbs_dir, T_STR, M_NONE, "dbs", "--dbs-dir"),
    KEY(SEC_SPIDERD, store, T_STR, M_NONE, NULL, "--store"),
    KEY(SEC_SPIDERD, python, T_STR, M_NONE, SPIDERD_DEFAULT_PYTHON, "--python"),
    KEY(SEC_SPIDERD, pythonpath, T_STR, M_NONE, SPIDERD_PYTHONDIR, NULL),
    KEY(SEC_SPIDERD, ui_dir, T_STR, M_NONE, SPIDERD_UI_DIR, "--ui-dir"),
    KEY(SEC_SPIDERD, https_cert, T_STR, M_NONE, "", NULL),
    KEY(SEC_SPIDERD, https_key, T_STR, M_NONE, "", NULL),
    KEY(SEC_SPIDERD, https_key_password, T_STR, M_NONE, "", NULL),
    KEY(SEC_SPIDERD, https_key_password_file, T_STR, M_NONE, "", NULL),
    KEY(SEC_SPIDERD, https_priorities, T_STR, M_NONE, "NORMAL:-VERS-TLS1.0:-VERS-TLS1.1", NULL),
    KEY(SEC_SPIDERD, store_password_file, T_STR, M_NONE, "", NULL),
    KEY(SEC_SPIDERD, cancel_grace, T_REAL, M_GE0, "60", NULL),
    KEY(SEC_SPIDERD, shutdown_grace, T_REAL, M_GE0, "10", NULL),
    KEY(SEC_SPIDERD, drain_grace, T_REAL, M_GE0, "30", NULL),
    KEY(SEC_SPIDERD, job_timeout, T_REAL, M_GE0, "0", NULL),
    KEY(SEC_SPIDERD, job_retries, T_INT, M_GE0, "0", NULL),
    KEY(SEC_SPIDERD, job_memory_limit, T_SIZE, M_GE0, "0", NULL),
    KEY(SEC_SPIDERD, job_cpu_limit, T_REAL, M_GE0, "0", NULL),
    KEY(SEC_SPIDERD, job_max_procs, T_INT, M_GE0, "0", NULL),
    KEY(SEC_SPIDERD, job_log_limit, T_SIZE, M_GE0, "0", NULL),
    KEY(SEC_SPIDERD, job_items_limit, T_SIZE, M_GE0, "0", NULL),
    KEY(SEC_SPIDERD, job_limits, T_MECH, M_NONE, "auto", NULL),
    KEY(SEC_SPIDERD, warm_templates, T_INT, M_GE0, "4", NULL),
    KEY(SEC_SPIDERD, warm_idle, T_REAL, M_GT0, "600", NULL),
    KEY(SEC_SPIDERD, retry_backoff, T_REAL, M_GE0, "10", NULL),
    KEY(SEC_SPIDERD, heartbeat_interval, T_REAL, M_GT0, "5", NULL),
    KEY(SEC_SPIDERD, heartbeat_timeout, T_REAL, M_GE0, "60", NULL),
    KEY(SEC_SPIDERD, max_upload, T_SIZE, M_GE1024, "64M", NULL),
    KEY(SEC_SPIDERD, http_timeout, T_INT, M_GE1, "60", NULL),
    KEY(SEC_SPIDERD, http_connections, T_INT, M_GE1, "4096", NULL),
    KEY(SEC_SPIDERD, list_page, T_INT, M_GE1, "1000", NULL),
    KEY(SEC_SPIDERD, log_file, T_STR, M_NONE, "", "--log-file"),
    KEY(SEC_SPIDERD, log_level, T_LEVEL, M_NONE, "info", "--log-level"),
    KEY(SEC_SPIDERD, pidfile, T_STR, M_NONE, "", "--pidfile"),
    KEY(SEC_SPIDERD, scheduler, T_BOOL, M_NONE, "on", NULL),
    KEY(SEC_SPIDERD, scheduler_lease, T_REAL, M_GT0, "10", NULL),
    KEY(SEC_SPIDERD, probes_public, T_BOOL, M_NONE, "on", NULL),
    KEY(SEC_SPIDERD, insecure, T_BOOL, M_NONE, "off", "--insecure"),
    KEY(SEC_SPIDERD, auth_fail_limit, T_INT, M_GE0, "10", NULL),
    KEY(SEC_SPIDERD, auth_throttle_loopback, T_BOOL, M_NONE, "off", NULL),
    KEY(SEC_SPIDERD, trusted_proxies, T_NETS, M_NONE, "", NULL),
    KEY(SEC_SPIDERD, schedule_horizon, T_REAL, M_GT0, "3", NULL),
    KEY(SEC_SPIDERD, misfire_grace, T_REAL, M_GE0, "60", NULL),
    KEY(SEC_SPIDERD, webhooks, T_STR, M_NONE, "", NULL),
    KEY(SEC_SPIDERD, webhook_events, T_STR, M_NONE, "job.finished job.failed", NULL),
    KEY(SEC_SPIDERD, webhook_secret, T_STR, M_NONE, "", NULL),
    KEY(SEC_SPIDERD, webhook_timeout, T_REAL, M_GT0, "10", NULL),
    KEY(SEC_SPIDERD, webhook_retries, T_INT, M_GE0, "8", NULL),
    KEY(SEC_SPIDERD, webhook_backoff, T_REAL, M_GT0, "1", NULL),
    KEY(SEC_SPIDERD, webhook_allow_private, T_STR, M_NONE, "", NULL),
    KEY(SEC_SPIDERD, history_per_spider, T_INT, M_GE0, "0", NULL),
    KEY(SEC_SPIDERD, history_days, T_REAL, M_GE0, "0", NULL),
    KEY(SEC_SPIDERD, events_days, T_REAL, M_GE0, "30", NULL),
    KEY(SEC_SPIDERD, janitor_interval, T_REAL, M_GT0, "60", NULL),
    KEY(SEC_SPIDERD, node_url, T_STR, M_NONE, "", "--node-url"),
    KEY(SEC_SPIDERD, node_heartbeat, T_REAL, M_GT0, "3", NULL),
    KEY(SEC_SPIDERD, node_timeout, T_REAL, M_GT0, "15", NULL),
    KEY(SEC_SPIDERD, object_store, T_STR, M_NONE, "", NULL),
    KEY(SEC_SPIDERD, object_store_endpoint, T_STR, M_NONE, "", NULL),
    KEY(SEC_SPIDERD, object_store_region, T_STR, M_NONE, "us-east-1", NULL),
    KEY(SEC_SPIDERD, object_store_credentials, T_STR, M_NONE, "", NULL),
    KEY(SEC_SPIDERD, object_store_flush, T_REAL, M_GT0, "5", NULL),
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* Keys of Scrapyd's default_scrapyd.conf that name Python classes. spiderd
 * ignores them, but a file may refer to them with %(name)s. */
static const char *const scrapyd_class_keys[][2] = {
    {"application", "scrapyd.app.application"},
    {"launcher", "scrapyd.launcher.Launcher"},
    {"webroot", "scrapyd.website.Root"},
    {"spiderqueue", "scrapyd.spiderqueue.SqliteSpiderQueue"},
    {"poller", "scrapyd.poller.QueuePoller"},
    {"eggstorage", "scrapyd.eggstorage.FilesystemEggStorage"},
    {"jobstorage", "scrapyd.jobstorage.MemoryJobStorage"},
};

static const char *const default_services[][2] = {
    {"daemonstatus.json", "scrapyd.webservice.DaemonStatus"},
    {"addversion.json", "scrapyd.webservice.AddVersion"},
    {"schedule.json", "scrapyd.webservice.Schedule"},
    {"cancel.json", "scrapyd.webservice.Cancel"},
    {"status.json", "scrapyd.webservice.Status"},
    {"listprojects.json", "scrapyd.webservice.ListProjects"},
    {"listversions.json", "scrapyd.webservice.ListVersions"},
    {"listspiders.json", "scrapyd.webservice.ListSpiders"},
    {"delproject.json", "scrapyd.webservice.DeleteProject"},
    {"delversion.json", "scrapyd.webservice.DeleteVersion"},
    {"listjobs.json", "scrapyd.webservice.ListJobs"},
};

static const char *const scrapyd_env[][2] = {
    {"SCRAPYD_BIND_ADDRESS", "bind_address"},
    {"SCRAPYD_HTTP_PORT", "http_port"},
    {"SCRAPYD_UNIX_SOCKET_PATH", "unix_socket_path"},
    {"SCRAPYD_USERNAME", "username"},
    {"SCRAPYD_PASSWORD", "password"},
};

static const char *const log_levels[] = {"debug", "info", "warning", "error"};
/* How job resource limits are enforced (run/limits.c). */
static const char *const limit_mechs[] = {"auto", "cgroup", "rlimit", "off"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* One key of the merged INI view. */
struct raw {
  const char *section; /* one of the SEC_* strings */
  char *name;          /* lower-cased, as ConfigParser's optionxform */
  char *value;         /* uninterpolated */
  const char *src;     /* the file (owned by config_t.sources); NULL: built in */
  int file;            /* which file set it, to catch a key set twice in one */
  int line;
};

enum src_kind { SRC_DEFAULT, SRC_FILE, SRC_ENV, SRC_FLAG, SRC_SET };

/* Where a value came from, for messages. */
struct src {
  enum src_kind kind;
  const char *name; /* path, variable or flag */
};

/* A flag from argv, kept until after the files and environment are read. */
struct flag {
  const struct key *key; /* NULL for --set and --config */
  const char *name;      /* "--port" */
  const char *value;
};

struct loader {
  config_t *c;
  char *err;
  size_t errlen;
  struct raw *raw;
  size_t nraw, capraw;
  struct flag *flags;
  size_t nflags;

  /* the file being parsed */
  const char *path;
  const char *text;
  size_t len, pos;
  int file, lineno;
  int have_prev; /* a key was read since the last section header */
  int cont;      /* the current line continues the previous key's value */
  int rc;        /* first error inside inih's callbacks */
  int errline;   /* and its line: inih may have seen a syntax error before */
};

static int report(struct loader *L, int code, const char *fmt, ...) FORMAT(3, 4);
static int bad(struct loader *L, const struct src *s, const char *section,
               const char *name, const char *fmt, ...) FORMAT(5, 6);

static int report(struct loader *L, int code, const char *fmt, ...) {
  if (L->err && L->errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->err, L->errlen, fmt, ap);
    va_end(ap);
  }
  return code;
}

static int oom(struct loader *L) { return report(L, -ENOMEM, "out of memory"); }

/* A value is rejected: the message names its source, section and key. */
static int bad(struct loader *L, const struct src *s, const char *section,
               const char *name, const char *fmt, ...) {
  char reason[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof(reason), fmt, ap);
  va_end(ap);
  /* a rejected value may be a secret, or a URL holding one */
  if (strstr(name, "password") || strstr(name, "secret")) {
    snprintf(reason, sizeof(reason), "bad value (not shown: it is a secret)");
  } else if (!strcmp(name, "store")) {
    char shown[sizeof(reason)];
    config_redact_url(reason, shown, sizeof(shown));
    memcpy(reason, shown, sizeof(reason));
  }
  switch (s->kind) {
  case SRC_FILE:
    return report(L, SPD_ECONFIG, "%s: [%s] %s: %s", s->name, section, name, reason);
  case SRC_ENV:
    return report(L, SPD_ECONFIG, "environment %s: %s", s->name, reason);
  case SRC_FLAG:
    return report(L, SPD_ECONFIG, "flag %s: %s", s->name, reason);
  case SRC_SET:
    return report(L, SPD_ECONFIG, "flag --set: [%s] %s: %s", section, name, reason);
  case SRC_DEFAULT:
  default:
    return report(L, SPD_ECONFIG, "built-in default [%s] %s: %s", section, name, reason);
  }
}

static char *lower_dup(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (!d) return NULL;
  for (size_t i = 0; i < n; i++) d[i] = (char)tolower((unsigned char)s[i]);
  d[n] = '\0';
  return d;
}

static const struct key *key_find(const char *section, const char *name) {
  for (size_t i = 0; i < NKEYS; i++)
    if (keys[i].section == section && strcmp(keys[i].name, name) == 0) return &keys[i];
  return NULL;
}

/* ---- pairs ([services], [settings]) ---- */

static void pairs_free(config_pair_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(p[i].name);
    free(p[i].value);
  }
  free(p);
}

/* Replaces NAME's value in place (ConfigParser keeps a key's first position)
 * or appends it. */
static int pairs_put(config_pair_t **arr, size_t *n, const char *name, const char *value) {
  char *v = strdup(value);
  if (!v) return -ENOMEM;
  for (size_t i = 0; i < *n; i++)
    if (strcmp((*arr)[i].name, name) == 0) {
      free((*arr)[i].value);
      (*arr)[i].value = v;
      return 0;
    }
  char *k = strdup(name);
  config_pair_t *grown = realloc(*arr, (*n + 1) * sizeof(**arr));
  if (!k || !grown) {
    free(k);
    free(v);
    if (grown) *arr = grown;
    return -ENOMEM;
  }
  *arr = grown;
  grown[*n].name = k;
  grown[*n].value = v;
  (*n)++;
  return 0;
}

static void pairs_del(config_pair_t *arr, size_t *n, const char *name) {
  for (size_t i = 0; i < *n; i++)
    if (strcmp(arr[i].name, name) == 0) {
      free(arr[i].name);
      free(arr[i].value);
      memmove(&arr[i], &arr[i + 1], (*n - i - 1) * sizeof(*arr));
      (*n)--;
      return;
    }
}

/* ---- typed values ---- */

static void trim(const char **s, size_t *n) {
  while (*n && isspace((unsigned char)**s)) (*s)++, (*n)--;
  while (*n && isspace((unsigned char)(*s)[*n - 1])) (*n)--;
}

/* Python's int(): optional sign, decimal digits, single '_' between digits,
 * surrounding whitespace. Returns 0, -EINVAL or -ERANGE. */
static int parse_int_n(const char *s, size_t n, long long *out) {
  trim(&s, &n);
  const char *p = s, *end = s + n;
  int neg = 0;
  if (p < end && (*p == '+' || *p == '-')) neg = *p++ == '-';
  if (p == end || !isdigit((unsigned char)*p)) return -EINVAL;
  unsigned long long v = 0;
  int range = 0;
  for (; p < end; p++) {
    if (isdigit((unsigned char)*p)) {
      unsigned d = (unsigned)(*p - '0');
      if (v > ((unsigned long long)LLONG_MAX - d) / 10) range = 1;
      else v = v * 10 + d;
    } else if (*p == '_' && p + 1 < end && isdigit((unsigned char)p[1]) &&
               isdigit((unsigned char)p[-1])) {
      continue;
    } else {
      return -EINVAL;
    }
  }
  if (range) return -ERANGE;
  *out = neg ? -(long long)v : (long long)v;
  return 0;
}

static int parse_real(const char *s, double *out) {
  size_t n = strlen(s);
  trim(&s, &n);
  if (!n) return -EINVAL;
  /* strtod reads hex floats, Python's float() does not */
  for (size_t i = 0; i < n; i++)
    if (s[i] == 'x' || s[i] == 'X') return -EINVAL;
  char buf[64], *end;
  if (n >= sizeof(buf)) return -EINVAL;
  memcpy(buf, s, n);
  buf[n] = '\0';
  errno = 0;
  double d = strtod(buf, &end);
  if (*end) return -EINVAL;
  if (!isfinite(d)) return -ERANGE;
  *out = d;
  return 0;
}

/* Bytes, optionally with a binary K, M or G suffix. */
static int parse_size(const char *s, long long *out) {
  size_t n = strlen(s);
  trim(&s, &n);
  long long mult = 1;
  if (n) switch (s[n - 1]) {
    case 'k': case 'K': mult = 1LL << 10; n--; break;
    case 'm': case 'M': mult = 1LL << 20; n--; break;
    case 'g': case 'G': mult = 1LL << 30; n--; break;
    default: break;
    }
  long long v;
  int rc = parse_int_n(s, n, &v);
  if (rc) return rc;
  if (v > LLONG_MAX / mult || v < LLONG_MIN / mult) return -ERANGE;
  *out = v * mult;
  return 0;
}

int config_parse_bool(const char *s, int *out) {
  static const char *const yes[] = {"1", "yes", "true", "on"};
  static const char *const no[] = {"0", "no", "false", "off"};
  for (size_t i = 0; i < COUNT(yes); i++) {
    if (strcasecmp(s, yes[i]) == 0) return *out = 1, 0;
    if (strcasecmp(s, no[i]) == 0) return *out = 0, 0;
  }
  return -EINVAL;
}

static const char *min_text(enum kmin m) {
  switch (m) {
  case M_GE0: return ">= 0";
  case M_GE1: return ">= 1";
  case M_GT0: return "> 0";
  case M_GE1024: return ">= 1024";
  case M_NONE:
  default: return "";
  }
}

static int below_min(enum kmin m, double v) {
  switch (m) {
  case M_GE0: return v < 0;
  case M_GE1: return v < 1;
  case M_GT0: return v <= 0;
  case M_GE1024: return v < 1024;
  case M_NONE:
  default: return 0;
  }
}

static int set_string(struct loader *L, char **field, const char *v) {
  char *copy = strdup(v);
  if (!copy) return oom(L);
  free(*field);
  *field = copy;
  return 0;
}

/* Addresses and CIDR blocks: refused at start, not at the first request. */
static int nets_check(struct loader *L, const struct key *k, const char *v, const struct src *s) {
  http_trust_t t;
  char why[256];
  if (http_trust_parse(v, &t, why, sizeof(why))) return bad(L, s, k->section, k->name, "%s", why);
  http_trust_release(&t);
  return set_string(L, (char **)((char *)L->c + k->off), v);
}

/* Validates V for key K and stores it in the config. */
static int apply(struct loader *L, const struct key *k, const char *v, const struct src *s) {
  void *field = (char *)L->c + k->off;
  long long n;
  double d;
  int b, rc;

  switch (k->type) {
  case T_STR:
    return set_string(L, field, v);
  case T_USER:
    /* Basic auth joins user and password with ':' (Scrapyd refuses it too) */
    if (strchr(v, ':')) return bad(L, s, k->section, k->name, "'%s' must not contain ':'", v);
    return set_string(L, field, v);
  case T_LEVEL:
    for (size_t i = 0; i < COUNT(log_levels); i++)
      if (strcasecmp(v, log_levels[i]) == 0) return set_string(L, field, log_levels[i]);
    return bad(L, s, k->section, k->name, "'%s' is not one of debug, info, warning, error", v);
  case T_MECH:
    for (size_t i = 0; i < COUNT(limit_mechs); i++)
      if (strcasecmp(v, limit_mechs[i]) == 0) return set_string(L, field, limit_mechs[i]);
    return bad(L, s, k->section, k->name, "'%s' is not one of auto, cgroup, rlimit, off", v);
  case T_NETS:
    return nets_check(L, k, v, s);
  case T_INT:
    rc = parse_int_n(v, strlen(v), &n);
    if (rc == -EINVAL) return bad(L, s, k->section, k->name, "'%s' is not an integer", v);
    if (rc || n > INT_MAX || n < INT_MIN)
      return bad(L, s, k->section, k->name, "'%s' is too large", v);
    if (below_min(k->min, (double)n))
      return bad(L, s, k->section, k->name, "'%s' is out of range (must be %s)", v,
                 min_text(k->min));
    *(int *)field = (int)n;
    return 0;
  case T_PORT:
    rc = parse_int_n(v, strlen(v), &n);
    if (rc || n < 0 || n > 65535)
      return bad(L, s, k->section, k->name, "'%s' is not a port (0-65535)", v);
    *(int *)field = (int)n;
    return 0;
  case T_BOOL:
    if (config_parse_bool(v, &b))
      return bad(L, s, k->section, k->name,
                 "'%s' is not a boolean (1/yes/true/on or 0/no/false/off)", v);
    *(int *)field = b;
    return 0;
  case T_REAL:
    rc = parse_real(v, &d);
    if (rc == -EINVAL) return bad(L, s, k->section, k->name, "'%s' is not a number", v);
    if (rc) return bad(L, s, k->section, k->name, "'%s' is not a finite number", v);
    if (below_min(k->min, d))
      return bad(L, s, k->section, k->name, "'%s' is out of range (must be %s)", v,
                 min_text(k->min));
    *(double *)field = d;
    return 0;
  case T_SIZE:
    rc = parse_size(v, &n);
    if (rc == -EINVAL)
      return bad(L, s, k->section, k->name,
                 "'%s' is not a size (bytes, or a number with a K, M or G suffix)", v);
    if (rc) return bad(L, s, k->section, k->name, "'%s' is too large", v);
    if (below_min(k->min, (double)n))
      return bad(L, s, k->section, k->name, "'%s' is out of range (must be %s)", v,
                 min_text(k->min));
    *(long long *)field = n;
    return 0;
  }
  return bad(L, s, k->section, k->name, "unsupported key type");
}

/* ---- the merged raw view ---- */

static struct raw *raw_find(struct loader *L, const char *section, const char *name) {
  for (size_t i = 0; i < L->nraw; i++)
    if (L->raw[i].section == section && strcmp(L->raw[i].name, name) == 0) return &L->raw[i];
  return NULL;
}

/* Sets section.name = value in the merged view; takes NAME. */
static int raw_set(struct loader *L, const char *section, char *name, const char *value) {
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
    return bad(L, s, section, key, "'%s': interpolation nested deeper than %d", value,
               MAX_INTERPOLATION_DEPTH);
  const char *p = value;
  while (*p) {
    const char *pc = strchr(p, '%');
    if (!pc) return strbuf_add(out, p, strlen(p)) ? oom(L) : 0;
    if (strbuf_add(out, p, (size_t)(pc - p))) return oom(L);
    if (pc[1] == '%') {
      if (strbuf_add(out, "%", 1)) return oom(L);
      p = pc + 2;
    } else if (pc[1] == '(') {
      const char *close = strchr(pc + 2, ')');
      if (!close || close == pc + 2 || close[1] != 's')
        return bad(L, s, section, key,
                   "'%s': bad interpolation reference (write %%(name)s, or %%%% for '%%')",
                   value);
      char *name = lower_dup(pc + 2, (size_t)(close - pc - 2));
      if (!name) return oom(L);
      struct raw *r = raw_find(L, section, name);
      if (!r) r = raw_find(L, SEC_DEFAULT, name);
      if (!r) {
        int rc = bad(L, s, section, key, "'%s' refers to '%s', which is not set in [%s]",
                     value, name, section);
        free(name);
        return rc;
      }
      free(name);
      int rc = interpolate(L, s, section, key, r->value, out, depth + 1);
      if (rc) return rc;
      p = close + 2;
    } else {
      return bad(L, s, section, key,
                 "'%s': '%%' must be followed by '%%' or '(' (write %%%% for '%%')", value);
    }
  }
  return 0;
}

/* ---- reading INI files ---- */

static const char *tracked_section(const char *section) {
  static const char *const all[] = {SEC_SCRAPYD, SEC_SPIDERD, SEC_SERVICES, SEC_SETTINGS,
                                    SEC_RETENTION, SEC_CONCURRENCY, SEC_DEFAULT};
  for (size_t i = 0; i < COUNT(all); i++)
    if (strcmp(section, all[i]) == 0) return all[i];
  return NULL;
}

/* inih's fgets-like reader over the file in memory. It also notes what kind
 * of line inih is about to see, so the handler can tell a continuation line
 * from a key set twice. */
static char *read_line(char *str, int num, void *stream) {
  struct loader *L = stream;
  if (L->rc || L->pos >= L->len) return NULL;
  const char *p = L->text + L->pos;
  size_t left = L->len - L->pos;
  const char *nl = memchr(p, '\n', left);
  size_t n = nl ? (size_t)(nl - p) + 1 : left;
  size_t content = nl ? n - 1 : n;
  if (content && p[content - 1] == '\r') content--;
  L->lineno++;
  /* inih needs room for "\r\n\0"; it would split a longer line silently */
  if (num < 4 || content > (size_t)num - 3) {
    L->rc = report(L, SPD_ECONFIG, "%s:%d: line longer than %d characters", L->path,
                   L->lineno, num < 4 ? 0 : num - 3);
    L->errline = L->lineno;
    return NULL;
  }
  memcpy(str, p, n);
  str[n] = '\0';
  L->pos += n;

  /* Mirror inih's order of tests: comment, continuation, section, pair. */
  const char *q = str;
  while (*q && isspace((unsigned char)*q)) q++;
  int indented = q > str;
  L->cont = 0;
  if (!*q || *q == ';' || *q == '#') return str;
  if (indented && L->have_prev) L->cont = 1;
  else if (*q == '[') L->have_prev = 0;
  return str;
}

static int on_pair(void *user, const char *section, const char *name, const char *value) {
  struct loader *L = user;
  if (L->rc) return 0;
  L->errline = L->lineno;
  int cont = L->cont;
  if (!cont) L->have_prev = 1;
  if (!*section) {
    L->rc = report(L, SPD_ECONFIG, "%s:%d: '%s' comes before any [section]", L->path,
                   L->lineno, name);
    return 0;
  }
  const char *sec = tracked_section(section);
  if (!sec) return 1;
  /* Project and spider names are case-sensitive (they are paths). */
  char *lname = sec == SEC_RETENTION || sec == SEC_CONCURRENCY ? strdup(name)
                                                               : lower_dup(name, strlen(name));
  if (!lname) return L->rc = oom(L), 0;
  struct raw *r = raw_find(L, sec, lname);

  if (cont) {
    /* ConfigParser joins a multi-line value with newlines */
    free(lname);
    if (!r || r->file != L->file) return 1;
    size_t a = strlen(r->value), b = strlen(value);
    char *v = realloc(r->value, a + b + 2);
    if (!v) return L->rc = oom(L), 0;
    v[a] = '\n';
    memcpy(v + a + 1, value, b + 1);
    r->value = v;
    return 1;
  }
  if (r && r->file == L->file) {
    L->rc = report(L, SPD_ECONFIG, "%s:%d: [%s] %s: set twice (first on line %d)", L->path,
                   L->lineno, sec, lname, r->line);
    free(lname);
    return 0;
  }
  if (raw_set(L, sec, lname, value)) return L->rc = oom(L), 0;
  return 1;
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

static int slurp(const char *path, char **out, size_t *len) {
  FILE *f = fopen(path, "rb");
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
    return oom(L);
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
  if (rc == -ENOMEM) return oom(L);
  if (rc == -EFBIG)
    return report(L, SPD_ECONFIG, "%s: larger than %d bytes, not a config file", path,
                  MAX_FILE_SIZE);
  if (rc) return report(L, rc, "%s: cannot read: %s", path, strerror(-rc));

  rc = add_source(L, path, &L->path);
  if (rc) goto out;
  L->text = text;
  L->len = len;
  L->pos = 0;
  L->file++;
  L->lineno = 0;
  L->have_prev = 0;
  L->cont = 0;
  L->rc = 0;
  int line = ini_parse_stream(read_line, L, on_pair, L);
  /* inih goes on after a syntax error, so a handler error can come later */
  if (L->rc && !(line > 0 && line < L->errline)) {
    rc = L->rc;
  } else if (line > 0) {
    char text_of_line[80];
    line_text(L, line, text_of_line, sizeof(text_of_line));
    rc = report(L, SPD_ECONFIG,
                "%s:%d: syntax error: '%s' is neither a [section] nor a 'name = value' line",
                path, line, text_of_line);
  } else if (line < 0) {
    rc = oom(L);
  }
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
  if (n < 0) return report(L, -errno, "%s: cannot read: %s", dir, strerror(errno));
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    char *path = NULL;
    struct stat st;
    if (asprintf(&path, "%s/%s", dir, list[i]->d_name) < 0) {
      rc = oom(L);
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
    return report(L, e == ENOENT ? SPD_ECONFIG : -e, "%s: cannot read: %s", path, strerror(e));
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
  if (!path) rc = oom(L);
  if (!rc) rc = read_path(L, path, 0);
  free(path);
  path = NULL;

  const char *home = home_dir();
  if (!rc && home) {
    if (asprintf(&path, "%s/.scrapyd.conf", home) < 0) rc = oom(L);
    else rc = read_path(L, path, 0);
    free(path);
    path = NULL;
  }

  if (!rc && cwd) {
    if (find_scrapy_cfg(cwd, &path)) rc = oom(L);
    else if (path) rc = read_file(L, path, 0);
    free(path);
  }
  free(cwd);
  return rc;
}

/* SPIDERD_CONFIG_FILES, when set, stands for sources 2-6 (not --config). */
static int read_listed_files(struct loader *L, const char *list) {
  char *copy = strdup(list);
  if (!copy) return oom(L);
  int rc = 0;
  char *save = NULL;
  for (char *p = strtok_r(copy, ":", &save); p && !rc; p = strtok_r(NULL, ":", &save))
    rc = read_path(L, p, 0);
  free(copy);
  return rc;
}

/* ---- [retention] ---- */

static void retention_free(config_retention_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(v[i].project);
    free(v[i].spider);
  }
  free(v);
}

/* "project[/spider] = COUNT [DAYS]"; the same key again replaces the entry
 * in place, as a later file's key replaces an earlier one everywhere. */
/* Splits a [retention] or [concurrency] key "project[/spider]" into
 * malloc'd names (spider NULL when absent), both valid names. */
static int split_pair(struct loader *L, const struct src *s, const char *section,
                      const char *name, char **project, char **spider) {
  char why[256];
  const char *slash = strchr(name, '/');
  *project = strndup(name, slash ? (size_t)(slash - name) : strlen(name));
  *spider = slash ? strdup(slash + 1) : NULL;
  if (!*project || (slash && !*spider)) return oom(L);
  if (!name_valid("project", *project, why, sizeof(why)) ||
      (*spider && !name_valid("spider", *spider, why, sizeof(why))))
    return bad(L, s, section, name, "not PROJECT or PROJECT/SPIDER: %s", why);
  return 0;
}

/* Does an entry's (project, spider) name this pair? */
static int same_pair(const char *p1, const char *s1, const char *p2, const char *s2) {
  return !strcmp(p1, p2) && (s1 && s2 ? !strcmp(s1, s2) : s1 == s2);
}

static int retention_put(struct loader *L, const struct src *s, const char *name,
                         const char *value) {
  config_t *c = L->c;
  char *project = NULL, *spider = NULL;
  int rc = split_pair(L, s, SEC_RETENTION, name, &project, &spider);
  if (rc) goto out;
  const char *p = value + strspn(value, " \t");
  size_t n1 = strcspn(p, " \t");
  const char *q = p + n1 + strspn(p + n1, " \t");
  size_t n2 = strcspn(q, " \t");
  long long count = 0;
  double days = -1;
  if (!n1 || q[n2 + strspn(q + n2, " \t")]) {
    rc = bad(L, s, SEC_RETENTION, name, "'%s' is not COUNT [DAYS] (e.g. '500 7')", value);
    goto out;
  }
  if (parse_int_n(p, n1, &count) || count < 0 || count > INT_MAX) {
    rc = bad(L, s, SEC_RETENTION, name,
             "count '%.*s' is not an integer >= 0 (the jobs kept; 0 = no limit)", (int)n1, p);
    goto out;
  }
  if (n2) {
    char buf[64];
    snprintf(buf, sizeof(buf), "%.*s", (int)n2, q);
    if (n2 >= sizeof(buf) || parse_real(buf, &days) || days < 0) {
      rc = bad(L, s, SEC_RETENTION, name,
               "days '%.*s' is not a number >= 0 (0 = forever)", (int)n2, q);
      goto out;
    }
  }
  config_retention_t *e = NULL;
  for (size_t i = 0; i < c->nretention && !e; i++)
    if (same_pair(c->retention[i].project, c->retention[i].spider, project, spider))
      e = &c->retention[i];
  if (!e) {
    config_retention_t *grown = realloc(c->retention, (c->nretention + 1) * sizeof(*grown));
    if (!grown) {
      rc = oom(L);
      goto out;
    }
    c->retention = grown;
    e = &grown[c->nretention++];
    e->project = project;
    e->spider = spider;
    project = spider = NULL;
  }
  e->count = (int)count;
  e->days = days;
out:
  free(project);
  free(spider);
  return rc;
}

/* ---- [concurrency] ---- */

/* "project[/spider] = N": at most N such jobs running at once, across every
 * node sharing the store. The same key again replaces the entry. */
static int limit_put(struct loader *L, const struct src *s, const char *name,
                     const char *value) {
  config_t *c = L->c;
  char *project = NULL, *spider = NULL;
  long long max = 0;
  int rc = split_pair(L, s, SEC_CONCURRENCY, name, &project, &spider);
  if (rc) goto out;
  const char *p = value + strspn(value, " \t");
  size_t n = strcspn(p, " \t");
  if (!n || p[n + strspn(p + n, " \t")] || parse_int_n(p, n, &max) || max < 1 ||
      max > 1000000) {
    rc = bad(L, s, SEC_CONCURRENCY, name,
             "'%s' is not a whole number >= 1 (the most such jobs running at once; "
             "1 = never overlap)", value);
    goto out;
  }
  config_limit_t *e = NULL;
  for (size_t i = 0; i < c->nlimits && !e; i++)
    if (same_pair(c->limits[i].project, c->limits[i].spider, project, spider))
      e = &c->limits[i];
  if (!e) {
    config_limit_t *grown = realloc(c->limits, (c->nlimits + 1) * sizeof(*grown));
    if (!grown) {
      rc = oom(L);
      goto out;
    }
    c->limits = grown;
    e = &grown[c->nlimits++];
    e->project = project;
    e->spider = spider;
    project = spider = NULL;
  }
  e->max = (int)max;
out:
  free(project);
  free(spider);
  return rc;
}

/* ---- applying the merged files ---- */

/* [scrapyd] also holds Scrapyd's class names, which spiderd does not use;
 * [spiderd] is ours, so an unknown key there is a typo. A key of the other
 * section is an error either way: silently ignoring a misplaced store URL
 * would put a cluster node on a private SQLite file. */
static int unknown_key(struct loader *L, const struct src *s, const char *section,
                       const char *name) {
  const struct key *other = key_find(section == SEC_SCRAPYD ? SEC_SPIDERD : SEC_SCRAPYD, name);
  if (other) return bad(L, s, section, name, "belongs in [%s]", other->section);
  if (section == SEC_SPIDERD) return bad(L, s, section, name, "unknown key");
  return 0;
}

static int resolve(struct loader *L, const struct src *s, const struct raw *r, strbuf_t *v) {
  v->len = 0;
  if (strbuf_add(v, "", 0)) return oom(L);
  return interpolate(L, s, r->section, r->name, r->value, v, 1);
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
      if (!rc && v.len && pairs_put(&c->services, &c->nservices, r->name, v.p)) rc = oom(L);
    } else if (r->section == SEC_SETTINGS) {
      rc = resolve(L, &s, r, &v);
      if (!rc && pairs_put(&c->settings, &c->nsettings, r->name, v.p)) rc = oom(L);
    } else if (r->section == SEC_RETENTION) {
      rc = resolve(L, &s, r, &v);
      if (!rc) rc = retention_put(L, &s, r->name, v.p);
    } else if (r->section == SEC_CONCURRENCY) {
      rc = resolve(L, &s, r, &v);
      if (!rc) rc = limit_put(L, &s, r->name, v.p);
    } else if (r->src && (r->section == SEC_SCRAPYD || r->section == SEC_SPIDERD)) {
      const struct key *k = key_find(r->section, r->name);
      if (!k) {
        rc = unknown_key(L, &s, r->section, r->name);
        continue;
      }
      rc = resolve(L, &s, r, &v);
      if (!rc) rc = apply(L, k, v.p, &s);
    }
  }
  strbuf_release(&v);
  return rc;
}

static int apply_env(struct loader *L) {
  int rc = 0;
  /* Scrapyd reads these as `os.getenv(...) or config`, so empty means unset */
  for (size_t i = 0; i < COUNT(scrapyd_env) && !rc; i++) {
    const char *v = getenv(scrapyd_env[i][0]);
    struct src s = {SRC_ENV, scrapyd_env[i][0]};
    if (v && *v) rc = apply(L, key_find(SEC_SCRAPYD, scrapyd_env[i][1]), v, &s);
  }
  for (size_t i = 0; i < NKEYS && !rc; i++) {
    char var[64];
    size_t n = (size_t)snprintf(var, sizeof(var), "SPIDERD_%s", keys[i].name);
    for (size_t j = 0; j < n && j < sizeof(var); j++)
      var[j] = (char)toupper((unsigned char)var[j]);
    const char *v = getenv(var);
    struct src s = {SRC_ENV, var};
    if (v) rc = apply(L, &keys[i], v, &s);
  }
  return rc;
}

/* ---- flags ---- */

static int parse_flags(struct loader *L, int argc, char **argv) {
  if (argc <= 0) return 0;
  L->flags = calloc((size_t)argc, sizeof(*L->flags));
  if (!L->flags) return oom(L);
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    if (arg[0] != '-') return report(L, SPD_ECONFIG, "unexpected argument '%s'", arg);
    const char *eq = strchr(arg, '=');
    size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
    struct flag f = {NULL, NULL, NULL};
    if (n == 5 && strncmp(arg, "--set", 5) == 0) {
      f.name = "--set";
    } else if (n == 8 && strncmp(arg, "--config", 8) == 0) {
      f.name = "--config";
    } else {
      for (size_t k = 0; k < NKEYS; k++)
        if (keys[k].flag && strlen(keys[k].flag) == n && strncmp(arg, keys[k].flag, n) == 0) {
          f.key = &keys[k];
          f.name = keys[k].flag;
        }
    }
    if (!f.name) return report(L, SPD_ECONFIG, "unknown option '%.*s'", (int)n, arg);
    if (eq) f.value = eq + 1;
    else if (f.key && f.key->type == T_BOOL) f.value = "on"; /* "--insecure" alone */
    else if (i + 1 < argc) f.value = argv[++i];
    else return report(L, SPD_ECONFIG, "option '%s' requires a value", f.name);
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
    return report(L, SPD_ECONFIG, "flag --set: '%s' is not SECTION.KEY=VALUE", arg);
  char section[32];
  size_t sn = (size_t)(dot - arg);
  snprintf(section, sizeof(section), "%.*s", (int)sn, arg);
  const char *sec = sn < sizeof(section) ? tracked_section(section) : NULL;
  if (!sec || sec == SEC_DEFAULT)
    return report(L, SPD_ECONFIG,
                  "flag --set: unknown section '%.*s' (scrapyd, spiderd, services, settings, "
                  "retention or concurrency)",
                  (int)sn, arg);
  size_t nn = (size_t)(eq - dot - 1);
  char *name = sec == SEC_RETENTION || sec == SEC_CONCURRENCY ? strndup(dot + 1, nn)
                                                               : lower_dup(dot + 1, nn);
  if (!name) return oom(L);
  const char *value = eq + 1;
  struct src s = {SRC_SET, "--set"};
  int rc = 0;
  if (sec == SEC_SERVICES) {
    if (!*value) pairs_del(c->services, &c->nservices, name);
    else if (pairs_put(&c->services, &c->nservices, name, value)) rc = oom(L);
  } else if (sec == SEC_SETTINGS) {
    if (pairs_put(&c->settings, &c->nsettings, name, value)) rc = oom(L);
  } else if (sec == SEC_RETENTION) {
    rc = retention_put(L, &s, name, value);
  } else if (sec == SEC_CONCURRENCY) {
    rc = limit_put(L, &s, name, value);
  } else {
    const struct key *k = key_find(sec, name);
    rc = k ? apply(L, k, value, &s) : unknown_key(L, &s, sec, name);
  }
  free(name);
  return rc;
}

static int apply_flags(struct loader *L) {
  int rc = 0;
  for (size_t i = 0; i < L->nflags && !rc; i++) {
    const struct flag *f = &L->flags[i];
    struct src s = {SRC_FLAG, f->name};
    if (f->key) rc = apply(L, f->key, f->value, &s);
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

/* ---- defaults and derived values ---- */

static int set_defaults(struct loader *L) {
  config_t *c = L->c;
  struct src s = {SRC_DEFAULT, NULL};
  int rc = 0;
  for (size_t i = 0; i < NKEYS && !rc; i++) {
    if (!keys[i].def) continue;
    rc = apply(L, &keys[i], keys[i].def, &s);
    char *name = rc ? NULL : strdup(keys[i].name);
    if (!rc && (!name || raw_set(L, keys[i].section, name, keys[i].def))) rc = oom(L);
  }
  for (size_t i = 0; i < COUNT(scrapyd_class_keys) && !rc; i++) {
    char *name = strdup(scrapyd_class_keys[i][0]);
    if (!name || raw_set(L, SEC_SCRAPYD, name, scrapyd_class_keys[i][1])) rc = oom(L);
  }
  for (size_t i = 0; i < COUNT(default_services) && !rc; i++) {
    char *name = strdup(default_services[i][0]);
    if (!name || raw_set(L, SEC_SERVICES, name, default_services[i][1])) rc = oom(L);
  }
  if (rc) return rc;

  char host[256];
  if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "localhost");
  host[sizeof(host) - 1] = '\0';
  return set_string(L, &c->node_name, host);
}

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
    if (!store) return oom(L);
    free(c->store);
    c->store = store;
  }

  /* half a TLS set-up would silently serve plain HTTP */
  if (!c->https_cert[0] != !c->https_key[0])
    return report(L, SPD_ECONFIG, "[spiderd] https_cert and https_key go together: %s is set, "
                  "%s is not", c->https_cert[0] ? "https_cert" : "https_key",
                  c->https_cert[0] ? "https_key" : "https_cert");
  if (c->https_key_password[0] && c->https_key_password_file[0])
    return report(L, SPD_ECONFIG, "[spiderd] https_key_password and https_key_password_file: "
                  "set one of them");

  /* Scrapyd treats a file: URL as the local directory of its path; keeping
   * items_dir a plain path means "not remote" always means "a directory" */
  const char *it = c->items_dir;
  if (strncasecmp(it, "file://", 7) == 0) {
    const char *slash = strchr(it + 7, '/');
    rc = set_string(L, &c->items_dir, slash ? slash : "");
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
  rc = set_defaults(&L);
  if (rc) goto out;
  const char *list = getenv("SPIDERD_CONFIG_FILES");
  rc = list ? read_listed_files(&L, list) : read_default_files(&L);
  if (rc) goto out;
  rc = read_config_flags(&L);
  if (rc) goto out;
  rc = apply_files(&L);
  if (rc) goto out;
  rc = apply_env(&L);
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

static void free_secret(char *p) {
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
    free_secret(c->https_key_password);
    c->https_key_password = pw;
  }
  const char *env = getenv("SPIDERD_STORE_PASSWORD");
  free_secret(c->store_password);
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

void config_release(config_t *c) {
  free_secret(c->store_password);
  c->store_password = NULL;
  if (c->https_key_password) explicit_bzero(c->https_key_password, strlen(c->https_key_password));
  for (size_t i = 0; i < NKEYS; i++) {
    if (keys[i].type == T_STR || keys[i].type == T_USER || keys[i].type == T_LEVEL ||
        keys[i].type == T_MECH || keys[i].type == T_NETS) {
      char **field = (char **)((char *)c + keys[i].off);
      free(*field);
    }
  }
  pairs_free(c->services, c->nservices);
  pairs_free(c->settings, c->nsettings);
  retention_free(c->retention, c->nretention);
  for (size_t i = 0; i < c->nlimits; i++) {
    free(c->limits[i].project);
    free(c->limits[i].spider);
  }
  free(c->limits);
  for (size_t i = 0; i < c->nsources; i++) free(c->sources[i]);
  free(c->sources);
  memset(c, 0, sizeof(*c));
}

int config_service_enabled(const config_t *c, const char *name) {
  for (size_t i = 0; i < c->nservices; i++)
    if (strcmp(c->services[i].name, name) == 0) return 1;
  return 0;
}

const char *config_project_settings(const config_t *c, const char *project) {
  for (size_t i = 0; i < c->nsettings; i++)
    if (strcmp(c->settings[i].name, project) == 0) return c->settings[i].value;
  return NULL;
}

int config_max_proc(const config_t *c) {
  if (c->max_proc > 0) return c->max_proc;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu < 1) ncpu = 1;
  long long n = (long long)ncpu * (c->max_proc_per_cpu > 0 ? c->max_proc_per_cpu : 1);
  return n > INT_MAX ? INT_MAX : (int)n;
}

int config_items_remote(const config_t *c) {
  const char *s = c->items_dir;
  if (!s || !isalpha((unsigned char)*s)) return 0;
  size_t n = 1;
  while (isalnum((unsigned char)s[n]) || s[n] == '+' || s[n] == '-' || s[n] == '.') n++;
  if (strncmp(s + n, "://", 3) != 0) return 0;
  return !(n == 4 && strncasecmp(s, "file", 4) == 0);
}
