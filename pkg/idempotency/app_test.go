package idempotency_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/redisclient"
	"github.com/oncemall/oncemall/pkg/testkit/authtest"
	"github.com/oncemall/oncemall/pkg/testkit/idempotencytest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// testAppMigrations is the order-like table of the test app. order_no is
// random per execution and nothing else is unique, so every execution of the
// handler leaves a row: only the middleware stands between a retry and a
// duplicate, and the row count shows whether it held.
var testAppMigrations = migrate.Source{Name: "testapp", FS: fstest.MapFS{
	"000001_test_order.up.sql": {Data: []byte(`CREATE TABLE test_order (
		id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
		order_no CHAR(32) NOT NULL,
		user_id VARCHAR(64) NOT NULL,
		sku VARCHAR(64) NOT NULL,
		quantity INT NOT NULL,
		created_at DATETIME(3) NOT NULL,
		UNIQUE KEY uk_test_order_no (order_no)
	) ENGINE=InnoDB`)},
	"000001_test_order.down.sql": {Data: []byte(`DROP TABLE test_order`)},
	// test_message stands for the outbox row (order.created) the real
	// POST /orders writes in the same transaction as the order.
	"000002_test_message.up.sql": {Data: []byte(`CREATE TABLE test_message (
		id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
		message_no CHAR(32) NOT NULL,
		subject VARCHAR(64) NOT NULL,
		body JSON NOT NULL,
		created_at DATETIME(3) NOT NULL,
		UNIQUE KEY uk_test_message_no (message_no)
	) ENGINE=InnoDB`)},
	"000002_test_message.down.sql": {Data: []byte(`DROP TABLE test_message`)},
}}

// callerIDs are the user ids of the callers the tests name: the tokens the
// test app's issuer mints for them carry these ids, and the middleware
// scopes keys by them.
var callerIDs = map[string]uint64{"u1": 1, "alice": 2, "bob": 3}

// testApp is a small service: POST /orders writes an order and its
// order.created message and completes the idempotency record in the same
// transaction, the way the order service does.
type testApp struct {
	db      *gorm.DB
	rdb     *redis.Client
	prefix  string
	mw      *idempotency.Middleware
	reg     *prometheus.Registry
	handler http.Handler
	// iss issues the callers' tokens, which auth.Middleware verifies in
	// front of every route; tokens caches one per caller.
	iss    *authtest.Issuer
	tb     testing.TB
	mu     sync.Mutex
	tokens map[string]string

	// delay holds each transaction open, so duplicates arrive while the first
	// request is processing.
	delay time.Duration
	// failures is the number of upcoming executions that fail with a 500
	// after their business write (which then rolls back).
	failures atomic.Int32
	// panics is the number of upcoming executions that panic.
	panics atomic.Int32
	// lostAcks is the number of upcoming executions that commit but then
	// answer 500, as when the COMMIT acknowledgement is lost on the wire.
	lostAcks atomic.Int32
	// hold, when set, parks the next execution inside its transaction until
	// it is closed; entered is signalled once it is parked. With holdLate
	// it parks after CompleteInTx, holding the record's uncommitted row.
	hold, entered chan struct{}
	holdLate      bool

	// inTx installs HandlerInTx instead of Handler.
	inTx bool
}

// guard is one of the middleware's two ways to claim a key.
type guard struct {
	name string
	opt  appOption
	inTx bool
}

var guards = []guard{
	{"claim first", func(*testApp, *idempotency.Config) {}, false},
	{"claim in tx", func(a *testApp, _ *idempotency.Config) { a.inTx = true }, true},
}

// eachGuard runs f once with Handler and once with HandlerInTx on the test
// app's routes: both must keep every promise of the package.
func eachGuard(t *testing.T, f func(t *testing.T, g guard)) {
	for _, g := range guards {
		t.Run(g.name, func(t *testing.T) { f(t, g) })
	}
}

type appOption func(*testApp, *idempotency.Config)

