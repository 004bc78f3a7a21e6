/* Job resources: limit enforcement and usage (run/jobres.h). */
#include "run/jobres.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

#define CG_MOUNT "/sys/fs/cgroup"
/* The controllers a job cgroup needs; CPU time is read from cpu.stat,
 * which every cgroup v2 has without the cpu controller. */
#define CG_NEED "memory pids"

/* Reads a small file whole into buf (NUL-terminated); bytes read or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  size_t n = 0;
  while (n + 1 < cap) {
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = '\0';
  return (ssize_t)n;
}

static int write_str(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  ssize_t w = write(fd, text, strlen(text));
  int rc = w == (ssize_t)strlen(text) ? 0 : (w < 0 ? -errno : -EIO);
  close(fd);
  return rc;
}

static int write_at(const char *dir, const char *file, const char *text) {
  char path[4096];
  if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path)) return -ENAMETOOLONG;
  return write_str(path, text);
}

/* Finds prog in PATH (and /usr/bin, /bin, where util-linux puts it). */
static char *find_program(const char *prog) {
  const char *path = getenv("PATH");
  char *dirs = NULL;
  if (asprintf(&dirs, "%s:/usr/bin:/bin", path && *path ? path : "/usr/local/bin") < 0) return NULL;
  char *save = NULL, *found = NULL;
  for (char *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
    char *cand = NULL;
    if (!*d || asprintf(&cand, "%s/%s", d, prog) < 0) continue;
    if (access(cand, X_OK) == 0) found = cand;
    else free(cand);
  }
  free(dirs);
  return found;
}

/* A reason for a person, cut at whylen (paths make it long). */
__attribute__((format(printf, 3, 4))) static void say(char *why, size_t whylen,
                                                      const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, whylen, fmt, ap);
  va_end(ap);
}

/* Does the cgroup directory dir hold no process but this one? A cgroup
 * shared with others (a login session, a CI runner, a service that was not
 * delegated) is not the daemon's to reorganise. */
static int cgroup_is_ours(const char *dir) {
  char path[4096], procs[4096];
  if (snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >= (int)sizeof(path) ||
      read_small(path, procs, sizeof(procs)) < 0)
    return 0;
  long self = (long)getpid();
  for (char *p = procs; *p;) {
    char *end = NULL;
    long pid = strtol(p, &end, 10);
    if (end == p) break;
    if (pid != self) return 0;
    p = end;
    while (*p == '\n') p++;
  }
  return 1;
}

/* Job cgroups a previous run left empty (a crawl's leftovers that outlived
 * its leader past the daemon's end): removed. A populated one is a crawl
 * still running, adopted at start-up: rmdir refuses it. */
static void cgroup_sweep_stale(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  char path[4096];
  for (struct dirent *e; (e = readdir(d));) {
    if (strncmp(e->d_name, "job-", 4) != 0) continue;
    if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path)) continue;
    rmdir(path);
  }
  closedir(d);
}

/* Moves the daemon into dir/supervisor and hands memory and pids to dir's
 * children. On failure, puts the daemon back where it was (from, under
 * CG_MOUNT) and removes what it made: a refused cgroup is left as found. */
static int cgroup_take(const char *dir, const char *from, char *why, size_t whylen) {
  char path[4096], pid[32], back[4096];
  snprintf(path, sizeof(path), "%s/supervisor", dir);
  int made = mkdir(path, 0755) == 0;
  if (!made && errno != EEXIST) {
    say(why, whylen, "cannot create %s: %s", path, strerror(errno));
    return -1;
  }
  snprintf(pid, sizeof(pid), "%d", (int)getpid());
  int rc = write_at(path, "cgroup.procs", pid);
  int moved = !rc;
  if (!rc) rc = write_at(dir, "cgroup.subtree_control", "+memory +pids");
  if (!rc) return 0;
  say(why, whylen, "cannot enable the memory and pids controllers under %s: %s", dir,
      strerror(-rc));
  snprintf(back, sizeof(back), CG_MOUNT "%s", from);
  int brc = moved ? write_at(back, "cgroup.procs", pid) : 0;
  if (brc) log_warn("launcher", "could not move back into %s: %s", back, strerror(-brc));
  if (made) rmdir(path);
  return -1;
}

/* Sets up the daemon's delegated cgroup for job cgroups; 0 with r->cg_dir,
 * or -1 with why. */
