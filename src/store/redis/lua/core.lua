-- The connection's own scripts (store/redis/redis.c): schema check, meta.
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
