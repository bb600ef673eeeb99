package promtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/testkit/authtest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/scripts/tests/proctest"
)

func TestMain(m *testing.M) { proctest.Main(m) }

// deadline bounds every wait of the live test.
const deadline = 60 * time.Second

var client = &http.Client{Timeout: 10 * time.Second}

// TestDashboardAndAlertsSelectExportedMetrics runs order, coupon, payment
// and the payment platform simulator as processes, and the real Prometheus
// scraping them every second with deploy/prometheus/local.yml's jobs
// (pointed at the test's ports) and alerts.yml's rules. After one order is
// placed twice with one Idempotency-Key and paid through a storm of
// notifications, it asks Prometheus's HTTP API, for every query of the
// Grafana dashboard and every alert rule:
//   - the query runs;
//   - each metric it selects has been scraped;
//   - each label it matches or groups on is a label of those metrics;
//   - each selector, reduced to its = matchers, selects a series (a
//     misspelt exported_job="..." would otherwise never match, silently);
//
// and that every rule has been evaluated without error.
func TestDashboardAndAlertsSelectExportedMetrics(t *testing.T) {
	prom := binary(t, "prometheus")
	targets := startServices(t)
	api := startPrometheus(t, prom, targets.scrape)
	targets.traffic(t)

	// The last flow's effects are scraped: the payment and the order.paid
	// delivery at the coupon service are counted in Prometheus.
	waitQuery(t, api, `sum(payment_callbacks_total{outcome="processed"}) >= 1 and sum(inbox_messages_total{job="coupon", outcome="processed"}) >= 1`)
	waitQuery(t, api, `count(up{job=~"order|coupon|payment"} == 1) == 3`)

	names := map[string]bool{}
	for _, n := range api.strings(t, "/api/v1/label/__name__/values", nil) {
		names[n] = true
	}
	labelsOf := map[string]map[string]bool{}
	labels := func(metric string) map[string]bool {
		if l, ok := labelsOf[metric]; ok {
			return l
		}
		l := map[string]bool{}
		for _, s := range api.series(t, metric) {
			for k := range s {
				l[k] = true
			}
		}
		labelsOf[metric] = l
		return l
	}
	check := func(where, expr string) {
		t.Helper()
		sels, grouped, err := parseExpr(expr)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			return
		}
		if _, err := api.query(expr); err != nil {
			t.Errorf("%s: Prometheus refuses %q: %v", where, expr, err)
		}
		known := map[string]bool{}
		for _, s := range sels {
			if !names[s.Metric] {
				t.Errorf("%s: metric %s is not exported by any service", where, s.Metric)
				continue
			}
			for l := range labels(s.Metric) {
				known[l] = true
			}
			for _, m := range s.Matchers {
				if !labels(s.Metric)[m.Label] {
					t.Errorf("%s: %s has no label %s", where, s.Metric, m.Label)
				}
			}
			if eq := s.equalities(); len(api.series(t, eq)) == 0 {
				t.Errorf("%s: %s selects no series", where, eq)
			}
		}
		for _, l := range grouped {
			if !known[l] {
				t.Errorf("%s: groups or matches on %s, a label of none of its metrics", where, l)
			}
		}
	}
	for _, expr := range dashboardExprs(t) {
		check("dashboard", expr)
	}
	for _, g := range alertRules(t).Groups {
		for _, r := range g.Rules {
			check("alert "+r.Alert, r.Expr)
		}
	}

	// Every rule has been evaluated, without error.
	testenv.WaitFor(t, deadline, "every rule evaluated", func() bool {
		for _, r := range api.rules(t) {
			if r.LastEvaluation.IsZero() || r.LastEvaluation.Year() < 2000 {
				return false
			}
		}
		return true
	})
	for _, r := range api.rules(t) {
		if r.Health != "ok" {
			t.Errorf("rule %s: health %q: %s", r.Name, r.Health, r.LastError)
		}
	}
}

// services are the started processes: what Prometheus scrapes, and what the
// traffic is sent to.
type services struct {
	scrape               map[string]string // scrape job → host:port
	order, payment, coup *proctest.Process
	psp                  *proctest.Process
	adminToken           string
	// issuer signs the customers in; the services trust it (AUTH_ISSUER).
	issuer *authtest.Issuer
}

