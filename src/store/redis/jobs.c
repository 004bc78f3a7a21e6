/* The Redis backend's jobs, nodes, cancel requests, eggs and history
 * retention (store.h), each op one Lua script (store/redis/internal.h).
 *
 * Keys under the prefix P:
 *   job:ID             hash: the job's fields as named in job_t (absent =
 *                      NULL / 0), plus cancel_ms
 *   jobs:seq           the last id given (INCR: ids are never reused)
 *   jobs:all           zset id -> id (the native listing, newest first)
 *   jobs:pending       zset priority -> INV(id): read backwards, priority
 *                      DESC then id ASC, both exact (a score is the double
 *                      itself; equal scores order by member, and INV is a
 *                      fixed-width decimal of 999999999999999 - id)
 *   jobs:nb            hash id -> not_before_ms of pending jobs that have one
 *   jobs:running       zset start_ms -> PAD(id): start_ms ASC, id ASC
 *   jobs:ended         zset end_ms -> PAD(id), read backwards: end_ms DESC,
 *                      id DESC (every final state)
 *   jobs:ended:PR\0SP  the same per project/spider pair (retention)
 *   jobs:pairs         zset (all scores 0) of the pairs "PR\0SP", by name
 *   jobs:jobid:JOBID   set of ids with this Scrapyd job id
 *   jobs:unique        hash "PR\0KEY" -> id of the live job holding the key
 *   jobs:live          hash parent id -> its pending or running children
 *   jobs:count         hash "STATE" and "STATE:PR" -> jobs (final states
 *                      count only jobs that started), kept by every change
 *   node:NAME, nodes   a hash per node; zset of names
 *   egg:PR\0VER, eggs  a hash per egg (data, size, created_ms); zset of names
 *
 * Every state change goes through JIDX(id, job, -1) before and
 * JIDX(id, job, +1) after, which keeps all the indexes and counters above.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "log.h"
#include "store/redis/internal.h"

static const char jobs_helpers[] =
    "local function PAD(id) return string.format('%015.0f', id) end\n"
    "local function INV(id) return string.format('%015.0f', 999999999999999 - id) end\n"
    "local function UNINV(m) return 999999999999999 - tonumber(m) end\n"
    "local function JK(id) return P .. 'job:' .. I(id) end\n"
    "local function JIDX(id, j, d)\n"
    "  local st, sid = N(j.state), PAD(id)\n"
    "  if st == 0 then\n"
    "    if d > 0 then\n"
    "      redis.call('ZADD', P .. 'jobs:pending', j.priority or '0', INV(id))\n"
    "      if N(j.not_before_ms) > 0 then\n"
    "        redis.call('HSET', P .. 'jobs:nb', I(id), j.not_before_ms)\n"
    "      end\n"
    "    else\n"
    "      redis.call('ZREM', P .. 'jobs:pending', INV(id))\n"
    "      redis.call('HDEL', P .. 'jobs:nb', I(id))\n"
    "    end\n"
    "  elseif st == 1 then\n"
    "    if d > 0 then redis.call('ZADD', P .. 'jobs:running', j.start_ms or '0', sid)\n"
    "    else redis.call('ZREM', P .. 'jobs:running', sid) end\n"
    "  else\n"
    "    local pk = j.project .. '\\0' .. j.spider\n"
    "    if d > 0 then\n"
    "      redis.call('ZADD', P .. 'jobs:ended', j.end_ms or '0', sid)\n"
    "      redis.call('ZADD', P .. 'jobs:ended:' .. pk, j.end_ms or '0', sid)\n"
    "      redis.call('ZADD', P .. 'jobs:pairs', 0, pk)\n"
    "    else\n"
    "      redis.call('ZREM', P .. 'jobs:ended', sid)\n"
    "      redis.call('ZREM', P .. 'jobs:ended:' .. pk, sid)\n"
    "    end\n"
    "  end\n"
    "  if st < 2 then\n"
    "    if j.unique_key then\n"
    "      local uk = j.project .. '\\0' .. j.unique_key\n"
    "      if d > 0 then redis.call('HSET', P .. 'jobs:unique', uk, I(id))\n"
    "      elseif redis.call('HGET', P .. 'jobs:unique', uk) == I(id) then\n"
    "        redis.call('HDEL', P .. 'jobs:unique', uk)\n"
    "      end\n"
    "    end\n"
    "    if N(j.parent_id) ~= 0 then\n"
    "      if redis.call('HINCRBY', P .. 'jobs:live', j.parent_id, d) <= 0 then\n"
    "        redis.call('HDEL', P .. 'jobs:live', j.parent_id)\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  if st < 2 or N(j.start_ms) ~= 0 then\n"
    "    redis.call('HINCRBY', P .. 'jobs:count', I(st), d)\n"
    "    redis.call('HINCRBY', P .. 'jobs:count', I(st) .. ':' .. j.project, d)\n"
    "  end\n"
    "end\n"
    /* Deletes a job and every trace of it in the indexes. */
    "local function JDEL(id, j)\n"
    "  JIDX(id, j, -1)\n"
    "  redis.call('DEL', JK(id))\n"
    "  redis.call('SREM', P .. 'jobs:jobid:' .. j.jobid, I(id))\n"
    "  redis.call('ZREM', P .. 'jobs:all', I(id))\n"
    "end\n"
    /* Sets fields of job j (table: field -> value, false = delete). */
    "local function JSET(id, j, ch)\n"
    "  local set, del = {}, {}\n"
    "  for k, v in pairs(ch) do\n"
    "    if v then j[k] = v; set[#set + 1] = k; set[#set + 1] = v\n"
    "    else j[k] = nil; del[#del + 1] = k end\n"
    "  end\n"
    "  if #set > 0 then redis.call('HSET', JK(id), unpack(set)) end\n"
    "  if #del > 0 then redis.call('HDEL', JK(id), unpack(del)) end\n"
    "end\n"
    /* A state change: out of the indexes, the fields, back in. */
    "local function JMOVE(id, j, ch)\n"
    "  JIDX(id, j, -1)\n"
    "  JSET(id, j, ch)\n"
    "  JIDX(id, j, 1)\n"
    "end\n"
    /* The order of store_jobs_list within and across state groups. */
    "local function JLESS(a, b)\n"
    "  local sa, sb = math.min(N(a.state), 2), math.min(N(b.state), 2)\n"
    "  if sa ~= sb then return sa < sb end\n"
    "  local ia, ib = N(a.id), N(b.id)\n"
    "  if sa == 0 then\n"
    "    local pa, pb = N(a.priority), N(b.priority)\n"
    "    if pa ~= pb then return pa > pb end\n"
    "    return ia < ib\n"
    "  elseif sa == 1 then\n"
    "    local xa, xb = N(a.start_ms), N(b.start_ms)\n"
    "    if xa ~= xb then return xa < xb end\n"
    "    return ia < ib\n"
    "  end\n"
    "  local xa, xb = N(a.end_ms), N(b.end_ms)\n"
    "  if xa ~= xb then return xa > xb end\n"
    "  return ia > ib\n"
    "end\n";

