/* Exclusion calendars and the schedules' references (flow/calendars.h). */
#include "flow/calendars.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/names.h"
#include "error.h"

#define DOC_KEY "calendars"
#define CALENDARS_MAX 1000

int calendars_doc(store_t *s, json_t **out) {
  char *text = NULL;
  int rc = store_meta_get(s, DOC_KEY, &text);
  json_t *doc = NULL;
  if (rc == -ENOENT) rc = 0;
  if (!rc && text) doc = json_loads(text, 0, NULL);
  free(text);
  if (rc) return rc;
  if (!json_is_object(doc)) {
    json_decref(doc);
    doc = json_object();
  }
  if (!doc) return -ENOMEM;
  if (!json_is_object(json_object_get(doc, "calendars")))
    json_object_set_new(doc, "calendars", json_object());
  if (!json_is_object(json_object_get(doc, "schedules")))
    json_object_set_new(doc, "schedules", json_object());
  *out = doc;
  return 0;
}

static int doc_write(store_t *s, const json_t *doc) {
  char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
  int rc = text ? store_meta_set(s, DOC_KEY, text) : -ENOMEM;
  free(text);
  return rc;
}

/* The document, to change: under the claim lock on a shared store, so a
 * concurrent change waits for this one's commit and reads what it wrote. */
static int doc_for_write(store_t *s, json_t **out) {
  int rc = store_shared(s) ? store_claim_lock(s) : 0;
  return rc ? rc : calendars_doc(s, out);
}

static int event(store_t *s, const char *type, const char *name) {
  event_t e = {.type = (char *)type, .data = json_pack("{s:s}", "name", name)};
  int rc = e.data ? store_event_add(s, &e) : -ENOMEM;
  json_decref(e.data);
  return rc;
}

/* A calendar as listed: its definition and the schedules referring to it. */
static json_t *render(const json_t *doc, const char *name) {
  json_t *o = json_deep_copy(json_object_get(json_object_get(doc, "calendars"), name));
  json_t *ids = json_array();
  const char *key;
  json_t *names;
  json_object_foreach(json_object_get(doc, "schedules"), key, names) {
    size_t i;
    json_t *n;
    json_array_foreach(names, i, n) if (json_is_string(n) && !strcmp(json_string_value(n), name))
      json_array_append_new(ids, json_integer(strtoll(key, NULL, 10)));
  }
  if (!o || !ids) {
    json_decref(o);
    json_decref(ids);
    return NULL;
  }
  json_object_set_new(o, "schedules", ids);
  return o;
}

int calendars_list(store_t *s, json_t **out) {
  json_t *doc = NULL, *arr = json_array();
  int rc = arr ? calendars_doc(s, &doc) : -ENOMEM;
  const char *name;
  json_t *v;
  if (!rc) json_object_foreach(json_object_get(doc, "calendars"), name, v) {
      json_t *o = render(doc, name);
      if (!o || json_array_append_new(arr, o)) rc = -ENOMEM;
    }
  json_decref(doc);
  if (rc) json_decref(arr);
  else *out = arr;
  return rc;
}

static int not_found(const char *name, char *err, size_t len) {
  snprintf(err, len, "calendar '%s' not found", name);
  return SPD_ENOCALENDAR;
}

int calendars_get(store_t *s, const char *name, json_t **out, char *err, size_t len) {
  json_t *doc = NULL;
  int rc = calendars_doc(s, &doc);
  if (!rc && !json_object_get(json_object_get(doc, "calendars"), name))
    rc = not_found(name, err, len);
  if (!rc && !(*out = render(doc, name))) rc = -ENOMEM;
  json_decref(doc);
  return rc;
}

/* The stored form of def: only the fields a calendar has, checked. */
static int definition(const json_t *def, int64_t now_ms, const json_t *old, json_t **out,
                      char *err, size_t len) {
  calendar_t cal;
  const char *name = json_string_value(json_object_get(def, "name"));
  if (!name || !name_valid("calendar", name, err, len)) {
    if (!name) snprintf(err, len, "a calendar needs a 'name'");
    return SPD_EBADPARAM;
  }
  int rc = calendar_parse(def, &cal, err, len);
  if (rc) return rc;
  calendar_release(&cal);
  const json_t *note = json_object_get(def, "note");
  if (note && !json_is_null(note) && (!json_is_string(note) || json_string_length(note) > 1000)) {
    snprintf(err, len, "'note' must be a text of at most 1000 bytes");
    return SPD_EBADPARAM;
  }
  const json_t *created = old ? json_object_get(old, "created_ms") : NULL;
  json_t *o = json_pack("{s:s, s:s, s:O*, s:O*, s:O*, s:O*, s:I, s:I}", "name", name, "tz",
                        json_string_value(json_object_get(def, "tz")) ?: "UTC", "dates",
                        json_object_get(def, "dates"), "weekdays",
                        json_object_get(def, "weekdays"), "hours", json_object_get(def, "hours"),
                        "note", note && !json_is_null(note) ? note : NULL, "created_ms",
                        (json_int_t)(created ? json_integer_value(created) : now_ms),
                        "updated_ms", (json_int_t)now_ms);
  if (!o) return -ENOMEM;
  *out = o;
  return 0;
}

