package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	pkglab "github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/scripts/tests/lab"
)

// fixture is the report data of a real `make lab` run (every incident, its
// rows and timelines), written with --report-json: what the renderer is
// tested on.
func fixture(t *testing.T) []entry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var entries []entry
	if err := json.Unmarshal(b, &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatal("testdata/report.json holds no entry")
	}
	return entries
}

// longRow is a row with everything too long for a line: a failed variant
// with an error.
var longRow = lab.Row{
	Incident: 9, Title: strings.Repeat("a very long incident title ", 8), Variant: strings.Repeat("broken/", 10) + "x",
	Injected: strings.Repeat("injected×fault ", 20), Effect: strings.Repeat("counted-effect-without-spaces", 9),
	Expected: "= 1", Count: 123456, WantCount: 2, Verdict: "FAIL", Error: strings.Repeat("driver: bad connection\n", 10),
}

// TestTableFitsInWidth: the default table of the real scenario set's
// results keeps every line within 120 columns, even with a row that is too
// long everywhere, and still shows every variant with its verdict.
func TestTableFitsInWidth(t *testing.T) {
	var rows []lab.Row
	for _, e := range fixture(t) {
		rows = append(rows, e.Row)
	}
	rows = append(rows, longRow)
	var out bytes.Buffer
	if err := writeNarrowTable(&out, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	for i, l := range lines {
		if n := utf8.RuneCountInString(l); n > tableWidth {
			t.Errorf("line %d is %d columns wide:\n%s", i+1, n, l)
		}
	}
	for _, r := range rows[:len(rows)-1] {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), r.Variant+" ") && strings.HasSuffix(l, " "+r.Verdict) {
				found = true
			}
		}
		if !found {
			t.Errorf("no line for incident %d %s with verdict %s", r.Incident, r.Variant, r.Verdict)
		}
		if !strings.Contains(out.String(), fmt.Sprintf("incident %d: %s", r.Incident, r.Title)) {
			t.Errorf("no heading for incident %d", r.Incident)
		}
	}
	if !strings.Contains(out.String(), "      error:    driver: bad connection driver:") {
		t.Errorf("the error is not shown:\n%s", out.String())
	}
	// The wide table is the one-line-per-row layout, wider than 120 here.
	var wide bytes.Buffer
	if err := runScenarios(context.Background(), []pkglab.Scenario{fake(1, pkglab.Broken, false, false)}, []string{"--wide", "--quiet"}, &wide, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(wide.String(), "INCIDENT  VARIANT") {
		t.Errorf("--wide does not print the wide table:\n%s", wide.String())
	}
}

