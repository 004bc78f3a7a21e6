/* The Redis backend's schedules, runs, events and leases (store.h), each op
 * one Lua script (store/redis/internal.h).
 *
 * Keys under the prefix P:
 *   sched:ID, sched:seq     a hash per schedule (fields as in schedule_t); ids
 *   scheds                  zset id -> id
 *   sched:names             hash name -> id (names are unique)
 *   sched:refill            zset refill_ms -> id of schedules not paused
 *   run:ID, runs:seq        a hash per run (fields as in sched_run_t); ids
 *   runs:all                zset due_ms -> PAD(id): due order, then id
 *   runs:sched:SID          the same for one schedule
 *   runs:dues:SID           hash due_ms -> run id (a due time is one run)
 *   runs:upcoming           zset fire_ms -> PAD(id) of upcoming runs
 *   runs:ended              zset done_ms -> PAD(id) of ended runs (pruning)
 *   event:ID, events:seq    a hash per event; ids (never reused)
 *   events                  zset id -> id
 *   lease:NAME              hash holder, token, expires_ms
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "store/redis/internal.h"

static const char sched_helpers[] =
    "local function PAD(id) return string.format('%015.0f', id) end\n"
    "local function SK(id) return P .. 'sched:' .. I(id) end\n"
    "local function RK(id) return P .. 'run:' .. I(id) end\n"
    "local function REFILL(id, sc)\n"
    "  if N(sc.paused) == 0 then\n"
    "    redis.call('ZADD', P .. 'sched:refill', sc.refill_ms or '0', I(id))\n"
    "  else\n"
    "    redis.call('ZREM', P .. 'sched:refill', I(id))\n"
    "  end\n"
    "end\n"
    "local function RDEL(id, r)\n"
    "  local sid = PAD(id)\n"
    "  redis.call('ZREM', P .. 'runs:all', sid)\n"
    "  redis.call('ZREM', P .. 'runs:sched:' .. r.schedule_id, sid)\n"
    "  redis.call('ZREM', P .. 'runs:upcoming', sid)\n"
    "  redis.call('ZREM', P .. 'runs:ended', sid)\n"
    "  if redis.call('HGET', P .. 'runs:dues:' .. r.schedule_id, r.due_ms) == I(id) then\n"
    "    redis.call('HDEL', P .. 'runs:dues:' .. r.schedule_id, r.due_ms)\n"
    "  end\n"
    "  redis.call('DEL', RK(id))\n"
    "end\n"
    /* A new run; 0 when the due time has one already. */
    "local function RADD(sid, due, fire, st, job, done, reason)\n"
    "  local dk = P .. 'runs:dues:' .. sid\n"
    "  if redis.call('HEXISTS', dk, due) == 1 then return 0 end\n"
    "  local id = redis.call('INCR', P .. 'runs:seq')\n"
    "  local f = {'id', I(id), 'schedule_id', sid, 'due_ms', due, 'fire_ms', fire,\n"
    "             'state', st, 'job_id', job, 'done_ms', done}\n"
    "  if reason and reason ~= '' then f[#f + 1] = 'reason'; f[#f + 1] = reason end\n"
    "  redis.call('HSET', RK(id), unpack(f))\n"
    "  redis.call('HSET', dk, due, I(id))\n"
    "  redis.call('ZADD', P .. 'runs:all', due, PAD(id))\n"
    "  redis.call('ZADD', P .. 'runs:sched:' .. sid, due, PAD(id))\n"
    "  if N(st) == 0 then redis.call('ZADD', P .. 'runs:upcoming', fire, PAD(id))\n"
    "  else redis.call('ZADD', P .. 'runs:ended', done, PAD(id)) end\n"
    "  return id\n"
    "end\n"
    "local function LASTDUE(sid, due)\n"
    "  local k = SK(sid)\n"
    "  if redis.call('EXISTS', k) == 1 and\n"
    "     N(redis.call('HGET', k, 'last_due_ms')) < N(due) then\n"
    "    redis.call('HSET', k, 'last_due_ms', due)\n"
    "  end\n"
    "end\n";

