package main

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// The page is 24 grid columns of colWidth pixels, as Grafana's grid is 24
// wide; a panel is a chart of chartHeight pixels above its legend.
const (
	colWidth    = 56
	chartHeight = 180
)

// Grafana's classic palette, the colours of a panel's series in order.
var palette = []string{"#7eb26d", "#eab839", "#6ed0e0", "#ef843c", "#e24d42", "#1f78c1", "#ba43a9", "#705da0", "#508642", "#cca300", "#447ebc", "#c15c17"}

type view struct {
	Title, Source, From, To string
	Rows                    []rowView
}

type rowView struct {
	Title  string
	Panels []panelView
}

type panelView struct {
	ID                 int
	Title, Description string
	Width              int // px, border included
	Stat               bool
	Chart              chart
	Legend             []legendItem
	Errors             []string
}

type legendItem struct{ Name, Colour, Last string }

// chart is one SVG line chart, every coordinate in pixels.
type chart struct {
	W, H                   int
	Left, Right, Top, Base int // the plot area
	Lines                  []line
	YTicks, XTicks         []tick
	NoData                 bool
}

type line struct{ D, Colour string }

type tick struct {
	Pos   int
	Label string
}

// draw runs every panel's queries and lays the dashboard out by row. Panels
// before the first row go in an untitled one.
func draw(d dashboard, p prom, source string) view {
	v := view{
		Title: d.Title, Source: source,
		From: p.start.UTC().Format("2006-01-02 15:04:05"), To: p.end.UTC().Format("15:04:05 MST"),
	}
	for _, pn := range d.Panels {
		if pn.Type == "row" {
			v.Rows = append(v.Rows, rowView{Title: pn.Title})
			for _, inner := range pn.Panels {
				v.Rows[len(v.Rows)-1].Panels = append(v.Rows[len(v.Rows)-1].Panels, drawPanel(inner, p))
			}
			continue
		}
		if len(v.Rows) == 0 {
			v.Rows = append(v.Rows, rowView{})
		}
		v.Rows[len(v.Rows)-1].Panels = append(v.Rows[len(v.Rows)-1].Panels, drawPanel(pn, p))
	}
	return v
}

func drawPanel(pn panel, p prom) panelView {
	w := pn.GridPos.W
	if w <= 0 || w > 24 {
		w = 24
	}
	pv := panelView{
		ID: pn.ID, Title: pn.Title, Description: pn.Description, Width: w * colWidth,
		Stat: pn.Type == "stat" || pn.Type == "gauge" || pn.Type == "bargauge",
	}
	unit := pn.FieldConfig.Defaults.Unit
	var all []series
	for _, t := range pn.Targets {
		if t.Hide || t.Expr == "" {
			continue
		}
		got, err := p.queryRange(t.Expr)
		if err != nil {
			pv.Errors = append(pv.Errors, fmt.Sprintf("query %s: %v", t.RefID, err))
			continue
		}
		for _, s := range got {
			pv.Legend = append(pv.Legend, legendItem{
				Name: legend(t.LegendFormat, s.Labels), Colour: palette[len(all)%len(palette)],
				Last: format(last(s.Values), unit),
			})
			all = append(all, s)
		}
	}
	pv.Chart = lineChart(all, pv.Legend, unit, float64(p.start.Unix()), float64(p.end.Unix()), p.step.Seconds(), pv.Width-18)
	return pv
}

