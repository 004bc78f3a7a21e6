-- The connection's own scripts (store/redis/redis.c): schema check, meta,
-- transactions (their helpers are in prelude.lua).
-- @script open
-- ARGV: P, schema version, a fresh secret
local v = N(redis.call('GET', P .. 'schema'))
if v > N(ARGV[2]) then return E('ENEWER ' .. I(v)) end
if v < N(ARGV[2]) then redis.call('SET', P .. 'schema', ARGV[2]) end
redis.call('HSETNX', P .. 'meta', 'auth.job_secret', ARGV[3])
return 0
-- @script meta_get
local v = redis.call('HGET', P .. 'meta', ARGV[2])
if not v then return E('ENOENT') end
return v
-- @script meta_set
redis.call('HSET', P .. 'meta', ARGV[2], ARGV[3])
return 0
-- @script tx_commit
-- (the prelude checked that TX holds the lock)
TXEND(TX)
if CALL('GET', TXLOCK) == TX then CALL('DEL', TXLOCK) end
return 0
-- @script tx_rollback
-- ARGV: P, mark (entries of the log to keep: 0 = the whole transaction,
-- which then ends; else a savepoint's, and the transaction goes on)
local mark = N(ARGV[2])
UNDO(TX, mark)
if ARGV[3] == 'end' then
  TXEND(TX)
  if CALL('GET', TXLOCK) == TX then CALL('DEL', TXLOCK) end
end
return 0
-- @script tx_mark
-- A savepoint: the length of TX's log.
return CALL('LLEN', TXK(TX))
-- @script tx_break
-- ARGV: P, token; run outside a transaction. The holder's connection is
-- gone (a token starts with its CLIENT ID): its lock goes now, not at its
-- expiry, and the next script rolls its transaction back.
if CALL('GET', TXLOCK) == ARGV[2] then CALL('DEL', TXLOCK) end
return 0
