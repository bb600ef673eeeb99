package faultproxy_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/lab/faultproxy"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// TestCutRefusesUntilHealed: a Refuse cut closes the sessions a pool holds
// and refuses new ones, so every statement fails, until Heal; then the same
// pool works again and what was written before the cut is there.
func TestCutRefusesUntilHealed(t *testing.T) {
	p, via, _, dbName := startProxy(t)
	db := openSQL(t, via, dbName)
	db.SetMaxIdleConns(4)
	_, err := db.Exec("CREATE TABLE t (id INT PRIMARY KEY)")
	testenv.Must(t, err)
	_, err = db.Exec("INSERT INTO t VALUES (1)")
	testenv.Must(t, err)
	pinned, err := db.Conn(context.Background())
	testenv.Must(t, err)
	defer pinned.Close()
	testenv.Must(t, pinned.PingContext(context.Background()))

	testenv.Must(t, p.Cut(faultproxy.Refuse))
	if st := p.Stats(); st.Outage != faultproxy.Refuse || st.Cuts != 1 || st.SessionsCut < 1 {
		t.Fatalf("stats after the cut = %+v, want outage refuse, 1 cut, the open sessions cut", st)
	}
	testenv.WaitFor(t, 5*time.Second, "the cut sessions to end", func() bool { return p.Stats().ActiveConnections == 0 })
	if err := pinned.PingContext(context.Background()); err == nil {
		t.Fatal("a connection opened before the cut still answers")
	}
	for i := range 5 {
		if _, err := db.Exec("INSERT INTO t VALUES (?)", 10+i); err == nil {
			t.Fatalf("insert %d succeeded through a cut database", i)
		}
	}
	if st := p.Stats(); st.RefusedConnections == 0 || st.SessionsCut < 1 {
		t.Fatalf("stats during the cut = %+v, want connections refused", st)
	}

	p.Heal()
	if st := p.Stats(); st.Outage != "" {
		t.Fatalf("outage after Heal = %q", st.Outage)
	}
	_, err = db.Exec("INSERT INTO t VALUES (2)")
	testenv.Must(t, err)
	var n int
	testenv.Must(t, db.QueryRow("SELECT COUNT(*) FROM t").Scan(&n))
	if n != 2 {
		t.Fatalf("rows after the heal = %d, want 2 (the one before the cut and the one after)", n)
	}
}

// TestCutBlackholeHoldsNewConnectionsUntilHealed: under a Blackhole cut a
// new connection is accepted and never answered (no server greeting, not
// closed), a client with a deadline times out, and Heal closes the held
// connection so its client can connect again.
func TestCutBlackholeHoldsNewConnectionsUntilHealed(t *testing.T) {
	p, via, _, dbName := startProxy(t)
	db := openSQL(t, via, dbName)
	testenv.Must(t, db.Ping())

	testenv.Must(t, p.Cut(faultproxy.Blackhole))
	raw, err := net.Dial("tcp", via.Addr)
	testenv.Must(t, err)
	defer raw.Close()
	testenv.Must(t, raw.SetReadDeadline(time.Now().Add(300*time.Millisecond)))
	var ne net.Error
	if n, err := raw.Read(make([]byte, 64)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read on a black-holed connection = %d bytes, %v; want nothing and a timeout", n, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := db.PingContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ping through a black hole = %v, want the caller's deadline", err)
	}
	testenv.WaitFor(t, 5*time.Second, "both connections to be held", func() bool { return p.Stats().BlackholedConnections >= 2 })

	p.Heal()
	testenv.Must(t, raw.SetReadDeadline(time.Now().Add(5*time.Second)))
	if _, err := io.ReadAll(raw); err != nil {
		t.Fatalf("the held connection after Heal: %v, want it closed (EOF)", err)
	}
	testenv.Must(t, db.Ping())
}

