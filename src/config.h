/* Configuration: Scrapyd-compatible INI files + environment + command-line flags.
 *
 * Ownership: config_load() fills a caller-owned config_t whose strings and
 * arrays are owned by it; config_release() frees them.
 *
 * Sources, later wins (as Scrapyd's config.py, then spiderd's own):
 *   1. built-in defaults (Scrapyd 1.6's default_scrapyd.conf + spiderd's)
 *   2. /etc/scrapyd/scrapyd.conf
 *   3. /etc/scrapyd/conf.d/ (every file, sorted by name)
 *   4. ./scrapyd.conf          (the daemon's cwd)
 *   5. ~/.scrapyd.conf
 *   6. the closest scrapy.cfg from cwd upwards
 *   7. every --config FILE given on the command line, in order
 *   8. environment: SCRAPYD_BIND_ADDRESS, SCRAPYD_HTTP_PORT,
 *      SCRAPYD_UNIX_SOCKET_PATH, SCRAPYD_USERNAME, SCRAPYD_PASSWORD (as Scrapyd)
 *      and SPIDERD_<KEY> for every key of [spiderd] and [scrapyd]
 *      (upper-cased, e.g. SPIDERD_STORE, SPIDERD_MAX_PROC)
 *   9. command-line flags
 * In every INI file keys are read from [scrapyd], [spiderd], [services],
 * [settings], [retention] and [concurrency] (whose keys, project and spider
 * names, keep their case) and [hooks] (SPIDERD_HOOKS_<KEY> in the
 * environment, e.g. SPIDERD_HOOKS_JOB_FINISHED). The set of files can be replaced for tests by the environment
 * variable SPIDERD_CONFIG_FILES (':'-separated; an empty value reads no file).
 */
#ifndef SPIDERD_CONFIG_H
#define SPIDERD_CONFIG_H

#include <stddef.h>

/* One name = value pair of [services] or [settings], in the order read. */
typedef struct config_pair {
  char *name;
  char *value;
} config_pair_t;

/* One entry of [retention]: "project/spider = COUNT [DAYS]", or
 * "project = COUNT [DAYS]" for the project's default. */
typedef struct config_retention {
  char *project;
  char *spider; /* NULL: the project's default */
  int count;    /* ended jobs kept; 0 = no count limit */
  double days;  /* ended longer ago than this go; 0 = forever, < 0 = not given */
} config_retention_t;

/* One entry of [concurrency]: at most `max` running jobs of the project
 * (spider NULL: all its spiders together) or of one spider. */
typedef struct config_limit {
  char *project;
  char *spider;
  int max;
} config_limit_t;

/* What a source said that names a Scrapyd class, or that spiderd has no key
 * for: config_scrapyd_class() says what spiderd makes of it. */
enum config_class_kind {
  CONFIG_CLASS_KEY,     /* [scrapyd] application, spiderqueue, ..., jobstorage */
  CONFIG_CLASS_SERVICE, /* a [services] entry */
  CONFIG_CLASS_OTHER,   /* another [scrapyd] key that neither knows */
};
typedef struct config_class {
  enum config_class_kind kind;
  char *name;      /* "spiderqueue", "schedule.json", ... */
  char *value;     /* the class; "" a disabled service; NULL for OTHER */
  const char *src; /* the file that set it (in sources), or "--set" */
} config_class_t;

/* What config_scrapyd_class() found. */
enum config_class_verdict {
  CONFIG_CLASS_MAPPED,  /* Scrapyd's own class: spiderd does that itself */
  CONFIG_CLASS_IGNORED, /* a key neither knows: ignored, as Scrapyd would */
  CONFIG_CLASS_UNKNOWN, /* a class spiderd cannot honour */
};

