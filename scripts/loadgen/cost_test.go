package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseCommandStats(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_get:calls=10,usec=50,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_evalsha:calls=7,usec=70\r\ncmdstat_config|set:calls=99,usec=1\r\ncmdstat_info:calls=5,usec=1\r\ncmdstat_client|setinfo:calls=2,usec=1\r\n"
	got := parseCommandStats(info)
	want := map[string]float64{"get": 10, "evalsha": 7, "client": 2}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v (the loadgen's own config and info left out)", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func TestParseNATS(t *testing.T) {
	v, err := parseVarz([]byte(`{"server_id":"X","start":"2026-12-01T21:00:00Z","in_msgs":120,"out_msgs":300,"in_bytes":1}`))
	if err != nil || v.InMsgs != 120 || v.OutMsgs != 300 || v.Start == "" {
		t.Fatalf("varz %+v %v", v, err)
	}
	if _, err := parseVarz([]byte(`{}`)); err == nil {
		t.Fatal("a varz without a start time accepted")
	}
	jsz := `{"account_details":[{"name":"$G","stream_detail":[
		{"name":"ORDER_PAID","state":{"messages":3,"last_seq":40},"consumer_detail":[{"name":"coupon","delivered":{"consumer_seq":41,"stream_seq":40}}]},
		{"name":"PAYMENT_SUCCEEDED","state":{"messages":0,"last_seq":50},"consumer_detail":[{"name":"order","delivered":{"consumer_seq":50}},{"name":"other","delivered":{"consumer_seq":2}}]}]}]}`
	stored, delivered, err := parseJsz([]byte(jsz))
	if err != nil || stored != 90 || delivered != 93 {
		t.Fatalf("jsz: stored %v, delivered %v, %v; want 90, 93", stored, delivered, err)
	}
}

func TestServedRequests(t *testing.T) {
	metrics := `# HELP http_requests_total HTTP requests served, by method, route and status code.
# TYPE http_requests_total counter
http_requests_total{method="POST",route="/orders",status="201"} 100
http_requests_total{method="POST",route="/orders",status="503"} 7
http_requests_total{method="GET",route="/readyz",status="200"} 50
http_requests_total{method="GET",route="/healthz",status="200"} 5
http_requests_total{method="GET",route="/metrics",status="200"} 30
http_requests_total{method="GET",route="/debug/pprof/profile",status="200"} 1
http_requests_total{method="POST",route="/internal/orders/:no/pay",status="200"} 3
http_requests_total_other{route="/orders"} 1000
`
	if got := servedRequests([]byte(metrics)); got != 110 {
		t.Fatalf("served %v, want 110 (probes and scrapes left out)", got)
	}
}

// TestBetweenAndCost: a usage subtracts its readings, takes a counter that
// went down (a restarted server) as all new, leaves out a source either
// reading could not read, and the cost subtracts the idle rate × the
// window and divides by the purchases, counting every group but the load
// generator and the fault proxy.
func TestBetweenAndCost(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	groups := map[string][]int{"order": {10}, "mariadb": {20}, "loadgen": {30}, "faultproxy": {40}}
	rd := func(at time.Duration, cpu map[int]float64, n map[string]float64, unread map[string]string) reading {
		return reading{at: t0.Add(at), groups: groups, cpu: cpu, n: n, unread: unread, natsStart: t0.Add(-time.Hour), cpus: 2, total: at.Seconds() * 200, busy: at.Seconds() * 100}
	}
	// The idle window: 10 s; order 0.1 cores, MariaDB 0.2, the loadgen 0.5.
	idle := between(
		rd(0, map[int]float64{10: 1, 20: 2, 30: 3, 40: 0}, map[string]float64{"mysql:Com_select": 100, "mysql:Com_begin": 10, "mysql:Com_stmt_execute": 50, "redis:get": 5, "nats:in_msgs": 1000, "js:stored": 5}, nil),
		rd(10*time.Second, map[int]float64{10: 2, 20: 4, 30: 8, 40: 0}, map[string]float64{"mysql:Com_select": 110, "mysql:Com_begin": 10, "mysql:Com_stmt_execute": 50, "redis:get": 5, "nats:in_msgs": 1100, "js:stored": 5}, nil))
	if idle.cpu["order"] != 1 || idle.n["mysql:Com_select"] != 10 || idle.busyPct != 50 {
		t.Fatalf("idle usage %+v", idle)
	}
	// The load: 20 s, 100 purchases; NATS restarted (its counter went
	// down); the HTTP metrics unread at the end.
	load := between(
		rd(100*time.Second, map[int]float64{10: 10, 20: 20, 30: 30, 40: 40}, map[string]float64{"mysql:Com_select": 1000, "mysql:Com_begin": 100, "mysql:Com_insert": 0, "mysql:Com_stmt_execute": 60, "redis:get": 5, "nats:in_msgs": 5000, "js:stored": 10, "http:served": 7}, nil),
		rd(120*time.Second, map[int]float64{10: 14, 20: 30, 30: 40, 40: 42}, map[string]float64{"mysql:Com_select": 2620, "mysql:Com_begin": 600, "mysql:Com_insert": 300, "mysql:Com_stmt_execute": 60, "redis:get": 405, "nats:in_msgs": 800, "js:stored": 410}, map[string]string{srcHTTP: "refused"}))
	if load.n["nats:in_msgs"] != 800 || load.n["js:stored"] != 400 || load.cpu["mariadb"] != 10 {
		t.Fatalf("load usage %+v", load)
	}
	if _, ok := load.n["http:served"]; ok {
		t.Fatal("an unread source has a figure")
	}
	c := newCost(load, idle, 100, nil)
	// order: 4 CPU s − 0.1 × 20 = 2 s → 20 ms; MariaDB: 10 − 0.2 × 20 = 6 s
	// → 60 ms; the loadgen and the proxy not counted.
	if math.Abs(c.CPUMsPerPurchase-80) > 1e-9 || math.Abs(c.CPUMsPerPurchaseIdleIn-140) > 1e-9 {
		t.Fatalf("CPU per purchase %v (idle in %v), want 80 (140)", c.CPUMsPerPurchase, c.CPUMsPerPurchaseIdleIn)
	}
	for _, p := range c.CPU {
		if p.Counted == (p.Group == "loadgen" || p.Group == "faultproxy") {
			t.Errorf("%s counted: %v", p.Group, p.Counted)
		}
	}
	for key, want := range map[string]float64{
		"sql_statements": (1620 + 500 + 300 - 20) / 100.0, // SELECT 1620 − 20 idle, START 500, INSERT 300; prepared-statement commands left out
		"transactions":   5,
		"sql:SELECT":     16,
		"sql:INSERT":     3,
		"redis_commands": 4,
		"nats_in":        (800 - 200) / 100.0,
		"js_stored":      4,
	} {
		if got, ok := c.work(key); !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("%s per purchase = %v (%v), want %v", key, got, ok, want)
		}
	}
	if _, ok := c.work("http_served"); ok || c.Unread[srcHTTP] == "" {
		t.Errorf("HTTP figures reported though unread: %v", c.Unread)
	}

	// NATS down at the first reading and started after it: all it counted
	// is new. Read both times but restarted between: its figures are gone.
	down := rd(200*time.Second, nil, map[string]float64{}, map[string]string{srcNATS: "connection refused"})
	up := rd(210*time.Second, nil, map[string]float64{"nats:in_msgs": 70}, nil)
	up.natsStart = t0.Add(205 * time.Second)
	if u := between(down, up); u.n["nats:in_msgs"] != 70 || u.unread[srcNATS] != "" {
		t.Errorf("NATS started within the window: %v, unread %v; want 70 counted", u.n, u.unread)
	}
	before := rd(190*time.Second, nil, map[string]float64{"nats:in_msgs": 500}, nil)
	if u := between(before, up); u.unread[srcNATS] == "" {
		t.Errorf("NATS restarted between two readings of it: %v counted", u.n["nats:in_msgs"])
	}
	var text strings.Builder
	c.writeText(&text)
	for _, want := range []string{"80.0 ms of CPU per completed purchase (every process but faultproxy, loadgen", "SQL by kind: START 5.0, INSERT 3.0, SELECT 16.0", "not read: http"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("cost text lacks %q:\n%s", want, text.String())
		}
	}
}

