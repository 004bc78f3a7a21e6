/* The Redis backend's task queues (store.h, core/queue.h, docs/queues.md),
 * each op one Lua script (store/redis/internal.h), with SQLite's semantics
 * (sqlite/queue.c): the same states, politeness keys, counters and orders.
 *
 * Keys under the prefix P, for queue NAME (Q = P "q:NAME:"):
 *   queues          zset (all scores 0) of queue names, by name
 *   queues:seq      queue ids; qi:seq: element ids (never reused)
 *   q:NAME          hash: the settings (queue_conf_t's names), the counters,
 *                   lease_seq
 *   Q el            hash element bytes -> id (uniqueness)
 *   Q i:ID          hash per element: id, state (0 waiting not yet due,
 *                   4 waiting and due, 1 in flight, 2 dead, 3 done),
 *                   priority, due_ms (in flight: the lease end), key,
 *                   deliveries, token, created_ms, error, element, and
 *                   redue_ms / redue_pri (a due time a put deferred)
 *   Q all           zset id -> id (listings, id order)
 *   Q delayed       zset due_ms -> id of state 0
 *   Q inflight      zset lease end -> id of state 1
 *   Q ready         zset due_ms -> id of state 4 (oldest due)
 *   Q r:KEY         lex zset of KEY's state-4 elements: fixed-width
 *                   (priority DESC, due ASC, id ASC), the take order
 *   Q k:KEY, kset   a key's politeness state (in flight, token bucket,
 *                   Retry-After block) and the set of keys holding one;
 *                   a key that holds nothing worth remembering is deleted
 *                   whenever an op settles it (as SQLite's queue_keys)
 *
 * Take walks every key holding state (to settle it and find the open ones),
 * so its cost grows with the number of politeness keys, not elements.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "store/queue_keys.h"
#include "store/redis/internal.h"

static const char queue_helpers[] =
    "local QN, Q, QCK, C\n"
    "local NOW = 0\n"
    "local function QSET(name)\n"
    "  QN = name; Q = P .. 'q:' .. name .. ':'; QCK = P .. 'q:' .. name\n"
    "  C = H(QCK)\n"
    "  return C\n"
    "end\n"
    /* Creates queue QN from 11 settings at ARGV[b..]. */
    "local function QCREATE(b)\n"
    "  local id = redis.call('INCR', P .. 'queues:seq')\n"
    "  redis.call('HSET', QCK, 'id', I(id), 'name', QN, 'created_ms', I(NOW),\n"
    "    'paused', ARGV[b], 'keep_done', ARGV[b + 1], 'visibility_ms', ARGV[b + 2],\n"
    "    'max_deliveries', ARGV[b + 3], 'backoff_ms', ARGV[b + 4],\n"
    "    'backoff_max_ms', ARGV[b + 5], 'max_inflight', ARGV[b + 6], 'key_mode', ARGV[b + 7],\n"
    "    'key_inflight', ARGV[b + 8], 'key_rate', ARGV[b + 9], 'key_burst', ARGV[b + 10],\n"
    "    'lease_seq', '0', 'n_waiting', '0', 'n_inflight', '0', 'n_dead', '0',\n"
    "    'n_done', '0', 'n_put', '0', 'n_acked', '0')\n"
    "  redis.call('ZADD', P .. 'queues', 0, QN)\n"
    "  C = H(QCK)\n"
    "end\n"
    "local function CINC(f, d) if d ~= 0 then redis.call('HINCRBY', QCK, f, d) end end\n"
    "local function CNT(st, d)\n"
    "  if st == 0 or st == 4 then CINC('n_waiting', d)\n"
    "  elseif st == 1 then CINC('n_inflight', d)\n"
    "  elseif st == 2 then CINC('n_dead', d)\n"
    "  elseif st == 3 then CINC('n_done', d) end\n"
    "end\n"
    "local function IK(id) return Q .. 'i:' .. I(id) end\n"
    "local function KR(key) return Q .. 'r:' .. key end\n"
    "local function RMEM(pri, due, id)\n"
    "  return string.format('%010.0f', 2147483647 - N(pri)) ..\n"
    "         string.format('%017.0f', N(due) + 4503599627370496) ..\n"
    "         string.format('%015.0f', N(id))\n"
    "end\n"
    "local function IDX(it, d)\n"
    "  local st, id = N(it.state), it.id\n"
    "  if st == 0 then\n"
    "    if d > 0 then redis.call('ZADD', Q .. 'delayed', it.due_ms, id)\n"
    "    else redis.call('ZREM', Q .. 'delayed', id) end\n"
    "  elseif st == 4 then\n"
    "    local m = RMEM(it.priority, it.due_ms, id)\n"
    "    if d > 0 then\n"
    "      redis.call('ZADD', KR(it.key), 0, m)\n"
    "      redis.call('ZADD', Q .. 'ready', it.due_ms, id)\n"
    "    else\n"
    "      redis.call('ZREM', KR(it.key), m)\n"
    "      redis.call('ZREM', Q .. 'ready', id)\n"
    "    end\n"
    "  elseif st == 1 then\n"
    "    if d > 0 then redis.call('ZADD', Q .. 'inflight', it.due_ms, id)\n"
    "    else redis.call('ZREM', Q .. 'inflight', id) end\n"
    "  end\n"
    "  CNT(st, d)\n"
    "end\n"
    /* Sets fields of element it (field -> value, false = delete). */
    "local function ISET(it, ch)\n"
    "  local set, del = {}, {}\n"
    "  for k, v in pairs(ch) do\n"
    "    if v then it[k] = v; set[#set + 1] = k; set[#set + 1] = v\n"
    "    else it[k] = nil; del[#del + 1] = k end\n"
    "  end\n"
    "  if #set > 0 then redis.call('HSET', IK(it.id), unpack(set)) end\n"
    "  if #del > 0 then redis.call('HDEL', IK(it.id), unpack(del)) end\n"
    "end\n"
    "local function IMOVE(it, ch) IDX(it, -1); ISET(it, ch); IDX(it, 1) end\n"
    "local function IDEL(it)\n"
    "  IDX(it, -1)\n"
    "  redis.call('HDEL', Q .. 'el', it.element)\n"
    "  redis.call('ZREM', Q .. 'all', it.id)\n"
    "  redis.call('DEL', IK(it.id))\n"
    "end\n"
    /* Politeness keys: the state, with the bucket refilled up to now. */
    "local KS = {}\n"
    "local function BURST() local b = N(C.key_burst); if b < 1 then b = 1 end; return b end\n"
    "local function KGET(key)\n"
    "  local k = KS[key]\n"
    "  if k then return k end\n"
    "  local h = H(Q .. 'k:' .. key)\n"
    "  if h then\n"
    "    k = {inflight = N(h.inflight), tokens = N(h.tokens), tokens_ms = N(h.tokens_ms),\n"
    "         block_ms = N(h.block_ms)}\n"
    "  else\n"
    "    k = {inflight = 0, tokens = BURST(), tokens_ms = NOW, block_ms = 0}\n"
    "  end\n"
    "  local rate = N(C.key_rate)\n"
    "  if rate > 0 then\n"
    "    if NOW > k.tokens_ms then\n"
    "      k.tokens = k.tokens + (NOW - k.tokens_ms) * rate / 1000\n"
    "      k.tokens_ms = NOW\n"
    "    end\n"
    "    if k.tokens > BURST() then k.tokens = BURST() end\n"
    "  end\n"
    "  KS[key] = k\n"
    "  return k\n"
    "end\n"
    /* Is key open now, how much may it give, and when does it wake (0:
     * not by time)? */
    "local function KOPEN(key, k)\n"
    "  local rate, nready = N(C.key_rate), redis.call('ZCARD', KR(key))\n"
    "  local kin = N(C.key_inflight)\n"
    "  if nready <= 0 then\n"
    "    if k.block_ms > NOW then return 0, k.block_ms end\n"
    "    if rate > 0 and k.tokens < BURST() then\n"
    "      return 0, NOW + math.ceil((BURST() - k.tokens) * 1000 / rate)\n"
    "    end\n"
    "    return 0, 0\n"
    "  end\n"
    "  if k.block_ms > NOW then return 0, k.block_ms end\n"
    "  if kin > 0 and k.inflight >= kin then return 0, 0 end\n"
    "  if rate > 0 and k.tokens < 1 then\n"
    "    return 0, NOW + math.ceil((1 - k.tokens) * 1000 / rate)\n"
    "  end\n"
    "  local room = nready\n"
    "  if kin > 0 and kin - k.inflight < room then room = kin - k.inflight end\n"
    "  if rate > 0 and math.floor(k.tokens) < room then room = math.floor(k.tokens) end\n"
    "  return room, 0\n"
    "end\n"
    /* Writes every key this call touched back (or forgets it). */
    "local function KFLUSH()\n"
    "  local rate = N(C.key_rate)\n"
    "  for key, k in pairs(KS) do\n"
    "    local idle = redis.call('EXISTS', KR(key)) == 0 and k.inflight <= 0 and\n"
    "                 k.block_ms <= NOW and (rate <= 0 or k.tokens >= BURST())\n"
    "    if idle then\n"
    "      redis.call('DEL', Q .. 'k:' .. key)\n"
    "      redis.call('SREM', Q .. 'kset', key)\n"
    "    else\n"
    "      redis.call('HSET', Q .. 'k:' .. key, 'inflight', I(k.inflight),\n"
    "                 'tokens', string.format('%.17g', k.tokens), 'tokens_ms', I(k.tokens_ms),\n"
    "                 'block_ms', I(k.block_ms))\n"
    "      redis.call('SADD', Q .. 'kset', key)\n"
    "    end\n"
    "  end\n"
    "end\n"
    "local PUBST = {[0] = 0, [4] = 0, [1] = 1, [2] = 2, [3] = 3}\n"
    "local function IOUT(it)\n"
    "  local st = N(it.state)\n"
    "  return {'id', it.id, 'state', I(PUBST[st] or 0), 'priority', it.priority or '0',\n"
    "          'due_ms', it.due_ms or '0', 'key', it.key or '', 'deliveries',\n"
    "          it.deliveries or '0', 'token', st == 1 and (it.token or '0') or '0',\n"
    "          'created_ms', it.created_ms or '0', 'error', it.error or false,\n"
    "          'element', it.element}\n"
    "end\n"
    /* A lease presented to ack / nack / extend: the element, or nil. */
    "local function HELD(id, token)\n"
    "  local it = H(IK(id))\n"
    "  if not it or N(it.state) ~= 1 or N(it.token) ~= N(token) then return nil end\n"
    "  return it\n"
    "end\n"
    /* The element of a lease that ended leaves in flight for state st
     * (-1: it goes). reset: deliveries and a deferred due time go too. */
    "local function LEND(it, st, due, pri, err, reset)\n"
    "  local k = KGET(it.key)\n"
    "  k.inflight = k.inflight - 1\n"
    "  if st < 0 then IDEL(it); return end\n"
    "  local ch = {state = I(st), due_ms = I(due), priority = I(pri), token = false}\n"
    "  if err and err ~= '' then ch.error = err end\n"
    "  if reset then ch.deliveries = '0'; ch.redue_ms = false; ch.redue_pri = false end\n"
    "  IMOVE(it, ch)\n"
    "end\n"
    /* Selections of requeue / purge / items: ARGV from b on: states, key
     * flag, key, prefix flag, prefix, after_id, limit, nids, ids... Calls
     * fn(it) per match in id order until it returns true. */
    "local function SELECT(b, fn)\n"
    "  local states, haskey, key = N(ARGV[b]), ARGV[b + 1] == '1', ARGV[b + 2]\n"
    "  local haspre, pre = ARGV[b + 3] == '1', ARGV[b + 4]\n"
    "  local after, nids = N(ARGV[b + 5]), N(ARGV[b + 7])\n"
    "  local function ok(it)\n"
    "    local st = PUBST[N(it.state)] or 0\n"
    "    if states ~= 0 and math.floor(states / 2 ^ st) % 2 ~= 1 then return false end\n"
    "    if haskey and it.key ~= key then return false end\n"
    "    if haspre and string.sub(it.element, 1, #pre) ~= pre then return false end\n"
    "    return true\n"
    "  end\n"
    "  if nids > 0 then\n"
    "    local ids, seen = {}, {}\n"
    "    for i = 1, nids do\n"
    "      local id = N(ARGV[b + 7 + i])\n"
    "      if id > after and not seen[id] then seen[id] = true; ids[#ids + 1] = id end\n"
    "    end\n"
    "    table.sort(ids)\n"
    "    for _, id in ipairs(ids) do\n"
    "      local it = H(IK(id))\n"
    "      if it and ok(it) and fn(it) then return end\n"
    "    end\n"
    "    return\n"
    "  end\n"
    "  local cur = '(' .. I(after)\n"
    "  while true do\n"
    "    local ids = redis.call('ZRANGEBYSCORE', Q .. 'all', cur, '+inf', 'LIMIT', 0, 1000)\n"
    "    if #ids == 0 then return end\n"
    "    for _, s in ipairs(ids) do\n"
    "      local it = H(IK(s))\n"
    "      if it and ok(it) and fn(it) then return end\n"
    "    end\n"
    "    cur = '(' .. ids[#ids]\n"
    "  end\n"
    "end\n";

