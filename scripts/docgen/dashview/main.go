// Command dashview draws a Grafana dashboard from Prometheus as an HTML
// page: every row and panel of the dashboard's JSON, each panel's queries
// run over a time range through Prometheus's query_range API, a line chart
// per panel (for a stat panel, the last value) and a legend named as the
// panel's legendFormat names the series. A query that fails is shown on its
// panel; the rest of the page is drawn.
//
// Compose's observability profile runs Grafana with this dashboard
// provisioned. Where Grafana cannot run (no container engine, no package),
// dashview shows what the same queries draw, beside `make observe`:
//
//	go run ./scripts/docgen/dashview -prometheus http://127.0.0.1:9090 -range 10m > .run/dashboard.html
//
// Grafana's own variables are given fixed values ($__rate_interval and
// $__interval the -interval, $__range the -range), and the dashboard's
// template variables their current value, or `.*` when they have none.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, time.Now()); err != nil {
		fmt.Fprintln(os.Stderr, "dashview:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer, now time.Time) error {
	fs := flag.NewFlagSet("dashview", flag.ContinueOnError)
	file := fs.String("dashboard", "deploy/grafana/dashboards/oncemall.json", "the Grafana dashboard's JSON")
	prometheus := fs.String("prometheus", "http://127.0.0.1:9090", "base URL of Prometheus's HTTP API")
	span := fs.Duration("range", time.Hour, "how far back from now the charts go")
	interval := fs.Duration("interval", time.Minute, "the value of $__rate_interval and $__interval")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *span < time.Minute || *interval < time.Second {
		return errors.New("-range must be at least 1m and -interval at least 1s")
	}
	raw, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("decode %s: %w", *file, err)
	}
	end := now.Truncate(time.Second)
	p := prom{
		base:  strings.TrimRight(*prometheus, "/"),
		start: end.Add(-*span), end: end,
		step: max(*span/200, time.Second),
		vars: variables(d, *span, *interval),
	}
	return page.Execute(stdout, draw(d, p, *prometheus))
}

// dashboard is the part of Grafana's dashboard JSON that is drawn. A
// collapsed row keeps its panels inside it; an open row is followed by its
// panels.
type dashboard struct {
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name    string `json:"name"`
			Current struct {
				Value any `json:"value"` // a string, or a list when several are selected
			} `json:"current"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	GridPos     struct {
		W int `json:"w"`
	} `json:"gridPos"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []target `json:"targets"`
	Panels  []panel  `json:"panels"`
}

type target struct {
	RefID        string `json:"refId"`
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
	Hide         bool   `json:"hide"`
}

// variables maps each variable a query may name to the value it is given.
func variables(d dashboard, span, interval time.Duration) map[string]string {
	vars := map[string]string{
		"__rate_interval": promDuration(interval),
		"__interval":      promDuration(interval),
		"__range":         promDuration(span),
	}
	for _, v := range d.Templating.List {
		var chosen []string
		switch cur := v.Current.Value.(type) {
		case string:
			chosen = []string{cur}
		case []any:
			for _, c := range cur {
				if s, ok := c.(string); ok {
					chosen = append(chosen, s)
				}
			}
		}
		chosen = slices.DeleteFunc(chosen, func(s string) bool { return s == "" || s == "$__all" })
		switch len(chosen) {
		case 0:
			vars[v.Name] = ".*"
		case 1:
			vars[v.Name] = chosen[0]
		default: // Grafana writes a multi-value selection into a regexp
			for i := range chosen {
				chosen[i] = regexp.QuoteMeta(chosen[i])
			}
			vars[v.Name] = "(" + strings.Join(chosen, "|") + ")"
		}
	}
	return vars
}

func promDuration(d time.Duration) string {
	if d%time.Minute == 0 {
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return strconv.FormatInt(int64(d/time.Second), 10) + "s"
}

// varRef matches the three ways Grafana names a variable: ${name},
// [[name]] and $name.
var varRef = regexp.MustCompile(`\$\{(\w+)\}|\[\[(\w+)\]\]|\$(\w+)`)

func substitute(expr string, vars map[string]string) string {
	return varRef.ReplaceAllStringFunc(expr, func(ref string) string {
		if v, ok := vars[strings.Trim(ref, "${}[]")]; ok {
			return v
		}
		return ref
	})
}

// prom runs range queries over one time range.
type prom struct {
	base       string
	start, end time.Time
	step       time.Duration
	vars       map[string]string
}

// series is one line of a chart.
type series struct {
	Labels map[string]string
	Times  []float64 // seconds since the epoch
	Values []float64 // NaN where Prometheus answered NaN
}

// queryRange runs one expression of the dashboard, its variables replaced,
// through GET /api/v1/query_range.
func (p prom) queryRange(expr string) ([]series, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	params := url.Values{
		"query": {substitute(expr, p.vars)},
		"start": {strconv.FormatInt(p.start.Unix(), 10)},
		"end":   {strconv.FormatInt(p.end.Unix(), 10)},
		"step":  {strconv.FormatFloat(p.step.Seconds(), 'f', -1, 64)},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/api/v1/query_range?"+params.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return nil, ue.Err // the query is beside it on the panel, the URL says nothing more
	} else if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	// Prometheus answers an error in JSON too (400 bad_data, 422 execution,
	// 503 timeout), and its message is the one worth showing.
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"` // [seconds, "value"]
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("%s, and the body is not Prometheus's JSON: %w", resp.Status, err)
	}
	if out.Status != "success" {
		return nil, fmt.Errorf("%s: %s", resp.Status, out.Error)
	}
	if out.Data.ResultType != "matrix" {
		return nil, fmt.Errorf("result type %q, want matrix", out.Data.ResultType)
	}
	all := make([]series, 0, len(out.Data.Result))
	for _, r := range out.Data.Result {
		s := series{Labels: r.Metric}
		for _, sample := range r.Values {
			t, _ := sample[0].(float64)
			text, _ := sample[1].(string)
			v, err := strconv.ParseFloat(text, 64)
			if err != nil {
				v = math.NaN()
			}
			s.Times, s.Values = append(s.Times, t), append(s.Values, v)
		}
		all = append(all, s)
	}
	return all, nil
}

// labelRef matches {{label}} in a legendFormat.
var labelRef = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

// legend names a series as Grafana does: the legendFormat with the series'
// labels written in, or without one the labels as Prometheus prints them.
func legend(format string, labels map[string]string) string {
	if format != "" && format != "__auto" {
		return strings.TrimSpace(labelRef.ReplaceAllStringFunc(format, func(ref string) string {
			return labels[labelRef.FindStringSubmatch(ref)[1]]
		}))
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if k != "__name__" {
			parts = append(parts, fmt.Sprintf("%s=%q", k, labels[k]))
		}
	}
	return labels["__name__"] + "{" + strings.Join(parts, ", ") + "}"
}
