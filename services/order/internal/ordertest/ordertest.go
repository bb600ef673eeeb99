// Package ordertest sets up the order service's use cases for a test: a
// throwaway database with the service's migrations, the real stores, the
// coupon and payment services played by internal/stubs, and the app in the
// configuration the test asks for; plus the few steps most tests start
// from (a product with stock, an order, a payment).
package ordertest

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/couponclient"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/paymentclient"
	"github.com/oncemall/oncemall/services/order/internal/store"
	"github.com/oncemall/oncemall/services/order/internal/stubs"
	"github.com/oncemall/oncemall/services/order/migrations"
)

// InternalToken is the token the stubs accept and the clients send.
const InternalToken = "ordertest-internal-token"

// Config is the use cases' configuration in tests: the service's defaults.
func Config() app.Config {
	return app.Config{
		PayTimeout: 15 * time.Minute, CloseBatch: 100,
		ChunkSize: 100, MaxAllOrNothing: 5000, ReconcileLookback: outbox.DefaultRetention,
	}
}

// Env is one test's order service below HTTP.
type Env struct {
	DB       *gorm.DB
	Orders   *store.Store
	Products *store.Products
	App      *app.App
	Coupons  *stubs.CouponService
	Payments *stubs.PaymentService
	Registry *prometheus.Registry
	// Sends counts the events handed to the outbox relay, one count per
	// committed transaction that added some.
	Sends *atomic.Int64

	cfg app.Config
	ch  app.Choices
}

// New returns an Env on a database of its own with cfg (Config() when
// nil), dropped when the test ends.
func New(t testing.TB, cfg *app.Config) *Env {
	t.Helper()
	return NewWith(t, cfg, app.Choices{})
}

// NewWith is New with the incidents' choices ch (a lab's variants).
func NewWith(t testing.TB, cfg *app.Config, ch app.Choices) *Env {
	t.Helper()
	db := testenv.DB(t, migrations.Source, outbox.Migrations, inbox.Migrations, idempotency.Migrations)
	c := Config()
	if cfg != nil {
		c = *cfg
	}
	e := &Env{DB: db, Sends: &atomic.Int64{}, cfg: c, ch: ch, Registry: prometheus.NewRegistry()}
	send := func(...outbox.Message) { e.Sends.Add(1) }
	e.Orders, e.Products = store.New(db, send), store.NewProducts(db, send)
	e.Coupons = stubs.NewCouponService(InternalToken)
	t.Cleanup(e.Coupons.Close)
	e.Payments = stubs.NewPaymentService(InternalToken)
	t.Cleanup(e.Payments.Close)
	e.App = e.NewApp(t, c)
	return e
}

// NewApp returns another App over the Env's database and stubs, with cfg:
// a second replica of the service, or the same one in another mode.
func (e *Env) NewApp(t testing.TB, cfg app.Config) *app.App {
	t.Helper()
	return e.NewAppOn(t, e.Orders, cfg)
}

// NewAppOn is NewApp over orders, a store that wraps the Env's to inject
// what a test needs between two steps of a transaction.
func (e *Env) NewAppOn(t testing.TB, orders order.Store, cfg app.Config) *app.App {
	t.Helper()
	hc := &http.Client{Timeout: 3 * time.Second}
	a, err := app.New(orders, e.Products,
		couponclient.New(e.Coupons.URL, InternalToken, hc), paymentclient.New(e.Payments.URL, InternalToken, hc),
		e.ch, cfg, testenv.Logger(t), e.Registry)
	testenv.Must(t, err)
	return a
}

// NewAppPaying is NewApp with payments in place of the payment service.
func (e *Env) NewAppPaying(t testing.TB, payments app.Payments) *app.App {
	t.Helper()
	hc := &http.Client{Timeout: 3 * time.Second}
	a, err := app.New(e.Orders, e.Products, couponclient.New(e.Coupons.URL, InternalToken, hc), payments,
		e.ch, e.cfg, testenv.Logger(t), prometheus.NewRegistry())
	testenv.Must(t, err)
	return a
}

// Product creates a product priced price cents with stock units
// available, and returns its id.
func (e *Env) Product(t testing.TB, name string, price int64, stock int) uint64 {
	t.Helper()
	ctx := context.Background()
	p, err := e.App.CreateProduct(ctx, app.CreateProduct{Brand: "test", Name: name, Model: "M-" + name, Price: price})
	testenv.Must(t, err)
	_, err = e.App.SetStock(ctx, p.ID, stock)
	testenv.Must(t, err)
	return p.ID
}

// Stock returns a product's available units.
func (e *Env) Stock(t testing.TB, productID uint64) int {
	t.Helper()
	return e.Count(t, "SELECT COALESCE(MAX(available), 0) FROM product_stock WHERE product_id = ?", productID)
}

// Count runs a query returning one number.
func (e *Env) Count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	testenv.Must(t, e.DB.Raw(query, args...).Row().Scan(&n))
	return n
}

// Reservations returns how many reservations of order no are in status.
func (e *Env) Reservations(t testing.TB, no string, status order.ReservationStatus) int {
	t.Helper()
	return e.Count(t, "SELECT COUNT(*) FROM stock_reservation WHERE order_no = ? AND status = ?", no, string(status))
}

// Status returns order no's status.
func (e *Env) Status(t testing.TB, no string) order.Status {
	t.Helper()
	var s string
	testenv.Must(t, e.DB.Raw("SELECT status FROM orders WHERE order_no = ?", no).Row().Scan(&s))
	return order.Status(s)
}

// Events returns how many outbox rows of subject name order no.
func (e *Env) Events(t testing.TB, subject, no string) int {
	t.Helper()
	return e.Count(t, "SELECT COUNT(*) FROM local_message WHERE topic = ? AND body LIKE ?", subject, "%\""+no+"\"%")
}

// PlaceOrder places an order of user for lines through the use case.
func (e *Env) PlaceOrder(t testing.TB, user uint64, lines ...order.Line) order.Order {
	t.Helper()
	o, err := e.App.CreateOrder(context.Background(), app.CreateOrder{UserID: user, Lines: lines})
	testenv.Must(t, err)
	return o
}

// Pay applies payment.succeeded for o's pay amount the way the consumer
// does: the use case inside one transaction.
func (e *Env) Pay(ctx context.Context, o order.Order, paymentNo string) (bool, error) {
	var paid bool
	err := e.Orders.InTx(ctx, func(tx order.Tx) error {
		var err error
		paid, err = e.App.MarkOrderPaid(ctx, tx, o.No, order.Payment{No: paymentNo, Amount: o.PayAmount, PaidAt: time.Now().UTC()})
		return err
	})
	return paid, err
}
