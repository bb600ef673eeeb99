package natsjs_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

func TestEnsureStreamIsIdempotent(t *testing.T) {
	c := testenv.NATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := strings.ToUpper(testenv.UniqueName(t, "s"))
	testenv.DeleteStreamAtCleanup(t, c.JS, name)
	cfg := jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Duplicates: time.Minute}
	for range 3 {
		if _, err := natsjs.EnsureStream(ctx, c.JS, cfg); err != nil {
			t.Fatal(err)
		}
	}
	// A changed setting is applied, not rejected.
	cfg.MaxMsgs = 100
	s, err := natsjs.EnsureStream(ctx, c.JS, cfg)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.Config.MaxMsgs != 100 {
		t.Fatalf("updated stream: %+v %v", info, err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

func TestDrainClosesAndPingFailsAfter(t *testing.T) {
	c := testenv.NATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if !c.NC.IsClosed() {
		t.Fatal("connection open after Drain")
	}
	if err := c.Ping(ctx); err == nil {
		t.Fatal("Ping succeeded on a closed connection")
	}
	if err := c.Drain(ctx); err != nil {
		t.Fatalf("second Drain: %v", err)
	}
}

func TestCleanShutdownIsNotLoggedAsAWarning(t *testing.T) {
	var logs testenv.SyncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := natsjs.Connect(ctx, testenv.Config(t).NATS, t.Name(), log)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	// The disconnect callback runs on the client's own goroutine.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "nats connection closed") {
		if time.Now().After(deadline) {
			t.Fatalf("no \"nats connection closed\" line after Drain; logs:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if strings.Contains(logs.String(), `"level":"WARN"`) {
		t.Fatalf("a clean Drain logged a warning:\n%s", logs.String())
	}
}

func TestConnectGivesUpAtTheDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := natsjs.Connect(ctx, natsjs.Config{URL: "nats://127.0.0.1:1"}, "t", testenv.Logger(t))
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("Connect to a dead address: %v", err)
	}
}

func TestValidateURL(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"nats://127.0.0.1:4222", true},
		{"tls://nats.example.com:4443", true},
		{"nats://user:secret@nats:4222", true},
		{"nats://a:4222, nats://b:4222,nats://[::1]:4222", true},
		{"", false},
		{" , ", false},
		{"not a url", false},
		{"nats://not a url", false},
		{"127.0.0.1:4222", false},
		{"http://127.0.0.1:4222", false},
		{"nats://127.0.0.1", false},
		{"nats://:4222", false},
		{"nats://127.0.0.1:0", false},
		{"nats://127.0.0.1:4222,localhost", false},
	} {
		err := natsjs.Config{URL: tc.url}.Validate()
		if tc.ok && err != nil {
			t.Errorf("NATS_URL=%q: %v, want it accepted", tc.url, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "NATS_URL")) {
			t.Errorf("NATS_URL=%q: error %v, want one naming NATS_URL", tc.url, err)
		}
	}
}

func TestFirstServerAddr(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"nats://127.0.0.1:4222", "127.0.0.1:4222"},
		{"tls://nats.example.com:4443", "nats.example.com:4443"},
		{"nats://user:s3cret@nats:4222", "nats:4222"},
		{"nats://t0ken@nats:4222/", "nats:4222"},
		{" nats://a:4222 , nats://b:4222", "a:4222"},
		{" , nats://b:4222", "b:4222"},
		{"nats://[::1]:4222,nats://a:4222", "[::1]:4222"},
	} {
		if got, err := natsjs.FirstServerAddr(tc.url); got != tc.want || err != nil {
			t.Errorf("FirstServerAddr(%q) = %q, %v; want %q", tc.url, got, err, tc.want)
		}
	}
	for _, url := range []string{
		"",
		" , ",
		"127.0.0.1:4222",
		"http://127.0.0.1:4222",
		"nats://127.0.0.1",
		"nats://user:s3cret@bad host:4222,nats://b:4222",
	} {
		got, err := natsjs.FirstServerAddr(url)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("FirstServerAddr(%q) = %q, %v; want an error without the password", url, got, err)
		}
	}
}

// TestSecretsInNATSURLStayOutOfErrors: a NATS_URL carries credentials
// (nats://user:password@host or nats://token@host); neither the config
// error nor the connect error may print them.
func TestSecretsInNATSURLStayOutOfErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://user:s3cret@nats:4222", "nats://redacted@nats:4222"},
		{"nats://t0ken@a:4222,nats://b:4222", "nats://redacted@a:4222,nats://b:4222"},
		{"nats://user:s3cret@bad host:4222", "redacted"},
	} {
		if got := natsjs.RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	err := natsjs.Config{URL: "http://user:s3cret@nats:4222"}.Validate()
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("config error %v: want one without the password", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// An unreachable server, and a URL nats.go cannot parse (its parse
	// error quotes the URL it was given).
	for _, url := range []string{"nats://user:s3cret@" + testenv.FreeAddr(t), "nats://user:s3cret@bad host:4222"} {
		_, err = natsjs.Connect(ctx, natsjs.Config{URL: url}, "redact-test", testenv.Logger(t))
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("connect error %v: want one without the password", err)
		}
	}
}

// TestConnectGivesUpAtOnceOnErrorsThatCannotHeal: a URL Validate refuses,
// or credentials the server refuses, fail every retry the same way; Connect
// reports them at once instead of retrying until the deadline.
func TestConnectGivesUpAtOnceOnErrorsThatCannotHeal(t *testing.T) {
	for _, tc := range []struct {
		name, url, want string
	}{
		{"unparsable URL", "nats://not a url", "nats_url"},
		{"refused credentials", "nats://t:wrong@" + testenv.NewNATSServer(t, "--user", "t", "--pass", "right").Addr(), "authorization"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			began := time.Now()
			_, err := natsjs.Connect(ctx, natsjs.Config{URL: tc.url}, "t", testenv.Logger(t))
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), tc.want) {
				t.Fatalf("Connect(%q): %v, want an error mentioning %q", tc.url, err, tc.want)
			}
			if took := time.Since(began); took > 5*time.Second {
				t.Fatalf("Connect gave up after %s, want at once", took)
			}
		})
	}
}
