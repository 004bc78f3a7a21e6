/* Exclusion calendars (core/calendar.h). */
#include "core/calendar.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/cron.h"
#include "error.h"

void calendar_release(calendar_t *c) {
  if (!c) return;
  free(c->name);
  free(c->tz);
  free(c->dates);
  free(c->hours);
  memset(c, 0, sizeof(*c));
}

void calendar_set_release(calendar_set_t *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n; i++) calendar_release(&s->v[i]);
  free(s->v);
  s->v = NULL;
  s->n = 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's
 * days_from_civil). */
static int32_t civil_days(int y, int m, int d) {
  y -= m <= 2;
  int era = (y >= 0 ? y : y - 399) / 400;
  int yoe = y - era * 400;
  int doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

static int bad(char *err, size_t len, const char *fmt, const char *what) {
  snprintf(err, len, fmt, what);
  return SPD_EBADPARAM;
}

/* "YYYY-MM-DD", a real date (checked by cron_parse_iso). */
static int parse_date(const char *s, int32_t *out, char *err, size_t len) {
  int y, m, d;
  int64_t ms;
  char why[200] = "", tail;
  if (!s || strlen(s) != 10 || sscanf(s, "%4d-%2d-%2d%c", &y, &m, &d, &tail) != 3)
    return bad(err, len, "'dates': '%.40s' is not a date YYYY-MM-DD", s ? s : "");
  if (cron_parse_iso(s, "UTC", &ms, why, sizeof(why)))
    return bad(err, len, "'dates': %s", why);
  *out = civil_days(y, m, d);
  return 0;
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return x < y ? -1 : x > y;
}

static int parse_dates(const json_t *v, calendar_t *c, char *err, size_t len) {
  size_t i;
  const json_t *d;
  if (!v || json_is_null(v)) return 0;
  if (!json_is_array(v) || json_array_size(v) > CALENDAR_DATES_MAX) {
    snprintf(err, len, "'dates' must be an array of at most %d dates YYYY-MM-DD",
             CALENDAR_DATES_MAX);
    return SPD_EBADPARAM;
  }
  if (json_array_size(v) && !(c->dates = calloc(json_array_size(v), sizeof(*c->dates))))
    return -ENOMEM;
  json_array_foreach(v, i, d) {
    int rc = parse_date(json_string_value(d), &c->dates[c->ndates], err, len);
    if (rc) return rc;
    c->ndates++;
  }
  qsort(c->dates, c->ndates, sizeof(*c->dates), cmp_i32);
  return 0;
}

static const char *const day_names[7] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

static int parse_weekdays(const json_t *v, calendar_t *c, char *err, size_t len) {
  size_t i;
  const json_t *d;
  if (!v || json_is_null(v)) return 0;
  if (!json_is_array(v)) return bad(err, len, "%s", "'weekdays' must be an array of day names");
  json_array_foreach(v, i, d) {
    const char *s = json_string_value(d);
    int k = 0;
    while (k < 7 && (!s || strncasecmp(s, day_names[k], 3) || (strlen(s) != 3 && strlen(s) < 6)))
      k++;
    if (k == 7)
      return bad(err, len, "'weekdays': '%.40s' is not a day (sun, mon, ... sat)", s ? s : "");
    c->weekdays |= 1u << k;
  }
  return 0;
}

/* "HH:MM" into minutes of the day; 24:00 is the end of the day. */
static int parse_hm(const char *s, int *out) {
  int h, m;
  if (strlen(s) != 5 || s[2] != ':' || sscanf(s, "%2d:%2d", &h, &m) != 2) return -1;
  if (h < 0 || m < 0 || m > 59 || h > 24 || (h == 24 && m)) return -1;
  *out = h * 60 + m;
  return 0;
}

static int parse_hours(const json_t *v, calendar_t *c, char *err, size_t len) {
  size_t i;
  const json_t *d;
  if (!v || json_is_null(v)) return 0;
  if (!json_is_array(v) || json_array_size(v) > CALENDAR_HOURS_MAX)
    return bad(err, len, "%s", "'hours' must be an array of ranges \"HH:MM-HH:MM\"");
  if (json_array_size(v) && !(c->hours = calloc(json_array_size(v), sizeof(*c->hours))))
    return -ENOMEM;
  json_array_foreach(v, i, d) {
    const char *s = json_string_value(d);
    char a[6], b[6];
    int from, to;
    if (!s || strlen(s) != 11 || s[5] != '-')
      return bad(err, len, "'hours': '%.40s' is not a range HH:MM-HH:MM", s ? s : "");
    memcpy(a, s, 5);
    a[5] = 0;
    memcpy(b, s + 6, 5);
    b[5] = 0;
    if (parse_hm(a, &from) || parse_hm(b, &to) || from == to || from == 1440)
      return bad(err, len, "'hours': '%.40s' is not a range HH:MM-HH:MM", s);
    c->hours[c->nhours][0] = (int16_t)from;
    c->hours[c->nhours][1] = (int16_t)to;
    c->nhours++;
  }
  return 0;
}

int calendar_parse(const json_t *o, calendar_t *c, char *err, size_t len) {
  memset(c, 0, sizeof(*c));
  const char *name = json_string_value(json_object_get(o, "name"));
  const char *tz = json_string_value(json_object_get(o, "tz"));
  char canon[CRON_ZONE_MAX];
  int rc = 0;
  if (!tz) tz = "UTC";
  if (cron_zone_check(tz, canon, sizeof(canon), err, len)) rc = SPD_EBADPARAM;
  if (!rc && (!(c->name = strdup(name ? name : "")) || !(c->tz = strdup(tz)))) rc = -ENOMEM;
  if (!rc) rc = parse_dates(json_object_get(o, "dates"), c, err, len);
  if (!rc) rc = parse_weekdays(json_object_get(o, "weekdays"), c, err, len);
  if (!rc) rc = parse_hours(json_object_get(o, "hours"), c, err, len);
  if (!rc && !c->ndates && !c->weekdays && !c->nhours)
    rc = bad(err, len, "%s", "a calendar needs 'dates', 'weekdays' or 'hours'");
  if (rc) calendar_release(c);
  return rc;
}

static int in_hours(const calendar_t *c, int minute) {
  if (!c->nhours) return 1;
  for (size_t i = 0; i < c->nhours; i++) {
    int from = c->hours[i][0], to = c->hours[i][1];
    if (from < to ? minute >= from && minute < to : minute >= from || minute < to) return 1;
  }
  return 0;
}

int calendar_covers(const calendar_t *c, int64_t ms) {
  char iso[CRON_ISO_MAX];
  int y, mo, d, h, mi;
  if (cron_format_iso(ms, c->tz, iso, sizeof(iso)) ||
      sscanf(iso, "%4d-%2d-%2dT%2d:%2d", &y, &mo, &d, &h, &mi) != 5)
    return 0;
  int32_t day = civil_days(y, mo, d);
  if (c->ndates && bsearch(&day, c->dates, c->ndates, sizeof(*c->dates), cmp_i32)) return 1;
  if (!c->weekdays && !c->nhours) return 0;
  int wd = (int)(((int64_t)day % 7 + 7 + 4) % 7); /* 1970-01-01 was a Thursday */
  if (c->weekdays && !(c->weekdays & 1u << wd)) return 0;
  return in_hours(c, h * 60 + mi);
}

const calendar_t *calendar_set_covers(const calendar_set_t *set, int64_t ms) {
  for (size_t i = 0; set && i < set->n; i++)
    if (calendar_covers(&set->v[i], ms)) return &set->v[i];
  return NULL;
}
