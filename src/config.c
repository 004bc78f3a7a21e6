/* The configuration's keys: the table of [scrapyd] and [spiderd] keys with
 * their types, defaults and flags, what a value of each type means (Python's
 * int() and float(), sizes, booleans, log levels, networks), the entries of
 * [services], [settings], [retention] and [concurrency], the environment's
 * keys, and what a loaded config answers (config_max_proc, ...). Reading
 * the sources in order is config_load.c's; secrets are config_secret.c's.
 */
#include "config.h"

#include "config_int.h"
#include "core/names.h"
#include "error.h"
#include "http/trust.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

/* config_int.h names these config_sec_*: the loader compares sections by address. */
const char SEC_SCRAPYD[] = "scrapyd";
const char SEC_SPIDERD[] = "spiderd";
const char SEC_SERVICES[] = "services";
const char SEC_SETTINGS[] = "settings";
const char SEC_RETENTION[] = "retention";
const char SEC_CONCURRENCY[] = "concurrency";
const char SEC_DEFAULT[] = "DEFAULT";
const char SEC_HOOKS[] = "hooks";

enum ktype {
  T_STR, T_USER, T_LEVEL, T_MECH, T_NETS, T_LOGFMT, T_UNKNOWN, T_INT, T_PORT, T_BOOL, T_REAL,
  T_SIZE
};
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
/* A [hooks] key: its field is named hook_<key> in config_t. */
#define HOOK_KEY(name, type, min, def) \
  {SEC_HOOKS, #name, type, min, offsetof(config_t, hook_##name), def, NULL}

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
    KEY(SEC_SPIDERD, log_format, T_LOGFMT, M_NONE, "text", "--log-format"),
    KEY(SEC_SPIDERD, unknown_scrapyd_classes, T_UNKNOWN, M_NONE, "refuse", NULL),
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
    KEY(SEC_SPIDERD, object_store_eggs, T_BOOL, M_NONE, "off", NULL),
    KEY(SEC_SPIDERD, memory_reserve, T_SIZE, M_GE0, "256M", NULL),
    KEY(SEC_SPIDERD, job_memory_default, T_SIZE, M_GE0, "100M", NULL),
    KEY(SEC_SPIDERD, jobs_memory, T_SIZE, M_GE0, "0", NULL),
    KEY(SEC_SPIDERD, pip_index_url, T_STR, M_NONE, "", NULL),
    KEY(SEC_SPIDERD, pip_extra_index_url, T_STR, M_NONE, "", NULL),
    KEY(SEC_SPIDERD, pip_find_links, T_STR, M_NONE, "", NULL),
    KEY(SEC_SPIDERD, pip_trusted_hosts, T_STR, M_NONE, "", NULL),
    KEY(SEC_SPIDERD, env_build_timeout, T_REAL, M_GT0, "600", NULL),
    KEY(SEC_SPIDERD, env_prebuild, T_BOOL, M_NONE, "off", NULL),
    HOOK_KEY(job_queued, T_STR, M_NONE, ""),
    HOOK_KEY(job_started, T_STR, M_NONE, ""),
    HOOK_KEY(job_finished, T_STR, M_NONE, ""),
    HOOK_KEY(job_failed, T_STR, M_NONE, ""),
    HOOK_KEY(job_cancelled, T_STR, M_NONE, ""),
    HOOK_KEY(job_lost, T_STR, M_NONE, ""),
    HOOK_KEY(job_ended, T_STR, M_NONE, ""),
    HOOK_KEY(job_degraded, T_STR, M_NONE, ""),
    HOOK_KEY(job_broken, T_STR, M_NONE, ""),
    HOOK_KEY(timeout, T_REAL, M_GT0, "30"),
    HOOK_KEY(concurrency, T_INT, M_GE1, "4"),
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* Keys of Scrapyd's default_scrapyd.conf that name Python classes, with
 * their defaults: a file may refer to them with %(name)s, and
 * config_scrapyd.c says what spiderd makes of each. */
const char *const config_scrapyd_class_keys[][2] = {
    {"application", "scrapyd.app.application"},
    {"launcher", "scrapyd.launcher.Launcher"},
    {"webroot", "scrapyd.website.Root"},
    {"spiderqueue", "scrapyd.spiderqueue.SqliteSpiderQueue"},
    {"poller", "scrapyd.poller.QueuePoller"},
    {"eggstorage", "scrapyd.eggstorage.FilesystemEggStorage"},
    {"jobstorage", "scrapyd.jobstorage.MemoryJobStorage"},
};
const size_t config_nscrapyd_class_keys = COUNT(config_scrapyd_class_keys);

const char *const config_default_services[][2] = {
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
const size_t config_ndefault_services = COUNT(config_default_services);

static const char *const scrapyd_env[][2] = {
    {"SCRAPYD_BIND_ADDRESS", "bind_address"},
    {"SCRAPYD_HTTP_PORT", "http_port"},
    {"SCRAPYD_UNIX_SOCKET_PATH", "unix_socket_path"},
    {"SCRAPYD_USERNAME", "username"},
    {"SCRAPYD_PASSWORD", "password"},
};

static const char *const log_levels[] = {"debug", "info", "warning", "error"};
static const char *const log_formats[] = {"text", "json"};
static const char *const unknown_modes[] = {"refuse", "warn"};
/* How job resource limits are enforced (run/jobres.c). */
static const char *const limit_mechs[] = {"auto", "cgroup", "rlimit", "off"};

int config_report(struct loader *L, int code, const char *fmt, ...) {
  if (L->err && L->errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->err, L->errlen, fmt, ap);
    va_end(ap);
  }
  return code;
}

int config_oom(struct loader *L) { return config_report(L, -ENOMEM, "out of memory"); }
               
/* A value is rejected: the message names its source, section and key. */
int config_bad(struct loader *L, const struct src *s, const char *section,
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
    return config_report(L, SPD_ECONFIG, "%s: [%s] %s: %s", s->name, section, name, reason);
  case SRC_ENV:
    return config_report(L, SPD_ECONFIG, "environment %s: %s", s->name, reason);
  case SRC_FLAG:
    return config_report(L, SPD_ECONFIG, "flag %s: %s", s->name, reason);
  case SRC_SET:
    return config_report(L, SPD_ECONFIG, "flag --set: [%s] %s: %s", section, name, reason);
  case SRC_DEFAULT:
  default:
    return config_report(L, SPD_ECONFIG, "built-in default [%s] %s: %s", section, name, reason);
  }
}

