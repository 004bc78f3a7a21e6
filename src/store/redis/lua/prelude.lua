-- Put before every script (store/redis/redis.c): ARGV[1] is the key prefix
-- P, KEYS[1] P .. 'tx:' .. the connection's open transaction ('' = none):
-- a key under the prefix, so an ACL user limited to P* may run it.
-- Numbers that go back into keys or replies are formatted with I() (Lua's
-- tostring keeps only 14 digits); values the client sent are stored as the
-- strings it sent.
local P = ARGV[1]
local TX = string.sub(KEYS[1] or '', #P + 4)
local function I(n) return string.format('%.0f', n) end
local function N(v) return tonumber(v) or 0 end
local function E(code) return redis.error_reply(code) end
local function H(k)
  local r = redis.call('HGETALL', k)
  if #r == 0 then return nil end
  local t = {}
  for i = 1, #r, 2 do t[r[i]] = r[i + 1] end
  return t
end
local function FLAT(t)
  local r = {}
  for k, v in pairs(t) do r[#r + 1] = k; r[#r + 1] = v end
  return r
end
-- ---- transactions (store/redis/redis.c: store_tx_*, store_sp_*) ----
-- One transaction at a time holds P:tx:lock (its token, expiring TXTTL ms
-- after its last script) from its first script to its end, so the transactions of
-- every node and connection take turns, as SQLite's BEGIN IMMEDIATE does.
-- A write outside a transaction waits for the lock too (ELOCKED: the client
-- tries again). Every write a transaction makes is first logged in the list
-- P:tx:TOKEN as the command that undoes it: a rollback, a savepoint's
-- rollback, or, when the holder died (its lock expired), the next writer
-- applies them newest first (a client that sees the holder's connection
-- gone breaks the lock at once: tx_break). P:tx:open names the transactions whose log is
-- live; a transaction no longer in it was rolled back by another writer
-- and fails (ETXLOST). Sequences (INCR) are not undone: an id is never
-- given twice, as with PostgreSQL's sequences. A deleted key is renamed
-- aside (O(1), whatever its size) and dropped at the commit.
local CALL = redis.call
local TXLOCK, TXOPEN, TXTTL = P .. 'tx:lock', P .. 'tx:open', 5000
local function TXK(tok) return P .. 'tx:' .. tok end
local function TXT(tok) return P .. 'tx:' .. tok .. ':trash' end
-- Undoes tok's log from entry mark (0-based; 0 = all), newest first.
local function UNDO(tok, mark)
  local k = TXK(tok)
  local es = CALL('LRANGE', k, mark, -1)
  for i = #es, 1, -1 do
    local e = cmsgpack.unpack(es[i])
    local t, key = e[1], e[2]
    if t == 'h' then
      if e[4] then CALL('HSET', key, e[3], e[4]) else CALL('HDEL', key, e[3]) end
    elseif t == 'z' then
      if e[4] then CALL('ZADD', key, e[4], e[3]) else CALL('ZREM', key, e[3]) end
    elseif t == 's' then
      if e[4] then CALL('SADD', key, e[3]) else CALL('SREM', key, e[3]) end
    elseif t == 'k' then
      if e[3] then CALL('SET', key, e[3]) else CALL('DEL', key) end
    elseif t == 'd' then
      CALL('DEL', key)
      if CALL('EXISTS', e[3]) == 1 then CALL('RENAME', e[3], key) end
    end
  end
  if mark == 0 then CALL('DEL', k) else CALL('LTRIM', k, 0, mark - 1) end
end
-- Forgets tok: its log, and the keys its deletes set aside.
local function TXEND(tok)
  for _, t in ipairs(CALL('LRANGE', TXT(tok), 0, -1)) do CALL('UNLINK', t) end
  CALL('DEL', TXK(tok), TXT(tok))
  CALL('SREM', TXOPEN, tok)
end
-- Rolls back every transaction left open by a holder that lost the lock.
local function RECOVER()
  for _, tok in ipairs(CALL('SMEMBERS', TXOPEN)) do
    if tok ~= TX then
      UNDO(tok, 0)
      TXEND(tok)
    end
  end
end
-- A script of a transaction: the lock is the transaction's, or it is
-- taken now (KEYS[2] is P .. 'tx:begin' for the transaction's first script,
-- which the client sends again after ELOCKED), or the transaction was
-- rolled back by another (ETXLOST). Outside one, a holder that died leaves
-- its transaction to whoever comes next, reader or writer, once its lock
-- has expired or been broken.
local HOLDER = CALL('GET', TXLOCK)
if TX ~= '' then
  if HOLDER == TX then
    CALL('PEXPIRE', TXLOCK, TXTTL)
  elseif HOLDER then
    error({err = KEYS[2] == P .. 'tx:begin' and 'ELOCKED ' .. HOLDER or 'ETXLOST'})
  elseif KEYS[2] == P .. 'tx:begin' or CALL('SISMEMBER', TXOPEN, TX) == 1 then
    RECOVER()
    CALL('SET', TXLOCK, TX, 'PX', TXTTL)
    CALL('SADD', TXOPEN, TX)
  else
    error({err = 'ETXLOST'})
  end
elseif not HOLDER and CALL('SCARD', TXOPEN) > 0 then
  RECOVER()
end
-- A write outside a transaction waits for the holder's commit.
local GUARDED = false
local function GUARD()
  GUARDED = true
  if HOLDER then error({err = 'ELOCKED ' .. HOLDER}) end
end
local function LOG(e) CALL('RPUSH', TXK(TX), cmsgpack.pack(e)) end
local ZFLAGS = {NX = 1, XX = 1, GT = 1, LT = 1, CH = 1, INCR = 1}
-- Logs what undoes cmd (a, its arguments after the key).
local function JOURNAL(w, cmd, key, a)
  if w == 'h' then
    local step = cmd == 'HSET' and 2 or 1
    local last = (cmd == 'HSETNX' or cmd == 'HINCRBY') and 1 or #a
    for i = 1, last, step do LOG({'h', key, a[i], CALL('HGET', key, a[i])}) end
  elseif w == 'z' then
    local from, step = 1, 1
    if cmd == 'ZADD' then
      while ZFLAGS[string.upper(a[from])] do from = from + 1 end
      from, step = from + 1, 2
    end
    for i = from, #a, step do LOG({'z', key, a[i], CALL('ZSCORE', key, a[i])}) end
  elseif w == 's' then
    for i = 1, #a do LOG({'s', key, a[i], CALL('SISMEMBER', key, a[i]) == 1}) end
  elseif w == 'k' then
    LOG({'k', key, CALL('GET', key)})
  end
end
-- DEL in a transaction: each key that exists is renamed aside.
local function TDEL(keys)
  local n = 0
  for _, key in ipairs(keys) do
    if CALL('EXISTS', key) == 1 then
      local t = TXT(TX) .. ':' .. I(CALL('LLEN', TXT(TX)) + 1)
      CALL('RENAME', key, t)
      CALL('RPUSH', TXT(TX), t)
      LOG({'d', key, t})
      n = n + 1
    end
  end
  return n
end
-- The commands scripts use: writes by the kind of their undo, reads.
local WRITES = {HSET = 'h', HSETNX = 'h', HDEL = 'h', HINCRBY = 'h', ZADD = 'z',
                ZREM = 'z', SADD = 's', SREM = 's', SET = 'k', DEL = 'd', INCR = 'seq'}
local READS = {EXISTS = 1, GET = 1, HEXISTS = 1, HGET = 1, HGETALL = 1, HLEN = 1,
               HMGET = 1, SCARD = 1, SISMEMBER = 1, SMEMBERS = 1, ZCARD = 1,
               ZCOUNT = 1, ZRANGE = 1, ZRANGEBYLEX = 1, ZRANGEBYSCORE = 1,
               ZRANK = 1, ZREVRANGE = 1, ZREVRANGEBYSCORE = 1, ZREVRANK = 1, ZSCORE = 1}
local function WCALL(cmd, key, ...)
  local w = WRITES[cmd]
  if w then
    if TX == '' and not GUARDED then GUARD() end
    if TX ~= '' and w ~= 'seq' then
      if w == 'd' then return TDEL({key, ...}) end
      JOURNAL(w, cmd, key, {...})
    end
  elseif not READS[cmd] then
    error({err = 'ERR a script ran ' .. cmd .. ', which the journal does not know'})
  end
  return CALL(cmd, key, ...)
end
-- Every script's redis.call is WCALL (redis.error_reply and the rest as they are).
local redis = setmetatable({call = WCALL}, {__index = redis})
