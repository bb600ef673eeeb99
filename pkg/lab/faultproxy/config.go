package faultproxy

import (
	"errors"
	"time"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/logging"
)

// Config is the fault proxy's configuration, read from the environment by
// scripts/tools/faultproxy. Tests build it directly, usually with Addr and
// AdminAddr on port 0.
type Config struct {
	Log  logging.Config
	HTTP httpserver.Config

	Addr       string `env:"FAULTPROXY_ADDR" default:":3307" usage:"address the proxy accepts MySQL clients on"`
	Upstream   string `env:"FAULTPROXY_UPSTREAM" default:"127.0.0.1:3306" usage:"MySQL/MariaDB server the proxy forwards to"`
	AdminAddr  string `env:"FAULTPROXY_ADMIN_ADDR" default:":8091" usage:"address of the admin HTTP API (arm, disarm, stats, healthz, metrics)"`
	AdminToken string `env:"ADMIN_TOKEN" default:"dev-admin-token" usage:"bearer token for the admin API (the default is for local development only)"`

	DialTimeout     time.Duration `env:"FAULTPROXY_DIAL_TIMEOUT" default:"5s" usage:"how long to wait for the upstream server when a client connects"`
	ReplyTimeout    time.Duration `env:"FAULTPROXY_REPLY_TIMEOUT" default:"30s" usage:"how long to wait for the server's reply to a COMMIT whose acknowledgement is dropped"`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" default:"15s" usage:"how long a graceful shutdown may take"`
}

// DefaultConfig returns the configuration with every default applied.
func DefaultConfig() Config {
	var c Config
	// Defaults only: an empty lookup cannot produce an error.
	_ = config.LoadFrom(&c, func(string) (string, bool) { return "", false })
	return c
}

// Validate reports every unusable setting, each naming its variable.
func (c Config) Validate() error {
	return errors.Join(
		c.Log.Validate(),
		config.CheckAddr("FAULTPROXY_ADDR", c.Addr),
		config.CheckAddr("FAULTPROXY_UPSTREAM", c.Upstream),
		config.CheckAddr("FAULTPROXY_ADMIN_ADDR", c.AdminAddr),
		config.CheckPositive("FAULTPROXY_DIAL_TIMEOUT", c.DialTimeout),
		config.CheckPositive("FAULTPROXY_REPLY_TIMEOUT", c.ReplyTimeout),
		config.CheckPositive("SHUTDOWN_TIMEOUT", c.ShutdownTimeout),
		config.CheckPositive("HTTP_BODY_LIMIT_BYTES", c.HTTP.BodyLimitBytes),
		checkToken(c.AdminToken),
	)
}

func checkToken(token string) error {
	if token == "" {
		return &config.Error{Var: "ADMIN_TOKEN", Value: "", Err: errors.New("must not be empty: the admin API would refuse every request")}
	}
	return nil
}
