// Command lab runs every incident's broken and fixed variants against the
// real MySQL/MariaDB, Redis and NATS and prints what happened: `make lab`.
//
// Every run works in fresh databases, streams and keys named lab_<random>_…,
// dropped afterwards, so it never touches the services' data.
//
// Usage:
//
//	lab [--incident N] [--json] [--wide] [--html FILE] [--report-json FILE] [--pictures DIR] [--quiet]
//	lab --from FILE [--incident N] [--html FILE] [--pictures DIR]
//
// The table keeps within 120 columns (--wide: one line per scenario). With
// --html it also writes the lab report, one self-contained page with each
// incident's broken and fixed variants side by side and a swimlane timeline
// of what each actor did (docs/lab-report.md). With --pictures it draws each
// incident's broken and fixed timelines as DIR/incident-N.png, the pictures
// of the incident pages, with headless Chromium. --from renders a run saved
// with --report-json again instead of running the scenarios.
//
// It exits 1 when a fixed variant shows a duplicate effect or a broken
// variant fails to reproduce its incident.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/database"
	pkglab "github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/redisclient"
	"github.com/oncemall/oncemall/scripts/tests/lab"
)

// errFailed is returned when a verdict failed; the table already says which.
var errFailed = errors.New("lab: at least one scenario did not behave as expected")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Incident 1 drops COMMIT replies on purpose; the driver would print an
	// "unexpected EOF" line for each into the table. Errors that matter
	// reach the scenarios as returned errors and are shown in their rows.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// deps is where the lab finds the infrastructure: the same variables the
// services read.
type deps struct {
	MySQL database.Config
	NATS  natsjs.Config
	Redis redisclient.Config
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runScenarios(ctx, all(), args, stdout, stderr)
}

// runScenarios is run over a given list, so that a test can feed it
// scenarios whose verdicts it knows.
func runScenarios(ctx context.Context, list []pkglab.Scenario, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lab", flag.ContinueOnError)
	incident := fs.Int("incident", 0, "run only this incident (1-6); 0 runs all")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	wide := fs.Bool("wide", false, "print the table one line per scenario, however wide")
	htmlPath := fs.String("html", "", "also write the HTML lab report to this file")
	dataPath := fs.String("report-json", "", "also write the report's data (rows and timelines) as JSON to this file")
	pictures := fs.String("pictures", "", "also draw each incident's broken and fixed timelines as incident-N.png in this directory (needs chromium)")
	from := fs.String("from", "", "render the run saved in this --report-json file instead of running the scenarios")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *from != "" {
		return render(ctx, *from, *incident, *htmlPath, *pictures, stderr)
	}
	var d deps
	if err := config.Load(&d); err != nil {
		return err
	}
	scenarios, err := selectScenarios(list, *incident)
	if err != nil {
		return err
	}
	env := pkglab.Env{
		MySQL:  d.MySQL,
		NATS:   d.NATS,
		Redis:  d.Redis,
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Prefix: "lab_" + randomHex(4),
	}
	if !*quiet {
		env.Progress = func(format string, a ...any) {
			fmt.Fprintf(stderr, "lab: "+format+"\n", a...)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var rec recorder
	rows := lab.Run(ctx, env, rec.wrap(scenarios))
	switch {
	case *asJSON:
		err = lab.WriteJSON(stdout, rows)
	case *wide:
		err = lab.WriteTable(stdout, rows)
	default:
		err = writeNarrowTable(stdout, rows)
	}
	if err != nil {
		return err
	}
	if *htmlPath != "" {
		if err := writeReportFile(*htmlPath, rec.entries(rows), time.Now()); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "lab: report written to %s\n", *htmlPath)
	}
	if *dataPath != "" {
		if err := writeJSONFile(*dataPath, rec.entries(rows)); err != nil {
			return err
		}
	}
	if *pictures != "" {
		if err := drawPictures(ctx, *pictures, rec.entries(rows), time.Now(), stderr); err != nil {
			return err
		}
	}
	if lab.Failed(rows) || len(rows) < len(scenarios) {
		return errFailed
	}
	return nil
}

// render writes the report and the pictures of a run saved with
// --report-json, keeping incident's entries only (0: all of them).
func render(ctx context.Context, from string, incident int, htmlPath, pictures string, stderr io.Writer) error {
	entries, err := readJSONFile(from)
	if err != nil {
		return err
	}
	if incident != 0 {
		entries = slices.DeleteFunc(entries, func(e entry) bool { return e.Row.Incident != incident })
		if len(entries) == 0 {
			return fmt.Errorf("lab: %s has no scenario of incident %d", from, incident)
		}
	}
	generated := ranAt(entries)
	if htmlPath != "" {
		if err := writeReportFile(htmlPath, entries, generated); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "lab: report written to %s\n", htmlPath)
	}
	if pictures != "" {
		return drawPictures(ctx, pictures, entries, generated, stderr)
	}
	return nil
}

// ranAt is when a saved run ended: its last event (now if it recorded none).
func ranAt(entries []entry) time.Time {
	var last time.Time
	for _, e := range entries {
		for _, ev := range e.Events {
			if ev.End.After(last) {
				last = ev.End
			}
		}
	}
	if last.IsZero() {
		return time.Now()
	}
	return last
}

// drawPictures writes the incidents' pictures and says where.
func drawPictures(ctx context.Context, dir string, entries []entry, generated time.Time, stderr io.Writer) error {
	written, err := writePictures(ctx, dir, entries, generated)
	for _, p := range written {
		fmt.Fprintf(stderr, "lab: picture written to %s\n", p)
	}
	return err
}

// randomHex returns 2n random hex characters for run-unique names.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