static const char *const sched_src[RS_QUEUE_PUT] = {
    /* ARGV: P, mode (insert/update), id, field, value, ... */
    [RS_SCHEDULE_PUT] =
        "local sc = {}\n"
        "for i = 4, #ARGV, 2 do sc[ARGV[i]] = ARGV[i + 1] end\n"
        "local names = P .. 'sched:names'\n"
        "local holder = redis.call('HGET', names, sc.name)\n"
        "local id\n"
        "if ARGV[2] == 'insert' then\n"
        "  if holder then return E('ECONFLICT') end\n"
        "  id = redis.call('INCR', P .. 'sched:seq')\n"
        "else\n"
        "  id = N(ARGV[3])\n"
        "  local old = redis.call('HGET', SK(id), 'name')\n"
        "  if not old then return E('ENOENT') end\n"
        "  if holder and N(holder) ~= id then return E('ECONFLICT') end\n"
        "  redis.call('HDEL', names, old)\n"
        "  redis.call('DEL', SK(id))\n"
        "end\n"
        "sc.id = I(id)\n"
        "redis.call('HSET', SK(id), unpack(FLAT(sc)))\n"
        "redis.call('HSET', names, sc.name, I(id))\n"
        "redis.call('ZADD', P .. 'scheds', id, I(id))\n"
        "REFILL(id, sc)\n"
        "return id\n",
    /* ARGV: P, id */
    [RS_SCHEDULE_DELETE] =
        "local id = N(ARGV[2])\n"
        "local name = redis.call('HGET', SK(id), 'name')\n"
        "if not name then return E('ENOENT') end\n"
        "for _, m in ipairs(redis.call('ZRANGE', P .. 'runs:sched:' .. I(id), 0, -1)) do\n"
        "  local r = H(RK(N(m)))\n"
        "  if r then RDEL(N(m), r) end\n"
        "end\n"
        "redis.call('DEL', P .. 'runs:sched:' .. I(id), P .. 'runs:dues:' .. I(id), SK(id))\n"
        "redis.call('HDEL', P .. 'sched:names', name)\n"
        "redis.call('ZREM', P .. 'scheds', I(id))\n"
        "redis.call('ZREM', P .. 'sched:refill', I(id))\n"
        "return 0\n",
    /* ARGV: P, id, name ('' = by id) */
    [RS_SCHEDULE_GET] = "local id = ARGV[2]\n"
                        "if ARGV[3] ~= '' then\n"
                        "  id = redis.call('HGET', P .. 'sched:names', ARGV[3])\n"
                        "  if not id then return E('ENOENT') end\n"
                        "end\n"
                        "local r = redis.call('HGETALL', SK(id))\n"
                        "if #r == 0 then return E('ENOENT') end\n"
                        "return r\n",
    /* ARGV: P, after_id, limit (0 = all) */
    [RS_SCHEDULES_LIST] =
        "local ids\n"
        "if N(ARGV[3]) > 0 then\n"
        "  ids = redis.call('ZRANGEBYSCORE', P .. 'scheds', '(' .. ARGV[2], '+inf', 'LIMIT', 0,\n"
        "                   ARGV[3])\n"
        "else\n"
        "  ids = redis.call('ZRANGEBYSCORE', P .. 'scheds', '(' .. ARGV[2], '+inf')\n"
        "end\n"
        "local out = {}\n"
        "for _, s in ipairs(ids) do out[#out + 1] = redis.call('HGETALL', SK(s)) end\n"
        "return out\n",
    /* ARGV: P, now, limit (0 = all) */
    [RS_SCHEDULES_REFILL] =
        "local ids\n"
        "if N(ARGV[3]) > 0 then\n"
        "  ids = redis.call('ZRANGEBYSCORE', P .. 'sched:refill', '-inf', ARGV[2], 'LIMIT', 0,\n"
        "                   ARGV[3])\n"
        "else\n"
        "  ids = redis.call('ZRANGEBYSCORE', P .. 'sched:refill', '-inf', ARGV[2])\n"
        "end\n"
        "local out = {}\n"
        "for _, s in ipairs(ids) do out[#out + 1] = redis.call('HGETALL', SK(s)) end\n"
        "return out\n",
    /* ARGV: P, schedule id, horizon, refill, due, fire, due, fire, ... */
    [RS_RUNS_ADD] = "local sid = N(ARGV[2])\n"
                    "local sc = H(SK(sid))\n"
                    "if not sc then return E('ENOENT') end\n"
                    "redis.call('HSET', SK(sid), 'horizon_ms', ARGV[3], 'refill_ms', ARGV[4])\n"
                    "sc.refill_ms = ARGV[4]\n"
                    "REFILL(sid, sc)\n"
                    "for i = 5, #ARGV, 2 do RADD(I(sid), ARGV[i], ARGV[i + 1], '0', '0', '0') end\n"
                    "return 0\n",
    /* ARGV: P, schedule id, from */
    [RS_RUNS_CLEAR] =
        "local sid = N(ARGV[2])\n"
        "local sc = H(SK(sid))\n"
        "if not sc then return E('ENOENT') end\n"
        "redis.call('HSET', SK(sid), 'horizon_ms', ARGV[3], 'refill_ms', '0')\n"
        "sc.refill_ms = '0'\n"
        "REFILL(sid, sc)\n"
        "for _, m in ipairs(redis.call('ZRANGE', P .. 'runs:sched:' .. I(sid), 0, -1)) do\n"
        "  local r = H(RK(N(m)))\n"
        "  if r and N(r.state) == 0 then RDEL(N(m), r) end\n"
        "end\n"
        "return 0\n",
    /* ARGV: P, run id, reason */
    [RS_RUN_DEFER] = "local k = RK(N(ARGV[2]))\n"
                     "local st = redis.call('HGET', k, 'state')\n"
                     "if not st or N(st) ~= 0 then return E('ENOENT') end\n"
                     "if ARGV[3] == '' then redis.call('HDEL', k, 'reason')\n"
                     "else redis.call('HSET', k, 'reason', ARGV[3]) end\n"
                     "return 0\n",
    /* ARGV: P, until, max */
    [RS_RUNS_DUE] = "local out = {}\n"
                    "for _, m in ipairs(redis.call('ZRANGEBYSCORE', P .. 'runs:upcoming', '-inf',\n"
                    "                              ARGV[2], 'LIMIT', 0, ARGV[3])) do\n"
                    "  out[#out + 1] = redis.call('HGETALL', RK(N(m)))\n"
                    "end\n"
                    "return out\n",
    /* ARGV: P, schedule id, states, from, to, after_id, limit */
    [RS_RUNS_LIST] =
        "local sid, states = N(ARGV[2]), N(ARGV[3])\n"
        "local from, to, after, limit = N(ARGV[4]), N(ARGV[5]), N(ARGV[6]), N(ARGV[7])\n"
        "local z = sid ~= 0 and P .. 'runs:sched:' .. I(sid) or P .. 'runs:all'\n"
        "local lo = from ~= 0 and I(from) or '-inf'\n"
        "local hi = to ~= 0 and '(' .. I(to) or '+inf'\n"
        "local out = {}\n"
        "for _, m in ipairs(redis.call('ZRANGEBYSCORE', z, lo, hi)) do\n"
        "  local id = N(m)\n"
        "  if id > after then\n"
        "    local r = H(RK(id))\n"
        "    if r and (states == 0 or math.floor(states / 2 ^ N(r.state)) % 2 == 1) then\n"
        "      out[#out + 1] = FLAT(r)\n"
        "      if limit > 0 and #out >= limit then break end\n"
        "    end\n"
        "  end\n"
        "end\n"
        "return out\n",
    /* ARGV: P, run id, state, job id, reason, now */
    [RS_RUN_END] =
        "local id = N(ARGV[2])\n"
        "local r = H(RK(id))\n"
        "if not r or N(r.state) ~= 0 then return E('ENOENT') end\n"
        "redis.call('HSET', RK(id), 'state', ARGV[3], 'job_id', ARGV[4], 'done_ms', ARGV[6])\n"
        "if ARGV[5] == '' then redis.call('HDEL', RK(id), 'reason')\n"
        "else redis.call('HSET', RK(id), 'reason', ARGV[5]) end\n"
        "redis.call('ZREM', P .. 'runs:upcoming', PAD(id))\n"
        "redis.call('ZADD', P .. 'runs:ended', ARGV[6], PAD(id))\n"
        "LASTDUE(r.schedule_id, r.due_ms)\n"
        "return 0\n",
    /* ARGV: P, ts, type, schedule id, job id, data ('' = none) */
    [RS_EVENT_ADD] = "local id = redis.call('INCR', P .. 'events:seq')\n"
                     "local f = {'id', I(id), 'ts_ms', ARGV[2], 'type', ARGV[3],\n"
                     "           'schedule_id', ARGV[4], 'job_id', ARGV[5]}\n"
                     "if ARGV[6] ~= '' then f[#f + 1] = 'data'; f[#f + 1] = ARGV[6] end\n"
                     "redis.call('HSET', P .. 'event:' .. I(id), unpack(f))\n"
                     "redis.call('ZADD', P .. 'events', id, I(id))\n"
                     "return id\n",
    /* ARGV: P, after_id, type prefix ('' = all), schedule id, job id, limit */
    [RS_EVENTS_LIST] =
        "local pre, sid, jid, limit = ARGV[3], N(ARGV[4]), N(ARGV[5]), N(ARGV[6])\n"
        "local out, cur = {}, '(' .. ARGV[2]\n"
        "while true do\n"
        "  local ids = redis.call('ZRANGEBYSCORE', P .. 'events', cur, '+inf', 'LIMIT', 0, 500)\n"
        "  if #ids == 0 then break end\n"
        "  for _, s in ipairs(ids) do\n"
        "    local e = H(P .. 'event:' .. s)\n"
        "    if e and (pre == '' or string.sub(e.type, 1, #pre) == pre) and\n"
        "       (sid == 0 or N(e.schedule_id) == sid) and (jid == 0 or N(e.job_id) == jid) then\n"
        "      out[#out + 1] = FLAT(e)\n"
        "      if limit > 0 and #out >= limit then return out end\n"
        "    end\n"
        "  end\n"
        "  cur = '(' .. ids[#ids]\n"
        "end\n"
        "return out\n",
    [RS_EVENTS_HEAD] = "local r = redis.call('ZREVRANGE', P .. 'events', 0, 0)\n"
                       "return #r > 0 and N(r[1]) or 0\n",
    /* ARGV: P, before, max. Events first (the oldest max, those older
     * than before, never the newest: its id is the cursors' high mark),
     * then ended runs by done_ms. */
    [RS_EVENTS_PRUNE] =
        "local before, max, n = N(ARGV[2]), N(ARGV[3]), 0\n"
        "local newest = redis.call('ZREVRANGE', P .. 'events', 0, 0)[1]\n"
        "for _, s in ipairs(redis.call('ZRANGE', P .. 'events', 0, max - 1)) do\n"
        "  if s ~= newest and N(redis.call('HGET', P .. 'event:' .. s, 'ts_ms')) < before then\n"
        "    redis.call('DEL', P .. 'event:' .. s)\n"
        "    redis.call('ZREM', P .. 'events', s)\n"
        "    n = n + 1\n"
        "  end\n"
        "end\n"
        "if n < max then\n"
        "  for _, m in ipairs(redis.call('ZRANGEBYSCORE', P .. 'runs:ended', '-inf',\n"
        "                                '(' .. ARGV[2], 'LIMIT', 0, max - n)) do\n"
        "    local r = H(RK(N(m)))\n"
        "    if r then RDEL(N(m), r) else redis.call('ZREM', P .. 'runs:ended', m) end\n"
        "    n = n + 1\n"
        "  end\n"
        "end\n"
        "return n\n",
    /* ARGV: P, name, holder, now, ttl */
    [RS_LEASE_ACQUIRE] =
        "local k = P .. 'lease:' .. ARGV[2]\n"
        "local l, now = H(k), N(ARGV[4])\n"
        "local tok = 1\n"
        "if l then\n"
        "  local valid = N(l.expires_ms) > now\n"
        "  if l.holder ~= ARGV[3] and valid then return E('EBUSY') end\n"
        "  tok = N(l.token)\n"
        "  if not (l.holder == ARGV[3] and valid) then tok = tok + 1 end\n"
        "end\n"
        "redis.call('HSET', k, 'holder', ARGV[3], 'token', I(tok), 'expires_ms',\n"
        "           I(now + N(ARGV[5])))\n"
        "return tok\n",
    /* ARGV: P, name, token, now */
    [RS_LEASE_CHECK] =
        "local r = redis.call('HMGET', P .. 'lease:' .. ARGV[2], 'token', 'expires_ms')\n"
        "if r[1] and N(r[1]) == N(ARGV[3]) and N(r[2]) > N(ARGV[4]) then return 0 end\n"
        "return E('EFENCED')\n",
    /* ARGV: P, name, holder, token */
    [RS_LEASE_RELEASE] =
        "local k = P .. 'lease:' .. ARGV[2]\n"
        "local r = redis.call('HMGET', k, 'holder', 'token')\n"
        "if r[1] ~= ARGV[3] or N(r[2]) ~= N(ARGV[4]) then return E('ENOENT') end\n"
        "redis.call('HSET', k, 'expires_ms', '0')\n"
        "return 0\n",
    /* ARGV: P, name */
    [RS_LEASE_GET] = "local r = redis.call('HGETALL', P .. 'lease:' .. ARGV[2])\n"
                     "if #r == 0 then return E('ENOENT') end\n"
                     "return r\n",
};

