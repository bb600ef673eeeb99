package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/pkg/redislock"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/payment/internal/app"
	"github.com/oncemall/oncemall/services/payment/internal/httpapi"
	"github.com/oncemall/oncemall/services/payment/internal/orderclient"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
	"github.com/oncemall/oncemall/services/payment/internal/store"
)

// DevSecret is the platform secret the rig and its simulator share: the
// published development value, which ONCEMALL_ENV=lab accepts.
const DevSecret = "dev-psp-secret-not-for-production"

// AdminToken guards the rig's /admin endpoints, InternalToken its
// /internal ones.
const (
	AdminToken    = "lab-admin-token"
	InternalToken = "lab-internal-token"
)

// UserID owns the payments InsertPayment inserts.
const UserID = 7

// RigConfig says how to assemble a Rig.
type RigConfig struct {
	// Mode is the callback handler: variant.Fixed or variant.Broken.
	Mode variant.Mode
	// JS, when set, gets an outbox relay publishing to it, with
	// SubjectPrefix (unique per run) before payment.succeeded, as the
	// platform does with EVENT_SUBJECT_PREFIX; the caller declares the
	// stream, natsjs.EventStream(events.Config{SubjectPrefix: SubjectPrefix}, "payment").
	JS            jetstream.JetStream
	SubjectPrefix string
	// Window is the signature timestamp window (default 5m).
	Window time.Duration
	// OrderURL and PSPURL, when set, let POST /payments reach an order
	// service and a platform; without them only the callback path works.
	OrderURL, PSPURL string
	// Lock, when set, is the callback entry lock (fixed mode only).
	Lock *redislock.Client
	// App tunes the use cases (the query and refund settings); the rig sets
	// its notify URLs, the mode and the lock on top.
	App app.Config
	// Wrap, when set, wraps the rig's HTTP handler (the lab report records
	// each callback's answer with it).
	Wrap func(http.Handler) http.Handler
}

// Rig is the payment service's callback path assembled in-process over a
// migrated database: store, use cases, the real HTTP stack on an httptest
// server and, optionally, the outbox relay. The scenarios, the tests and the
// benchmark all drive it; only the order service and the platform are left
// out (payments are inserted directly).
type Rig struct {
	DB    *gorm.DB
	Store *store.Store
	App   *app.App
	// Server serves the payment routes; CallbackURL and RefundCallbackURL
	// are its notification addresses, sent with every charge and refund.
	Server            *httptest.Server
	CallbackURL       string
	RefundCallbackURL string
	Registry          *prometheus.Registry

	stop func()
}

// NewRig assembles a rig over db, which has Migrations applied. Close it when done.
func NewRig(db *gorm.DB, cfg RigConfig, log *slog.Logger) (*Rig, error) {
	if cfg.Window == 0 {
		cfg.Window = 5 * time.Minute
	}
	reg := prometheus.NewRegistry()
	r := &Rig{DB: db, Registry: reg, stop: func() {}}
	send := func(...outbox.Message) {}
	if cfg.JS != nil {
		relay, err := outbox.NewRelay(db, cfg.JS, outbox.Config{SubjectPrefix: cfg.SubjectPrefix}, log, reg)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = relay.Run(ctx); close(done) }()
		r.stop = func() { cancel(); <-done }
		send = relay.Send
	}
	// The server starts first, so that its URL can be the notify_url sent
	// with charges; its handler is set below, before any request can come.
	var handler http.Handler
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { handler.ServeHTTP(w, req) }))
	r.CallbackURL = r.Server.URL + "/payments/callback"
	r.RefundCallbackURL = r.Server.URL + "/payments/refunds/callback"
	stopRelay := r.stop
	r.stop = func() { r.Server.Close(); stopRelay() }

	var orders app.Orders
	if cfg.OrderURL != "" {
		orders = orderclient.New(cfg.OrderURL, InternalToken, &http.Client{Timeout: 5 * time.Second})
	}
	var charges app.Platform
	if cfg.PSPURL != "" {
		charges = psp.NewClient(cfg.PSPURL, &http.Client{Timeout: 5 * time.Second})
	}
	acfg := cfg.App
	acfg.NotifyURL, acfg.RefundNotifyURL = r.CallbackURL, r.RefundCallbackURL
	acfg.Callback, acfg.CallbackLock = cfg.Mode, cfg.Lock != nil
	r.Store = store.New(db, send)
	a, err := app.New(r.Store, orders, charges, cfg.Lock, acfg, log, reg)
	if err == nil {
		err = a.Check(context.Background())
	}
	if err != nil {
		r.stop()
		return nil, err
	}
	// The Idempotency-Key middleware on the database alone (no Redis).
	idem, err := idempotency.New(db, nil, idempotency.DefaultConfig(), log, reg)
	if err != nil {
		r.stop()
		return nil, err
	}
	srv := httpserver.New(httpserver.Options{
		Config:   httpserver.Config{BodyLimitBytes: 1 << 20, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second},
		Logger:   log,
		Registry: reg,
	})
	api, err := httpapi.New(a, httpapi.Options{
		Log: log, Admin: httpserver.AdminAuth(AdminToken), Internal: httpserver.AdminAuth(InternalToken), Idempotency: idem.Handler(),
		Secret: []byte(DevSecret), SignatureWindow: cfg.Window, Registry: reg,
	})
	if err != nil {
		r.stop()
		return nil, err
	}
	api.Register(srv.Engine())
	r.App = a
	handler = srv.Handler()
	if cfg.Wrap != nil {
		handler = cfg.Wrap(handler)
	}
	return r, nil
}