static const char *const queue_src[RS_COUNT] = {
    /* ARGV: P, name, now, 11 default settings (ARGV[4..14]), then per
     * element: element, has key, key, host key, due, priority, policy.
     * Returns result, id per element. */
    [RS_QUEUE_PUT] =
        "NOW = N(ARGV[3])\n"
        "if not QSET(ARGV[2]) then QCREATE(4) end\n"
        "local out = {}\n"
        "for b = 15, #ARGV, 7 do\n"
        "  local el, due, pri, pol = ARGV[b], N(ARGV[b + 4]), N(ARGV[b + 5]), N(ARGV[b + 6])\n"
        "  local id = redis.call('HGET', Q .. 'el', el)\n"
        "  local res = 1\n"
        "  if not id then\n"
        "    local key = ''\n"
        "    if ARGV[b + 1] == '1' then key = ARGV[b + 2]\n"
        "    elseif N(C.key_mode) == 1 then key = ARGV[b + 3] end\n"
        "    id = redis.call('INCR', P .. 'qi:seq')\n"
        "    local it = {id = I(id), state = due <= NOW and '4' or '0', priority = I(pri),\n"
        "                due_ms = I(due), key = key, deliveries = '0', created_ms = I(NOW),\n"
        "                element = el}\n"
        "    redis.call('HSET', IK(id), unpack(FLAT(it)))\n"
        "    redis.call('HSET', Q .. 'el', el, I(id))\n"
        "    redis.call('ZADD', Q .. 'all', id, I(id))\n"
        "    IDX(it, 1)\n"
        "    CINC('n_put', 1)\n"
        "    if due <= NOW then KGET(key) end\n"
        "    res = 0\n"
        "  elseif pol ~= 2 then\n"
        "    local it = H(IK(id))\n"
        "    local st = N(it.state)\n"
        "    if st == 1 then\n"
        "      local rdue, rpri = due, pri\n"
        "      if pol == 1 and N(it.redue_ms) ~= 0 then\n"
        "        rdue = math.min(N(it.redue_ms), due)\n"
        "        rpri = math.max(N(it.redue_pri), pri)\n"
        "      end\n"
        "      ISET(it, {redue_ms = I(math.max(rdue, 1)), redue_pri = I(rpri)})\n"
        "      res = 3\n"
        "    elseif st == 2 or st == 3 then\n"
        "      IMOVE(it, {state = due <= NOW and '4' or '0', due_ms = I(due),\n"
        "                 priority = I(pri), token = false, deliveries = '0',\n"
        "                 redue_ms = false, redue_pri = false})\n"
        "      CINC('n_put', 1)\n"
        "      if due <= NOW then KGET(it.key) end\n"
        "      res = 0\n"
        "    else\n"
        "      if pol == 1 then\n"
        "        due = math.min(N(it.due_ms), due)\n"
        "        pri = math.max(N(it.priority), pri)\n"
        "      end\n"
        "      if due ~= N(it.due_ms) or pri ~= N(it.priority) then\n"
        "        IMOVE(it, {state = due <= NOW and '4' or '0', due_ms = I(due),\n"
        "                   priority = I(pri)})\n"
        "        KGET(it.key)\n"
        "        res = 1\n"
        "      else\n"
        "        res = 2\n"
        "      end\n"
        "    end\n"
        "  else\n"
        "    res = 2\n"
        "  end\n"
        "  out[#out + 1] = res\n"
        "  out[#out + 1] = N(id)\n"
        "end\n"
        "KFLUSH()\n"
        "return out\n",
    /* ARGV: P, name, max, visibility, now. Returns {next_ms, {items}}. */
    [RS_QUEUE_TAKE] =
        "NOW = N(ARGV[5])\n"
        "if not QSET(ARGV[2]) or N(C.paused) ~= 0 then return {0, {}} end\n"
        "local max = N(ARGV[3])\n"
        "local md = N(C.max_deliveries)\n"
        /* leases that ran out come back, or die */
        "for _, s in ipairs(redis.call('ZRANGEBYSCORE', Q .. 'inflight', '-inf', ARGV[5],\n"
        "                              'LIMIT', 0, 5000)) do\n"
        "  local it = H(IK(s))\n"
        "  local dead = md > 0 and N(it.deliveries) >= md\n"
        "  local k = KGET(it.key)\n"
        "  k.inflight = k.inflight - 1\n"
        "  local ch = {state = dead and '2' or '4', due_ms = I(NOW), token = false}\n"
        "  if dead then ch.error = 'lease expired after the last delivery' end\n"
        "  IMOVE(it, ch)\n"
        "end\n"
        /* elements whose time has come become ready */
        "for _, s in ipairs(redis.call('ZRANGEBYSCORE', Q .. 'delayed', '-inf', ARGV[5],\n"
        "                              'LIMIT', 0, 5000)) do\n"
        "  local it = H(IK(s))\n"
        "  IMOVE(it, {state = '4'})\n"
        "  KGET(it.key)\n"
        "end\n"
        "for _, key in ipairs(redis.call('SMEMBERS', Q .. 'kset')) do KGET(key) end\n"
        "local room = max\n"
        "local mi = N(C.max_inflight)\n"
        "if mi > 0 then\n"
        "  local left = mi - N(redis.call('HGET', QCK, 'n_inflight'))\n"
        "  if left < room then room = left end\n"
        "end\n"
        "local cand = {}\n"
        "if room > 0 then\n"
        "  for key, k in pairs(KS) do\n"
        "    local kr = KOPEN(key, k)\n"
        "    if kr > room then kr = room end\n"
        "    if kr > 0 then\n"
        "      for _, m in ipairs(redis.call('ZRANGEBYLEX', KR(key), '-', '+', 'LIMIT', 0, kr)) do\n"
        "        cand[#cand + 1] = m\n"
        "      end\n"
        "    end\n"
        "  end\n"
        "  table.sort(cand)\n"
        "end\n"
        "local out = {}\n"
        "if #cand > 0 and room > 0 then\n"
        "  local tok = redis.call('HINCRBY', QCK, 'lease_seq', 1)\n"
        "  local vis = N(ARGV[4])\n"
        "  if vis == 0 then vis = N(C.visibility_ms) end\n"
        "  local lend = I(NOW + vis)\n"
        "  local rate = N(C.key_rate)\n"
        "  for i = 1, math.min(room, #cand) do\n"
        "    local it = H(IK(string.sub(cand[i], -15)))\n"
        "    local k = KGET(it.key)\n"
        "    k.inflight = k.inflight + 1\n"
        "    if rate > 0 then k.tokens = k.tokens - 1 end\n"
        "    IMOVE(it, {state = '1', due_ms = lend, token = I(tok),\n"
        "               deliveries = I(N(it.deliveries) + 1)})\n"
        "    out[#out + 1] = IOUT(it)\n"
        "  end\n"
        "end\n"
        "local nxt = 0\n"
        "if #out < max then\n"
        "  local function early(t) if t > 0 and (nxt == 0 or t < nxt) then nxt = t end end\n"
        "  local d = redis.call('ZRANGE', Q .. 'delayed', 0, 0, 'WITHSCORES')\n"
        "  if d[2] then early(N(d[2])) end\n"
        "  d = redis.call('ZRANGE', Q .. 'inflight', 0, 0, 'WITHSCORES')\n"
        "  if d[2] then early(N(d[2])) end\n"
        "  for key, k in pairs(KS) do\n"
        "    local kr, wake = KOPEN(key, k)\n"
        "    if kr <= 0 then early(wake) end\n"
        "  end\n"
        "end\n"
        "KFLUSH()\n"
        "return {nxt, out}\n",
    /* ARGV: P, name, now, then per lease: id, token. Returns results. */
    [RS_QUEUE_ACK] =
        "NOW = N(ARGV[3])\n"
        "if not QSET(ARGV[2]) then return E('ENOENT') end\n"
        "local out = {}\n"
        "for b = 4, #ARGV, 2 do\n"
        "  local it = HELD(ARGV[b], ARGV[b + 1])\n"
        "  if not it then\n"
        "    out[#out + 1] = 1\n"
        "  else\n"
        "    out[#out + 1] = 0\n"
        "    CINC('n_acked', 1)\n"
        "    local rd = N(it.redue_ms)\n"
        "    if rd ~= 0 then\n"
        "      LEND(it, rd <= NOW and 4 or 0, rd, N(it.redue_pri), nil, true)\n"
        "    elseif N(C.keep_done) ~= 0 then\n"
        "      LEND(it, 3, NOW, N(it.priority), nil, false)\n"
        "    else\n"
        "      LEND(it, -1)\n"
        "    end\n"
        "  end\n"
        "end\n"
        "KFLUSH()\n"
        "return out\n",
    /* ARGV: P, name, now, then per lease: id, token, delay, retry_after,
     * error, release, jitter. Returns result, dead per lease. */
    [RS_QUEUE_NACK] =
        "NOW = N(ARGV[3])\n"
        "if not QSET(ARGV[2]) then return E('ENOENT') end\n"
        "local md, bo, bmax = N(C.max_deliveries), N(C.backoff_ms), N(C.backoff_max_ms)\n"
        "local out = {}\n"
        "for b = 4, #ARGV, 7 do\n"
        "  local it = HELD(ARGV[b], ARGV[b + 1])\n"
        "  local delay, ra, err = N(ARGV[b + 2]), N(ARGV[b + 3]), ARGV[b + 4]\n"
        "  local release = ARGV[b + 5] == '1'\n"
        "  if not it then\n"
        "    out[#out + 1] = 1; out[#out + 1] = 0\n"
        "  else\n"
        "    local dl = N(it.deliveries)\n"
        "    if ra > 0 then\n"
        "      local k = KGET(it.key)\n"
        "      if NOW + ra > k.block_ms then k.block_ms = NOW + ra end\n"
        "    end\n"
        "    if not release and md > 0 and dl >= md then\n"
        "      LEND(it, 2, NOW, N(it.priority), err, false)\n"
        "      out[#out + 1] = 0; out[#out + 1] = 1\n"
        "    else\n"
        "      if release and dl > 0 then ISET(it, {deliveries = I(dl - 1)}) end\n"
        "      if delay < 0 then\n"
        "        if release then delay = 0\n"
        "        else\n"
        "          local d = bo\n"
        "          local i = 1\n"
        "          while i < dl and d < bmax do d = d * 2; i = i + 1 end\n"
        "          if d > bmax then d = bmax end\n"
        "          delay = math.floor(d * N(ARGV[b + 6]))\n"
        "        end\n"
        "      end\n"
        "      local due = NOW + delay\n"
        "      if ra > 0 and NOW + ra > due then due = NOW + ra end\n"
        "      LEND(it, due <= NOW and 4 or 0, due, N(it.priority), err, false)\n"
        "      out[#out + 1] = 0; out[#out + 1] = 0\n"
        "    end\n"
        "  end\n"
        "end\n"
        "KFLUSH()\n"
        "return out\n",
    /* ARGV: P, name, visibility, now, then per lease: id, token */
    [RS_QUEUE_EXTEND] =
        "NOW = N(ARGV[4])\n"
        "if not QSET(ARGV[2]) then return E('ENOENT') end\n"
        "local vis = N(ARGV[3])\n"
        "if vis == 0 then vis = N(C.visibility_ms) end\n"
        "local out = {}\n"
        "for b = 5, #ARGV, 2 do\n"
        "  local it = HELD(ARGV[b], ARGV[b + 1])\n"
        "  if it then IMOVE(it, {due_ms = I(NOW + vis)}); out[#out + 1] = 0\n"
        "  else out[#out + 1] = 1 end\n"
        "end\n"
        "return out\n",
    /* ARGV: P, name, now, 11 settings */
    [RS_QUEUE_SET] =
        "NOW = N(ARGV[3])\n"
        "if not QSET(ARGV[2]) then\n"
        "  QCREATE(4)\n"
        "else\n"
        "  redis.call('HSET', QCK, 'paused', ARGV[4], 'keep_done', ARGV[5],\n"
        "    'visibility_ms', ARGV[6], 'max_deliveries', ARGV[7], 'backoff_ms', ARGV[8],\n"
        "    'backoff_max_ms', ARGV[9], 'max_inflight', ARGV[10], 'key_mode', ARGV[11],\n"
        "    'key_inflight', ARGV[12], 'key_rate', ARGV[13], 'key_burst', ARGV[14])\n"
        "end\n"
        "return redis.call('HGETALL', QCK)\n",
    [RS_QUEUE_GET] = "local r = redis.call('HGETALL', P .. 'q:' .. ARGV[2])\n"
                     "if #r == 0 then return E('ENOENT') end\n"
                     "return r\n",
    /* ARGV: P, after ('' = from the start), limit */
    [RS_QUEUES_LIST] =
        "local lo = ARGV[2] == '' and '-' or '(' .. ARGV[2]\n"
        "local names\n"
        "if N(ARGV[3]) > 0 then\n"
        "  names = redis.call('ZRANGEBYLEX', P .. 'queues', lo, '+', 'LIMIT', 0, ARGV[3])\n"
        "else\n"
        "  names = redis.call('ZRANGEBYLEX', P .. 'queues', lo, '+')\n"
        "end\n"
        "local out = {}\n"
        "for _, n in ipairs(names) do out[#out + 1] = redis.call('HGETALL', P .. 'q:' .. n) end\n"
        "return out\n",
    [RS_QUEUE_DELETE] =
        "if not QSET(ARGV[2]) then return E('ENOENT') end\n"
        "local cur = '-inf'\n"
        "while true do\n"
        "  local ids = redis.call('ZRANGEBYSCORE', Q .. 'all', cur, '+inf', 'LIMIT', 0, 1000)\n"
        "  if #ids == 0 then break end\n"
        "  for _, s in ipairs(ids) do\n"
        "    local key = redis.call('HGET', IK(s), 'key')\n"
        "    if key then redis.call('DEL', KR(key), Q .. 'k:' .. key) end\n"
        "    redis.call('DEL', IK(s))\n"
        "  end\n"
        "  cur = '(' .. ids[#ids]\n"
        "end\n"
        "for _, key in ipairs(redis.call('SMEMBERS', Q .. 'kset')) do\n"
        "  redis.call('DEL', KR(key), Q .. 'k:' .. key)\n"
        "end\n"
        "redis.call('DEL', Q .. 'el', Q .. 'all', Q .. 'delayed', Q .. 'inflight',\n"
        "           Q .. 'ready', Q .. 'kset', QCK)\n"
        "redis.call('ZREM', P .. 'queues', QN)\n"
        "return 0\n",
    /* ARGV: P, name, now. Returns the counters and {ready, past due delayed,
     * first delayed due, first ready due, keys}. */
    [RS_QUEUE_STATS] =
        "if not QSET(ARGV[2]) then return E('ENOENT') end\n"
        "local function first(z)\n"
        "  local d = redis.call('ZRANGE', z, 0, 0, 'WITHSCORES')\n"
        "  return d[2] and N(d[2]) or 0\n"
        "end\n"
        "return {N(C.n_waiting), N(C.n_inflight), N(C.n_dead), N(C.n_done),\n"
        "        redis.call('ZCARD', Q .. 'ready'),\n"
        "        redis.call('ZCOUNT', Q .. 'delayed', '-inf', ARGV[3]),\n"
        "        first(Q .. 'delayed'), first(Q .. 'ready'), redis.call('SCARD', Q .. 'kset')}\n",
    /* ARGV: P, name, selection (SELECT) */
    [RS_QUEUE_ITEMS] = "if not QSET(ARGV[2]) then return E('ENOENT') end\n"
                       "local limit, out = N(ARGV[9]), {}\n"
                       "SELECT(3, function(it)\n"
                       "  out[#out + 1] = IOUT(it)\n"
                       "  return limit > 0 and #out >= limit\n"
                       "end)\n"
                       "return out\n",
    /* ARGV: P, name, now, due, selection (SELECT) */
    [RS_QUEUE_REQUEUE] =
        "NOW = N(ARGV[3])\n"
        "if not QSET(ARGV[2]) then return E('ENOENT') end\n"
        "local due, list = N(ARGV[4]), {}\n"
        "SELECT(5, function(it) list[#list + 1] = it; return false end)\n"
        "for _, it in ipairs(list) do\n"
        "  local k = KGET(it.key)\n"
        "  if N(it.state) == 1 then k.inflight = k.inflight - 1 end\n"
        "  IMOVE(it, {state = due <= NOW and '4' or '0', due_ms = I(due), token = false,\n"
        "             deliveries = '0', redue_ms = false, redue_pri = false})\n"
        "end\n"
        "KFLUSH()\n"
        "return #list\n",
    /* ARGV: P, name, now, selection (SELECT) */
    [RS_QUEUE_PURGE] = "NOW = N(ARGV[3])\n"
                       "if not QSET(ARGV[2]) then return E('ENOENT') end\n"
                       "local list = {}\n"
                       "SELECT(4, function(it) list[#list + 1] = it; return false end)\n"
                       "for _, it in ipairs(list) do\n"
                       "  local k = KGET(it.key)\n"
                       "  if N(it.state) == 1 then k.inflight = k.inflight - 1 end\n"
                       "  IDEL(it)\n"
                       "end\n"
                       "KFLUSH()\n"
                       "return #list\n",
};

