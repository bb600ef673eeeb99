package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/payment/internal/assembly"
	"github.com/oncemall/oncemall/services/payment/internal/config"
	"github.com/oncemall/oncemall/services/payment/internal/messaging"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// DevSecret is the platform secret the lab's service and simulator share:
// the published development value, which ONCEMALL_ENV=lab accepts.
const DevSecret = config.DevPSPSecret

// AdminToken guards the lab service's /admin routes, InternalToken its
// /internal ones (the lab's order service presents it).
const (
	AdminToken    = "lab-admin-token"
	InternalToken = "lab-internal-token"
)

// UserID owns the payments InsertPayment inserts.
const UserID = 7

// Service is the payment service run in process for a scenario, as main
// runs it: platform.Build, the lab's Plug and assembly.Assemble, then Serve,
// on a database and an event prefix of the scenario's own.
type Service struct {
	*assembly.Parts
	// URL is its base URL; CallbackURL and RefundCallbackURL its
	// notification addresses.
	URL, CallbackURL, RefundCallbackURL string
	// Prefix is its EVENT_SUBJECT_PREFIX; Stream the name of the payment
	// stream under it.
	Prefix, Stream string
	stop           func()
}

// Start runs the payment service on env's MySQL, NATS and Redis, on the
// database env.Name(suffix) (dropped by Close) with the lab schema applied
// (Schema), in lab mode, with vars set on top of the lab's settings
// (PAYMENT_CALLBACK_MODE, ORDER_URL, PSP_URL, ...). It returns once the
// service is ready.
func Start(ctx context.Context, env lab.Env, suffix string, vars map[string]string) (*Service, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	name := env.Name(suffix)
	prefix := strings.ToLower(name) + "."
	set := map[string]string{
		"ONCEMALL_ENV": "lab", "HTTP_ADDR": addr, "EVENT_SUBJECT_PREFIX": prefix,
		"MYSQL_ADDR": env.MySQL.Addr, "MYSQL_USER": env.MySQL.User, "MYSQL_PASSWORD": env.MySQL.Password, "MYSQL_DATABASE": name,
		"NATS_URL": env.NATS.URL, "REDIS_ADDR": env.Redis.Addr, "REDIS_PASSWORD": env.Redis.Password,
		"IDEMPOTENCY_REDIS_PREFIX": prefix + "idem:", "JOB_LOCK_TTL": "5s", "SHUTDOWN_TIMEOUT": "10s",
		"ADMIN_TOKEN": AdminToken, "INTERNAL_TOKEN": InternalToken,
		// A storm is admitted whole: what the handler does with it is the
		// scenario, not admission control.
		"HTTP_MAX_IN_FLIGHT": "0",
		"PSP_NOTIFY_URL":     "http://" + addr + "/payments/callback", "PSP_REFUND_NOTIFY_URL": "http://" + addr + "/payments/refunds/callback",
	}
	if env.MySQL.MaxOpenConns > 0 {
		set["MYSQL_MAX_OPEN_CONNS"], set["MYSQL_MAX_IDLE_CONNS"] = strconv.Itoa(env.MySQL.MaxOpenConns), strconv.Itoa(env.MySQL.MaxIdleConns)
	}
	for k, v := range vars {
		set[k] = v
	}
	svc := assembly.Definition(nil)
	cfg, err := svc.Load(func(k string) (string, bool) { v, ok := set[k]; return v, ok })
	if err != nil {
		return nil, err
	}
	s := &Service{URL: "http://" + addr, Prefix: prefix, Stream: events.Config{SubjectPrefix: prefix}.StreamName("payment")}
	s.CallbackURL, s.RefundCallbackURL = s.URL+"/payments/callback", s.URL+"/payments/refunds/callback"
	cleanup := func() {
		_ = database.DropDatabase(context.Background(), env.MySQL, name)
		if nc, err := natsjs.Connect(context.Background(), env.NATS, name, env.Log); err == nil {
			_ = nc.JS.DeleteStream(context.Background(), s.Stream)
			nc.NC.Close()
		}
	}
	w, err := platform.Build(ctx, svc, cfg, env.Log)
	if err != nil {
		cleanup()
		return nil, err
	}
	serveCtx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	s.stop = func() { cancel(); <-served; cleanup() }
	sqlDB, err := w.DB.DB()
	if err == nil {
		err = migrate.Up(ctx, sqlDB, Schema)
	}
	if err == nil {
		var o assembly.Options
		Plug(&o, cfg)
		s.Parts, err = assembly.Assemble(w, cfg, o)
	}
	if err != nil {
		cancel()
		// Serve on a cancelled context shuts down what Build started.
		_ = w.Serve(serveCtx)
		cleanup()
		return nil, err
	}
	go func() { served <- w.Serve(serveCtx) }()
	if err := s.ready(ctx, served); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// ready waits until /readyz answers 200, or the service stops.
func (s *Service) ready(ctx context.Context, served chan error) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		select {
		case err := <-served:
			served <- err // for stop
			return fmt.Errorf("payment service stopped: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("payment service not ready: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
		resp, err := http.Get(s.URL + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
}

// Close stops the service and drops its database and stream.
func (s *Service) Close() { s.stop() }

// HandOrderCancelled gives msg, an order.cancelled event, to the payment
// service's consumer in a transaction of its own (the one the inbox would
// open), for a lab that hands events from one service's outbox to another
// without a relay (incident 6). It returns the consumer's error.
func (s *Service) HandOrderCancelled(ctx context.Context, msg inbox.Message) error {
	c := platform.Bind(s.Store.InboxTx, messaging.OrderCancelled(s.App))
	return s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return c.Handle(ctx, tx, msg) })
}

// Findings runs the payment service's reconciler and returns its counts by
// kind (payment.Kinds): what payment_reconcile_findings would show.
func (s *Service) Findings(ctx context.Context) (map[string]int, error) {
	rep, err := s.App.Reconcile(ctx)
	if err != nil {
		return nil, err
	}
	return rep.Counts(), nil
}

// InsertPayment inserts a WAIT_PAY payment of amount cents of UserID for a
// fresh order ("O" + outTradeNo) and returns it.
func (s *Service) InsertPayment(ctx context.Context, outTradeNo string, amount int64) (payment.Payment, error) {
	return InsertPayment(ctx, s.Parts, outTradeNo, amount)
}

// InsertPayment inserts, through p's database, a WAIT_PAY payment of amount
// cents of UserID for a fresh order ("O" + outTradeNo) and returns it.
func InsertPayment(ctx context.Context, p *assembly.Parts, outTradeNo string, amount int64) (payment.Payment, error) {
	now := time.Now().UTC()
	err := p.DB.WithContext(ctx).Exec(`INSERT INTO payments (out_trade_no, order_no, user_id, amount, status, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, outTradeNo, "O"+outTradeNo, UserID, amount, string(payment.StatusWaitPay), now, now).Error
	if err != nil {
		return payment.Payment{}, fmt.Errorf("insert payment %s: %w", outTradeNo, err)
	}
	return p.Store.Get(ctx, outTradeNo)
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

// CountEffects counts, in db (with Schema applied), what the notifications
// for outTradeNo did.
func CountEffects(ctx context.Context, db *gorm.DB, outTradeNo string) (Effects, error) {
	var e Effects
	db = db.WithContext(ctx)
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

// TakeSnapshot reads the tables a notification can touch in db (with
// Schema applied).
func TakeSnapshot(ctx context.Context, db *gorm.DB) (Snapshot, error) {
	var s Snapshot
	db = db.WithContext(ctx)
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
