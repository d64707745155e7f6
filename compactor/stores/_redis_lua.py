"""The Lua scripts of the Redis stores.

A script runs atomically on the server, so a check and the write it guards can never be
separated by another client's command: that is what makes the lease fence hold. Scripts
answer ``{status, ...}`` tables; the stores turn a refusal into the error lease.py (or the
entry tree) gives for the state the script saw.

Every write script is idempotent under a retry of the same call (the entry id, branch id or
checkpoint element is chosen by the client first), so a call whose answer was lost with the
connection can be sent again without landing twice.
"""

from __future__ import annotations

READ_PAGE = """
-- KEYS: text, index. ARGV: offset, limit (characters), characters per index entry.
-- Answers {first character of the bytes, the bytes}, or nil for an unknown text.
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
local offset, limit, every = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local header = redis.call('GETRANGE', KEYS[2], 0, 3)
if header == '' then
  -- No index: the text is ASCII, a character is a byte.
  if limit == 0 then return {offset, ''} end
  return {offset, redis.call('GETRANGE', KEYS[1], offset, offset + limit - 1)}
end
local function at(entry)
  local four = redis.call('GETRANGE', KEYS[2], 4 + 4 * entry, 7 + 4 * entry)
  return (struct.unpack('>I4', four))
end
local chars = (struct.unpack('>I4', header))
local first, last = math.min(offset, chars), math.min(offset + limit, chars)
if last <= first then return {first, ''} end
local low, high = math.floor(first / every), math.ceil(last / every)
local stop = -1
if high * every < chars then stop = at(high) - 1 end
return {low * every, redis.call('GETRANGE', KEYS[1], at(low), stop)}
"""

# KEYS 1-4 of every fenced write script: meta, lease, holder, fence.
# ARGV 1-3: the writer's token ('' for an unfenced write), its owner, and the owner of a lease
# to disregard ('' for none: the client passes an owner whose process it saw is gone).
_REFUSAL = """
local function refusal()
  if redis.call('EXISTS', KEYS[1]) == 0 then return {'gone'} end
  local owner, token = unpack(redis.call('HMGET', KEYS[3], 'owner', 'token'))
  if ARGV[1] == '' then
    local live = redis.call('GET', KEYS[2])
    if live and live ~= ARGV[3] then
      return {'held', live, token or redis.call('GET', KEYS[4]) or '0', redis.call('PTTL', KEYS[2])}
    end
  elseif owner ~= ARGV[2] or token ~= ARGV[1] then
    return {'lost', owner or '', token or redis.call('GET', KEYS[4]) or '0'}
  end
  return nil
end
"""

APPEND = (
    _REFUSAL
    + """
-- KEYS 5-8: heads, entries, log, and (for a large payload) its blob.
-- ARGV 4-6: branch, entry id, blob bytes; then the envelope's field-value pairs.
local done = redis.call('HGET', KEYS[6], ARGV[5])
if done then return {'ok', done} end
local why = refusal()
if why then return why end
local head = redis.call('HGET', KEYS[5], ARGV[4])
if not head then return {'branch'} end
local seq = redis.call('HINCRBY', KEYS[1], 'count', 1)
local parent = 'null'
if head ~= '' then parent = '"' .. head .. '"' end
if #KEYS == 8 then redis.call('SET', KEYS[8], ARGV[6], 'NX') end
redis.call('XADD', KEYS[7], '*', 'seq', seq, 'parent_id', parent, unpack(ARGV, 7))
redis.call('HSET', KEYS[5], ARGV[4], ARGV[5])
redis.call('HSET', KEYS[6], ARGV[5], seq .. ' ' .. head)
return {'ok', seq .. ' ' .. head}
"""
)

FORK = (
    _REFUSAL
    + """
-- KEYS 5-7: heads, entries, log. ARGV 4-5: new branch, fork point; then the fork's fields.
if redis.call('HGET', KEYS[5], ARGV[4]) == ARGV[5] then return {'ok'} end
local why = refusal()
if why then return why end
if redis.call('HEXISTS', KEYS[6], ARGV[5]) == 0 then return {'entry'} end
if redis.call('HEXISTS', KEYS[5], ARGV[4]) == 1 then return {'exists'} end
redis.call('HSET', KEYS[5], ARGV[4], ARGV[5])
redis.call('XADD', KEYS[7], '*', unpack(ARGV, 6))
return {'ok'}
"""
)

PUT_CHECKPOINT = (
    _REFUSAL
    + """
-- KEYS 5-6: heads, the branch's checkpoint list. ARGV 4-5: branch, the new element.
-- Answers the list after the put, for the client to choose what keep_last drops.
if not redis.call('LPOS', KEYS[6], ARGV[5]) then
  local why = refusal()
  if why then return why end
  if redis.call('HEXISTS', KEYS[5], ARGV[4]) == 0 then return {'branch'} end
  redis.call('RPUSH', KEYS[6], ARGV[5])
end
return {'ok', redis.call('LRANGE', KEYS[6], 0, -1)}
"""
)

PRUNE = (
    _REFUSAL
    + """
-- KEYS 5: a branch's checkpoint list. ARGV 4...: the elements to drop.
local why = refusal()
if why then return why end
for i = 4, #ARGV do redis.call('LREM', KEYS[5], 1, ARGV[i]) end
return {'ok'}
"""
)

CLAIM = """
-- KEYS: meta, heads, the tenant's session set.
-- ARGV: tenant, user ('' for none), created, schema version, session id.
-- Creates the session for this tenant unless it exists; answers its tenant, user, schema.
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'tenant', ARGV[1], 'created', ARGV[3],
             'schema_version', ARGV[4], 'count', 0)
  if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'user', ARGV[2]) end
  redis.call('HSET', KEYS[2], 'main', '')
  redis.call('SADD', KEYS[3], ARGV[5])
end
return redis.call('HMGET', KEYS[1], 'tenant', 'user', 'schema_version')
"""

ACQUIRE = """
-- KEYS: lease, holder, fence. ARGV: owner, ttl in ms, owner of a lease to disregard.
-- SET NX PX, with NX widened to the owner itself (lease.grant lets an owner take its own
-- lease again) and to a lease whose process the client saw is gone.
local live = redis.call('GET', KEYS[1])
if live and live ~= ARGV[1] and live ~= ARGV[3] then
  local token = redis.call('HGET', KEYS[2], 'token') or redis.call('GET', KEYS[3]) or '0'
  return {'held', live, token, redis.call('PTTL', KEYS[1])}
end
local token = redis.call('INCR', KEYS[3])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[2], 'owner', ARGV[1], 'token', token)
return {'ok', token}
"""

RENEW = """
-- KEYS: lease, holder, fence. ARGV: owner, token, ttl in ms.
-- The lease key may have expired already: the holder, not the clock, decides.
local owner, token = unpack(redis.call('HMGET', KEYS[2], 'owner', 'token'))
if owner ~= ARGV[1] or token ~= ARGV[2] then
  return {'lost', owner or '', token or redis.call('GET', KEYS[3]) or '0'}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return {'ok'}
"""

RELEASE = """
-- KEYS: lease, holder. ARGV: owner, token. Compare-and-delete; the fence keeps its count.
local owner, token = unpack(redis.call('HMGET', KEYS[2], 'owner', 'token'))
if owner ~= ARGV[1] or token ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[2])
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""
