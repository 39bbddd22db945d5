package main

import (
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/platform/config"
)

// storesConfig is what the commands that read both Redis and PostgreSQL load from the
// environment, in one Load so that a mistake in either is reported with the other's.
type storesConfig struct {
	config.Redis
	config.Postgres
}

// stores are the environment's Redis and PostgreSQL, opened for one command.
type stores struct {
	// prefix is JUNBAN_KEY_PREFIX: the keys rc holds start with it.
	prefix string
	rc     redis.UniversalClient
	db     *gorm.DB
}

// openStores opens the Redis and the PostgreSQL of the environment; close releases both.
// conns bounds PostgreSQL's pool (0: no bound).
func openStores(conns int) (stores, error) {
	cfg, err := config.Load[storesConfig]()
	if err != nil {
		return stores{}, err
	}
	rc, err := cfg.Redis.Client()
	if err != nil {
		return stores{}, err
	}
	open := cfg.Postgres.Open
	if conns > 0 {
		open = func() (*gorm.DB, error) { return cfg.Postgres.OpenPool(conns) }
	}
	db, err := open()
	if err != nil {
		rc.Close()
		return stores{}, err
	}
	return stores{prefix: cfg.KeyPrefix, rc: rc, db: db}, nil
}

// close closes PostgreSQL, then Redis.
func (s stores) close() {
	if sqlDB, err := s.db.DB(); err == nil {
		sqlDB.Close()
	}
	s.rc.Close()
}
