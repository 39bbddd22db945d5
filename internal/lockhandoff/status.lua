-- status.lua: the statuses the scripts answer first in their replies, prepended (scripts.go)
-- to every script that answers one, so that each value is written once. scripts.go names
-- the same values (status*), and its statusErrors maps every negative one to its error.
--
-- Zero and positive: the call did what it was sent for.
local STATUS_DONE = 0   -- handoff: wait was empty; proc cleared, lock deleted
local STATUS_EMPTY = 0  -- resume: no backlog; nothing written
local STATUS_TURN = 1   -- take, resume: the caller holds the turn, on the entry returned
local STATUS_NEXT = 1   -- handoff: the turn moved on to the entry returned
local STATUS_MARKED = 1 -- skip: the envelope in proc is marked for quarantine
local STATUS_QUEUED = 2 -- take: the envelope was appended to wait
-- Negative: the call changed nothing (but the trims before a failed one).
local STATUS_LOST = -1        -- handoff, leave, attempts: lock is not the caller's
local STATUS_TRIM_FAILED = -2 -- handoff, leave: a committed trim failed (see trims.lua)
local STATUS_STALE = -3       -- handoff: seq moved on, this step ran already
local STATUS_BUSY = -4        -- resume: another holder has the turn
local STATUS_GONE = -5        -- attempts: proc no longer holds that entry
local STATUS_FULL = -6        -- take: wait is at its bound
local STATUS_NO_ENVELOPE = -7 -- skip: proc is empty
