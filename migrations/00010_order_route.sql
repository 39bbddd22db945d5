-- An order's route: where an order.placed said its lines are allocated from (allocation,
-- ship_to, pickup_location, no_split), kept so that its later order.lines_changed
-- allocates the same way. NULL: the order named none.

-- +goose Up
ALTER TABLE orders ADD COLUMN route jsonb;

-- +goose Down
ALTER TABLE orders DROP COLUMN route;