// withDeadRedis points the entry layer at a port nobody listens on.
func withDeadRedis() appOption {
	return func(a *testApp, _ *idempotency.Config) {
		a.rdb = redisclient.New(redisclient.Config{Addr: "127.0.0.1:1"})
	}
}

// withServerSidePrepare reopens the database without the driver's
// interpolateParams (which the project's DSN sets), so every statement with
// arguments costs a prepare, an execute and a close. The benchmark shows what
// the setting is worth.
func withServerSidePrepare(t testing.TB) appOption {
	return func(a *testApp, _ *idempotency.Config) {
		var name string
		testenv.Must(t, a.db.Raw("SELECT DATABASE()").Scan(&name).Error)
		dsn := testenv.Config(t).MySQL.DSN(name) + "&interpolateParams=false"
		db, err := gorm.Open(gormmysql.Open(dsn), &gorm.Config{SkipDefaultTransaction: true, TranslateError: true, Logger: logger.Discard})
		testenv.Must(t, err)
		sqlDB, err := db.DB()
		testenv.Must(t, err)
		sqlDB.SetMaxOpenConns(testenv.Config(t).MySQL.MaxOpenConns)
		sqlDB.SetMaxIdleConns(testenv.Config(t).MySQL.MaxIdleConns)
		t.Cleanup(func() { _ = sqlDB.Close() })
		a.db = db
	}
}

func newTestApp(t testing.TB, opts ...appOption) *testApp {
	t.Helper()
	a := &testApp{db: testenv.DB(t, idempotency.Migrations, testAppMigrations), reg: prometheus.NewRegistry(),
		iss: authtest.New(t), tb: t, tokens: map[string]string{}}
	a.rdb, a.prefix = testenv.Redis(t)
	cfg := idempotency.DefaultConfig()
	cfg.EntryPrefix = a.prefix
	for _, o := range opts {
		o(a, &cfg)
	}
	log := testenv.Logger(t)
	var err error
	a.mw, err = idempotency.New(a.db, a.rdb, cfg, log, a.reg)
	testenv.Must(t, err)

	gin.SetMode(gin.TestMode)
	e := gin.New()
	e.ContextWithFallback = true
	e.Use(httpserver.Recovery(log))
	v, err := auth.NewVerifier(a.iss.Config(), auth.Options{})
	testenv.Must(t, err)
	e.Use(v.Middleware(log))
	guard := a.mw.Handler()
	if a.inTx {
		guard = a.mw.HandlerInTx()
	}
	e.POST("/orders", guard, a.createOrder)
	e.POST("/notes", guard, a.createNote)
	// The order handler under the other guard too, for the benchmark.
	e.POST("/intx/orders", a.mw.HandlerInTx(), a.createOrder)
	// The same order handler without the middleware, for the benchmark.
	e.POST("/unguarded/orders", a.createOrder)
	a.handler = e
	return a
}

type orderRequest struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

type orderResponse struct {
	OrderNo  string `json:"order_no"`
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

var errInjected = errors.New("injected transient failure")

func (a *testApp) createOrder(c *gin.Context) {
	var req orderRequest
	if err := c.ShouldBindJSON(&req); err != nil || req.SKU == "" || req.Quantity < 1 {
		problem.Abort(c, http.StatusBadRequest, "sku and a positive quantity are required")
		return
	}
	if a.panics.Add(-1) >= 0 {
		panic("injected panic")
	}
	ctx := c.Request.Context()
	var b [16]byte
	_, _ = rand.Read(b[:])
	orderNo := hex.EncodeToString(b[:])
	var body []byte
	err := a.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(`INSERT INTO test_order (order_no, user_id, sku, quantity, created_at) VALUES (?, ?, ?, ?, ?)`,
			orderNo, auth.Subject(c), req.SKU, req.Quantity, time.Now().UTC()).Error; err != nil {
			return err
		}
		var err error
		if body, err = json.Marshal(orderResponse{OrderNo: orderNo, SKU: req.SKU, Quantity: req.Quantity}); err != nil {
			return err
		}
		if err := tx.Exec(`INSERT INTO test_message (message_no, subject, body, created_at) VALUES (?, 'order.created', ?, ?)`,
			orderNo, body, time.Now().UTC()).Error; err != nil {
			return err
		}
		if a.hold != nil && !a.holdLate {
			a.park()
		}
		time.Sleep(a.delay)
		if a.failures.Add(-1) >= 0 {
			return errInjected
		}
		// A replay repeats the Location, so it is set before the response
		// is recorded.
		c.Header("Location", "/orders/"+orderNo)
		if err := idempotency.CompleteInTx(ctx, tx, http.StatusCreated, body); err != nil {
			return err
		}
		if a.hold != nil && a.holdLate {
			a.park()
		}
		return nil
	})
	if err == nil && a.lostAcks.Add(-1) >= 0 {
		err = errors.New("invalid connection") // what the driver reports when the ACK never comes
	}
	if err != nil {
		problem.Abort(c, http.StatusInternalServerError, "could not create the order")
		return
	}
	c.Data(http.StatusCreated, idempotency.JSONContentType, body)
}

