/* The configuration loader's private side, shared by config.c (the keys,
 * their defaults and what a value means), config_load.c (the sources, read,
 * merged and checked in order) and config_secret.c (secrets read after the
 * load, and URLs shown without them). Ownership as in config.h: what a
 * loader's functions store in its config_t belongs to that config_t.
 */
#ifndef SPIDERD_CONFIG_INT_H
#define SPIDERD_CONFIG_INT_H

#include <stddef.h>

#include "config.h"

#define FORMAT(a, b) __attribute__((format(printf, a, b)))
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The sections read: a section is one of these, compared by address
 * (defined in config.c as SEC_*). */
extern const char config_sec_scrapyd[], config_sec_spiderd[], config_sec_services[],
    config_sec_settings[], config_sec_retention[], config_sec_concurrency[],
    config_sec_default[], config_sec_hooks[];
#define SEC_SCRAPYD config_sec_scrapyd
#define SEC_SPIDERD config_sec_spiderd
#define SEC_SERVICES config_sec_services
#define SEC_SETTINGS config_sec_settings
#define SEC_RETENTION config_sec_retention
#define SEC_CONCURRENCY config_sec_concurrency
#define SEC_DEFAULT config_sec_default
#define SEC_HOOKS config_sec_hooks

struct key; /* one key of [scrapyd] or [spiderd] (config.c's table) */

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
  size_t len;
  int file, lineno;
};

/* ---- the keys and their values (config.c) ---- */

int config_report(struct loader *L, int code, const char *fmt, ...) FORMAT(3, 4);
int config_oom(struct loader *L);
/* A value is rejected: the message names its source, section and key. */
int config_bad(struct loader *L, const struct src *s, const char *section, const char *name,
               const char *fmt, ...) FORMAT(5, 6);
/* A lower-cased copy of s's n bytes (malloc'd), or NULL. */
char *config_lower_dup(const char *s, size_t n);
/* The key NAME of SECTION, or of a flag ("--port", n bytes of arg); NULL. */
const struct key *config_key_find(const char *section, const char *name);
const struct key *config_key_of_flag(const char *arg, size_t n);
/* A key's flag ("--port"), and whether the flag alone means "on". */
const char *config_key_flag(const struct key *k);
int config_key_is_bool(const struct key *k);
/* A key of [scrapyd] or [spiderd] that is not in the table: an error, or
 * noted in c->classes when one of Scrapyd's class keys (with its VALUE), or
 * 0 for a [scrapyd] key nobody knows (which the caller may note). */
int config_unknown_key(struct loader *L, const struct src *s, const char *section,
                       const char *name, const char *value);
/* Validates V for key K and stores it in the config. */
int config_apply(struct loader *L, const struct key *k, const char *v, const struct src *s);
int config_set_string(struct loader *L, char **field, const char *v);
/* [services] and [settings]: replaces NAME's value in place or appends it;
 * removes NAME. */
int config_pairs_put(config_pair_t **arr, size_t *n, const char *name, const char *value);
void config_pairs_del(config_pair_t *arr, size_t *n, const char *name);
/* One [retention] or [concurrency] key, as a file or --set gives it. */
int config_retention_put(struct loader *L, const struct src *s, const char *name,
                         const char *value);
int config_limit_put(struct loader *L, const struct src *s, const char *name,
                     const char *value);
/* The built-in defaults: every key's, and the raw view's for interpolation. */
int config_set_defaults(struct loader *L);
/* SCRAPYD_* and SPIDERD_<KEY> from the environment. */
int config_apply_env(struct loader *L);

/* Scrapyd 1.6's class keys and [services] entries, {name, default class}. */
extern const char *const config_scrapyd_class_keys[][2];
extern const size_t config_nscrapyd_class_keys;
extern const char *const config_default_services[][2];
extern const size_t config_ndefault_services;

/* ---- Scrapyd's classes (config_scrapyd.c) ---- */

/* Is NAME one of Scrapyd's class keys (spiderqueue, launcher, ...)? */
int config_is_class_key(const char *name);
/* Notes what source S set: a class key or [services] entry with its VALUE
 * (resolved), or an unknown [scrapyd] key (VALUE NULL). 0 or -ENOMEM. */
int config_class_note(struct loader *L, const struct src *s, enum config_class_kind kind,
                      const char *name, const char *value);
void config_classes_free(config_class_t *v, size_t n);

/* ---- the sources (config_load.c) ---- */

/* Sets section.name = value in the merged view; takes NAME. */
int config_raw_set(struct loader *L, const char *section, char *name, const char *value);

/* ---- secrets (config_secret.c) ---- */

/* Wipes and frees a secret string (NULL allowed). */
void config_secret_free(char *p);

#endif