typedef struct config {
  /* [scrapyd] — names, defaults and meaning as Scrapyd 1.6 */
  char *bind_address;      /* "127.0.0.1" */
  int http_port;           /* 6800; 0 = no TCP listener */
  char *unix_socket_path;  /* "" = none; when set, TCP still listens too */
  char *username;          /* "" */
  char *password;          /* "" ; basic auth only when both are non-empty */
  double poll_interval;    /* 5.0; accepted, unused: dispatch is immediate */
  int max_proc;            /* 0 = ncpu * max_proc_per_cpu */
  int max_proc_per_cpu;    /* 4 */
  char *logs_dir;          /* "logs"; "" disables job logs */
  char *items_dir;         /* "" ; a local path or a URL (scheme://...) */
  char *jobs_dir;          /* "" ; JOBDIR per job when set */
  int jobs_to_keep;        /* 5 ; 0 deletes nothing */
  char *runner;            /* "scrapyd.runner" (means spiderd_runner) */
  char *prefix_header;     /* "x-forwarded-prefix" */
  char *node_name;         /* default: gethostname() */
  int debug;               /* 0 */
  char *eggs_dir;          /* "eggs" */
  int finished_to_keep;    /* 100 ; finished jobs kept, 0 = keep all */
  char *dbs_dir;           /* "dbs" */

  /* [services]: the enabled Scrapyd endpoints (e.g. "schedule.json"), in
   * order. Default: the 11 of Scrapyd 1.6. A name with an empty value in a
   * file removes it; a name with a value adds it (the value, a Python class,
   * is kept but only built-in names are served). */
  config_pair_t *services;
  size_t nservices;
  /* [settings]: project name -> settings module, in order read. */
  config_pair_t *settings;
  size_t nsettings;

  /* [spiderd] — spiderd's own settings */
  char *store;             /* store URL; default "sqlite:<dbs_dir>/spiderd.db" */
  char *python;            /* interpreter for crawls; default SPIDERD_DEFAULT_PYTHON */
  char *pythonpath;        /* dir holding spiderd_runner; default SPIDERD_PYTHONDIR */
  char *ui_dir;            /* built console/, docs/, api/ served at /ui/, /docs/,
                            * /api/; default SPIDERD_UI_DIR ("" serves none) */
  /* HTTPS on the TCP listener (the Unix socket stays plain): both or neither. */
  char *https_cert;        /* "": PEM certificate (chain) file */
  char *https_key;         /* "": PEM private key file */
  char *https_key_password;      /* "": passphrase of an encrypted key */
  char *https_key_password_file; /* "": or read it from this file (first line) */
  char *https_priorities;  /* GnuTLS priority string; TLS 1.2 and later */
  char *store_password_file; /* "": the store's password, kept out of its URL;
                              * SPIDERD_STORE_PASSWORD is read the same way */
  double cancel_grace;     /* 60 s: after a cancel, KILL the crawl's group */
  double shutdown_grace;   /* 10 s: on daemon stop, TERM then KILL after this */
  double drain_grace;      /* 30 s: on SIGTERM, claim nothing and let crawls end
                            * for this long before the stop above; 0 = stop now */
  /* Job robustness defaults, for jobs whose own value is 0 (see operations.md). */
  double job_timeout;      /* 0 s = none: TERM, then KILL after cancel_grace */
  int job_retries;         /* 0: attempts after a failed or lost one */
  double retry_backoff;    /* 10 s: first retry delay, doubling per attempt */
  /* Resource limit defaults, for jobs without their own _memory_limit etc.
   * (core/limits.h); 0 = none. */
  long long job_memory_limit; /* bytes */
  double job_cpu_limit;       /* CPU seconds (user + system) */
  int job_max_procs;          /* processes */
  long long job_log_limit;    /* bytes of the job's log */
  long long job_items_limit;  /* bytes of the job's local items file */
  char *job_limits;           /* "auto" (cgroup v2 if delegated, else rlimit),
                               * "cgroup", "rlimit" or "off" */
  int warm_templates;         /* 4: warm start templates kept (run/warm.h); 0 = cold starts only */
  double warm_idle;           /* 600 s: a template unused this long exits */
  double heartbeat_interval; /* 5 s: how often a crawl's reactor proves it lives */
  double heartbeat_timeout;  /* 60 s; 0 = off: a crawl silent this long is lost */
  long long max_upload;    /* 64 MiB: largest request body accepted */
  int http_timeout;        /* 60 s: an idle connection, or a request whose headers
                            * take longer to arrive, is closed */
  int http_connections;    /* 4096: open HTTP connections per listener */
  int list_page;           /* 1000: jobs read per round of a streamed listing
                            * (api/listing.h), at most JOB_PAGE_MAX */
  char *log_file;          /* "" = stderr: the daemon's own log */
  char *log_level;         /* "info": debug|info|warning|error */
  char *log_format;        /* "text" (twistd's lines) or "json" (one object a line) */
  char *unknown_scrapyd_classes; /* "refuse": a Scrapyd class spiderd cannot honour
                                  * stops start-up; "warn": logged, ignored */
  char *pidfile;           /* "" = none */
  int scheduler;           /* on: take part in firing schedules (lease holder fires) */
  double scheduler_lease;  /* 10 s: the scheduler lease's time to live */
  int probes_public;       /* on: /healthz, /readyz and /metrics need no basic auth */
  int insecure;            /* on: serve a public address without authentication */
  int auth_fail_limit;     /* 10 failed logins a minute per address, then 429; 0 = none */
  int auth_throttle_loopback; /* off: loopback and the Unix socket are never throttled */
  char *trusted_proxies;   /* "": reverse proxies whose X-Forwarded-For names the client */
  double schedule_horizon; /* 3 days of upcoming runs materialised */
  double misfire_grace;    /* 60 s: a run later than this counts as missed */
  char *webhooks;          /* "": daemon-wide webhook URLs, comma/space separated */
  char *webhook_events;    /* "job.finished job.failed": types, or prefixes ending in '.' */
  char *webhook_secret;    /* "": when set, deliveries carry an HMAC-SHA256 signature */
  double webhook_timeout;  /* 10 s per delivery attempt */
  int webhook_retries;     /* 8 retries after a failed first attempt */
  double webhook_backoff;  /* 1 s: first retry delay, doubling (tests shorten it) */
  char *webhook_allow_private; /* "": networks (CIDR) deliveries may reach though private */
  /* History retention (run/janitor.c); [retention] overrides per project/spider. */
  int history_per_spider;  /* 0 = no limit: ended jobs kept per project/spider */
  double history_days;     /* 0 = forever: ended jobs older than this go */
  double events_days;      /* 30; 0 = forever: events and ended runs older go */
  double janitor_interval; /* 60 s between retention passes */
  /* S3-compatible object storage of logs and items (run/objstore.c). */
  char *object_store;      /* "": s3://BUCKET/PREFIX */
  char *object_store_endpoint; /* "": AWS; else http(s)://host:port, path-style */
  char *object_store_region;   /* "us-east-1" */
  char *object_store_credentials; /* "": AWS shared-credentials file, else env */
  double object_store_flush;   /* 5 s between uploads of a running job's log */
  int object_store_eggs;       /* off: eggs' bytes in the shared store; on: in the bucket */
  /* Nodes sharing a store (run/cluster.c). */
  char *node_url;          /* "": where other nodes reach this one; default
                            * http://<bind_address or hostname>:<http_port> */
  double node_heartbeat;   /* 3 s between this node's heartbeats */
  double node_timeout;     /* 15 s: a node silent this long is dead, its jobs lost */
  /* Python environments of project versions (api/pyenvs.h). */
  char *pip_index_url;       /* "": pip's default; "none": no index (--no-index) */
  char *pip_extra_index_url; /* "": more indexes, space separated */
  char *pip_find_links;      /* "": local wheel directories or pages, space separated */
  char *pip_trusted_hosts;   /* "": hosts pip trusts without valid HTTPS */
  double env_build_timeout;  /* 600 s: a build still running then is killed */
  int env_prebuild;          /* off: build versions' environments on first claim; on: ahead */

  /* [hooks]: commands run (/bin/sh -c) on a job's events (run/hooks.h);
   * "" = none. */
  char *hook_job_queued;
  char *hook_job_started;
  char *hook_job_finished;
  char *hook_job_failed;
  char *hook_job_cancelled;
  char *hook_job_lost;
  char *hook_job_ended;    /* every final state: finished, failed, cancelled, lost */
  char *hook_job_degraded; /* a job's health was rated degraded (flow/health.h) */
  char *hook_job_broken;   /* ... or broken */
  double hook_timeout;     /* 30 s: a hook still running then is killed */
  int hook_concurrency;    /* 4 hook processes at once; the rest wait in order */

  /* Slots by memory (flow/memfit.h, run/memory.h): a node starts a job only
   * when its expected memory fits in what is free less memory_reserve. */
  long long memory_reserve;     /* 256M: bytes kept free for everything else */
  long long job_memory_default; /* 100M: a job's expected memory when nothing says */
  long long jobs_memory;        /* 0 = no cap: bytes the crawls together may reserve */

  /* Filled by config_load_secrets(), not by config_load(). */
  char *store_password;    /* NULL: none given apart from the URL */

  /* [retention], in the order read; a key set again by a later source
   * replaces the earlier value in place. */
  config_retention_t *retention;
  size_t nretention;
  /* [concurrency], in the order read (run/launcher.c applies them). */
  config_limit_t *limits;
  size_t nlimits;

  /* Scrapyd's class keys and [services] entries the sources set, and the
   * [scrapyd] keys nobody knows, in the order read (a key set again by a
   * later source replaces its entry). */
  config_class_t *classes;
  size_t nclasses;

  /* Files actually read, in order (for `spiderd config` and messages). */
  char **sources;
  size_t nsources;
} config_t;