void redis_queue_scripts(const char **src, const char **helpers) {
  for (int i = RS_QUEUE_PUT; i < RS_COUNT; i++) src[i] = queue_src[i];
  *helpers = queue_helpers;
}

/* ---- conversions ---- */

#define CF(name, type) {#name, type, offsetof(queue_conf_t, name)}
static const struct redis_field conf_fields[] = {
    CF(id, RF_I64),           CF(name, RF_STR),           CF(created_ms, RF_I64),
    CF(paused, RF_INT),       CF(keep_done, RF_INT),      CF(visibility_ms, RF_I64),
    CF(max_deliveries, RF_INT), CF(backoff_ms, RF_I64),   CF(backoff_max_ms, RF_I64),
    CF(max_inflight, RF_INT), CF(key_mode, RF_INT),       CF(key_inflight, RF_INT),
    CF(key_rate, RF_DBL),     CF(key_burst, RF_DBL),      CF(n_waiting, RF_I64),
    CF(n_inflight, RF_I64),   CF(n_dead, RF_I64),         CF(n_done, RF_I64),
    CF(n_put, RF_I64),        CF(n_acked, RF_I64),
};
#undef CF

static int row_conf(const redisReply *r, queue_conf_t *c) {
  int rc = redis_decode(r, conf_fields, sizeof(conf_fields) / sizeof(conf_fields[0]), c);
  if (rc) queue_conf_release(c);
  return rc;
}