static const char *const jobs_src[RS_SCHEDULE_PUT] = {
    /* ARGV: P, field, value, ... */
    [RS_JOB_INSERT] =
        "local j = {}\n"
        "for i = 2, #ARGV, 2 do j[ARGV[i]] = ARGV[i + 1] end\n"
        "if N(j.state) < 2 and j.unique_key then\n"
        "  local h = redis.call('HGET', P .. 'jobs:unique', j.project .. '\\0' .. j.unique_key)\n"
        "  if h then return E('ECONFLICT ' .. h) end\n"
        "end\n"
        "local id = redis.call('INCR', P .. 'jobs:seq')\n"
        "j.id = I(id)\n"
        "redis.call('HSET', JK(id), unpack(FLAT(j)))\n"
        "JIDX(id, j, 1)\n"
        "redis.call('SADD', P .. 'jobs:jobid:' .. j.jobid, I(id))\n"
        "redis.call('ZADD', P .. 'jobs:all', id, I(id))\n"
        "return id\n",
    /* ARGV: P, node, max, now */
    [RS_JOB_CLAIM] =
        "local node, max, now = ARGV[2], N(ARGV[3]), N(ARGV[4])\n"
        "local hasnb = redis.call('HLEN', P .. 'jobs:nb') > 0\n"
        "local out, skip = {}, 0\n"
        "while #out < max do\n"
        "  local ms = redis.call('ZREVRANGE', P .. 'jobs:pending', skip, skip + 199)\n"
        "  if #ms == 0 then break end\n"
        "  for _, m in ipairs(ms) do\n"
        "    local id = UNINV(m)\n"
        "    local nb = hasnb and redis.call('HGET', P .. 'jobs:nb', I(id))\n"
        "    if nb and N(nb) > now then\n"
        "      skip = skip + 1\n"
        "    else\n"
        "      local j = H(JK(id))\n"
        "      JMOVE(id, j, {state = '1', node = node, start_ms = ARGV[4]})\n"
        "      out[#out + 1] = FLAT(j)\n"
        "      if #out >= max then break end\n"
        "    end\n"
        "  end\n"
        "end\n"
        "return out\n",
    /* ARGV: P, id, pid, pid_start */
    [RS_JOB_STARTED] = "if redis.call('EXISTS', JK(ARGV[2])) == 0 then return E('ENOENT') end\n"
                       "redis.call('HSET', JK(ARGV[2]), 'pid', ARGV[3], 'pid_start', ARGV[4])\n"
                       "return 0\n",
    /* ARGV: P, id */
    [RS_JOB_REQUEUE] =
        "local id = N(ARGV[2])\n"
        "local j = H(JK(id))\n"
        "if not j or N(j.state) ~= 1 then return E('ENOENT') end\n"
        "JMOVE(id, j, {state = '0', node = false, start_ms = false, pid = false,\n"
        "              pid_start = false, cancel_ms = false})\n"
        "return 0\n",
    /* ARGV: P, id, state, end_ms, exit_code, term_signal, stats ('' = none) */
    [RS_JOB_FINISH] =
        "local id = N(ARGV[2])\n"
        "local j = H(JK(id))\n"
        "if not j then return E('ENOENT') end\n"
        "JMOVE(id, j, {state = ARGV[3], end_ms = ARGV[4], exit_code = ARGV[5],\n"
        "              term_signal = ARGV[6], stats = ARGV[7] ~= '' and ARGV[7]})\n"
        "return N(j.state)\n",
    /* ARGV: P, project, jobid, now */
    [RS_JOB_CANCEL_PENDING] =
        "local n = 0\n"
        "for _, s in ipairs(redis.call('SMEMBERS', P .. 'jobs:jobid:' .. ARGV[3])) do\n"
        "  local id = N(s)\n"
        "  local j = H(JK(id))\n"
        "  if j and j.project == ARGV[2] and N(j.state) == 0 then\n"
        "    JMOVE(id, j, {state = '4', end_ms = ARGV[4]})\n"
        "    n = n + 1\n"
        "  end\n"
        "end\n"
        "return n\n",
    /* ARGV: P, id */
    [RS_JOB_GET] = "local r = redis.call('HGETALL', JK(ARGV[2]))\n"
                   "if #r == 0 then return E('ENOENT') end\n"
                   "return r\n",
    /* ARGV: P, jobid, project ('' = any). Rank: a started final state
     * (the latest ended), running, pending. */
    [RS_JOB_STATUS] =
        "local best, bk\n"
        "for _, s in ipairs(redis.call('SMEMBERS', P .. 'jobs:jobid:' .. ARGV[2])) do\n"
        "  local j = H(JK(s))\n"
        "  if j and (ARGV[3] == '' or j.project == ARGV[3]) then\n"
        "    local st = N(j.state)\n"
        "    if st < 2 or N(j.start_ms) ~= 0 then\n"
        "      local k = {st >= 2 and 0 or (st == 1 and 1 or 2), -N(j.end_ms), -N(j.id)}\n"
        "      if not bk or k[1] < bk[1] or (k[1] == bk[1] and (k[2] < bk[2] or\n"
        "         (k[2] == bk[2] and k[3] < bk[3]))) then best, bk = st, k end\n"
        "    end\n"
        "  end\n"
        "end\n"
        "if not best then return E('ENOENT') end\n"
        "return best\n",
    /* ARGV: P, states, project, jobid, node, started_only, limit, native,
     * spider, schedule_id, parent_id, created_from, created_to, before_id */
    [RS_JOBS_LIST] =
        "local states = N(ARGV[2])\n"
        "if states == 0 then states = 63 end\n"
        "local project, jobid, node = ARGV[3], ARGV[4], ARGV[5]\n"
        "local started, limit, native = ARGV[6] == '1', N(ARGV[7]), ARGV[8] == '1'\n"
        "local spider, sched, parent = ARGV[9], N(ARGV[10]), N(ARGV[11])\n"
        "local cfrom, cto, before = N(ARGV[12]), N(ARGV[13]), N(ARGV[14])\n"
        "local function bit(st) return math.floor(states / 2 ^ st) % 2 == 1 end\n"
        "local function ok(j)\n"
        "  if not bit(N(j.state)) then return false end\n"
        "  if project ~= '' and j.project ~= project then return false end\n"
        "  if jobid ~= '' and j.jobid ~= jobid then return false end\n"
        "  if node ~= '' and j.node ~= node then return false end\n"
        "  if started and N(j.start_ms) == 0 then return false end\n"
        "  if spider ~= '' and j.spider ~= spider then return false end\n"
        "  if sched ~= 0 and N(j.schedule_id) ~= sched then return false end\n"
        "  if parent ~= 0 and N(j.parent_id) ~= parent then return false end\n"
        "  if cfrom ~= 0 and N(j.created_ms) < cfrom then return false end\n"
        "  if cto ~= 0 and N(j.created_ms) >= cto then return false end\n"
        "  if before ~= 0 and N(j.id) >= before then return false end\n"
        "  return true\n"
        "end\n"
        "local out = {}\n"
        "local function full() return limit > 0 and #out >= limit end\n"
        "local function add(id)\n"
        "  local j = H(JK(id))\n"
        "  if j and ok(j) then out[#out + 1] = FLAT(j) end\n"
        "  return full()\n"
        "end\n"
        "if native then\n"
        "  local cur = before > 0 and '(' .. I(before) or '+inf'\n"
        "  while true do\n"
        "    local ids = redis.call('ZREVRANGEBYSCORE', P .. 'jobs:all', cur, '-inf',\n"
        "                           'LIMIT', 0, 500)\n"
        "    if #ids == 0 then break end\n"
        "    for _, s in ipairs(ids) do if add(N(s)) then return out end end\n"
        "    cur = '(' .. ids[#ids]\n"
        "  end\n"
        "  return out\n"
        "end\n"
        "if jobid ~= '' then\n"
        "  local js = {}\n"
        "  for _, s in ipairs(redis.call('SMEMBERS', P .. 'jobs:jobid:' .. jobid)) do\n"
        "    local j = H(JK(s))\n"
        "    if j and ok(j) then js[#js + 1] = j end\n"
        "  end\n"
        "  table.sort(js, JLESS)\n"
        "  for i = 1, #js do\n"
        "    out[#out + 1] = FLAT(js[i])\n"
        "    if full() then break end\n"
        "  end\n"
        "  return out\n"
        "end\n"
        "local function walk(key, rev, conv)\n"
        "  local from = 0\n"
        "  while true do\n"
        "    local ms = redis.call(rev and 'ZREVRANGE' or 'ZRANGE', key, from, from + 499)\n"
        "    if #ms == 0 then return false end\n"
        "    for _, m in ipairs(ms) do if add(conv(m)) then return true end end\n"
        "    from = from + #ms\n"
        "  end\n"
        "end\n"
        "if bit(0) and walk(P .. 'jobs:pending', true, UNINV) then return out end\n"
        "if bit(1) and walk(P .. 'jobs:running', false, N) then return out end\n"
        "if states >= 4 then walk(P .. 'jobs:ended', true, N) end\n"
        "return out\n",
    /* ARGV: P, project ('' = all) */
    [RS_JOB_COUNTS] = "local out = {}\n"
                      "for st = 0, 5 do\n"
                      "  local f = ARGV[2] == '' and I(st) or I(st) .. ':' .. ARGV[2]\n"
                      "  out[#out + 1] = N(redis.call('HGET', P .. 'jobs:count', f))\n"
                      "end\n"
                      "return out\n",
    /* ARGV: P, keep. The cut-off is the keep-th newest started final job,
     * or the oldest one when there are fewer; older started jobs go, and
     * unstarted ones that ended before it. */
    [RS_TRIM_FINISHED] =
        "local keep = N(ARGV[2])\n"
        "local ms = redis.call('ZREVRANGE', P .. 'jobs:ended', 0, -1, 'WITHSCORES')\n"
        "local seen, cut, cutend = 0, nil, 0\n"
        "for i = 1, #ms, 2 do\n"
        "  if N(redis.call('HGET', JK(ms[i]), 'start_ms')) ~= 0 then\n"
        "    seen = seen + 1\n"
        "    cut, cutend = i, N(ms[i + 1])\n"
        "    if seen >= keep then break end\n"
        "  end\n"
        "end\n"
        "if not cut then return 0 end\n"
        "local n = 0\n"
        "for i = cut + 2, #ms, 2 do\n"
        "  local id = N(ms[i])\n"
        "  local j = H(JK(id))\n"
        "  if j and (N(j.start_ms) ~= 0 or N(ms[i + 1]) < cutend) then\n"
        "    JDEL(id, j)\n"
        "    n = n + 1\n"
        "  end\n"
        "end\n"
        "return n\n",
    /* ARGV: P, id, now */
    [RS_JOB_HEARTBEAT] =
        "if N(redis.call('HGET', JK(ARGV[2]), 'state')) ~= 1 or\n"
        "   redis.call('EXISTS', JK(ARGV[2])) == 0 then return E('ENOENT') end\n"
        "redis.call('HSET', JK(ARGV[2]), 'heartbeat_ms', ARGV[3])\n"
        "return 0\n",
    /* ARGV: P, now */
    [RS_JOB_NEXT_DUE] = "local now, best = N(ARGV[2]), 0\n"
                        "local r = redis.call('HGETALL', P .. 'jobs:nb')\n"
                        "for i = 2, #r, 2 do\n"
                        "  local v = N(r[i])\n"
                        "  if v > now and (best == 0 or v < best) then best = v end\n"
                        "end\n"
                        "return best\n",
    /* ARGV: P, keep_default, before_default, max, nrules, then per rule
     * project, spider ('' = the project's default), keep, before. */
    [RS_JOBS_PRUNE] =
        "local kdef, bdef, max, nr = N(ARGV[2]), N(ARGV[3]), N(ARGV[4]), N(ARGV[5])\n"
        "local function limits(project, spider)\n"
        "  local best\n"
        "  for r = 0, nr - 1 do\n"
        "    local b = 6 + 4 * r\n"
        "    if ARGV[b] == project then\n"
        "      if ARGV[b + 1] ~= '' and ARGV[b + 1] == spider then best = b; break end\n"
        "      if ARGV[b + 1] == '' and not best then best = b end\n"
        "    end\n"
        "  end\n"
        "  if best then return N(ARGV[best + 2]), N(ARGV[best + 3]) end\n"
        "  return kdef, bdef\n"
        "end\n"
        "local out = {}\n"
        "for _, pk in ipairs(redis.call('ZRANGEBYLEX', P .. 'jobs:pairs', '-', '+')) do\n"
        "  if #out >= max then break end\n"
        "  local z = P .. 'jobs:ended:' .. pk\n"
        "  if redis.call('ZCARD', z) == 0 then\n"
        "    redis.call('ZREM', P .. 'jobs:pairs', pk)\n"
        "  else\n"
        "    local cut = string.find(pk, '\\0', 1, true)\n"
        "    local keep, before = limits(string.sub(pk, 1, cut - 1), string.sub(pk, cut + 1))\n"
        "    if keep > 0 or before > 0 then\n"
        "      local ms = redis.call('ZREVRANGE', z, 0, -1, 'WITHSCORES')\n"
        "      local started = 0\n"
        "      for i = 1, #ms, 2 do\n"
        "        if #out >= max then break end\n"
        "        local id = N(ms[i])\n"
        "        local j = H(JK(id))\n"
        "        if j then\n"
        "          local over = keep > 0 and started >= keep\n"
        "          if N(j.start_ms) ~= 0 then started = started + 1 end\n"
        "          if (over or (before > 0 and N(j.end_ms) < before)) and\n"
        "             N(redis.call('HGET', P .. 'jobs:live', I(id))) <= 0 then\n"
        "            JDEL(id, j)\n"
        "            out[#out + 1] = {'id', j.id, 'jobid', j.jobid, 'project', j.project,\n"
        "                             'spider', j.spider, 'state', j.state or '0',\n"
        "                             'start_ms', j.start_ms or '0', 'end_ms', j.end_ms or '0'}\n"
        "          end\n"
        "        end\n"
        "      end\n"
        "    end\n"
        "  end\n"
        "end\n"
        "return out\n",
    /* ARGV: P, name, url, slots, running, started_ms, now */
    [RS_NODE_BEAT] =
        "local k = P .. 'node:' .. ARGV[2]\n"
        "local dead = redis.call('HGET', k, 'dead') == '1'\n"
        "redis.call('HSET', k, 'name', ARGV[2], 'url', ARGV[3], 'slots', ARGV[4],\n"
        "           'running', ARGV[5], 'started_ms', ARGV[6], 'heartbeat_ms', ARGV[7],\n"
        "           'dead', '0')\n"
        "redis.call('ZADD', P .. 'nodes', 0, ARGV[2])\n"
        "return dead and 1 or 0\n",
    [RS_NODES_LIST] =
        "local out = {}\n"
        "for _, n in ipairs(redis.call('ZRANGE', P .. 'nodes', 0, -1)) do\n"
        "  local r = redis.call('HGETALL', P .. 'node:' .. n)\n"
        "  if #r > 0 then out[#out + 1] = r end\n"
        "end\n"
        "return out\n",
    /* ARGV: P, self, now, timeout. Returns {nodes declared dead, {jobs}}. */
    [RS_NODES_REAP] =
        "local now, cut = N(ARGV[3]), N(ARGV[3]) - N(ARGV[4])\n"
        "local dead, died = {}, 0\n"
        "for _, n in ipairs(redis.call('ZRANGE', P .. 'nodes', 0, -1)) do\n"
        "  local k = P .. 'node:' .. n\n"
        "  local nd = H(k)\n"
        "  if nd then\n"
        "    if nd.dead ~= '1' and n ~= ARGV[2] and N(nd.heartbeat_ms) < cut then\n"
        "      redis.call('HSET', k, 'dead', '1')\n"
        "      nd.dead = '1'\n"
        "      died = died + 1\n"
        "    end\n"
        "    if nd.dead == '1' then dead[n] = true end\n"
        "  end\n"
        "end\n"
        "local lost = {}\n"
        "if next(dead) then\n"
        "  for _, m in ipairs(redis.call('ZRANGE', P .. 'jobs:running', 0, -1)) do\n"
        "    local id = N(m)\n"
        "    local j = H(JK(id))\n"
        "    if j and j.node and dead[j.node] then\n"
        "      lost[#lost + 1] = FLAT(j)\n"
        "      JMOVE(id, j, {state = '5', end_ms = ARGV[3]})\n"
        "    end\n"
        "  end\n"
        "end\n"
        "return {died, lost}\n",
    /* ARGV: P, id, now */
    [RS_JOB_CANCEL_REQUEST] =
        "if N(redis.call('HGET', JK(ARGV[2]), 'state')) ~= 1 or\n"
        "   redis.call('EXISTS', JK(ARGV[2])) == 0 then return E('ENOENT') end\n"
        "redis.call('HSET', JK(ARGV[2]), 'cancel_ms', ARGV[3])\n"
        "return 0\n",
    /* ARGV: P, node */
    [RS_JOBS_CANCEL_REQUESTED] =
        "local js = {}\n"
        "for _, m in ipairs(redis.call('ZRANGE', P .. 'jobs:running', 0, -1)) do\n"
        "  local j = H(JK(N(m)))\n"
        "  if j and j.node == ARGV[2] and N(j.cancel_ms) ~= 0 then js[#js + 1] = j end\n"
        "end\n"
        "table.sort(js, function(a, b) return N(a.id) < N(b.id) end)\n"
        "local out = {}\n"
        "for i = 1, #js do out[i] = FLAT(js[i]) end\n"
        "return out\n",
    /* ARGV: P, project, version, data, now */
    [RS_EGG_PUT] = "local m = ARGV[2] .. '\\0' .. ARGV[3]\n"
                   "redis.call('HSET', P .. 'egg:' .. m, 'project', ARGV[2], 'version', ARGV[3],\n"
                   "           'data', ARGV[4], 'size', #ARGV[4], 'created_ms', ARGV[5])\n"
                   "redis.call('ZADD', P .. 'eggs', 0, m)\n"
                   "return 0\n",
    /* ARGV: P, project, version */
    [RS_EGG_GET] = "local v = redis.call('HGET', P .. 'egg:' .. ARGV[2] .. '\\0' .. ARGV[3], 'data')\n"
                   "if not v then return E('ENOENT') end\n"
                   "return v\n",
    [RS_EGGS_LIST] = "local out = {}\n"
                     "for _, m in ipairs(redis.call('ZRANGEBYLEX', P .. 'eggs', '-', '+')) do\n"
                     "  local r = redis.call('HMGET', P .. 'egg:' .. m, 'project', 'version',\n"
                     "                       'size', 'created_ms')\n"
                     "  if r[1] then\n"
                     "    out[#out + 1] = {'project', r[1], 'version', r[2], 'size', r[3],\n"
                     "                     'created_ms', r[4]}\n"
                     "  end\n"
                     "end\n"
                     "return out\n",
    /* ARGV: P, project, version, all ('1': every version) */
    [RS_EGG_DELETE] =
        "local ms\n"
        "if ARGV[4] == '1' then\n"
        "  ms = redis.call('ZRANGEBYLEX', P .. 'eggs', '[' .. ARGV[2] .. '\\0',\n"
        "                  '(' .. ARGV[2] .. '\\1')\n"
        "else\n"
        "  ms = {ARGV[2] .. '\\0' .. ARGV[3]}\n"
        "end\n"
        "local n = 0\n"
        "for _, m in ipairs(ms) do\n"
        "  n = n + redis.call('DEL', P .. 'egg:' .. m)\n"
        "  redis.call('ZREM', P .. 'eggs', m)\n"
        "end\n"
        "return n\n",
};