void redis_sched_scripts(const char **src, const char **helpers) {
  for (int i = RS_SCHEDULE_PUT; i < RS_QUEUE_PUT; i++) src[i] = sched_src[i];
  *helpers = sched_helpers;
}

/* ---- schedules ---- */

#define SF(name, type) {#name, type, offsetof(schedule_t, name)}
static const struct redis_field sched_fields[] = {
    SF(id, RF_I64),          SF(name, RF_STR),           SF(kind, RF_INT),
    SF(expr, RF_STR),        SF(interval_ms, RF_I64),    SF(once_ms, RF_I64),
    SF(tz, RF_STR),          SF(start_ms, RF_I64),       SF(end_ms, RF_I64),
    SF(jitter_ms, RF_I64),   SF(overlap, RF_INT),        SF(missed, RF_INT),
    SF(catchup_max, RF_INT), SF(paused, RF_INT),         SF(project, RF_STR),
    SF(spider, RF_STR),      SF(version, RF_STR),        SF(args, RF_JSON),
    SF(settings, RF_JSON),   SF(priority, RF_DBL),       SF(timeout_ms, RF_I64),
    SF(max_retries, RF_INT), SF(retry_backoff_ms, RF_I64), SF(webhooks, RF_JSON),
    SF(created_ms, RF_I64),  SF(updated_ms, RF_I64),     SF(horizon_ms, RF_I64),
    SF(refill_ms, RF_I64),   SF(last_due_ms, RF_I64),
};
#undef SF

