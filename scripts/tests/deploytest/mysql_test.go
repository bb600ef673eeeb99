package deploytest

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

const usersScript = "deploy/mysql-init/10-service-users.sh"

// usersSQL runs the init script with sh (dash on Debian: the script must
// be POSIX, whatever shell an image sources it with) for services, each
// with its password, and returns the SQL it prints.
func usersSQL(t *testing.T, passwords map[string]string) string {
	t.Helper()
	var names []string
	env := os.Environ()
	for svc, pw := range passwords {
		names = append(names, svc)
		env = append(env, "MYSQL_"+strings.ToUpper(svc)+"_PASSWORD="+pw)
	}
	cmd := exec.Command("sh", filepath.Join(composecheck.RepoRoot(t), usersScript))
	cmd.Env = append(env, "ONCEMALL_DB_SERVICES="+strings.Join(names, " "))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", usersScript, err)
	}
	return string(out)
}

// asAdmin runs statements (one or several) as the tests' MySQL user.
func asAdmin(t *testing.T, statements string) {
	t.Helper()
	cfg := testenv.Config(t).MySQL
	mc := mysql.NewConfig()
	mc.User, mc.Passwd, mc.Net, mc.Addr, mc.MultiStatements = cfg.User, cfg.Password, "tcp", cfg.Addr, true
	db, err := sql.Open("mysql", mc.FormatDSN())
	testenv.Must(t, err)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, statements); err != nil {
		t.Fatalf("as the tests' MySQL user: %v\n%s", err, statements)
	}
}

// TestMySQLInitGivesEachServiceItsOwnDatabaseOnly runs deploy/mysql-init
// on the tests' server for two services of throwaway names, twice (a
// second run, as make run does on every start, must succeed), and checks
// that each user migrates and uses its own database, as a service does at
// start-up, and is refused the other's, a look-alike of its own (the _ of
// GRANT), new databases and a wrong password. The users and databases are
// dropped when the test ends; no other user is touched.
func TestMySQLInitGivesEachServiceItsOwnDatabaseOnly(t *testing.T) {
	a, b := "dt"+testenv.RandomSuffix(6), "dt"+testenv.RandomSuffix(6)
	// A password a naive script would break on.
	passwords := map[string]string{a: `it's\a "test"`, b: "pw-" + testenv.RandomSuffix(12)}
	lookalike := "oncemallx" + a // matches oncemall_<a> where _ is a wildcard
	t.Cleanup(func() {
		var drop strings.Builder
		for _, svc := range []string{a, b} {
			drop.WriteString("DROP USER IF EXISTS 'oncemall_" + svc + "'@'%';\n")
			drop.WriteString("DROP DATABASE IF EXISTS `oncemall_" + svc + "`;\n")
		}
		drop.WriteString("DROP DATABASE IF EXISTS `" + lookalike + "`;\n")
		asAdmin(t, drop.String())
	})
	script := usersSQL(t, passwords)
	asAdmin(t, script)
	asAdmin(t, script)
	asAdmin(t, "CREATE DATABASE `"+lookalike+"`")

	admin := testenv.Config(t).MySQL
	as := func(svc, password string) database.Config {
		cfg := admin
		cfg.User, cfg.Password = "oncemall_"+svc, password
		return cfg
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for svc, other := range map[string]string{a: b, b: a} {
		cfg := as(svc, passwords[svc])
		own := "oncemall_" + svc
		// What platform.Start does: open (CREATE DATABASE IF NOT EXISTS of
		// its own), then migrate.
		db, err := database.Open(ctx, cfg, own, testenv.Logger(t))
		if err != nil {
			t.Fatalf("%s opens its own database: %v", cfg.User, err)
		}
		sqlDB, err := db.DB()
		testenv.Must(t, err)
		if err := migrate.Up(ctx, sqlDB, outbox.Migrations, inbox.Migrations); err != nil {
			t.Fatalf("%s migrates its own database: %v", cfg.User, err)
		}
		testenv.Must(t, outbox.Add(db, outbox.Message{Subject: "deploytest.x", Body: []byte("{}")}))
		_ = database.Close(db)

		for _, foreign := range []string{"oncemall_" + other, lookalike, own + "_more"} {
			if err := database.EnsureDatabase(ctx, cfg, foreign); err == nil {
				t.Errorf("%s may create or use the database %s", cfg.User, foreign)
			}
			if db, err := sql.Open("mysql", cfg.DSN(foreign)); err == nil {
				if err := db.PingContext(ctx); err == nil {
					t.Errorf("%s connects to the database %s", cfg.User, foreign)
				}
				db.Close()
			}
		}
		bad, err := sql.Open("mysql", as(svc, "wrong").DSN(own))
		testenv.Must(t, err)
		if err := bad.PingContext(ctx); err == nil {
			t.Errorf("%s connects with a wrong password", cfg.User)
		}
		bad.Close()
	}
}

// TestMySQLInitRefusesAServiceWithoutAPassword: an unset password stops
// the script (and so the image's initialisation) instead of creating a
// user anyone can log in as.
func TestMySQLInitRefusesAServiceWithoutAPassword(t *testing.T) {
	cmd := exec.Command("sh", filepath.Join(composecheck.RepoRoot(t), usersScript))
	cmd.Env = append(os.Environ(), "ONCEMALL_DB_SERVICES=order", "MYSQL_ORDER_PASSWORD=")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "MYSQL_ORDER_PASSWORD is empty") || strings.Contains(string(out), "CREATE USER") {
		t.Fatalf("without a password: %v, %q; want a refusal naming MYSQL_ORDER_PASSWORD and no SQL", err, out)
	}
}

// TestMySQLInitIsSourcedByTheImage: the images' entrypoints source a
// non-executable *.sh from /docker-entrypoint-initdb.d, with
// docker_process_sql defined, but run an executable one, where it is not.
func TestMySQLInitIsSourcedByTheImage(t *testing.T) {
	info, err := os.Stat(filepath.Join(composecheck.RepoRoot(t), usersScript))
	testenv.Must(t, err)
	if info.Mode().Perm()&0o111 != 0 {
		t.Fatalf("%s is executable (%s): the image would run it without docker_process_sql, and create nobody", usersScript, info.Mode())
	}
	// Sourced with a docker_process_sql of the test's, it hands the SQL to it.
	cmd := exec.Command("bash", "-c", `set -eo pipefail; docker_process_sql() { cat > "$OUT"; }; . "$1"`, "bash", filepath.Join(composecheck.RepoRoot(t), usersScript))
	out := filepath.Join(t.TempDir(), "sql")
	cmd.Env = append(os.Environ(), "OUT="+out, "MYSQL_ORDER_PASSWORD=a", "MYSQL_COUPON_PASSWORD=b", "MYSQL_PAYMENT_PASSWORD=c")
	if b, err := cmd.CombinedOutput(); err != nil || len(b) != 0 {
		t.Fatalf("sourced: %v, printed %q; want the SQL handed to docker_process_sql", err, b)
	}
	got, err := os.ReadFile(out)
	testenv.Must(t, err)
	for _, svc := range []string{"order", "coupon", "payment"} {
		if !strings.Contains(string(got), "GRANT ALL PRIVILEGES ON `oncemall\\_"+svc+"`.* TO 'oncemall_"+svc+"'@'%';") {
			t.Errorf("the SQL does not grant oncemall_%s its database:\n%s", svc, got)
		}
	}
}
