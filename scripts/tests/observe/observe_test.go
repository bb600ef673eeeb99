package observe_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/testkit/authtest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/tracing"
	"github.com/oncemall/oncemall/scripts/tests/proctest"
	"github.com/oncemall/oncemall/services/psp-sim/pspsim"
)

func TestMain(m *testing.M) { proctest.Main(m) }

// flowDeadline bounds every wait: generous, because the machines this
// runs on are shared.
const flowDeadline = 90 * time.Second

// The storm the simulator makes of the one notification: copies at once,
// a lost answer (so a processed copy is retried), late replays.
const (
	stormCopies = 5
	lostAnswers = 1
	lateReplays = 2
)

// rig is the four programs, exporting their spans to one Jaeger.
type rig struct {
	order, coupon, payment, psp *proctest.Process
	adminToken                  string
	subjectPrefix               string
	// issuer signs the customers in; the services trust it (AUTH_ISSUER).
	issuer *authtest.Issuer
}

// startRig starts psp-sim, order, coupon and payment as processes with
// tracing on (TRACING_EXPORTER=otlp to jaeger), each with its own database,
// on streams no other run uses.
func startRig(t *testing.T, j *jaeger) *rig {
	t.Helper()
	sfx := testenv.RandomSuffix(8)
	ev := events.Config{SubjectPrefix: "obs" + sfx + "."}
	r := &rig{adminToken: "obs-admin-" + sfx, subjectPrefix: ev.SubjectPrefix, issuer: authtest.New(t)}
	nc := testenv.NATS(t)
	for _, subject := range []string{events.OrderPaid, events.PaymentSucceeded, events.ProductBatchCopy} {
		testenv.DeleteStreamAtCleanup(t, nc.JS, ev.StreamName(subject))
	}
	_, redisPrefix := testenv.Redis(t)
	addrs := map[string]string{}
	for _, name := range []string{"order", "coupon", "payment", "psp-sim"} {
		addrs[name] = testenv.FreeAddr(t)
	}
	pspSecret := "obs-psp-secret-" + sfx
	traced := []string{
		"TRACING_EXPORTER=otlp", "TRACING_OTLP_ENDPOINT=" + j.OTLP, "TRACING_SAMPLE_RATIO=1",
		// The SDK's batcher exports every 5s by default; the test reads
		// the spans sooner.
		"OTEL_BSP_SCHEDULE_DELAY=100",
	}
	common := append([]string{
		"AUTH_ISSUER=" + r.issuer.URL, "AUTH_AUDIENCE=" + authtest.Audience,
		"EVENT_SUBJECT_PREFIX=" + r.subjectPrefix, "ADMIN_TOKEN=" + r.adminToken, "STARTUP_TIMEOUT=60s", "SHUTDOWN_TIMEOUT=10s",
		"OUTBOX_POLL_SCHEDULE=@every 1s", "IDEMPOTENCY_REDIS_PREFIX=" + redisPrefix + "idem:",
		"COUPON_URL=http://" + addrs["coupon"], "PAYMENT_URL=http://" + addrs["payment"], "ORDER_URL=http://" + addrs["order"],
	}, traced...)
	withDB := func(name string, env ...string) *proctest.Process {
		_, db := testenv.NewDatabase(t)
		bin := proctest.Build(t, "services/"+name+"/cmd/"+name)
		return proctest.Start(t, name, bin, addrs[name], append(append([]string{"HTTP_ADDR=" + addrs[name], "MYSQL_DATABASE=" + db}, common...), env...)...)
	}
	r.psp = proctest.Start(t, "psp-sim", proctest.Build(t, "services/psp-sim/cmd/psp-sim"), addrs["psp-sim"], append([]string{
		"PSP_HTTP_ADDR=" + addrs["psp-sim"], "ONCEMALL_ENV=lab", "PSP_SECRET=" + pspSecret,
		"PSP_CALLBACK_URL=http://" + addrs["payment"] + "/payments/callback",
		"PSP_MODE=storm", fmt.Sprintf("PSP_STORM_COPIES=%d", stormCopies), fmt.Sprintf("PSP_REPLAYS=%d", lateReplays),
		fmt.Sprintf("PSP_LOST_ANSWERS=%d", lostAnswers), "PSP_RETRY_SCHEDULE=100ms,200ms,500ms,1s,2s", "PSP_NOTIFY_DELAY=10ms",
	}, traced...)...)
	r.order = withDB("order")
	r.coupon = withDB("coupon", "COUPON_RETRY_SCHEDULE=@every 1s", "COUPON_RETRY_BACKOFF=200ms", "JOB_LOCK_TTL=5s")
	r.payment = withDB("payment", "PSP_URL=http://"+addrs["psp-sim"], "PSP_SECRET="+pspSecret)

	r.psp.WaitStatus(t, "/healthz", http.StatusOK, flowDeadline)
	for _, p := range []*proctest.Process{r.order, r.coupon, r.payment} {
		p.WaitStatus(t, "/readyz", http.StatusOK, flowDeadline)
	}
	return r
}