// startServices starts order, coupon, payment and psp-sim, each service on
// a database of its own, all on streams and subjects no other run uses.
func startServices(t *testing.T) *services {
	t.Helper()
	sfx := testenv.RandomSuffix(8)
	ev := events.Config{SubjectPrefix: "prom" + sfx + "."}
	nc := testenv.NATS(t)
	for _, e := range []string{events.OrderPaid, events.PaymentSucceeded, events.ProductBatchCopy} {
		testenv.DeleteStreamAtCleanup(t, nc.JS, ev.StreamName(e))
	}
	_, redisPrefix := testenv.Redis(t)
	addr := map[string]string{}
	for _, name := range []string{"order", "coupon", "payment", "psp-sim"} {
		addr[name] = testenv.FreeAddr(t)
	}
	s := &services{adminToken: "prom-admin-" + sfx, issuer: authtest.New(t)}
	common := []string{
		"AUTH_ISSUER=" + s.issuer.URL, "AUTH_AUDIENCE=" + authtest.Audience,
		"EVENT_SUBJECT_PREFIX=" + ev.SubjectPrefix, "ADMIN_TOKEN=" + s.adminToken, "STARTUP_TIMEOUT=30s", "SHUTDOWN_TIMEOUT=10s",
		"OUTBOX_POLL_SCHEDULE=@every 1s", "IDEMPOTENCY_REDIS_PREFIX=" + redisPrefix + "idem:",
		"ORDER_URL=http://" + addr["order"], "COUPON_URL=http://" + addr["coupon"], "PAYMENT_URL=http://" + addr["payment"],
		"PSP_URL=http://" + addr["psp-sim"],
	}
	start := func(name string, env ...string) *proctest.Process {
		_, db := testenv.NewDatabase(t)
		bin := proctest.Build(t, "services/"+name+"/cmd/"+name)
		return proctest.Start(t, name, bin, addr[name], append(append([]string{"HTTP_ADDR=" + addr[name], "MYSQL_DATABASE=" + db}, common...), env...)...)
	}
	s.psp = proctest.Start(t, "psp-sim", proctest.Build(t, "services/psp-sim/cmd/psp-sim"), addr["psp-sim"],
		"PSP_HTTP_ADDR="+addr["psp-sim"], "PSP_CALLBACK_URL=http://"+addr["payment"]+"/payments/callback",
		"PSP_MODE=storm", "PSP_STORM_COPIES=10", "PSP_REPLAYS=3", "PSP_NOTIFY_DELAY=10ms")
	s.order = start("order")
	s.coup = start("coupon")
	s.payment = start("payment")
	s.psp.WaitStatus(t, "/healthz", http.StatusOK, deadline)
	for _, p := range []*proctest.Process{s.order, s.coup, s.payment} {
		p.WaitStatus(t, "/readyz", http.StatusOK, deadline)
	}
	s.scrape = map[string]string{"order": addr["order"], "coupon": addr["coupon"], "payment": addr["payment"]}
	return s
}

// traffic places one order twice with one Idempotency-Key, pays it twice
// with one key, and waits until the storm of notifications has made it
// PAID at the order service.
func (s *services) traffic(t *testing.T) {
	t.Helper()
	admin := map[string]string{"Authorization": "Bearer " + s.adminToken}
	var product struct {
		ID uint64 `json:"id"`
	}
	call(t, http.MethodPost, s.order.URL("/admin/products"), admin, map[string]any{"brand": "acme", "name": "Lamp", "model": "L-1", "price": 2500}, &product, http.StatusCreated)
	call(t, http.MethodPut, s.order.URL(fmt.Sprintf("/admin/products/%d/stock", product.ID)), admin, map[string]any{"available": 5}, nil, http.StatusOK)

	signedIn := "Bearer " + s.issuer.Token(t, 7, auth.RoleCustomer)
	user := map[string]string{"Authorization": signedIn, "Idempotency-Key": "prom-order-" + testenv.RandomSuffix(12)}
	var o struct {
		OrderNo string `json:"order_no"`
		Status  string `json:"status"`
	}
	for range 2 {
		call(t, http.MethodPost, s.order.URL("/orders"), user, map[string]any{"items": []map[string]any{{"product_id": product.ID, "quantity": 1}}}, &o, http.StatusCreated)
	}
	user["Idempotency-Key"] = "prom-pay-" + testenv.RandomSuffix(12)
	for range 2 {
		call(t, http.MethodPost, s.payment.URL("/payments"), user, map[string]any{"order_no": o.OrderNo}, nil, http.StatusCreated)
	}
	testenv.WaitFor(t, deadline, "the order PAID", func() bool {
		var got struct {
			Status string `json:"status"`
		}
		status, _ := do(t, http.MethodGet, s.order.URL("/orders/"+o.OrderNo), map[string]string{"Authorization": signedIn}, nil, &got)
		return status == http.StatusOK && got.Status == "PAID"
	})
}

