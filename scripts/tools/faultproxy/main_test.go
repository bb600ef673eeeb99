package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/lab/faultproxy"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

func TestRunProxiesArmsAndShutsDown(t *testing.T) {
	direct, dbName := testenv.NewDatabase(t)
	proxyAddr, adminAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	env := map[string]string{
		"FAULTPROXY_ADDR":       proxyAddr,
		"FAULTPROXY_UPSTREAM":   direct.Addr,
		"FAULTPROXY_ADMIN_ADDR": adminAddr,
		"ADMIN_TOKEN":           "run-test-token",
		"LOG_LEVEL":             "debug",
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs testenv.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &logs)
	}()

	// Wait for the admin API.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + adminAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("admin API never became healthy: %v\nlogs:\n%s", err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	via := direct
	via.Addr = proxyAddr
	db, err := sql.Open("mysql", via.DSN(dbName))
	testenv.Must(t, err)
	defer db.Close()
	_, err = db.Exec("CREATE TABLE t (id INT PRIMARY KEY)")
	testenv.Must(t, err)

	req, _ := http.NewRequest(http.MethodPost, "http://"+adminAddr+"/arm", strings.NewReader(`{"drop_commit_acks": 1}`))
	req.Header.Set("Authorization", "Bearer run-test-token")
	resp, err := http.DefaultClient.Do(req)
	testenv.Must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /arm = %d", resp.StatusCode)
	}
	tx, err := db.Begin()
	testenv.Must(t, err)
	_, err = tx.Exec("INSERT INTO t VALUES (1)")
	testenv.Must(t, err)
	if err := tx.Commit(); !errors.Is(err, mysql.ErrInvalidConn) {
		t.Fatalf("commit through the armed program = %v, want %v", err, mysql.ErrInvalidConn)
	}

	// A held connection must not keep the program from stopping.
	testenv.Must(t, db.Ping())
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run returned %v after shutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after the context was cancelled")
	}
	if !strings.Contains(logs.String(), "COMMIT acknowledgement dropped") {
		t.Fatalf("logs do not record the dropped acknowledgement:\n%s", logs.String())
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	env := map[string]string{"FAULTPROXY_UPSTREAM": "no-port", "FAULTPROXY_REPLY_TIMEOUT": "0s"}
	err := run(context.Background(), func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "FAULTPROXY_UPSTREAM") || !strings.Contains(err.Error(), "FAULTPROXY_REPLY_TIMEOUT") {
		t.Fatalf("run with a bad config = %v, want errors naming FAULTPROXY_UPSTREAM and FAULTPROXY_REPLY_TIMEOUT", err)
	}
}

// TestConfigVars pins the variables the program reads, for the README and
// the compose drift test.
func TestConfigVars(t *testing.T) {
	var names []string
	for _, v := range config.Vars(&faultproxy.Config{}) {
		names = append(names, v.Name)
	}
	for _, want := range []string{"FAULTPROXY_ADDR", "FAULTPROXY_UPSTREAM", "FAULTPROXY_ADMIN_ADDR", "ADMIN_TOKEN", "LOG_LEVEL"} {
		if !strings.Contains(strings.Join(names, ","), want) {
			t.Errorf("config.Vars lacks %s: %v", want, names)
		}
	}
	if err := faultproxy.DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}
