/* Grepsr's scheduler calls (api/grepsr.h): a table of Grepsr's names, each
 * with the native op it is, the parameters it sets itself and the one it
 * renames. No call does anything of its own: the native op runs with the
 * caller's credentials, so it checks, refuses and answers as it does on
 * its own name. */
#include "api/grepsr.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

typedef struct grepsr_call {
  const char *name;
  const char *op;      /* the native op, by name */
  const char *fixed;   /* JSON object of parameters the call sets, or NULL */
  const char *rename;  /* "from=to": a parameter under its native name */
  const char *need;    /* a parameter the call requires (the op may not) */
} grepsr_call_t;

#define ENDED "[\"finished\",\"failed\",\"cancelled\",\"lost\"]"

static const grepsr_call_t calls[] = {
    /* runs */
    {"OneTimeRun", "jobs.create", NULL, NULL, NULL},
    {"OneTimeTestRun", "jobs.test_run", NULL, NULL, NULL},
    {"MultiProcessRun", "jobs.multiprocess", NULL, NULL, NULL},
    {"AddToTaskQueue", "jobs.add_urls", NULL, NULL, NULL},
    {"StopRun", "jobs.cancel", NULL, NULL, NULL},
    {"StopTask", "jobs.cancel", NULL, NULL, NULL},
    {"StopChildTasks", "jobs.cancel_children", NULL, NULL, NULL},
    /* schedules */
    {"Schedule", "schedules.create", NULL, NULL, NULL},
    {"StopSchedule", "schedules.pause", NULL, NULL, NULL},
    {"UnpauseSchedule", "schedules.resume", NULL, NULL, NULL},
    {"UpdateSchedule", "schedules.update", NULL, NULL, NULL},
    {"GetSchedules", "schedules.list", NULL, NULL, NULL},
    {"GetAllSchedules", "schedules.list", "{\"limit\":1000}", NULL, NULL},
    {"GetNextSchedules", "schedules.next_all", NULL, NULL, NULL},
    {"GetUpcomingAccountSchedules", "accounts.upcoming", NULL, NULL, "account"},
    {"GetMissedScheduleRuns", "runs.missed", NULL, NULL, "schedule"},
    {"GetAllMissedRuns", "runs.missed", NULL, NULL, NULL},
    /* tasks (jobs) */
    {"GetTaskStatus", "jobs.get", NULL, NULL, NULL},
    {"GetTaskInfo", "jobs.get", NULL, NULL, NULL},
    {"GetTasksStatus", "jobs.states", NULL, NULL, NULL},
    {"GetActiveTasksV2", "jobs.list", "{\"state\":[\"pending\",\"running\"]}", NULL, NULL},
    {"GetScheduledTasks", "jobs.list", "{\"state\":[\"pending\"]}", NULL, NULL},
    {"GetCompletedTasks", "jobs.list", "{\"state\":" ENDED "}", NULL, NULL},
    {"GetChildTasks", "jobs.list", NULL, "id=parent", "id"},
    {"GetTaskHistoryInfo", "jobs.list", NULL, NULL, NULL},
    {"GetTaskHistoryBySchedulerId", "schedules.runs", NULL, NULL, NULL},
    {"GetStats", "jobs.stats", NULL, NULL, NULL},
    /* a task's history and meta */
    {"UpdateTaskHistory", "jobs.history", NULL, NULL, NULL},
    {"UpdateTaskHistoryByBatch", "jobs.history_batch", NULL, NULL, NULL},
    {"UpdateAllTaskHistoryByStatus", "jobs.history_by_status", NULL, NULL, NULL},
    {"UpdateMetaByJob", "jobs.meta", NULL, NULL, NULL},
};
#define NCALLS (sizeof(calls) / sizeof(calls[0]))

static const grepsr_call_t *find(const char *method) {
  for (size_t i = 0; i < NCALLS; i++)
    if (!strcmp(calls[i].name, method)) return &calls[i];
  return NULL;
}

int grepsr_is(const char *method) { return find(method) != NULL; }

static int bad(const char *field, json_t **details) {
  *details = json_pack("{s:s}", "field", field);
  return SPD_EBADPARAM;
}

/* Renames g's parameter "from=to" in params; 0, or SPD_EBADPARAM when
 * both names came (one of them would be lost). */
static int rename_param(const grepsr_call_t *g, json_t *params, char *err, size_t errlen,
                        json_t **details) {
  char from[32];
  const char *eq = strchr(g->rename, '=');
  snprintf(from, sizeof(from), "%.*s", (int)(eq - g->rename), g->rename);
  json_t *v = json_object_get(params, from);
  if (!v) return 0;
  if (json_object_get(params, eq + 1)) {
    snprintf(err, errlen, "%s takes '%s', not '%s'", g->name, from, eq + 1);
    return bad(eq + 1, details);
  }
  json_object_set(params, eq + 1, v);
  json_object_del(params, from);
  return 0;
}

/* Adds g's fixed parameters; one the caller sent too is refused, not
 * silently replaced. */
static int add_fixed(const grepsr_call_t *g, json_t *params, char *err, size_t errlen,
                     json_t **details) {
  json_t *fixed = json_loads(g->fixed, 0, NULL);
  if (!fixed) {
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  const char *k;
  json_t *v;
  int rc = 0;
  json_object_foreach(fixed, k, v) {
    if (json_object_get(params, k)) {
      snprintf(err, errlen, "%s sets '%s' itself (use jobs.list to choose it)", g->name, k);
      rc = bad(k, details);
      break;
    }
    json_object_set(params, k, v);
  }
  json_decref(fixed);
  return rc;
}

int grepsr_map(const char *method, json_t *params, const op_def_t **def, char *err,
               size_t errlen, json_t **details) {
  const grepsr_call_t *g = find(method);
  *def = NULL;
  *details = NULL;
  if (g) *def = op_find(g->op);
  if (!*def) {
    snprintf(err, errlen, "%s is not available on this node yet: needs op %s", method,
             g ? g->op : "?");
    *details = json_pack("{s:s, s:s}", "method", method, "op", g ? g->op : "?");
    return SPD_ENOROUTE;
  }
  if (g->need && !json_object_get(params, g->need)) {
    snprintf(err, errlen, "%s needs '%s'", g->name, g->need);
    *details = json_pack("{s:s}", "field", g->need);
    return SPD_EMISSING;
  }
  int rc = g->rename ? rename_param(g, params, err, errlen, details) : 0;
  if (!rc && g->fixed) rc = add_fixed(g, params, err, errlen, details);
  return rc;
}
