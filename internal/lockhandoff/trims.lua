-- trims: the list trims a handler committed with this step (see TrimWithStep in trim.go).
-- This text is prepended to handoff.lua and leave.lua, which call run_trims right after
-- their token check, so a trim runs only while the turn is the caller's.
--
-- KEYS[first_key..] the trimmed lists, in order
-- ARGV[a]           the number of trims; then, for each, how many elements it drops from
--                   the head of its list (LTRIM key n -1)
--
-- Returns nil; or {STATUS_TRIM_FAILED, i, message} when trim i failed. The step must then change nothing:
-- the envelope stays in proc, to be re-run. The trims before i stay done, as the writes of
-- a handler that failed half-way do.
local function run_trims(first_key, a)
  local n = tonumber(ARGV[a])
  for i = 1, n do
    local r = redis.pcall('LTRIM', KEYS[first_key + i - 1], ARGV[a + i], -1)
    if type(r) == 'table' and r.err then
      return {STATUS_TRIM_FAILED, i, r.err}
    end
  end
  return nil
end