static int row_schedule(const redisReply *r, schedule_t *sc) {
  schedule_init(sc);
  int rc = redis_decode(r, sched_fields, sizeof(sched_fields) / sizeof(sched_fields[0]), sc);
  if (rc) schedule_release(sc);
  return rc;
}

static void ra_num(redis_args_t *a, const char *k, int64_t v) {
  ra_str(a, k);
  ra_i64(a, v);
}

static int schedule_put(struct redis_store *q, const char *mode, const schedule_t *sc,
                        int64_t *id) {
  redis_args_t a = {0};
  ra_str(&a, mode);
  ra_i64(&a, sc->id);
  ra_kv_str(&a, "name", sc->name);
  ra_num(&a, "kind", sc->kind);
  ra_kv_str(&a, "expr", sc->expr);
  ra_num(&a, "interval_ms", sc->interval_ms);
  ra_num(&a, "once_ms", sc->once_ms);
  ra_kv_str(&a, "tz", sc->tz);
  ra_num(&a, "start_ms", sc->start_ms);
  ra_num(&a, "end_ms", sc->end_ms);
  ra_num(&a, "jitter_ms", sc->jitter_ms);
  ra_num(&a, "overlap", sc->overlap);
  ra_num(&a, "missed", sc->missed);
  ra_num(&a, "catchup_max", sc->catchup_max);
  ra_num(&a, "paused", sc->paused);
  ra_kv_str(&a, "project", sc->project);
  ra_kv_str(&a, "spider", sc->spider);
  ra_kv_str(&a, "version", sc->version);
  ra_kv_json(&a, "args", sc->args);
  ra_kv_json(&a, "settings", sc->settings);
  ra_str(&a, "priority");
  ra_dbl(&a, sc->priority);
  ra_num(&a, "timeout_ms", sc->timeout_ms);
  ra_num(&a, "max_retries", sc->max_retries);
  ra_num(&a, "retry_backoff_ms", sc->retry_backoff_ms);
  ra_kv_json(&a, "webhooks", sc->webhooks);
  ra_num(&a, "created_ms", sc->created_ms);
  ra_num(&a, "updated_ms", sc->updated_ms);
  ra_num(&a, "horizon_ms", sc->horizon_ms);
  ra_num(&a, "refill_ms", sc->refill_ms);
  ra_num(&a, "last_due_ms", sc->last_due_ms);
  redisReply *r = NULL;
  int rc = redis_eval(q, RS_SCHEDULE_PUT, &a, &r, "write schedule");
  if (!rc && id) *id = rr_i64(r);
  if (r) freeReplyObject(r);
  return rc;
}

