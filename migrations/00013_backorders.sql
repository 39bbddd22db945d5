-- Backorders: a SKU's waiting lines (docs/ledger.md, "Waiting demand"), as the results of
-- the operations that queue, fill or dequeue them leave them, so that a SKU loaded again
-- after a Redis data loss keeps its queue. want 0 is a line that left the queue: the row
-- stays, so that an older result cannot queue it again, and its seq still counts for the
-- SKU's last sequence number. queued_at is Unix milliseconds. A row is replaced only by
-- one written at a newer SKU version, as a lot row is.

-- +goose Up
CREATE TABLE backorders (
    sku         text     NOT NULL,
    holder      text     NOT NULL,
    line        text     NOT NULL,
    want        bigint   NOT NULL CHECK (want >= 0),
    mode        text     NOT NULL CHECK (mode IN ('ship', 'reserve')),
    target_date date     NOT NULL,
    class       smallint NOT NULL CHECK (class BETWEEN 0 AND 9),
    seq         bigint   NOT NULL CHECK (seq > 0),
    queued_at   bigint   NOT NULL,
    version     bigint   NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sku, holder, line)
);
CREATE INDEX backorders_waiting ON backorders (sku) WHERE want > 0;

-- +goose Down
DROP TABLE backorders;