#define IF(name, type) {#name, type, offsetof(queue_item_t, name)}
static const struct redis_field item_fields[] = {
    IF(id, RF_I64),         IF(state, RF_INT),   IF(priority, RF_INT), IF(due_ms, RF_I64),
    IF(key, RF_STR),        IF(deliveries, RF_INT), IF(token, RF_I64), IF(created_ms, RF_I64),
    IF(error, RF_STR),
};
#undef IF

/* Appends the item rows of array r to out (all or nothing). */
static int rows_items(const redisReply *r, queue_item_list_t *out) {
  size_t first = out->n;
  int rc = 0;
  if (!r || r->type != REDIS_REPLY_ARRAY) return SPD_ESTORE;
  for (size_t i = 0; !rc && i < r->elements; i++) {
    queue_item_t *it = queue_item_list_add(out);
    if (!it) {
      rc = -ENOMEM;
      break;
    }
    rc = redis_decode(r->element[i], item_fields, sizeof(item_fields) / sizeof(item_fields[0]),
                      it);
    const redisReply *el = rr_field(r->element[i], "element");
    if (!rc) {
      size_t len = el && el->type == REDIS_REPLY_STRING ? el->len : 0;
      if (!(it->element = malloc(len + 1))) {
        rc = -ENOMEM;
      } else {
        if (len) memcpy(it->element, el->str, len);
        it->element[len] = '\0';
        it->len = len;
      }
    }
    if (!rc && !it->key && !(it->key = strdup(""))) rc = -ENOMEM;
  }
  if (rc) qk_items_drop(out, first);
  return rc;
}

