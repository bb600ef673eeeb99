package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/scripts/tests/proctest"
)

func TestMain(m *testing.M) { proctest.Main(m) }

// testRig is order, coupon, payment and psp-sim as processes (built and
// started by proctest), each service on its own database, all on streams
// and keys of their own on the shared NATS and Redis.
func testRig(t *testing.T) (Targets, *sql.DB) {
	t.Helper()
	sfx := testenv.RandomSuffix(8)
	ev := events.Config{SubjectPrefix: "lg" + sfx + "."}
	nc := testenv.NATS(t)
	for _, subject := range []string{events.OrderPaid, events.PaymentSucceeded, events.ProductBatchCopy} {
		testenv.DeleteStreamAtCleanup(t, nc.JS, ev.StreamName(subject))
	}
	_, redisPrefix := testenv.Redis(t)
	env := testenv.Config(t)

	addrs := map[string]string{}
	for _, name := range []string{"order", "coupon", "payment", "psp-sim"} {
		addrs[name] = testenv.FreeAddr(t)
	}
	issuer, err := auth.StartDevIssuer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { issuer.Close() })
	tg := Targets{
		Issuer: issuer.URL, Audience: "oncemall",
		Order: []string{"http://" + addrs["order"]}, Coupon: []string{"http://" + addrs["coupon"]}, Payment: []string{"http://" + addrs["payment"]},
		PSP: "http://" + addrs["psp-sim"], AdminToken: "lg-admin-" + sfx,
		MySQLDSN: env.MySQL.DSN(""), RedisAddr: env.Redis.Addr, RedisPass: env.Redis.Password,
		NATSURL: env.NATS.URL, SubjectPrefix: ev.SubjectPrefix,
	}
	common := []string{
		"AUTH_ISSUER=" + tg.Issuer, "AUTH_AUDIENCE=" + tg.Audience,
		"EVENT_SUBJECT_PREFIX=" + ev.SubjectPrefix, "ADMIN_TOKEN=" + tg.AdminToken, "STARTUP_TIMEOUT=30s", "SHUTDOWN_TIMEOUT=10s",
		"OUTBOX_POLL_SCHEDULE=@every 1s", "IDEMPOTENCY_REDIS_PREFIX=" + redisPrefix + "idem:", "JOB_LOCK_TTL=5s", "MYSQL_MAX_OPEN_CONNS=8",
	}
	start := func(name string, env ...string) *proctest.Process {
		_, db := testenv.NewDatabase(t)
		switch name {
		case "order":
			tg.OrderDB = db
		case "coupon":
			tg.CouponDB = db
		case "payment":
			tg.PaymentDB = db
		}
		bin := proctest.Build(t, "services/"+name+"/cmd/"+name)
		return proctest.Start(t, name, bin, addrs[name], append(append([]string{"HTTP_ADDR=" + addrs[name], "MYSQL_DATABASE=" + db}, common...), env...)...)
	}
	psp := proctest.Start(t, "psp-sim", proctest.Build(t, "services/psp-sim/cmd/psp-sim"), addrs["psp-sim"],
		"PSP_HTTP_ADDR="+addrs["psp-sim"], "ONCEMALL_ENV=lab", "PSP_SECRET=lg-psp-"+sfx, "PSP_CALLBACK_URL=http://"+addrs["payment"]+"/payments/callback",
		"PSP_LOST_ANSWERS=1", "PSP_NOTIFY_DELAY=10ms")
	procs := []*proctest.Process{
		start("order", "COUPON_URL=http://"+addrs["coupon"], "PAYMENT_URL=http://"+addrs["payment"]),
		start("coupon", "ORDER_URL=http://"+addrs["order"], "COUPON_RETRY_SCHEDULE=@every 1s", "COUPON_RETRY_BACKOFF=200ms"),
		start("payment", "ORDER_URL=http://"+addrs["order"], "PSP_URL=http://"+addrs["psp-sim"], "PSP_SECRET=lg-psp-"+sfx),
	}
	psp.WaitStatus(t, "/healthz", http.StatusOK, 40*time.Second)
	for _, p := range procs {
		p.WaitStatus(t, "/readyz", http.StatusOK, 40*time.Second)
	}
	db, err := sql.Open("mysql", env.MySQL.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return tg, db
}

