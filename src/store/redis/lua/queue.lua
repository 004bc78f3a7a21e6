-- Task queues (store/redis/queue.c), with store/sqlite/queue.c's semantics.
-- Each "-- @script NAME" line starts the script of op RS_NAME (store/redis/internal.h);
-- what comes before the first is this file's helpers, put before each of its
-- scripts after prelude.lua. ARGV[1] is always the key prefix P.
local QN, Q, QCK, C
local NOW = 0
local function QSET(name)
  QN = name; Q = P .. 'q:' .. name .. ':'; QCK = P .. 'q:' .. name
  C = H(QCK)
  return C
end
-- Creates queue QN from 11 settings at ARGV[b..].
local function QCREATE(b)
  local id = redis.call('INCR', P .. 'queues:seq')
  redis.call('HSET', QCK, 'id', I(id), 'name', QN, 'created_ms', I(NOW),
    'paused', ARGV[b], 'keep_done', ARGV[b + 1], 'visibility_ms', ARGV[b + 2],
    'max_deliveries', ARGV[b + 3], 'backoff_ms', ARGV[b + 4],
    'backoff_max_ms', ARGV[b + 5], 'max_inflight', ARGV[b + 6], 'key_mode', ARGV[b + 7],
    'key_inflight', ARGV[b + 8], 'key_rate', ARGV[b + 9], 'key_burst', ARGV[b + 10],
    'lease_seq', '0', 'n_waiting', '0', 'n_inflight', '0', 'n_dead', '0',
    'n_done', '0', 'n_put', '0', 'n_acked', '0')
  redis.call('ZADD', P .. 'queues', 0, QN)
  C = H(QCK)
end
local function CINC(f, d) if d ~= 0 then redis.call('HINCRBY', QCK, f, d) end end
local function CNT(st, d)
  if st == 0 or st == 4 then CINC('n_waiting', d)
  elseif st == 1 then CINC('n_inflight', d)
  elseif st == 2 then CINC('n_dead', d)
  elseif st == 3 then CINC('n_done', d) end
end
local function IK(id) return Q .. 'i:' .. I(id) end
local function KR(key) return Q .. 'r:' .. key end
local function RMEM(pri, due, id)
  return string.format('%010.0f', 2147483647 - N(pri)) ..
         string.format('%017.0f', N(due) + 4503599627370496) ..
         string.format('%015.0f', N(id))
end
local function IDX(it, d)
  local st, id = N(it.state), it.id
  if st == 0 then
    if d > 0 then redis.call('ZADD', Q .. 'delayed', it.due_ms, id)
    else redis.call('ZREM', Q .. 'delayed', id) end
  elseif st == 4 then
    local m = RMEM(it.priority, it.due_ms, id)
    if d > 0 then
      redis.call('ZADD', KR(it.key), 0, m)
      redis.call('ZADD', Q .. 'ready', it.due_ms, id)
    else
      redis.call('ZREM', KR(it.key), m)
      redis.call('ZREM', Q .. 'ready', id)
    end
  elseif st == 1 then
    if d > 0 then redis.call('ZADD', Q .. 'inflight', it.due_ms, id)
    else redis.call('ZREM', Q .. 'inflight', id) end
  end
  CNT(st, d)
