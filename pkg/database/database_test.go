package database_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

func TestOpenCreatesTheDatabaseAndAppliesThePool(t *testing.T) {
	cfg, name := testenv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Drop it so Open has to create it.
	if err := database.DropDatabase(ctx, cfg, name); err != nil {
		t.Fatal(err)
	}
	if databaseExists(t, cfg, name) {
		t.Fatalf("database %s still exists after DropDatabase", name)
	}
	cfg.MaxOpenConns = 3
	db, err := database.Open(ctx, cfg, name, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer database.Close(db)
	var current string
	if err := db.Raw("SELECT DATABASE()").Scan(&current).Error; err != nil || current != name {
		t.Fatalf("connected to %q (%v), want %q", current, err, name)
	}
	sqlDB, _ := db.DB()
	if got := sqlDB.Stats().MaxOpenConnections; got != 3 {
		t.Fatalf("MaxOpenConnections %d, want 3", got)
	}
	// Open again on an existing database is fine.
	db2, err := database.Open(ctx, cfg, name, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	database.Close(db2)
}

func TestIsDuplicateKey(t *testing.T) {
	db := testenv.DB(t)
	if err := db.Exec("CREATE TABLE u (k VARCHAR(16) PRIMARY KEY)").Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("INSERT INTO u (k) VALUES ('a')").Error; err != nil {
		t.Fatal(err)
	}
	err := db.Exec("INSERT INTO u (k) VALUES ('a')").Error
	if !database.IsDuplicateKey(err) {
		t.Fatalf("second insert: %v is not reported as a duplicate key", err)
	}
	if database.IsDuplicateKey(db.Exec("INSERT INTO missing_table VALUES (1)").Error) {
		t.Fatal("a missing table is reported as a duplicate key")
	}
	if database.IsDuplicateKey(errors.New("Duplicate entry")) || database.IsDuplicateKey(nil) {
		t.Fatal("a plain error or nil is reported as a duplicate key")
	}
}

func TestOpenUnreachableNamesTheAddress(t *testing.T) {
	cfg := testenv.Config(t).MySQL
	cfg.Addr = "127.0.0.1:1"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := database.Open(ctx, cfg, "x", testenv.Logger(t))
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("Open on a dead address: %v", err)
	}
}

// TestEnsureDatabaseRefusesABadName: EnsureDatabase is where the name
// reaches SQL, so it checks the name itself, whoever calls it. A name with
// a backtick is refused with an error naming it, and nothing is created.
func TestEnsureDatabaseRefusesABadName(t *testing.T) {
	cfg := testenv.Config(t).MySQL
	name := "t_bad`" + testenv.RandomSuffix(8)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := database.EnsureDatabase(ctx, cfg, name); err == nil || !strings.Contains(err.Error(), name) {
		t.Fatalf("EnsureDatabase(%q): %v, want an error naming the database", name, err)
	}
	if databaseExists(t, cfg, name) {
		t.Fatalf("database %q was created", name)
	}
	if err := database.DropDatabase(ctx, cfg, name); err == nil || !strings.Contains(err.Error(), name) {
		t.Fatalf("DropDatabase(%q): %v, want an error naming the database", name, err)
	}
}

// databaseExists asks the server whether it has a database called name.
func databaseExists(t *testing.T, cfg database.Config, name string) bool {
	t.Helper()
	admin, err := sql.Open("mysql", cfg.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var n int
	if err := admin.QueryRow("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"oncemall_order", true},
		{"T_1", true},
		{strings.Repeat("a", 64), true},
		{"", false},
		{strings.Repeat("a", 65), false},
		{"bad`name", false},
		{"with space", false},
		{"dash-ed", false},
		{"dotted.name", false},
		{"naïve", false},
	} {
		err := database.CheckName("MYSQL_DATABASE", tc.name)
		if tc.ok && err != nil {
			t.Errorf("%q: %v, want it accepted", tc.name, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "MYSQL_DATABASE")) {
			t.Errorf("%q: error %v, want one naming MYSQL_DATABASE", tc.name, err)
		}
	}
}

// TestIsPermanent feeds IsPermanent the errors a real server returns, so the
// codes it knows are the codes MariaDB/MySQL send. Statements run on the raw
// *sql.DB: gorm, opened with TranslateError, turns a duplicate key into
// gorm.ErrDuplicatedKey, and a case that carries no *mysql.MySQLError could
// not fail if its code were wrongly called permanent.
func TestIsPermanent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ensureAs := func(mutate func(*database.Config)) error {
		cfg := testenv.Config(t).MySQL
		mutate(&cfg)
		return database.EnsureDatabase(ctx, cfg, "t_never_created")
	}
	raw, err := testenv.DB(t).DB()
	testenv.Must(t, err)
	exec := func(q string) error {
		_, err := raw.ExecContext(ctx, q)
		return err
	}
	testenv.Must(t, exec("CREATE TABLE u (k INT PRIMARY KEY)"))
	testenv.Must(t, exec("INSERT INTO u VALUES (1)"))
	for _, tc := range []struct {
		what       string
		err        error
		fromServer bool // the error must be the server's *mysql.MySQLError
		permanent  bool
	}{
		{"unknown user", ensureAs(func(c *database.Config) { c.User = "t_no_such_user_" + testenv.RandomSuffix(6) }), true, true},
		{"wrong password", ensureAs(func(c *database.Config) { c.Password = "t-wrong-" + testenv.RandomSuffix(6) }), true, true},
		{"SQL syntax", exec("SELEC 1"), true, true},
		{"bad database name", database.EnsureDatabase(ctx, testenv.Config(t).MySQL, "t_bad`name"), false, true},
		{"server unreachable", ensureAs(func(c *database.Config) { c.Addr = testenv.FreeAddr(t) }), false, false},
		{"duplicate key", exec("INSERT INTO u VALUES (1)"), true, false},
		{"missing table", exec("SELECT * FROM no_such_table"), true, false},
		{"nil", nil, false, false},
	} {
		if tc.err == nil && tc.what != "nil" {
			t.Errorf("%s: no error at all", tc.what)
			continue
		}
		var me *mysql.MySQLError
		if tc.fromServer && !errors.As(tc.err, &me) {
			t.Errorf("%s: %v (%T) is not a *mysql.MySQLError, so this case tests no code", tc.what, tc.err, tc.err)
		}
		if got := database.IsPermanent(tc.err); got != tc.permanent {
			t.Errorf("%s: IsPermanent(%v) = %v, want %v", tc.what, tc.err, got, tc.permanent)
		}
	}
}
