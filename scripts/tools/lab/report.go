package main

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	pkglab "github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/scripts/tests/lab"
)

// entry is one scenario run as the report shows it: its row of the table
// and what its actors did.
type entry struct {
	Row     lab.Row        `json:"row"`
	Caption string         `json:"caption,omitempty"`
	Events  []pkglab.Event `json:"events,omitempty"`
}

// recorder hands each scenario a timeline of its own and keeps them, so
// that the report can draw them beside the rows lab.Run returns.
type recorder struct {
	timelines []*pkglab.Timeline // by scenario index
}

// wrap returns scenarios whose Run records into a fresh timeline each.
func (rec *recorder) wrap(scenarios []pkglab.Scenario) []pkglab.Scenario {
	out := slices.Clone(scenarios)
	rec.timelines = make([]*pkglab.Timeline, len(out))
	for i, s := range out {
		run := s.Run
		out[i].Run = func(ctx context.Context, env pkglab.Env) (pkglab.Result, error) {
			env.Timeline = pkglab.NewTimeline()
			rec.timelines[i] = env.Timeline
			return run(ctx, env)
		}
	}
	return out
}

// entries pairs rows (in scenario order, as lab.Run returns them) with
// their timelines.
func (rec *recorder) entries(rows []lab.Row) []entry {
	out := make([]entry, len(rows))
	for i, r := range rows {
		out[i].Row = r
		if i < len(rec.timelines) {
			out[i].Caption = rec.timelines[i].Caption()
			out[i].Events = rec.timelines[i].Events()
		}
	}
	return out
}

// writeReportFile writes the HTML report of entries to path.
func writeReportFile(path string, entries []entry, generated time.Time) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeReport(f, entries, generated); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// readJSONFile reads the entries writeJSONFile wrote.
func readJSONFile(path string) ([]entry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var entries []entry
	if err := json.Unmarshal(b, &entries); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%s holds no entry", path)
	}
	return entries, nil
}

// writeJSONFile writes entries as a JSON array to path, one entry a line
// (the report's data, which a test can render again).
func writeJSONFile(path string, entries []entry) error {
	var b bytes.Buffer
	b.WriteString("[\n")
	for i, e := range entries {
		line, err := json.Marshal(e)
		if err != nil {
			return err
		}
		b.Write(line)
		if i < len(entries)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]\n")
	return os.WriteFile(path, b.Bytes(), 0o644)
}

//go:embed report.html.tmpl
var templates embed.FS

var reportTemplate = template.Must(template.New("report.html.tmpl").ParseFS(templates, "report.html.tmpl"))

// The report's view: incidents, each with groups of variants drawn side by
// side (broken/driver beside fixed/driver), each variant a card.
type (
	reportView struct {
		Generated string
		Picture   bool // one incident's picture for the docs: no header, no navigation
		Scenarios int
		Failed    int
		Incidents []incidentView
		Legend    []legendItem
	}
	incidentView struct {
		Number  int
		Title   string
		Verdict string // "ok" or "FAIL"
		Groups  [][]cardView
	}
	cardView struct {
		Row      lab.Row
		Class    string // "broken" or "fixed": what the variant must show
		Count    string
		Holds    string
		Want     string
		Caption  string
		Tally    string
		Timeline template.HTML
	}
	legendItem struct {
		Kind, Text string
	}
)

// kindText names each event kind in the legend, in drawing order.
var kindText = []legendItem{
	{pkglab.KindEffect, "wrote the counted effect"},
	{pkglab.KindDuplicate, "duplicate effect (the incident)"},
	{pkglab.KindAbsorbed, "saw it done, did nothing"},
	{pkglab.KindRefused, "turned away"},
	{pkglab.KindFault, "injected fault"},
	{pkglab.KindError, "error"},
	{pkglab.KindStep, "other step"},
}

// writeReport renders entries as one self-contained HTML page: inline CSS
// and SVG, nothing fetched.
func writeReport(w io.Writer, entries []entry, generated time.Time) error {
	return renderReport(w, entries, generated, false)
}

