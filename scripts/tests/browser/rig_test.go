package browser_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/scripts/tests/proctest"
)

func TestMain(m *testing.M) { proctest.Main(m) }

// The programs the rig runs, built together by one go command.
var programs = []string{
	"services/identity/cmd/identity", "services/order/cmd/order", "services/coupon/cmd/coupon",
	"services/payment/cmd/payment", "services/psp-sim/cmd/psp-sim", "services/web/cmd/web", "scripts/tools/faultproxy",
}

// deadline bounds every wait: far above what a step takes on a loaded
// machine, so that only a broken step reaches it.
const deadline = 40 * time.Second

const (
	adminToken    = "dev-admin-token"
	internalToken = "dev-internal-token"
	// alice is identity's development customer (services/identity/README.md).
	alice = 42
)

// faultProxyToken is the fault proxy's own admin token, not the services'.
const faultProxyToken = "web-faultproxy-token"

// service is one started program with its database (nil for psp-sim and
// the storefront, which own none).
type service struct {
	*proctest.Process
	db *sql.DB
}

// rig is the whole shop on free ports: identity, order, coupon, payment, the
// platform simulator and the storefront, each service with a throwaway
// database, all under one event prefix of the run's own. As under make run,
// the coupon service reaches its database through the MySQL fault proxy,
// which the storefront's lab switches arm (the proxy has its own admin
// token).
type rig struct {
	identity, order, coupon, payment, psp, web, faultproxy service
	// webBin and webEnv are the storefront's binary and environment but
	// its address and mode, for a second storefront in another mode.
	webBin string
	webEnv []string
}

// chromium is the browser the tests drive: Debian's, headless. A test tool's
// own browser download does not work on this project's machines.
const chromium = "/usr/bin/chromium"

// startRig starts the shop, the coupon service with couponEnv on top of
// its environment.
func startRig(t *testing.T, couponEnv ...string) *rig {
	t.Helper()
	if _, err := exec.LookPath(chromium); err != nil {
		t.Fatalf("the browser tests drive %s (apt-get install chromium): %v", chromium, err)
	}
	began := time.Now()
	bins := proctest.BuildAll(t, programs...)
	bin := map[string]string{}
	for i, p := range programs {
		bin[p[strings.LastIndexByte(p, '/')+1:]] = bins[i]
	}
	sfx := testenv.RandomSuffix(8)
	ev := events.Config{SubjectPrefix: "web" + sfx + "."}
	nc := testenv.NATS(t)
	for _, subject := range []string{events.OrderPaid, events.PaymentSucceeded, events.ProductBatchCopy} {
		testenv.DeleteStreamAtCleanup(t, nc.JS, ev.StreamName(subject))
	}
	_, redisPrefix := testenv.Redis(t)

	addr := map[string]string{}
	for _, name := range []string{"identity", "order", "coupon", "payment", "psp-sim", "web", "faultproxy", "faultproxy-admin"} {
		addr[name] = testenv.FreeAddr(t)
	}
	url := func(name string) string { return "http://" + addr[name] }
	common := []string{
		"EVENT_SUBJECT_PREFIX=" + ev.SubjectPrefix, "ADMIN_TOKEN=" + adminToken, "INTERNAL_TOKEN=" + internalToken,
		"STARTUP_TIMEOUT=30s", "SHUTDOWN_TIMEOUT=10s", "LOG_LEVEL=debug",
		"OUTBOX_POLL_SCHEDULE=@every 1s", "IDEMPOTENCY_REDIS_PREFIX=" + redisPrefix + "idem:",
		"JOB_LOCK_TTL=5s", "MYSQL_MAX_OPEN_CONNS=6", "MYSQL_MAX_IDLE_CONNS=2",
		// Every service checks identity's tokens once it verifies them.
		"AUTH_ISSUER=" + url("identity"),
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
	secret := "web-psp-secret-" + sfx
	r := &rig{}
	r.psp = service{Process: proctest.Start(t, "psp-sim", bin["psp-sim"], addr["psp-sim"],
		"PSP_HTTP_ADDR="+addr["psp-sim"], "ONCEMALL_ENV=lab", "PSP_SECRET="+secret,
		"PSP_CALLBACK_URL="+url("payment")+"/payments/callback",
		"PSP_REFUND_CALLBACK_URL="+url("payment")+"/payments/refunds/callback",
		"PSP_RETRY_SCHEDULE=100ms,200ms,300ms,500ms,1s", "PSP_NOTIFY_DELAY=10ms")}
	r.faultproxy = service{Process: proctest.Start(t, "faultproxy", bin["faultproxy"], addr["faultproxy-admin"],
		"FAULTPROXY_ADDR="+addr["faultproxy"], "FAULTPROXY_ADMIN_ADDR="+addr["faultproxy-admin"],
		"FAULTPROXY_UPSTREAM="+testenv.Config(t).MySQL.Addr, "ADMIN_TOKEN="+faultProxyToken, "LOG_LEVEL=debug")}
	r.faultproxy.WaitStatus(t, "/healthz", http.StatusOK, deadline)
	// A signing key of the run's own, not the published development one,
	// which a storefront in production mode refuses (TestConsole starts
	// one).
	seed := make([]byte, 32)
	_, _ = rand.Read(seed) // crypto/rand.Read never fails (Go 1.24+)
	r.identity = withDB("identity", "IDENTITY_ISSUER="+url("identity"), "IDENTITY_BCRYPT_COST=4",
		"IDENTITY_SIGNING_KEY="+base64.StdEncoding.EncodeToString(seed),
		"IDENTITY_LOGIN_LIMIT=1000")
	r.order = withDB("order", "COUPON_URL="+url("coupon"), "PAYMENT_URL="+url("payment"))
	r.coupon = withDB("coupon", append([]string{"ORDER_URL=" + url("order"), "COUPON_RETRY_SCHEDULE=@every 1s",
		"COUPON_RETRY_BACKOFF=200ms", "MYSQL_ADDR=" + addr["faultproxy"]}, couponEnv...)...)
	r.payment = withDB("payment", "PSP_URL="+url("psp-sim"), "ORDER_URL="+url("order"), "PSP_SECRET="+secret)
	r.webEnv = []string{"LOG_LEVEL=debug",
		"IDENTITY_URL=" + url("identity"), "AUTH_ISSUER=" + url("identity"),
		"ORDER_URL=" + url("order"), "COUPON_URL=" + url("coupon"), "PAYMENT_URL=" + url("payment"), "PSP_URL=" + url("psp-sim"),
		"WEB_BRAND=browser", "FAULTPROXY_ADMIN_URL=" + url("faultproxy-admin"), "FAULTPROXY_ADMIN_TOKEN=" + faultProxyToken}
	r.webBin = bin["web"]
	r.web = service{Process: proctest.Start(t, "web", bin["web"], addr["web"],
		append([]string{"HTTP_ADDR=" + addr["web"], "ONCEMALL_ENV=lab"}, r.webEnv...)...)}

	r.psp.WaitStatus(t, "/healthz", http.StatusOK, deadline)
	for _, s := range []service{r.identity, r.order, r.coupon, r.payment, r.web} {
		s.WaitStatus(t, "/readyz", http.StatusOK, deadline)
	}
	t.Logf("rig ready after %s", time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		// The storefront first (no more pages), the simulator next (no
		// more deliveries), then the services; each must exit with 0.
		for _, s := range []service{r.web, r.psp, r.payment, r.coupon, r.order, r.identity, r.faultproxy} {
			s.Stop(t, 20*time.Second)
		}
	})
	return r
}