static void ra_settings(redis_args_t *a, const queue_conf_t *c) {
  ra_i64(a, c->paused ? 1 : 0);
  ra_i64(a, c->keep_done ? 1 : 0);
  ra_i64(a, c->visibility_ms);
  ra_i64(a, c->max_deliveries);
  ra_i64(a, c->backoff_ms);
  ra_i64(a, c->backoff_max_ms);
  ra_i64(a, c->max_inflight);
  ra_i64(a, c->key_mode);
  ra_i64(a, c->key_inflight);
  ra_dbl(a, c->key_rate);
  ra_dbl(a, c->key_burst);
}

static void ra_filter(redis_args_t *a, const queue_filter_t *f) {
  ra_i64(a, f->states);
  ra_i64(a, f->key ? 1 : 0);
  ra_str(a, f->key);
  ra_i64(a, f->prefix ? 1 : 0);
  ra_str(a, f->prefix);
  ra_i64(a, f->after_id);
  ra_i64(a, f->limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)f->limit);
  ra_i64(a, (int64_t)f->nids);
  for (size_t i = 0; i < f->nids; i++) ra_i64(a, f->ids[i]);
}

/* ---- put, take, ack, nack, extend ---- */

int redis_queue_put(store_t *s, const char *name, queue_put_t *items, size_t n,
                    int64_t now_ms) {
  struct redis_store *q = RQ(s);
  redis_args_t a = {0};
  queue_conf_t def = {0};
  char(*hosts)[QUEUE_KEY_MAX + 1] = calloc(n, sizeof(*hosts));
  if (!hosts) return -ENOMEM;
  queue_conf_defaults(&def);
  ra_str(&a, name);
  ra_i64(&a, now_ms);
  ra_settings(&a, &def);
  for (size_t i = 0; i < n; i++) {
    const queue_put_t *p = &items[i];
    if (!p->key)
      queue_key_derive(QKEY_HOST, p->element, p->len, hosts[i], sizeof(hosts[i]));
    ra_bin(&a, p->element, p->len);
    ra_i64(&a, p->key ? 1 : 0);
    ra_str(&a, p->key);
    ra_str(&a, hosts[i]);
    ra_i64(&a, p->due_ms);
    ra_i64(&a, p->priority);
    ra_i64(&a, p->policy);
  }
  redisReply *r = NULL;
  int rc = redis_eval(q, RS_QUEUE_PUT, &a, &r, "queue put");
  if (!rc && (r->type != REDIS_REPLY_ARRAY || r->elements != 2 * n)) rc = SPD_ESTORE;
  if (!rc) {
    int added = 0;
    for (size_t i = 0; i < n; i++) {
      items[i].result = (queue_put_result_t)rr_i64(r->element[2 * i]);
      items[i].id = rr_i64(r->element[2 * i + 1]);
      added |= items[i].result == QPUT_ADDED || items[i].result == QPUT_MOVED;
    }
    if (added) redis_note(q, STORE_NOTE_QUEUES);
  }
  if (r) freeReplyObject(r);
  free(hosts);
  return rc;
}

