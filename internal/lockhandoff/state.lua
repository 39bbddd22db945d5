-- state: one consistent look at an entity for the sweeper.
--
-- KEYS[1] lock   KEYS[2] wait   KEYS[3] proc   (see take.lua)
--
-- Returns {lock_exists (0/1), LLEN proc, LLEN wait}.
return {redis.call('EXISTS', KEYS[1]), redis.call('LLEN', KEYS[3]), redis.call('LLEN', KEYS[2])}
