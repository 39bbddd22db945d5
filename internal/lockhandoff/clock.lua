-- clock.lua: the server's clock, prepended (scripts.go) to every script that reads it, so
-- that all of them read it one way.

-- nowMillis returns Redis's time in milliseconds since 1970, as a string of digits: the
-- form the entries ("<ms>:<envelope>") and the attempt records store.
local function nowMillis()
  local t = redis.call('TIME')
  return t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
end

