// Package config holds the payment service's configuration.
package config

import (
	"errors"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/platform"
)

// Config is everything the payment service reads from the environment.
type Config struct {
	Platform platform.Config
	HTTPAddr string `env:"HTTP_ADDR" default:":8083" usage:"listen address of the payment service"`
	DBName   string `env:"MYSQL_DATABASE" default:"oncemall_payment" usage:"the payment service's own database (created if missing)"`
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
	)
}
