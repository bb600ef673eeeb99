package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/lab"
)

func scenario(variant string, wantHolds, holds bool, err error) lab.Scenario {
	return lab.Scenario{
		Incident: 9, Variant: variant, WantHolds: wantHolds,
		Run: func(context.Context, lab.Env) (lab.Result, error) {
			return lab.Result{Title: "test", Count: 2, Expected: "= 1", Holds: holds}, err
		},
	}
}

// withCount requires s's run to count exactly n (the fake counts 2).
func withCount(s lab.Scenario, n int) lab.Scenario {
	s.WantCount = n
	return s
}

func TestRunVerdicts(t *testing.T) {
	tests := []struct {
		name     string
		s        lab.Scenario
		wantFail bool
	}{
		{"fixed holds", scenario(lab.Fixed, true, true, nil), false},
		{"fixed violated", scenario(lab.Fixed, true, false, nil), true},
		{"broken reproduces", scenario(lab.Broken, false, false, nil), false},
		{"broken fails to reproduce", scenario(lab.Broken, false, true, nil), true},
		{"error", scenario(lab.Fixed, true, true, errors.New("boom")), true},
		{"broken reproduces with the exact count", withCount(scenario(lab.Broken, false, false, nil), 2), false},
		{"broken reproduces with another count", withCount(scenario(lab.Broken, false, false, nil), 3), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := Run(context.Background(), lab.Env{}, []lab.Scenario{tt.s})
			if len(rows) != 1 {
				t.Fatalf("rows = %d, want 1", len(rows))
			}
			if got := Failed(rows); got != tt.wantFail {
				t.Fatalf("Failed = %v, want %v (row %+v)", got, tt.wantFail, rows[0])
			}
		})
	}
}

func TestWriteTableAndJSON(t *testing.T) {
	rows := Run(context.Background(), lab.Env{}, []lab.Scenario{
		scenario(lab.Broken, false, false, nil),
		scenario(lab.Fixed, true, true, nil),
		withCount(scenario(lab.Broken, false, false, nil), 2),
	})
	var tbl bytes.Buffer
	if err := WriteTable(&tbl, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tbl.String(), "violated (must break)") || !strings.Contains(tbl.String(), "holds (must hold)") ||
		!strings.Contains(tbl.String(), "violated (must break, count 2)") {
		t.Fatalf("table misses verdict words:\n%s", tbl.String())
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, rows); err != nil {
		t.Fatal(err)
	}
	var back []Row
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back) != 3 || back[1].Verdict != "ok" || back[2].WantCount != 2 {
		t.Fatalf("json round trip: %v %+v", err, back)
	}
}
