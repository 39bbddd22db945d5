-- Reservations that expire: a placed reserve-mode order's hold_until (NULL: its
-- reservation never expires, or no longer does), the status expired that the order takes
-- when its hold passed unpaid, and an index of the placed orders with a hold, soonest
-- first, for the due holds that the API, the console and `junbanctl holds reindex` read.

-- +goose Up
ALTER TABLE orders ADD COLUMN hold_until timestamptz;
ALTER TABLE orders DROP CONSTRAINT orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check
    CHECK (status IN ('placed', 'cancelled', 'shipped', 'rejected', 'expired'));
CREATE INDEX orders_hold_due ON orders (hold_until, lcid)
    WHERE status = 'placed' AND hold_until IS NOT NULL;

-- +goose Down
DROP INDEX orders_hold_due;
ALTER TABLE orders DROP CONSTRAINT orders_status_check;
-- An expired order keeps its row: the narrower check leaves the rows already there
-- unchecked (NOT VALID) and holds for every row written from then on.
ALTER TABLE orders ADD CONSTRAINT orders_status_check
    CHECK (status IN ('placed', 'cancelled', 'shipped', 'rejected')) NOT VALID;
ALTER TABLE orders DROP COLUMN hold_until;
