-- The warehouse's operations: a lot's defective bucket (units damaged on a count, recalled,
-- or returned broken), and the SKU version each SKU's safety stock was written at.

-- +goose Up
ALTER TABLE lots ADD COLUMN defective bigint NOT NULL DEFAULT 0 CHECK (defective >= 0);
-- A result of inventory.sku_registered or inventory.safety_stock_changed writes the safety
-- stock only where this is older than its version, apart from skus.version (which every
-- result raises): so a settings result persisted after a later allocation's still lands,
-- and an older one never overwrites a newer. 0: no settings result wrote it (an import, or
-- a row from before this migration).
ALTER TABLE skus ADD COLUMN settings_version bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE skus DROP COLUMN settings_version;
ALTER TABLE lots DROP COLUMN defective;
