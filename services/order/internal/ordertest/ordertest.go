// Package ordertest runs the order service for a test as production runs
// it: svctest's configuration and platform.Build, then assembly.Assemble
// with the test's substitutions, on a throwaway database, with the coupon
// and payment services played by internal/stubs; plus the few steps most
// tests start from (a product with stock, an order, a payment).
package ordertest

import (
	"context"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/testkit/authtest"
	"github.com/oncemall/oncemall/pkg/testkit/svctest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/assembly"
	"github.com/oncemall/oncemall/services/order/internal/config"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/stubs"
)

// The tokens of the service's internal routes (the stubs accept the same)
// and of its operator routes.
const (
	InternalToken = "ordertest-internal-token"
	AdminToken    = "ordertest-admin-token"
)

// Service is one test's order service.
type Service struct {
	*assembly.Parts
	// URL is the service's base URL; Handler is what its server serves
	// there, every middleware included, for requests sent in process.
	URL      string
	Handler  http.Handler
	Config   config.Config
	DB       *gorm.DB
	Coupons  *stubs.CouponService
	Payments *stubs.PaymentService
	Registry *prometheus.Registry
	// Issuer is the identity service the customer's and operator's routes
	// trust (AUTH_ISSUER): Token mints a customer's bearer.
	Issuer *authtest.Issuer
	// Env is the environment the service was configured from: a test
	// that runs the service's binary on the same database and event
	// namespace starts it with these (and an address of its own).
	Env map[string]string

	vars   map[string]string
	o      assembly.Options
	wiring *platform.Wiring
}

// Start runs the service in its default configuration with vars set on
// top (ORDER_PAY_TIMEOUT, ...) and o's substitutions. The order-close and
// order-reconcile jobs run once a day: a test runs their passes itself.
func Start(t testing.TB, vars map[string]string, o assembly.Options) *Service {
	t.Helper()
	e := &Service{Coupons: stubs.NewCouponService(InternalToken), Payments: stubs.NewPaymentService(InternalToken), o: o,
		Issuer: authtest.New(t)}
	t.Cleanup(e.Coupons.Close)
	t.Cleanup(e.Payments.Close)
	e.vars = map[string]string{
		"COUPON_URL": e.Coupons.URL, "PAYMENT_URL": e.Payments.URL,
		"INTERNAL_TOKEN": InternalToken, "ADMIN_TOKEN": AdminToken,
		"AUTH_ISSUER": e.Issuer.URL, "AUTH_AUDIENCE": authtest.Audience,
		"ORDER_CLOSE_SCHEDULE": "@every 24h", "ORDER_RECONCILE_SCHEDULE": "@every 24h",
		// The tests race many requests at once: admission control is
		// pkg/httpserver's to test, not theirs.
		"HTTP_MAX_IN_FLIGHT": "0",
	}
	maps.Copy(e.vars, vars)
	svc := assembly.Definition(nil)
	e.Env = svctest.Vars(t, svc, e.vars, "payment")
	e.Config = svctest.Load(t, svc, e.Env)
	parts, w := e.start(t, e.Config)
	e.URL = "http://" + e.Config.HTTPAddr
	e.DB, e.Registry, e.Handler = w.DB, w.Registry, w.Handler()
	e.Parts, e.wiring = parts, w
	return e
}

// Consumer is the service's running inbox consumer name, as its assembly
// declared it (svctest.Consumer).
func (e *Service) Consumer(t testing.TB, name string) *inbox.Consumer {
	t.Helper()
	return svctest.Consumer(t, e.wiring, name)
}

// start assembles and serves the service on cfg.
func (e *Service) start(t testing.TB, cfg config.Config) (*assembly.Parts, *platform.Wiring) {
	t.Helper()
	var wiring *platform.Wiring
	parts, _ := svctest.Start(t, assembly.Definition(nil), cfg, func(w *platform.Wiring, cfg config.Config) (*assembly.Parts, error) {
		wiring = w
		return assembly.Assemble(w, cfg, e.o)
	})
	return parts, wiring
}

// Replica starts another process of the service on the Service's database and
// event namespace, with the same substitutions, and returns its use cases.
func (e *Service) Replica(t testing.TB) *app.App {
	t.Helper()
	cfg := svctest.Config(t, assembly.Definition(nil), e.vars)
	cfg.Database, cfg.Events = e.Config.Database, e.Config.Events
	parts, _ := e.start(t, cfg)
	return parts.App
}

// Token is a customer's access token for user, from the service's issuer.
func (e *Service) Token(t testing.TB, user uint64) string {
	t.Helper()
	return e.Issuer.Token(t, user, auth.RoleCustomer)
}

// Product creates a product priced price cents with stock units
// available, and returns its id.
func (e *Service) Product(t testing.TB, name string, price int64, stock int) uint64 {
	t.Helper()
	ctx := context.Background()
	p, err := e.App.CreateProduct(ctx, app.CreateProduct{Brand: "test", Name: name, Model: "M-" + name, Price: price})
	testenv.Must(t, err)
	_, err = e.App.SetStock(ctx, p.ID, stock)
	testenv.Must(t, err)
	return p.ID
}

// Stock returns a product's available units.
func (e *Service) Stock(t testing.TB, productID uint64) int {
	t.Helper()
	return e.Count(t, "SELECT COALESCE(MAX(available), 0) FROM product_stock WHERE product_id = ?", productID)
}

// Count runs a query returning one number.
func (e *Service) Count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	testenv.Must(t, e.DB.Raw(query, args...).Row().Scan(&n))
	return n
}

// Reservations returns how many reservations of order no are in status.
func (e *Service) Reservations(t testing.TB, no string, status order.ReservationStatus) int {
	t.Helper()
	return e.Count(t, "SELECT COUNT(*) FROM stock_reservation WHERE order_no = ? AND status = ?", no, string(status))
}

// Status returns order no's status.
func (e *Service) Status(t testing.TB, no string) order.Status {
	t.Helper()
	var s string
	testenv.Must(t, e.DB.Raw("SELECT status FROM orders WHERE order_no = ?", no).Row().Scan(&s))
	return order.Status(s)
}

// Events returns how many outbox rows of subject name order no.
func (e *Service) Events(t testing.TB, subject, no string) int {
	t.Helper()
	return e.Count(t, "SELECT COUNT(*) FROM local_message WHERE topic = ? AND body LIKE ?", subject, "%\""+no+"\"%")
}

// PlaceOrder places an order of user for lines through the use case.
func (e *Service) PlaceOrder(t testing.TB, user uint64, lines ...order.Line) order.Order {
	t.Helper()
	o, err := e.App.CreateOrder(context.Background(), app.CreateOrder{UserID: user, Lines: lines})
	testenv.Must(t, err)
	return o
}

// Pay applies payment.succeeded for o's pay amount the way the consumer
// does: the use case inside one transaction.
func (e *Service) Pay(ctx context.Context, o order.Order, paymentNo string) (bool, error) {
	var paid bool
	err := e.Orders.InTx(ctx, func(tx order.Tx) error {
		var err error
		paid, err = e.App.MarkOrderPaid(ctx, tx, o.No, order.Payment{No: paymentNo, Amount: o.PayAmount, PaidAt: time.Now().UTC()})
		return err
	})
	return paid, err
}
