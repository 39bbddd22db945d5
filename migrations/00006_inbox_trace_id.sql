-- The trace a result was decided in (OpenTelemetry, 32 hex digits; '' when the step was
-- not traced), for the order's timeline in junban-api and the console.

-- +goose Up
ALTER TABLE inbox ADD COLUMN trace_id text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE inbox DROP COLUMN trace_id;
