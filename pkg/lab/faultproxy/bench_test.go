package faultproxy_test

import (
	"database/sql"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// The query benchmarks compare a round trip and a committed transaction
// directly against the server and through the proxy (disarmed), which is the
// cost a test or the lab pays for running through it.

func BenchmarkSelect1(b *testing.B) {
	run := func(b *testing.B, db *sql.DB) {
		db.SetMaxOpenConns(1)
		var n int
		for b.Loop() {
			if err := db.QueryRow("SELECT 1").Scan(&n); err != nil {
				b.Fatal(err)
			}
		}
	}
	benchBoth(b, run)
}

func BenchmarkCommit(b *testing.B) {
	run := func(b *testing.B, db *sql.DB) {
		db.SetMaxOpenConns(1)
		if _, err := db.Exec("CREATE TABLE IF NOT EXISTS bench (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)"); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			tx, err := db.Begin()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tx.Exec("INSERT INTO bench (v) VALUES (1)"); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	}
	benchBoth(b, run)
}

func benchBoth(b *testing.B, run func(*testing.B, *sql.DB)) {
	b.Run("direct", func(b *testing.B) {
		cfg, name := testenv.NewDatabase(b)
		db, err := sql.Open("mysql", cfg.DSN(name))
		testenv.Must(b, err)
		defer db.Close()
		run(b, db)
	})
	b.Run("proxy", func(b *testing.B) {
		p, via, _, name := startProxy(b)
		db, err := sql.Open("mysql", via.DSN(name))
		testenv.Must(b, err)
		defer db.Close()
		run(b, db)
		if st := p.Stats(); st.AcksDropped != 0 {
			b.Fatalf("stats = %+v", st)
		}
	})
}
