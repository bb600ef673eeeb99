package lab

// The coupon service served whole for another service's lab or benchmark:
// built by its own assembly on the platform, as cmd/coupon runs it, on a
// fresh database, on loopback HTTP.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// Server is the coupon service on a throwaway database, served at URL.
type Server struct {
	// URL is the service's base URL: the order service's COUPON_URL.
	URL string
	DB  *gorm.DB
	app *app.App
	// Declared is what its assembly declared.
	Declared platform.Declarations
	stop     func() error
}

// Serve runs the coupon service with its defaults (the fixed deduction, the
// production lock TTL), assembled as cmd/coupon assembles it but for the
// order service, which it does not call (its sweeper finds it unavailable
// and leaves every lock alone). It runs in lab mode on the database
// env.Name(suffix), under the event prefix of that name, /internal behind
// internalToken and /admin behind adminToken; its consumers wait for an
// order stream nobody declares. Close stops it and drops the database.
func Serve(ctx context.Context, env lab.Env, suffix, internalToken, adminToken string) (*Server, error) {
	return ServeLocks(ctx, env, suffix, internalToken, adminToken, variant.Fixed)
}

// ServeLocks is Serve with incident 7's lock keeper of mode: variant.Broken
// is BrokenLockKeeper, anything else the fixed one.
func ServeLocks(ctx context.Context, env lab.Env, suffix, internalToken, adminToken string, mode variant.Mode) (*Server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	name := env.Name(suffix)
	vars := map[string]string{
		"ONCEMALL_ENV": "lab", "HTTP_ADDR": addr, "EVENT_SUBJECT_PREFIX": name + ".",
		"MYSQL_ADDR": env.MySQL.Addr, "MYSQL_USER": env.MySQL.User, "MYSQL_PASSWORD": env.MySQL.Password, "MYSQL_DATABASE": name,
		"NATS_URL": env.NATS.URL, "REDIS_ADDR": env.Redis.Addr, "REDIS_PASSWORD": env.Redis.Password,
		"INTERNAL_TOKEN": internalToken, "ADMIN_TOKEN": adminToken, "JOB_LOCK_TTL": "5s",
	}
	svc := assembly.Definition(nil)
	cfg, err := svc.Load(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		return nil, err
	}
	cfg.MySQL = env.MySQL // its pool sizes and driver too, as env.OpenDB would open it
	drop := func() { _ = database.DropDatabase(context.Background(), env.MySQL, name) }
	w, err := platform.Build(ctx, svc, cfg, env.Log)
	if err != nil {
		drop()
		return nil, err
	}
	o := assembly.Options{Orders: noOrderService{}}
	if mode == variant.Broken {
		o.Locks = BrokenLockKeeper{}
	}
	p, err := assembly.Assemble(w, cfg, o)
	if err != nil {
		// Serving a cancelled context shuts down what Build opened.
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		_ = w.Serve(cancelled)
		drop()
		return nil, err
	}
	s := &Server{URL: "http://" + addr, DB: p.Store.DB(), app: p.App, Declared: w.Declared()}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- w.Serve(runCtx) }()
	s.stop = func() error {
		cancel()
		err := <-done
		drop()
		return err
	}
	if err := waitReady(ctx, s.URL, done); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// Close stops the service and drops its database.
func (s *Server) Close() error {
	if s.stop == nil {
		return nil
	}
	stop := s.stop
	s.stop = nil
	return stop()
}

// freeAddr is a loopback address no one listens on.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitReady waits until base answers /readyz, the service stops (its
// error is put back on done), or ctx ends.
func waitReady(ctx context.Context, base string, done chan error) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-done:
			done <- err // for Close, which waits for it
			return fmt.Errorf("the coupon service stopped before it was ready: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("the coupon service at %s was not ready: %w", base, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
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

// CouponState returns the status of coupon id and the order that holds it
// (empty when none), read from the database.
func (s *Server) CouponState(ctx context.Context, id uint64) (status, orderNo string, err error) {
	err = s.DB.WithContext(ctx).Raw("SELECT status, COALESCE(locked_order_no, '') FROM coupons WHERE id = ?", id).
		Row().Scan(&status, &orderNo)
	return status, orderNo, err
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