/* Loads all sources into *c (which need not be initialised).
 * argv: the arguments after the sub-command (e.g. after "serve").
 * Flags: --config FILE (repeatable), --bind ADDR, --port N,
 *        --unix-socket PATH, --store URL, --python PATH, --max-proc N,
 *        --eggs-dir D, --logs-dir D, --items-dir D, --dbs-dir D,
 *        --node-name NAME, --log-file F, --log-level L, --log-format F,
 *        --pidfile F, --ui-dir D,
 *        --set SECTION.KEY=VALUE (any key, repeatable).
 * Both "--flag value" and "--flag=value" are accepted.
 * Returns 0, or a negative code with a message in err naming the source
 * (file path, environment variable or flag), the key and the reason, e.g.
 *   "/srv/scrapyd.conf: [scrapyd] max_proc: 'abc' is not an integer".
 * On failure *c is released. A ':' in username is an error (as Scrapyd). */
int config_load(config_t *c, int argc, char **argv, char *err, size_t errlen);

/* For the daemon (not the client, which need not be able to read them):
 * reads https_key_password_file into https_key_password, and the store's
 * password from SPIDERD_STORE_PASSWORD or else store_password_file into
 * store_password. Both files hold the secret on their first line.
 * SPIDERD_STORE_PASSWORD and SPIDERD_HTTPS_KEY_PASSWORD are then removed
 * from the environment, so crawls do not inherit them.
 * Returns 0, or SPD_ECONFIG with the key, file and reason in err. */