// buyer is the client of the purchase: it starts the purchase's trace and
// makes its requests through tracing.Transport, as a web front end or a
// gateway would, so every request carries the trace.
type buyer struct {
	client *http.Client
	ctx    context.Context
}

// call sends in as JSON (nil: no body) with headers, decodes a 2xx answer
// into out (nil: ignored), and fails the test unless the status is want.
func (b *buyer) call(t *testing.T, method, url string, headers map[string]string, in, out any, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	if status, raw := proctest.JSON(t, ctx, b.client, method, url, headers, in, out); status != want {
		t.Fatalf("%s %s: %d %s, want %d", method, url, status, raw, want)
	}
}

// eventually polls cond every 200ms until it holds, or fails the test at
// the deadline with cond's last word.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	testenv.Eventually(t, flowDeadline, 200*time.Millisecond, what, cond)
}

// TestOnePurchaseIsOneTraceInJaeger makes one purchase (a product with
// stock, a coupon, an order with the coupon, its payment, the platform's
// storm of notifications, the order PAID and the coupon deducted by the
// retry job) in one trace that the buyer starts, and reads it back from
// Jaeger: the search by each service finds it, and it holds every step as
// a span of the right service under the right parent, the storm's copies
// and the duplicates the services absorbed marked duplicate=true, and the
// request id of the request that caused each step.
func TestOnePurchaseIsOneTraceInJaeger(t *testing.T) {
	j := startJaeger(t)
	r := startRig(t, j)
	const userID = 4343
	user := map[string]string{"Authorization": "Bearer " + r.issuer.Token(t, userID, auth.RoleCustomer)}
	admin := map[string]string{"Authorization": "Bearer " + r.adminToken}
	setup := &buyer{client: http.DefaultClient, ctx: context.Background()}

	// The shop's data, outside the purchase's trace.
	var product struct {
		ID uint64 `json:"id"`
	}
	setup.call(t, "POST", r.order.URL("/admin/products"), admin, map[string]any{"brand": "oncemall", "name": "mug", "model": "m1", "price": 1500}, &product, http.StatusCreated)
	setup.call(t, "PUT", r.order.URL(fmt.Sprintf("/admin/products/%d/stock", product.ID)), admin, map[string]any{"available": 10}, nil, http.StatusOK)
	var tmpl, cp struct {
		ID uint64 `json:"id"`
	}
	setup.call(t, "POST", r.coupon.URL("/admin/coupon-templates"), admin, map[string]any{"name": "5 off", "discount_amount": 500, "min_order_amount": 1000}, &tmpl, http.StatusCreated)
	setup.call(t, "POST", r.coupon.URL("/admin/coupons"), admin, map[string]any{"template_id": tmpl.ID, "user_id": userID}, &cp, http.StatusCreated)

	// The purchase, in the buyer's trace: a span of the buyer's own
	// exported to the same Jaeger, each request a client span under it.
	tp, err := tracing.New(context.Background(), tracing.Config{Exporter: tracing.ExporterOTLP, OTLPEndpoint: j.OTLP, SampleRatio: 1}, "buyer")
	testenv.Must(t, err)
	ctx, purchase := tp.TracerProvider().Tracer("buyer").Start(context.Background(), "purchase")
	traceID := purchase.SpanContext().TraceID().String()
	b := &buyer{client: &http.Client{Transport: tracing.Transport(tp.TracerProvider(), http.DefaultTransport)}, ctx: ctx}
	sfx := testenv.RandomSuffix(8)
	orderReq, payReq := "obs-order-"+sfx, "obs-pay-"+sfx

	var order struct {
		OrderNo   string `json:"order_no"`
		PayAmount int64  `json:"pay_amount"`
	}
	b.call(t, "POST", r.order.URL("/orders"), merge(user, map[string]string{"Idempotency-Key": "obs-order-" + sfx, tracing.RequestIDHeader: orderReq}),
		map[string]any{"items": []map[string]any{{"product_id": product.ID, "quantity": 2}}, "coupon_id": cp.ID}, &order, http.StatusCreated)
	var pay struct {
		OutTradeNo string `json:"out_trade_no"`
	}
	b.call(t, "POST", r.payment.URL("/payments"), merge(user, map[string]string{"Idempotency-Key": "obs-pay-" + sfx, tracing.RequestIDHeader: payReq}),
		map[string]any{"order_no": order.OrderNo}, &pay, http.StatusCreated)
	purchase.End()
	flush, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	testenv.Must(t, tp.Shutdown(flush))
	cancel()

	// The effects: paid, and the coupon deducted by the retry job.
	var paid struct {
		Status         string `json:"status"`
		PlatformSerial string `json:"platform_serial"`
	}
	eventually(t, "payment PAID", func() (bool, string) {
		setup.call(t, "GET", r.payment.URL("/payments/"+pay.OutTradeNo), user, nil, &paid, http.StatusOK)
		return paid.Status == "PAID", paid.Status
	})
	eventually(t, "order PAID", func() (bool, string) {
		var o struct{ Status string }
		setup.call(t, "GET", r.order.URL("/orders/"+order.OrderNo), user, nil, &o, http.StatusOK)
		return o.Status == "PAID", o.Status
	})
	eventually(t, "coupon USED", func() (bool, string) {
		var c struct{ Status string }
		setup.call(t, "GET", r.coupon.URL(fmt.Sprintf("/coupons/%d", cp.ID)), user, nil, &c, http.StatusOK)
		return c.Status == "USED", c.Status
	})
	var charge pspsim.Charge
	eventually(t, "the simulator done delivering", func() (bool, string) {
		setup.call(t, "GET", r.psp.URL("/charges/"+paid.PlatformSerial), nil, nil, &charge, http.StatusOK)
		return charge.Done, fmt.Sprintf("%+v", charge.Tally())
	})
	tally := charge.Tally()
	if tally.Copies != stormCopies+lateReplays || tally.Lost != lostAnswers {
		t.Fatalf("simulator tally %+v, want %d copies and %d lost answer", tally, stormCopies+lateReplays, lostAnswers)
	}

	// The trace, once every span has reached Jaeger: the deduction is the
	// last step, and every delivery attempt reached the payment service
	// and was exported by the simulator (each program flushes on its own).
	var spans []span
	eventually(t, "the whole trace in Jaeger", func() (bool, string) {
		var err error
		if spans, err = j.trace(traceID); err != nil {
			return false, err.Error()
		}
		n := len(byName(spans, "payment", "POST /payments/callback"))
		sent := len(byName(spans, "psp-sim", "notify payment"))
		return len(byName(spans, "coupon", "deduct coupon")) > 0 && n >= tally.Attempts && sent >= tally.Attempts,
			fmt.Sprintf("%d spans, %d callbacks and %d notify spans of %d attempts:\n%s", len(spans), n, sent, tally.Attempts, list(spans))
	})
	for _, service := range []string{"buyer", "order", "coupon", "payment", "psp-sim"} {
		ids, err := j.search(service)
		testenv.Must(t, err)
		if !contains(ids, traceID) {
			t.Fatalf("Jaeger's search by service %s does not find trace %s (found %v)", service, traceID, ids)
		}
	}
	checkPurchaseTrace(t, spans, r.subjectPrefix, orderReq, payReq, tally)
}