void redis_jobs_scripts(const char **src, const char **helpers) {
  for (int i = RS_JOB_INSERT; i < RS_SCHEDULE_PUT; i++) src[i] = jobs_src[i];
  *helpers = jobs_helpers;
}

/* ---- rows ---- */

#define JF(name, type) {#name, type, offsetof(job_t, name)}
static const struct redis_field job_fields[] = {
    JF(id, RF_I64),           JF(jobid, RF_STR),          JF(project, RF_STR),
    JF(spider, RF_STR),       JF(version, RF_STR),        JF(args, RF_JSON),
    JF(settings, RF_JSON),    JF(priority, RF_DBL),       JF(state, RF_INT),
    JF(node, RF_STR),         JF(pid, RF_INT),            JF(pid_start, RF_I64),
    JF(created_ms, RF_I64),   JF(start_ms, RF_I64),       JF(end_ms, RF_I64),
    JF(exit_code, RF_INT),    JF(term_signal, RF_INT),    JF(stats, RF_JSON),
    JF(schedule_id, RF_I64),  JF(parent_id, RF_I64),      JF(retry_of, RF_I64),
    JF(attempt, RF_INT),      JF(max_retries, RF_INT),    JF(retry_backoff_ms, RF_I64),
    JF(timeout_ms, RF_I64),   JF(not_before_ms, RF_I64),  JF(heartbeat_ms, RF_I64),
    JF(unique_key, RF_STR),
};
#undef JF

