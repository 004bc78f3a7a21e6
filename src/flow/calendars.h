/* Exclusion calendars' changes in one place (core/calendar.h says what one
 * is): created, replaced, deleted, each with its event (calendar.created,
 * calendar.updated, calendar.deleted), and which schedules refer to which
 * calendars.
 *
 * The calendars and the schedules' references live in one document of the
 * store's key/value table (meta "calendars"): a handful of small
 * definitions read whole by the scheduler's tick, the same on every
 * backend. Each change reads, checks and writes it inside the caller's
 * store op; on PostgreSQL under the store's claim lock, so two nodes'
 * changes never lose each other's.
 *
 * Store thread only. Errors as store.h's, and SPD_EBADPARAM (a definition:
 * the reason in err), SPD_ECONFLICT (the name is taken; a calendar still
 * referred to), -ENOENT (no such calendar). Ownership: inputs are
 * borrowed; json_t results are new references (the caller's decref), sets
 * the caller's (calendar_set_release).
 */
#ifndef SPIDERD_FLOW_CALENDARS_H
#define SPIDERD_FLOW_CALENDARS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/calendar.h"
#include "store/store.h"

/* The document: {"calendars": {name: definition}, "schedules": {"<id>":
 * [name, ...]}} ({} parts when nothing was ever written). A read. */
int calendars_doc(store_t *s, json_t **out);

/* Every calendar, by name, each with "schedules": the ids referring to it. */
int calendars_list(store_t *s, json_t **out);
/* One calendar (as listed), -ENOENT. */
int calendars_get(store_t *s, const char *name, json_t **out, char *err, size_t len);
/* Creates (create = 1: SPD_ECONFLICT when the name is taken) or replaces
 * (create = 0: -ENOENT when there is none) the calendar def describes
 * (name, tz, dates, weekdays, hours, note); *out as calendars_get. */
int calendars_put(store_t *s, const json_t *def, int create, int64_t now_ms, json_t **out,
                  char *err, size_t len);
/* Deletes calendar name; SPD_ECONFLICT while a schedule refers to it. */
int calendars_delete(store_t *s, const char *name, char *err, size_t len);

/* Sets the calendars schedule_id refers to (names: an array of names, each
 * an existing calendar; empty or NULL = none). */
int calendars_link(store_t *s, int64_t schedule_id, const json_t *names, char *err, size_t len);
/* The names schedule_id refers to, from doc (a new array, maybe empty). */
json_t *calendars_names(const json_t *doc, int64_t schedule_id);
/* The compiled calendars schedule_id refers to, from doc (one that no
 * longer compiles is left out). 0 or -ENOMEM. */
int calendars_set(const json_t *doc, int64_t schedule_id, calendar_set_t *out);
/* The same, reading the document. */
int calendars_load(store_t *s, int64_t schedule_id, calendar_set_t *out);

#endif