int redis_queue_take(store_t *s, const char *name, size_t max, int64_t visibility_ms,
                     int64_t now_ms, queue_item_list_t *out, int64_t *next_ms) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  ra_i64(&a, max > 100000 ? 100000 : (int64_t)max);
  ra_i64(&a, visibility_ms);
  ra_i64(&a, now_ms);
  int rc = redis_eval(RQ(s), RS_QUEUE_TAKE, &a, &r, "queue take");
  if (!rc && (r->type != REDIS_REPLY_ARRAY || r->elements != 2)) rc = SPD_ESTORE;
  if (!rc) {
    rc = rows_items(r->element[1], out);
    if (!rc) *next_ms = rr_i64(r->element[0]);
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_queue_ack(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                    int64_t now_ms) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  ra_i64(&a, now_ms);
  for (size_t i = 0; i < n; i++) {
    ra_i64(&a, leases[i].id);
    ra_i64(&a, leases[i].token);
  }
  int rc = redis_eval(RQ(s), RS_QUEUE_ACK, &a, &r, "queue ack");
  if (!rc && (r->type != REDIS_REPLY_ARRAY || r->elements != n)) rc = SPD_ESTORE;
  for (size_t i = 0; !rc && i < n; i++) leases[i].result = rr_i64(r->element[i]) ? -ENOENT : 0;
  if (r) freeReplyObject(r);
  return rc;
}