// Close stops the HTTP server and the relay.
func (r *Rig) Close() { r.stop() }

// InsertPayment inserts a WAIT_PAY payment of amount cents of UserID for a
// fresh order ("O" + outTradeNo) and returns it.
func (r *Rig) InsertPayment(ctx context.Context, outTradeNo string, amount int64) (payment.Payment, error) {
	now := time.Now().UTC()
	err := r.DB.WithContext(ctx).Exec(`INSERT INTO payments (out_trade_no, order_no, user_id, amount, status, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, outTradeNo, "O"+outTradeNo, UserID, amount, string(payment.StatusWaitPay), now, now).Error
	if err != nil {
		return payment.Payment{}, fmt.Errorf("insert payment %s: %w", outTradeNo, err)
	}
	return r.Store.Get(ctx, outTradeNo)
}

// Effects are the side effects of the notifications for one payment.
type Effects struct {
	Records int    // rows in payment_transaction and payment_transaction_broken
	Events  int    // payment.succeeded rows in local_message
	Status  string // the payment's status
	// Refunds are its refund rows, RefundEvents its payment.refunded rows,
	// RefundStatus its refund's status ("" without one).
	Refunds      int
	RefundEvents int
	RefundStatus string
}

// Effects counts, in the database, what the notifications for outTradeNo did.
func (r *Rig) Effects(ctx context.Context, outTradeNo string) (Effects, error) {
	var e Effects
	db := r.DB.WithContext(ctx)
	err := errors.Join(
		db.Raw(`SELECT (SELECT COUNT(*) FROM payment_transaction WHERE out_trade_no = ?)
			+ (SELECT COUNT(*) FROM payment_transaction_broken WHERE out_trade_no = ?)`, outTradeNo, outTradeNo).Scan(&e.Records).Error,
		db.Raw(`SELECT COUNT(*) FROM local_message WHERE topic = ?
			AND JSON_UNQUOTE(JSON_EXTRACT(CONVERT(body USING utf8mb4), '$.payment_no')) = ?`, events.PaymentSucceeded, outTradeNo).Scan(&e.Events).Error,
		db.Raw(`SELECT status FROM payments WHERE out_trade_no = ?`, outTradeNo).Scan(&e.Status).Error,
		db.Raw(`SELECT COUNT(*) FROM refund WHERE out_trade_no = ?`, outTradeNo).Scan(&e.Refunds).Error,
		db.Raw(`SELECT COALESCE(MAX(status), '') FROM refund WHERE out_trade_no = ?`, outTradeNo).Scan(&e.RefundStatus).Error,
		db.Raw(`SELECT COUNT(*) FROM local_message WHERE topic = ?
			AND JSON_UNQUOTE(JSON_EXTRACT(CONVERT(body USING utf8mb4), '$.payment_no')) = ?`, events.PaymentRefunded, outTradeNo).Scan(&e.RefundEvents).Error,
	)
	if err != nil {
		return Effects{}, fmt.Errorf("count effects of %s: %w", outTradeNo, err)
	}
	return e, nil
}

// Snapshot is every row count and the payments' states: two equal snapshots
// mean nothing changed in any table.
type Snapshot struct {
	Payments, Transactions, BrokenRecords, Messages, Refunds int
	PaymentStates, RefundStates                              string
}

// Snapshot reads the tables the callback can touch.
func (r *Rig) Snapshot(ctx context.Context) (Snapshot, error) {
	var s Snapshot
	db := r.DB.WithContext(ctx)
	err := errors.Join(
		db.Raw(`SELECT COUNT(*) FROM payments`).Scan(&s.Payments).Error,
		db.Raw(`SELECT COUNT(*) FROM payment_transaction`).Scan(&s.Transactions).Error,
		db.Raw(`SELECT COUNT(*) FROM payment_transaction_broken`).Scan(&s.BrokenRecords).Error,
		db.Raw(`SELECT COUNT(*) FROM local_message`).Scan(&s.Messages).Error,
		db.Raw(`SELECT COALESCE(GROUP_CONCAT(CONCAT(out_trade_no, ':', status, ':', platform_serial, ':', updated_at, ':', COALESCE(order_cancelled_at, '')) ORDER BY id), '') FROM payments`).Scan(&s.PaymentStates).Error,
		db.Raw(`SELECT COUNT(*) FROM refund`).Scan(&s.Refunds).Error,
		db.Raw(`SELECT COALESCE(GROUP_CONCAT(CONCAT(refund_no, ':', status, ':', attempts, ':', updated_at) ORDER BY id), '') FROM refund`).Scan(&s.RefundStates).Error,
	)
	return s, err
}
