package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/testkit/idempotencytest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/order/internal/assembly"
	"github.com/oncemall/oncemall/services/order/internal/ordertest"
	"github.com/oncemall/oncemall/services/order/internal/stubs"
)

// crashChildVar makes this test binary the order service itself: main,
// configured from the environment, until it is killed.
const crashChildVar = "ORDER_CRASH_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(crashChildVar) != "" {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestCrashBetweenLockAndCommit kills the order service between the coupon
// lock and the order's commit, for real: a child process runs main (this
// binary, in the crash child's environment) on the test's database; the
// test holds the stock row of the product ordered, so the child's order
// transaction, begun after the coupon was locked, waits on it; the test
// kills the child with SIGKILL there. Nothing in the order service can
// release the lock then, and nothing does: the coupon stays LOCKED by that
// order number, no release call is made. The database rolls the dead
// connection's transaction back: no order, no reservation, no event, the
// stock whole. And GET /internal/orders/{no}, which the coupon service's
// sweeper asks once the lock's deadline has passed, answers 404, its cue to
// release the lock.
func TestCrashBetweenLockAndCommit(t *testing.T) {
	svc := ordertest.Start(t, nil, assembly.Options{})
	kettle := svc.Product(t, "Kettle", 1500, 3)
	svc.Coupons.Add(stubs.Coupon{ID: 1, UserID: 1, Discount: 100})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := maps.Clone(svc.Env)
	env["HTTP_ADDR"] = testenv.FreeAddr(t)
	env[crashChildVar] = "1"
	child := exec.CommandContext(ctx, os.Args[0]) // no arguments: main's, not the test flags
	child.Env = os.Environ()
	for k, v := range env {
		child.Env = append(child.Env, k+"="+v)
	}
	var logs testenv.SyncBuffer
	child.Stdout, child.Stderr = &logs, &logs
	testenv.Must(t, child.Start())
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	t.Cleanup(func() { _ = child.Process.Kill() })
	running := func() {
		select {
		case err := <-exited:
			t.Fatalf("the child exited (%v):\n%s", err, logs.String())
		default:
		}
	}
	base := "http://" + env["HTTP_ADDR"]
	testenv.WaitFor(t, time.Minute, "the child's /readyz", func() bool {
		running()
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	// Hold the kettle's stock row, then order two with the coupon.
	hold := svc.DB.Begin()
	var available int
	testenv.Must(t, hold.Raw("SELECT available FROM product_stock WHERE product_id = ? FOR UPDATE", kettle).Row().Scan(&available))
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/orders",
			strings.NewReader(fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":2}],"coupon_id":1}`, kettle)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+svc.Token(t, 1))
		req.Header.Set("Idempotency-Key", idempotencytest.NewKey())
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	orderNo := ""
	testenv.WaitFor(t, time.Minute, "the child's order transaction waiting on the stock row, after the coupon lock", func() bool {
		running()
		st, holder := svc.Coupons.State(1)
		orderNo = holder
		return st == stubs.CouponLocked && testenv.LockWaits(t, svc.DB) > 0
	})
	testenv.Must(t, child.Process.Kill())
	<-exited
	testenv.Must(t, hold.Rollback().Error)

	// The lock stays, held by the order that never committed.
	if st, holder := svc.Coupons.State(1); st != stubs.CouponLocked || holder != orderNo {
		t.Fatalf("coupon 1 is %s by %q after the crash, want LOCKED by %s", st, holder, orderNo)
	}
	if locks, releases := svc.Coupons.Calls(); locks != 1 || len(releases) != 0 {
		t.Fatalf("%d locks and releases %v after the crash, want 1 and none", locks, releases)
	}
	// The server rolls the dead transaction back: a locking read of the
	// stock row waits until then.
	testenv.Must(t, svc.DB.Transaction(func(tx *gorm.DB) error {
		return tx.Raw("SELECT available FROM product_stock WHERE product_id = ? FOR UPDATE", kettle).Row().Scan(&available)
	}))
	if available != 3 {
		t.Fatalf("stock %d after the crash, want 3", available)
	}
	for _, table := range []string{"orders", "order_items", "stock_reservation", "local_message"} {
		if n := svc.Count(t, "SELECT COUNT(*) FROM "+table); n != 0 {
			t.Fatalf("%d rows in %s after the crash", n, table)
		}
	}
	status, _, body := testenv.Send(t, http.MethodGet, svc.URL+"/internal/orders/"+orderNo,
		map[string]string{"Authorization": "Bearer " + ordertest.InternalToken}, "")
	if status != http.StatusNotFound {
		t.Fatalf("the sweeper's question about %s: %d %s, want 404", orderNo, status, body)
	}
	if strings.Contains(logs.String(), "panic") {
		t.Fatalf("the child panicked:\n%s", logs.String())
	}
}
