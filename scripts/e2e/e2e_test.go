package e2e_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/scripts/proctest"
	"github.com/oncemall/oncemall/services/payment/pspsim"
)

func TestMain(m *testing.M) { proctest.Main(m) }

// stormCopies is how many concurrent copies of the notification the
// simulator sends (PSP_STORM_COPIES). With the payment service's callback
// entry lock on, a copy that meets the held lock before the payment is paid
// is answered 503 and retried on the simulator's schedule (how many do
// depends on the scheduler); with it off (the default) every copy reaches
// the database at once.
const stormCopies = 50

// lateRetries is how many more deliveries of the same notification the
// simulator makes one after another once the storm is acknowledged
// (PSP_REPLAYS), each signed anew: the late retries of the story.
const lateRetries = 10

// lostAnswers is how many of the payment service's first 2xx answers the
// simulator loses on the way back (PSP_LOST_ANSWERS): the service has
// processed the notification, the simulator hears nothing and retries the
// delivery on its schedule. Whatever the scheduler does with the entry lock,
// every run therefore retries a notification the service already processed.
const lostAnswers = 1

// flowDeadline bounds every wait of the flow; the whole test stays well
// under a minute on a shared machine.
const flowDeadline = 40 * time.Second

// service is one started program with its database (empty for psp-sim).
type service struct {
	*proctest.Process
	db *sql.DB
}

// rig is the four processes and what the test needs to inspect them.
type rig struct {
	order, coupon, payment, psp service
	js                          jetstream.JetStream
	adminToken                  string
	pspSecret                   []byte
	subjectPrefix               string
	orderStream, paymentStream  string
}

// startRig builds and starts order, coupon, payment and psp-sim, each with
// its own database and port, all on streams and subjects no other run
// uses, and waits until every one is ready.
func startRig(t *testing.T, callbackLock bool) *rig {
	t.Helper()
	sfx := testenv.RandomSuffix(8)
	ev := events.Config{SubjectPrefix: "e2e" + sfx + "."}
	r := &rig{
		adminToken:    "e2e-admin-" + sfx,
		pspSecret:     []byte("e2e-psp-secret-" + sfx),
		subjectPrefix: ev.SubjectPrefix,
		orderStream:   ev.StreamName(events.OrderPaid),
		paymentStream: ev.StreamName(events.PaymentSucceeded),
	}
	productStream, couponStream := ev.StreamName(events.ProductBatchCopy), ev.StreamName(events.CouponUsed)

	// Streams are deleted after the processes are stopped (cleanups run
	// last-registered first).
	nc := testenv.NATS(t)
	r.js = nc.JS
	for _, s := range []string{r.orderStream, r.paymentStream, productStream, couponStream} {
		testenv.DeleteStreamAtCleanup(t, r.js, s)
	}
	_, redisPrefix := testenv.Redis(t)

	addrs := map[string]string{}
	for _, name := range []string{"order", "coupon", "payment", "psp-sim"} {
		addrs[name] = testenv.FreeAddr(t)
	}
	common := []string{
		"EVENT_SUBJECT_PREFIX=" + r.subjectPrefix, "ADMIN_TOKEN=" + r.adminToken, "STARTUP_TIMEOUT=30s", "SHUTDOWN_TIMEOUT=10s", "LOG_LEVEL=debug",
		"OUTBOX_POLL_SCHEDULE=@every 1s", "IDEMPOTENCY_REDIS_PREFIX=" + redisPrefix + "idem:",
	}
	withDB := func(name, addr string, env ...string) service {
		cfg, db := testenv.NewDatabase(t)
		bin := proctest.Build(t, "services/"+name+"/cmd/"+name)
		p := proctest.Start(t, name, bin, addr, append(append([]string{"HTTP_ADDR=" + addr, "MYSQL_DATABASE=" + db}, common...), env...)...)
		sqlDB, err := sql.Open("mysql", cfg.DSN(db))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sqlDB.Close() })
		return service{Process: p, db: sqlDB}
	}

	r.psp = service{Process: proctest.Start(t, "psp-sim", proctest.Build(t, "services/payment/cmd/psp-sim"), addrs["psp-sim"],
		"PSP_HTTP_ADDR="+addrs["psp-sim"], "PSP_SECRET="+string(r.pspSecret),
		"PSP_CALLBACK_URL=http://"+addrs["payment"]+"/payments/callback",
		"PSP_MODE=storm", fmt.Sprintf("PSP_STORM_COPIES=%d", stormCopies),
		fmt.Sprintf("PSP_REPLAYS=%d", lateRetries), fmt.Sprintf("PSP_LOST_ANSWERS=%d", lostAnswers),
		"PSP_RETRY_SCHEDULE=100ms,200ms,300ms,500ms,1s,1s,2s",
		"PSP_NOTIFY_DELAY=10ms", "LOG_LEVEL=debug",
	)}
	r.order = withDB("order", addrs["order"])
	r.coupon = withDB("coupon", addrs["coupon"],
		"COUPON_RETRY_SCHEDULE=@every 1s", "COUPON_RETRY_BACKOFF=200ms",
		// The retry pass lock is named the same in every coupon process on
		// this Redis; a short expiry bounds how long a killed run holds it.
		"JOB_LOCK_TTL=5s",
	)
	r.payment = withDB("payment", addrs["payment"],
		"PSP_URL=http://"+addrs["psp-sim"], "ORDER_URL=http://"+addrs["order"], "PSP_SECRET="+string(r.pspSecret),
		"PAYMENT_CALLBACK_MODE=fixed", fmt.Sprintf("PAYMENT_CALLBACK_LOCK=%t", callbackLock),
	)

	r.psp.WaitStatus(t, "/healthz", http.StatusOK, flowDeadline)
	for _, s := range []service{r.order, r.coupon, r.payment} {
		s.WaitStatus(t, "/readyz", http.StatusOK, flowDeadline)
	}
	return r
}

