package platform

import (
	"errors"
	"fmt"
	"time"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/logging"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/redisclient"
	"github.com/oncemall/oncemall/pkg/tracing"
)

// Config is the configuration every service shares. A service embeds it in
// its own Config, whose Validate joins Config.Validate with the checks of
// the service's own settings.
//
// HTTP_ADDR and MYSQL_DATABASE have no default here: each service's is
// declared by its Service (":"+Port and "oncemall_"+Name).
type Config struct {
	Env      Env    `env:"ONCEMALL_ENV" default:"production" usage:"production; dev allows the published development secrets (make run, compose); lab also allows the incidents' broken variants (make lab, tests)"`
	HTTPAddr string `env:"HTTP_ADDR" usage:"listen address of the service"`
	Database string `env:"MYSQL_DATABASE" usage:"the service's own database (created if missing)"`

	Log       logging.Config
	MySQL     database.Config
	NATS      natsjs.Config
	Redis     redisclient.Config
	HTTP      httpserver.Config
	Admission httpserver.AdmissionConfig
	Events    events.Config
	Outbox    outbox.Config
	Inbox     inbox.Settings
	Jobs      JobsConfig
	Tracing   tracing.Config

	AdminToken      string        `env:"ADMIN_TOKEN" default:"dev-admin-token" usage:"bearer token for the operator endpoints (/admin and the other admin routes); the default works only with ONCEMALL_ENV=dev or lab"`
	InternalToken   string        `env:"INTERNAL_TOKEN" default:"dev-internal-token" usage:"bearer token the services present to each other's /internal endpoints (all services share it); the default works only with ONCEMALL_ENV=dev or lab"`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" default:"15s" usage:"how long a graceful shutdown may take before the process gives up"`
	StartupTimeout  time.Duration `env:"STARTUP_TIMEOUT" default:"60s" usage:"how long to wait for MySQL, NATS and Redis at start-up"`
}

// JobsConfig tunes the scheduled jobs every service runs (see Job).
type JobsConfig struct {
	LockTTL time.Duration `env:"JOB_LOCK_TTL" default:"30s" usage:"expiry of the Redis lock that keeps a job to one replica at a time (refreshed while it runs)"`
}

// The published development values of ADMIN_TOKEN and INTERNAL_TOKEN.
const (
	DevAdminToken    = "dev-admin-token"
	DevInternalToken = "dev-internal-token"
)

// Validate checks the shared settings, each error naming its variable.
func (c Config) Validate() error {
	return errors.Join(
		config.CheckOneOf("ONCEMALL_ENV", c.Env, EnvProduction, EnvDev, EnvLab),
		config.CheckAddr("HTTP_ADDR", c.HTTPAddr),
		database.CheckName("MYSQL_DATABASE", c.Database),
		c.Log.Validate(),
		config.CheckAddr("MYSQL_ADDR", c.MySQL.Addr),
		config.CheckAddr("REDIS_ADDR", c.Redis.Addr),
		c.NATS.Validate(),
		c.Events.Validate(),
		c.Outbox.Validate(),
		c.Inbox.Validate(),
		config.CheckPositive("MYSQL_MAX_OPEN_CONNS", c.MySQL.MaxOpenConns),
		c.HTTP.Validate(),
		c.Admission.Validate(),
		checkAtLeast("JOB_LOCK_TTL", c.Jobs.LockTTL, time.Second),
		c.Tracing.Validate(),
		config.CheckPositive("SHUTDOWN_TIMEOUT", c.ShutdownTimeout),
		config.CheckPositive("STARTUP_TIMEOUT", c.StartupTimeout),
		c.Env.CheckSecret("ADMIN_TOKEN", c.AdminToken, DevAdminToken),
		c.Env.CheckSecret("INTERNAL_TOKEN", c.InternalToken, DevInternalToken),
		checkDistinct(c.AdminToken, c.InternalToken),
	)
}

// Shared returns c. Every service Config embeds Config, so this method is
// what makes it a Settings.
func (c Config) Shared() Config { return c }

func checkAtLeast(name string, v, min time.Duration) error {
	if v < min {
		return &config.Error{Var: name, Value: v.String(), Err: fmt.Errorf("must be at least %s", min)}
	}
	return nil
}

// checkDistinct refuses one secret for both tokens: a service holds the
// internal token to call the others, and must not thereby hold their
// operator endpoints.
func checkDistinct(admin, internal string) error {
	if admin != "" && admin == internal {
		return &config.Error{Var: "INTERNAL_TOKEN", Value: "<redacted>", Err: errors.New("must differ from ADMIN_TOKEN")}
	}
	return nil
}
