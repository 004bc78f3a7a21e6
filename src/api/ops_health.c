/* The health rules of a schedule or a project (flow/health.h): their own
 * overrides, and the rules that apply with the defaults under them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/ops_impl.h"
#include "core/principal.h"
#include "error.h"
#include "flow/health.h"
#include "flow/schedules.h"

/* The schedule named by the call's "schedule" (num[0] its id, job.project
 * its project), or the call's project; -ENOENT-like codes with c->err. */
static int health_target(store_t *s, op_call_t *c) {
  const char *key = op_str(c, "schedule");
  if (!key) {
    const char *p = op_str(c, "project");
    if (!principal_project_ok(c->who->projects, p)) {
      snprintf(c->err, sizeof(c->err), "project '%s' not found", p);
      return SPD_ENOPROJECT;
    }
    c->num[0] = 0;
    return 0;
  }
  schedule_t sc;
  int rc = schedules_find(s, key, c->who->projects, &sc, c->err, sizeof(c->err));
  if (rc) return rc;
  c->num[0] = sc.id;
  c->job.project = sc.project;
  sc.project = NULL;
  schedule_release(&sc);
  return 0;
}

static const char *target_project(op_call_t *c) {
  return c->num[0] ? c->job.project : op_str(c, "project");
}

static int render_rules(store_t *s, op_call_t *c) {
  json_t *own = NULL;
  health_rules_t r;
  int rc = health_rules_own(s, c->num[0] ? NULL : op_str(c, "project"), c->num[0], &own);
  if (!rc) rc = health_rules_for(s, target_project(c), c->num[0], &r);
  if (!rc) c->result = json_pack("{s:o, s:o}", "rules", own, "effective", health_rules_json(&r));
  else json_decref(own);
  return rc ? rc : c->result ? 0 : -ENOMEM;
}

static int get_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  int rc = health_target(s, c);
  return rc ? rc : render_rules(s, c);
}

static int set_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  int rc = health_target(s, c);
  if (!rc)
    rc = health_rules_set(s, c->num[0] ? NULL : op_str(c, "project"), c->num[0],
                          op_json(c, "rules"), c->err, sizeof(c->err));
  if (rc == -EINVAL) rc = SPD_EBADPARAM;
  return rc ? rc : render_rules(s, c);
}

static void health_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc) {
    op_fail(c, rc, rc == SPD_EBADPARAM ? json_pack("{s:s}", "field", "rules") : NULL, "%s",
            c->err[0] ? c->err : spd_strerror(rc));
    return;
  }
  op_ok_result(c);
}

void op_health_get(op_call_t *c) { op_store(c, STORE_READ, get_fn, health_done); }

void op_health_set(op_call_t *c) {
  char why[256];
  health_rules_t r;
  health_rules_default(&r);
  if (health_rules_apply(&r, op_json(c, "rules"), why, sizeof(why))) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "rules"), "%s", why);
    return;
  }
  op_store(c, STORE_WRITE, set_fn, health_done);
}
