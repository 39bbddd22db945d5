-- Transfers: a SKU's transfers between two locations (docs/ledger.md, "Transfers"), as
-- the results of their operations leave them, so that a SKU loaded again after a Redis
-- data loss keeps its transfers in transit. lots are the source lots the request took
-- from, in its order: [{"source", "transit", "qty"}]. A row is replaced only by one
-- written at a newer SKU version, as a lot row is.

-- +goose Up
CREATE TABLE transfers (
    sku           text NOT NULL,
    transfer_id   text NOT NULL,
    state         text NOT NULL CHECK (state IN ('in_transit', 'received', 'cancelled')),
    from_location text NOT NULL,
    to_location   text NOT NULL,
    lots          jsonb NOT NULL CHECK (jsonb_typeof(lots) = 'array'),
    version       bigint NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sku, transfer_id)
);
CREATE INDEX transfers_in_transit ON transfers (sku) WHERE state = 'in_transit';

-- +goose Down
DROP TABLE transfers;
