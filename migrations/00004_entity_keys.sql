-- A result is identified by its entity and its event id, as the order-worker identifies it
-- (its done marker is per entity and event id): two orders whose events share an event id
-- are two results. A move is identified as the ledger identifies its operation, by SKU
-- and op id (the ledger keeps an operation's record per SKU), and its index.
--
-- Rows from before stay valid: event ids were unique in the inbox, so (entity, event_id)
-- is unique too, and so is (sku, op_id, idx) where (op_id, idx) was. No foreign key refers
-- to either table. Each move takes the entity of its result's inbox row, which the event
-- id alone named then; a move whose result is not in the inbox (none is written so) gets
-- ''. The UPDATE rewrites every moves row once: run it when the persist-worker is stopped
-- or quiet.

-- +goose Up
ALTER TABLE moves ADD COLUMN entity text NOT NULL DEFAULT '';
UPDATE moves m SET entity = i.entity FROM inbox i WHERE i.event_id = m.event_id;
ALTER TABLE moves ALTER COLUMN entity DROP DEFAULT;
ALTER TABLE moves DROP CONSTRAINT moves_pkey, ADD PRIMARY KEY (sku, op_id, idx);
-- An event's moves are read per entity (the order's timeline).
DROP INDEX moves_event;
CREATE INDEX moves_entity_event ON moves (entity, event_id);

ALTER TABLE inbox DROP CONSTRAINT inbox_pkey, ADD PRIMARY KEY (entity, event_id);
-- Tools that follow the results they sent (loadgen, latency) look event ids up alone.
CREATE INDEX inbox_event_id ON inbox (event_id);

-- +goose Down
-- Fails, and changes nothing, when two results or two moves share the old keys: those
-- rows cannot be held by the old schema.
DROP INDEX inbox_event_id;
ALTER TABLE inbox DROP CONSTRAINT inbox_pkey, ADD PRIMARY KEY (event_id);
DROP INDEX moves_entity_event;
CREATE INDEX moves_event ON moves (event_id);
ALTER TABLE moves DROP CONSTRAINT moves_pkey, ADD PRIMARY KEY (op_id, idx);
ALTER TABLE moves DROP COLUMN entity;
