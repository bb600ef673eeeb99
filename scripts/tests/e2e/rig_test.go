package e2e_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/scripts/tests/proctest"
	"github.com/oncemall/oncemall/services/psp-sim/pspsim"
)

func TestMain(m *testing.M) { proctest.Main(m) }

// The programs every rig runs, built together by one go command.
var programs = []string{"services/order/cmd/order", "services/coupon/cmd/coupon", "services/payment/cmd/payment", "services/psp-sim/cmd/psp-sim",
	"services/identity/cmd/identity"}

// rigIssuer is the iss of every rig's identity service, the one its
// services accept: the same in every rig, so that as mints tokens for any
// of them; each service fetches its own rig's keys (AUTH_JWKS_URL).
const rigIssuer = "http://identity.e2e.invalid"

// flowDeadline bounds every wait of a flow: far above what a step takes on
// a loaded machine, so that only a broken step reaches it.
const flowDeadline = 40 * time.Second

// The tokens the rigs run with: ADMIN_TOKEN's and INTERNAL_TOKEN's
// development defaults, the ones `make run` uses, so that the "Buy
// something" commands run unchanged against a rig.
const (
	adminToken    = "dev-admin-token"
	internalToken = "dev-internal-token"
)

// service is one started program with its database (nil for psp-sim).
type service struct {
	*proctest.Process
	db *sql.DB
}

// rigEnv is what a rig's programs run with on top of what every rig sets.
type rigEnv struct {
	// coupon starts the coupon service; without it orders take no coupon.
	coupon bool
	// callbackLock says the payment service runs with
	// PAYMENT_CALLBACK_LOCK=true (set it in payment too).
	callbackLock bool
	// order, coupon, payment and psp are each program's own settings.
	order, couponEnv, payment, psp []string
}

// rig is a set of the programs on free ports, each service with its own
// throwaway database, all under one event prefix no other run uses, and
// what the tests need to drive and inspect them.
type rig struct {
	order, coupon, payment, psp service
	identity                    service
	js                          jetstream.JetStream
	ev                          events.Config
	callbackLock                bool

	// payMu serialises "file a simulator plan for the next charge, then
	// pay": the payment service makes the out_trade_no, so a plan cannot
	// name it and is taken by whichever charge comes next.
	payMu sync.Mutex
}