// client bounds every request, so a hung service fails the test instead of
// stalling it.
var client = &http.Client{Timeout: 10 * time.Second}

// call sends a JSON request and decodes a JSON answer into out (if not nil);
// it returns the status and the raw body.
func call(t *testing.T, method, url string, headers map[string]string, in, out any) (int, []byte) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return do(t, req, headers, out)
}

// do sends req with headers and decodes a 2xx JSON answer into out (if not
// nil); it returns the status and the raw body.
func do(t *testing.T, req *http.Request, headers map[string]string, out any) (int, []byte) {
	t.Helper()
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", req.Method, req.URL, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode, raw
}

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
// at the deadline with cond's last description.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(flowDeadline)
	last := ""
	for time.Now().Before(deadline) {
		ok, desc := cond()
		if ok {
			return
		}
		last = desc
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s; last: %s", what, flowDeadline, last)
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

// streamMsgs returns how many messages stream holds on subject.
func streamMsgs(t *testing.T, js jetstream.JetStream, stream, subject string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatalf("stream %s info: %v", stream, err)
	}
	return info.State.Subjects[subject]
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
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

type coupon struct {
	ID          uint64 `json:"id"`
	Status      string `json:"status"`
	UsedOrderNo string `json:"used_order_no"`
}

type order struct {
	OrderNo   string  `json:"order_no"`
	Status    string  `json:"status"`
	Amount    int64   `json:"amount"`
	CouponID  *uint64 `json:"coupon_id"`
	PaymentNo string  `json:"payment_no"`
}

type payment struct {
	OutTradeNo     string `json:"out_trade_no"`
	OrderNo        string `json:"order_no"`
	Amount         int64  `json:"amount"`
	Status         string `json:"status"`
	PlatformSerial string `json:"platform_serial"`
}

// TestOrderWithCouponPaidThroughCallbackStorm is incident 2's chain across
// the services as processes: coupon issued → order with the coupon (POST
// twice with one Idempotency-Key) → payment (POST twice with one key) →
// the simulator's storm of 50 concurrent notifications, the unacknowledged
// ones (a lost answer in every run, refusals by the entry lock) retried by
// the simulator → order PAID → coupon USED → the simulator's 10 late
// retries, each a duplicate. Then it counts the effects in every database
// and stream, asks all three reconcilers, and stops every process with
// SIGTERM expecting exit status 0.
//
// It runs twice, in parallel: with the payment service's default
// configuration (no entry lock: all copies race in the database), and with
// the Redis entry lock on (refused copies are retried by the platform).
func TestOrderWithCouponPaidThroughCallbackStorm(t *testing.T) {
	for _, tc := range []struct {
		name string
		lock bool
	}{
		{"no_entry_lock", false},
		{"entry_lock_retries", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			orderPaidThroughStorm(t, tc.lock)
		})
	}
}