// park holds the current execution until hold is closed.
func (a *testApp) park() {
	hold, entered := a.hold, a.entered
	a.hold = nil
	close(entered)
	<-hold
}

// createNote has no transaction of its own: the middleware stores its
// response after it returns.
func (a *testApp) createNote(c *gin.Context) {
	var req map[string]any
	if err := c.ShouldBindJSON(&req); err != nil {
		problem.Abort(c, http.StatusBadRequest, "a JSON object is required")
		return
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	c.Header("Location", "/notes/"+hex.EncodeToString(b[:]))
	c.JSON(http.StatusCreated, gin.H{"id": hex.EncodeToString(b[:]), "note": req})
}

func (a *testApp) orders(t testing.TB) int {
	t.Helper()
	var n int64
	testenv.Must(t, a.db.Raw("SELECT COUNT(*) FROM test_order").Scan(&n).Error)
	return int(n)
}

func (a *testApp) records(t testing.TB) int {
	t.Helper()
	var n int64
	testenv.Must(t, a.db.Raw("SELECT COUNT(*) FROM idempotency_record").Scan(&n).Error)
	return int(n)
}

// metric reads a counter from the app's registry; with outcome set, the
// idempotency_requests_total series of that outcome.
func (a *testApp) metric(t testing.TB, name, outcome string) int {
	t.Helper()
	mfs, err := a.reg.Gather()
	testenv.Must(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if outcome == "" {
				return int(m.GetCounter().GetValue())
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return int(m.GetCounter().GetValue())
				}
			}
		}
	}
	t.Fatalf("metric %s{outcome=%q} not registered", name, outcome)
	return 0
}

// insertCrashedClaim leaves behind what a request that crashed under Handler
// leaves for req (user u1): a PROCESSING claim whose lock has run out.
func (a *testApp) insertCrashedClaim(t testing.TB, req idempotencytest.Request) {
	t.Helper()
	now := time.Now().UTC()
	testenv.Must(t, a.db.Exec(`INSERT INTO idempotency_record
		(scope, idem_key, fingerprint, status, owner, locked_until, expire_time, created_at, updated_at)
		VALUES (?, ?, ?, 'PROCESSING', 'crashed-owner-0000000000000000', ?, ?, ?, ?)`,
		"1 POST /orders", req.Key, idempotency.Fingerprint(http.MethodPost, "/orders", req.Body),
		now.Add(-time.Second), now.Add(time.Hour), now, now).Error)
}

func (a *testApp) order(key, user string, body string) idempotencytest.Request {
	return idempotencytest.Request{Path: "/orders", Key: key, Token: a.token(user), Body: []byte(body)}
}

// token is user's access token (user is a key of callerIDs).
func (a *testApp) token(user string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if tok, ok := a.tokens[user]; ok {
		return tok
	}
	id, ok := callerIDs[user]
	if !ok {
		a.tb.Fatalf("caller %q has no user id", user)
	}
	a.tokens[user] = a.iss.Token(a.tb, id)
	return a.tokens[user]
}
