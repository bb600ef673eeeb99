package config

import (
	"errors"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
)

// Products configures the product catalog's batch copy (incident 3); the
// copy mode is Modes.ProductCopy.
type Products struct {
	Workers         int `env:"PRODUCT_COPY_WORKERS" default:"16" usage:"concurrent batch-copy workers (orderly always uses 1)"`
	ChunkSize       int `env:"PRODUCT_COPY_CHUNK_SIZE" default:"100" usage:"products per batch-copy message (1..1000)"`
	MaxAllOrNothing int `env:"PRODUCT_COPY_MAX_ALL_OR_NOTHING" default:"5000" usage:"largest all-or-nothing batch copy, created in one transaction (1..5000)"`
}

// Validate reports every unusable product setting.
func (p Products) Validate() error {
	return errors.Join(
		pkgconfig.CheckPositive("PRODUCT_COPY_WORKERS", p.Workers),
		pkgconfig.CheckRange("PRODUCT_COPY_CHUNK_SIZE", p.ChunkSize, 1, 1000),
		pkgconfig.CheckRange("PRODUCT_COPY_MAX_ALL_OR_NOTHING", p.MaxAllOrNothing, 1, 5000),
	)
}