int redis_row_job(const redisReply *r, job_t *j) {
  job_init(j);
  int rc = redis_decode(r, job_fields, sizeof(job_fields) / sizeof(job_fields[0]), j);
  if (rc) job_release(j);
  return rc;
}

int redis_rows_jobs(const redisReply *r, job_list_t *out) {
  if (!r || r->type != REDIS_REPLY_ARRAY) return SPD_ESTORE;
  if (r->elements == 0) return 0;
  job_t *v = calloc(r->elements, sizeof(*v));
  if (!v) return -ENOMEM;
  size_t n = 0;
  int rc = 0;
  for (; n < r->elements; n++)
    if ((rc = redis_row_job(r->element[n], &v[n]))) break;
  if (!rc) rc = job_list_append(out, v, n);
  for (size_t i = 0; i < n; i++) job_release(&v[i]);
  free(v);
  return rc;
}

/* Runs a script whose reply is an array of jobs, appended to out. */
static int redis_jobs_call(struct redis_store *q, int id, redis_args_t *a, job_list_t *out,
                           const char *what) {
  redisReply *r = NULL;
  int rc = redis_eval(q, id, a, &r, what);
  if (!rc) rc = redis_rows_jobs(r, out);
  if (r) freeReplyObject(r);
  return rc;
}

