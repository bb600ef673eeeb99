package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// TestRunServesChargesAndStopsOnCancel runs the program's run function on a
// free port: it accepts a charge, notifies the callback URL from the
// environment with a signature the payment side verifies, and returns nil
// when its context is cancelled.
func TestRunServesChargesAndStopsOnCancel(t *testing.T) {
	var verified atomic.Int32
	merchant := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if psp.Verify(r.Header, body, []byte("dev-psp-secret-not-for-production"), time.Now(), time.Minute) == nil {
			verified.Add(1)
		}
	}))
	defer merchant.Close()

	addr := testenv.FreeAddr(t)
	t.Setenv("PSP_HTTP_ADDR", addr)
	t.Setenv("PSP_CALLBACK_URL", merchant.URL)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, io.Discard) }()

	client := psp.NewClient("http://"+addr, http.DefaultClient)
	deadline := time.Now().Add(10 * time.Second)
	var err error
	for {
		_, err = client.Charge(ctx, psp.ChargeRequest{OutTradeNo: "P-main", Amount: 100})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("charge: %v", err)
	}
	for verified.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if verified.Load() != 1 {
		t.Fatalf("merchant verified %d notifications, want 1", verified.Load())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run returned %v after cancel", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}

// TestRunRefusesAnEmptySecret: the simulator may run on the published
// development secret (it is a development tool), but an explicitly empty
// PSP_SECRET would sign with no key at all, so it stops at start-up with
// an error naming the variable.
func TestRunRefusesAnEmptySecret(t *testing.T) {
	t.Setenv("PSP_SECRET", "")
	t.Setenv("PSP_HTTP_ADDR", testenv.FreeAddr(t))
	err := run(context.Background(), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "PSP_SECRET") {
		t.Fatalf("run with PSP_SECRET empty: %v, want an error naming PSP_SECRET", err)
	}
}

// TestRunRefusesAnotherSecretOutsideTheLab: a secret other than the
// development one could be a real platform's, which the simulator would
// forge notifications with; it starts with one only with ONCEMALL_ENV=lab.
func TestRunRefusesAnotherSecretOutsideTheLab(t *testing.T) {
	t.Setenv("PSP_SECRET", "a-real-platforms-secret-0123456789")
	t.Setenv("PSP_HTTP_ADDR", testenv.FreeAddr(t))
	for _, env := range []string{"", "dev", "production"} {
		t.Setenv("ONCEMALL_ENV", env)
		err := run(context.Background(), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "PSP_SECRET") || strings.Contains(err.Error(), "a-real-platforms-secret") {
			t.Fatalf("ONCEMALL_ENV=%q: run with another secret: %v, want an error naming PSP_SECRET, the value redacted", env, err)
		}
	}
	t.Setenv("ONCEMALL_ENV", "lab")
	addr := testenv.FreeAddr(t)
	t.Setenv("PSP_HTTP_ADDR", addr)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, io.Discard) }()
	// It serves: /healthz answers (or run has stopped, with its error).
	for served := false; !served; {
		select {
		case err := <-done:
			t.Fatalf("ONCEMALL_ENV=lab: run stopped: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			served = resp.StatusCode == http.StatusOK
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ONCEMALL_ENV=lab: %v", err)
	}
}
