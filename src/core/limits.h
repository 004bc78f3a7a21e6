/* Per-job resource limits: memory, CPU time, processes, log size and items
 * size. The pure part: parsing a job's own values, merging them with the
 * daemon's defaults, the rlimit wrapper's arguments, and what an end under
 * limits means. Enforcement is in run/jobres.c (a cgroup or rlimits) and
 * run/supervise.c (the log and items size sweep).
 *
 * A job carries its own limits as underscored spider arguments
 * (`_memory_limit=512M`, `_cpu_limit=600`, `_max_procs=64`,
 * `_log_limit=100M`, `_items_limit=1G`), like _version: they are stored
 * with the job's args (so every store backend and every schedule keeps
 * them) and never reach the spider. 0 or absent = the daemon's default
 * ([spiderd] job_memory_limit, ...), whose 0 = no limit.
 *
 * Ownership: nothing here allocates.
 */
#ifndef SPIDERD_CORE_LIMITS_H
#define SPIDERD_CORE_LIMITS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

typedef struct job_limits {
  int64_t memory;   /* bytes; 0 = none */
  int64_t cpu_s;    /* CPU seconds (user + system); 0 = none */
  int64_t procs;    /* processes (cgroup: of the job; rlimit: of the user); 0 = none */
  int64_t log;      /* bytes of the job's log file; 0 = none */
  int64_t items;    /* bytes of the job's local items file; 0 = none */
} job_limits_t;

/* How the kernel-side limits (memory, CPU, processes) are enforced. */
typedef enum limits_mech {
  LIMITS_NONE = 0, /* not enforced (no delegated cgroup, no prlimit) */
  LIMITS_RLIMIT,   /* setrlimit in the crawl, through prlimit(1) */
  LIMITS_CGROUP,   /* a cgroup v2 per job under the daemon's delegated cgroup */
} limits_mech_t;

/* The special arguments, in job_limits_t order. */
#define LIMITS_NARGS 5
extern const char *const limits_arg_names[LIMITS_NARGS];

/* Is key one of the special arguments (kept from the spider's argv)? */
int limits_is_arg(const char *key);

/* Bytes, optionally with a binary K, M or G suffix ("512M", "2G", "1048576"),
 * white space around allowed; 0 or -EINVAL / -ERANGE. Negative is -EINVAL. */
int limits_parse_size(const char *s, int64_t *out);

/* The value of special argument `name` given as text (sizes for the memory,
 * log and items limits; whole seconds, or a fraction rounded up, for CPU; a
 * whole number for processes), into *out. 0 or -EINVAL with why. */
int limits_parse_arg(const char *name, const char *text, int64_t *out, char *why, size_t whylen);

/* A job's limits: each special argument in args (a string, or a JSON number)
 * that is non-zero, else the default. 0, or -EINVAL with why naming the
 * argument ("_memory_limit is invalid: ..."). args may be NULL. */
int limits_resolve(const json_t *args, const job_limits_t *defaults, job_limits_t *out,
                   char *why, size_t whylen);

/* Does any limit apply that the kernel enforces (memory, CPU, processes)? */
int limits_kernel(const job_limits_t *lim);

/* The prlimit(1) options for lim, written into opts[0..n) (each at most
 * LIMITS_OPT_MAX bytes): --as for memory, --cpu soft:hard for CPU (SIGXCPU
 * at the limit, KILL a few seconds later if the crawl ignores it), --nproc
 * for processes. Returns n (0..3). */
#define LIMITS_OPT_MAX 48
size_t limits_prlimit_opts(const job_limits_t *lim, char opts[3][LIMITS_OPT_MAX]);

/* The same limits as setrlimit(2) triples (RLIMIT_AS, RLIMIT_CPU,
 * RLIMIT_NPROC), for a crawl that sets them itself (a warm start). */
typedef struct limits_rlimit {
  int resource;
  int64_t soft, hard;
} limits_rlimit_t;
size_t limits_rlimits(const job_limits_t *lim, limits_rlimit_t out[3]);

/* What a crawl's end says about its limits. */
typedef struct limits_end {
  int failed;          /* it exited non-zero or died of a signal we did not send */
  int term_signal;
  int64_t peak_vm;     /* bytes; the highest virtual size seen (VmPeak), 0 = unknown */
  int64_t cpu_ms;      /* CPU time seen, 0 = unknown */
  int memory_error;    /* its log's tail reports an allocation failure */
  /* cgroup counters (memory.events oom_kill, pids.events max); 0 under rlimits */
  int64_t oom_kills;
  int64_t pids_max_hits;
} limits_end_t;

/* The end reason ("memory_limit", "cpu_limit", "pids_limit") for a crawl
 * that ended as e says under lim with mechanism mech, or NULL when no limit
 * explains it. Under rlimits a memory limit is inferred (the kernel keeps
 * no record of a refused allocation): the crawl failed and either its
 * virtual size reached 90 % of the limit at a sample or its log reports a
 * MemoryError / "Cannot allocate memory". */
const char *limits_end_reason(limits_mech_t mech, const job_limits_t *lim,
                              const limits_end_t *e);

/* "none", "rlimit", "cgroup". */
const char *limits_mech_name(limits_mech_t m);

/* From the text of /proc/self/cgroup: the cgroup v2 path of the process (the
 * "0::" line) into out. 0, or -ENOENT when there is no v2 line, -ERANGE when
 * it does not fit. */
int limits_cgroup_path(const char *proc_self_cgroup, char *out, size_t cap);

/* Does a cgroup.controllers text list every controller of the
 * space-separated list need? */
int limits_has_controllers(const char *controllers, const char *need);

#endif
