-- Parked outbox rows: a row SNS can never take (too large, characters SNS does not allow,
-- or refused as the sender's fault) is set aside with when and why, so the relay passes
-- it by instead of trying it every round (docs/operations.md, "A parked outbox row").
-- Clearing parked_at has the relay publish the row again.

-- +goose Up
ALTER TABLE outbox ADD COLUMN parked_at timestamptz;
ALTER TABLE outbox ADD COLUMN parked_reason text;
DROP INDEX outbox_unpublished;
-- What the relay has still to publish, oldest first: neither published nor parked.
CREATE INDEX outbox_unpublished ON outbox (id) WHERE published_at IS NULL AND parked_at IS NULL;
CREATE INDEX outbox_parked ON outbox (id) WHERE parked_at IS NOT NULL;

-- +goose Down
DROP INDEX outbox_parked;
DROP INDEX outbox_unpublished;
CREATE INDEX outbox_unpublished ON outbox (id) WHERE published_at IS NULL;
ALTER TABLE outbox DROP COLUMN parked_reason;
ALTER TABLE outbox DROP COLUMN parked_at;
