package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	_ "github.com/go-sql-driver/mysql"
)

// BenchmarkStatementFloor measures what one SQL statement costs in CPU, on
// a MariaDB server of its own (as --own-mysql starts it: the server's
// defaults, one fsync per commit): the server's CPU and this client's per
// statement, for the kinds of statement a purchase is made of, 8 clients
// at once. It is the floor under the cost report's figures: a purchase of
// n statements costs at least n times these, before any of the services'
// own work.
//
//	go test -run '^$' -bench StatementFloor -benchtime 5000x ./scripts/loadgen/
func BenchmarkStatementFloor(b *testing.B) {
	r := &rig{dir: b.TempDir(), byName: map[string]*proc{}, log: io.Discard}
	addr, err := r.startMySQL(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.close(true) })
	server := r.byName["mariadb"]
	db, err := sql.Open("mysql", "root@tcp("+addr+")/?interpolateParams=true&multiStatements=true")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	for _, q := range []string{
		"CREATE DATABASE floor",
		"CREATE TABLE floor.t (id BIGINT PRIMARY KEY AUTO_INCREMENT, k VARCHAR(64) NOT NULL, n INT NOT NULL, UNIQUE KEY (k))",
		"INSERT INTO floor.t (k, n) SELECT CONCAT('seed-', seq), 0 FROM floor.seq_1_to_1000",
	} {
		if _, err := db.Exec(q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	var seq atomic.Int64
	cases := []struct {
		name  string
		stmts int // statements per run of do
		do    func(id int64) error
	}{
		{"select-by-key", 1, func(id int64) error {
			var n int
			return db.QueryRow("SELECT n FROM floor.t WHERE id = ?", id%1000+1).Scan(&n)
		}},
		{"update-autocommit", 1, func(id int64) error {
			_, err := db.Exec("UPDATE floor.t SET n = n + 1 WHERE id = ?", id%1000+1)
			return err
		}},
		{"insert-autocommit", 1, func(id int64) error {
			_, err := db.Exec("INSERT INTO floor.t (k, n) VALUES (?, 0)", fmt.Sprintf("i-%d", id))
			return err
		}},
		{"tx-insert-update", 4, func(id int64) error { // START, INSERT, UPDATE, COMMIT
			tx, err := db.Begin()
			if err != nil {
				return err
			}
			if _, err := tx.Exec("INSERT INTO floor.t (k, n) VALUES (?, 0)", fmt.Sprintf("t-%d", id)); err != nil {
				_ = tx.Rollback()
				return err
			}
			if _, err := tx.Exec("UPDATE floor.t SET n = n + 1 WHERE id = ?", id%1000+1); err != nil {
				_ = tx.Rollback()
				return err
			}
			return tx.Commit()
		}},
		// The same transaction in fewer round trips (multi-statement
		// queries): what a pipelined begin and commit would save.
		{"tx-start-with-insert", 4, func(id int64) error {
			return onConn(db, "l", id, "UPDATE floor.t SET n = n + 1 WHERE id = ?", "COMMIT")
		}},
		{"tx-start-with-insert-commit-with-update", 4, func(id int64) error {
			return onConn(db, "m", id, "UPDATE floor.t SET n = n + 1 WHERE id = ?; COMMIT")
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			serverBefore, clientBefore := cpuOf(server.cmd.Process.Pid), selfCPU()
			b.SetParallelism(4) // 4 × GOMAXPROCS (2 here) = 8 clients
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := c.do(seq.Add(1)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			stmts := float64(b.N * c.stmts)
			b.ReportMetric((cpuOf(server.cmd.Process.Pid)-serverBefore)*1e6/stmts, "server-µs/stmt")
			b.ReportMetric((selfCPU()-clientBefore)*1e6/stmts, "client-µs/stmt")
		})
	}
}

// onConn runs, on one connection, START TRANSACTION with an INSERT of a
// row keyed prefix-id in one round trip, then each of rest (given id's
// row, or none) in a round trip of its own: the floor's transaction in
// fewer round trips.
func onConn(db *sql.DB, prefix string, id int64, rest ...string) error {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "START TRANSACTION; INSERT INTO floor.t (k, n) VALUES (?, 0)", fmt.Sprintf("%s-%d", prefix, id)); err != nil {
		return err
	}
	for _, q := range rest {
		var args []any
		if strings.Contains(q, "?") {
			args = append(args, id%1000+1)
		}
		if _, err := conn.ExecContext(ctx, q, args...); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkHTTPFloor measures what one HTTP request costs in CPU, both
// ends in this process over loopback TCP with keep-alive, 8 clients at
// once: a small JSON body in, a small JSON answer out, no routing,
// middleware or work. A purchase's 6.7 requests cost at least that many
// times this.
//
//	go test -run '^$' -bench HTTPFloor -benchtime 20000x ./scripts/loadgen/
func BenchmarkHTTPFloor(b *testing.B) {
	answer := []byte(`{"order_no":"O0123456789abcdef01234567","status":"WAIT_PAY","pay_amount":4000}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in map[string]any
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	body := `{"items":[{"product_id":1,"quantity":2}],"coupon_id":42}`
	before := selfCPU()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(srv.URL+"/orders", "application/json", strings.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.ReportMetric((selfCPU()-before)*1e6/float64(b.N), "cpu-µs/request")
}

// selfCPU is this process's user + system time in seconds.
func selfCPU() float64 {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 0
	}
	return float64(u.Utime.Nano()+u.Stime.Nano()) / 1e9
}
