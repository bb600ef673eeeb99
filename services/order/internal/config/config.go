// Package config holds the order service's configuration.
package config

import (
	"errors"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/platform"
)

// Config is everything the order service reads from the environment.
type Config struct {
	Platform platform.Config
	HTTPAddr string `env:"HTTP_ADDR" default:":8081" usage:"listen address of the order service"`
	DBName   string `env:"MYSQL_DATABASE" default:"oncemall_order" usage:"the order service's own database (created if missing)"`

	// Products configures the catalog and its batch copy (product.go).
	Products Products
}

// Load reads the configuration from the environment and validates it.
func Load() (Config, error) {
	var c Config
	if err := pkgconfig.Load(&c); err != nil {
		return Config{}, err
	}
	return c, c.Validate()
}

// Validate reports every unusable setting, each naming its variable.
func (c Config) Validate() error {
	return errors.Join(
		c.Platform.Validate(),
		pkgconfig.CheckAddr("HTTP_ADDR", c.HTTPAddr),
		c.Products.Validate(),
	)
}
