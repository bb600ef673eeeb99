package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/authtest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/couponclient"
	"github.com/oncemall/oncemall/services/order/internal/httpapi"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/ordertest"
	"github.com/oncemall/oncemall/services/order/internal/paymentclient"
	"github.com/oncemall/oncemall/services/order/internal/store"
	"github.com/oncemall/oncemall/services/order/internal/stubs"
)

// The environment the crash test hands its child process.
const (
	crashChildVar    = "ORDER_CRASH_CHILD_DB"
	crashCouponsVar  = "ORDER_CRASH_CHILD_COUPONS"
	crashPaymentsVar = "ORDER_CRASH_CHILD_PAYMENTS"
	crashBodyVar     = "ORDER_CRASH_CHILD_BODY"
	inTxLine         = "order-in-transaction "
)

// TestCrashBetweenLockAndCommit kills the order service between the coupon
// lock and the order's commit, for real: a child process (this test binary)
// serves POST /orders with a coupon; inside the order's transaction, with
// the order, its reservation and its event written, it reports the order
// number and stops; the test kills it with SIGKILL. Nothing in the order
// service can release the lock then, and nothing does: the coupon stays
// LOCKED by that order number, no release call is made. The database rolls
// the dead connection's transaction back: no order, no reservation, no
// event, the stock whole. And GET /internal/orders/{no}, which the coupon
// service's sweeper asks once the lock's deadline has passed, answers 404,
// which is its cue to release the lock.
func TestCrashBetweenLockAndCommit(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	kettle := s.Product(t, "Kettle", 1500, 3)
	s.Coupons.Add(stubs.Coupon{ID: 1, UserID: 1, Discount: 100})
	var dbName string
	testenv.Must(t, s.db.Raw("SELECT DATABASE()").Row().Scan(&dbName))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashChild$", "-test.v", "-test.count=1")
	child.Env = append(os.Environ(),
		crashChildVar+"="+dbName, crashCouponsVar+"="+s.Coupons.URL, crashPaymentsVar+"="+s.Payments.URL,
		crashBodyVar+"="+fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":2}],"coupon_id":1}`, kettle))
	out, err := child.StdoutPipe()
	testenv.Must(t, err)
	child.Stderr = os.Stderr
	testenv.Must(t, child.Start())
	orderNo := ""
	lines := bufio.NewScanner(out)
	for orderNo == "" && lines.Scan() {
		if no, ok := strings.CutPrefix(strings.TrimSpace(lines.Text()), inTxLine); ok {
			orderNo = no
		}
	}
	if orderNo == "" {
		_ = child.Process.Kill()
		_ = child.Wait()
		t.Fatal("the child never reached the order's transaction")
	}
	testenv.Must(t, child.Process.Kill())
	_ = child.Wait()

	// The lock stays, held by the order that never committed.
	if st, holder := s.Coupons.State(1); st != stubs.CouponLocked || holder != orderNo {
		t.Fatalf("coupon 1 is %s by %q after the crash, want LOCKED by %s", st, holder, orderNo)
	}
	if locks, releases := s.Coupons.Calls(); locks != 1 || len(releases) != 0 {
		t.Fatalf("%d locks and releases %v after the crash, want 1 and none", locks, releases)
	}
	// Wait for the server to roll the dead transaction back: a locking
	// read of the stock row it decremented waits until then.
	var available int
	testenv.Must(t, s.db.Transaction(func(tx *gorm.DB) error {
		return tx.Raw("SELECT available FROM product_stock WHERE product_id = ? FOR UPDATE", kettle).Row().Scan(&available)
	}))
	if available != 3 {
		t.Fatalf("stock %d after the crash, want 3", available)
	}
	for _, table := range []string{"orders", "order_items", "stock_reservation", "local_message"} {
		if n := s.count(t, table); n != 0 {
			t.Fatalf("%d rows in %s after the crash", n, table)
		}
	}
	rec := s.send(request{method: http.MethodGet, path: "/internal/orders/" + orderNo, auth: "Bearer " + internalToken})
	if rec.Code != http.StatusNotFound {
		t.Fatalf("the sweeper's question about %s: %d %s, want 404", orderNo, rec.Code, rec.Body)
	}
}

// TestCrashChild is the order service that TestCrashBetweenLockAndCommit
// kills; it does nothing unless run by it.
func TestCrashChild(t *testing.T) {
	dbName := os.Getenv(crashChildVar)
	if dbName == "" {
		t.Skip("run by TestCrashBetweenLockAndCommit")
	}
	db, err := database.Open(context.Background(), testenv.Config(t).MySQL, dbName, testenv.Logger(t))
	testenv.Must(t, err)
	hc := &http.Client{Timeout: 3 * time.Second}
	a, err := app.New(store.New(db, func(...outbox.Message) {}), store.NewProducts(db, func(...outbox.Message) {}),
		couponclient.New(os.Getenv(crashCouponsVar), ordertest.InternalToken, hc),
		paymentclient.New(os.Getenv(crashPaymentsVar), ordertest.InternalToken, hc),
		app.Choices{}, ordertest.Config(), testenv.Logger(t), prometheus.NewRegistry())
	testenv.Must(t, err)
	gin.SetMode(gin.TestMode)
	e := gin.New()
	iss := authtest.New(t)
	v, err := auth.NewVerifier(iss.Config(), auth.Options{})
	testenv.Must(t, err)
	api, err := httpapi.New(a, httpapi.Options{Log: testenv.Logger(t), User: v.Middleware(testenv.Logger(t)), CompleteInTx: func(ctx context.Context, tx order.Tx, status int, body []byte) error {
		// The last step inside the order's transaction: report, then wait
		// to be killed.
		no := ""
		if _, rest, ok := strings.Cut(string(body), `"order_no":"`); ok {
			no, _, _ = strings.Cut(rest, `"`)
		}
		fmt.Println(inTxLine + no)
		time.Sleep(time.Hour)
		return nil
	}})
	testenv.Must(t, err)
	api.Register(e)
	req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(os.Getenv(crashBodyVar)))
	req.Header.Set("Authorization", "Bearer "+iss.Token(t, 1, auth.RoleCustomer))
	req.Header.Set("Content-Type", "application/json")
	e.ServeHTTP(httptest.NewRecorder(), req)
	t.Fatal("the order's transaction went on; the parent should have killed this process")
}
