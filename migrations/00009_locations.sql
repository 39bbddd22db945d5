-- Locations: the places a shop keeps stock (docs/ledger.md, "Locations"). Every lot is at
-- one; a lot from before this migration is at the default location, "default".
-- A location's settings (kind, rank, ships, pickup, coordinates, markets, enabled) are
-- kept in locations; lots.location is not a foreign key, so a lot registered at a location
-- the shop has not described yet is kept, as the ledger keeps it.

-- +goose Up
ALTER TABLE lots ADD COLUMN location text NOT NULL DEFAULT 'default';
CREATE INDEX lots_location ON lots (location, sku);
CREATE TABLE locations (
    location   text PRIMARY KEY CHECK (location ~ '^[A-Za-z0-9._-]{1,64}$'),
    kind       text NOT NULL DEFAULT 'warehouse' CHECK (kind IN ('warehouse', 'store')),
    rank       integer NOT NULL DEFAULT 0,
    ships      boolean NOT NULL DEFAULT true,
    pickup     boolean NOT NULL DEFAULT false,
    lat        double precision CHECK (lat BETWEEN -90 AND 90),
    lon        double precision CHECK (lon BETWEEN -180 AND 180),
    markets    text[] NOT NULL DEFAULT '{}',
    enabled    boolean NOT NULL DEFAULT true,
    updated_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((lat IS NULL) = (lon IS NULL))
);
INSERT INTO locations (location) VALUES ('default');

-- +goose Down
DROP TABLE locations;
DROP INDEX lots_location;
ALTER TABLE lots DROP COLUMN location;