char *config_lower_dup(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (!d) return NULL;
  for (size_t i = 0; i < n; i++) d[i] = (char)tolower((unsigned char)s[i]);
  d[n] = '\0';
  return d;
}

const struct key *config_key_find(const char *section, const char *name) {
  for (size_t i = 0; i < NKEYS; i++)
    if (keys[i].section == section && strcmp(keys[i].name, name) == 0) return &keys[i];
  return NULL;
}

const struct key *config_key_of_flag(const char *arg, size_t n) {
  for (size_t i = 0; i < NKEYS; i++)
    if (keys[i].flag && strlen(keys[i].flag) == n && strncmp(arg, keys[i].flag, n) == 0)
      return &keys[i];
  return NULL;
}

const char *config_key_flag(const struct key *k) { return k->flag; }

int config_key_is_bool(const struct key *k) { return k->type == T_BOOL; }


/* [scrapyd] also holds Scrapyd's class names, noted for the daemon to say
 * at start what it makes of each, and keys of Scrapyd's plugins;
 * [spiderd] is ours, so an unknown key there is a typo. A key of the other
 * section is an error either way: silently ignoring a misplaced store URL
 * would put a cluster node on a private SQLite file. */
int config_unknown_key(struct loader *L, const struct src *s, const char *section,
                       const char *name, const char *value) {
  const char *other_sec = section == SEC_SCRAPYD ? SEC_SPIDERD : SEC_SCRAPYD;
  const struct key *other = config_key_find(other_sec, name);
  if (!other && section != SEC_HOOKS) other = config_key_find(SEC_HOOKS, name);
  if (other) return config_bad(L, s, section, name, "belongs in [%s]", other->section);
  if (section == SEC_SPIDERD) return config_bad(L, s, section, name, "unknown key");
  if (section == SEC_HOOKS)
    return config_bad(L, s, section, name,
                      "unknown key (job_queued, job_started, job_finished, job_failed, "
                      "job_cancelled, job_lost, job_ended, timeout or concurrency)");
  if (!config_is_class_key(name)) return 0; /* the caller notes it, or not */
  return config_class_note(L, s, CONFIG_CLASS_KEY, name, value);
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
int config_pairs_put(config_pair_t **arr, size_t *n, const char *name, const char *value) {
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

void config_pairs_del(config_pair_t *arr, size_t *n, const char *name) {
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

int config_set_string(struct loader *L, char **field, const char *v) {
  char *copy = strdup(v);
  if (!copy) return config_oom(L);
  free(*field);
  *field = copy;
  return 0;
}

/* Addresses and CIDR blocks: refused at start, not at the first request. */
static int nets_check(struct loader *L, const struct key *k, const char *v, const struct src *s) {
  http_trust_t t;
  char why[256];
  if (http_trust_parse(v, &t, why, sizeof(why)))
    return config_bad(L, s, k->section, k->name, "%s", why);
  http_trust_release(&t);
  return config_set_string(L, (char **)((char *)L->c + k->off), v);
}

/* V, case-insensitively one of CHOICES (n of them), stored lower-case. */
static int choice(struct loader *L, const struct key *k, const char *v, const struct src *s,
                  const char *const *choices, size_t n, const char *listed) {
  for (size_t i = 0; i < n; i++)
    if (strcasecmp(v, choices[i]) == 0)
      return config_set_string(L, (char **)((char *)L->c + k->off), choices[i]);
  return config_bad(L, s, k->section, k->name, "'%s' is not one of %s", v, listed);
}

/* Validates V for key K and stores it in the config. */
int config_apply(struct loader *L, const struct key *k, const char *v, const struct src *s) {
  void *field = (char *)L->c + k->off;
  long long n;
  double d;
  int b, rc;

  switch (k->type) {
  case T_STR:
    return config_set_string(L, field, v);
  case T_USER:
    /* Basic auth joins user and password with ':' (Scrapyd refuses it too) */
    if (strchr(v, ':'))
      return config_bad(L, s, k->section, k->name, "'%s' must not contain ':'", v);
    return config_set_string(L, field, v);
  case T_LEVEL:
    for (size_t i = 0; i < COUNT(log_levels); i++)
      if (strcasecmp(v, log_levels[i]) == 0) return config_set_string(L, field, log_levels[i]);
    return config_bad(L, s, k->section, k->name,
                      "'%s' is not one of debug, info, warning, error", v);
  case T_MECH:
    for (size_t i = 0; i < COUNT(limit_mechs); i++)
      if (strcasecmp(v, limit_mechs[i]) == 0) return config_set_string(L, field, limit_mechs[i]);
    return config_bad(L, s, k->section, k->name, "'%s' is not one of auto, cgroup, rlimit, off", v);
  case T_NETS:
    return nets_check(L, k, v, s);
  case T_LOGFMT:
    return choice(L, k, v, s, log_formats, COUNT(log_formats), "text, json");
  case T_UNKNOWN:
    return choice(L, k, v, s, unknown_modes, COUNT(unknown_modes), "refuse, warn");
  case T_INT:
    rc = parse_int_n(v, strlen(v), &n);
    if (rc == -EINVAL) return config_bad(L, s, k->section, k->name, "'%s' is not an integer", v);
    if (rc || n > INT_MAX || n < INT_MIN)
      return config_bad(L, s, k->section, k->name, "'%s' is too large", v);
    if (below_min(k->min, (double)n))
      return config_bad(L, s, k->section, k->name, "'%s' is out of range (must be %s)", v,
                        min_text(k->min));
    *(int *)field = (int)n;
    return 0;
  case T_PORT:
    rc = parse_int_n(v, strlen(v), &n);
    if (rc || n < 0 || n > 65535)
      return config_bad(L, s, k->section, k->name, "'%s' is not a port (0-65535)", v);
    *(int *)field = (int)n;
    return 0;
  case T_BOOL:
    if (config_parse_bool(v, &b))
      return config_bad(L, s, k->section, k->name,
                        "'%s' is not a boolean (1/yes/true/on or 0/no/false/off)", v);
    *(int *)field = b;
    return 0;
  case T_REAL:
    rc = parse_real(v, &d);
    if (rc == -EINVAL) return config_bad(L, s, k->section, k->name, "'%s' is not a number", v);
    if (rc) return config_bad(L, s, k->section, k->name, "'%s' is not a finite number", v);
    if (below_min(k->min, d))
      return config_bad(L, s, k->section, k->name, "'%s' is out of range (must be %s)", v,
                        min_text(k->min));
    *(double *)field = d;
    return 0;
  case T_SIZE:
    rc = parse_size(v, &n);
    if (rc == -EINVAL)
      return config_bad(L, s, k->section, k->name,
                        "'%s' is not a size (bytes, or a number with a K, M or G suffix)", v);
    if (rc) return config_bad(L, s, k->section, k->name, "'%s' is too large", v);
    if (below_min(k->min, (double)n))
      return config_bad(L, s, k->section, k->name, "'%s' is out of range (must be %s)", v,
                        min_text(k->min));
    *(long long *)field = n;
    return 0;
  }
  return config_bad(L, s, k->section, k->name, "unsupported key type");
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
  if (!*project || (slash && !*spider)) return config_oom(L);
  if (!name_valid("project", *project, why, sizeof(why)) ||
      (*spider && !name_valid("spider", *spider, why, sizeof(why))))
    return config_bad(L, s, section, name, "not PROJECT or PROJECT/SPIDER: %s", why);
  return 0;
}

/* Does an entry's (project, spider) name this pair? */
static int same_pair(const char *p1, const char *s1, const char *p2, const char *s2) {
  return !strcmp(p1, p2) && (s1 && s2 ? !strcmp(s1, s2) : s1 == s2);
}

int config_retention_put(struct loader *L, const struct src *s, const char *name,
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
    rc = config_bad(L, s, SEC_RETENTION, name, "'%s' is not COUNT [DAYS] (e.g. '500 7')", value);
    goto out;
  }
  if (parse_int_n(p, n1, &count) || count < 0 || count > INT_MAX) {
    rc = config_bad(L, s, SEC_RETENTION, name,
                    "count '%.*s' is not an integer >= 0 (the jobs kept; 0 = no limit)",
                    (int)n1, p);
    goto out;
  }
  if (n2) {
    char buf[64];
    snprintf(buf, sizeof(buf), "%.*s", (int)n2, q);
    if (n2 >= sizeof(buf) || parse_real(buf, &days) || days < 0) {
      rc = config_bad(L, s, SEC_RETENTION, name,
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
      rc = config_oom(L);
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
int config_limit_put(struct loader *L, const struct src *s, const char *name,
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
    rc = config_bad(L, s, SEC_CONCURRENCY, name,
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
      rc = config_oom(L);
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

/* ---- the environment and the defaults ---- */

int config_apply_env(struct loader *L) {
  int rc = 0;
  /* Scrapyd reads these as `os.getenv(...) or config`, so empty means unset */
  for (size_t i = 0; i < COUNT(scrapyd_env) && !rc; i++) {
    const char *v = getenv(scrapyd_env[i][0]);
    struct src s = {SRC_ENV, scrapyd_env[i][0]};
    if (v && *v) rc = config_apply(L, config_key_find(SEC_SCRAPYD, scrapyd_env[i][1]), v, &s);
  }
  for (size_t i = 0; i < NKEYS && !rc; i++) {
    char var[64];
    size_t n = (size_t)snprintf(var, sizeof(var), "SPIDERD_%s%s",
                                keys[i].section == SEC_HOOKS ? "HOOKS_" : "", keys[i].name);
    for (size_t j = 0; j < n && j < sizeof(var); j++)
      var[j] = (char)toupper((unsigned char)var[j]);
    const char *v = getenv(var);
    struct src s = {SRC_ENV, var};
    if (v) rc = config_apply(L, &keys[i], v, &s);
  }
  return rc;
}

int config_set_defaults(struct loader *L) {
  config_t *c = L->c;
  struct src s = {SRC_DEFAULT, NULL};
  int rc = 0;
  for (size_t i = 0; i < NKEYS && !rc; i++) {
    if (!keys[i].def) continue;
    rc = config_apply(L, &keys[i], keys[i].def, &s);
    char *name = rc ? NULL : strdup(keys[i].name);
    if (!rc && (!name || config_raw_set(L, keys[i].section, name, keys[i].def))) rc = config_oom(L);
  }
  for (size_t i = 0; i < config_nscrapyd_class_keys && !rc; i++) {
    char *name = strdup(config_scrapyd_class_keys[i][0]);
    if (!name || config_raw_set(L, SEC_SCRAPYD, name, config_scrapyd_class_keys[i][1]))
      rc = config_oom(L);
  }
  for (size_t i = 0; i < config_ndefault_services && !rc; i++) {
    char *name = strdup(config_default_services[i][0]);
    if (!name || config_raw_set(L, SEC_SERVICES, name, config_default_services[i][1]))
      rc = config_oom(L);
  }
  if (rc) return rc;

  char host[256];
  if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "localhost");
  host[sizeof(host) - 1] = '\0';
  return config_set_string(L, &c->node_name, host);
}

/* ---- what a loaded config answers ---- */

void config_release(config_t *c) {
  config_secret_free(c->store_password);
  c->store_password = NULL;
  if (c->https_key_password) explicit_bzero(c->https_key_password, strlen(c->https_key_password));
  for (size_t i = 0; i < NKEYS; i++) {
    if (keys[i].type == T_STR || keys[i].type == T_USER || keys[i].type == T_LEVEL ||
        keys[i].type == T_MECH || keys[i].type == T_NETS || keys[i].type == T_LOGFMT ||
        keys[i].type == T_UNKNOWN) {
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
  config_classes_free(c->classes, c->nclasses);
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
