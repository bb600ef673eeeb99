package main

import (
	"encoding/json"
	"fmt"
	"html"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// now is the end of every range drawn here: 2026-12-01 10:30:00 UTC.
var now = time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)

// fakePrometheus answers GET /api/v1/query_range as Prometheus does, at
// every step of the range asked: two series with the labels the dashboard's
// queries group by, the second NaN through the middle third (as a ratio is
// 0/0 while nothing is asked). It refuses, as bad_data, a query that
// contains refuse or still names a Grafana variable. It records every
// query it was asked.
func fakePrometheus(t *testing.T, refuse string, asked *[]string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		start, err1 := strconv.ParseInt(q.Get("start"), 10, 64)
		end, err2 := strconv.ParseInt(q.Get("end"), 10, 64)
		step, err3 := strconv.ParseFloat(q.Get("step"), 64)
		if r.URL.Path != "/api/v1/query_range" || err1 != nil || err2 != nil || err3 != nil || step <= 0 {
			http.Error(w, "not a range query: "+r.URL.String(), http.StatusNotFound)
			return
		}
		if end != now.Unix() || end-start != 600 {
			http.Error(w, "not the last 10 minutes: "+r.URL.String(), http.StatusNotFound)
			return
		}
		expr := q.Get("query")
		*asked = append(*asked, expr)
		if strings.Contains(expr, refuse) || strings.Contains(expr, "$") {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"status": "error", "errorType": "bad_data", "error": "parse error: cannot parse " + expr})
			return
		}
		var one, two []string
		n := int(float64(end-start)/step) + 1
		for i := range n {
			t := float64(start) + float64(i)*step
			one = append(one, fmt.Sprintf(`[%g,"2"]`, t))
			v := "4"
			if i > n/3 && i < 2*n/3 {
				v = "NaN"
			}
			two = append(two, fmt.Sprintf(`[%g,%q]`, t, v))
		}
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"matrix","result":[
			{"metric":{"job":"order","status":"201","route":"/orders","mode":"reserve","outcome":"ok"},"values":[%s]},
			{"metric":{"job":"payment","status":"500"},"values":[%s]}]}}`, strings.Join(one, ","), strings.Join(two, ","))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// panelHTML is the section drawn for the panel with that id.
func panelHTML(t *testing.T, page string, id int) string {
	t.Helper()
	start := strings.Index(page, fmt.Sprintf(`<section class="panel" id="panel-%d"`, id))
	if start < 0 {
		t.Fatalf("no panel %d on the page:\n%s", id, page)
	}
	return page[start : start+strings.Index(page[start:], "</section>")]
}

func TestDrawsEveryPanelOfTheDashboard(t *testing.T) {
	const file = "../../../deploy/grafana/dashboards/oncemall.json"
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	var asked []string
	prometheus := fakePrometheus(t, "coupon_lock_requests_total", &asked)
	var out strings.Builder
	if err := run([]string{"-dashboard", file, "-prometheus", prometheus, "-range", "10m"}, &out, now); err != nil {
		t.Fatal(err)
	}
	page := out.String()
	if !strings.Contains(page, "2026-12-01 10:20:00 to 10:30:00 UTC") {
		t.Errorf("the page does not say its range:\n%s", page)
	}

	// Every panel is drawn under its title, a line per series; the one
	// whose second query was refused shows why, and the first's lines.
	panels, queries := 0, 0
	for _, p := range d.Panels {
		if p.Type == "row" {
			if !strings.Contains(page, "<h2>"+html.EscapeString(p.Title)+"</h2>") {
				t.Errorf("row %q is not on the page", p.Title)
			}
			continue
		}
		panels++
		queries += len(p.Targets)
		got := panelHTML(t, page, p.ID)
		if !strings.Contains(got, "<h3>"+html.EscapeString(p.Title)+"</h3>") {
			t.Errorf("panel %d lacks its title %q:\n%s", p.ID, p.Title, got)
		}
		lines, refused := 2*len(p.Targets), p.Title == "Business outcomes"
		if refused {
			lines -= 2
		}
		if n := strings.Count(got, `<path d="M`); !strings.Contains(got, "<svg") || n != lines {
			t.Errorf("panel %d %q: %d lines in a chart, want %d:\n%s", p.ID, p.Title, n, lines, got)
		}
		if shown := strings.Contains(got, `class="error"`); shown != refused {
			t.Errorf("panel %d %q shows an error: %v, want %v:\n%s", p.ID, p.Title, shown, refused, got)
		}
	}
	if panels != 15 || len(asked) != queries {
		t.Fatalf("%d panels drawn and %d queries asked, want 15 and %d", panels, len(asked), queries)
	}
	outcomes := panelHTML(t, page, 5)
	for _, want := range []string{"query B: 400 Bad Request: parse error: cannot parse sum by (outcome)", "stock reserve ok<b>2 ops/s</b>"} {
		if !strings.Contains(outcomes, want) {
			t.Errorf("the Business outcomes panel lacks %q:\n%s", want, outcomes)
		}
	}

	// Legends follow legendFormat, values the panel's unit, the time axis
	// the range; the NaNs break the second line in two.
	for id, wants := range map[int][]string{
		2: {"order 201<b>2 req/s</b>", "payment 500<b>4 req/s</b>", ">10:20</text>", ">10:30</text>", ">4 req/s</text>"},
		3: {"payment<b>400%</b>"},
		4: {"order /orders<b>2 s</b>"},
	} {
		got := panelHTML(t, page, id)
		for _, want := range wants {
			if !strings.Contains(got, want) {
				t.Errorf("panel %d lacks %q:\n%s", id, want, got)
			}
		}
	}
	requests := panelHTML(t, page, 2)
	paths := strings.Split(requests, "<path ")[1:]
	if len(paths) != 2 || strings.Count(paths[0], "M") != 1 || strings.Count(paths[1], "M") != 2 {
		t.Errorf("want one whole line and one broken in two:\n%s", requests)
	}
}

