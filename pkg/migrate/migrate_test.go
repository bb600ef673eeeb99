package migrate_test

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

var widgets = migrate.Source{Name: "widgets", FS: fstest.MapFS{
	"000001_create_widgets.up.sql":   {Data: []byte("CREATE TABLE widgets (id BIGINT PRIMARY KEY, name VARCHAR(32) NOT NULL) ENGINE=InnoDB;")},
	"000001_create_widgets.down.sql": {Data: []byte("DROP TABLE widgets;")},
	// Two statements in one file: the runner's connection allows them.
	"000002_add_colour.up.sql":   {Data: []byte("ALTER TABLE widgets ADD COLUMN colour VARCHAR(16) NULL;\nINSERT INTO widgets (id, name) VALUES (1, 'seed');")},
	"000002_add_colour.down.sql": {Data: []byte("ALTER TABLE widgets DROP COLUMN colour;")},
	"README.md":                  {Data: []byte("not a migration")},
}}

var gadgets = migrate.Source{Name: "gadgets", FS: fstest.MapFS{
	"000001_create_gadgets.up.sql": {Data: []byte("CREATE TABLE gadgets (id BIGINT PRIMARY KEY) ENGINE=InnoDB;")},
}}

func sqlDB(t *testing.T) *sql.DB {
	db := testenv.DB(t)
	s, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func versions(t *testing.T, db *sql.DB, source string) []int {
	t.Helper()
	rows, err := db.Query("SELECT version FROM schema_migrations WHERE source = ? ORDER BY version", source)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func count(t *testing.T, db *sql.DB, q string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func tableExists(t *testing.T, db *sql.DB, name string) bool {
	return count(t, db, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = '"+name+"'") == 1
}

func TestLoadOrdersAndPairs(t *testing.T) {
	migs, err := migrate.Load(widgets)
	if err != nil {
		t.Fatal(err)
	}
	if len(migs) != 2 || migs[0].Version != 1 || migs[1].Version != 2 || migs[0].Name != "create_widgets" || migs[1].Down == "" {
		t.Fatalf("Load = %+v", migs)
	}
}

func TestLoadRejectsBadFiles(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"unnumbered": {"create.up.sql": {Data: []byte("SELECT 1")}},
		"down only":  {"000001_x.down.sql": {Data: []byte("SELECT 1")}},
	} {
		if _, err := migrate.Load(migrate.Source{Name: "bad", FS: fsys}); err == nil {
			t.Errorf("%s: Load accepted it", name)
		}
	}
}

func TestUpIsIdempotentAndDownReverts(t *testing.T) {
	db := sqlDB(t)
	ctx := context.Background()
	if err := migrate.Up(ctx, db, widgets, gadgets); err != nil {
		t.Fatal(err)
	}
	if got := versions(t, db, "widgets"); len(got) != 2 {
		t.Fatalf("widgets versions after Up: %v", got)
	}
	if got := versions(t, db, "gadgets"); len(got) != 1 {
		t.Fatalf("gadgets versions after Up: %v", got)
	}
	// A second run applies nothing: the row the migration inserts would be inserted twice and
	// the ALTER would fail on the existing column.
	if err := migrate.Up(ctx, db, widgets, gadgets); err != nil {
		t.Fatalf("second Up: %v", err)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM widgets"); n != 1 {
		t.Fatalf("widgets rows after two Ups: %d, want 1", n)
	}

	if err := migrate.Down(ctx, db, widgets, 1); err != nil {
		t.Fatal(err)
	}
	if got := versions(t, db, "widgets"); len(got) != 1 || got[0] != 1 {
		t.Fatalf("widgets versions after Down 1: %v", got)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = 'widgets' AND column_name = 'colour'"); n != 0 {
		t.Fatal("Down did not drop the colour column")
	}
	if err := migrate.Down(ctx, db, widgets, 5); err != nil {
		t.Fatal(err)
	}
	if tableExists(t, db, "widgets") || len(versions(t, db, "widgets")) != 0 {
		t.Fatal("Down to zero left the widgets table or its versions")
	}
	if !tableExists(t, db, "gadgets") {
		t.Fatal("Down of one source touched another")
	}
	// And Up brings it back.
	if err := migrate.Up(ctx, db, widgets); err != nil {
		t.Fatal(err)
	}
	if !tableExists(t, db, "widgets") {
		t.Fatal("Up after Down did not recreate widgets")
	}
}

func TestDownWithoutDownFileFails(t *testing.T) {
	db := sqlDB(t)
	ctx := context.Background()
	if err := migrate.Up(ctx, db, gadgets); err != nil {
		t.Fatal(err)
	}
	if err := migrate.Down(ctx, db, gadgets, 1); err == nil || !strings.Contains(err.Error(), "no .down.sql") {
		t.Fatalf("Down without a down file: %v", err)
	}
}

func TestFailedMigrationStopsAndIsNotRecorded(t *testing.T) {
	db := sqlDB(t)
	bad := migrate.Source{Name: "bad", FS: fstest.MapFS{
		"000001_ok.up.sql":     {Data: []byte("CREATE TABLE ok1 (id INT PRIMARY KEY);")},
		"000002_broken.up.sql": {Data: []byte("CREATE TABLE nope (id INT PRIMARY KEY")},
		"000003_later.up.sql":  {Data: []byte("CREATE TABLE later (id INT PRIMARY KEY);")},
	}}
	err := migrate.Up(context.Background(), db, bad)
	if err == nil || !strings.Contains(err.Error(), "bad/000002_broken") {
		t.Fatalf("Up with a broken migration: %v", err)
	}
	if got := versions(t, db, "bad"); len(got) != 1 || got[0] != 1 {
		t.Fatalf("recorded versions: %v, want [1]", got)
	}
	if tableExists(t, db, "later") {
		t.Fatal("a migration after the broken one was applied")
	}
}

// TestConcurrentRunnersApplyOnce starts five runners at once, as five
// replicas starting together would. Every migration must be applied exactly
// once: the migration's INSERT would otherwise leave several rows (or a runner
// would fail on the duplicate column).
func TestConcurrentRunnersApplyOnce(t *testing.T) {
	cfg, name := testenv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for range 5 {
		// Each runner has its own pool, as separate processes would.
		db, err := sql.Open("mysql", cfg.DSN(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		wg.Go(func() { errs <- migrate.Up(ctx, db, widgets, gadgets) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("runner: %v", err)
		}
	}
	db, err := sql.Open("mysql", cfg.DSN(name))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := count(t, db, "SELECT COUNT(*) FROM widgets"); n != 1 {
		t.Fatalf("seed rows: %d, want 1 (a migration ran more than once)", n)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM schema_migrations"); n != 3 {
		t.Fatalf("schema_migrations rows: %d, want 3", n)
	}
}

// TestLongDatabaseName covers a 64-character database name, the MySQL limit,
// whose lock name would be too long without truncation. MySQL 8 rejects lock
// names over 64 characters; MariaDB accepts them, so against MariaDB this
// passes either way and TestLockNameFitsMySQL carries the proof.
func TestLongDatabaseName(t *testing.T) {
	cfg, _ := testenv.NewDatabase(t)
	name := "t_long_" + testenv.RandomSuffix(8) + strings.Repeat("x", 64-15)
	ctx := context.Background()
	testenv.Must(t, database.EnsureDatabase(ctx, cfg, name))
	t.Cleanup(func() { _ = database.DropDatabase(ctx, cfg, name) })
	db, err := sql.Open("mysql", cfg.DSN(name))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := migrate.Up(ctx, db, gadgets); err != nil {
		t.Fatalf("Up on a %d-character database name: %v", len(name), err)
	}
}

func TestNoDatabaseSelected(t *testing.T) {
	cfg, _ := testenv.NewDatabase(t)
	db, err := sql.Open("mysql", cfg.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := migrate.Up(context.Background(), db, gadgets); err == nil || !strings.Contains(err.Error(), "no database selected") {
		t.Fatalf("Up without a database: %v", err)
	}
}
