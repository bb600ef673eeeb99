package faultproxy_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/lab/faultproxy"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

const testToken = "test-admin-token"

type adminClient struct {
	t   *testing.T
	srv *httptest.Server
}

func (a adminClient) do(method, path, token, body string) (int, http.Header, []byte) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	testenv.Must(a.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.srv.Client().Do(req)
	testenv.Must(a.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	testenv.Must(a.t, err)
	return resp.StatusCode, resp.Header, out
}

func (a adminClient) stats() faultproxy.Stats {
	a.t.Helper()
	code, _, body := a.do(http.MethodGet, "/stats", testToken, "")
	if code != http.StatusOK {
		a.t.Fatalf("GET /stats = %d %s", code, body)
	}
	var st faultproxy.Stats
	testenv.Must(a.t, json.Unmarshal(body, &st))
	return st
}

// startAdmin runs a proxy in front of the test database and its admin API on
// an httptest server.
func startAdmin(t *testing.T) (adminClient, *faultproxy.Proxy, string) {
	t.Helper()
	direct, dbName := testenv.NewDatabase(t)
	cfg := faultproxy.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Upstream = direct.Addr
	cfg.AdminToken = testToken
	cfg.ReplyTimeout = 10 * time.Second
	reg := prometheus.NewRegistry()
	p, err := faultproxy.New(cfg, testenv.Logger(t), reg)
	testenv.Must(t, err)
	addr, err := p.Listen()
	testenv.Must(t, err)
	t.Cleanup(func() { _ = p.Close() })
	admin, err := faultproxy.NewAdminServer(cfg, p, testenv.Logger(t), reg)
	testenv.Must(t, err)
	srv := httptest.NewServer(admin.Handler())
	t.Cleanup(srv.Close)
	via := direct
	via.Addr = addr.String()
	return adminClient{t: t, srv: srv}, p, via.DSN(dbName)
}

func TestAdminEndpointsRequireTheToken(t *testing.T) {
	a, p, _ := startAdmin(t)

	for _, tc := range []struct{ method, path, body string }{
		{http.MethodPost, "/arm", `{"drop_commit_acks": 3}`},
		{http.MethodPost, "/disarm", ""},
		{http.MethodGet, "/stats", ""},
	} {
		for _, token := range []string{"", "wrong-token", testToken + "x"} {
			code, hdr, _ := a.do(tc.method, tc.path, token, tc.body)
			if code != http.StatusUnauthorized || hdr.Get("Content-Type") != problem.ContentType {
				t.Errorf("%s %s with token %q = %d %s, want 401 problem+json", tc.method, tc.path, token, code, hdr.Get("Content-Type"))
			}
		}
	}
	if got := p.Stats().Armed; got != 0 {
		t.Fatalf("armed = %d after unauthorised requests, want 0", got)
	}
	if code, _, _ := a.do(http.MethodGet, "/healthz", "", ""); code != http.StatusOK {
		t.Fatalf("GET /healthz without a token = %d, want 200", code)
	}
	if code, _, body := a.do(http.MethodGet, "/readyz", "", ""); code != http.StatusOK {
		t.Fatalf("GET /readyz = %d %s, want 200 (the upstream is up)", code, body)
	}
}

func TestAdminArmDisarmAndStats(t *testing.T) {
	a, p, _ := startAdmin(t)

	code, _, body := a.do(http.MethodPost, "/arm", testToken, `{"drop_commit_acks": 2}`)
	if code != http.StatusOK {
		t.Fatalf("POST /arm = %d %s", code, body)
	}
	if st := a.stats(); st.Armed != 2 || p.Stats().Armed != 2 {
		t.Fatalf("armed = %d (proxy %d), want 2", st.Armed, p.Stats().Armed)
	}

	for _, bad := range []string{``, `{}`, `{"drop_commit_acks": 0}`, `{"drop_commit_acks": -1}`, `{"drop_commit_acks": 1001}`,
		`{"drop_commit_acks": "1"}`, `{"drops": 1}`, `{"drop_commit_acks": 1, "match": "` + strings.Repeat("m", 257) + `"}`, `{"drop_commit_acks": 1} {}`, `not json`} {
		code, hdr, body := a.do(http.MethodPost, "/arm", testToken, bad)
		if code != http.StatusBadRequest || hdr.Get("Content-Type") != problem.ContentType {
			t.Errorf("POST /arm %q = %d %s, want 400 problem+json", bad, code, body)
		}
	}
	if got := p.Stats().Armed; got != 2 {
		t.Fatalf("armed = %d after rejected requests, want 2 unchanged", got)
	}

	if code, _, body := a.do(http.MethodPost, "/disarm", testToken, ""); code != http.StatusOK {
		t.Fatalf("POST /disarm = %d %s", code, body)
	}
	if st := a.stats(); st.Armed != 0 {
		t.Fatalf("armed after disarm = %d, want 0", st.Armed)
	}
}

func TestAdminArmDropsARealCommitAck(t *testing.T) {
	a, _, dsn := startAdmin(t)
	db, err := sql.Open("mysql", dsn)
	testenv.Must(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Exec("CREATE TABLE t (id INT PRIMARY KEY)")
	testenv.Must(t, err)

	if code, _, body := a.do(http.MethodPost, "/arm", testToken, `{"drop_commit_acks": 1, "match": "INTO t "}`); code != http.StatusOK {
		t.Fatalf("POST /arm = %d %s", code, body)
	}
	if st := a.stats(); st.Armed != 1 || st.Match != "INTO t " {
		t.Fatalf("stats after arming = %+v", st)
	}
	tx, err := db.Begin()
	testenv.Must(t, err)
	_, err = tx.Exec("INSERT INTO t VALUES (1)")
	testenv.Must(t, err)
	if err := tx.Commit(); !errors.Is(err, mysql.ErrInvalidConn) {
		t.Fatalf("commit = %v, want %v", err, mysql.ErrInvalidConn)
	}
	var n int
	testenv.Must(t, db.QueryRow("SELECT COUNT(*) FROM t").Scan(&n))
	if n != 1 {
		t.Fatalf("rows = %d, want 1", n)
	}
	st := a.stats()
	if st.AcksDropped != 1 || st.CommitsSeen != 1 || st.Armed != 0 || st.Connections < 2 {
		t.Fatalf("stats = %+v, want 1 ack dropped of 1 commit, 0 armed, 2+ connections", st)
	}

	_, _, metrics := a.do(http.MethodGet, "/metrics", "", "")
	if !strings.Contains(string(metrics), "faultproxy_commit_acks_dropped_total 1") {
		t.Fatalf("metrics lack the dropped acknowledgement:\n%s", metrics)
	}
}
