-- writes: the writes a handler committed with this step (see Commit in commit.go). This
-- text is prepended to handoff.lua and leave.lua, which call run_writes right after their
-- token check, so a write runs only while the turn is the caller's.
--
-- KEYS[first_key..] the writes' keys, in order
-- ARGV[a]           the number of writes; then, for each write: its command, its number of
--                   keys, its number of other arguments, and those arguments
--
-- Returns the writes' replies; or nil and {-2, i, message} when write i failed. The step
-- must then change nothing: the envelope stays in proc, to be re-run. The writes before
-- i stay done, as those of a handler that failed half-way do.
local function run_writes(first_key, a)
  local n = tonumber(ARGV[a])
  local replies = {}
  local k, j = first_key, a + 1
  for i = 1, n do
    local cmd, nk, na = ARGV[j], tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2])
    j = j + 3
    local argv = {}
    for _ = 1, nk do
      argv[#argv + 1] = KEYS[k]
      k = k + 1
    end
    for _ = 1, na do
      argv[#argv + 1] = ARGV[j]
      j = j + 1
    end
    local r = redis.pcall(cmd, unpack(argv))
    if type(r) == 'table' and r.err then
      return nil, {-2, i, r.err}
    end
    replies[i] = r
  end
  return replies
end

