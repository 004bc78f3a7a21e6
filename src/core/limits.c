/* Per-job resource limits, the pure part (core/limits.h). */
#include "core/limits.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>

const char *const limits_arg_names[LIMITS_NARGS] = {"_memory_limit", "_cpu_limit", "_max_procs",
                                                    "_log_limit", "_items_limit"};

int limits_is_arg(const char *key) {
  for (size_t i = 0; i < LIMITS_NARGS; i++)
    if (!strcmp(key, limits_arg_names[i])) return 1;
  return 0;
}

int limits_parse_size(const char *s, int64_t *out) {
  while (isspace((unsigned char)*s)) s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1])) n--;
  int64_t mult = 1;
  if (n) switch (s[n - 1]) {
    case 'k': case 'K': mult = 1LL << 10; n--; break;
    case 'm': case 'M': mult = 1LL << 20; n--; break;
    case 'g': case 'G': mult = 1LL << 30; n--; break;
    default: break;
    }
  if (!n) return -EINVAL;
  int64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isdigit((unsigned char)s[i])) return -EINVAL;
    if (v > (INT64_MAX - (s[i] - '0')) / 10) return -ERANGE;
    v = v * 10 + (s[i] - '0');
  }
  if (v > INT64_MAX / mult) return -ERANGE;
  *out = v * mult;
  return 0;
}

int limits_parse_arg(const char *name, const char *text, int64_t *out, char *why,
                     size_t whylen) {
  int rc;
  if (!strcmp(name, "_cpu_limit")) {
    char *end = NULL;
    errno = 0;
    double d = strtod(text, &end);
    while (end && isspace((unsigned char)*end)) end++;
    if (end == text || (end && *end) || errno || !isfinite(d) || d < 0 || d > 1e9) {
      snprintf(why, whylen, "%s is invalid: it must be a number of CPU seconds from 0 to 1e9",
               name);
      return -EINVAL;
    }
    /* RLIMIT_CPU counts whole seconds: a fraction is not given away. */
    *out = (int64_t)ceil(d);
    return 0;
  }
  if (!strcmp(name, "_max_procs")) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end || errno || v < 0 || v > 4194304) {
      snprintf(why, whylen, "%s is invalid: it must be a whole number from 0 to 4194304", name);
      return -EINVAL;
    }
    *out = v;
    return 0;
  }
  rc = limits_parse_size(text, out);
  if (rc) {
    snprintf(why, whylen,
             "%s is invalid: it must be a size in bytes, or a number with a K, M or G suffix",
             name);
    return -EINVAL;
  }
  return 0;
}

int limits_resolve(const json_t *args, const job_limits_t *defaults, job_limits_t *out,
                   char *why, size_t whylen) {
  int64_t *f[LIMITS_NARGS] = {&out->memory, &out->cpu_s, &out->procs, &out->log, &out->items};
  *out = defaults ? *defaults : (job_limits_t){0};
  for (size_t i = 0; args && i < LIMITS_NARGS; i++) {
    json_t *v = json_object_get(args, limits_arg_names[i]);
    if (!v) continue;
    char num[64];
    const char *text = json_string_value(v);
    if (json_is_integer(v)) {
      snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
      text = num;
    } else if (json_is_real(v)) {
      snprintf(num, sizeof(num), "%.17g", json_real_value(v));
      text = num;
    }
    int64_t n = 0;
    if (!text) {
      snprintf(why, whylen, "%s is invalid: it must be a string or a number",
               limits_arg_names[i]);
      return -EINVAL;
    }
    int rc = limits_parse_arg(limits_arg_names[i], text, &n, why, whylen);
    if (rc) return rc;
    if (n > 0) *f[i] = n;
  }
  return 0;
}

int limits_kernel(const job_limits_t *lim) {
  return lim->memory > 0 || lim->cpu_s > 0 || lim->procs > 0;
}

size_t limits_rlimits(const job_limits_t *lim, limits_rlimit_t out[3]) {
  size_t n = 0;
  /* soft = hard: a crawl cannot raise its own limit back. */
  if (lim->memory > 0) out[n++] = (limits_rlimit_t){RLIMIT_AS, lim->memory, lim->memory};
  /* SIGXCPU at the soft limit lets the crawl die of it (its default
   * action); the hard limit, a little later, is SIGKILL for one that
   * catches or ignores it. */
  if (lim->cpu_s > 0) out[n++] = (limits_rlimit_t){RLIMIT_CPU, lim->cpu_s, lim->cpu_s + 5};
  if (lim->procs > 0) out[n++] = (limits_rlimit_t){RLIMIT_NPROC, lim->procs, lim->procs};
  return n;
}

size_t limits_prlimit_opts(const job_limits_t *lim, char opts[3][LIMITS_OPT_MAX]) {
  limits_rlimit_t r[3];
  size_t n = limits_rlimits(lim, r);
  for (size_t i = 0; i < n; i++)
    snprintf(opts[i], LIMITS_OPT_MAX, "--%s=%lld:%lld",
             r[i].resource == RLIMIT_AS ? "as" : r[i].resource == RLIMIT_CPU ? "cpu" : "nproc",
             (long long)r[i].soft, (long long)r[i].hard);
  return n;
}

const char *limits_end_reason(limits_mech_t mech, const job_limits_t *lim,
                              const limits_end_t *e) {
  if (!e->failed) return NULL;
  if (lim->memory > 0) {
    if (mech == LIMITS_CGROUP && e->oom_kills > 0) return "memory_limit";
    if (mech == LIMITS_RLIMIT &&
        (e->memory_error || (e->peak_vm > 0 && e->peak_vm >= lim->memory / 10 * 9)))
      return "memory_limit";
  }
  if (lim->cpu_s > 0) {
    if (e->term_signal == SIGXCPU) return "cpu_limit";
    if (e->term_signal == SIGKILL && e->cpu_ms >= lim->cpu_s * 1000) return "cpu_limit";
  }
  if (lim->procs > 0 && mech == LIMITS_CGROUP && e->pids_max_hits > 0) return "pids_limit";
  return NULL;
}

const char *limits_mech_name(limits_mech_t m) {
  switch (m) {
  case LIMITS_RLIMIT: return "rlimit";
  case LIMITS_CGROUP: return "cgroup";
  case LIMITS_NONE:
  default: return "none";
  }
}

int limits_cgroup_path(const char *text, char *out, size_t cap) {
  for (const char *line = text; line && *line;) {
    const char *nl = strchr(line, '\n');
    size_t len = nl ? (size_t)(nl - line) : strlen(line);
    if (len >= 3 && !strncmp(line, "0::", 3)) {
      if (len - 3 + 1 > cap) return -ERANGE;
      memcpy(out, line + 3, len - 3);
      out[len - 3] = '\0';
      return 0;
    }
    line = nl ? nl + 1 : NULL;
  }
  return -ENOENT;
}

int limits_has_controllers(const char *controllers, const char *need) {
  char want[64];
  for (const char *p = need; *p;) {
    while (*p == ' ') p++;
    size_t n = strcspn(p, " ");
    if (!n) break;
    if (n >= sizeof(want)) return 0;
    memcpy(want, p, n);
    want[n] = '\0';
    p += n;
    int found = 0;
    for (const char *c = controllers; *c && !found;) {
      while (*c == ' ' || *c == '\n') c++;
      size_t m = strcspn(c, " \n");
      found = m == n && !strncmp(c, want, n);
      c += m;
    }
    if (!found) return 0;
  }
  return 1;
}