int redis_schedule_insert(store_t *s, schedule_t *sc) {
  int64_t now = clock_wall_ms(), id = 0;
  if (!sc->created_ms) sc->created_ms = now;
  if (!sc->updated_ms) sc->updated_ms = sc->created_ms;
  int rc = schedule_put(RQ(s), "insert", sc, &id);
  if (!rc) sc->id = id;
  return rc;
}

int redis_schedule_update(store_t *s, const schedule_t *sc) {
  return schedule_put(RQ(s), "update", sc, NULL);
}

int redis_schedule_delete(store_t *s, int64_t id) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  return redis_eval(RQ(s), RS_SCHEDULE_DELETE, &a, NULL, "delete schedule");
}

int redis_schedule_get(store_t *s, int64_t id, const char *name, schedule_t *out) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_i64(&a, id);
  ra_str(&a, name);
  int rc = redis_eval(RQ(s), RS_SCHEDULE_GET, &a, &r, "get schedule");
  if (!rc) {
    schedule_t sc;
    rc = row_schedule(r, &sc);
    if (!rc) {
      schedule_release(out);
      *out = sc;
    }
  }
  if (r) freeReplyObject(r);
  return rc;
}

static int schedules_call(struct redis_store *q, int id, redis_args_t *a,
                          schedule_list_t *out, const char *what) {
  redisReply *r = NULL;
  int rc = redis_eval(q, id, a, &r, what);
  if (!rc && r->type != REDIS_REPLY_ARRAY) rc = SPD_ESTORE;
  if (!rc && r->elements) {
    schedule_t *v = realloc(out->v, (out->n + r->elements) * sizeof(*v));
    if (!v) {
      rc = -ENOMEM;
    } else {
      out->v = v;
      for (size_t i = 0; !rc && i < r->elements; i++)
        if (!(rc = row_schedule(r->element[i], &out->v[out->n]))) out->n++;
    }
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_schedules_list(store_t *s, int64_t after_id, size_t limit, schedule_list_t *out) {
  redis_args_t a = {0};
  ra_i64(&a, after_id);
  ra_i64(&a, limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)limit);
  return schedules_call(RQ(s), RS_SCHEDULES_LIST, &a, out, "list schedules");
}

int redis_schedules_refill(store_t *s, int64_t now_ms, size_t limit, schedule_list_t *out) {
  redis_args_t a = {0};
  ra_i64(&a, now_ms);
  ra_i64(&a, limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)limit);
  return schedules_call(RQ(s), RS_SCHEDULES_REFILL, &a, out, "schedules to refill");
}