static int cgroup_setup(jobres_t *r, char *why, size_t whylen) {
  char text[4096], own[2048], from[2048], ctl[512], path[4096];
  if (read_small(CG_MOUNT "/cgroup.controllers", ctl, sizeof(ctl)) < 0) {
    snprintf(why, whylen, "no cgroup v2 hierarchy at " CG_MOUNT);
    return -1;
  }
  if (read_small("/proc/self/cgroup", text, sizeof(text)) < 0 ||
      limits_cgroup_path(text, own, sizeof(own))) {
    snprintf(why, whylen, "/proc/self/cgroup names no cgroup v2");
    return -1;
  }
  if (!strcmp(own, "/")) {
    snprintf(why, whylen, "the daemon runs in the root cgroup (no delegated sub-tree)");
    return -1;
  }
  snprintf(from, sizeof(from), "%s", own);
  snprintf(path, sizeof(path), CG_MOUNT "%s", from);
  if (!cgroup_is_ours(path)) {
    say(why, whylen, "other processes share the daemon's cgroup %s (it needs one of its "
        "own: systemd Delegate=yes)", path);
    return -1;
  }
  char *dir = NULL;
  /* Already moved into our leaf (a restart in the same cgroup keeps it). */
  size_t ol = strlen(own);
  if (ol > 11 && !strcmp(own + ol - 11, "/supervisor")) own[ol - 11] = '\0';
  if (asprintf(&dir, CG_MOUNT "%s", own) < 0) return -1;
  snprintf(path, sizeof(path), "%s/cgroup.controllers", dir);
  if (read_small(path, ctl, sizeof(ctl)) < 0 || !limits_has_controllers(ctl, CG_NEED)) {
    snprintf(why, whylen, "%s does not offer the memory and pids controllers", dir);
    goto fail;
  }
  if (access(dir, W_OK) != 0) {
    snprintf(why, whylen, "%s is not writable (not delegated: systemd Delegate=yes)", dir);
    goto fail;
  }
  /* A cgroup with processes cannot enable controllers for its children
   * ("no internal processes"): the daemon moves into a leaf of its own. */
  if (cgroup_take(dir, from, why, whylen)) goto fail;
  cgroup_sweep_stale(dir);
  r->cg_dir = dir;
  return 0;
fail:
  free(dir);
  return -1;
}

int jobres_init(jobres_t *r, const config_t *cfg) {
  memset(r, 0, sizeof(*r));
  const char *mode = cfg->job_limits && *cfg->job_limits ? cfg->job_limits : "auto";
  char why[512] = "";
  if (!strcmp(mode, "off")) {
    log_info("launcher", "job limits: memory, CPU and process limits are off (job_limits = off);"
             " log and items sizes are still checked");
    return 0;
  }
  if ((!strcmp(mode, "auto") || !strcmp(mode, "cgroup")) && !cgroup_setup(r, why, sizeof(why))) {
    r->mech = LIMITS_CGROUP;
    log_info("launcher", "job limits: enforced by a cgroup v2 per job under %s", r->cg_dir);
    return 0;
  }
  if (!strcmp(mode, "cgroup"))
    log_warn("launcher", "job limits: job_limits = cgroup, but %s; falling back to rlimits", why);
  r->prlimit = find_program("prlimit");
  if (r->prlimit) {
    r->mech = LIMITS_RLIMIT;
    log_info("launcher",
             "job limits: enforced by rlimits (%s: RLIMIT_AS, RLIMIT_CPU, RLIMIT_NPROC)%s%s",
             r->prlimit, why[0] ? "; no cgroup: " : "", why);
  } else {
    log_warn("launcher", "job limits: memory, CPU and process limits cannot be enforced: "
             "no delegated cgroup%s%s and no prlimit(1) (util-linux)",
             why[0] ? ": " : "", why);
  }
  return 0;
}

void jobres_release(jobres_t *r) {
  jobres_reap(r);
  for (size_t i = 0; i < r->ngraves; i++) {
    log_warn("launcher", "cgroup %s still holds processes: left in place", r->graves[i]);
    free(r->graves[i]);
  }
  free(r->graves);
  free(r->prlimit);
  free(r->cg_dir);
  memset(r, 0, sizeof(*r));
}

void jobres_defaults(const config_t *cfg, job_limits_t *out) {
  out->memory = cfg->job_memory_limit;
  out->cpu_s = (int64_t)ceil(cfg->job_cpu_limit);
  out->procs = cfg->job_max_procs;
  out->log = cfg->job_log_limit;
  out->items = cfg->job_items_limit;
}

static int64_t status_kb(const char *status, const char *key) {
  const char *p = strstr(status, key);
  return p ? strtoll(p + strlen(key), NULL, 10) : 0;
}

void jobres_sample_pid(int pid, jobres_usage_t *u) {
  char path[64], buf[4096];
  snprintf(path, sizeof(path), "/proc/%d/status", pid);
  if (read_small(path, buf, sizeof(buf)) <= 0) return;
  int64_t hwm = status_kb(buf, "\nVmHWM:") * 1024, peak = status_kb(buf, "\nVmPeak:") * 1024;
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  if (read_small(path, buf, sizeof(buf)) <= 0) return;
  char *p = strrchr(buf, ')');
  if (!p) return;
  /* After the command name, field 3 (state) is token 0: utime, stime,
   * cutime, cstime (fields 14-17) are tokens 11-14. */
  long long t[4] = {0};
  char *save = NULL, *tok = strtok_r(p + 1, " ", &save);
  for (int i = 0; tok && i <= 14; i++, tok = strtok_r(NULL, " ", &save))
    if (i >= 11) t[i - 11] = strtoll(tok, NULL, 10);
  long hz = sysconf(_SC_CLK_TCK);
  int64_t cpu = (t[0] + t[1] + t[2] + t[3]) * 1000 / (hz > 0 ? hz : 100);
  if (hwm > u->peak_rss) u->peak_rss = hwm;
  if (peak > u->peak_vm) u->peak_vm = peak;
  if (cpu > u->cpu_ms) u->cpu_ms = cpu;
  u->sampled = 1;
}

