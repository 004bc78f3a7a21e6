/* A project's versions and their events (flow/projects.h). */
#include "flow/projects.h"

#include <errno.h>

#include "flow/eggsync.h"

static int project_event(store_t *s, const char *type, json_t *data /* taken */,
                         int64_t now_ms) {
  if (!data) return -ENOMEM;
  event_t e = {.type = (char *)type, .ts_ms = now_ms, .data = data};
  int rc = store_event_add(s, &e);
  json_decref(data);
  return rc;
}

int projects_egg_put(store_t *s, const char *project, const char *version, const char *path,
                     int64_t now_ms) {
  return eggsync_put_file(s, project, version, path, now_ms);
}

int projects_version_added(store_t *s, const char *project, const char *version, int nspiders,
                           int64_t now_ms) {
  return project_event(s, "version.added",
                       json_pack("{s:s, s:s, s:i}", "project", project, "version", version,
                                 "spiders", nspiders),
                       now_ms);
}

int projects_eggs_delete(store_t *s, const char *project, const char *stem, int *count) {
  int rc = store_egg_delete(s, project, stem, count);
  /* After the commit: a node copying meanwhile finds no row, or a missing
   * object it takes for a deletion. */
  if (!rc) eggsync_objstore_delete(project, stem);
  return rc;
}

int projects_deleted(store_t *s, const char *project, const char *version, int64_t now_ms) {
  return project_event(s, version ? "version.deleted" : "project.deleted",
                       version ? json_pack("{s:s, s:s}", "project", project, "version", version)
                               : json_pack("{s:s}", "project", project),
                       now_ms);
}