// TestReportShowsTimelines runs scenarios that record events through the
// command, with --html, and checks the page: each incident and variant,
// broken beside fixed, the lanes of the actors, no external resource.
func TestReportShowsTimelines(t *testing.T) {
	recording := func(incident int, variant string, wantHolds bool, effects int) pkglab.Scenario {
		return pkglab.Scenario{Incident: incident, Variant: variant, WantHolds: wantHolds,
			Run: func(_ context.Context, env pkglab.Env) (pkglab.Result, error) {
				start := time.Now()
				for i := range 3 {
					kind := pkglab.KindAbsorbed
					if i < effects {
						kind = pkglab.KindEffect
					}
					env.Timeline.Add(pkglab.Event{Actor: fmt.Sprintf("copy %d of %s", i+1, variant), Kind: kind, Label: "did " + kind,
						Start: start.Add(time.Duration(i) * time.Millisecond), End: start.Add(time.Duration(i+2) * time.Millisecond)})
				}
				if incident == 2 { // a kind the report does not know, with markup: drawn as a step, escaped
					env.Timeline.Point(`<b>actor</b>`, `x"><script>alert(1)</script>`, "<i>label</i>")
				}
				env.Timeline.MarkDuplicates(1)
				env.Timeline.SetCaption("caption of " + variant)
				return pkglab.Result{Incident: incident, Title: fmt.Sprintf("title %d", incident), Variant: variant,
					Count: effects, Expected: "= 1", Holds: effects == 1}, nil
			}}
	}
	list := []pkglab.Scenario{
		recording(1, "broken/driver", false, 2), recording(1, "broken/proxy", false, 3),
		recording(1, "fixed/driver", true, 1), recording(1, "fixed/proxy", true, 1),
		recording(2, pkglab.Broken, false, 3), recording(2, pkglab.Fixed, true, 1),
	}
	dir := t.TempDir()
	page, data := filepath.Join(dir, "report.html"), filepath.Join(dir, "report.json")
	if err := runScenarios(context.Background(), list, []string{"--quiet", "--html", page, "--report-json", data}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	for _, want := range []string{
		"Incident 1: title 1", "Incident 2: title 2", "all 6 ok", "caption of broken/proxy",
		"copy 3 of broken/proxy: did effect (duplicate", // a marked duplicate, in its bar's tooltip
		"copy 2 of fixed/driver: did absorbed (absorbed",
		"1 effect · 1 duplicate · 1 absorbed", // the tally of broken/driver
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	// broken/driver and fixed/driver share a group, before the proxies'.
	groups := strings.Split(html, `<div class="group">`)
	if len(groups) != 4 {
		t.Fatalf("%d groups, want 3 (driver, proxy, incident 2)", len(groups)-1)
	}
	for i, want := range [][]string{{"broken/driver", "fixed/driver"}, {"broken/proxy", "fixed/proxy"}, {">broken <", ">fixed <"}} {
		for _, v := range want {
			if !strings.Contains(groups[i+1], v) {
				t.Errorf("group %d lacks %s", i+1, v)
			}
		}
	}
	for _, external := range []string{"http://", "https://", "<script", "<link", "@import", "url(", "<b>", "<i>"} {
		if strings.Contains(html, external) {
			t.Errorf("the report refers to something outside it: %q", external)
		}
	}
	var entries []entry
	if b, err = os.ReadFile(data); err == nil {
		err = json.Unmarshal(b, &entries)
	}
	if err != nil || len(entries) != 6 || len(entries[0].Events) != 3 {
		t.Errorf("--report-json: %v, %d entries", err, len(entries))
	}
}

// TestReportInChromium renders the report of the real scenario set's
// results in headless Chromium: the page it builds holds every incident's
// title and verdict and every variant, and its screenshot is a picture, not
// a blank page.
func TestReportInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is needed to render the lab report: apt-get install -y chromium (%v)", err)
	}
	entries := fixture(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "lab-report.html")
	if err := writeReportFile(page, entries, time.Now()); err != nil {
		t.Fatal(err)
	}
	headless := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
			"--user-data-dir=" + filepath.Join(dir, "profile"), "--window-size=1400,2000"}
		cmd := exec.CommandContext(ctx, chromium, append(append(base, args...), "file://"+page)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
		}
		return out
	}

	dom := string(headless("--dump-dom"))
	incidents := map[int]string{}
	for _, e := range entries {
		if e.Row.Verdict != "ok" {
			incidents[e.Row.Incident] = "FAIL"
		} else if _, ok := incidents[e.Row.Incident]; !ok {
			incidents[e.Row.Incident] = "ok"
		}
		if !strings.Contains(dom, ">"+e.Row.Variant+" <") {
			t.Errorf("the rendered page lacks variant %s of incident %d", e.Row.Variant, e.Row.Incident)
		}
	}
	for _, e := range entries {
		section := fmt.Sprintf(`id="incident-%d"`, e.Row.Incident)
		heading := fmt.Sprintf(`Incident %d: %s <span class="verdict %s">verdict: %s</span>`,
			e.Row.Incident, e.Row.Title, incidents[e.Row.Incident], incidents[e.Row.Incident])
		if !strings.Contains(dom, section) || !strings.Contains(dom, heading) {
			t.Errorf("the rendered page lacks incident %d with its title and verdict (%s)", e.Row.Incident, heading)
		}
	}
	if n := strings.Count(dom, `<svg class="lanes"`); n == 0 {
		t.Error("the rendered page has no timeline")
	}

	shot := filepath.Join(dir, "shot.png")
	headless("--screenshot=" + shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	colours := map[[3]uint32]bool{}
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 3 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 3 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[[3]uint32{r >> 8, g >> 8, b >> 8}] = true
		}
	}
	if bounds.Dx() < 1000 || len(colours) < 50 {
		t.Errorf("the screenshot is %v with %d colours: not the report", bounds, len(colours))
	}
}
