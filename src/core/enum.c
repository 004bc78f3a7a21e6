#include "core/enum.h"

#include <errno.h>
#include <string.h>

const char *enum_name(const char *const *names, int n, int v) {
  return v >= 0 && v < n ? names[v] : "unknown";
}

int enum_parse(const char *const *names, int n, const char *s, int *out) {
  for (int i = 0; s && i < n; i++)
    if (strcmp(s, names[i]) == 0) {
      *out = i;
      return 0;
    }
  return -EINVAL;
}
