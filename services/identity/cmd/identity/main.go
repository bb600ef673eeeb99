// Command identity runs the oncemall identity service: the users who sign
// in, and the issuer of the access tokens the other services accept (the
// password grant at POST /token, the keys at /.well-known/jwks.json).
// `identity --help` lists the commands and every variable.
package main

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/ratelimit"
	"github.com/oncemall/oncemall/services/identity/internal/app"
	"github.com/oncemall/oncemall/services/identity/internal/config"
	"github.com/oncemall/oncemall/services/identity/internal/httpapi"
	"github.com/oncemall/oncemall/services/identity/internal/store"
	"github.com/oncemall/oncemall/services/identity/internal/user"
	"github.com/oncemall/oncemall/services/identity/migrations"
)

func main() { platform.Main(service) }

var service = platform.Service[config.Config]{
	Name:       "identity",
	Port:       8084,
	Migrations: []migrate.Source{migrations.Source},
	Streams:    []string{}, // it publishes nothing and consumes nothing
	Wire:       wire,
}

// wire builds the signer from IDENTITY_SIGNING_KEY, the login limiter on
// Redis and the use cases; outside production it creates the development
// users; and it declares the routes.
func wire(w *platform.Wiring, cfg config.Config) error {
	key, err := cfg.Key()
	if err != nil {
		return err
	}
	retired, err := cfg.Retired()
	if err != nil {
		return err
	}
	signer, err := auth.NewSigner(key, retired...)
	if err != nil {
		return err
	}
	passwords, err := user.NewPasswords(cfg.BcryptCost)
	if err != nil {
		return err
	}
	limiter, err := ratelimit.New(w.Redis, cfg.LoginLimits())
	if err != nil {
		return err
	}
	a, err := app.New(store.New(w.DB), passwords, signer, limiter, cfg.App(), w.Log)
	if err != nil {
		return err
	}
	if cfg.SeedDevUsers() {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.StartupTimeout)
		defer cancel()
		n, err := a.SeedUsers(ctx, app.DevUsers)
		if err != nil {
			return fmt.Errorf("development users: %w", err)
		}
		w.Log.Info("development users ready", "created", n, "env", cfg.Env)
	}
	w.Log.Info("issuer ready", "issuer", cfg.Issuer, "kid", signer.KeyID(), "audiences", cfg.Audiences)
	w.Routes(httpapi.New(a, httpapi.Options{Log: w.Log, LoginWindow: cfg.LoginWindow}).Register)
	return nil
}
