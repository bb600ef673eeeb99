// Package outboxtest checks, from a service's own tests, that the service
// offers the outbox's operator paths the way every service must: the
// "outbox" subcommand and the redrive endpoint behind the admin token.
package outboxtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// Service is a service's command line as its main runs it (run(ctx, args,
// stdout)), configured through the environment to listen on Addr, accept
// AdminToken and use the database DBName at MySQL.
type Service struct {
	Run        func(ctx context.Context, args []string, stdout io.Writer) error
	Addr       string
	AdminToken string
	MySQL      database.Config
	DBName     string
}

// CheckOperatorPaths migrates s's database with "migrate", checks the
// "outbox stats" and "outbox redrive" commands on a failed row, then serves
// s and checks that its HTTP engine answers POST outbox.RedrivePath with 401
// without the admin token or with a wrong one (the row stays failed) and
// with 200 {"redriven":1} with it. It stops s as SIGTERM would.
func CheckOperatorPaths(t *testing.T, s Service) {
	t.Helper()
	ctx := context.Background()
	testenv.Must(t, s.Run(ctx, []string{"migrate"}, io.Discard))
	db, err := database.Open(ctx, s.MySQL, s.DBName, testenv.Logger(t))
	testenv.Must(t, err)
	t.Cleanup(func() { _ = database.Close(db) })

	// The command line, with no server running.
	id := addFailed(t, db)
	command := func(args ...string) map[string]any {
		t.Helper()
		var out bytes.Buffer
		if err := s.Run(ctx, append([]string{"outbox"}, args...), &out); err != nil {
			t.Fatalf("outbox %s: %v", strings.Join(args, " "), err)
		}
		var v map[string]any
		if err := json.Unmarshal(out.Bytes(), &v); err != nil {
			t.Fatalf("outbox %s printed %q: %v", strings.Join(args, " "), out.String(), err)
		}
		return v
	}
	if st := command("stats"); st["pending"] != 0.0 || st["failed"] != 1.0 {
		t.Fatalf("outbox stats = %v, want 0 pending and 1 failed", st)
	}
	if r := command("redrive", id); r["redriven"] != 1.0 {
		t.Fatalf("outbox redrive %s = %v, want 1 redriven", id, r)
	}
	if st := command("stats"); st["pending"] != 1.0 || st["failed"] != 0.0 {
		t.Fatalf("outbox stats after the redrive = %v, want 1 pending and 0 failed", st)
	}
	if err := s.Run(ctx, []string{"outbox", "replay"}, io.Discard); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Fatalf("outbox replay: %v, want a usage error", err)
	}

	// The HTTP engine of the running service.
	stop := serve(t, s)
	defer stop()
	id = addFailed(t, db)
	url := "http://" + s.Addr + outbox.RedrivePath
	for _, auth := range []string{"", "Bearer wrong-" + s.AdminToken} {
		if code, body := post(t, url, auth, id); code != http.StatusUnauthorized {
			t.Fatalf("POST %s with Authorization %q: %d %s, want 401", outbox.RedrivePath, auth, code, body)
		}
	}
	if st := status(t, db, id); st != outbox.StatusFailed {
		t.Fatalf("a refused redrive changed the row to %s", st)
	}
	if code, body := post(t, url, "Bearer "+s.AdminToken, id); code != http.StatusOK || !strings.Contains(body, `"redriven":1`) {
		t.Fatalf("POST %s with the admin token: %d %s, want 200 {\"redriven\":1}", outbox.RedrivePath, code, body)
	}
	if st := status(t, db, id); st == outbox.StatusFailed {
		t.Fatal("the redriven row is still failed")
	}
}

// addFailed commits one message into db's local_message and marks it failed,
// as if it had exhausted its retries, and returns its id. Its subject has no
// stream, so a relay that picks it up again spends its fresh retries on it,
// with backoff, long after the test is over.
func addFailed(t *testing.T, db *gorm.DB) string {
	t.Helper()
	msgs := []outbox.Message{{Subject: "outboxtest" + strings.ToLower(testenv.RandomSuffix(8)) + ".x", Body: []byte(`{}`)}}
	testenv.Must(t, db.Transaction(func(tx *gorm.DB) error { return outbox.Add(tx, msgs...) }))
	res := db.Exec("UPDATE local_message SET status = ?, retry_count = 8, last_error = 'outboxtest' WHERE message_no = ?", outbox.StatusFailed, msgs[0].ID)
	testenv.Must(t, res.Error)
	if res.RowsAffected != 1 {
		t.Fatalf("mark %s failed: %d rows changed", msgs[0].ID, res.RowsAffected)
	}
	return msgs[0].ID
}

func status(t *testing.T, db *gorm.DB, id string) string {
	t.Helper()
	var st string
	testenv.Must(t, db.Raw("SELECT status FROM local_message WHERE message_no = ?", id).Row().Scan(&st))
	return st
}

func post(t *testing.T, url, auth, id string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"message_ids":["`+id+`"]}`))
	testenv.Must(t, err)
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	testenv.Must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// serve runs s until stop, which cancels its context as SIGTERM does and
// requires a clean return. It returns once s answers /healthz.
func serve(t *testing.T, s Service) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, nil, io.Discard) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + s.Addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("the service stopped before answering /healthz: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("the service did not answer /healthz within 30s")
		}
	}
	return func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("run did not return after cancellation")
		}
	}
}
