// Command traceview draws one trace from Jaeger's query API as an HTML
// page: a row per span, indented under its parent, its bar placed in time,
// its service in colour, and the attributes that tell a purchase's story
// (request_id, outcome, duplicate, the platform's copy and try) beside it;
// rows marked duplicate=true are shaded.
//
// The Jaeger that `make tools` builds from the Go module proxy serves the
// query API but not the web UI, whose assets are built with npm outside
// the module; Jaeger's container image, which compose's observability
// profile runs, has both. traceview is how a trace is seen without it:
//
//	go run ./scripts/docgen/traceview -trace 4bf92f3577b34da6a3ce929d0e0e4736 > .run/trace.html
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "traceview:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("traceview", flag.ContinueOnError)
	jaeger := fs.String("jaeger", "http://127.0.0.1:16686", "base URL of Jaeger's query API")
	id := fs.String("trace", "", "the trace id (32 hex digits)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *id == "" {
		return errors.New("-trace is required")
	}
	tr, err := fetch(*jaeger, *id)
	if err != nil {
		return err
	}
	return page.Execute(stdout, layout(tr))
}

// The parts of GET /api/traces/{id} that are drawn.
type apiTrace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		References    []struct {
			RefType string `json:"refType"`
			SpanID  string `json:"spanID"`
		} `json:"references"`
		StartTime int64 `json:"startTime"` // µs since the epoch
		Duration  int64 `json:"duration"`  // µs
		Tags      []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"tags"`
		ProcessID string `json:"processID"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

func fetch(base, id string) (apiTrace, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/api/traces/"+id, nil)
	if err != nil {
		return apiTrace{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return apiTrace{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return apiTrace{}, fmt.Errorf("GET /api/traces/%s: %s", id, resp.Status)
	}
	var out struct {
		Data []apiTrace `json:"data"`
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return apiTrace{}, fmt.Errorf("decode the trace: %w", err)
	}
	if len(out.Data) != 1 {
		return apiTrace{}, fmt.Errorf("jaeger answered %d traces for %s", len(out.Data), id)
	}
	return out.Data[0], nil
}

// shown are the attributes printed beside a span, in this order.
var shown = []string{"outcome", "duplicate", "psp.copy", "psp.try", "psp.answer_lost", "request_id", "messaging.message.id", "http.response.status_code"}

// row is one span as drawn.
type row struct {
	Service, Name, Attrs string
	Indent               int     // px
	Left, Width          float64 // percent of the trace's time
	Duration             string
	Duplicate            bool
	Colour               string
}

type view struct {
	TraceID  string
	Spans    int
	Services []legend
	Duration string
	Rows     []row
}

type legend struct{ Name, Colour string }

var palette = []string{"#4e79a7", "#59a14f", "#e15759", "#b07aa1", "#f28e2b", "#76b7b2", "#edc948", "#9c755f"}

// layout orders the spans depth first, children by start time, and places
// each in the trace's time. A span whose parent Jaeger does not have (a
// caller that exported nothing) is drawn as a root.
func layout(tr apiTrace) view {
	byID := map[string]int{}
	for i, s := range tr.Spans {
		byID[s.SpanID] = i
	}
	children := map[int][]int{}
	var roots []int
	first, last := int64(1<<62), int64(0)
	for i, s := range tr.Spans {
		first, last = min(first, s.StartTime), max(last, s.StartTime+s.Duration)
		parent := -1
		for _, r := range s.References {
			if p, ok := byID[r.SpanID]; ok && r.RefType == "CHILD_OF" {
				parent = p
			}
		}
		if parent < 0 {
			roots = append(roots, i)
		} else {
			children[parent] = append(children[parent], i)
		}
	}
	byStart := func(a, b int) int { return cmp.Compare(tr.Spans[a].StartTime, tr.Spans[b].StartTime) }
	slices.SortFunc(roots, byStart)
	total := float64(max(last-first, 1))
	colours := map[string]string{}
	v := view{TraceID: tr.TraceID, Spans: len(tr.Spans), Duration: fmtDuration(last - first)}
	var walk func(i, depth int)
	walk = func(i, depth int) {
		s := tr.Spans[i]
		service := tr.Processes[s.ProcessID].ServiceName
		if _, ok := colours[service]; !ok {
			colours[service] = palette[len(colours)%len(palette)]
			v.Services = append(v.Services, legend{service, colours[service]})
		}
		tags := map[string]string{}
		for _, t := range s.Tags {
			tags[t.Key] = fmt.Sprint(t.Value)
		}
		var attrs []string
		for _, k := range shown {
			if val, ok := tags[k]; ok {
				attrs = append(attrs, k+"="+val)
			}
		}
		v.Rows = append(v.Rows, row{
			Service: service, Name: s.OperationName, Attrs: strings.Join(attrs, " "), Indent: 4 + 14*depth,
			Left: 100 * float64(s.StartTime-first) / total, Width: max(100*float64(s.Duration)/total, 0.3),
			Duration: fmtDuration(s.Duration), Duplicate: tags["duplicate"] == "true", Colour: colours[service],
		})
		kids := children[i]
		slices.SortFunc(kids, byStart)
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return v
}

func fmtDuration(us int64) string {
	return (time.Duration(us) * time.Microsecond).Round(10 * time.Microsecond).String()
}

var page = template.Must(template.New("trace").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>trace {{.TraceID}}</title>
<style>
body { font: 12px/1.35 system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 16px; margin: 0 0 4px; } .sub { color: #555; margin-bottom: 10px; }
table { border-collapse: collapse; width: 100%; table-layout: fixed; }
td { padding: 1px 4px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; border-bottom: 1px solid #eee; }
td.svc { width: 70px; font-weight: 600; } td.name { width: 330px; } td.attrs { width: 430px; color: #555; font-family: monospace; font-size: 11px; }
td.dur { width: 60px; text-align: right; color: #555; }
.lane { position: relative; height: 12px; } .bar { position: absolute; top: 1px; height: 10px; border-radius: 2px; }
tr.dup { background: #fff3e0; }
.key span { display: inline-block; padding: 1px 6px; margin-right: 6px; color: #fff; border-radius: 3px; }
</style></head><body>
<h1>trace {{.TraceID}}</h1>
<div class="sub">{{.Spans}} spans, {{.Duration}} &middot; <span class="key">{{range $.Services}}<span style="background: {{.Colour}}">{{.Name}}</span>{{end}}</span> &middot; shaded: duplicate=true</div>
<table>
{{range .Rows}}<tr{{if .Duplicate}} class="dup"{{end}}>
<td class="svc" style="color: {{.Colour}}">{{.Service}}</td>
<td class="name" style="padding-left: {{.Indent}}px">{{.Name}}</td>
<td class="attrs">{{.Attrs}}</td>
<td><div class="lane"><div class="bar" style="left: {{printf "%.2f" .Left}}%; width: {{printf "%.2f" .Width}}%; background: {{.Colour}}"></div></div></td>
<td class="dur">{{.Duration}}</td>
</tr>
{{end}}</table>
</body></html>
`))