/* Runs a script whose reply is an integer (or a code). */
static int redis_int_call(struct redis_store *q, int id, redis_args_t *a, int64_t *v,
                          const char *what) {
  redisReply *r = NULL;
  int rc = redis_eval(q, id, a, &r, what);
  if (!rc && v) *v = rr_i64(r);
  if (r) freeReplyObject(r);
  return rc;
}

/* ---- jobs ---- */

int redis_job_insert(store_t *s, job_t *j) {
  struct redis_store *q = RQ(s);
  redis_args_t a = {0};
  int64_t created = j->created_ms ? j->created_ms : clock_wall_ms();
  ra_kv_str(&a, "jobid", j->jobid);
  ra_kv_str(&a, "project", j->project);
  ra_kv_str(&a, "spider", j->spider);
  ra_kv_str(&a, "version", j->version);
  ra_kv_json(&a, "args", j->args);
  ra_kv_json(&a, "settings", j->settings);
  ra_str(&a, "priority");
  ra_dbl(&a, j->priority);
  ra_str(&a, "state");
  ra_i64(&a, j->state);
  ra_kv_str(&a, "node", j->node);
  ra_kv_i64(&a, "pid", j->pid);
  ra_kv_i64(&a, "pid_start", j->pid_start);
  ra_kv_i64(&a, "created_ms", created);
  ra_kv_i64(&a, "start_ms", j->start_ms);
  ra_kv_i64(&a, "end_ms", j->end_ms);
  ra_str(&a, "exit_code");
  ra_i64(&a, j->exit_code);
  ra_kv_i64(&a, "term_signal", j->term_signal);
  ra_kv_json(&a, "stats", j->stats);
  ra_kv_i64(&a, "schedule_id", j->schedule_id);
  ra_kv_i64(&a, "parent_id", j->parent_id);
  ra_kv_i64(&a, "retry_of", j->retry_of);
  ra_str(&a, "attempt");
  ra_i64(&a, j->attempt > 0 ? j->attempt : 1);
  ra_kv_i64(&a, "max_retries", j->max_retries);
  ra_kv_i64(&a, "retry_backoff_ms", j->retry_backoff_ms);
  ra_kv_i64(&a, "timeout_ms", j->timeout_ms);
  ra_kv_i64(&a, "not_before_ms", j->not_before_ms);
  ra_kv_i64(&a, "heartbeat_ms", j->heartbeat_ms);
  ra_kv_str(&a, "unique_key", j->unique_key);
  redisReply *r = NULL;
  int rc = redis_eval(q, RS_JOB_INSERT, &a, &r, "insert job");
  if (!rc) {
    j->id = rr_i64(r);
    j->created_ms = created;
    if (j->state == JOB_PENDING) redis_note(q, STORE_NOTE_JOBS);
  } else if (rc == SPD_ECONFLICT && r && r->type == REDIS_REPLY_ERROR) {
    const char *sp = strchr(r->str, ' ');
    j->id = sp ? strtoll(sp + 1, NULL, 10) : 0;
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_job_claim(store_t *s, const char *node, size_t max, int64_t now_ms,
                    job_list_t *out) {
  redis_args_t a = {0};
  ra_str(&a, node);
  ra_i64(&a, max > 100000 ? 100000 : (int64_t)max);
  ra_i64(&a, now_ms);
  return redis_jobs_call(RQ(s), RS_JOB_CLAIM, &a, out, "claim jobs");
}

/* [concurrency] limits need a running count that holds until the claim
 * commits, which a script per op cannot give: refused (docs/cluster.md). */
int redis_job_claim_skip(store_t *s, const char *node, size_t max, int64_t now_ms,
                         const job_key_t *skip, size_t nskip, job_list_t *out) {
  return -ENOTSUP;
}

/* Each claim is one script, atomic on the server: nothing to lock. */
int redis_claim_lock(store_t *s) { return 0; }

int redis_job_started(store_t *s, int64_t id, int pid, int64_t pid_start) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  ra_i64(&a, pid);
  ra_i64(&a, pid_start);
  return redis_eval(RQ(s), RS_JOB_STARTED, &a, NULL, "record job process");
}

int redis_job_requeue(store_t *s, int64_t id) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  int rc = redis_eval(RQ(s), RS_JOB_REQUEUE, &a, NULL, "requeue job");
  if (!rc) redis_note(RQ(s), STORE_NOTE_JOBS);
  return rc;
}