// startRig builds the programs (once per test binary), starts them and
// waits until every one is ready.
func startRig(t *testing.T, env rigEnv) *rig {
	t.Helper()
	began := time.Now()
	bins := proctest.BuildAll(t, programs...)
	built := time.Since(began)
	bin := map[string]string{}
	for i, p := range programs {
		bin[p[strings.LastIndexByte(p, '/')+1:]] = bins[i]
	}

	sfx := testenv.RandomSuffix(8)
	r := &rig{ev: events.Config{SubjectPrefix: "e2e" + sfx + "."}, callbackLock: env.callbackLock}
	// Streams are deleted after the processes are stopped (cleanups run
	// last-registered first).
	nc := testenv.NATS(t)
	r.js = nc.JS
	for _, subject := range []string{events.OrderPaid, events.PaymentSucceeded, events.ProductBatchCopy} {
		testenv.DeleteStreamAtCleanup(t, r.js, r.ev.StreamName(subject))
	}
	_, redisPrefix := testenv.Redis(t)

	addr := map[string]string{}
	for _, name := range []string{"order", "coupon", "payment", "psp-sim", "identity"} {
		addr[name] = testenv.FreeAddr(t)
	}
	url := func(name string) string { return "http://" + addr[name] }
	common := []string{
		"EVENT_SUBJECT_PREFIX=" + r.ev.SubjectPrefix, "ADMIN_TOKEN=" + adminToken, "INTERNAL_TOKEN=" + internalToken,
		"STARTUP_TIMEOUT=30s", "SHUTDOWN_TIMEOUT=10s", "LOG_LEVEL=debug",
		"OUTBOX_POLL_SCHEDULE=@every 1s", "IDEMPOTENCY_REDIS_PREFIX=" + redisPrefix + "idem:",
		// The job locks carry the event prefix; a short expiry bounds how
		// long a killed run holds one.
		"JOB_LOCK_TTL=5s",
		// The MariaDB server is shared with every other test: six services
		// of two rigs take at most 36 of its connections.
		"MYSQL_MAX_OPEN_CONNS=6", "MYSQL_MAX_IDLE_CONNS=2",
		// Every request admitted: these tests count what the handlers make
		// of each copy of a storm (60 callbacks at once would otherwise be
		// partly refused 503 by admission control, which pkg/httpserver's
		// tests and the load generator's overload phases prove).
		"HTTP_MAX_IN_FLIGHT=0",
		// The customers sign in at the rig's identity service, which
		// signs with the development key in dev (as() mints with it too).
		"AUTH_ISSUER=" + rigIssuer, "AUTH_JWKS_URL=" + url("identity") + auth.JWKSPath,
	}
	withDB := func(name string, env ...string) service {
		cfg, db := testenv.NewDatabase(t)
		p := proctest.Start(t, name, bin[name], addr[name],
			append(append([]string{"HTTP_ADDR=" + addr[name], "MYSQL_DATABASE=" + db}, common...), env...)...)
		sqlDB, err := sql.Open("mysql", cfg.DSN(db))
		if err != nil {
			t.Fatal(err)
		}
		sqlDB.SetMaxOpenConns(2)
		t.Cleanup(func() { sqlDB.Close() })
		return service{Process: p, db: sqlDB}
	}

	r.psp = service{Process: proctest.Start(t, "psp-sim", bin["psp-sim"], addr["psp-sim"], append([]string{
		"PSP_HTTP_ADDR=" + addr["psp-sim"], "ONCEMALL_ENV=lab", "PSP_SECRET=e2e-psp-secret-" + sfx, "PSP_ADMIN_TOKEN=" + pspAdminToken,
		"PSP_CALLBACK_URL=" + url("payment") + "/payments/callback",
		"PSP_REFUND_CALLBACK_URL=" + url("payment") + "/payments/refunds/callback",
		"PSP_RETRY_SCHEDULE=100ms,200ms,300ms,500ms,1s,1s,2s", "PSP_NOTIFY_DELAY=10ms", "LOG_LEVEL=debug",
	}, env.psp...)...)}
	r.identity = withDB("identity", "IDENTITY_ISSUER="+rigIssuer)
	r.order = withDB("order", append([]string{"COUPON_URL=" + url("coupon"), "PAYMENT_URL=" + url("payment")}, env.order...)...)
	if env.coupon {
		r.coupon = withDB("coupon", append([]string{"ORDER_URL=" + url("order"), "COUPON_RETRY_SCHEDULE=@every 1s", "COUPON_RETRY_BACKOFF=200ms"},
			env.couponEnv...)...)
	}
	r.payment = withDB("payment", append([]string{
		"PSP_URL=" + url("psp-sim"), "ORDER_URL=" + url("order"), "PSP_SECRET=e2e-psp-secret-" + sfx,
	}, env.payment...)...)

	r.psp.WaitStatus(t, "/healthz", http.StatusOK, flowDeadline)
	r.identity.WaitStatus(t, "/readyz", http.StatusOK, flowDeadline)
	for _, s := range r.services() {
		s.WaitStatus(t, "/readyz", http.StatusOK, flowDeadline)
	}
	t.Logf("rig ready after %s (%s of it building)", time.Since(began).Round(time.Millisecond), built.Round(time.Millisecond))
	return r
}

// services lists the rig's services (not the simulator, nor the identity
// service, which has no reconciler).
func (r *rig) services() []service {
	out := []service{r.order}
	if r.coupon.Process != nil {
		out = append(out, r.coupon)
	}
	return append(out, r.payment)
}