func TestStatPanelsAndVariables(t *testing.T) {
	file := filepath.Join(t.TempDir(), "dashboard.json")
	err := os.WriteFile(file, []byte(`{"title":"small",
	 "templating":{"list":[{"name":"job","current":{"value":"coupon"}},{"name":"route","current":{"value":["$__all"]}}]},
	 "panels":[
	  {"type":"timeseries","id":1,"title":"Before any row","gridPos":{"w":12},
	   "targets":[{"refId":"A","expr":"rate(x{job=\"${job}\", route=~\"$route\"}[$__rate_interval])"}]},
	  {"type":"row","id":2,"title":"Collapsed","collapsed":true,"panels":[
	   {"type":"stat","id":3,"title":"Backlog","gridPos":{"w":6},
	    "targets":[{"refId":"A","expr":"max(outbox_pending_messages{job=\"[[job]]\"})","legendFormat":"{{job}}"},
	               {"refId":"B","expr":"hidden","hide":true}]}]}]}`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	prometheus := fakePrometheus(t, "never", &asked)
	var out strings.Builder
	if err := run([]string{"-dashboard", file, "-prometheus", prometheus, "-range", "10m", "-interval", "30s"}, &out, now); err != nil {
		t.Fatal(err)
	}
	page := out.String()
	want := []string{`rate(x{job="coupon", route=~".*"}[30s])`, `max(outbox_pending_messages{job="coupon"})`}
	if fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Fatalf("asked %q, want %q", asked, want)
	}
	stat := panelHTML(t, page, 3)
	if !strings.Contains(page, "<h2>Collapsed</h2>") || strings.Contains(stat, "<svg") ||
		!strings.Contains(stat, `<strong style="color: #7eb26d">2</strong>order</div>`) || !strings.Contains(stat, ">4</strong>payment") {
		t.Errorf("the stat panel is not its series' last values:\n%s", stat)
	}
	if first := panelHTML(t, page, 1); !strings.Contains(first, `x{job=\"order\", mode=\"reserve\"`) && !strings.Contains(first, `{job=&#34;order&#34;, mode=&#34;reserve&#34;`) {
		t.Errorf("a series without legendFormat is not named by its labels:\n%s", first)
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{
		{0.0123, "percentunit", "1.23%"},
		{0.25, "s", "250 ms"},
		{12.5, "s", "12.5 s"},
		{1234, "short", "1.23k"},
		{2500000, "", "2.5M"},
		{0.5, "reqps", "0.5 req/s"},
		{math.NaN(), "ops", "–"},
	} {
		if got := format(c.v, c.unit); got != c.want {
			t.Errorf("format(%v, %q) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
}
