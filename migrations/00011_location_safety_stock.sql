-- Safety stock per location (docs/ledger.md, "Safety stock per location"): the units a
-- location keeps from ship allocations, per SKU. A row is written by the results of
-- inventory.safety_stock_changed that name a location, only over one written at an older
-- SKU version; 0 is a location without one (the row stays, so an older result cannot set
-- it again). The loader reads the rows above 0 into Redis with the SKU.

-- +goose Up
CREATE TABLE sku_location_safety (
    sku          text   NOT NULL,
    location     text   NOT NULL CHECK (location ~ '^[A-Za-z0-9._-]{1,64}$'),
    safety_stock bigint NOT NULL CHECK (safety_stock >= 0),
    version      bigint NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sku, location)
);

-- +goose Down
DROP TABLE sku_location_safety;
