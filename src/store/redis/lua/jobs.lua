-- Jobs, nodes, eggs and history retention (store/redis/jobs.c).
-- Each "-- @script NAME" line starts the script of op RS_NAME (store/redis/internal.h);
-- what comes before the first is this file's helpers, put before each of its
-- scripts after prelude.lua. ARGV[1] is always the key prefix P.
local function PAD(id) return string.format('%015.0f', id) end
local function INV(id) return string.format('%015.0f', 999999999999999 - id) end
local function UNINV(m) return 999999999999999 - tonumber(m) end
local function JK(id) return P .. 'job:' .. I(id) end
local function JIDX(id, j, d)
  local st, sid = N(j.state), PAD(id)
  if st == 0 then
    if d > 0 then
      redis.call('ZADD', P .. 'jobs:pending', j.priority or '0', INV(id))
      if N(j.not_before_ms) > 0 then
        redis.call('HSET', P .. 'jobs:nb', I(id), j.not_before_ms)
      end
      if j.after then redis.call('SADD', P .. 'jobs:waiting', I(id)) end
    else
      redis.call('ZREM', P .. 'jobs:pending', INV(id))
      redis.call('HDEL', P .. 'jobs:nb', I(id))
      if j.after then redis.call('SREM', P .. 'jobs:waiting', I(id)) end
    end
  elseif st == 1 then
    if d > 0 then redis.call('ZADD', P .. 'jobs:running', j.start_ms or '0', sid)
    else redis.call('ZREM', P .. 'jobs:running', sid) end
  else
    local pk = j.project .. '\0' .. j.spider
    if d > 0 then
      redis.call('ZADD', P .. 'jobs:ended', j.end_ms or '0', sid)
      redis.call('ZADD', P .. 'jobs:ended:' .. pk, j.end_ms or '0', sid)
      redis.call('ZADD', P .. 'jobs:pairs', 0, pk)
    else
      redis.call('ZREM', P .. 'jobs:ended', sid)
      redis.call('ZREM', P .. 'jobs:ended:' .. pk, sid)
    end
  end
  if st < 2 then
    if j.unique_key then
      local uk = j.project .. '\0' .. j.unique_key
      if d > 0 then redis.call('HSET', P .. 'jobs:unique', uk, I(id))
      elseif redis.call('HGET', P .. 'jobs:unique', uk) == I(id) then
        redis.call('HDEL', P .. 'jobs:unique', uk)
      end
    end
    if N(j.parent_id) ~= 0 then
      if redis.call('HINCRBY', P .. 'jobs:live', j.parent_id, d) <= 0 then
        redis.call('HDEL', P .. 'jobs:live', j.parent_id)
      end
    end
  end
  if st < 2 or N(j.start_ms) ~= 0 then
    redis.call('HINCRBY', P .. 'jobs:count', I(st), d)
    redis.call('HINCRBY', P .. 'jobs:count', I(st) .. ':' .. j.project, d)
  end
end
-- Deletes a job and every trace of it in the indexes.
local function JDEL(id, j)
  JIDX(id, j, -1)
  redis.call('DEL', JK(id))
  redis.call('SREM', P .. 'jobs:jobid:' .. j.jobid, I(id))
  redis.call('ZREM', P .. 'jobs:all', I(id))