// finish asks every reconciler, which must find nothing, checks the
// programs' logs and dead letters, and stops every program with SIGTERM,
// the simulator first (no more deliveries), each exiting with status 0.
func (r *rig) finish(t *testing.T) {
	t.Helper()
	var payRec struct {
		Empty bool `json:"empty"`
	}
	st, raw := call(t, "GET", r.payment.URL("/admin/reconcile"), admin, nil, &payRec)
	want(t, "payment reconcile", st, raw, http.StatusOK)
	if !payRec.Empty {
		t.Errorf("payment reconciliation not empty: %s", raw)
	}
	for _, s := range r.services()[:len(r.services())-1] {
		var rec struct {
			Anomalies []json.RawMessage `json:"anomalies"`
		}
		st, raw = call(t, "GET", s.URL("/admin/reconcile"), admin, nil, &rec)
		want(t, s.Name+" reconcile", st, raw, http.StatusOK)
		if rec.Anomalies == nil || len(rec.Anomalies) != 0 {
			t.Errorf("%s reconciliation: %s, want {\"anomalies\":[]}", s.Name, raw)
		}
	}
	// The reconcilers answer only from behind the operator's token, so the
	// empty answers above came from behind the guard.
	for _, s := range r.services() {
		st, raw = call(t, "GET", s.URL("/admin/reconcile"), map[string]string{"Authorization": "Bearer wrong"}, nil, nil)
		want(t, s.Name+" reconcile with a wrong token", st, raw, http.StatusUnauthorized)
	}
	for _, s := range []service{r.order, r.coupon} {
		if s.Process == nil {
			continue
		}
		if n := count(t, s.db, "SELECT COUNT(*) FROM dead_message"); n != 0 {
			t.Errorf("%s: %d dead letters, want 0", s.Name, n)
		}
	}

	r.psp.Stop(t, 15*time.Second)
	for _, s := range r.services() {
		s.Stop(t, 20*time.Second)
		if !strings.Contains(s.Stdout(), `"msg":"shutdown complete"`) {
			t.Errorf("%s: no \"shutdown complete\" log line", s.Name)
		}
	}
}

// admin is the operator's header.
var admin = map[string]string{"Authorization": "Bearer " + adminToken}

// devSigner signs as the rigs' identity services do in dev.
var devSigner = sync.OnceValues(auth.DevSigner)

// as is the headers of a request by customer userID, signed in: a bearer
// token of rigIssuer, signed with the development key.
func as(userID uint64, more ...string) map[string]string {
	s, err := devSigner()
	var tok string
	if err == nil {
		tok, err = s.Mint(rigIssuer, "oncemall", userID, time.Hour, auth.RoleCustomer)
	}
	if err != nil {
		panic("e2e: the development key does not sign: " + err.Error())
	}
	h := map[string]string{"Authorization": "Bearer " + tok}
	for i := 0; i+1 < len(more); i += 2 {
		h[more[i]] = more[i+1]
	}
	return h
}

// client bounds every request, so a hung service fails the test instead of
// stalling it.
var client = &http.Client{Timeout: 10 * time.Second}

// call sends a JSON request and decodes a 2xx JSON answer into out (if not
// nil); it returns the status and the raw body.
func call(t *testing.T, method, url string, headers map[string]string, in, out any) (int, []byte) {
	t.Helper()
	return proctest.JSON(t, context.Background(), client, method, url, headers, in, out)
}

// pspAdminToken is the rig's simulator's PSP_ADMIN_TOKEN; pspAdmin, the
// headers of a call to its switches.
const pspAdminToken = "e2e-psp-admin-token"

var pspAdmin = map[string]string{"Authorization": "Bearer " + pspAdminToken}

// want fails unless status is one of ok.
func want(t *testing.T, what string, status int, raw []byte, ok ...int) {
	t.Helper()
	for _, s := range ok {
		if status == s {
			return
		}
	}
	t.Fatalf("%s: status %d %s, want %v", what, status, raw, ok)
}