int redis_job_finish(store_t *s, int64_t id, job_state_t state, int64_t end_ms,
                     int exit_code, int term_signal, const json_t *stats) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  ra_i64(&a, state);
  ra_i64(&a, end_ms);
  ra_i64(&a, exit_code);
  ra_i64(&a, term_signal);
  ra_json(&a, stats);
  int rc = redis_eval(RQ(s), RS_JOB_FINISH, &a, NULL, "finish job");
  if (!rc) redis_note(RQ(s), STORE_NOTE_JOBS);
  return rc;
}

int redis_job_cancel_pending(store_t *s, const char *project, const char *jobid,
                             int64_t now_ms, int *count) {
  redis_args_t a = {0};
  int64_t n = 0;
  ra_str(&a, project);
  ra_str(&a, jobid);
  ra_i64(&a, now_ms);
  int rc = redis_int_call(RQ(s), RS_JOB_CANCEL_PENDING, &a, &n, "cancel pending jobs");
  if (!rc) *count = (int)n;
  return rc;
}

int redis_job_get(store_t *s, int64_t id, job_t *out) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_i64(&a, id);
  int rc = redis_eval(RQ(s), RS_JOB_GET, &a, &r, "get job");
  if (!rc) {
    job_t j;
    rc = redis_row_job(r, &j);
    if (!rc) {
      job_release(out);
      *out = j;
    }
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_job_status(store_t *s, const char *project, const char *jobid, job_state_t *out) {
  redis_args_t a = {0};
  int64_t st = 0;
  ra_str(&a, jobid);
  ra_str(&a, project);
  int rc = redis_int_call(RQ(s), RS_JOB_STATUS, &a, &st, "job status");
  if (!rc) *out = (job_state_t)st;
  return rc;
}

int redis_jobs_list(store_t *s, const job_filter_t *f, job_list_t *out) {
  redis_args_t a = {0};
  int native = f->spider || f->schedule_id || f->parent_id || f->created_from_ms ||
               f->created_to_ms || f->before_id || f->newest_first;
  ra_i64(&a, f->states);
  ra_str(&a, f->project);
  ra_str(&a, f->jobid);
  ra_str(&a, f->node);
  ra_i64(&a, f->started_only ? 1 : 0);
  ra_i64(&a, f->limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)f->limit);
  ra_i64(&a, native);
  ra_str(&a, f->spider);
  ra_i64(&a, f->schedule_id);
  ra_i64(&a, f->parent_id);
  ra_i64(&a, f->created_from_ms);
  ra_i64(&a, f->created_to_ms);
  ra_i64(&a, f->before_id);
  return redis_jobs_call(RQ(s), RS_JOBS_LIST, &a, out, "list jobs");
}

