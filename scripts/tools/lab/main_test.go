package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	pkglab "github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/scripts/tests/lab"
)

// wantIncidents are the incidents `make lab` must cover.
var wantIncidents = []int{1, 2, 3, 4, 5, 6}

// TestAllCoversEveryIncident checks the real list: in incident order, every
// incident present with at least one broken variant (must reproduce) and one
// fixed variant (must hold), no variant listed twice.
func TestAllCoversEveryIncident(t *testing.T) {
	list := all()
	seen := map[int][2]int{} // incident → [broken, fixed]
	names := map[string]bool{}
	for i, s := range list {
		if i > 0 && s.Incident < list[i-1].Incident {
			t.Errorf("scenario %d (incident %d) after incident %d: not in incident order", i, s.Incident, list[i-1].Incident)
		}
		name := fmt.Sprintf("%d/%s", s.Incident, s.Variant)
		if names[name] {
			t.Errorf("variant %s listed twice", name)
		}
		names[name] = true
		c := seen[s.Incident]
		if s.WantHolds {
			c[1]++
		} else {
			c[0]++
		}
		seen[s.Incident] = c
		if s.Run == nil {
			t.Errorf("%s has no Run", name)
		}
	}
	for _, n := range wantIncidents {
		if c := seen[n]; c[0] == 0 || c[1] == 0 {
			t.Errorf("incident %d: %d broken and %d fixed variants, want at least one of each", n, c[0], c[1])
		}
	}
}

// TestSelectScenarios runs the --incident filter over the real list.
func TestSelectScenarios(t *testing.T) {
	list := all()
	everything, err := selectScenarios(list, 0)
	if err != nil || len(everything) != len(list) {
		t.Fatalf("incident 0: %d of %d scenarios, err %v", len(everything), len(list), err)
	}
	for _, n := range wantIncidents {
		got, err := selectScenarios(list, n)
		if err != nil {
			t.Fatalf("incident %d: %v", n, err)
		}
		for _, s := range got {
			if s.Incident != n {
				t.Errorf("--incident %d selected a scenario of incident %d", n, s.Incident)
			}
		}
	}
	if _, err := selectScenarios(list, 99); err == nil {
		t.Error("--incident 99 selected something")
	}
	if err := run(context.Background(), []string{"--incident", "99", "--quiet"}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Error("lab --incident 99 succeeded")
	}
}

func fake(incident int, variant string, wantHolds, holds bool) pkglab.Scenario {
	return pkglab.Scenario{Incident: incident, Variant: variant, WantHolds: wantHolds,
		Run: func(context.Context, pkglab.Env) (pkglab.Result, error) {
			return pkglab.Result{Incident: incident, Title: "fake", Variant: variant, Count: 1, Expected: "= 1", Holds: holds}, nil
		}}
}

// TestExitStatus: the command fails (main exits 1) exactly when a verdict
// fails, whichever incident it is in, and --json prints the rows.
func TestExitStatus(t *testing.T) {
	good := []pkglab.Scenario{fake(1, pkglab.Broken, false, false), fake(1, pkglab.Fixed, true, true)}
	fixedBreaks := append(good[:2:2], fake(2, pkglab.Fixed, true, false))
	brokenHolds := append(good[:2:2], fake(2, pkglab.Broken, false, true))

	var out, progress bytes.Buffer
	if err := runScenarios(context.Background(), good, []string{"--json"}, &out, &progress); err != nil {
		t.Fatalf("all verdicts ok: %v", err)
	}
	var rows []lab.Row
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("--json: %v, %d rows:\n%s", err, len(rows), out.String())
	}
	if !strings.Contains(progress.String(), "[2/2] incident 1, fixed: ok") {
		t.Errorf("no progress line for the last scenario:\n%s", progress.String())
	}
	for name, list := range map[string][]pkglab.Scenario{"fixed variant breaks": fixedBreaks, "broken variant holds": brokenHolds} {
		out.Reset()
		err := runScenarios(context.Background(), list, nil, &out, &bytes.Buffer{})
		if !errors.Is(err, errFailed) {
			t.Errorf("%s: err = %v, want errFailed", name, err)
		}
		if !strings.Contains(out.String(), "FAIL") {
			t.Errorf("%s: table without FAIL:\n%s", name, out.String())
		}
	}
	// --incident 1 leaves the failing incident 2 out: success.
	if err := runScenarios(context.Background(), fixedBreaks, []string{"--incident", "1", "--quiet"}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Errorf("--incident 1 over a failing incident 2: %v", err)
	}
}