/* ---- runs ---- */

#define RF(name, type) {#name, type, offsetof(sched_run_t, name)}
static const struct redis_field run_fields[] = {
    RF(id, RF_I64),    RF(schedule_id, RF_I64), RF(due_ms, RF_I64), RF(fire_ms, RF_I64),
    RF(state, RF_INT), RF(job_id, RF_I64),      RF(done_ms, RF_I64), RF(reason, RF_STR),
};
#undef RF

static int runs_call(struct redis_store *q, int id, redis_args_t *a, sched_run_list_t *out,
                     const char *what) {
  redisReply *r = NULL;
  int rc = redis_eval(q, id, a, &r, what);
  if (!rc && r->type != REDIS_REPLY_ARRAY) rc = SPD_ESTORE;
  if (!rc && r->elements) {
    sched_run_t *v = realloc(out->v, (out->n + r->elements) * sizeof(*v));
    if (!v) {
      rc = -ENOMEM;
    } else {
      out->v = v;
      for (size_t i = 0; !rc && i < r->elements; i++) {
        sched_run_t *run = &out->v[out->n];
        memset(run, 0, sizeof(*run));
        rc = redis_decode(r->element[i], run_fields, sizeof(run_fields) / sizeof(run_fields[0]),
                          run);
        if (rc) sched_run_release(run);
        else out->n++;
      }
    }
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_runs_add(store_t *s, int64_t schedule_id, const int64_t *due, const int64_t *fire,
                   size_t n, int64_t horizon_ms, int64_t refill_ms) {
  redis_args_t a = {0};
  ra_i64(&a, schedule_id);
  ra_i64(&a, horizon_ms);
  ra_i64(&a, refill_ms);
  for (size_t i = 0; i < n; i++) {
    ra_i64(&a, due[i]);
    ra_i64(&a, fire[i]);
  }
  return redis_eval(RQ(s), RS_RUNS_ADD, &a, NULL, "add runs");
}

int redis_runs_clear(store_t *s, int64_t schedule_id, int64_t from_ms) {
  redis_args_t a = {0};
  ra_i64(&a, schedule_id);
  ra_i64(&a, from_ms);
  return redis_eval(RQ(s), RS_RUNS_CLEAR, &a, NULL, "clear runs");
}

int redis_run_defer(store_t *s, int64_t run_id, const char *reason) {
  redis_args_t a = {0};
  ra_i64(&a, run_id);
  ra_str(&a, reason);
  return redis_eval(RQ(s), RS_RUN_DEFER, &a, NULL, "defer run");
}

int redis_runs_due(store_t *s, int64_t until_ms, size_t max, sched_run_list_t *out) {
  redis_args_t a = {0};
  ra_i64(&a, until_ms);
  ra_i64(&a, max > 1000000 ? 1000000 : (int64_t)max);
  return runs_call(RQ(s), RS_RUNS_DUE, &a, out, "due runs");
}

int redis_runs_list(store_t *s, const run_filter_t *f, sched_run_list_t *out) {
  redis_args_t a = {0};
  ra_i64(&a, f->schedule_id);
  ra_i64(&a, f->states);
  ra_i64(&a, f->from_ms);
  ra_i64(&a, f->to_ms);
  ra_i64(&a, f->after_id);
  ra_i64(&a, f->limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)f->limit);
  return runs_call(RQ(s), RS_RUNS_LIST, &a, out, "list runs");
}

int redis_run_end(store_t *s, int64_t run_id, run_state_t state, int64_t job_id,
                  const char *reason, int64_t now_ms) {
  redis_args_t a = {0};
  ra_i64(&a, run_id);
  ra_i64(&a, state);
  ra_i64(&a, job_id);
  ra_str(&a, reason);
  ra_i64(&a, now_ms);
  return redis_eval(RQ(s), RS_RUN_END, &a, NULL, "end run");
}

/* ---- events ---- */

int redis_event_add(store_t *s, event_t *e) {
  redis_args_t a = {0};
  if (!e->ts_ms) e->ts_ms = clock_wall_ms();
  ra_i64(&a, e->ts_ms);
  ra_str(&a, e->type);
  ra_i64(&a, e->schedule_id);
  ra_i64(&a, e->job_id);
  ra_json(&a, e->data);
  redisReply *r = NULL;
  int rc = redis_eval(RQ(s), RS_EVENT_ADD, &a, &r, "add event");
  if (!rc) e->id = rr_i64(r);
  if (r) freeReplyObject(r);
  return rc;
}

#define EVF(name, type) {#name, type, offsetof(event_t, name)}
static const struct redis_field event_fields[] = {
    EVF(id, RF_I64),     EVF(ts_ms, RF_I64),  EVF(type, RF_STR),
    EVF(schedule_id, RF_I64), EVF(job_id, RF_I64), EVF(data, RF_JSON),
};
#undef EVF

int redis_events_list(store_t *s, const event_filter_t *f, event_list_t *out) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_i64(&a, f->after_id);
  ra_str(&a, f->type_prefix);
  ra_i64(&a, f->schedule_id);
  ra_i64(&a, f->job_id);
  ra_i64(&a, f->limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)f->limit);
  int rc = redis_eval(RQ(s), RS_EVENTS_LIST, &a, &r, "list events");
  if (!rc && r->type != REDIS_REPLY_ARRAY) rc = SPD_ESTORE;
  if (!rc && r->elements) {
    event_t *v = realloc(out->v, (out->n + r->elements) * sizeof(*v));
    if (!v) {
      rc = -ENOMEM;
    } else {
      out->v = v;
      for (size_t i = 0; !rc && i < r->elements; i++) {
        event_t *e = &out->v[out->n];
        memset(e, 0, sizeof(*e));
        rc = redis_decode(r->element[i], event_fields,
                          sizeof(event_fields) / sizeof(event_fields[0]), e);
        if (rc) event_release(e);
        else out->n++;
      }
    }
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_events_head(store_t *s, int64_t *id) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  int rc = redis_eval(RQ(s), RS_EVENTS_HEAD, &a, &r, "events head");
  if (!rc) *id = rr_i64(r);
  if (r) freeReplyObject(r);
  return rc;
}