// lineChart draws the series from `from` to `to` (seconds since the epoch).
// A line breaks where a value is NaN or samples are missing, as Grafana's
// does by default.
func lineChart(all []series, names []legendItem, unit string, from, to, step float64, width int) chart {
	c := chart{W: width, H: chartHeight, Left: 64, Right: width - 16, Top: 10, Base: chartHeight - 22}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range all {
		for _, v := range s.Values {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	x := func(t float64) float64 { return float64(c.Left) + (t-from)/(to-from)*float64(c.Right-c.Left) }
	every := timeStep(to - from)
	for t := math.Ceil(from/every) * every; t <= to; t += every {
		c.XTicks = append(c.XTicks, tick{int(math.Round(x(t))), time.Unix(int64(t), 0).UTC().Format("15:04")})
	}
	if lo > hi {
		c.NoData = true
		return c
	}
	lo, hi = min(lo, 0), max(hi, 0)
	stepY := niceStep((hi - lo) / 4)
	lo, hi = math.Floor(lo/stepY)*stepY, math.Ceil(hi/stepY)*stepY
	if hi == lo {
		hi = lo + stepY
	}
	y := func(v float64) float64 { return float64(c.Base) - (v-lo)/(hi-lo)*float64(c.Base-c.Top) }
	for v := lo; v <= hi+stepY/2; v += stepY {
		c.YTicks = append(c.YTicks, tick{int(math.Round(y(v))), format(v, unit)})
	}
	for i, s := range all {
		var d strings.Builder
		pen, prev := false, math.Inf(-1)
		for j, v := range s.Values {
			t := s.Times[j]
			if math.IsNaN(v) || math.IsInf(v, 0) {
				pen = false
				continue
			}
			cmd := "L"
			if !pen || t-prev > 1.5*step {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f ", cmd, x(t), y(v))
			pen, prev = true, t
		}
		c.Lines = append(c.Lines, line{D: strings.TrimSpace(d.String()), Colour: names[i].Colour})
	}
	return c
}

// timeStep is the shortest of the usual clock steps that puts at most six
// time labels under a chart spanning that many seconds.
func timeStep(span float64) float64 {
	for _, m := range []float64{1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720} {
		if span/(60*m) <= 6 {
			return 60 * m
		}
	}
	return 86400
}

// niceStep rounds a tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func last(values []float64) float64 {
	for i := len(values) - 1; i >= 0; i-- {
		if !math.IsNaN(values[i]) {
			return values[i]
		}
	}
	return math.NaN()
}

// format writes a value in the panel's unit, with three significant digits.
func format(v float64, unit string) string {
	if math.IsNaN(v) {
		return "–"
	}
	switch unit {
	case "percentunit":
		return number(v*100) + "%"
	case "percent":
		return number(v) + "%"
	case "s":
		if v != 0 && math.Abs(v) < 1 {
			return number(v*1000) + " ms"
		}
		return number(v) + " s"
	case "ms":
		return number(v) + " ms"
	case "reqps":
		return number(v) + " req/s"
	case "ops":
		return number(v) + " ops/s"
	}
	return number(v)
}

func number(v float64) string {
	suffix := ""
	switch a := math.Abs(v); {
	case a >= 1e9:
		v, suffix = v/1e9, "G"
	case a >= 1e6:
		v, suffix = v/1e6, "M"
	case a >= 1e3:
		v, suffix = v/1e3, "k"
	}
	return strconv.FormatFloat(v, 'g', 3, 64) + suffix
}

var page = template.Must(template.New("dashboard").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body { font: 12px/1.35 system-ui, sans-serif; margin: 12px; color: #222; background: #f4f5f5; }
h1 { font-size: 17px; margin: 0 0 2px; } .sub { color: #555; margin-bottom: 6px; }
h2 { font-size: 14px; margin: 12px 0 4px; width: 1344px; border-bottom: 1px solid #ccc; }
.row { display: flex; flex-wrap: wrap; width: 1344px; }
.panel { box-sizing: border-box; padding: 6px 8px; border: 1px solid #d8d9da; background: #fff; margin: 0; }
.panel h3 { font-size: 13px; margin: 0 0 2px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
svg text { font: 10px system-ui, sans-serif; fill: #666; }
.legend { font-size: 11px; } .legend span { display: inline-block; margin-right: 12px; white-space: nowrap; }
.legend i { display: inline-block; width: 12px; height: 3px; vertical-align: middle; margin-right: 4px; }
.legend b { font-weight: normal; color: #777; margin-left: 4px; }
.error { color: #b00020; background: #fdecea; padding: 2px 4px; margin: 2px 0; font-family: monospace; font-size: 11px; white-space: pre-wrap; }
.stat { display: flex; flex-wrap: wrap; gap: 8px 24px; padding: 16px 4px; }
.stat div { font-size: 11px; color: #555; } .stat strong { display: block; font-size: 28px; }
</style></head><body>
<h1>{{.Title}}</h1>
<div class="sub">{{.Source}} &middot; {{.From}} to {{.To}}</div>
{{range .Rows}}{{if .Title}}<h2>{{.Title}}</h2>{{end}}
<div class="row">
{{range .Panels}}<section class="panel" id="panel-{{.ID}}" style="width: {{.Width}}px" title="{{.Description}}">
<h3>{{.Title}}</h3>
{{range .Errors}}<div class="error">{{.}}</div>
{{end}}{{if .Stat}}<div class="stat">{{range .Legend}}<div><strong style="color: {{.Colour}}">{{.Last}}</strong>{{.Name}}</div>{{else}}<div><strong>No data</strong></div>{{end}}</div>
{{else}}{{with .Chart}}{{$c := .}}<svg width="{{.W}}" height="{{.H}}" viewBox="0 0 {{.W}} {{.H}}" xmlns="http://www.w3.org/2000/svg">
{{range .YTicks}}<line x1="{{$c.Left}}" x2="{{$c.Right}}" y1="{{.Pos}}" y2="{{.Pos}}" stroke="#e4e4e4"/><text x="{{$c.Left}}" dx="-6" y="{{.Pos}}" dy="3" text-anchor="end">{{.Label}}</text>
{{end}}{{range .XTicks}}<text x="{{.Pos}}" y="{{$c.Base}}" dy="15" text-anchor="middle">{{.Label}}</text>
{{end}}<line x1="{{.Left}}" x2="{{.Right}}" y1="{{.Base}}" y2="{{.Base}}" stroke="#aaa"/>
{{range .Lines}}<path d="{{.D}}" fill="none" stroke="{{.Colour}}" stroke-width="1.5"/>
{{end}}{{if .NoData}}<text x="50%" y="50%" text-anchor="middle">No data</text>
{{end}}</svg>{{end}}
<div class="legend">{{range .Legend}}<span><i style="background: {{.Colour}}"></i>{{.Name}}<b>{{.Last}}</b></span>{{end}}</div>
{{end}}</section>
{{end}}</div>
{{end}}</body></html>
`))
