-- Schedules, runs, events and leases (store/redis/sched.c).
-- Each "-- @script NAME" line starts the script of op RS_NAME (store/redis/internal.h);
-- what comes before the first is this file's helpers, put before each of its
-- scripts after prelude.lua. ARGV[1] is always the key prefix P.
local function PAD(id) return string.format('%015.0f', id) end
local function SK(id) return P .. 'sched:' .. I(id) end
local function RK(id) return P .. 'run:' .. I(id) end
local function REFILL(id, sc)
  if N(sc.paused) == 0 then
    redis.call('ZADD', P .. 'sched:refill', sc.refill_ms or '0', I(id))
  else
    redis.call('ZREM', P .. 'sched:refill', I(id))
  end
end
local function RDEL(id, r)
  local sid = PAD(id)
  redis.call('ZREM', P .. 'runs:all', sid)
  redis.call('ZREM', P .. 'runs:sched:' .. r.schedule_id, sid)
  redis.call('ZREM', P .. 'runs:upcoming', sid)
  redis.call('ZREM', P .. 'runs:ended', sid)
  if redis.call('HGET', P .. 'runs:dues:' .. r.schedule_id, r.due_ms) == I(id) then
    redis.call('HDEL', P .. 'runs:dues:' .. r.schedule_id, r.due_ms)
  end
  redis.call('DEL', RK(id))
