#include "core/event.h"

#include <stdlib.h>
#include <string.h>

#include "core/array.h"

#define EVENT_DEFINE_(id, name, meaning) const char EV_##id[] = name;
EVENT_TYPES(EVENT_DEFINE_)
#undef EVENT_DEFINE_

#define EVENT_ROW_(id, name, meaning) {EV_##id, meaning},
static const event_type_t types[] = {EVENT_TYPES(EVENT_ROW_)};
#undef EVENT_ROW_

const event_type_t *event_types(size_t *n) {
  *n = sizeof(types) / sizeof(types[0]);
  return types;
}

/* A scan: 32 short strings, and no caller is on a hot path. */
int event_type_valid(const char *type) {
  if (!type) return 0;
  for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
    if (!strcmp(types[i].name, type)) return 1;
  return 0;
}

void event_release(event_t *e) {
  if (!e) return;
  free(e->type);
  json_decref(e->data);
  memset(e, 0, sizeof(*e));
}

ARRAY_LIST_RELEASE(event_list_release, event_list_t, event_release)