int config_load_secrets(config_t *c, char *err, size_t errlen);

/* 0 with *out set when s is one of ConfigParser's BOOLEAN_STATES (1, yes,
 * true, on / 0, no, false, off; any case), else -EINVAL. */
int config_parse_bool(const char *s, int *out);

/* Copies url into out with the password of a "scheme://user:password@host"
 * (or a password=... parameter) replaced by "***", for messages. */
void config_redact_url(const char *url, char *out, size_t outlen);

/* Frees everything config_load allocated; *c may then be loaded again. */
void config_release(config_t *c);

/* What spiderd makes of e, with a sentence for the log (or for the refusal)
 * in msg: CONFIG_CLASS_MAPPED when e names Scrapyd 1.6's own class (or
 * disables a service), CONFIG_CLASS_UNKNOWN when spiderd cannot do what the
 * class does (msg says what it offers instead), CONFIG_CLASS_IGNORED for a
 * key neither knows. */
enum config_class_verdict config_scrapyd_class(const config_t *c, const config_class_t *e,
                                               char *msg, size_t msglen);

/* For the daemon: SPD_ECONFIG, with the source, key, class and what spiderd
 * offers instead in err, when a class is UNKNOWN and unknown_scrapyd_classes
 * is "refuse"; else 0. (config_load accepts them, so that the command-line
 * client still finds the daemon's address in such a file.) */
int config_check_scrapyd_classes(const config_t *c, char *err, size_t errlen);

/* Is the Scrapyd endpoint NAME (e.g. "cancel.json") enabled in [services]? */
int config_service_enabled(const config_t *c, const char *name);

/* The settings module for a [settings] project, or NULL. */
const char *config_project_settings(const config_t *c, const char *project);

/* Effective max_proc: max_proc, or ncpu * max_proc_per_cpu when it is 0. */
int config_max_proc(const config_t *c);

/* Is items_dir a URL (scheme://...) rather than a local path? */
int config_items_remote(const config_t *c);

#endif