// call sends a JSON request and fails unless it is answered want.
func call(t *testing.T, method, url string, headers map[string]string, in, out any, want int) {
	t.Helper()
	if status, body := do(t, method, url, headers, in, out); status != want {
		t.Fatalf("%s %s: %d %s, want %d", method, url, status, body, want)
	}
}

func do(t *testing.T, method, url string, headers map[string]string, in, out any) (int, []byte) {
	t.Helper()
	return proctest.JSON(t, context.Background(), client, method, url, headers, in, out)
}

// promAPI is a running Prometheus's HTTP API.
type promAPI struct{ base string }

// startPrometheus runs prom on a free port with local.yml's scrape jobs,
// each pointed at the address scrape gives for it, a one-second scrape and
// evaluation interval, and alerts.yml; it is stopped at cleanup.
func startPrometheus(t *testing.T, prom string, scrape map[string]string) promAPI {
	t.Helper()
	dir := t.TempDir()
	addr := testenv.FreeAddr(t)
	var local struct {
		ScrapeConfigs []struct {
			JobName string `yaml:"job_name"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, filepath.Join(root(t), "deploy", "prometheus", "local.yml"), &local)
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - %q\nscrape_configs:\n",
		filepath.Join(root(t), "deploy", "prometheus", "alerts.yml"))
	var jobs []string
	for _, sc := range local.ScrapeConfigs {
		target, ok := scrape[sc.JobName]
		if sc.JobName == "prometheus" {
			target, ok = addr, true
		}
		if !ok {
			t.Fatalf("local.yml scrapes job %q, which this test does not start", sc.JobName)
		}
		jobs = append(jobs, sc.JobName)
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs:\n      - targets: [%q]\n", sc.JobName, target)
	}
	for job := range scrape {
		if !slices.Contains(jobs, job) {
			t.Fatalf("local.yml does not scrape %s", job)
		}
	}
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	proctest.Tool(t, "prometheus", exec.Command(prom, "--config.file="+path, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn"), 20*time.Second)
	api := promAPI{base: "http://" + addr}
	testenv.WaitFor(t, deadline, "prometheus ready", func() bool {
		resp, err := client.Get(api.base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return api
}

// get calls an API path and decodes its data into out.
func (a promAPI) get(path string, params url.Values, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path+"?"+params.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return fmt.Errorf("%s: %d: %w", path, resp.StatusCode, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s", path, env.Error)
	}
	return json.Unmarshal(env.Data, out)
}

func (a promAPI) strings(t *testing.T, path string, params url.Values) []string {
	t.Helper()
	var out []string
	if err := a.get(path, params, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// series returns the label sets of the series match selects.
func (a promAPI) series(t *testing.T, match string) []map[string]string {
	t.Helper()
	var out []map[string]string
	if err := a.get("/api/v1/series", url.Values{"match[]": {match}}, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// query runs an instant query and returns how many series it answered.
func (a promAPI) query(expr string) (int, error) {
	var out struct {
		Result []json.RawMessage `json:"result"`
	}
	if err := a.get("/api/v1/query", url.Values{"query": {expr}}, &out); err != nil {
		return 0, err
	}
	return len(out.Result), nil
}

// waitQuery waits until expr answers at least one series.
func waitQuery(t *testing.T, a promAPI, expr string) {
	t.Helper()
	testenv.WaitFor(t, deadline, expr, func() bool {
		n, err := a.query(expr)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}

type rule struct {
	Name           string    `json:"name"`
	Health         string    `json:"health"`
	LastError      string    `json:"lastError"`
	LastEvaluation time.Time `json:"lastEvaluation"`
}

// rules returns every rule Prometheus loaded.
func (a promAPI) rules(t *testing.T) []rule {
	t.Helper()
	var out struct {
		Groups []struct {
			Rules []rule `json:"rules"`
		} `json:"groups"`
	}
	if err := a.get("/api/v1/rules", nil, &out); err != nil {
		t.Fatal(err)
	}
	var rs []rule
	for _, g := range out.Groups {
		rs = append(rs, g.Rules...)
	}
	if len(rs) == 0 {
		t.Fatal("Prometheus loaded no rules")
	}
	return rs
}