// TestFlowWindow: goodput counts the purchases completed within the window
// (the coupon used, when there was one), whenever they started.
func TestFlowWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	used := func(s float64) (n sql.NullTime) { return sql.NullTime{Time: at(s), Valid: true} }
	rows := []orderRow{
		{status: "PAID", created: at(1), updated: at(2)},                                   // in
		{status: "PAID", withCoupon: true, created: at(1), updated: at(2), used: used(11)}, // used after the window
		{status: "PAID", withCoupon: true, created: at(3), updated: at(4)},                 // coupon never used
		{status: "CANCELLED", created: at(3), updated: at(4)},
		{status: "PAID", created: at(-2), updated: at(0.5)}, // started before, completed in
	}
	f := flowOf(rows, t0, at(10))
	if f.Orders != 5 || f.Paid != 4 || f.Cancelled != 1 || f.Completed != 3 || f.CompletedInWindow != 2 || f.PerSecond != 0.2 {
		t.Fatalf("flow %+v", f)
	}
	if f.CreatedToOrderPaid.Count != 4 || f.CreatedToCouponUsed.Count != 1 || f.CreatedToCouponUsed.P50 != 10000 {
		t.Fatalf("latencies %+v %+v", f.CreatedToOrderPaid, f.CreatedToCouponUsed)
	}
}

// TestReportFixturesAreCurrent decodes the reports bench's tests
// read (real --json output, in ../bench/testdata) strictly into
// Report: a field renamed here fails this test until the fixtures are
// written again, and then bench's own tests say whether it still
// finds its figures.
func TestReportFixturesAreCurrent(t *testing.T) {
	files, err := filepath.Glob("../bench/testdata/loadgen-*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var r Report
		if err := dec.Decode(&r); err != nil {
			t.Errorf("%s is not a current loadgen report: %v", f, err)
		}
	}
}

func TestListenInodes(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000   105        0 2001 1 0 100 0 0 10 0
   1: 0100007F:0CEB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2002 1 0 100 0 0 10 0
   2: 0100007F:0CEA 0100007F:A000 01 00000000:00000000 00:00000000 00000000   105        0 2003 1 0 100 0 0 10 0
`
	if got := listenInodes(table, 3306); len(got) != 1 || got[0] != "2001" {
		t.Fatalf("listening on 3306: %v, want [2001] (3307 and an established connection left out)", got)
	}
	// This test's own listener is found among this process's sockets.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if got := listening([]int{os.Getpid(), 1}, port); len(got) != 1 || got[0] != os.Getpid() {
		t.Fatalf("listening(%d) = %v, want this process", port, got)
	}
}
