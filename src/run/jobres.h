/* Job resources: enforcing a crawl's memory, CPU and process limits (a
 * cgroup v2 per job when the daemon owns a delegated cgroup, else rlimits
 * through prlimit(1)), and measuring what a crawl used (peak memory, CPU
 * time) for its stats. The limits themselves are core/limits.h; the log and
 * items size limits are checked by the supervision sweep (run/supervise.c).
 *
 * Loop thread only, except jobres_log_says_oom (any thread).
 *
 * Ownership: jobres_t owns its paths and the cgroups it still has to
 * remove (jobres_release frees them);
 * jobres_cgroup_create returns a path the caller frees.
 */
#ifndef SPIDERD_RUN_JOBRES_H
#define SPIDERD_RUN_JOBRES_H

#include <stdint.h>

#include "config.h"
#include "core/limits.h"

typedef struct jobres {
  limits_mech_t mech;
  char *prlimit; /* prlimit(1)'s path (LIMITS_RLIMIT) */
  char *cg_dir;  /* the daemon's delegated cgroup directory (LIMITS_CGROUP) */
  char **graves; /* job cgroups killed but not yet empty, to remove */
  size_t ngraves;
} jobres_t;

/* Chooses the mechanism as cfg->job_limits says ("auto": a delegated cgroup
 * v2, else prlimit, else none) and logs which one is in force and why.
 * A cgroup is used only when the daemon is alone in it (a cgroup it shares
 * is not delegated to it); the daemon then moves into a leaf "supervisor"
 * of it (cgroup v2 lets only a cgroup without processes hand controllers
 * to its children), enables memory and pids for the job cgroups and
 * removes the empty job cgroups a previous run left. A refused cgroup is
 * left as it was found. 0 or -ENOMEM;
 * "nothing usable" is LIMITS_NONE, not an error. */
int jobres_init(jobres_t *r, const config_t *cfg);
void jobres_release(jobres_t *r);

/* The daemon's defaults ([spiderd] job_memory_limit, ...). */
void jobres_defaults(const config_t *cfg, job_limits_t *out);

/* What a crawl used, as far as it was seen. */
typedef struct jobres_usage {
  int sampled;      /* at least one reading */
  int64_t peak_rss; /* bytes: the leader's VmHWM (= its ru_maxrss), or the cgroup's memory.peak */
  int64_t peak_vm;  /* bytes: the leader's VmPeak (what RLIMIT_AS caps) */
  int64_t cpu_ms;   /* user + system of the leader and the children it reaped, or the cgroup's */
  int64_t oom_kills;     /* cgroup memory.events oom_kill */
  int64_t pids_max_hits; /* cgroup pids.events max */
} jobres_usage_t;

/* Reads the process's /proc entries into u (peaks and CPU only grow). A
 * process that is gone leaves u as it was. */
void jobres_sample_pid(int pid, jobres_usage_t *u);
/* Reads a job cgroup's memory.peak, cpu.stat and events into u. */
void jobres_sample_cgroup(const char *cg, jobres_usage_t *u);

/* The job cgroup of job id (created, its limits written, pid moved into
 * it): its path, or NULL (logged) when it cannot be made; the crawl then
 * runs unlimited by the kernel, its log and items limits still hold. */
char *jobres_cgroup_create(const jobres_t *r, int64_t job_id, const job_limits_t *lim, int pid);
/* Kills what is left in a job cgroup and removes it; one whose processes
 * have not exited yet is kept (a copy of cg) for jobres_reap. */
void jobres_cgroup_remove(jobres_t *r, const char *cg);
/* Removes the job cgroups jobres_cgroup_remove kept, those now empty. */
void jobres_reap(jobres_t *r);

/* Does the last 16 KiB of the log at path report an allocation failure
 * (Python's MemoryError, "Cannot allocate memory", std::bad_alloc)? */
int jobres_log_says_oom(const char *path);

#endif
