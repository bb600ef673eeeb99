package lab

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/lab/faultproxy"
	"github.com/oncemall/oncemall/pkg/testkit/authtest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/web/internal/config"
	"github.com/oncemall/oncemall/services/web/internal/pages"
	"github.com/oncemall/oncemall/services/web/internal/upstream"
)

// TestArmingCountsFromItsBaseline: the lost-ACK switch arms the real fault
// proxy's admin API with its token and the ledger insert's text, and the
// counts beside it grow from what they were when it was armed. While the
// coupon service's metrics cannot be read, it arms nothing.
func TestArmingCountsFromItsBaseline(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	cfg := faultproxy.DefaultConfig()
	cfg.Upstream = "127.0.0.1:1" // never dialled: only its admin API is used
	proxy, err := faultproxy.New(cfg, testenv.Logger(t), prometheus.NewRegistry())
	testenv.Must(t, err)
	admin := gin.New()
	proxy.AdminRoutes(admin, "proxy-token")
	proxySrv := httptest.NewServer(admin)
	defer proxySrv.Close()

	// The coupon service: its deductions counter, and a reconciler that
	// finds nothing; down while down is set.
	reg := prometheus.NewRegistry()
	deductions := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coupon_deductions_total"}, []string{"mode"})
	reg.MustRegister(deductions)
	deductions.WithLabelValues("fixed").Add(3)
	var down atomic.Bool
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	service := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case down.Load():
			w.WriteHeader(http.StatusServiceUnavailable)
		case r.URL.Path == "/metrics":
			metrics.ServeHTTP(w, r)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"anomalies":[],"empty":true,"report":{}}`))
		}
	}))
	defer service.Close()

	iss := authtest.New(t)
	v, err := auth.NewVerifier(iss.Config(), auth.Options{})
	testenv.Must(t, err)
	hc := &http.Client{Timeout: 2 * time.Second}
	client, err := upstream.New(upstream.URLs{Identity: service.URL, Order: service.URL, Coupon: service.URL, Payment: service.URL, PSP: service.URL}, hc, nil)
	testenv.Must(t, err)
	web := config.Config{OrderURL: service.URL, CouponURL: service.URL, PaymentURL: service.URL, PSPURL: service.URL}
	sw := newSwitches(Config{FaultProxyURL: proxySrv.URL, FaultProxyToken: "proxy-token"}, web, client, hc, &doubler{})
	p, err := pages.New(client, v, pages.Options{Log: testenv.Logger(t), Brand: "demo", CookieKey: []byte("test-cookie-key-0123456789"),
		Operator: client, Sections: []pages.Section{sw.section()}})
	testenv.Must(t, err)
	e := gin.New()
	p.Register(e)
	srv := httptest.NewServer(e)
	defer srv.Close()

	jar, _ := cookiejar.New(nil)
	u, _ := url.Parse(srv.URL)
	jar.SetCookies(u, []*http.Cookie{{Name: "oncemall_session", Value: iss.Token(t, 1, auth.RoleOperator), Path: "/"}})
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	page := func() string {
		resp, err := browser.Get(srv.URL + "/console/lab")
		testenv.Must(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /console/lab: %d\n%s", resp.StatusCode, b)
		}
		return string(b)
	}
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page())[1]
	arm := func() *http.Response {
		resp, err := browser.PostForm(srv.URL+"/console/lab/lost-ack", url.Values{"csrf": {csrf}, "drops": {"2"}})
		testenv.Must(t, err)
		resp.Body.Close()
		return resp
	}
	row := func(body, key string) string {
		m := regexp.MustCompile(`(?s)data-count="` + key + `".*?data-field="now">([^<]*)</td>\s*<td class="num" data-field="since">([^<]*)</td>`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no row %s in\n%s", key, body)
		}
		return m[1] + "/" + m[2]
	}

	down.Store(true)
	if resp := arm(); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("arming with the coupon service down: %d, want 502", resp.StatusCode)
	}
	if st := proxy.Stats(); st.Armed != 0 {
		t.Fatalf("the proxy was armed (%d) without the counts' baseline", st.Armed)
	}
	down.Store(false)
	if resp := arm(); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("arming: %d, want 303", resp.StatusCode)
	}
	if st := proxy.Stats(); st.Armed != 2 || st.Match != matchDeduction {
		t.Fatalf("the proxy is armed %d times for %q, want 2 for %q", st.Armed, st.Match, matchDeduction)
	}
	deductions.WithLabelValues("fixed").Inc()
	body := page()
	if got := row(body, "deductions"); got != "4/1" {
		t.Errorf("deductions: now/since %s, want 4/1", got)
	}
	if got := row(body, "armed"); got != "2/" {
		t.Errorf("armed: now/since %s, want 2 and no since (a gauge)", got)
	}
	if !strings.Contains(body, "Since used (") {
		t.Errorf("the page does not say when the switch was used:\n%s", body)
	}
}