// renderReport renders entries as the report page, or, with picture, as
// the bare incident sections an incident's picture is taken of.
func renderReport(w io.Writer, entries []entry, generated time.Time, picture bool) error {
	v := reportView{Generated: generated.UTC().Format("2006-01-02 15:04 UTC"), Picture: picture, Scenarios: len(entries), Legend: kindText}
	for _, e := range entries {
		if e.Row.Verdict != "ok" {
			v.Failed++
		}
	}
	for _, group := range byIncident(entries) {
		inc := incidentView{Number: group[0].Row.Incident, Title: group[0].Row.Title, Verdict: "ok"}
		for _, e := range group {
			if e.Row.Verdict != "ok" {
				inc.Verdict = "FAIL"
			}
			if inc.Title == "" {
				inc.Title = e.Row.Title
			}
		}
		for _, pair := range pairVariants(group) {
			var cards []cardView
			for _, e := range pair {
				cards = append(cards, card(e))
			}
			inc.Groups = append(inc.Groups, cards)
		}
		v.Incidents = append(v.Incidents, inc)
	}
	return reportTemplate.Execute(w, v)
}

// byIncident splits entries by incident, keeping their order.
func byIncident(entries []entry) [][]entry {
	var out [][]entry
	for _, e := range entries {
		if n := len(out); n > 0 && out[n-1][0].Row.Incident == e.Row.Incident {
			out[n-1] = append(out[n-1], e)
			continue
		}
		out = append(out, []entry{e})
	}
	return out
}

// pairVariants groups one incident's variants that are the same story told
// by different code: "broken/driver" with "fixed/driver" (the part after
// the mode), and every variant without a "/" together. Groups keep the
// order of their first variant.
func pairVariants(entries []entry) [][]entry {
	var keys []string
	groups := map[string][]entry{}
	for _, e := range entries {
		_, key, _ := strings.Cut(e.Row.Variant, "/")
		if _, ok := groups[key]; !ok {
			keys = append(keys, key)
		}
		groups[key] = append(groups[key], e)
	}
	out := make([][]entry, 0, len(keys))
	for _, k := range keys {
		out = append(out, groups[k])
	}
	return out
}

func card(e entry) cardView {
	r := e.Row
	c := cardView{Row: r, Class: "fixed", Count: fmt.Sprint(r.Count), Holds: "violated", Want: wantText(r), Caption: e.Caption}
	if !r.WantHolds {
		c.Class = "broken"
	}
	if r.Holds {
		c.Holds = "holds"
	}
	if r.Error != "" {
		c.Count, c.Holds = "–", "error"
	}
	c.Tally = tally(e.Events)
	c.Timeline = swimlanes(e.Events)
	return c
}

// tally counts the events by kind: "1 wrote the counted effect, 49 saw it
// done, did nothing".
func tally(events []pkglab.Event) string {
	n := map[string]int{}
	for _, e := range events {
		n[e.Kind]++
	}
	var parts []string
	for _, k := range kindText {
		if n[k.Kind] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[k.Kind], k.Kind))
		}
	}
	return strings.Join(parts, " · ")
}

// The swimlane drawing's geometry, in SVG user units (the SVG scales to
// its card's width).
const (
	svgWidth   = 600
	labelWidth = 112
	axisHeight = 22
	maxHeight  = 420 // lanes shrink to keep many actors within this
)

