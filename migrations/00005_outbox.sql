-- Outbound events (internal/postgres/outbound, docs/outbound.md): the persist-worker writes what a
-- batch of results changed into the outbox in the transaction that applies the batch, and
-- its relay publishes the rows to an SNS topic; junban-api serves them from here too
-- (GET /v1/events).

-- +goose Up
CREATE TABLE outbox (
    -- The row's place in the table; the relay publishes in this order.
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The writing transaction: GET /v1/events serves a row only once every transaction
    -- that began before it ended (txid below the snapshot's xmin), so a page never skips
    -- a row that a slower transaction commits later with a smaller id.
    txid        xid8        NOT NULL DEFAULT pg_current_xact_id(),
    -- The message's stable id: consumers drop a copy by it.
    message_id  uuid        NOT NULL UNIQUE,
    kind        text        NOT NULL,
    -- An order's lcid, or "sku:" and a SKU.
    entity      text        NOT NULL,
    -- The entity's outbound sequence: 1, 2, 3, ... with no gap (outbox_entities.seq).
    seq         bigint      NOT NULL CHECK (seq > 0),
    -- The message as published, byte for byte.
    body        json        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- When the relay had SNS's answer that it took the message; NULL: not yet.
    published_at timestamptz,
    UNIQUE (entity, seq)
);
-- What the relay has still to publish, oldest first.
CREATE INDEX outbox_unpublished ON outbox (id) WHERE published_at IS NULL;
-- GET /v1/events pages in commit order.
CREATE INDEX outbox_txid ON outbox (txid, id);
-- The cleanup removes rows by age.
CREATE INDEX outbox_created ON outbox (created_at);

-- One row per entity that has had an outbound event: its last seq, and the state its last
-- events told (an order's status, allocation, paid and lines; a SKU's figures and stock
-- level), against which the next batch's changes are told. A batch locks the rows of the
-- entities it writes for, in entity order, so two batches of one entity number their
-- events one after the other.
CREATE TABLE outbox_entities (
    entity text   PRIMARY KEY,
    seq    bigint NOT NULL DEFAULT 0,
    state  jsonb  NOT NULL DEFAULT '{}'
);

-- A SKU's low-stock threshold: stock.low when its available-to-ship falls to this or
-- below. NULL: the persist-worker's JUNBAN_STOCK_LOW_THRESHOLD.
ALTER TABLE skus ADD COLUMN low_stock_threshold bigint CHECK (low_stock_threshold >= 0);

-- +goose Down
ALTER TABLE skus DROP COLUMN low_stock_threshold;
DROP TABLE outbox_entities;
DROP TABLE outbox;