end
-- A new run; 0 when the due time has one already.
local function RADD(sid, due, fire, st, job, done, reason)
  local dk = P .. 'runs:dues:' .. sid
  if redis.call('HEXISTS', dk, due) == 1 then return 0 end
  local id = redis.call('INCR', P .. 'runs:seq')
  local f = {'id', I(id), 'schedule_id', sid, 'due_ms', due, 'fire_ms', fire,
             'state', st, 'job_id', job, 'done_ms', done}
  if reason and reason ~= '' then f[#f + 1] = 'reason'; f[#f + 1] = reason end
  redis.call('HSET', RK(id), unpack(f))
  redis.call('HSET', dk, due, I(id))
  redis.call('ZADD', P .. 'runs:all', due, PAD(id))
  redis.call('ZADD', P .. 'runs:sched:' .. sid, due, PAD(id))
  if N(st) == 0 then redis.call('ZADD', P .. 'runs:upcoming', fire, PAD(id))
  else redis.call('ZADD', P .. 'runs:ended', done, PAD(id)) end
  return id
end
local function LASTDUE(sid, due)
  local k = SK(sid)
  if redis.call('EXISTS', k) == 1 and
     N(redis.call('HGET', k, 'last_due_ms')) < N(due) then
    redis.call('HSET', k, 'last_due_ms', due)
  end
end
-- @script schedule_put
-- ARGV: P, mode (insert/update), id, field, value, ...
local sc = {}
for i = 4, #ARGV, 2 do sc[ARGV[i]] = ARGV[i + 1] end
local names = P .. 'sched:names'
local holder = redis.call('HGET', names, sc.name)
local id
if ARGV[2] == 'insert' then
  if holder then return E('ECONFLICT') end
  id = redis.call('INCR', P .. 'sched:seq')
else
  id = N(ARGV[3])
  local old = redis.call('HGET', SK(id), 'name')
  if not old then return E('ENOENT') end
  if holder and N(holder) ~= id then return E('ECONFLICT') end
  redis.call('HDEL', names, old)
  redis.call('DEL', SK(id))
end
sc.id = I(id)
redis.call('HSET', SK(id), unpack(FLAT(sc)))
redis.call('HSET', names, sc.name, I(id))
redis.call('ZADD', P .. 'scheds', id, I(id))
REFILL(id, sc)
return id
-- @script schedule_delete
-- ARGV: P, id
local id = N(ARGV[2])
local name = redis.call('HGET', SK(id), 'name')
if not name then return E('ENOENT') end
for _, m in ipairs(redis.call('ZRANGE', P .. 'runs:sched:' .. I(id), 0, -1)) do
  local r = H(RK(N(m)))
  if r then RDEL(N(m), r) end
end
redis.call('DEL', P .. 'runs:sched:' .. I(id), P .. 'runs:dues:' .. I(id), SK(id))
redis.call('HDEL', P .. 'sched:names', name)
redis.call('HDEL', P .. 'sched:state', I(id))
redis.call('ZREM', P .. 'scheds', I(id))
redis.call('ZREM', P .. 'sched:refill', I(id))
return 0
-- @script schedule_get
-- ARGV: P, id, name ('' = by id)
local id = ARGV[2]
if ARGV[3] ~= '' then
  id = redis.call('HGET', P .. 'sched:names', ARGV[3])
  if not id then return E('ENOENT') end
end
local r = redis.call('HGETALL', SK(id))
if #r == 0 then return E('ENOENT') end
return r
-- @script schedule_state_get
-- ARGV: P, id. A schedule's state lives in its own hash: schedule_put
-- rewrites the schedule's hash whole and must not drop it.
local id = N(ARGV[2])
if redis.call('EXISTS', SK(id)) == 0 then return E('ENOENT') end
return redis.call('HGET', P .. 'sched:state', I(id))
-- @script schedule_state_set
-- ARGV: P, id, has ('1': set, '0': clear), state
local id = N(ARGV[2])
if redis.call('EXISTS', SK(id)) == 0 then return E('ENOENT') end
if ARGV[3] == '1' then
  redis.call('HSET', P .. 'sched:state', I(id), ARGV[4])
else
  redis.call('HDEL', P .. 'sched:state', I(id))
end
return 0
-- @script schedules_list
-- ARGV: P, after_id, limit (0 = all)
local ids
if N(ARGV[3]) > 0 then
  ids = redis.call('ZRANGEBYSCORE', P .. 'scheds', '(' .. ARGV[2], '+inf', 'LIMIT', 0,
                   ARGV[3])
else
  ids = redis.call('ZRANGEBYSCORE', P .. 'scheds', '(' .. ARGV[2], '+inf')
end
local out = {}
for _, s in ipairs(ids) do out[#out + 1] = redis.call('HGETALL', SK(s)) end
return out
-- @script schedules_refill
-- ARGV: P, now, limit (0 = all)
local ids
if N(ARGV[3]) > 0 then
  ids = redis.call('ZRANGEBYSCORE', P .. 'sched:refill', '-inf', ARGV[2], 'LIMIT', 0,
                   ARGV[3])
else
  ids = redis.call('ZRANGEBYSCORE', P .. 'sched:refill', '-inf', ARGV[2])
end
local out = {}
for _, s in ipairs(ids) do out[#out + 1] = redis.call('HGETALL', SK(s)) end
return out
-- @script runs_add
-- ARGV: P, schedule id, horizon, refill, due, fire, due, fire, ...
local sid = N(ARGV[2])
local sc = H(SK(sid))
if not sc then return E('ENOENT') end
redis.call('HSET', SK(sid), 'horizon_ms', ARGV[3], 'refill_ms', ARGV[4])
sc.refill_ms = ARGV[4]
REFILL(sid, sc)
for i = 5, #ARGV, 2 do RADD(I(sid), ARGV[i], ARGV[i + 1], '0', '0', '0') end
return 0
-- @script runs_clear
-- ARGV: P, schedule id, from
local sid = N(ARGV[2])
local sc = H(SK(sid))
if not sc then return E('ENOENT') end
redis.call('HSET', SK(sid), 'horizon_ms', ARGV[3], 'refill_ms', '0')
sc.refill_ms = '0'
REFILL(sid, sc)
for _, m in ipairs(redis.call('ZRANGE', P .. 'runs:sched:' .. I(sid), 0, -1)) do
  local r = H(RK(N(m)))
  if r and N(r.state) == 0 then RDEL(N(m), r) end
end
return 0
-- @script run_defer
-- ARGV: P, run id, reason
local k = RK(N(ARGV[2]))
local st = redis.call('HGET', k, 'state')
if not st or N(st) ~= 0 then return E('ENOENT') end
if ARGV[3] == '' then redis.call('HDEL', k, 'reason')
else redis.call('HSET', k, 'reason', ARGV[3]) end
return 0
-- @script runs_due
-- ARGV: P, until, max
local out = {}
for _, m in ipairs(redis.call('ZRANGEBYSCORE', P .. 'runs:upcoming', '-inf',
                              ARGV[2], 'LIMIT', 0, ARGV[3])) do
  out[#out + 1] = redis.call('HGETALL', RK(N(m)))
end
return out
-- @script runs_list
-- ARGV: P, schedule id, states, from, to, after_id, limit
local sid, states = N(ARGV[2]), N(ARGV[3])
local from, to, after, limit = N(ARGV[4]), N(ARGV[5]), N(ARGV[6]), N(ARGV[7])
local z = sid ~= 0 and P .. 'runs:sched:' .. I(sid) or P .. 'runs:all'
local lo = from ~= 0 and I(from) or '-inf'
local hi = to ~= 0 and '(' .. I(to) or '+inf'
local out = {}
for _, m in ipairs(redis.call('ZRANGEBYSCORE', z, lo, hi)) do
  local id = N(m)
  if id > after then
    local r = H(RK(id))
    if r and (states == 0 or math.floor(states / 2 ^ N(r.state)) % 2 == 1) then
      out[#out + 1] = FLAT(r)
      if limit > 0 and #out >= limit then break end
    end
  end
end
return out
-- @script run_end
-- ARGV: P, run id, state, job id, reason, now
local id = N(ARGV[2])
local r = H(RK(id))
if not r or N(r.state) ~= 0 then return E('ENOENT') end
redis.call('HSET', RK(id), 'state', ARGV[3], 'job_id', ARGV[4], 'done_ms', ARGV[6])
if ARGV[5] == '' then redis.call('HDEL', RK(id), 'reason')
else redis.call('HSET', RK(id), 'reason', ARGV[5]) end
redis.call('ZREM', P .. 'runs:upcoming', PAD(id))
redis.call('ZADD', P .. 'runs:ended', ARGV[6], PAD(id))
LASTDUE(r.schedule_id, r.due_ms)
return 0
-- @script event_add
-- ARGV: P, ts, type, schedule id, job id, data ('' = none)
local id = redis.call('INCR', P .. 'events:seq')
local f = {'id', I(id), 'ts_ms', ARGV[2], 'type', ARGV[3],
           'schedule_id', ARGV[4], 'job_id', ARGV[5]}
if ARGV[6] ~= '' then f[#f + 1] = 'data'; f[#f + 1] = ARGV[6] end
redis.call('HSET', P .. 'event:' .. I(id), unpack(f))
redis.call('ZADD', P .. 'events', id, I(id))
return id
-- @script events_list
-- ARGV: P, after_id, type prefix ('' = all), schedule id, job id, limit,
-- before_id (0 = none), newest first (1) or oldest first (0)
local pre, sid, jid, limit = ARGV[3], N(ARGV[4]), N(ARGV[5]), N(ARGV[6])
local desc = ARGV[8] == '1'
local out, lo = {}, '(' .. ARGV[2]
local hi = N(ARGV[7]) > 0 and '(' .. ARGV[7] or '+inf'
while true do
  local ids
  if desc then
    ids = redis.call('ZREVRANGEBYSCORE', P .. 'events', hi, lo, 'LIMIT', 0, 500)
  else
    ids = redis.call('ZRANGEBYSCORE', P .. 'events', lo, hi, 'LIMIT', 0, 500)
  end
  if #ids == 0 then break end
  for _, s in ipairs(ids) do
    local e = H(P .. 'event:' .. s)
    if e and (pre == '' or string.sub(e.type, 1, #pre) == pre) and
       (sid == 0 or N(e.schedule_id) == sid) and (jid == 0 or N(e.job_id) == jid) then
      out[#out + 1] = FLAT(e)
      if limit > 0 and #out >= limit then return out end
    end
  end
  if desc then hi = '(' .. ids[#ids] else lo = '(' .. ids[#ids] end
end
return out
-- @script events_head
local r = redis.call('ZREVRANGE', P .. 'events', 0, 0)
return #r > 0 and N(r[1]) or 0
-- @script events_prune
-- ARGV: P, before, max. Events first (the oldest max, those older
-- than before, never the newest: its id is the cursors' high mark),
-- then ended runs by done_ms.
local before, max, n = N(ARGV[2]), N(ARGV[3]), 0
local newest = redis.call('ZREVRANGE', P .. 'events', 0, 0)[1]
for _, s in ipairs(redis.call('ZRANGE', P .. 'events', 0, max - 1)) do
  if s ~= newest and N(redis.call('HGET', P .. 'event:' .. s, 'ts_ms')) < before then
    redis.call('DEL', P .. 'event:' .. s)
    redis.call('ZREM', P .. 'events', s)
    n = n + 1
  end
end
if n < max then
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', P .. 'runs:ended', '-inf',
                                '(' .. ARGV[2], 'LIMIT', 0, max - n)) do
    local r = H(RK(N(m)))
    if r then RDEL(N(m), r) else redis.call('ZREM', P .. 'runs:ended', m) end
    n = n + 1
  end
end
return n
-- @script lease_acquire
-- ARGV: P, name, holder, now, ttl
local k = P .. 'lease:' .. ARGV[2]
local l, now = H(k), N(ARGV[4])
local tok = 1
if l then
  local valid = N(l.expires_ms) > now
  if l.holder ~= ARGV[3] and valid then return E('EBUSY') end
  tok = N(l.token)
  if not (l.holder == ARGV[3] and valid) then tok = tok + 1 end
end
redis.call('HSET', k, 'holder', ARGV[3], 'token', I(tok), 'expires_ms',
           I(now + N(ARGV[5])))
return tok
-- @script lease_check
-- ARGV: P, name, token, now
local r = redis.call('HMGET', P .. 'lease:' .. ARGV[2], 'token', 'expires_ms')
if r[1] and N(r[1]) == N(ARGV[3]) and N(r[2]) > N(ARGV[4]) then return 0 end
return E('EFENCED')
-- @script lease_release
-- ARGV: P, name, holder, token
local k = P .. 'lease:' .. ARGV[2]
local r = redis.call('HMGET', k, 'holder', 'token')
if r[1] ~= ARGV[3] or N(r[2]) ~= N(ARGV[4]) then return E('ENOENT') end
redis.call('HSET', k, 'expires_ms', '0')
return 0
-- @script lease_get
-- ARGV: P, name
local r = redis.call('HGETALL', P .. 'lease:' .. ARGV[2])
if #r == 0 then return E('ENOENT') end
return r