// eventually polls cond every 100ms until it reports true, or fails the test
// at flowDeadline with cond's last description.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	testenv.Eventually(t, flowDeadline, 100*time.Millisecond, what, cond)
}

// count runs a COUNT(*) query.
func count(t *testing.T, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// check is one count in a service's database.
type check struct {
	what string
	db   *sql.DB
	q    string
	args []any
	want int
}

// counts runs every check and reports each wrong count.
func counts(t *testing.T, checks ...check) {
	t.Helper()
	for _, c := range checks {
		if n := count(t, c.db, c.q, c.args...); n != c.want {
			t.Errorf("%s: %d, want %d", c.what, n, c.want)
		}
	}
}

// eventsAbout counts a service's outbox rows of subject whose payload names
// orderNo: one per effect, whatever their message ids.
func eventsAbout(s service, subject, orderNo string) (string, *sql.DB, string, []any) {
	return s.Name + " " + subject + " outbox rows", s.db, "SELECT COUNT(*) FROM local_message WHERE topic = ? AND body LIKE ?",
		[]any{subject, `%"order_no":"` + orderNo + `"%`}
}

// outbox is a check of eventsAbout.
func outbox(s service, subject, orderNo string, n int) check {
	what, db, q, args := eventsAbout(s, subject, orderNo)
	return check{what, db, q, args, n}
}

// published returns how many messages of subject the rig's stream holds
// for each order_no.
func (r *rig) published(t *testing.T, subject string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	full := r.ev.SubjectPrefix + subject
	s, err := r.js.Stream(ctx, r.ev.StreamName(subject))
	if err != nil {
		t.Fatalf("stream of %s: %v", subject, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(full))
	if err != nil {
		t.Fatalf("stream of %s: %v", subject, err)
	}
	n := int(info.State.Subjects[full])
	got := map[string]int{}
	if n == 0 {
		return got
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{full}})
	if err != nil {
		t.Fatalf("read %s: %v", full, err)
	}
	for read := 0; read < n; {
		batch, err := cons.Fetch(n-read, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatalf("read %s: %v", full, err)
		}
		for msg := range batch.Messages() {
			var body struct {
				OrderNo string `json:"order_no"`
			}
			if err := json.Unmarshal(msg.Data(), &body); err != nil {
				t.Fatalf("%s message %s: %v", full, msg.Data(), err)
			}
			got[body.OrderNo]++
			read++
		}
		if err := batch.Error(); err != nil || ctx.Err() != nil {
			t.Fatalf("read %s: %d of %d messages: %v %v", full, read, n, err, ctx.Err())
		}
	}
	return got
}

// publishedOnce waits until subject's stream holds a message about orderNo,
// then requires exactly one.
func (r *rig) publishedOnce(t *testing.T, subject, orderNo string) {
	t.Helper()
	var n int
	eventually(t, subject+" on its stream", func() (bool, string) {
		n = r.published(t, subject)[orderNo]
		return n >= 1, fmt.Sprintf("%d messages about %s", n, orderNo)
	})
	if n != 1 {
		t.Errorf("%s: %d messages about order %s on the stream, want 1", subject, n, orderNo)
	}
}

// scrape reads a Prometheus text exposition into series → value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	st, raw := call(t, "GET", url, nil, nil, nil)
	want(t, "GET /metrics", st, raw, http.StatusOK)
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// sumOf adds the series of metric whose labels contain every one of labels.
func sumOf(m map[string]float64, metric string, labels ...string) float64 {
	var sum float64
	for k, v := range m {
		if !strings.HasPrefix(k, metric+"{") {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(k, l)
		}
		if match {
			sum += v
		}
	}
	return sum
}

// The services' answers, as far as the tests read them.
type (
	product struct {
		ID        uint64 `json:"id"`
		Price     int64  `json:"price"`
		Available int    `json:"available"`
	}
	coupon struct {
		ID            uint64 `json:"id"`
		UserID        uint64 `json:"user_id"`
		Status        string `json:"status"`
		LockedOrderNo string `json:"locked_order_no"`
		UsedOrderNo   string `json:"used_order_no"`
	}
	item struct {
		ProductID uint64 `json:"product_id"`
		Name      string `json:"name"`
		UnitPrice int64  `json:"unit_price"`
		Quantity  int    `json:"quantity"`
	}
	order struct {
		OrderNo        string  `json:"order_no"`
		UserID         uint64  `json:"user_id"`
		Status         string  `json:"status"`
		Items          []item  `json:"items"`
		TotalAmount    int64   `json:"total_amount"`
		DiscountAmount int64   `json:"discount_amount"`
		PayAmount      int64   `json:"pay_amount"`
		CouponID       *uint64 `json:"coupon_id"`
		PaymentNo      string  `json:"payment_no"`
		CancelReason   string  `json:"cancel_reason"`
		CancelledAt    *string `json:"cancelled_at"`
	}
	payment struct {
		OutTradeNo     string `json:"out_trade_no"`
		OrderNo        string `json:"order_no"`
		Amount         int64  `json:"amount"`
		Status         string `json:"status"`
		PlatformSerial string `json:"platform_serial"`
	}
)

// newProduct has the operator create a product at price (cents) with
// stock units available; model makes its (name, model) unique.
func (r *rig) newProduct(t *testing.T, model string, price int64, stock int) uint64 {
	t.Helper()
	var p product
	st, raw := call(t, "POST", r.order.URL("/admin/products"), admin,
		map[string]any{"brand": "e2e", "name": "Kettle", "model": model + "-" + testenv.RandomSuffix(6), "price": price}, &p)
	want(t, "create product", st, raw, http.StatusCreated)
	st, raw = call(t, "PUT", r.order.URL(fmt.Sprintf("/admin/products/%d/stock", p.ID)), admin, map[string]any{"available": stock}, nil)
	want(t, "set stock", st, raw, http.StatusOK)
	if got := r.available(t, p.ID); got != stock {
		t.Fatalf("product %d: %d available after setting %d", p.ID, got, stock)
	}
	return p.ID
}

// available is the product's stock as the catalog shows it.
func (r *rig) available(t *testing.T, productID uint64) int {
	t.Helper()
	var p product
	st, raw := call(t, "GET", r.order.URL(fmt.Sprintf("/products/%d", productID)), nil, nil, &p)
	want(t, "get product", st, raw, http.StatusOK)
	return p.Available
}

// newCoupon has the operator create a template (discount off orders from
// minOrder) and issue one coupon of it to userID.
func (r *rig) newCoupon(t *testing.T, userID uint64, discount, minOrder int64) uint64 {
	t.Helper()
	var tmpl struct {
		ID uint64 `json:"id"`
	}
	st, raw := call(t, "POST", r.coupon.URL("/admin/coupon-templates"), admin,
		map[string]any{"name": "e2e off", "discount_amount": discount, "min_order_amount": minOrder}, &tmpl)
	want(t, "create coupon template", st, raw, http.StatusCreated)
	var c coupon
	st, raw = call(t, "POST", r.coupon.URL("/admin/coupons"), admin, map[string]any{"template_id": tmpl.ID, "user_id": userID}, &c)
	want(t, "issue coupon", st, raw, http.StatusCreated)
	if c.Status != "UNUSED" || c.UserID != userID {
		t.Fatalf("issued coupon %+v, want UNUSED for user %d", c, userID)
	}
	return c.ID
}

// coupon is the coupon as its owner sees it.
func (r *rig) getCoupon(t *testing.T, userID, couponID uint64) coupon {
	t.Helper()
	var c coupon
	st, raw := call(t, "GET", r.coupon.URL(fmt.Sprintf("/coupons/%d", couponID)), as(userID), nil, &c)
	want(t, "get coupon", st, raw, http.StatusOK)
	return c
}

// placeOrder has userID order quantity units of productID, with couponID
// unless it is 0, under a fresh Idempotency-Key.
func (r *rig) placeOrder(t *testing.T, userID, productID uint64, quantity int, couponID uint64) order {
	t.Helper()
	body := map[string]any{"items": []map[string]any{{"product_id": productID, "quantity": quantity}}}
	if couponID != 0 {
		body["coupon_id"] = couponID
	}
	var o order
	st, raw := call(t, "POST", r.order.URL("/orders"), as(userID, "Idempotency-Key", "e2e-order-"+testenv.RandomSuffix(12)), body, &o)
	want(t, "place order", st, raw, http.StatusCreated)
	if o.Status != "WAIT_PAY" || o.UserID != userID || o.PayAmount != o.TotalAmount-o.DiscountAmount {
		t.Fatalf("new order %s, want WAIT_PAY for user %d with pay_amount = total - discount", raw, userID)
	}
	return o
}

// getOrder is the order as userID (its owner) sees it.
func (r *rig) getOrder(t *testing.T, userID uint64, orderNo string) order {
	t.Helper()
	var o order
	st, raw := call(t, "GET", r.order.URL("/orders/"+orderNo), as(userID), nil, &o)
	want(t, "get order", st, raw, http.StatusOK)
	return o
}

// getPayment is the payment as its order's owner sees it.
func (r *rig) getPayment(t *testing.T, userID uint64, outTradeNo string) payment {
	t.Helper()
	var p payment
	st, raw := call(t, "GET", r.payment.URL("/payments/"+outTradeNo), as(userID), nil, &p)
	want(t, "get payment", st, raw, http.StatusOK)
	return p
}

// pay has userID pay orderNo, twice with one Idempotency-Key (one payment,
// the same answer), the simulator delivering the charge by plan (nil: as
// configured). It returns the payment.
func (r *rig) pay(t *testing.T, userID uint64, orderNo string, plan *pspsim.Plan) payment {
	t.Helper()
	r.payMu.Lock()
	defer r.payMu.Unlock()
	if plan != nil {
		st, raw := call(t, "POST", r.psp.URL("/sim/plans"), pspAdmin, pspsim.PlanRequest{NextCharge: true, Plan: *plan}, nil)
		want(t, "file the simulator's plan", st, raw, http.StatusCreated)
	}
	h := as(userID, "Idempotency-Key", "e2e-pay-"+testenv.RandomSuffix(12))
	var p1, p2 payment
	st, raw1 := call(t, "POST", r.payment.URL("/payments"), h, map[string]any{"order_no": orderNo}, &p1)
	want(t, "create payment", st, raw1, http.StatusCreated)
	st, raw2 := call(t, "POST", r.payment.URL("/payments"), h, map[string]any{"order_no": orderNo}, &p2)
	want(t, "create payment again with the same key", st, raw2, http.StatusCreated)
	if !bytes.Equal(raw1, raw2) || p1.OutTradeNo == "" || p1.OrderNo != orderNo {
		t.Fatalf("payment answers %s / %s, want one payment of order %s", raw1, raw2, orderNo)
	}
	return p1
}

// charge is the simulator's record of the charge of outTradeNo.
func (r *rig) charge(t *testing.T, outTradeNo string) pspsim.Charge {
	t.Helper()
	var trade struct {
		PlatformSerial string `json:"platform_serial"`
	}
	st, raw := call(t, "GET", r.psp.URL("/charges?out_trade_no="+outTradeNo), nil, nil, &trade)
	want(t, "query the platform", st, raw, http.StatusOK)
	var c pspsim.Charge
	st, raw = call(t, "GET", r.psp.URL("/charges/"+trade.PlatformSerial), nil, nil, &c)
	want(t, "the simulator's charge", st, raw, http.StatusOK)
	return c
}