// TestCutRacingClients races 16 clients against cuts and heals: every
// statement that began and ended within one cut failed, and once healed
// every client's statements succeed again.
func TestCutRacingClients(t *testing.T) {
	p, via, _, dbName := startProxy(t)
	db := openSQL(t, via, dbName)
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	_, err := db.Exec("CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, w INT NOT NULL)")
	testenv.Must(t, err)

	// epoch is odd while a cut is in force: a statement that saw the same
	// odd epoch before and after itself ran entirely within one cut.
	var epoch atomic.Int64
	var stop atomic.Bool
	var succeededInCut, failedInCut, ok atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for !stop.Load() {
				before := epoch.Load()
				_, err := db.Exec("INSERT INTO t (w) VALUES (?)", w)
				within := before%2 == 1 && epoch.Load() == before
				switch {
				case within && err == nil:
					succeededInCut.Add(1)
				case within:
					failedInCut.Add(1)
				case err == nil:
					ok.Add(1)
				}
			}
		})
	}
	for range 10 {
		time.Sleep(30 * time.Millisecond)
		mode := faultproxy.Refuse
		if epoch.Load()%4 == 2 {
			mode = faultproxy.Blackhole
		}
		testenv.Must(t, p.Cut(mode))
		epoch.Add(1)
		time.Sleep(30 * time.Millisecond)
		epoch.Add(1)
		p.Heal()
	}
	stop.Store(true)
	wg.Wait()

	if n := succeededInCut.Load(); n != 0 {
		t.Fatalf("%d statements succeeded while the database was cut", n)
	}
	if failedInCut.Load() == 0 || ok.Load() == 0 {
		t.Fatalf("the race did not run both ways: %d failed within a cut, %d succeeded outside", failedInCut.Load(), ok.Load())
	}
	for w := range 16 {
		_, err := db.Exec("INSERT INTO t (w) VALUES (?)", w)
		testenv.Must(t, err)
	}
	if st := p.Stats(); st.Cuts != 10 || st.Outage != "" {
		t.Fatalf("stats = %+v, want 10 cuts, healed", st)
	}
}

// TestAdminCutAndHeal drives the cut through the admin API: a bad mode is
// refused with problem+json, POST /cut without a body refuses, with
// "blackhole" holds, and POST /heal ends it; the metrics follow.
func TestAdminCutAndHeal(t *testing.T) {
	a, p, dsn := startAdmin(t)
	db, err := sql.Open("mysql", dsn)
	testenv.Must(t, err)
	t.Cleanup(func() { _ = db.Close() })
	testenv.Must(t, db.Ping())

	for _, bad := range []string{`{"mode": "down"}`, `{"mode": 1}`, `{"outage": "refuse"}`, `not json`} {
		if code, _, body := a.do(http.MethodPost, "/cut", testToken, bad); code != http.StatusBadRequest {
			t.Errorf("POST /cut %s = %d %s, want 400", bad, code, body)
		}
	}
	if code, _, _ := a.do(http.MethodPost, "/cut", "", ""); code != http.StatusUnauthorized {
		t.Errorf("POST /cut without the token = %d, want 401", code)
	}
	if st := p.Stats(); st.Outage != "" || st.Cuts != 0 {
		t.Fatalf("stats after refused requests = %+v, want no cut", st)
	}

	if code, _, body := a.do(http.MethodPost, "/cut", testToken, ""); code != http.StatusOK || !strings.Contains(string(body), `"outage":"refuse"`) {
		t.Fatalf("POST /cut = %d %s, want 200 and outage refuse", code, body)
	}
	if err := db.Ping(); err == nil {
		t.Fatal("ping succeeded through a cut database")
	}
	if code, _, body := a.do(http.MethodPost, "/cut", testToken, `{"mode": "blackhole"}`); code != http.StatusOK || a.stats().Outage != faultproxy.Blackhole {
		t.Fatalf("POST /cut blackhole = %d %s", code, body)
	}
	_, _, metrics := a.do(http.MethodGet, "/metrics", "", "")
	for _, want := range []string{"faultproxy_outage 1", "faultproxy_cuts_total 2", "faultproxy_refused_connections_total "} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if code, _, body := a.do(http.MethodPost, "/heal", testToken, ""); code != http.StatusOK || a.stats().Outage != "" {
		t.Fatalf("POST /heal = %d %s", code, body)
	}
	testenv.Must(t, db.Ping())
	_, _, metrics = a.do(http.MethodGet, "/metrics", "", "")
	if !strings.Contains(string(metrics), "faultproxy_outage 0") {
		t.Errorf("metrics after the heal lack faultproxy_outage 0")
	}
}
