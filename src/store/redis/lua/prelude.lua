-- Put before every script (store/redis/redis.c): ARGV[1] is the key prefix.
-- Numbers that go back into keys or replies are formatted with I() (Lua's
-- tostring keeps only 14 digits); values the client sent are stored as the
-- strings it sent.
local P = ARGV[1]
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