int redis_queue_nack(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                     int64_t now_ms) {
  struct redis_store *q = RQ(s);
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  ra_i64(&a, now_ms);
  for (size_t i = 0; i < n; i++) {
    ra_i64(&a, leases[i].id);
    ra_i64(&a, leases[i].token);
    ra_i64(&a, leases[i].delay_ms);
    ra_i64(&a, leases[i].retry_after_ms);
    ra_str(&a, leases[i].error);
    ra_i64(&a, leases[i].release ? 1 : 0);
    /* The backoff's jitter comes from the client, so a script stays
     * deterministic. */
    ra_dbl(&a, qk_jitter());
  }
  int rc = redis_eval(q, RS_QUEUE_NACK, &a, &r, "queue nack");
  if (!rc && (r->type != REDIS_REPLY_ARRAY || r->elements != 2 * n)) rc = SPD_ESTORE;
  int back = 0;
  for (size_t i = 0; !rc && i < n; i++) {
    leases[i].result = rr_i64(r->element[2 * i]) ? -ENOENT : 0;
    leases[i].dead = (int)rr_i64(r->element[2 * i + 1]);
    back |= !leases[i].result && !leases[i].dead;
  }
  if (!rc && back) redis_note(q, STORE_NOTE_QUEUES);
  if (r) freeReplyObject(r);
  return rc;
}

