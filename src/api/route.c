#include "api/route.h"

#include <string.h>

int route_match(const char *tmpl, const char *path, route_capture_t caps[ROUTE_MAX_CAPTURES],
                size_t *ncaps) {
  const char *t = tmpl, *p = path;
  *ncaps = 0;
  while (*t && *p) {
    if (*t == '{') {
      const char *close = strchr(t, '}');
      if (!close || *ncaps == ROUTE_MAX_CAPTURES) return 0;
      size_t n = strcspn(p, "/");
      if (n == 0) return 0;
      caps[*ncaps] = (route_capture_t){t + 1, (size_t)(close - t - 1), p, n};
      (*ncaps)++;
      t = close + 1;
      p += n;
      continue;
    }
    if (*t != *p) return 0;
    t++;
    p++;
  }
  return *t == '\0' && *p == '\0';
}
