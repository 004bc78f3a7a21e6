/* Path templates of the native API: "/jobs/{id}/log" matches "/jobs/12/log"
 * and captures id = "12". A {name} segment matches one non-empty path
 * segment; everything else matches itself. Pure functions.
 *
 * Ownership: captures point into the template and the path (borrowed).
 */
#ifndef SPIDERD_API_ROUTE_H
#define SPIDERD_API_ROUTE_H

#include <stddef.h>

typedef struct route_capture {
  const char *name; /* into the template, name_len bytes (no braces) */
  size_t name_len;
  const char *value; /* into the path, value_len bytes */
  size_t value_len;
} route_capture_t;

#define ROUTE_MAX_CAPTURES 8

/* 1 when path matches tmpl (captures filled, *ncaps set), else 0. */
int route_match(const char *tmpl, const char *path, route_capture_t caps[ROUTE_MAX_CAPTURES],
                size_t *ncaps);

#endif
