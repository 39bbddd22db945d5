-- Followers of the inbox (loadgen, dashboards, lag queries) read it by commit time.

-- +goose Up
CREATE INDEX inbox_committed_at ON inbox (committed_at);

-- +goose Down
DROP INDEX inbox_committed_at;
