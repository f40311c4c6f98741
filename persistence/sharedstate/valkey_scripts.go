package sharedstate

// Lua scripts. Keys and channels arrive prefixed. Durations are
// milliseconds (PEXPIRE) or microseconds (bucket and window arithmetic).

// incrScript: INCR, and PEXPIRE only when the counter was just created (or
// somehow has no expiry), so the window is fixed. Returns {count, pttl}.
const incrScript = `
local n = redis.call('INCR', KEYS[1])
local ttl = -1
if n ~= 1 then ttl = redis.call('PTTL', KEYS[1]) end
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}
`

// countScript: the counter's raw value (parsed by the caller) and its PTTL;
// {false, 0} when absent.
const countScript = `
local v = redis.call('GET', KEYS[1])
if not v then return {false, 0} end
return {v, redis.call('PTTL', KEYS[1])}
`

// takeTokenScript: a token bucket in a hash {tokens, ts}, refilled on the
// server's clock (TIME, in microseconds), so nodes with skewed clocks agree.
// ARGV: capacity, refill per second, cost, margin ms, max idle ms.
// Returns {1, 0} when taken, else {0, microseconds until cost is available}.
// Scripts with TIME replicate by effects, the default since Redis 5 and in
// every Valkey.
const takeTokenScript = `
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1])
local ts = tonumber(b[2])
if tokens == nil or ts == nil then
  tokens = capacity
  ts = now
end
if now > ts then
  tokens = math.min(capacity, tokens + (now - ts) / 1000000 * rate)
  ts = now
end
tokens = math.min(tokens, capacity)
local ok = 0
local wait = 0
if tokens >= cost then
  tokens = tokens - cost
  ok = 1
else
  wait = math.ceil((cost - tokens) / rate * 1000000)
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%d', ts))
local idle = math.ceil((capacity - tokens) / rate * 1000) + tonumber(ARGV[4])
idle = math.min(idle, tonumber(ARGV[5]))
redis.call('PEXPIRE', KEYS[1], string.format('%d', idle))
return {ok, wait}
`

// windowAddScript: ZADD at (µs) member, drop scores below the cutoff (µs),
// ZCARD, PEXPIRE window (ms). ARGV: at, member, cutoff, window ms.
const windowAddScript = `
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
local n = redis.call('ZCARD', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return n
`

// casScript: SET the key (PX when ARGV[3] is not 0) only when it holds
// ARGV[1] (” meaning absent). ARGV: old, new, ttl ms. Returns {1, ”} when
// swapped, else {0, current} (” when absent).
const casScript = `
local cur = redis.call('GET', KEYS[1])
if not cur then cur = '' end
if cur ~= ARGV[1] then return {0, cur} end
if ARGV[3] == '0' then
  redis.call('SET', KEYS[1], ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
return {1, ''}
`

// markSeenScript: ZADD GT at (µs) member (a member's score only grows),
// drop the lowest-ranked members over the limit, PEXPIRE ttl (ms). ARGV:
// at, member, limit, ttl ms. Returns 1 when the member was new.
const markSeenScript = `
local added = redis.call('ZADD', KEYS[1], 'GT', ARGV[1], ARGV[2])
local n = redis.call('ZCARD', KEYS[1])
local limit = tonumber(ARGV[3])
if n > limit then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - limit - 1) end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return added
`
