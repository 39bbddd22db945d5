-- junban's first schema: SKU settings and lots (the ledger loads from these), orders,
-- the inbox of applied results and the append-only ledger of moves.

-- +goose Up
CREATE TABLE skus (
    sku          text PRIMARY KEY,
    safety_stock bigint      NOT NULL DEFAULT 0 CHECK (safety_stock >= 0),
    -- The ledger version of the SKU that the lot rows reflect.
    version      bigint      NOT NULL DEFAULT 0,
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE lots (
    sku         text    NOT NULL REFERENCES skus (sku),
    lot_id      text    NOT NULL,
    kind        text    NOT NULL CHECK (kind IN ('onhand', 'planned')),
    good        boolean NOT NULL DEFAULT true,
    best_before date,
    -- Registration order within the SKU: FEFO tie-break, LIFO key of planned lots.
    reg_seq     bigint  NOT NULL,
    arrives_at  date,
    valid_from  date    NOT NULL,
    valid_to    date    NOT NULL,
    sellable    bigint  NOT NULL DEFAULT 0 CHECK (sellable >= 0),
    reserved    bigint  NOT NULL DEFAULT 0 CHECK (reserved >= 0),
    allocated   bigint  NOT NULL DEFAULT 0 CHECK (allocated >= 0),
    hidden      bigint  NOT NULL DEFAULT 0 CHECK (hidden >= 0),
    shipped     bigint  NOT NULL DEFAULT 0 CHECK (shipped >= 0),
    -- The SKU version this row was written at; results only overwrite it with a newer one.
    version     bigint      NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sku, lot_id),
    CHECK (valid_from <= valid_to)
);

CREATE TABLE orders (
    lcid          text PRIMARY KEY,
    status        text    NOT NULL CHECK (status IN ('placed', 'cancelled', 'shipped', 'rejected')),
    allocation    text    CHECK (allocation IN ('reserved', 'allocated')),
    paid          boolean NOT NULL DEFAULT false,
    mode          text,
    target_date   date,
    lines         jsonb   NOT NULL DEFAULT '[]',
    -- The entity seq of the last applied result: older results never overwrite newer ones.
    seq           bigint      NOT NULL,
    last_event_id text        NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX orders_status ON orders (status);

CREATE TABLE inbox (
    event_id     text PRIMARY KEY,
    entity       text        NOT NULL,
    seq          bigint      NOT NULL,
    type         text        NOT NULL,
    outcome      text        NOT NULL CHECK (outcome IN ('applied', 'rejected')),
    reason       text        NOT NULL DEFAULT '',
    processed_at timestamptz NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inbox_entity_seq ON inbox (entity, seq);
CREATE INDEX inbox_rejected ON inbox (reason) WHERE outcome = 'rejected';

CREATE TABLE moves (
    op_id       text   NOT NULL,
    idx         int    NOT NULL,
    event_id    text   NOT NULL,
    sku         text   NOT NULL,
    lot_id      text   NOT NULL,
    from_bucket text   NOT NULL,
    to_bucket   text   NOT NULL,
    qty         bigint NOT NULL CHECK (qty > 0),
    sku_version bigint NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (op_id, idx)
);
CREATE INDEX moves_sku_lot ON moves (sku, lot_id);
CREATE INDEX moves_event ON moves (event_id);

-- +goose Down
DROP TABLE moves;
DROP TABLE inbox;
DROP TABLE orders;
DROP TABLE lots;
DROP TABLE skus;
