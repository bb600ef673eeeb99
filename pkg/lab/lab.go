// Package lab is the contract between the incident scenarios and their two
// front ends: the tests (which assert on a scenario's Result) and the
// `make lab` runner (which prints it). Each incident keeps its scenarios in an
// importable package of its service (services/<svc>/lab) and lists them with
// a Scenarios() []lab.Scenario function; one source, two front ends.
package lab

import (
	"context"
	"fmt"
	"log/slog"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/redisclient"
)

// Variant names used across the incidents.
const (
	Broken  = "broken"
	Fixed   = "fixed"
	Orderly = "orderly" // incident 3's correct-but-slow single worker
)

// Env is what a scenario runs against. Every database, stream and key a
// scenario creates is named from Prefix, so runs never touch real data or
// each other.
type Env struct {
	MySQL  database.Config
	NATS   natsjs.Config
	Redis  redisclient.Config
	Log    *slog.Logger
	Prefix string // unique per run, lowercase letters, digits, underscores
	// Progress, when set, receives short notes on long steps.
	Progress func(format string, args ...any)
	// Timeline, when set, receives what each actor of the run did, for the
	// lab report's swimlanes. Nil records nothing (see Timeline).
	Timeline *Timeline
}

// Note reports progress when the front end asked for it.
func (e Env) Note(format string, args ...any) {
	if e.Progress != nil {
		e.Progress(format, args...)
	}
}

// Name returns Prefix + "_" + suffix: a database, stream or key name of this run.
func (e Env) Name(suffix string) string { return e.Prefix + "_" + suffix }

// OpenDB creates the database Name(suffix), applies sources, and returns it
// with a cleanup that closes and drops it.
func (e Env) OpenDB(ctx context.Context, suffix string, sources ...migrate.Source) (*gorm.DB, func(), error) {
	name := e.Name(suffix)
	db, err := database.Open(ctx, e.MySQL, name, e.Log)
	if err != nil {
		return nil, nil, err
	}
	drop := func() {
		_ = database.Close(db)
		_ = database.DropDatabase(context.Background(), e.MySQL, name)
	}
	sqlDB, err := db.DB()
	if err == nil {
		err = migrate.Up(ctx, sqlDB, sources...)
	}
	if err != nil {
		drop()
		return nil, nil, fmt.Errorf("lab database %s: %w", name, err)
	}
	return db, drop, nil
}

// Result is what one scenario run observed.
type Result struct {
	Incident int
	Title    string // e.g. "lost commit ACK"
	Variant  string // Broken, Fixed, Orderly or a named sub-variant
	Injected string // what was done to it: "1 lost COMMIT ACK", "50 concurrent callbacks"
	Effect   string // what was counted, e.g. "ledger rows for order X"
	Count    int    // the counted effects, read from the database
	Expected string // the invariant, e.g. "= 1"
	// Holds reports whether the invariant held on this run.
	Holds bool
}

// Scenario is one variant of one incident.
type Scenario struct {
	Incident int
	Variant  string
	// WantHolds is false for a broken variant: it must reproduce the incident.
	WantHolds bool
	// WantCount, when not zero, is the exact count the run must show. It is
	// for a deterministic reproduction, where the incident is not just "more
	// than one" but a known number (one lost acknowledgement, one retry: 2);
	// racy variants leave it zero.
	WantCount int
	Run       func(ctx context.Context, env Env) (Result, error)
}

// Verdict tells whether r is what the scenario should show: a fixed variant
// holds its invariant, a broken one violates it, and with WantCount set the
// count is exactly that.
func (s Scenario) Verdict(r Result) bool {
	return r.Holds == s.WantHolds && (s.WantCount == 0 || r.Count == s.WantCount)
}