int redis_queue_extend(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                       int64_t visibility_ms, int64_t now_ms) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  ra_i64(&a, visibility_ms);
  ra_i64(&a, now_ms);
  for (size_t i = 0; i < n; i++) {
    ra_i64(&a, leases[i].id);
    ra_i64(&a, leases[i].token);
  }
  int rc = redis_eval(RQ(s), RS_QUEUE_EXTEND, &a, &r, "queue extend");
  if (!rc && (r->type != REDIS_REPLY_ARRAY || r->elements != n)) rc = SPD_ESTORE;
  for (size_t i = 0; !rc && i < n; i++) leases[i].result = rr_i64(r->element[i]) ? -ENOENT : 0;
  if (r) freeReplyObject(r);
  return rc;
}

/* ---- settings, listing, stats ---- */

int redis_queue_set(store_t *s, queue_conf_t *c) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, c->name);
  ra_i64(&a, clock_wall_ms());
  ra_settings(&a, c);
  int rc = redis_eval(RQ(s), RS_QUEUE_SET, &a, &r, "queue set");
  if (!rc) {
    queue_conf_t got = {0};
    rc = row_conf(r, &got);
    if (!rc) {
      char *name = c->name;
      free(got.name);
      *c = got;
      c->name = name;
    }
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_queue_get(store_t *s, const char *name, queue_conf_t *out) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  int rc = redis_eval(RQ(s), RS_QUEUE_GET, &a, &r, "queue get");
  if (!rc) rc = row_conf(r, out);
  if (r) freeReplyObject(r);
  return rc;
}

int redis_queues_list(store_t *s, const char *after, size_t limit, queue_conf_list_t *out) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, after);
  ra_i64(&a, limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)limit);
  int rc = redis_eval(RQ(s), RS_QUEUES_LIST, &a, &r, "queue list");
  for (size_t i = 0; !rc && i < r->elements; i++) {
    queue_conf_t *c = queue_conf_list_add(out);
    if (!c) {
      rc = -ENOMEM;
      break;
    }
    if ((rc = row_conf(r->element[i], c))) out->n--;
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_queue_delete(store_t *s, const char *name) {
  redis_args_t a = {0};
  ra_str(&a, name);
  return redis_eval(RQ(s), RS_QUEUE_DELETE, &a, NULL, "queue delete");
}

int redis_queue_stats(store_t *s, const char *name, int64_t now_ms, queue_stats_t *out) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  ra_i64(&a, now_ms);
  int rc = redis_eval(RQ(s), RS_QUEUE_STATS, &a, &r, "queue stats");
  if (!rc && (r->type != REDIS_REPLY_ARRAY || r->elements != 9)) rc = SPD_ESTORE;
  if (!rc) {
    int64_t v[9];
    for (int i = 0; i < 9; i++) v[i] = rr_i64(r->element[i]);
    queue_conf_t c = {.n_waiting = v[0], .n_inflight = v[1], .n_dead = v[2], .n_done = v[3]};
    qk_stats(out, &c, v[4] + v[5], v[6], v[7]);
    out->keys = v[8];
  }
  if (r) freeReplyObject(r);
  return rc;
}

/* ---- selections ---- */

int redis_queue_items(store_t *s, const char *name, const queue_filter_t *f,
                      queue_item_list_t *out) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  ra_filter(&a, f);
  int rc = redis_eval(RQ(s), RS_QUEUE_ITEMS, &a, &r, "queue items");
  if (!rc) rc = rows_items(r, out);
  if (r) freeReplyObject(r);
  return rc;
}

int redis_queue_requeue(store_t *s, const char *name, const queue_filter_t *f,
                        int64_t due_ms, int64_t now_ms, int64_t *count) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  ra_i64(&a, now_ms);
  ra_i64(&a, due_ms);
  ra_filter(&a, f);
  int rc = redis_eval(RQ(s), RS_QUEUE_REQUEUE, &a, &r, "queue requeue");
  if (!rc) {
    *count = rr_i64(r);
    if (*count) redis_note(RQ(s), STORE_NOTE_QUEUES);
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_queue_purge(store_t *s, const char *name, const queue_filter_t *f, int64_t now_ms,
                      int64_t *count) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, name);
  ra_i64(&a, now_ms);
  ra_filter(&a, f);
  int rc = redis_eval(RQ(s), RS_QUEUE_PURGE, &a, &r, "queue purge");
  if (!rc) *count = rr_i64(r);
  if (r) freeReplyObject(r);
  return rc;
}
