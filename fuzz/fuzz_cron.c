/* Schedules as the API takes them (core/cron.c): the input's first line is
 * a cron expression (or a macro), the second an IANA zone, the third an ISO
 * 8601 time. The expression is compiled in that zone and evaluated around
 * the time; the zone and the time go through their own parsers too, and
 * every instant produced is formatted back. */
#include <stdlib.h>
#include <string.h>

#include "core/cron.h"
#include "fuzz.h"

static void lines(char *s, char **out, int n) {
  for (int i = 0; i < n; i++) {
    out[i] = s;
    char *nl = s ? strchr(s, '\n') : NULL;
    if (nl) *nl = '\0';
    s = nl ? nl + 1 : NULL;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0;
  char *buf = fuzz_strndup(data, size);
  char *f[3];
  lines(buf, f, 3);
  const char *expr = f[0], *zone = f[1] ? f[1] : "", *iso = f[2] ? f[2] : expr;
  char err[256], canon[CRON_ZONE_MAX], out[CRON_ISO_MAX];
  cron_zone_check(zone, canon, sizeof(canon), err, sizeof(err));

  int64_t t = 1767225600000LL; /* 2026-01-01T00:00:00Z */
  int64_t parsed;
  if (!cron_parse_iso(iso, zone, &parsed, err, sizeof(err))) {
    t = parsed;
    cron_format_iso(t, zone, out, sizeof(out));
  }

  cron_spec_t spec;
  cron_spec_init(&spec);
  if (!cron_spec_parse(&spec, expr, zone, err, sizeof(err))) {
    int64_t next = 0, prev = 0;
    if (!cron_next(&spec, t, &next)) {
      cron_format_iso(next, zone, out, sizeof(out));
      cron_jitter(60000, expr, next);
    }
    /* cron_prev costs ~45 searches: only for short inputs, to stay fast */
    if (size < 64) cron_prev(&spec, t, &prev);
    int64_t fires[8];
    size_t n = 0;
    int more = 0;
    cron_between(&spec, t, t + 7LL * 86400000, fires, 8, &n, &more);
    for (size_t i = 0; i < n; i++) cron_format_iso(fires[i], zone, out, sizeof(out));
    /* bounds from the time: a start after the time, an end a day later */
    if (!cron_spec_bounds(&spec, t + 1000, t + 86400000, err, sizeof(err)))
      cron_next(&spec, t, &next);
  }
  /* the other kinds, with numbers taken from the input */
  int64_t iv = 0;
  for (size_t i = 0; i < size && i < 8; i++) iv = iv * 31 + data[i];
  if (!cron_spec_interval(&spec, iv, t, zone, err, sizeof(err))) {
    int64_t next;
    cron_next(&spec, t, &next);
  }
  if (!cron_spec_once(&spec, t + iv, zone, err, sizeof(err))) {
    int64_t next;
    cron_next(&spec, t - 1, &next);
  }
  cron_spec_release(&spec);
  free(buf);
  return 0;
}