end
-- Sets fields of job j (table: field -> value, false = delete).
local function JSET(id, j, ch)
  local set, del = {}, {}
  for k, v in pairs(ch) do
    if v then j[k] = v; set[#set + 1] = k; set[#set + 1] = v
    else j[k] = nil; del[#del + 1] = k end
  end
  if #set > 0 then redis.call('HSET', JK(id), unpack(set)) end
  if #del > 0 then redis.call('HDEL', JK(id), unpack(del)) end
end
-- A state change: out of the indexes, the fields, back in.
local function JMOVE(id, j, ch)
  JIDX(id, j, -1)
  JSET(id, j, ch)
  JIDX(id, j, 1)
end
-- A chunk of jobs:ended (scored by end time) from lo (a score, '(' for
-- exclusive) below hi ('(' exclusive or '+inf'), at most about n jobs, so
-- that a long window is read in several scripts and Redis never stalls on
-- one. Returns {id, score, ...} and where the next chunk starts ('' = done).
-- A chunk ends at a whole millisecond: the jobs of its last one are left
-- for the next chunk, unless they fill it (then that millisecond is read
-- whole).
local function ENDED_CHUNK(lo, hi, n)
  local key = P .. 'jobs:ended'
  local ids = redis.call('ZRANGEBYSCORE', key, lo, hi, 'WITHSCORES', 'LIMIT', 0, n)
  if #ids < 2 * n then return ids, '' end
  local last = ids[#ids]
  if ids[2] == last then
    return redis.call('ZRANGEBYSCORE', key, last, last, 'WITHSCORES'), '(' .. last
  end
  while ids[#ids] == last do
    table.remove(ids)
    table.remove(ids)
  end
  return ids, last
end
-- The order of store_jobs_list within and across state groups.
local function JLESS(a, b)
  local sa, sb = math.min(N(a.state), 2), math.min(N(b.state), 2)
  if sa ~= sb then return sa < sb end
  local ia, ib = N(a.id), N(b.id)
  if sa == 0 then
    local pa, pb = N(a.priority), N(b.priority)
    if pa ~= pb then return pa > pb end
    return ia < ib
  elseif sa == 1 then
    local xa, xb = N(a.start_ms), N(b.start_ms)
    if xa ~= xb then return xa < xb end
    return ia < ib
  end
  local xa, xb = N(a.end_ms), N(b.end_ms)
  if xa ~= xb then return xa > xb end
  return ia > ib
end
-- @script job_insert
-- ARGV: P, field, value, ...
local j = {}
for i = 2, #ARGV, 2 do j[ARGV[i]] = ARGV[i + 1] end
if N(j.state) < 2 and j.unique_key then
  local h = redis.call('HGET', P .. 'jobs:unique', j.project .. '\0' .. j.unique_key)
  if h then return E('ECONFLICT ' .. h) end
end
local id = redis.call('INCR', P .. 'jobs:seq')
j.id = I(id)
redis.call('HSET', JK(id), unpack(FLAT(j)))
JIDX(id, j, 1)
redis.call('SADD', P .. 'jobs:jobid:' .. j.jobid, I(id))
redis.call('ZADD', P .. 'jobs:all', id, I(id))
return id
-- @script job_claim
-- ARGV: P, node, max, now, then pairs project, spider ('' = the whole
-- project) whose pending jobs stay pending ([concurrency] limits at their
-- maximum)
local node, max, now = ARGV[2], N(ARGV[3]), N(ARGV[4])
local hasnb = redis.call('HLEN', P .. 'jobs:nb') > 0
local held = {}
for i = 5, #ARGV, 2 do held[ARGV[i] .. '\0' .. ARGV[i + 1]] = true end
local limited = #ARGV >= 5
local function skipped(id)
  if not limited then return false end
  local r = redis.call('HMGET', JK(id), 'project', 'spider')
  return held[r[1] .. '\0'] or held[r[1] .. '\0' .. r[2]]
end
local out, skip = {}, 0
while #out < max do
  local ms = redis.call('ZREVRANGE', P .. 'jobs:pending', skip, skip + 199)
  if #ms == 0 then break end
  for _, m in ipairs(ms) do
    local id = UNINV(m)
    local nb = hasnb and redis.call('HGET', P .. 'jobs:nb', I(id))
    if (nb and N(nb) > now) or skipped(id) then
      skip = skip + 1
    else
      local j = H(JK(id))
      JMOVE(id, j, {state = '1', node = node, start_ms = ARGV[4]})
      out[#out + 1] = FLAT(j)
      if #out >= max then break end
    end
  end
end
return out
-- @script job_started
-- ARGV: P, id, pid, pid_start
if redis.call('EXISTS', JK(ARGV[2])) == 0 then return E('ENOENT') end
redis.call('HSET', JK(ARGV[2]), 'pid', ARGV[3], 'pid_start', ARGV[4])
return 0
-- @script job_requeue
-- ARGV: P, id
local id = N(ARGV[2])
local j = H(JK(id))
if not j or N(j.state) ~= 1 then return E('ENOENT') end
JMOVE(id, j, {state = '0', node = false, start_ms = false, pid = false,
              pid_start = false, cancel_ms = false})
return 0
-- @script job_finish
-- ARGV: P, id, state, end_ms, exit_code, term_signal, stats ('' = none)
local id = N(ARGV[2])
local j = H(JK(id))
if not j then return E('ENOENT') end
JMOVE(id, j, {state = ARGV[3], end_ms = ARGV[4], exit_code = ARGV[5],
              term_signal = ARGV[6], stats = ARGV[7] ~= '' and ARGV[7]})
return N(j.state)
-- @script job_cancel_pending
-- ARGV: P, project, jobid, now
local n = 0
for _, s in ipairs(redis.call('SMEMBERS', P .. 'jobs:jobid:' .. ARGV[3])) do
  local id = N(s)
  local j = H(JK(id))
  if j and j.project == ARGV[2] and N(j.state) == 0 then
    JMOVE(id, j, {state = '4', end_ms = ARGV[4]})
    n = n + 1
  end
end
return n
-- @script job_get
-- ARGV: P, id
local r = redis.call('HGETALL', JK(ARGV[2]))
if #r == 0 then return E('ENOENT') end
return r
-- @script job_status
-- ARGV: P, jobid, project ('' = any). Rank: a started final state
-- (the latest ended), running, pending.
local best, bk
for _, s in ipairs(redis.call('SMEMBERS', P .. 'jobs:jobid:' .. ARGV[2])) do
  local j = H(JK(s))
  if j and (ARGV[3] == '' or j.project == ARGV[3]) then
    local st = N(j.state)
    if st < 2 or N(j.start_ms) ~= 0 then
      local k = {st >= 2 and 0 or (st == 1 and 1 or 2), -N(j.end_ms), -N(j.id)}
      if not bk or k[1] < bk[1] or (k[1] == bk[1] and (k[2] < bk[2] or
         (k[2] == bk[2] and k[3] < bk[3]))) then best, bk = st, k end
    end
  end
end
if not best then return E('ENOENT') end
return best
-- @script jobs_list
-- ARGV: P, states, project, jobid, node, started_only, limit, native,
-- spider, schedule_id, parent_id, created_from, created_to, before_id,
-- text ('' = none), budget (native walks: ids per script, 0 = no limit),
-- nprojects, then that many project names (a set: 0 = no such limit),
-- then nmeta, then that many pairs key, value (meta filters: the job's meta
-- decoded here, after the hash is read), then test (1 = test runs only,
-- -1 = none, 0 = both), then health ('' = all, 'none' = not rated)
local states = N(ARGV[2])
if states == 0 then states = 127 end
local project, jobid, node = ARGV[3], ARGV[4], ARGV[5]
local started, limit, native = ARGV[6] == '1', N(ARGV[7]), ARGV[8] == '1'
local spider, sched, parent = ARGV[9], N(ARGV[10]), N(ARGV[11])
local cfrom, cto, before = N(ARGV[12]), N(ARGV[13]), N(ARGV[14])
local text = string.lower(ARGV[15] or '')
local nprojects, inprojects = N(ARGV[17]), {}
for i = 1, nprojects do inprojects[ARGV[17 + i]] = true end
local mbase = 18 + nprojects
local nmeta = N(ARGV[mbase] or '0')
local test = N(ARGV[mbase + 2 * nmeta + 1])
local health = ARGV[mbase + 2 * nmeta + 2] or ''
local function meta_ok(j)
  if not j.meta then return false end
  local okd, m = pcall(cjson.decode, j.meta)
  if not okd or type(m) ~= 'table' then return false end
  for i = 1, nmeta do
    local v = m[ARGV[mbase + 2 * i - 1]]
    if type(v) ~= 'string' or v ~= ARGV[mbase + 2 * i] then return false end
  end
  return true
end
local function bit(st) return math.floor(states / 2 ^ st) % 2 == 1 end
-- string.lower folds ASCII only (the C locale), as the SQL backends do.
local function has(v)
  return type(v) == 'string' and string.find(string.lower(v), text, 1, true) ~= nil
end
local function matches(j)
  if has(j.jobid) or has(j.spider) or has(j.project) then return true end
  if not j.args then return false end
  local okd, a = pcall(cjson.decode, j.args)
  if not okd or type(a) ~= 'table' then return false end
  for _, v in pairs(a) do if has(v) then return true end end
  return false
end
local function ok(j)
  if not bit(N(j.state)) then return false end
  if project ~= '' and j.project ~= project then return false end
  if nprojects > 0 and not inprojects[j.project] then return false end
  if jobid ~= '' and j.jobid ~= jobid then return false end
  if node ~= '' and j.node ~= node then return false end
  if started and N(j.start_ms) == 0 then return false end
  if spider ~= '' and j.spider ~= spider then return false end
  if sched ~= 0 and N(j.schedule_id) ~= sched then return false end
  if parent ~= 0 and N(j.parent_id) ~= parent then return false end
  if cfrom ~= 0 and N(j.created_ms) < cfrom then return false end
  if cto ~= 0 and N(j.created_ms) >= cto then return false end
  if before ~= 0 and N(j.id) >= before then return false end
  if text ~= '' and not matches(j) then return false end
  if nmeta > 0 and not meta_ok(j) then return false end
  if test ~= 0 and (N(j.test) == 1) ~= (test > 0) then return false end
  if health == 'none' and j.health then return false end
  if health ~= '' and health ~= 'none' and j.health ~= health then return false end
  return true
end
local out = {}
local function full() return limit > 0 and #out >= limit end
local function add(id)
  -- A state filter is checked on one field first: a walk down the whole
  -- history for a rare state reads one field per job, not every field.
  if states ~= 127 and not bit(N(redis.call('HGET', JK(id), 'state'))) then return false end
  local j = H(JK(id))
  if j and ok(j) then out[#out + 1] = FLAT(j) end
  return full()
end
if native and states < 4 then
  -- Only pending and running: their own sets are small next to the
  -- history, so gather their ids and walk them newest first.
  local ids = {}
  if bit(0) then
    for _, m in ipairs(redis.call('ZRANGE', P .. 'jobs:pending', 0, -1)) do
      ids[#ids + 1] = UNINV(m)
    end
  end
  if bit(1) then
    for _, m in ipairs(redis.call('ZRANGE', P .. 'jobs:running', 0, -1)) do
      ids[#ids + 1] = N(m)
    end
  end
  table.sort(ids, function(x, y) return x > y end)
  for _, id in ipairs(ids) do
    if (before == 0 or id < before) and add(id) then return out end
  end
  return out
end
if native then
  -- At most `budget` ids per script (0 = no limit): a walk down a long
  -- history (a rare state, a text search) ends with the id to go on
  -- below, an integer after the jobs, and the caller calls again.
  local budget, seen = N(ARGV[16]), 0
  local cur = before > 0 and '(' .. I(before) or '+inf'
  while true do
    local ids = redis.call('ZREVRANGEBYSCORE', P .. 'jobs:all', cur, '-inf',
                           'LIMIT', 0, 500)
    if #ids == 0 then break end
    for _, s in ipairs(ids) do
      if add(N(s)) then return out end
      seen = seen + 1
      if budget > 0 and seen >= budget then
        out[#out + 1] = N(s)
        return out
      end
    end
    cur = '(' .. ids[#ids]
  end
  return out
end
if jobid ~= '' then
  local js = {}
  for _, s in ipairs(redis.call('SMEMBERS', P .. 'jobs:jobid:' .. jobid)) do
    local j = H(JK(s))
    if j and ok(j) then js[#js + 1] = j end
  end
  table.sort(js, JLESS)
  for i = 1, #js do
    out[#out + 1] = FLAT(js[i])
    if full() then break end
  end
  return out
end
local function walk(key, rev, conv)
  local from = 0
  while true do
    local ms = redis.call(rev and 'ZREVRANGE' or 'ZRANGE', key, from, from + 499)
    if #ms == 0 then return false end
    for _, m in ipairs(ms) do if add(conv(m)) then return true end end
    from = from + #ms
  end
end
if bit(0) and walk(P .. 'jobs:pending', true, UNINV) then return out end
if bit(1) and walk(P .. 'jobs:running', false, N) then return out end
if states >= 4 then walk(P .. 'jobs:ended', true, N) end
return out
-- @script jobs_page
-- ARGV: P, group (0 pending, 1 running, 2 ended), project ('' = all),
-- limit, after id (0 = from the start), after score. Reply: {jobs, the id
-- of the last job read (0: the group ends there), its score}. The walk goes
-- down the group's sorted set in store_jobs_list's order and reads at most
-- a budget of jobs per call, so a project with few jobs among many never
-- holds Redis for long: the caller calls again from the last job read.
local group, project, limit = N(ARGV[2]), ARGV[3], N(ARGV[4])
local aid, ascore = N(ARGV[5]), tonumber(ARGV[6]) or 0
local key = P .. (group == 0 and 'jobs:pending' or (group == 1 and 'jobs:running' or 'jobs:ended'))
local rev = group ~= 1
local function member(id) if group == 0 then return INV(id) end return PAD(id) end
local function idof(m) if group == 0 then return UNINV(m) end return N(m) end
local function range(a, b)
  return redis.call(rev and 'ZREVRANGE' or 'ZRANGE', key, a, b, 'WITHSCORES')
end
local start = 0
if aid > 0 then
  local am = member(aid)
  local r = redis.call(rev and 'ZREVRANK' or 'ZRANK', key, am)
  if r and tonumber(redis.call('ZSCORE', key, am)) == ascore then
    start = r + 1
  else
    -- The cursor's job left the group: a binary search by rank for the
    -- first member past it (members of one score are ids, fixed width).
    local function past(sc, m)
      if sc ~= ascore then if rev then return sc < ascore end return sc > ascore end
      if rev then return m < am end
      return m > am
    end
    local lo, hi = 0, redis.call('ZCARD', key)
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      local e = range(mid, mid)
      if past(tonumber(e[2]), e[1]) then hi = mid else lo = mid + 1 end
    end
    start = lo
  end
end
local out, seen, budget = {}, 0, math.max(2000, limit * 4)
while true do
  local ms = range(start, start + 499)
  if #ms == 0 then return {out, 0, ''} end
  for i = 1, #ms, 2 do
    local id = idof(ms[i])
    local j = H(JK(id))
    if j and (project == '' or j.project == project) and
       (group ~= 2 or N(j.start_ms) ~= 0) then
      out[#out + 1] = FLAT(j)
    end
    seen = seen + 1
    if #out >= limit or seen >= budget then return {out, id, ms[i + 1]} end
  end
  start = start + #ms / 2
end
-- @script job_counts
-- ARGV: P, project ('' = all), ended_since (0 = final states started only,
-- all time, from the counters), chunk start ('' = ended_since), chunk size.
-- Reply: {c0..c5, next}. With ended_since the final states count one chunk
-- of jobs:ended from the chunk start; the caller sums the chunks until next
-- is ''.
local out = {}
local since = N(ARGV[3])
for st = 0, 6 do
  local f = ARGV[2] == '' and I(st) or I(st) .. ':' .. ARGV[2]
  out[#out + 1] = N(redis.call('HGET', P .. 'jobs:count', f))
end
local nxt = ''
if since > 0 then
  for st = 2, 5 do out[st + 1] = 0 end
  local lo = ARGV[4] ~= '' and ARGV[4] or I(since)
  local ids
  ids, nxt = ENDED_CHUNK(lo, '+inf', N(ARGV[5]))
  for i = 1, #ids, 2 do
    local r = redis.call('HMGET', JK(ids[i]), 'state', 'project')
    local st = N(r[1])
    if st >= 2 and st <= 6 and (ARGV[2] == '' or r[2] == ARGV[2]) then
      out[st + 1] = out[st + 1] + 1
    end
  end
end
out[#out + 1] = nxt
return out
-- @script job_throughput
-- ARGV: P, project ('' = all), from, to, step, chunk start ('' = from),
-- chunk size. Reply: {next, bucket, finished, failed, items, ...} for the
-- buckets one chunk of jobs:ended touches; the caller adds the chunks up
-- until next is ''.
local project, from, to, step = ARGV[2], N(ARGV[3]), N(ARGV[4]), N(ARGV[5])
local b = {}
local lo = ARGV[6] ~= '' and ARGV[6] or I(from)
local ids, nxt = ENDED_CHUNK(lo, '(' .. I(to), N(ARGV[7]))
for i = 1, #ids, 2 do
  local r = redis.call('HMGET', JK(ids[i]), 'state', 'project', 'stats')
  local st = N(r[1])
  if st >= 2 and (project == '' or r[2] == project) then
    local k = math.floor((N(ids[i + 1]) - from) / step)
    local c = b[k]
    if not c then c = {0, 0, 0}; b[k] = c end
    if st == 2 then c[1] = c[1] + 1 elseif st == 3 then c[2] = c[2] + 1 end
    -- Decoded only when a count is there at all: the runner's items, else
    -- a top-level item_scraped_count.
    if r[3] and string.find(r[3], 'item', 1, true) then
      local okd, t = pcall(cjson.decode, r[3])
      if okd and type(t) == 'table' then
        if type(t.items) == 'number' then c[3] = c[3] + math.floor(t.items)
        elseif type(t.item_scraped_count) == 'number' then
          c[3] = c[3] + math.floor(t.item_scraped_count)
        end
      end
    end
  end
end
local out = {nxt}
for k, c in pairs(b) do
  out[#out + 1] = k; out[#out + 1] = c[1]; out[#out + 1] = c[2]; out[#out + 1] = c[3]
end
return out
-- @script trim_finished
-- ARGV: P, keep. The cut-off is the keep-th newest started final job,
-- or the oldest one when there are fewer; older started jobs go, and
-- unstarted ones that ended before it. A paused job (6) is no ended job.
local keep = N(ARGV[2])
local ms = redis.call('ZREVRANGE', P .. 'jobs:ended', 0, -1, 'WITHSCORES')
local seen, cut, cutend = 0, nil, 0
for i = 1, #ms, 2 do
  local r = redis.call('HMGET', JK(ms[i]), 'start_ms', 'state')
  if N(r[1]) ~= 0 and N(r[2]) ~= 6 then
    seen = seen + 1
    cut, cutend = i, N(ms[i + 1])
    if seen >= keep then break end
  end
end
if not cut then return 0 end
local n = 0
for i = cut + 2, #ms, 2 do
  local id = N(ms[i])
  local j = H(JK(id))
  if j and N(j.state) ~= 6 and (N(j.start_ms) ~= 0 or N(ms[i + 1]) < cutend) then
    JDEL(id, j)
    n = n + 1
  end
end
return n
-- @script job_heartbeat
-- ARGV: P, id, now
if N(redis.call('HGET', JK(ARGV[2]), 'state')) ~= 1 or
   redis.call('EXISTS', JK(ARGV[2])) == 0 then return E('ENOENT') end
redis.call('HSET', JK(ARGV[2]), 'heartbeat_ms', ARGV[3])
return 0
-- @script job_next_due
-- ARGV: P, now
local now, best = N(ARGV[2]), 0
local r = redis.call('HGETALL', P .. 'jobs:nb')
for i = 2, #r, 2 do
  local v = N(r[i])
  if v > now and (best == 0 or v < best) then best = v end
end
return best
-- @script jobs_prune
-- ARGV: P, keep_default, before_default, max, nrules, then per rule
-- project, spider ('' = the project's default), keep, before.
local kdef, bdef, max, nr = N(ARGV[2]), N(ARGV[3]), N(ARGV[4]), N(ARGV[5])
local function limits(project, spider)
  local best
  for r = 0, nr - 1 do
    local b = 6 + 4 * r
    if ARGV[b] == project then
      if ARGV[b + 1] ~= '' and ARGV[b + 1] == spider then best = b; break end
      if ARGV[b + 1] == '' and not best then best = b end
    end
  end
  if best then return N(ARGV[best + 2]), N(ARGV[best + 3]) end
  return kdef, bdef
end
local out = {}
for _, pk in ipairs(redis.call('ZRANGEBYLEX', P .. 'jobs:pairs', '-', '+')) do
  if #out >= max then break end
  local z = P .. 'jobs:ended:' .. pk
  if redis.call('ZCARD', z) == 0 then
    redis.call('ZREM', P .. 'jobs:pairs', pk)
  else
    local cut = string.find(pk, '\0', 1, true)
    local keep, before = limits(string.sub(pk, 1, cut - 1), string.sub(pk, cut + 1))
    if keep > 0 or before > 0 then
      local ms = redis.call('ZREVRANGE', z, 0, -1, 'WITHSCORES')
      local started = 0
      for i = 1, #ms, 2 do
        if #out >= max then break end
        local id = N(ms[i])
        local j = H(JK(id))
        if j and N(j.state) ~= 6 then
          local over = keep > 0 and started >= keep
          if N(j.start_ms) ~= 0 then started = started + 1 end
          if (over or (before > 0 and N(j.end_ms) < before)) and
             N(redis.call('HGET', P .. 'jobs:live', I(id))) <= 0 then
            JDEL(id, j)
            out[#out + 1] = {'id', j.id, 'jobid', j.jobid, 'project', j.project,
                             'spider', j.spider, 'state', j.state or '0',
                             'start_ms', j.start_ms or '0', 'end_ms', j.end_ms or '0'}
          end
        end
      end
    end
  end
end
return out
-- @script node_beat
-- ARGV: P, name, url, slots, running, started_ms, now, version ('' = none),
-- draining (0/1), mem_free, mem_reserved (bytes)
local k = P .. 'node:' .. ARGV[2]
local dead = redis.call('HGET', k, 'dead') == '1'
redis.call('HSET', k, 'name', ARGV[2], 'url', ARGV[3], 'slots', ARGV[4],
           'running', ARGV[5], 'started_ms', ARGV[6], 'heartbeat_ms', ARGV[7],
           'dead', '0', 'draining', ARGV[9], 'mem_free', ARGV[10] or '0',
           'mem_reserved', ARGV[11] or '0')
if ARGV[8] == '' then redis.call('HDEL', k, 'version')
else redis.call('HSET', k, 'version', ARGV[8]) end
redis.call('ZADD', P .. 'nodes', 0, ARGV[2])
return dead and 1 or 0
-- @script nodes_list
local out = {}
for _, n in ipairs(redis.call('ZRANGE', P .. 'nodes', 0, -1)) do
  local r = redis.call('HGETALL', P .. 'node:' .. n)
  if #r > 0 then out[#out + 1] = r end
end
return out
-- @script nodes_reap
-- ARGV: P, self, now, timeout. Returns {nodes declared dead, {jobs}}.
local now, cut = N(ARGV[3]), N(ARGV[3]) - N(ARGV[4])
local dead, died = {}, 0
for _, n in ipairs(redis.call('ZRANGE', P .. 'nodes', 0, -1)) do
  local k = P .. 'node:' .. n
  local nd = H(k)
  if nd then
    if nd.dead ~= '1' and n ~= ARGV[2] and N(nd.heartbeat_ms) < cut then
      redis.call('HSET', k, 'dead', '1')
      nd.dead = '1'
      died = died + 1
    end
    if nd.dead == '1' then dead[n] = true end
  end
end
local lost = {}
if next(dead) then
  for _, m in ipairs(redis.call('ZRANGE', P .. 'jobs:running', 0, -1)) do
    local id = N(m)
    local j = H(JK(id))
    if j and j.node and dead[j.node] then
      lost[#lost + 1] = FLAT(j)
      JMOVE(id, j, {state = '5', end_ms = ARGV[3]})
    end
  end
end
return {died, lost}
-- @script job_cancel_request
-- ARGV: P, id, now
if N(redis.call('HGET', JK(ARGV[2]), 'state')) ~= 1 or
   redis.call('EXISTS', JK(ARGV[2])) == 0 then return E('ENOENT') end
redis.call('HSET', JK(ARGV[2]), 'cancel_ms', ARGV[3])
return 0
-- @script jobs_cancel_requested
-- ARGV: P, node
local js = {}
for _, m in ipairs(redis.call('ZRANGE', P .. 'jobs:running', 0, -1)) do
  local j = H(JK(N(m)))
  if j and j.node == ARGV[2] and N(j.cancel_ms) ~= 0 then js[#js + 1] = j end
end
table.sort(js, function(a, b) return N(a.id) < N(b.id) end)
local out = {}
for i = 1, #js do out[i] = FLAT(js[i]) end
return out
-- @script egg_put
-- ARGV: P, project, version, data, now, size (data '' with size > 0: the
-- bytes are in the object store)
local m = ARGV[2] .. '\0' .. ARGV[3]
redis.call('HSET', P .. 'egg:' .. m, 'project', ARGV[2], 'version', ARGV[3],
           'data', ARGV[4], 'size', ARGV[6] or #ARGV[4], 'created_ms', ARGV[5])
redis.call('ZADD', P .. 'eggs', 0, m)
return 0
-- @script egg_get
-- ARGV: P, project, version
local v = redis.call('HGET', P .. 'egg:' .. ARGV[2] .. '\0' .. ARGV[3], 'data')
if not v then return E('ENOENT') end
return v
-- @script eggs_list
local out = {}
for _, m in ipairs(redis.call('ZRANGEBYLEX', P .. 'eggs', '-', '+')) do
  local r = redis.call('HMGET', P .. 'egg:' .. m, 'project', 'version',
                       'size', 'created_ms')
  if r[1] then
    out[#out + 1] = {'project', r[1], 'version', r[2], 'size', r[3],
                     'created_ms', r[4]}
  end
end
return out
-- @script egg_delete
-- ARGV: P, project, version, all ('1': every version)
local ms
if ARGV[4] == '1' then
  ms = redis.call('ZRANGEBYLEX', P .. 'eggs', '[' .. ARGV[2] .. '\0',
                  '(' .. ARGV[2] .. '\1')
else
  ms = {ARGV[2] .. '\0' .. ARGV[3]}
end
local n = 0
for _, m in ipairs(ms) do
  n = n + redis.call('DEL', P .. 'egg:' .. m)
  redis.call('ZREM', P .. 'eggs', m)
end
return n
-- @script job_set_meta
-- ARGV: P, id, meta ('' = none)
if redis.call('EXISTS', JK(ARGV[2])) == 0 then return E('ENOENT') end
if ARGV[3] == '' then redis.call('HDEL', JK(ARGV[2]), 'meta')
else redis.call('HSET', JK(ARGV[2]), 'meta', ARGV[3]) end
return 0
-- @script job_set_health
-- ARGV: P, id, health ('' = none), reasons (JSON, '' = none)
if redis.call('EXISTS', JK(ARGV[2])) == 0 then return E('ENOENT') end
if ARGV[3] == '' then redis.call('HDEL', JK(ARGV[2]), 'health')
else redis.call('HSET', JK(ARGV[2]), 'health', ARGV[3]) end
if ARGV[4] == '' then redis.call('HDEL', JK(ARGV[2]), 'health_reasons')
else redis.call('HSET', JK(ARGV[2]), 'health_reasons', ARGV[4]) end
return 0
-- @script job_set_history
-- ARGV: P, id, state, corrected (0/1), original_state, note ('' = none)
local id = N(ARGV[2])
local j = H(JK(id))
if not j or N(j.state) < 2 or N(j.state) == 6 then return E('ENOENT') end
JMOVE(id, j, {state = ARGV[3], corrected = ARGV[4] == '1' and '1',
              original_state = ARGV[4] == '1' and ARGV[5], note = ARGV[6] ~= '' and ARGV[6]})
return 0
-- @script job_set_segments
-- ARGV: P, id, segments ('' = none)
if redis.call('EXISTS', JK(ARGV[2])) == 0 then return E('ENOENT') end
if ARGV[3] == '' then redis.call('HDEL', JK(ARGV[2]), 'segments')
else redis.call('HSET', JK(ARGV[2]), 'segments', ARGV[3]) end
return 0
-- @script job_resume
-- ARGV: P, id. A paused job (6) is pending again.
local id = N(ARGV[2])
local j = H(JK(id))
if not j or N(j.state) ~= 6 then return E('ENOENT') end
JMOVE(id, j, {state = '0', node = false, pid = false, pid_start = false, start_ms = false,
              end_ms = false, exit_code = '-1', term_signal = false, not_before_ms = false,
              heartbeat_ms = false, cancel_ms = false})
return 0
-- @script job_state_put
-- ARGV: P, id, data, now
redis.call('HSET', P .. 'jobstate:' .. ARGV[2], 'data', ARGV[3], 'created_ms', ARGV[4])
return 0
-- @script job_state_get
-- ARGV: P, id
local v = redis.call('HGET', P .. 'jobstate:' .. ARGV[2], 'data')
if not v then return E('ENOENT') end
return v
-- @script job_state_delete
-- ARGV: P, id
redis.call('DEL', P .. 'jobstate:' .. ARGV[2])
return 0
-- @script jobs_waiting
-- ARGV: P, upstream id. The pending jobs whose after names it, by id.
local up, js = N(ARGV[2]), {}
for _, m in ipairs(redis.call('SMEMBERS', P .. 'jobs:waiting')) do
  local j = H(JK(N(m)))
  local okd, a = pcall(cjson.decode, j and j.after or 'null')
  if okd and type(a) == 'table' then
    for _, v in ipairs(a) do
      if v == up then js[#js + 1] = j; break end
    end
  end
end
table.sort(js, function(a, b) return N(a.id) < N(b.id) end)
local out = {}
for i = 1, #js do out[i] = FLAT(js[i]) end
return out
-- @script job_wake
-- ARGV: P, id, now. A pending job is due from now on.
local id = N(ARGV[2])
local j = H(JK(id))
if not j or N(j.state) ~= 0 then return E('ENOENT') end
JMOVE(id, j, {not_before_ms = ARGV[3]})
return 0
