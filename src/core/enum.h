/* Enum <-> name tables: the lookup every domain enum (job states, schedule
 * kinds and policies, queue states and policies) does, written once.
 *
 * Ownership: the names are the caller's static strings; nothing is allocated.
 */
#ifndef SPIDERD_CORE_ENUM_H
#define SPIDERD_CORE_ENUM_H

/* names[v] when 0 <= v < n, else "unknown". */
const char *enum_name(const char *const *names, int n, int v);

/* The index of s among the n names in *out: 0, or -EINVAL when s is NULL
 * or no name (compared exactly). */
int enum_parse(const char *const *names, int n, const char *s, int *out);

/* Defines `const char *fn_name(type)` and `int fn_parse(const char *, type *)`
 * over the `count` names of `names` (as enum_name and enum_parse). */
#define ENUM_NAMES(fn, type, names, count)                                \
  const char *fn##_name(type v) { return enum_name(names, count, (int)v); } \
  int fn##_parse(const char *s, type *out) {                              \
    int v = 0, rc = enum_parse(names, count, s, &v);                      \
    if (!rc) *out = (type)v;                                              \
    return rc;                                                            \
  }

#endif
