// Package redisclient opens the go-redis client every service uses.
package redisclient

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// Config is the Redis part of a service configuration.
type Config struct {
	Addr     string `env:"REDIS_ADDR" default:"127.0.0.1:6379" usage:"Redis host:port"`
	Password string `env:"REDIS_PASSWORD" default:"" usage:"Redis password (empty for the local dev server)"`
	DB       int    `env:"REDIS_DB" default:"0" usage:"Redis database number"`
}

// New returns a client with short timeouts: Redis is the entry layer in this
// project, never the only guard, so a slow Redis must fail fast and let the
// database decide.
func New(cfg Config) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:         cfg.Addr,
		Password:     cfg.Password,
		DB:           cfg.DB,
		DialTimeout:  time.Second,
		ReadTimeout:  500 * time.Millisecond,
		WriteTimeout: 500 * time.Millisecond,
		PoolSize:     64,
		MaxRetries:   1,
	})
}