int redis_job_counts(store_t *s, const char *project, int64_t counts[JOB_NSTATES]) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, project);
  int rc = redis_eval(RQ(s), RS_JOB_COUNTS, &a, &r, "count jobs");
  if (!rc && r->type == REDIS_REPLY_ARRAY)
    for (size_t i = 0; i < r->elements && i < JOB_NSTATES; i++)
      counts[i] = rr_i64(r->element[i]);
  if (r) freeReplyObject(r);
  return rc;
}

int redis_trim_finished(store_t *s, int keep, int *deleted) {
  redis_args_t a = {0};
  int64_t n = 0;
  ra_i64(&a, keep);
  int rc = redis_int_call(RQ(s), RS_TRIM_FINISHED, &a, &n, "trim jobs");
  if (!rc) *deleted = (int)n;
  return rc;
}

int redis_job_heartbeat(store_t *s, int64_t id, int64_t now_ms) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  ra_i64(&a, now_ms);
  return redis_eval(RQ(s), RS_JOB_HEARTBEAT, &a, NULL, "job heartbeat");
}

int redis_job_next_due(store_t *s, int64_t now_ms, int64_t *out) {
  redis_args_t a = {0};
  ra_i64(&a, now_ms);
  return redis_int_call(RQ(s), RS_JOB_NEXT_DUE, &a, out, "next due job");
}

int redis_jobs_prune(store_t *s, const prune_rule_t *rules, size_t nrules,
                     int keep_default, int64_t ended_before_default_ms, size_t max,
                     job_list_t *deleted) {
  redis_args_t a = {0};
  ra_i64(&a, keep_default);
  ra_i64(&a, ended_before_default_ms);
  ra_i64(&a, max > 1000000 ? 1000000 : (int64_t)max);
  ra_i64(&a, (int64_t)nrules);
  for (size_t i = 0; i < nrules; i++) {
    ra_str(&a, rules[i].project);
    ra_str(&a, rules[i].spider);
    ra_i64(&a, rules[i].keep);
    ra_i64(&a, rules[i].ended_before_ms);
  }
  return redis_jobs_call(RQ(s), RS_JOBS_PRUNE, &a, deleted, "prune jobs");
}

/* ---- nodes and cancel requests ---- */