// checkPurchaseTrace checks the trace of the purchase step by step, each
// step the child (or a descendant) of the one before it.
func checkPurchaseTrace(t *testing.T, spans []span, prefix, orderReq, payReq string, tally pspsim.Tally) {
	t.Helper()
	ix := map[string]span{}
	for _, s := range spans {
		ix[s.ID] = s
	}
	// under fails unless s descends from ancestor.
	under := func(s, ancestor span) {
		t.Helper()
		for p, ok := ix[s.Parent], true; ok; p, ok = ix[p.Parent] {
			if p.ID == ancestor.ID {
				return
			}
		}
		t.Fatalf("span %s\nis not under %s\ntrace:\n%s", s, ancestor, list(spans))
	}
	one := func(service, name string) span {
		t.Helper()
		got := byName(spans, service, name)
		if len(got) != 1 {
			t.Fatalf("%d spans %s %q, want 1; trace:\n%s", len(got), service, name, list(spans))
		}
		return got[0]
	}
	wantTag := func(s span, key, want string) {
		t.Helper()
		if s.Tags[key] != want {
			t.Fatalf("span %s: %s=%q, want %q", s, key, s.Tags[key], want)
		}
	}

	purchase := one("buyer", "purchase")
	if purchase.Parent != "" {
		t.Fatalf("the purchase span %s has a parent; it should start the trace", purchase)
	}
	// The order: placed, its coupon locked by a call to the coupon service.
	placed := one("order", "POST /orders")
	under(placed, purchase)
	wantTag(placed, "request_id", orderReq)
	lock := one("coupon", "POST /internal/coupons/:id/lock")
	under(lock, placed)
	wantTag(lock, "request_id", orderReq)

	// The payment: the order read from the order service, the charge.
	paying := one("payment", "POST /payments")
	under(paying, purchase)
	wantTag(paying, "request_id", payReq)
	reads := byName(spans, "order", "GET /internal/orders/:no")
	if len(reads) == 0 {
		t.Fatalf("no span of the order read the payment service makes; trace:\n%s", list(spans))
	}
	for _, read := range reads {
		under(read, paying)
		wantTag(read, "request_id", payReq)
	}
	charge := one("psp-sim", "POST /charges")
	under(charge, paying)

	// The storm: each delivery attempt a span of its own under the charge,
	// every one but the first marked duplicate, each answered in a
	// callback span of the payment service; one callback did the work.
	notifies := byName(spans, "psp-sim", "notify payment")
	if len(notifies) != tally.Attempts {
		t.Fatalf("%d notify spans, want one per delivery attempt (%d)", len(notifies), tally.Attempts)
	}
	firsts := 0
	for _, n := range notifies {
		under(n, charge)
		wantTag(n, "request_id", payReq)
		if n.Tags["duplicate"] == "false" {
			firsts++
		}
	}
	if firsts != 1 {
		t.Fatalf("%d notify spans not marked duplicate, want the first delivery only:\n%s", firsts, list(notifies))
	}
	var processed []span
	duplicates := 0
	for _, c := range byName(spans, "payment", "POST /payments/callback") {
		if p := ix[c.Parent]; p.Name != "notify payment" {
			t.Fatalf("callback span %s is not the child of a delivery span", c)
		}
		wantTag(c, "request_id", payReq)
		switch {
		case c.Tags["outcome"] == "processed" && c.Tags["duplicate"] == "false":
			processed = append(processed, c)
		case c.Tags["duplicate"] == "true":
			duplicates++
		}
	}
	if len(processed) != 1 || duplicates == 0 {
		t.Fatalf("%d callbacks processed and %d marked duplicate; want 1 and some:\n%s", len(processed), duplicates, list(byName(spans, "payment", "POST /payments/callback")))
	}

	// The events: payment.succeeded from the callback that did the work to
	// the order service, order.paid to the coupon service, whose retry job
	// deducted the coupon in the purchase's trace.
	succeeded := one("payment", "publish "+prefix+events.PaymentSucceeded)
	under(succeeded, processed[0])
	landedPaid := one("order", "process "+prefix+events.PaymentSucceeded)
	under(landedPaid, succeeded)
	wantTag(landedPaid, "request_id", payReq)
	orderPaid := one("order", "publish "+prefix+events.OrderPaid)
	under(orderPaid, landedPaid)
	landed := one("coupon", "process "+prefix+events.OrderPaid)
	under(landed, orderPaid)
	deducted := 0
	for _, d := range byName(spans, "coupon", "deduct coupon") {
		under(d, landed)
		wantTag(d, "request_id", payReq)
		if d.Tags["outcome"] == "deducted" {
			deducted++
		}
	}
	if deducted != 1 {
		t.Fatalf("%d deduction spans deducted the coupon, want 1; trace:\n%s", deducted, list(spans))
	}
}

// byName returns the spans of service named name.
func byName(spans []span, service, name string) []span {
	var out []span
	for _, s := range spans {
		if s.Service == service && s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func list(spans []span) string {
	var b strings.Builder
	for _, s := range spans {
		b.WriteString("  " + s.String() + "\n")
	}
	return b.String()
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
