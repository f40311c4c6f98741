package sharedstate

import (
	"fmt"

	"svc/runstate"
)

// The Lua scripts of the cluster's run state (runs_valkey.go).

// runLua is the fold shared by the run scripts: runstate's Run.Apply,
// Run.Settle, Run.Tighten, Agent.Apply and Agent.Settle, field for field.
// KEYS: run, agent, epoch, parent. ARGV: op, now (ms), idle TTL (ms), max
// age (ms), then the op's argument.
var runLua = fmt.Sprintf(`
local MAXTOOLS, MAXLABELS, MAXSUMS, MAXAGENTS, RECENT, DEDUP = %d, %d, %d, %d, %d, %d
local W60, S60, W1H, S1H = %d, %d, %d, %d
local now = tonumber(ARGV[2])
local idle = tonumber(ARGV[3])
local maxage = tonumber(ARGV[4])

local function count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

local function live(r)
  return (now - r.la) < idle and (now - r.cr) < maxage
end

local function toolkey(t, a)
  return string.len(t) .. ':' .. t .. '/' .. a
end

local function taint(r, level, src)
  if level > (r.lv or 0) then r.lv = level end
  r.so = r.so or {}
  local k = tostring(level)
  if r.so[k] == nil then r.so[k] = src end
end

local function bump(slots, width, n, at, d)
  slots = slots or {}
  local idx = math.floor(at / width)
  local key = tostring(idx %% n)
  local s = slots[key]
  if s == nil or s.i ~= idx then
    if s == nil or s.i < idx then
      s = {i = idx, c = 0, m = 0, d = 0, dn = 0, rs = 0, nr = 0, lv = 0}
      slots[key] = s
    end
  end
  s.c = s.c + (d.c or 0)
  s.m = s.m + (d.m or 0)
  s.d = s.d + (d.d or 0)
  s.dn = s.dn + (d.dn or 0)
  s.rs = s.rs + (d.rs or 0)
  s.nr = s.nr + (d.nr or 0)
  if (d.lv or 0) > s.lv then s.lv = d.lv end
  return slots
end

local function apply(r, a)
  if a.id ~= '' and r.at ~= nil and r.at[a.id] ~= nil then return true end
  if (r.sq or 0) == 0 then
    r.cr = a.at
    r.ow = a.ag
    r.pa = a.pid
    if a.pl > 0 then
      r.ih = a.pl
      taint(r, a.pl, {s = 0, t = '', a = '', v = 'parent_run', at = a.at})
    end
  end
  r.sq = (r.sq or 0) + 1
  local seq = r.sq
  r.la = a.at
  r.ag = r.ag or {}
  if r.ag[a.ag] == nil and count(r.ag) < MAXAGENTS then r.ag[a.ag] = seq end
  r.mu = (r.mu or 0) + a.m
  r.de = (r.de or 0) + a.d
  r.eg = (r.eg or 0) + a.e
  if a.lv > 0 then taint(r, a.lv, {s = seq, t = a.t, a = a.a, v = a.via, at = a.at}) end
  for _, l in ipairs(a.lb) do
    r.lb = r.lb or {}
    if r.lb[l] == nil then
      if count(r.lb) >= MAXLABELS then r.tr = 1 else r.lb[l] = seq end
    end
  end
  r.to = r.to or {}
  local k = toolkey(a.t, a.a)
  local t = r.to[k]
  if t ~= nil then
    t.n = t.n + 1
    t.l = seq
    t.at = a.at
  elseif count(r.to) < MAXTOOLS then
    r.to[k] = {t = a.t, a = a.a, n = 1, ok = 0, f = seq, l = seq, at = a.at}
  else
    r.tr = 1
  end
  r.w6 = bump(r.w6, W60, S60, a.at, {c = 1, m = a.m, d = a.d})
  r.wh = bump(r.wh, W1H, S1H, a.at, {c = 1, m = a.m, d = a.d})
  for _, p in ipairs(a.su) do
    r.su = r.su or {}
    local cur = r.su[p[1]]
    if cur ~= nil then
      r.su[p[1]] = string.format('%%.17g', tonumber(cur) + p[2])
    elseif count(r.su) < MAXSUMS then
      r.su[p[1]] = string.format('%%.17g', p[2])
    else
      r.tr = 1
    end
  end
  r.rc = r.rc or {}
  r.rc[tostring(seq %% RECENT)] = {s = seq, t = a.t, a = a.a, m = a.m, lv = a.lv, at = a.at, d = ''}
  if a.id ~= '' then
    r.at = r.at or {}
    r.at[a.id] = seq
    if count(r.at) > DEDUP then
      local oldest, least = nil, nil
      for id, s in pairs(r.at) do
        if least == nil or s < least then oldest, least = id, s end
      end
      r.at[oldest] = nil
    end
  end
  return false
end

local function agentApply(g, a, fresh)
  if (g.cr or 0) == 0 then g.cr = a.at end
  local d = {c = 1, m = a.m, d = a.d, nr = a.nr, lv = a.lv, rs = 0}
  if fresh and a.nr == 0 then d.rs = 1 end
  g.w6 = bump(g.w6, W60, S60, a.at, d)
  g.wh = bump(g.wh, W1H, S1H, a.at, d)
end

local fields = {allow = 'al', deny = 'dn', require_approval = 'ra', redact = 'rd', quarantine = 'q'}

local function settle(r, s)
  r.dc = r.dc or {}
  local dc = r.dc
  local f = fields[s.d]
  if f ~= nil then dc[f] = (dc[f] or 0) + 1 end
  if s.d == 'deny' then
    dc.cd = (dc.cd or 0) + 1
    dc.lr = s.r
  else
    dc.cd = 0
  end
  if s.d == 'allow' or s.d == 'redact' then
    local t = r.to and r.to[toolkey(s.t, s.a)]
    if t ~= nil then t.ok = t.ok + 1 end
    r.al = {t = s.t, a = s.a, at = s.at}
  end
  local e = r.rc and r.rc[tostring(s.s %% RECENT)]
  if e ~= nil and e.s == s.s then e.d = s.d end
end

local function agentSettle(g, s)
  if s.d ~= 'deny' then
    g.cd = 0
    return
  end
  g.cd = (g.cd or 0) + 1
  g.dy = s.at
  g.w6 = bump(g.w6, W60, S60, s.at, {dn = 1})
  g.wh = bump(g.wh, W1H, S1H, s.at, {dn = 1})
end

-- epochState reads the epoch (KEYS[3]): its time in ms and whether the
-- floors are being restored; an absent epoch (a new server, a flush) is
-- created as restoring unless readOnly.
local function epochState(readOnly)
  local v = redis.call('GET', KEYS[3])
  if not v then
    if not readOnly then redis.call('SET', KEYS[3], 'restoring:' .. string.format('%%d', now)) end
    return now, 1
  end
  local st, ms = string.match(v, '^(%%a+):(%%d+)$')
  if st == nil then return now, 1 end
  if st == 'restoring' then return tonumber(ms), 1 end
  return tonumber(ms), 0
end

-- keepFloor raises the run's floor marker (KEYS[5]) to its level once it
-- is untrusted; the marker lives the maximum age.
local function keepFloor(level)
  if level < 5 then return end
  local cur = tonumber(redis.call('GET', KEYS[5]) or '0')
  if level > cur then redis.call('SET', KEYS[5], tostring(level), 'PX', maxage) end
end

local function readRun(key)
  local raw = redis.call('GET', key)
  if not raw then return nil, false end
  local r = cjson.decode(raw)
  if not live(r) then return nil, false end
  return r, raw
end
`, runstate.MaxTools, runstate.MaxLabels, runstate.MaxSums, runstate.MaxAgents, runstate.Recent, runstate.Dedup,
	runstate.Width60, runstate.Slots60, runstate.Width1h, runstate.Slots1h)