int calendars_put(store_t *s, const json_t *def, int create, int64_t now_ms, json_t **out,
                  char *err, size_t len) {
  json_t *doc = NULL, *o = NULL;
  const char *name = json_string_value(json_object_get(def, "name"));
  int rc = doc_for_write(s, &doc);
  json_t *cals = json_object_get(doc, "calendars");
  const json_t *old = rc || !name ? NULL : json_object_get(cals, name);
  if (!rc && create && old) {
    snprintf(err, len, "a calendar named '%s' exists already", name);
    rc = SPD_ECONFLICT;
  } else if (!rc && !create && !old) {
    rc = not_found(name ? name : "", err, len);
  } else if (!rc && create && json_object_size(cals) >= CALENDARS_MAX) {
    snprintf(err, len, "at most %d calendars", CALENDARS_MAX);
    rc = SPD_EBADPARAM;
  }
  if (!rc) rc = definition(def, now_ms, old, &o, err, len);
  if (!rc && json_object_set_new(cals, name, o)) rc = -ENOMEM;
  if (!rc) rc = doc_write(s, doc);
  if (!rc) rc = event(s, create ? "calendar.created" : "calendar.updated", name);
  if (!rc && !(*out = render(doc, name))) rc = -ENOMEM;
  json_decref(doc);
  return rc;
}

int calendars_delete(store_t *s, const char *name, char *err, size_t len) {
  json_t *doc = NULL, *users = NULL;
  int rc = doc_for_write(s, &doc);
  if (!rc && !json_object_get(json_object_get(doc, "calendars"), name))
    rc = not_found(name, err, len);
  if (!rc && !(users = render(doc, name))) rc = -ENOMEM;
  if (!rc && json_array_size(json_object_get(users, "schedules"))) {
    snprintf(err, len, "calendar '%s' is used by %zu schedule(s): take it out of them first",
             name, json_array_size(json_object_get(users, "schedules")));
    rc = SPD_ECONFLICT;
  }
  if (!rc) json_object_del(json_object_get(doc, "calendars"), name);
  if (!rc) rc = doc_write(s, doc);
  if (!rc) rc = event(s, "calendar.deleted", name);
  json_decref(users);
  json_decref(doc);
  return rc;
}

static int check_names(const json_t *doc, const json_t *names, char *err, size_t len) {
  size_t i;
  const json_t *n;
  if (names && !json_is_null(names) && !json_is_array(names)) {
    snprintf(err, len, "'calendars' must be an array of calendar names");
    return SPD_EBADPARAM;
  }
  json_array_foreach(names, i, n) {
    const char *name = json_string_value(n);
    if (!name || !json_object_get(json_object_get(doc, "calendars"), name)) {
      snprintf(err, len, "'calendars': calendar '%.100s' not found", name ? name : "");
      return SPD_EBADPARAM;
    }
  }
  return 0;
}

int calendars_link(store_t *s, int64_t schedule_id, const json_t *names, char *err, size_t len) {
  json_t *doc = NULL;
  char key[24];
  snprintf(key, sizeof(key), "%" PRId64, schedule_id);
  int rc = doc_for_write(s, &doc);
  if (!rc) rc = check_names(doc, names, err, len);
  json_t *links = json_object_get(doc, "schedules");
  int had = !rc && json_object_get(links, key);
  if (!rc && json_array_size(names)) rc = json_object_set(links, key, (json_t *)names) ? -ENOMEM : 0;
  else if (!rc) json_object_del(links, key);
  /* Nothing to write when a schedule with none keeps none. */
  if (!rc && (had || json_array_size(names))) rc = doc_write(s, doc);
  json_decref(doc);
  return rc;
}

json_t *calendars_names(const json_t *doc, int64_t schedule_id) {
  char key[24];
  snprintf(key, sizeof(key), "%" PRId64, schedule_id);
  const json_t *v = json_object_get(json_object_get(doc, "schedules"), key);
  return json_is_array(v) ? json_deep_copy(v) : json_array();
}

int calendars_set(const json_t *doc, int64_t schedule_id, calendar_set_t *out) {
  json_t *names = calendars_names(doc, schedule_id);
  size_t i;
  json_t *n;
  out->v = NULL;
  out->n = 0;
  if (!names) return -ENOMEM;
  if (json_array_size(names) && !(out->v = calloc(json_array_size(names), sizeof(*out->v)))) {
    json_decref(names);
    return -ENOMEM;
  }
  json_array_foreach(names, i, n) {
    const json_t *def = json_object_get(json_object_get(doc, "calendars"), json_string_value(n));
    char err[256];
    if (def && !calendar_parse(def, &out->v[out->n], err, sizeof(err))) out->n++;
  }
  json_decref(names);
  return 0;
}

int calendars_load(store_t *s, int64_t schedule_id, calendar_set_t *out) {
  json_t *doc = NULL;
  int rc = calendars_doc(s, &doc);
  if (!rc) rc = calendars_set(doc, schedule_id, out);
  json_decref(doc);
  return rc;
}
