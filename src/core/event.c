#include "core/event.h"

#include <stdlib.h>
#include <string.h>

void event_release(event_t *e) {
  if (!e) return;
  free(e->type);
  json_decref(e->data);
  memset(e, 0, sizeof(*e));
}

void event_list_release(event_list_t *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n; i++) event_release(&l->v[i]);
  free(l->v);
  l->v = NULL;
  l->n = 0;
}
