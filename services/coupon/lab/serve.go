package lab

// The coupon service served for another service's lab or benchmark: its real
// HTTP API (httpapi over app and store, as cmd/coupon wires it) on a fresh
// database with the service's schema, on loopback HTTP.

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/config"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/httpapi"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
	"github.com/oncemall/oncemall/services/coupon/migrations"
)

// Server is the coupon service's HTTP API on a throwaway database, served by
// an in-process HTTP server at URL.
type Server struct {
	// URL is the service's base URL: the order service's COUPON_URL.
	URL string
	DB  *gorm.DB
	app *app.App
	// close runs in reverse order.
	close []func()
}

// Serve wires the coupon service as cmd/coupon does, with its defaults (the
// fixed deduction, the production lock TTL), on the database
// env.Name(suffix) with the service's own schema (not the incident's), and
// serves its routes on loopback HTTP, /internal behind internalToken and
// /admin behind adminToken. No consumer, job or outbox relay runs: the
// server answers the HTTP API only. Close drops everything.
func Serve(ctx context.Context, env lab.Env, suffix, internalToken, adminToken string) (_ *Server, err error) {
	s := &Server{}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	var cfg config.Config
	if err := pkgconfig.LoadFrom(&cfg, func(string) (string, bool) { return "", false }); err != nil {
		return nil, err
	}
	db, drop, err := env.OpenDB(ctx, suffix, migrations.Source, outbox.Migrations, inbox.Migrations)
	if err != nil {
		return nil, err
	}
	s.close = append(s.close, drop)
	s.DB = db
	// Nothing relays the events of a lab database: there is no relay to
	// wake.
	a, err := app.New(store.New(db), noOrderService{}, cfg.App(), env.Log, prometheus.NewRegistry())
	if err != nil {
		return nil, err
	}
	s.app = a
	srv := httpserver.New(httpserver.Options{Addr: "127.0.0.1:0", Config: httpserver.Config{BodyLimitBytes: 1 << 20},
		Logger: env.Log, Registry: prometheus.NewRegistry()})
	api, err := httpapi.New(a, httpapi.Options{Log: env.Log, Admin: httpserver.AdminAuth(adminToken),
		Internal: httpserver.AdminAuth(internalToken)})
	if err != nil {
		return nil, err
	}
	api.Register(srv.Engine())
	ts := httptest.NewServer(srv.Handler())
	s.close = append(s.close, ts.Close)
	s.URL = ts.URL
	return s, nil
}

// Close stops the server and drops the database.
func (s *Server) Close() {
	for i := len(s.close) - 1; i >= 0; i-- {
		s.close[i]()
	}
	s.close = nil
}

// CreateTemplate creates a coupon template of discount cents off orders of
// at least minOrder cents, and returns its id.
func (s *Server) CreateTemplate(ctx context.Context, name string, discount, minOrder int64) (uint64, error) {
	t, err := s.app.CreateTemplate(ctx, coupon.Template{Name: name, DiscountAmount: discount, MinOrderAmount: minOrder})
	if err != nil {
		return 0, err
	}
	return t.ID, nil
}

// Issue gives userID a new UNUSED coupon of templateID, as the operator
// route POST /admin/coupons does, and returns its id.
func (s *Server) Issue(ctx context.Context, templateID, userID uint64) (uint64, error) {
	c, err := s.app.IssueCoupon(ctx, templateID, userID)
	if err != nil {
		return 0, err
	}
	return c.ID, nil
}

// CountByStatus returns how many coupons are in each status (UNUSED,
// LOCKED, USED), read from the database.
func (s *Server) CountByStatus(ctx context.Context) (map[string]int64, error) {
	var rows []struct {
		Status string
		N      int64
	}
	if err := s.DB.WithContext(ctx).Table("coupons").Select("status, COUNT(*) AS n").Group("status").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("count coupons: %w", err)
	}
	out := map[string]int64{}
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}