// TestLoadHoldsItsInvariantsAndABrokenOneFails runs a short load of the
// whole mix (coupons, double submits, payments whose first callback answer
// the platform loses, cancellations, pay/cancel races) against the four
// programs: every invariant holds and purchases completed end to end.
// Then a second payment record is written for one of the paid payments,
// as incident 2's broken handler would, and the checker and a new run of
// the command both see it: exit status 1, the broken invariants named.
func TestLoadHoldsItsInvariantsAndABrokenOneFails(t *testing.T) {
	tg, db := testRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()

	cfg := Config{
		Rate: 10, Duration: 3 * time.Second, Phases: []Phase{{Rate: 10, Duration: 3 * time.Second}}, Idle: time.Second, RetryBudget: 0.2,
		Settle: 20 * time.Second, Timeout: 5 * time.Second, RetryFor: 15 * time.Second,
		Seed: 3, Quiet: true, CouponShare: 0.7, DoubleShare: 0.3, CancelShare: 0.15, RaceShare: 0.15,
		Products: 3, StockPerItem: 1000, Targets: tg, Replicas: 1,
	}
	var log bytes.Buffer
	rep, err := Run(ctx, cfg, &log)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	t.Logf("report:\n%s", text.String())
	if !rep.InvariantsHold {
		t.Fatalf("invariants broken on a correct system")
	}
	if rep.Purchases != 30 || rep.Flow.Completed == 0 || rep.Outcomes[outDoubleSubmits] == 0 || rep.Outcomes[outCancelled] == 0 || rep.Outcomes[outCouponIssued] == 0 {
		t.Fatalf("the mix did not run: %d purchases, %d completed, outcomes %v", rep.Purchases, rep.Flow.Completed, rep.Outcomes)
	}
	if rep.Flow.CreatedToCouponUsed.Count == 0 || len(rep.Invariants) < 20 {
		t.Fatalf("no coupon used, or invariants missing: %+v, %d checks", rep.Flow.CreatedToCouponUsed, len(rep.Invariants))
	}
	// The cost and the phase are measured: the clients' own tries exactly
	// (none in the idle window), at least a coupon, an order and a payment
	// for most purchases.
	if len(rep.Phases) != 1 || rep.Phases[0].Started != 30 || rep.Phases[0].Admitted.Count == 0 || rep.Phases[0].Completed != rep.Flow.CompletedInWindow {
		t.Fatalf("phase %+v, want the 30 purchases and their requests", rep.Phases)
	}
	if rep.Cost == nil || rep.Cost.Completed != rep.Flow.CompletedInWindow {
		t.Fatalf("cost %+v, want it over the %d purchases completed in the window", rep.Cost, rep.Flow.CompletedInWindow)
	}
	if tries, ok := rep.Cost.work("client_tries"); !ok || tries < 2 {
		t.Fatalf("client tries per purchase = %v (%v), want at least 2", tries, ok)
	}

	// Break "one payment record per payment": a second record of a paid
	// payment, under another platform serial.
	var outTradeNo string
	var amount int64
	q := fmt.Sprintf("SELECT out_trade_no, amount FROM `%s`.payments WHERE status = 'PAID' LIMIT 1", tg.PaymentDB)
	if err := db.QueryRowContext(ctx, q).Scan(&outTradeNo, &amount); err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(ctx, fmt.Sprintf("INSERT INTO `%s`.payment_transaction (channel, platform_serial, out_trade_no, amount, paid_at, created_at) VALUES ('pspsim', 'T-DUPLICATE', ?, ?, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))", tg.PaymentDB), outTradeNo, amount)
	if err != nil {
		t.Fatal(err)
	}

	// The first run's checker, on its own customers.
	k := &checker{db: db, t: tg, c: newClient(tg, 5*time.Second, 5*time.Second, newStats()), cat: rep.Catalog, st: newStats()}
	broken := map[string]bool{}
	for _, c := range k.check(ctx) {
		if !c.OK {
			broken[c.Name] = true
		}
	}
	for _, want := range []string{"one payment record per payment (payment_transaction)", "payment reconciler empty"} {
		if !broken[want] {
			t.Errorf("after a duplicate payment record, %q still holds; broken: %v", want, broken)
		}
	}

	// A new run of the command: the payment reconciler finds the duplicate
	// whoever's payment it is, and the exit status says so.
	var out, errOut bytes.Buffer
	code := Main(ctx, []string{
		"--rate", "4", "--duration", "1s", "--settle", "2s", "--quiet", "--json", "--products", "1", "--stock", "100",
		"--order-url", tg.Order[0], "--coupon-url", tg.Coupon[0], "--payment-url", tg.Payment[0], "--psp-url", tg.PSP,
		"--admin-token", tg.AdminToken, "--mysql", tg.MySQLDSN, "--order-db", tg.OrderDB, "--coupon-db", tg.CouponDB, "--payment-db", tg.PaymentDB,
		"--redis", "", "--nats", tg.NATSURL, "--subject-prefix", tg.SubjectPrefix,
	}, &out, &errOut)
	if code != 1 {
		t.Fatalf("exit status %d with a duplicate payment record, want 1\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	var second Report
	if err := json.Unmarshal(out.Bytes(), &second); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out.String())
	}
	for _, c := range second.Invariants {
		if c.Name == "payment reconciler empty" && (c.OK || !strings.Contains(c.Found, outTradeNo)) {
			t.Fatalf("payment reconciler check: %+v, want it broken, naming %s", c, outTradeNo)
		}
	}
}
