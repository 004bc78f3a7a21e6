-- Users and API tokens (store/redis/auth.c).
-- Each "-- @script NAME" line starts the script of op RS_NAME (store/redis/internal.h).
-- ARGV[1] is always the key prefix P.
-- @script principal_put
-- ARGV: P, kind, name, label, secret, owner, role, projects, created_ms, expires_ms
-- Every field is written, so a put replaces the whole principal.
redis.call('HSET', P .. 'principal:' .. ARGV[2] .. ':' .. ARGV[3], 'kind', ARGV[2],
           'name', ARGV[3], 'label', ARGV[4], 'secret', ARGV[5], 'owner', ARGV[6],
           'role', ARGV[7], 'projects', ARGV[8], 'created_ms', ARGV[9],
           'expires_ms', ARGV[10])
redis.call('ZADD', P .. 'principals:' .. ARGV[2], 0, ARGV[3])
return 0
-- @script principal_delete
-- ARGV: P, kind, name. Returns how many were deleted (0 or 1).
redis.call('ZREM', P .. 'principals:' .. ARGV[2], ARGV[3])
return redis.call('DEL', P .. 'principal:' .. ARGV[2] .. ':' .. ARGV[3])
-- @script principals_list
-- Users (kind 1), then tokens (kind 2), each by name in byte order.
local out = {}
for _, kind in ipairs({'1', '2'}) do
  for _, n in ipairs(redis.call('ZRANGEBYLEX', P .. 'principals:' .. kind, '-', '+')) do
    local r = redis.call('HGETALL', P .. 'principal:' .. kind .. ':' .. n)
    if #r > 0 then out[#out + 1] = r end
  end
end
return out