func orderPaidThroughStorm(t *testing.T, callbackLock bool) {
	r := startRig(t, callbackLock)
	const userID = 4242

	// 1. Issue a coupon to the user.
	var tmpl struct {
		ID uint64 `json:"id"`
	}
	st, raw := call(t, "POST", r.coupon.URL("/coupon-templates"), nil, map[string]any{"name": "e2e 5 off", "discount_amount": 500, "min_order_amount": 1000}, &tmpl)
	want(t, "create coupon template", st, raw, http.StatusCreated)
	var cp coupon
	st, raw = call(t, "POST", r.coupon.URL("/coupons"), nil, map[string]any{"template_id": tmpl.ID, "user_id": userID}, &cp)
	want(t, "issue coupon", st, raw, http.StatusCreated)
	if cp.Status != "UNUSED" {
		t.Fatalf("issued coupon %+v, want UNUSED", cp)
	}

	// 2. Create the order with the coupon, twice with one Idempotency-Key:
	// the second answer is the first one replayed, and one order exists.
	orderHeaders := map[string]string{"X-User-ID": fmt.Sprint(userID), "Idempotency-Key": "e2e-order-" + testenv.RandomSuffix(12)}
	orderBody := map[string]any{"amount": 3000, "coupon_id": cp.ID}
	var o1, o2 order
	st, raw1 := call(t, "POST", r.order.URL("/orders"), orderHeaders, orderBody, &o1)
	want(t, "create order", st, raw1, http.StatusCreated)
	st, raw2 := call(t, "POST", r.order.URL("/orders"), orderHeaders, orderBody, &o2)
	want(t, "create order again with the same key", st, raw2, http.StatusCreated)
	if !bytes.Equal(raw1, raw2) || o1.OrderNo == "" {
		t.Fatalf("same Idempotency-Key, different answers:\n%s\n%s", raw1, raw2)
	}
	if o1.Status != "WAIT_PAY" || o1.Amount != 3000 || o1.CouponID == nil || *o1.CouponID != cp.ID {
		t.Fatalf("order %+v", o1)
	}
	if n := count(t, r.order.db, "SELECT COUNT(*) FROM orders WHERE user_id = ?", userID); n != 1 {
		t.Fatalf("%d orders for the user after two POSTs with one key, want 1", n)
	}

	// 3. Create the payment, twice with one key; the simulator answers the
	// charge and starts its storm.
	payHeaders := map[string]string{"X-User-ID": fmt.Sprint(userID), "Idempotency-Key": "e2e-pay-" + testenv.RandomSuffix(12)}
	var p1, p2 payment
	st, praw1 := call(t, "POST", r.payment.URL("/payments"), payHeaders, map[string]any{"order_no": o1.OrderNo}, &p1)
	want(t, "create payment", st, praw1, http.StatusCreated)
	st, praw2 := call(t, "POST", r.payment.URL("/payments"), payHeaders, map[string]any{"order_no": o1.OrderNo}, &p2)
	want(t, "create payment again with the same key", st, praw2, http.StatusCreated)
	if !bytes.Equal(praw1, praw2) || p1.OutTradeNo == "" || p1.Amount != o1.Amount {
		t.Fatalf("payment answers %s / %s, want one payment of the order's amount %d", praw1, praw2, o1.Amount)
	}

	// 4. Poll until the order is PAID and the coupon USED.
	var paid payment
	eventually(t, "payment PAID", func() (bool, string) {
		st, raw := call(t, "GET", r.payment.URL("/payments/"+p1.OutTradeNo), nil, nil, &paid)
		return st == http.StatusOK && paid.Status == "PAID", fmt.Sprintf("%d %s", st, raw)
	})
	var finalOrder order
	eventually(t, "order PAID", func() (bool, string) {
		st, raw := call(t, "GET", r.order.URL("/orders/"+o1.OrderNo), nil, nil, &finalOrder)
		return st == http.StatusOK && finalOrder.Status == "PAID", fmt.Sprintf("%d %s", st, raw)
	})
	if finalOrder.PaymentNo != p1.OutTradeNo {
		t.Fatalf("order paid by %q, want %q", finalOrder.PaymentNo, p1.OutTradeNo)
	}
	var finalCoupon coupon
	eventually(t, "coupon USED", func() (bool, string) {
		st, raw := call(t, "GET", r.coupon.URL(fmt.Sprintf("/coupons/%d", cp.ID)), nil, nil, &finalCoupon)
		return st == http.StatusOK && finalCoupon.Status == "USED", fmt.Sprintf("%d %s", st, raw)
	})
	if finalCoupon.UsedOrderNo != o1.OrderNo {
		t.Fatalf("coupon used by order %q, want %q", finalCoupon.UsedOrderNo, o1.OrderNo)
	}

	// 5. Let the simulator finish every copy, retry and late retry. Its
	// record (decoded into the simulator's own types) must show the storm
	// and the late retries as planned, the lost 2xx answer and its retry,
	// and every copy acknowledged in the end.
	var ch pspsim.Charge
	eventually(t, "simulator done delivering", func() (bool, string) {
		st, raw := call(t, "GET", r.psp.URL("/charges/"+paid.PlatformSerial), nil, nil, &ch)
		return st == http.StatusOK && ch.Done, fmt.Sprintf("%d %.300s", st, raw)
	})
	tally := ch.Tally()
	answered2xx := tally.Answered - tally.Refused
	t.Logf("simulator: %+v", tally)
	if !ch.Acknowledged || tally.Copies != stormCopies+lateRetries {
		t.Fatalf("simulator: acknowledged=%v, %d copies (want %d concurrent + %d late): the storm did not happen as planned",
			ch.Acknowledged, tally.Copies, stormCopies, lateRetries)
	}
	if tally.Lost != lostAnswers {
		t.Fatalf("simulator: %d answers lost, want %d", tally.Lost, lostAnswers)
	}
	// A lost answer is one the service gave: a 2xx, so the service had
	// processed the notification, and the simulator retried that copy.
	for _, a := range ch.Attempts {
		if !a.AnswerLost {
			continue
		}
		if a.Status/100 != 2 {
			t.Fatalf("simulator: lost answer %+v has status %d, want the service's 2xx", a, a.Status)
		}
		retried := false
		for _, b := range ch.Attempts {
			retried = retried || (b.Copy == a.Copy && b.Try == a.Try+1)
		}
		if !retried {
			t.Fatalf("simulator: copy %d's lost answer (try %d) was not retried", a.Copy, a.Try)
		}
	}
	// Whether a copy meets another's entry lock depends on the scheduler,
	// so the number refused is not fixed; what is fixed is that every copy,
	// refused, unanswered or not, ends acknowledged: it was retried until it
	// was answered as the duplicate it is.
	if tally.AcknowledgedCopies != stormCopies+lateRetries {
		t.Fatalf("simulator: %d of %d copies acknowledged (%d refused answers, %d lost): unacknowledged copies were not retried to a 2xx",
			tally.AcknowledgedCopies, stormCopies+lateRetries, tally.Refused, tally.Lost)
	}

	// 6. Exactly one of every effect.
	paySubject := events.PaymentSucceeded
	checks := []struct {
		what string
		db   *sql.DB
		q    string
		args []any
		want int
	}{
		{"payments for the order", r.payment.db, "SELECT COUNT(*) FROM payments WHERE order_no = ?", []any{o1.OrderNo}, 1},
		{"payment records (payment_transaction)", r.payment.db, "SELECT COUNT(*) FROM payment_transaction WHERE out_trade_no = ?", []any{p1.OutTradeNo}, 1},
		{"payment.succeeded outbox rows", r.payment.db, "SELECT COUNT(*) FROM local_message WHERE topic = ?", []any{paySubject}, 1},
		{"paid orders", r.order.db, "SELECT COUNT(*) FROM orders WHERE order_no = ? AND status = 'PAID'", []any{o1.OrderNo}, 1},
		{"order.paid outbox rows", r.order.db, "SELECT COUNT(*) FROM local_message WHERE topic = ?", []any{events.OrderPaid}, 1},
		{"coupon ledger rows for the order", r.coupon.db, "SELECT COUNT(*) FROM coupon_deduction WHERE order_no = ?", []any{o1.OrderNo}, 1},
		{"coupon ledger rows in all", r.coupon.db, "SELECT COUNT(*) FROM coupon_deduction", nil, 1},
		{"order.created outbox rows", r.order.db, "SELECT COUNT(*) FROM local_message WHERE topic = ?", []any{events.OrderCreated}, 1},
		{"order dead letters", r.order.db, "SELECT COUNT(*) FROM dead_message", nil, 0},
		{"coupon messages, SUCCESS", r.coupon.db, "SELECT COUNT(*) FROM coupon_message WHERE status = 'SUCCESS'", nil, 1},
		{"coupon messages in all", r.coupon.db, "SELECT COUNT(*) FROM coupon_message", nil, 1},
		{"coupon.used outbox rows", r.coupon.db, "SELECT COUNT(*) FROM local_message WHERE topic = ?", []any{events.CouponUsed}, 1},
		{"coupon dead letters", r.coupon.db, "SELECT COUNT(*) FROM dead_message", nil, 0},
	}
	for _, c := range checks {
		if n := count(t, c.db, c.q, c.args...); n != c.want {
			t.Errorf("%s: %d, want %d", c.what, n, c.want)
		}
	}
	eventually(t, "payment.succeeded and order.paid on their streams", func() (bool, string) {
		ps := streamMsgs(t, r.js, r.paymentStream, r.subjectPrefix+paySubject)
		op := streamMsgs(t, r.js, r.orderStream, r.subjectPrefix+"order.paid")
		return ps >= 1 && op >= 1, fmt.Sprintf("payment.succeeded %d, order.paid %d", ps, op)
	})
	if n := streamMsgs(t, r.js, r.paymentStream, r.subjectPrefix+paySubject); n != 1 {
		t.Errorf("payment.succeeded messages in stream %s: %d, want 1", r.paymentStream, n)
	}
	if n := streamMsgs(t, r.js, r.orderStream, r.subjectPrefix+"order.paid"); n != 1 {
		t.Errorf("order.paid messages in stream %s: %d, want 1", r.orderStream, n)
	}

	// The payment service's own count of callback outcomes: exactly one
	// notification was processed; every other 2xx answer it gave, the lost
	// ones included, was a duplicate, and none was refused as wrong.
	metrics := scrape(t, r.payment.URL("/metrics"))
	if got := metrics[`payment_callbacks_total{handler="fixed",outcome="processed"}`]; got != 1 {
		t.Errorf("callbacks processed: %v, want 1", got)
	}
	if got := metrics[`payment_callbacks_total{handler="fixed",outcome="duplicate"}`]; got != float64(answered2xx-1) {
		t.Errorf("callbacks answered as duplicates: %v, want %d (the service's 2xx answers but the first, late retries and lost answers included)", got, answered2xx-1)
	}
	// Every refusal the simulator saw was the entry lock's, and there are
	// none without it.
	if got := metrics[`payment_callbacks_total{handler="fixed",outcome="locked"}`]; got != float64(tally.Refused) {
		t.Errorf("callbacks refused by the entry lock: %v, want the simulator's %d refused answers", got, tally.Refused)
	}
	if !callbackLock && tally.Refused != 0 {
		t.Errorf("%d copies refused without the entry lock, want 0", tally.Refused)
	}
	// Every delivery the service answered was counted, and only as
	// processed, duplicate or (entry lock) locked.
	counted := 0.0
	for k, v := range metrics {
		if !strings.HasPrefix(k, "payment_callbacks_total{") {
			continue
		}
		counted += v
		if v != 0 && !strings.Contains(k, `outcome="processed"`) && !strings.Contains(k, `outcome="duplicate"`) && !strings.Contains(k, `outcome="locked"`) {
			t.Errorf("%s = %v, want 0", k, v)
		}
	}
	if counted != float64(tally.Answered) {
		t.Errorf("payment_callbacks_total sums to %v, want the %d answers the simulator recorded", counted, tally.Answered)
	}

	// 7. All three reconcilers are empty, each answering from behind its
	// admin token.
	admin := map[string]string{"Authorization": "Bearer " + r.adminToken}
	var payRec struct {
		Empty  bool            `json:"empty"`
		Report json.RawMessage `json:"report"`
	}
	st, raw = call(t, "GET", r.payment.URL("/admin/reconcile"), admin, nil, &payRec)
	want(t, "payment reconcile", st, raw, http.StatusOK)
	if !payRec.Empty {
		t.Errorf("payment reconciliation not empty: %s", raw)
	}
	for _, s := range []service{r.order, r.coupon} {
		var rec struct {
			Anomalies []json.RawMessage `json:"anomalies"`
		}
		st, raw = call(t, "GET", s.URL("/admin/reconcile"), admin, nil, &rec)
		want(t, s.Name+" reconcile", st, raw, http.StatusOK)
		if rec.Anomalies == nil || len(rec.Anomalies) != 0 {
			t.Errorf("%s reconciliation: %s, want {\"anomalies\":[]}", s.Name, raw)
		}
	}
	// The admin endpoints refuse a wrong token, so the empty answers above
	// came from behind the guard.
	for _, s := range []service{r.order, r.coupon, r.payment} {
		st, raw = call(t, "GET", s.URL("/admin/reconcile"), map[string]string{"Authorization": "Bearer wrong"}, nil, nil)
		want(t, s.Name+" reconcile with a wrong token", st, raw, http.StatusUnauthorized)
	}

	// 8. Clean shutdown of every process: the platform first (no more
	// deliveries), then the services.
	r.psp.Stop(t, 15*time.Second)
	for _, s := range []service{r.payment, r.order, r.coupon} {
		s.Stop(t, 20*time.Second)
		if !strings.Contains(s.Stdout(), `"msg":"shutdown complete"`) {
			t.Errorf("%s: no \"shutdown complete\" log line", s.Name)
		}
	}
}