// runReserveLua: Reserve. ARGV[5] is the attempt. Returns {run before,
// agent before, dup, seq, restore, run lost, agent lost, parent level,
// floor level, restoring}.
const runReserveLua = `
local a = cjson.decode(ARGV[5])
local epoch, restoring = epochState(false)
local r, rraw = readRun(KEYS[1])
local fresh = r == nil or (r.sq or 0) == 0
if r == nil then r = {} end
local restore, rlost, glost, fl = 0, 0, 0, 0
a.pl = 0
if fresh then
  if now - epoch < idle then
    r.ls = 1
    rlost = 1
  end
  if a.pid ~= '' then
    local p = readRun(KEYS[4])
    if p ~= nil then a.pl = p.lv or 0 end
  end
  fl = tonumber(redis.call('GET', KEYS[5]) or '0')
  if fl > 0 then
    r.pa = a.pid
    if a.pl > 0 then
      r.ih = a.pl
      taint(r, a.pl, {s = 0, t = '', a = '', v = 'parent_run', at = a.at})
    end
    if fl > (r.lv or 0) then taint(r, fl, {s = 0, t = '', a = '', v = 'restored', at = now}) end
    r.ls = 1
  elseif restoring == 1 then
    restore = 1
  end
end
local dup = apply(r, a)
local seq = r.sq
if dup then
  seq = r.at[a.id]
else
  local ttl = math.min(idle, r.cr + maxage - now)
  if ttl < 1 then ttl = 1 end
  redis.call('SET', KEYS[1], cjson.encode(r), 'PX', ttl)
  keepFloor(r.lv or 0)
end
local graw = redis.call('GET', KEYS[2])
local g = {}
if graw then
  g = cjson.decode(graw)
elseif now - epoch < idle then
  g.ls = 1
  glost = 1
end
if not dup then
  agentApply(g, a, fresh)
  redis.call('SET', KEYS[2], cjson.encode(g), 'PX', idle + W1H)
end
return {rraw or '', graw or '', dup and 1 or 0, seq, restore, rlost, glost, a.pl, fl, restoring}
`

