-- Users and API tokens (store/redis/auth.c).
-- Each "-- @script NAME" line starts the script of op RS_NAME (store/redis/internal.h).
-- ARGV[1] is always the key prefix P.
--
-- A write that keeps an admin (keep > 0: store.h's store_principal_*_keep_admin)
-- checks and writes in one script: nothing runs between the two, on any
-- node, so two nodes taking away the last two admins cannot both succeed.

-- Is the principal (kind, name) a usable admin credential at keep (store.h):
-- role admin (4), a secret, no expiry or one after keep?
local function USABLE(kind, name, keep)
  local h = redis.call('HMGET', P .. 'principal:' .. kind .. ':' .. name,
                       'role', 'secret', 'expires_ms')
  if h[1] ~= '4' or not h[2] or h[2] == '' then return false end
  local e = N(h[3])
  return e == 0 or e > keep
end

-- Is a principal other than (kind, name) a usable admin credential at keep?
local function ANOTHER(kind, name, keep)
  for _, k in ipairs({'1', '2'}) do
    for _, n in ipairs(redis.call('ZRANGEBYLEX', P .. 'principals:' .. k, '-', '+')) do
      if (k ~= kind or n ~= name) and USABLE(k, n, keep) then return true end
    end
  end
  return false
end

-- Would taking (kind, name)'s admin away leave none (keep = 0: never asked)?
local function LAST(kind, name, keep)
  return keep > 0 and USABLE(kind, name, keep) and not ANOTHER(kind, name, keep)
end
-- @script principal_put
-- ARGV: P, kind, name, label, secret, owner, role, projects, created_ms, expires_ms,
-- keep. Every field is written, so a put replaces the whole principal. store.c
-- asks to keep an admin only when the new fields are no usable admin: -1,
-- writing nothing, when the old ones are the last; else 0.
if LAST(ARGV[2], ARGV[3], N(ARGV[11])) then return -1 end
redis.call('HSET', P .. 'principal:' .. ARGV[2] .. ':' .. ARGV[3], 'kind', ARGV[2],
           'name', ARGV[3], 'label', ARGV[4], 'secret', ARGV[5], 'owner', ARGV[6],
           'role', ARGV[7], 'projects', ARGV[8], 'created_ms', ARGV[9],
           'expires_ms', ARGV[10])
redis.call('ZADD', P .. 'principals:' .. ARGV[2], 0, ARGV[3])
return 0
-- @script principal_delete
-- ARGV: P, kind, name, keep. Returns how many were deleted (0 or 1), or -1,
-- deleting nothing, when it is the last usable admin.
if LAST(ARGV[2], ARGV[3], N(ARGV[4])) then return -1 end
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