int redis_node_beat(store_t *s, const node_info_t *n, int64_t now_ms, int *was_dead) {
  redis_args_t a = {0};
  int64_t dead = 0;
  ra_str(&a, n->name);
  ra_str(&a, n->url);
  ra_i64(&a, n->slots);
  ra_i64(&a, n->running);
  ra_i64(&a, n->started_ms);
  ra_i64(&a, now_ms);
  int rc = redis_int_call(RQ(s), RS_NODE_BEAT, &a, &dead, "node beat");
  if (!rc) *was_dead = dead != 0;
  return rc;
}

#define NF(name, type) {#name, type, offsetof(node_info_t, name)}
static const struct redis_field node_fields[] = {
    NF(name, RF_STR),       NF(url, RF_STR),          NF(slots, RF_INT), NF(running, RF_INT),
    NF(started_ms, RF_I64), NF(heartbeat_ms, RF_I64), NF(dead, RF_INT),
};
#undef NF

int redis_nodes_list(store_t *s, node_list_t *out) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  int rc = redis_eval(RQ(s), RS_NODES_LIST, &a, &r, "list nodes");
  for (size_t i = 0; !rc && i < r->elements; i++) {
    node_info_t n = {0};
    rc = redis_decode(r->element[i], node_fields, sizeof(node_fields) / sizeof(node_fields[0]),
                      &n);
    if (!rc && n.url && !*n.url) {
      free(n.url);
      n.url = NULL;
    }
    if (!rc) rc = node_list_push(out, &n);
    node_info_release(&n);
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_nodes_reap(store_t *s, const char *self, int64_t now_ms, int64_t timeout_ms,
                     job_list_t *lost) {
  struct redis_store *q = RQ(s);
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, self);
  ra_i64(&a, now_ms);
  ra_i64(&a, timeout_ms);
  int rc = redis_eval(q, RS_NODES_REAP, &a, &r, "reap nodes");
  if (!rc && (r->type != REDIS_REPLY_ARRAY || r->elements != 2)) rc = SPD_ESTORE;
  if (!rc) {
    size_t before = lost->n;
    rc = redis_rows_jobs(r->element[1], lost);
    for (size_t i = before; !rc && i < lost->n; i++) {
      lost->v[i].state = JOB_RUNNING;
      lost->v[i].end_ms = 0;
    }
    if (!rc && rr_i64(r->element[0]) > 0) redis_note(q, STORE_NOTE_NODES);
    if (!rc && r->element[1]->elements) redis_note(q, STORE_NOTE_JOBS);
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_job_cancel_request(store_t *s, int64_t id, int64_t now_ms) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  ra_i64(&a, now_ms);
  int rc = redis_eval(RQ(s), RS_JOB_CANCEL_REQUEST, &a, NULL, "request cancel");
  if (!rc) redis_note(RQ(s), STORE_NOTE_CANCEL);
  return rc;
}

int redis_jobs_cancel_requested(store_t *s, const char *node, job_list_t *out) {
  redis_args_t a = {0};
  ra_str(&a, node);
  return redis_jobs_call(RQ(s), RS_JOBS_CANCEL_REQUESTED, &a, out, "list cancel requests");
}

/* ---- eggs ---- */

int redis_egg_put(store_t *s, const char *project, const char *version, const void *data,
                  size_t len, int64_t now_ms) {
  redis_args_t a = {0};
  ra_str(&a, project);
  ra_str(&a, version);
  ra_bin(&a, data, len);
  ra_i64(&a, now_ms);
  int rc = redis_eval(RQ(s), RS_EGG_PUT, &a, NULL, "store egg");
  if (!rc) redis_note(RQ(s), STORE_NOTE_EGGS);
  return rc;
}

int redis_egg_get(store_t *s, const char *project, const char *version, void **data,
                  size_t *len) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, project);
  ra_str(&a, version);
  int rc = redis_eval(RQ(s), RS_EGG_GET, &a, &r, "read egg");
  if (!rc) {
    if (r->type != REDIS_REPLY_STRING) {
      rc = SPD_ESTORE;
    } else {
      *data = malloc(r->len ? r->len : 1);
      if (!*data) {
        rc = -ENOMEM;
      } else {
        memcpy(*data, r->str, r->len);
        *len = r->len;
      }
    }
  }
  if (r) freeReplyObject(r);
  return rc;
}

#define EF(name, type) {#name, type, offsetof(egg_ref_t, name)}
static const struct redis_field egg_fields[] = {
    EF(project, RF_STR), EF(version, RF_STR), EF(size, RF_I64), EF(created_ms, RF_I64),
};
#undef EF

int redis_eggs_list(store_t *s, egg_list_t *out) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  int rc = redis_eval(RQ(s), RS_EGGS_LIST, &a, &r, "list eggs");
  for (size_t i = 0; !rc && i < r->elements; i++) {
    egg_ref_t e = {0};
    rc = redis_decode(r->element[i], egg_fields, sizeof(egg_fields) / sizeof(egg_fields[0]),
                      &e);
    if (!rc) rc = egg_list_push(out, &e);
    free(e.project);
    free(e.version);
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_egg_delete(store_t *s, const char *project, const char *version, int *count) {
  redis_args_t a = {0};
  int64_t n = 0;
  ra_str(&a, project);
  ra_str(&a, version);
  ra_i64(&a, version ? 0 : 1);
  int rc = redis_int_call(RQ(s), RS_EGG_DELETE, &a, &n, "delete eggs");
  if (!rc) {
    *count = (int)n;
    if (n) redis_note(RQ(s), STORE_NOTE_EGGS);
  }
  return rc;
}