// runPeekLua: Peek, read only. ARGV[5] is "1" when the call names a parent
// run. Returns {run, agent, run lost, agent lost, restore, parent level,
// floor level, restoring}.
const runPeekLua = `
local epoch, restoring = epochState(true)
local _, rraw = readRun(KEYS[1])
local graw = redis.call('GET', KEYS[2])
local rlost, glost, restore, pl, fl = 0, 0, 0, 0, 0
if not rraw then
  if now - epoch < idle then rlost = 1 end
  fl = tonumber(redis.call('GET', KEYS[5]) or '0')
  if fl == 0 and restoring == 1 then restore = 1 end
  if ARGV[5] == '1' then
    local p = readRun(KEYS[4])
    if p ~= nil then pl = p.lv or 0 end
  end
end
if not graw and now - epoch < idle then glost = 1 end
return {rraw or '', graw or '', rlost, glost, restore, pl, fl, restoring}
`

// runSettleLua: Settle. ARGV[5] is the settlement. The keys keep their TTL.
const runSettleLua = `
local s = cjson.decode(ARGV[5])
local r = readRun(KEYS[1])
if r ~= nil then
  settle(r, s)
  redis.call('SET', KEYS[1], cjson.encode(r), 'KEEPTTL')
end
local graw = redis.call('GET', KEYS[2])
if graw then
  local g = cjson.decode(graw)
  agentSettle(g, s)
  redis.call('SET', KEYS[2], cjson.encode(g), 'KEEPTTL')
end
return 1
`

// runTightenLua: Tighten. ARGV[5] is the level.
const runTightenLua = `
local lv = tonumber(ARGV[5])
local r = readRun(KEYS[1])
if r ~= nil then
  if lv > (r.lv or 0) then taint(r, lv, {s = 0, t = '', a = '', v = 'restored', at = now}) end
  r.ls = 1
  redis.call('SET', KEYS[1], cjson.encode(r), 'KEEPTTL')
end
keepFloor(lv)
return 1
`

// runSeedLua: Seed. KEYS[1] is the epoch, KEYS[2..] floor markers; ARGV[5..]
// pairs of (level, ms to live) per marker, then "1" to mark the floors
// restored (the epoch keeps its time).
const runSeedLua = `
for i = 2, #KEYS do
  local lv = tonumber(ARGV[5 + (i - 2) * 2])
  local ttl = tonumber(ARGV[6 + (i - 2) * 2])
  local cur = tonumber(redis.call('GET', KEYS[i]) or '0')
  if lv > cur and ttl > 0 then redis.call('SET', KEYS[i], tostring(lv), 'PX', ttl) end
end
if ARGV[#ARGV] == '1' then
  local v = redis.call('GET', KEYS[1])
  local ms = now
  if v then
    local _, t = string.match(v, '^(%a+):(%d+)$')
    if t ~= nil then ms = tonumber(t) end
  end
  redis.call('SET', KEYS[1], 'ready:' .. string.format('%d', ms))
end
return 1
`