end
-- Sets fields of element it (field -> value, false = delete).
local function ISET(it, ch)
  local set, del = {}, {}
  for k, v in pairs(ch) do
    if v then it[k] = v; set[#set + 1] = k; set[#set + 1] = v
    else it[k] = nil; del[#del + 1] = k end
  end
  if #set > 0 then redis.call('HSET', IK(it.id), unpack(set)) end
  if #del > 0 then redis.call('HDEL', IK(it.id), unpack(del)) end
end
local function IMOVE(it, ch) IDX(it, -1); ISET(it, ch); IDX(it, 1) end
local function IDEL(it)
  IDX(it, -1)
  redis.call('HDEL', Q .. 'el', it.element)
  redis.call('ZREM', Q .. 'all', it.id)
  redis.call('DEL', IK(it.id))
end
-- Politeness keys: the state, with the bucket refilled up to now.
local KS = {}
local function BURST() local b = N(C.key_burst); if b < 1 then b = 1 end; return b end
local function KGET(key)
  local k = KS[key]
  if k then return k end
  local h = H(Q .. 'k:' .. key)
  if h then
    k = {inflight = N(h.inflight), tokens = N(h.tokens), tokens_ms = N(h.tokens_ms),
         block_ms = N(h.block_ms)}
  else
    k = {inflight = 0, tokens = BURST(), tokens_ms = NOW, block_ms = 0}
  end
  local rate = N(C.key_rate)
  if rate > 0 then
    if NOW > k.tokens_ms then
      k.tokens = k.tokens + (NOW - k.tokens_ms) * rate / 1000
      k.tokens_ms = NOW
    end
    if k.tokens > BURST() then k.tokens = BURST() end
  end
  KS[key] = k
  return k
end
-- Is key open now, how much may it give, and when does it wake (0: not by time)?
local function KOPEN(key, k)
  local rate, nready = N(C.key_rate), redis.call('ZCARD', KR(key))
  local kin = N(C.key_inflight)
  if nready <= 0 then
    if k.block_ms > NOW then return 0, k.block_ms end
    if rate > 0 and k.tokens < BURST() then
      return 0, NOW + math.ceil((BURST() - k.tokens) * 1000 / rate)
    end
    return 0, 0
  end
  if k.block_ms > NOW then return 0, k.block_ms end
  if kin > 0 and k.inflight >= kin then return 0, 0 end
  if rate > 0 and k.tokens < 1 then
    return 0, NOW + math.ceil((1 - k.tokens) * 1000 / rate)
  end
  local room = nready
  if kin > 0 and kin - k.inflight < room then room = kin - k.inflight end
  if rate > 0 and math.floor(k.tokens) < room then room = math.floor(k.tokens) end
  return room, 0
end
-- Writes every key this call touched back (or forgets it).
local function KFLUSH()
  local rate = N(C.key_rate)
  for key, k in pairs(KS) do
    local idle = redis.call('EXISTS', KR(key)) == 0 and k.inflight <= 0 and
                 k.block_ms <= NOW and (rate <= 0 or k.tokens >= BURST())
    if idle then
      redis.call('DEL', Q .. 'k:' .. key)
      redis.call('SREM', Q .. 'kset', key)
    else
      redis.call('HSET', Q .. 'k:' .. key, 'inflight', I(k.inflight),
                 'tokens', string.format('%.17g', k.tokens), 'tokens_ms', I(k.tokens_ms),
                 'block_ms', I(k.block_ms))
      redis.call('SADD', Q .. 'kset', key)
    end
  end
end
local PUBST = {[0] = 0, [4] = 0, [1] = 1, [2] = 2, [3] = 3}
local function IOUT(it)
  local st = N(it.state)
  return {'id', it.id, 'state', I(PUBST[st] or 0), 'priority', it.priority or '0',
          'due_ms', it.due_ms or '0', 'key', it.key or '', 'deliveries',
          it.deliveries or '0', 'token', st == 1 and (it.token or '0') or '0',
          'created_ms', it.created_ms or '0', 'error', it.error or false,
          'element', it.element}
end
-- A lease presented to ack / nack / extend: the element, or nil.
local function HELD(id, token)
  local it = H(IK(id))
  if not it or N(it.state) ~= 1 or N(it.token) ~= N(token) then return nil end
  return it
end
-- The element of a lease that ended leaves in flight for state st (-1: it goes). reset: deliveries and a deferred due time go too.
local function LEND(it, st, due, pri, err, reset)
  local k = KGET(it.key)
  k.inflight = k.inflight - 1
  if st < 0 then IDEL(it); return end
  local ch = {state = I(st), due_ms = I(due), priority = I(pri), token = false}
  if err and err ~= '' then ch.error = err end
  if reset then ch.deliveries = '0'; ch.redue_ms = false; ch.redue_pri = false end
  IMOVE(it, ch)
end
-- Selections of requeue / purge / items: ARGV from b on: states, key flag, key, prefix flag, prefix, after_id, limit, nids, ids... Calls fn(it) per match in id order until it returns true.
local function SELECT(b, fn)
  local states, haskey, key = N(ARGV[b]), ARGV[b + 1] == '1', ARGV[b + 2]
  local haspre, pre = ARGV[b + 3] == '1', ARGV[b + 4]
  local after, nids = N(ARGV[b + 5]), N(ARGV[b + 7])
  local function ok(it)
    local st = PUBST[N(it.state)] or 0
    if states ~= 0 and math.floor(states / 2 ^ st) % 2 ~= 1 then return false end
    if haskey and it.key ~= key then return false end
    if haspre and string.sub(it.element, 1, #pre) ~= pre then return false end
    return true
  end
  if nids > 0 then
    local ids, seen = {}, {}
    for i = 1, nids do
      local id = N(ARGV[b + 7 + i])
      if id > after and not seen[id] then seen[id] = true; ids[#ids + 1] = id end
    end
    table.sort(ids)
    for _, id in ipairs(ids) do
      local it = H(IK(id))
      if it and ok(it) and fn(it) then return end
    end
    return
  end
  local cur = '(' .. I(after)
  while true do
    local ids = redis.call('ZRANGEBYSCORE', Q .. 'all', cur, '+inf', 'LIMIT', 0, 1000)
    if #ids == 0 then return end
    for _, s in ipairs(ids) do
      local it = H(IK(s))
      if it and ok(it) and fn(it) then return end
    end
    cur = '(' .. ids[#ids]
  end
end
-- @script queue_put
-- ARGV: P, name, now, 11 default settings (ARGV[4..14]), then per
-- element: element, has key, key, host key, due, priority, policy.
-- Returns result, id per element.
NOW = N(ARGV[3])
if not QSET(ARGV[2]) then QCREATE(4) end
local out = {}
for b = 15, #ARGV, 7 do
  local el, due, pri, pol = ARGV[b], N(ARGV[b + 4]), N(ARGV[b + 5]), N(ARGV[b + 6])
  local id = redis.call('HGET', Q .. 'el', el)
  local res = 1
  if not id then
    local key = ''
    if ARGV[b + 1] == '1' then key = ARGV[b + 2]
    elseif N(C.key_mode) == 1 then key = ARGV[b + 3] end
    id = redis.call('INCR', P .. 'qi:seq')
    local it = {id = I(id), state = due <= NOW and '4' or '0', priority = I(pri),
                due_ms = I(due), key = key, deliveries = '0', created_ms = I(NOW),
                element = el}
    redis.call('HSET', IK(id), unpack(FLAT(it)))
    redis.call('HSET', Q .. 'el', el, I(id))
    redis.call('ZADD', Q .. 'all', id, I(id))
    IDX(it, 1)
    CINC('n_put', 1)
    if due <= NOW then KGET(key) end
    res = 0
  elseif pol ~= 2 then
    local it = H(IK(id))
    local st = N(it.state)
    if st == 1 then
      local rdue, rpri = due, pri
      if pol == 1 and N(it.redue_ms) ~= 0 then
        rdue = math.min(N(it.redue_ms), due)
        rpri = math.max(N(it.redue_pri), pri)
      end
      ISET(it, {redue_ms = I(math.max(rdue, 1)), redue_pri = I(rpri)})
      res = 3
    elseif st == 2 or st == 3 then
      IMOVE(it, {state = due <= NOW and '4' or '0', due_ms = I(due),
                 priority = I(pri), token = false, deliveries = '0',
                 redue_ms = false, redue_pri = false})
      CINC('n_put', 1)
      if due <= NOW then KGET(it.key) end
      res = 0
    else
      if pol == 1 then
        due = math.min(N(it.due_ms), due)
        pri = math.max(N(it.priority), pri)
      end
      if due ~= N(it.due_ms) or pri ~= N(it.priority) then
        IMOVE(it, {state = due <= NOW and '4' or '0', due_ms = I(due),
                   priority = I(pri)})
        KGET(it.key)
        res = 1
      else
        res = 2
      end
    end
  else
    res = 2
  end
  out[#out + 1] = res
  out[#out + 1] = N(id)
end
KFLUSH()
return out
-- @script queue_take
-- ARGV: P, name, max, visibility, now. Returns {next_ms, {items}}.
NOW = N(ARGV[5])
if not QSET(ARGV[2]) or N(C.paused) ~= 0 then return {0, {}} end
local max = N(ARGV[3])
local md = N(C.max_deliveries)
-- leases that ran out come back, or die
for _, s in ipairs(redis.call('ZRANGEBYSCORE', Q .. 'inflight', '-inf', ARGV[5],
                              'LIMIT', 0, 5000)) do
  local it = H(IK(s))
  local dead = md > 0 and N(it.deliveries) >= md
  local k = KGET(it.key)
  k.inflight = k.inflight - 1
  local ch = {state = dead and '2' or '4', due_ms = I(NOW), token = false}
  if dead then ch.error = 'lease expired after the last delivery' end
  IMOVE(it, ch)
end
-- elements whose time has come become ready
for _, s in ipairs(redis.call('ZRANGEBYSCORE', Q .. 'delayed', '-inf', ARGV[5],
                              'LIMIT', 0, 5000)) do
  local it = H(IK(s))
  IMOVE(it, {state = '4'})
  KGET(it.key)
end
for _, key in ipairs(redis.call('SMEMBERS', Q .. 'kset')) do KGET(key) end
local room = max
local mi = N(C.max_inflight)
if mi > 0 then
  local left = mi - N(redis.call('HGET', QCK, 'n_inflight'))
  if left < room then room = left end
end
local cand = {}
if room > 0 then
  for key, k in pairs(KS) do
    local kr = KOPEN(key, k)
    if kr > room then kr = room end
    if kr > 0 then
      for _, m in ipairs(redis.call('ZRANGEBYLEX', KR(key), '-', '+', 'LIMIT', 0, kr)) do
        cand[#cand + 1] = m
      end
    end
  end
  table.sort(cand)
end
local out = {}
if #cand > 0 and room > 0 then
  local tok = redis.call('HINCRBY', QCK, 'lease_seq', 1)
  local vis = N(ARGV[4])
  if vis == 0 then vis = N(C.visibility_ms) end
  local lend = I(NOW + vis)
  local rate = N(C.key_rate)
  for i = 1, math.min(room, #cand) do
    local it = H(IK(string.sub(cand[i], -15)))
    local k = KGET(it.key)
    k.inflight = k.inflight + 1
    if rate > 0 then k.tokens = k.tokens - 1 end
    IMOVE(it, {state = '1', due_ms = lend, token = I(tok),
               deliveries = I(N(it.deliveries) + 1)})
    out[#out + 1] = IOUT(it)
  end
end
local nxt = 0
if #out < max then
  local function early(t) if t > 0 and (nxt == 0 or t < nxt) then nxt = t end end
  local d = redis.call('ZRANGE', Q .. 'delayed', 0, 0, 'WITHSCORES')
  if d[2] then early(N(d[2])) end
  d = redis.call('ZRANGE', Q .. 'inflight', 0, 0, 'WITHSCORES')
  if d[2] then early(N(d[2])) end
  for key, k in pairs(KS) do
    local kr, wake = KOPEN(key, k)
    if kr <= 0 then early(wake) end
  end
end
KFLUSH()
return {nxt, out}
-- @script queue_ack
-- ARGV: P, name, now, then per lease: id, token. Returns results.
NOW = N(ARGV[3])
if not QSET(ARGV[2]) then return E('ENOENT') end
local out = {}
for b = 4, #ARGV, 2 do
  local it = HELD(ARGV[b], ARGV[b + 1])
  if not it then
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
    CINC('n_acked', 1)
    local rd = N(it.redue_ms)
    if rd ~= 0 then
      LEND(it, rd <= NOW and 4 or 0, rd, N(it.redue_pri), nil, true)
    elseif N(C.keep_done) ~= 0 then
      LEND(it, 3, NOW, N(it.priority), nil, false)
    else
      LEND(it, -1)
    end
  end
end
KFLUSH()
return out
-- @script queue_nack
-- ARGV: P, name, now, then per lease: id, token, delay, retry_after,
-- error, release, jitter. Returns result, dead per lease.
NOW = N(ARGV[3])
if not QSET(ARGV[2]) then return E('ENOENT') end
local md, bo, bmax = N(C.max_deliveries), N(C.backoff_ms), N(C.backoff_max_ms)
local out = {}
for b = 4, #ARGV, 7 do
  local it = HELD(ARGV[b], ARGV[b + 1])
  local delay, ra, err = N(ARGV[b + 2]), N(ARGV[b + 3]), ARGV[b + 4]
  local release = ARGV[b + 5] == '1'
  if not it then
    out[#out + 1] = 1; out[#out + 1] = 0
  else
    local dl = N(it.deliveries)
    if ra > 0 then
      local k = KGET(it.key)
      if NOW + ra > k.block_ms then k.block_ms = NOW + ra end
    end
    if not release and md > 0 and dl >= md then
      LEND(it, 2, NOW, N(it.priority), err, false)
      out[#out + 1] = 0; out[#out + 1] = 1
    else
      if release and dl > 0 then ISET(it, {deliveries = I(dl - 1)}) end
      if delay < 0 then
        if release then delay = 0
        else
          local d = bo
          local i = 1
          while i < dl and d < bmax do d = d * 2; i = i + 1 end
          if d > bmax then d = bmax end
          delay = math.floor(d * N(ARGV[b + 6]))
        end
      end
      local due = NOW + delay
      if ra > 0 and NOW + ra > due then due = NOW + ra end
      LEND(it, due <= NOW and 4 or 0, due, N(it.priority), err, false)
      out[#out + 1] = 0; out[#out + 1] = 0
    end
  end
end
KFLUSH()
return out
-- @script queue_extend
-- ARGV: P, name, visibility, now, then per lease: id, token
NOW = N(ARGV[4])
if not QSET(ARGV[2]) then return E('ENOENT') end
local vis = N(ARGV[3])
if vis == 0 then vis = N(C.visibility_ms) end
local out = {}
for b = 5, #ARGV, 2 do
  local it = HELD(ARGV[b], ARGV[b + 1])
  if it then IMOVE(it, {due_ms = I(NOW + vis)}); out[#out + 1] = 0
  else out[#out + 1] = 1 end
end
return out
-- @script queue_set
-- ARGV: P, name, now, 11 settings
NOW = N(ARGV[3])
if not QSET(ARGV[2]) then
  QCREATE(4)
else
  redis.call('HSET', QCK, 'paused', ARGV[4], 'keep_done', ARGV[5],
    'visibility_ms', ARGV[6], 'max_deliveries', ARGV[7], 'backoff_ms', ARGV[8],
    'backoff_max_ms', ARGV[9], 'max_inflight', ARGV[10], 'key_mode', ARGV[11],
    'key_inflight', ARGV[12], 'key_rate', ARGV[13], 'key_burst', ARGV[14])
end
return redis.call('HGETALL', QCK)
-- @script queue_get
local r = redis.call('HGETALL', P .. 'q:' .. ARGV[2])
if #r == 0 then return E('ENOENT') end
return r
-- @script queues_list
-- ARGV: P, after ('' = from the start), limit
local lo = ARGV[2] == '' and '-' or '(' .. ARGV[2]
local names
if N(ARGV[3]) > 0 then
  names = redis.call('ZRANGEBYLEX', P .. 'queues', lo, '+', 'LIMIT', 0, ARGV[3])
else
  names = redis.call('ZRANGEBYLEX', P .. 'queues', lo, '+')
end
local out = {}
for _, n in ipairs(names) do out[#out + 1] = redis.call('HGETALL', P .. 'q:' .. n) end
return out
-- @script queue_delete
if not QSET(ARGV[2]) then return E('ENOENT') end
local cur = '-inf'
while true do
  local ids = redis.call('ZRANGEBYSCORE', Q .. 'all', cur, '+inf', 'LIMIT', 0, 1000)
  if #ids == 0 then break end
  for _, s in ipairs(ids) do
    local key = redis.call('HGET', IK(s), 'key')
    if key then redis.call('DEL', KR(key), Q .. 'k:' .. key) end
    redis.call('DEL', IK(s))
  end
  cur = '(' .. ids[#ids]
end
for _, key in ipairs(redis.call('SMEMBERS', Q .. 'kset')) do
  redis.call('DEL', KR(key), Q .. 'k:' .. key)
end
redis.call('DEL', Q .. 'el', Q .. 'all', Q .. 'delayed', Q .. 'inflight',
           Q .. 'ready', Q .. 'kset', QCK)
redis.call('ZREM', P .. 'queues', QN)
return 0
-- @script queue_stats
-- ARGV: P, name, now. Returns the counters and {ready, past due delayed,
-- first delayed due, first ready due, keys}.
if not QSET(ARGV[2]) then return E('ENOENT') end
local function first(z)
  local d = redis.call('ZRANGE', z, 0, 0, 'WITHSCORES')
  return d[2] and N(d[2]) or 0
end
return {N(C.n_waiting), N(C.n_inflight), N(C.n_dead), N(C.n_done),
        redis.call('ZCARD', Q .. 'ready'),
        redis.call('ZCOUNT', Q .. 'delayed', '-inf', ARGV[3]),
        first(Q .. 'delayed'), first(Q .. 'ready'), redis.call('SCARD', Q .. 'kset')}
-- @script queue_keys
-- ARGV: P, name, after ('' = from the first), limit (0 = all), now. Returns
-- flat {key, ready, inflight, tokens ('-1': no key_rate), blocked until,
-- open, wake, ...} in byte order of the key, with the bucket refilled up
-- to now (nothing is written). The key set is sorted per call.
NOW = N(ARGV[5])
if not QSET(ARGV[2]) then return E('ENOENT') end
local after, limit = ARGV[3], N(ARGV[4])
local keys = {}
for _, key in ipairs(redis.call('SMEMBERS', Q .. 'kset')) do
  if key > after then keys[#keys + 1] = key end
end
table.sort(keys)
local out, rate = {}, N(C.key_rate)
for i = 1, #keys do
  if limit > 0 and i > limit then break end
  local key = keys[i]
  local k = KGET(key)
  local room, wake = KOPEN(key, k)
  out[#out + 1] = key
  out[#out + 1] = redis.call('ZCARD', KR(key))
  out[#out + 1] = k.inflight
  out[#out + 1] = rate > 0 and string.format('%.6f', k.tokens) or '-1'
  out[#out + 1] = k.block_ms > NOW and I(k.block_ms) or '0'
  out[#out + 1] = room > 0 and 1 or 0
  out[#out + 1] = room > 0 and '0' or I(wake)
end
return out
-- @script queue_items
-- ARGV: P, name, selection (SELECT)
if not QSET(ARGV[2]) then return E('ENOENT') end
local limit, out = N(ARGV[9]), {}
SELECT(3, function(it)
  out[#out + 1] = IOUT(it)
  return limit > 0 and #out >= limit
end)
return out
-- @script queue_requeue
-- ARGV: P, name, now, due, selection (SELECT)
NOW = N(ARGV[3])
if not QSET(ARGV[2]) then return E('ENOENT') end
local due, list = N(ARGV[4]), {}
SELECT(5, function(it) list[#list + 1] = it; return false end)
for _, it in ipairs(list) do
  local k = KGET(it.key)
  if N(it.state) == 1 then k.inflight = k.inflight - 1 end
  IMOVE(it, {state = due <= NOW and '4' or '0', due_ms = I(due), token = false,
             deliveries = '0', redue_ms = false, redue_pri = false})
end
KFLUSH()
return #list
-- @script queue_purge
-- ARGV: P, name, now, selection (SELECT)
NOW = N(ARGV[3])
if not QSET(ARGV[2]) then return E('ENOENT') end
local list = {}
SELECT(4, function(it) list[#list + 1] = it; return false end)
for _, it in ipairs(list) do
  local k = KGET(it.key)
  if N(it.state) == 1 then k.inflight = k.inflight - 1 end
  IDEL(it)
end
KFLUSH()
return #list
