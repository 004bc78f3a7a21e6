/* spiderd.json: the manifest of a project whose spiders are commands (any
 * language) rather than a Scrapy egg (docs/spiders.md).
 *
 *   {"spiders": {"hello": {"command": ["node", "crawl.js", "{spider}"]},
 *                "count": {"command": ["sh", "count.sh"]}}}
 *   {"command": ["python3", "run.py", "{spider}"], "spiders": ["a", "b"]}
 *
 * Top-level keys: "spiders" (required: an object of name -> {"command":
 * [...]}, or an array of names), "command" (a default for spiders that give
 * none; required when "spiders" is an array). A command is a non-empty array
 * of strings, the first non-empty. The one placeholder is {spider}; any other
 * "{name}" (letters, digits, '_') is refused, other braces are literal.
 * Spider names follow name_valid("spider"). Anything else is refused with a
 * reason a person can act on.
 *
 * Also the rules for an archive member's path (manifest_member_check).
 *
 * Pure: no I/O. Ownership: a manifest_t owns its strings; release it with
 * manifest_release. manifest_argv returns a malloc'd NULL-terminated array
 * of malloc'd strings (manifest_argv_free).
 */
#ifndef SPIDERD_CORE_MANIFEST_H
#define SPIDERD_CORE_MANIFEST_H

#include <stddef.h>

#define MANIFEST_NAME "spiderd.json"
#define MANIFEST_MAX_BYTES (1024 * 1024)
#define MANIFEST_MAX_SPIDERS 1000
#define MANIFEST_MAX_ARGS 256

typedef struct manifest_spider {
  char *name;
  char **command; /* NULL-terminated, placeholders not yet substituted */
  /* "resumable": true (the spider's, else the project's): its jobs may be
   * paused: they get SPIDERD_STATE_DIR, stop on SIGTERM keeping their
   * state there, and find it again when resumed. */
  int resumable;
} manifest_spider_t;

typedef struct manifest {
  manifest_spider_t *spiders; /* sorted by name */
  size_t n;
} manifest_t;

/* Parses and validates len bytes of spiderd.json into *m (zeroed first).
 * 0, or SPD_EBADEGG with the reason in err (prefixed "spiderd.json: "), or
 * -ENOMEM. */
int manifest_parse(const char *text, size_t len, manifest_t *m, char *err, size_t errlen);
void manifest_release(manifest_t *m);

/* The spider called name, or NULL. */
const manifest_spider_t *manifest_find(const manifest_t *m, const char *name);

/* s's command with every {spider} replaced by spider. NULL: no memory. */
char **manifest_argv(const manifest_spider_t *s, const char *spider);
void manifest_argv_free(char **argv);

/* May an archive member be called name? Refused: empty, an absolute path,
 * a '..' component, a backslash, a control character. A leading "./" and
 * trailing '/' are fine (tar writes them). 0 or SPD_EBADEGG with err. */
int manifest_member_check(const char *name, char *err, size_t errlen);

/* May a symlink member point at target? Only a relative path without any
 * '..' component: it then stays under the directory it is in, however
 * other links resolve. 0 or SPD_EBADEGG with err. */
int manifest_link_check(const char *member, const char *target, char *err, size_t errlen);

#endif