var admin = map[string]string{"Authorization": "Bearer " + adminToken}

var client = &http.Client{Timeout: 10 * time.Second}

func call(t *testing.T, method, url string, headers map[string]string, in, out any) (int, []byte) {
	t.Helper()
	return proctest.JSON(t, context.Background(), client, method, url, headers, in, out)
}

func want(t *testing.T, what string, status int, raw []byte, ok int) {
	t.Helper()
	if status != ok {
		t.Fatalf("%s: status %d %s, want %d", what, status, raw, ok)
	}
}

func count(t *testing.T, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// newProduct has the operator add a product of the storefront's brand.
func (r *rig) newProduct(t *testing.T, name string, price int64, stock int) uint64 {
	t.Helper()
	var p struct {
		ID uint64 `json:"id"`
	}
	st, raw := call(t, "POST", r.order.URL("/admin/products"), admin,
		map[string]any{"brand": "browser", "name": name, "model": name[:1] + "-" + testenv.RandomSuffix(6), "price": price}, &p)
	want(t, "create product", st, raw, http.StatusCreated)
	st, raw = call(t, "PUT", r.order.URL(fmt.Sprintf("/admin/products/%d/stock", p.ID)), admin, map[string]any{"available": stock}, nil)
	want(t, "set stock", st, raw, http.StatusOK)
	return p.ID
}

// newCoupon has the operator make a template and issue one coupon of it.
func (r *rig) newCoupon(t *testing.T, userID uint64, discount, minOrder int64) uint64 {
	t.Helper()
	var tmpl, c struct {
		ID uint64 `json:"id"`
	}
	st, raw := call(t, "POST", r.coupon.URL("/admin/coupon-templates"), admin,
		map[string]any{"name": "browser off", "discount_amount": discount, "min_order_amount": minOrder}, &tmpl)
	want(t, "create coupon template", st, raw, http.StatusCreated)
	st, raw = call(t, "POST", r.coupon.URL("/admin/coupons"), admin, map[string]any{"template_id": tmpl.ID, "user_id": userID}, &c)
	want(t, "issue coupon", st, raw, http.StatusCreated)
	return c.ID
}

func (r *rig) stock(t *testing.T, productID uint64) int {
	t.Helper()
	return count(t, r.order.db, "SELECT available FROM product_stock WHERE product_id = ?", productID)
}

func (r *rig) couponStatus(t *testing.T, id uint64) string {
	t.Helper()
	var s string
	if err := r.coupon.db.QueryRow("SELECT status FROM coupons WHERE id = ?", id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// screenshots is where the test writes its PNGs of the storefront
// (WEB_SCREENSHOTS=../docs/img writes the README's); empty: none.
var screenshots = os.Getenv("WEB_SCREENSHOTS")

// placeOrder signs user in at identity and places an order of qty of
// product through the order service's API, outside any browser, and
// returns its number.
func (r *rig) placeOrder(t *testing.T, user, password string, product uint64, qty int) string {
	t.Helper()
	resp, err := client.PostForm(r.identity.URL("/token"), url.Values{"grant_type": {"password"}, "username": {user}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	err = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("sign in %s at identity: %d %v", user, resp.StatusCode, err)
	}
	var o struct {
		OrderNo string `json:"order_no"`
	}
	st, raw := call(t, "POST", r.order.URL("/orders"), map[string]string{"Authorization": "Bearer " + tok.AccessToken,
		"Idempotency-Key": "browser-" + testenv.RandomSuffix(16)},
		map[string]any{"items": []map[string]any{{"product_id": product, "quantity": qty}}}, &o)
	want(t, "place an order through the API", st, raw, http.StatusCreated)
	return o.OrderNo
}
