/* Exclusion calendars: named sets of local dates, and of weekdays and hour
 * ranges, in one time zone (holidays, a site's maintenance window). A
 * schedule that refers to a calendar never fires a run whose due time falls
 * in it: the run is recorded as skipped with the calendar's name.
 *
 * A calendar as the API gives it (and the store keeps it, as JSON):
 *   {"name": "holidays", "tz": "Europe/Paris",
 *    "dates": ["2026-12-25", "2027-01-01"],
 *    "weekdays": ["sat", "sun"], "hours": ["22:00-06:00"], "note": "..."}
 * A time is in the calendar when its local date is one of `dates`, or when
 * it matches the weekly rule: its weekday is in `weekdays` (every day when
 * none is given) and its local time of day in one of `hours` (the whole
 * day when none is given). A rule needs weekdays or hours; a calendar needs
 * dates or a rule. A range "HH:MM-HH:MM" includes its start and excludes its
 * end; one whose end is before its start runs past midnight.
 *
 * Pure (no I/O). Ownership: a calendar_t owns its strings and arrays
 * (calendar_release); a calendar_set_t owns its calendars.
 */
#ifndef SPIDERD_CORE_CALENDAR_H
#define SPIDERD_CORE_CALENDAR_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define CALENDAR_DATES_MAX 4096
#define CALENDAR_HOURS_MAX 64

typedef struct calendar {
  char *name;
  char *tz;
  int32_t *dates;   /* local dates as days since 1970-01-01, sorted */
  size_t ndates;
  unsigned weekdays; /* bit d = weekday d (0 = Sunday); 0 = none given */
  int16_t (*hours)[2]; /* [from, to) minutes of the day */
  size_t nhours;
} calendar_t;

typedef struct calendar_set {
  calendar_t *v;
  size_t n;
} calendar_set_t;

void calendar_release(calendar_t *c);
void calendar_set_release(calendar_set_t *s);

/* Reads and checks the definition o (the shape above; name is checked by
 * the caller) into c. 0, SPD_EBADPARAM with the reason in err, -ENOMEM. */
int calendar_parse(const json_t *o, calendar_t *c, char *err, size_t len);

/* Is ms (UTC) in calendar c? 1 or 0 (0 as well when the zone cannot be
 * computed: a calendar never stops a run by error). */
int calendar_covers(const calendar_t *c, int64_t ms);

/* The first calendar of set that holds ms, NULL when none. */
const calendar_t *calendar_set_covers(const calendar_set_t *set, int64_t ms);

#endif