int redis_events_prune(store_t *s, int64_t before_ms, size_t max, int *deleted) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_i64(&a, before_ms);
  ra_i64(&a, max > 1000000 ? 1000000 : (int64_t)max);
  int rc = redis_eval(RQ(s), RS_EVENTS_PRUNE, &a, &r, "prune events");
  if (!rc) *deleted = (int)rr_i64(r);
  if (r) freeReplyObject(r);
  return rc;
}

/* ---- leases ---- */

int redis_lease_acquire(store_t *s, const char *name, const char *holder, int64_t now_ms,
                        int64_t ttl_ms, int64_t *token) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  ra_str(&a, holder);
  ra_i64(&a, now_ms);
  ra_i64(&a, ttl_ms);
  int rc = redis_eval(RQ(s), RS_LEASE_ACQUIRE, &a, &r, "acquire lease");
  if (!rc) *token = rr_i64(r);
  if (r) freeReplyObject(r);
  return rc;
}

int redis_lease_check(store_t *s, const char *name, int64_t token, int64_t now_ms) {
  redis_args_t a = {0};
  ra_str(&a, name);
  ra_i64(&a, token);
  ra_i64(&a, now_ms);
  return redis_eval(RQ(s), RS_LEASE_CHECK, &a, NULL, "check lease");
}

int redis_lease_release(store_t *s, const char *name, const char *holder, int64_t token) {
  redis_args_t a = {0};
  ra_str(&a, name);
  ra_str(&a, holder);
  ra_i64(&a, token);
  return redis_eval(RQ(s), RS_LEASE_RELEASE, &a, NULL, "release lease");
}

int redis_lease_get(store_t *s, const char *name, char **holder, int64_t *token,
                    int64_t *expires_ms) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  int rc = redis_eval(RQ(s), RS_LEASE_GET, &a, &r, "get lease");
  if (!rc) {
    *token = rr_i64(rr_field(r, "token"));
    *expires_ms = rr_i64(rr_field(r, "expires_ms"));
    rc = rr_strz(rr_field(r, "holder"), holder);
  }
  if (r) freeReplyObject(r);
  return rc;
}