static int64_t keyed(const char *text, const char *key) {
  size_t kl = strlen(key);
  for (const char *p = text; p && *p;) {
    if (!strncmp(p, key, kl) && p[kl] == ' ') return strtoll(p + kl + 1, NULL, 10);
    p = strchr(p, '\n');
    if (p) p++;
  }
  return 0;
}

void jobres_sample_cgroup(const char *cg, jobres_usage_t *u) {
  char path[4096], buf[2048];
  snprintf(path, sizeof(path), "%s/memory.peak", cg); /* Linux 5.19 and later */
  if (read_small(path, buf, sizeof(buf)) > 0) {
    int64_t v = strtoll(buf, NULL, 10);
    if (v > u->peak_rss) u->peak_rss = v;
    u->sampled = 1;
  }
  snprintf(path, sizeof(path), "%s/cpu.stat", cg);
  if (read_small(path, buf, sizeof(buf)) > 0) {
    int64_t ms = keyed(buf, "usage_usec") / 1000;
    if (ms > u->cpu_ms) u->cpu_ms = ms;
    u->sampled = 1;
  }
  snprintf(path, sizeof(path), "%s/memory.events", cg);
  if (read_small(path, buf, sizeof(buf)) > 0) u->oom_kills = keyed(buf, "oom_kill");
  snprintf(path, sizeof(path), "%s/pids.events", cg);
  if (read_small(path, buf, sizeof(buf)) > 0) u->pids_max_hits = keyed(buf, "max");
}

char *jobres_cgroup_create(const jobres_t *r, int64_t job_id, const job_limits_t *lim, int pid) {
  char *cg = NULL, num[32];
  if (r->mech != LIMITS_CGROUP || asprintf(&cg, "%s/job-%lld", r->cg_dir, (long long)job_id) < 0)
    return NULL;
  int rc = mkdir(cg, 0755) == 0 || errno == EEXIST ? 0 : -errno;
  if (!rc && lim->memory > 0) {
    snprintf(num, sizeof(num), "%lld", (long long)lim->memory);
    rc = write_at(cg, "memory.max", num);
    /* Swap would let the crawl grow past memory.max: none (best effort,
     * there may be no swap controller file without swap accounting). */
    if (!rc) write_at(cg, "memory.swap.max", "0");
  }
  if (!rc && lim->procs > 0) {
    snprintf(num, sizeof(num), "%lld", (long long)lim->procs);
    rc = write_at(cg, "pids.max", num);
  }
  /* The crawl is moved after uv_spawn returns (libuv cannot spawn into a
   * cgroup): what it forks in its first instants, before this write,
   * stays outside. A Python interpreter forks nothing that early. */
  snprintf(num, sizeof(num), "%d", pid);
  if (!rc) rc = write_at(cg, "cgroup.procs", num);
  if (rc) {
    log_error("launcher", "job #%lld: cannot set up its cgroup %s: %s; its memory, CPU and "
              "process limits are not enforced", (long long)job_id, cg, strerror(-rc));
    rmdir(cg);
    free(cg);
    return NULL;
  }
  return cg;
}

void jobres_cgroup_remove(jobres_t *r, const char *cg) {
  if (!cg) return;
  /* Leftovers of the crawl (it was KILLed by group already; a process that
   * left the group is still in the cgroup): cgroup.kill, Linux 5.14. */
  write_at(cg, "cgroup.kill", "1");
  if (rmdir(cg) == 0 || errno == ENOENT) return;
  /* The killed need a moment to exit: the sweep tries again. */
  char *copy = strdup(cg);
  char **grown = copy ? realloc(r->graves, (r->ngraves + 1) * sizeof(*grown)) : NULL;
  if (!grown) {
    log_warn("launcher", "cgroup %s not removed: %s", cg, strerror(errno));
    free(copy);
    return;
  }
  r->graves = grown;
  r->graves[r->ngraves++] = copy;
}

void jobres_reap(jobres_t *r) {
  size_t kept = 0;
  for (size_t i = 0; i < r->ngraves; i++) {
    if (rmdir(r->graves[i]) == 0 || errno == ENOENT) free(r->graves[i]);
    else r->graves[kept++] = r->graves[i];
  }
  r->ngraves = kept;
}

int jobres_log_says_oom(const char *path) {
  static const char *const marks[] = {"MemoryError", "Cannot allocate memory", "std::bad_alloc",
                                      "out of memory"};
  char buf[16384 + 1];
  if (!path) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat st;
  off_t from = fstat(fd, &st) == 0 && st.st_size > 16384 ? st.st_size - 16384 : 0;
  ssize_t n = pread(fd, buf, sizeof(buf) - 1, from);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  /* The log may hold NULs (a binary write): search past them. */
  for (ssize_t i = 0; i < n; i++)
    if (!buf[i]) buf[i] = ' ';
  for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++)
    if (strstr(buf, marks[i])) return 1;
  return 0;
}