// swimlanes draws events as one lane per actor (in order of each actor's
// first event), time running left to right from the first event's start
// to the last one's end.
func swimlanes(events []pkglab.Event) template.HTML {
	if len(events) == 0 {
		return `<p class="none">No timeline recorded for this scenario.</p>`
	}
	var actors []string
	lane := map[string]int{}
	t0, t1 := events[0].Start, events[0].End
	for _, e := range events {
		if _, ok := lane[e.Actor]; !ok {
			lane[e.Actor] = len(actors)
			actors = append(actors, e.Actor)
		}
		if e.Start.Before(t0) {
			t0 = e.Start
		}
		if e.End.After(t1) {
			t1 = e.End
		}
	}
	span := t1.Sub(t0)
	if span <= 0 {
		span = time.Millisecond
	}
	laneH := min(20.0, max(3.0, float64(maxHeight)/float64(len(actors))))
	labels := laneH >= 11 // room for a name on every lane
	height := axisHeight + laneH*float64(len(actors)) + 4
	plot := float64(svgWidth - labelWidth - 8)
	x := func(t time.Time) float64 {
		return labelWidth + plot*float64(t.Sub(t0))/float64(span)
	}

	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="lanes" viewBox="0 0 %d %.0f" role="img" aria-label="timeline of %d actors">`, svgWidth, height, len(actors))
	// Lanes, striped, with the actors' names.
	for i, a := range actors {
		y := axisHeight + laneH*float64(i)
		if i%2 == 0 {
			fmt.Fprintf(&b, `<rect class="stripe" x="0" y="%.1f" width="%d" height="%.1f"/>`, y, svgWidth, laneH)
		}
		if labels {
			fmt.Fprintf(&b, `<text class="actor" x="4" y="%.1f">%s</text>`, y+laneH*0.7, html.EscapeString(cut(a, 18)))
		}
	}
	if !labels {
		fmt.Fprintf(&b, `<text class="actor" x="4" y="%.1f">%s</text>`, axisHeight+9.0, html.EscapeString(cut(actors[0], 18)))
		fmt.Fprintf(&b, `<text class="actor" x="4" y="%.1f">%s</text>`, height-6, html.EscapeString(cut(actors[len(actors)-1], 18)))
		fmt.Fprintf(&b, `<text class="actor dim" x="4" y="%.1f">%d lanes</text>`, axisHeight+laneH*float64(len(actors))/2+3, len(actors))
	}
	// The time axis: ticks at round fractions of the span.
	for i := 0; i <= 4; i++ {
		tx := labelWidth + plot*float64(i)/4
		fmt.Fprintf(&b, `<line class="tick" x1="%.1f" y1="%d" x2="%.1f" y2="%.1f"/>`, tx, axisHeight-4, tx, height)
		anchor := "middle"
		if i == 4 {
			anchor = "end"
		}
		fmt.Fprintf(&b, `<text class="axis" x="%.1f" y="12" text-anchor="%s">%s</text>`, tx, anchor, durationText(span*time.Duration(i)/4))
	}
	// The events: bars, or diamonds for instants.
	slices.SortStableFunc(events, func(a, b pkglab.Event) int { return cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)) })
	for _, e := range events {
		y := axisHeight + laneH*float64(lane[e.Actor])
		title := fmt.Sprintf("%s: %s (%s, %s → %s)", e.Actor, e.Label, e.Kind,
			durationText(e.Start.Sub(t0)), durationText(e.End.Sub(t0)))
		x0, x1 := x(e.Start), x(e.End)
		if e.End.Equal(e.Start) {
			r := min(laneH*0.45, 6)
			cy := y + laneH/2
			fmt.Fprintf(&b, `<path class="ev k-%s" d="M%.1f %.1fL%.1f %.1fL%.1f %.1fL%.1f %.1fZ"><title>%s</title></path>`,
				kindClass(e.Kind), x0, cy-r, x0+r, cy, x0, cy+r, x0-r, cy, html.EscapeString(title))
			continue
		}
		pad := min(2.0, laneH*0.15)
		fmt.Fprintf(&b, `<rect class="ev k-%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="%.1f"><title>%s</title></rect>`,
			kindClass(e.Kind), x0, y+pad, max(x1-x0, 2), laneH-2*pad, min(3, laneH/4), html.EscapeString(title))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// kindClass is the CSS class suffix of kind: a kind the legend does not
// know is drawn as a step (and never written into the page as given).
func kindClass(kind string) string {
	for _, k := range kindText {
		if k.Kind == kind {
			return kind
		}
	}
	return pkglab.KindStep
}

// kindOrder draws the kinds that matter most last, on top.
func kindOrder(kind string) int {
	for i, k := range kindText {
		if k.Kind == kind {
			return len(kindText) - i
		}
	}
	return 0
}

// durationText prints d at the precision a timeline axis needs.
func durationText(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < 0:
		return "-" + durationText(-d)
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}
