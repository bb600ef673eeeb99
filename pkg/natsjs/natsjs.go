// Package natsjs connects to NATS and declares JetStream streams idempotently.
package natsjs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/events"
)

// Config is the NATS part of a service configuration.
type Config struct {
	URL string `env:"NATS_URL" default:"nats://127.0.0.1:4222" usage:"NATS server URL (JetStream enabled)"`
}

// Validate reports a NATS_URL that is not a nats:// or tls:// URL with a host
// and a port, or a comma-separated list of them (the list form nats.Connect
// takes). nats.go would take more (a bare host, an implied port, websocket
// schemes), but a typo it takes is retried as an unreachable server until
// STARTUP_TIMEOUT; refused here, it stops the service at once, named.
func (c Config) Validate() error {
	if err := checkURLs(c.URL); err != nil {
		return &config.Error{Var: "NATS_URL", Value: RedactURL(c.URL), Err: err}
	}
	return nil
}

// RedactURL returns a NATS_URL value fit for logs and errors: the user
// part of each URL (a user and password, or a token) is replaced by
// "redacted". A server that does not parse is replaced whole, since
// nothing tells where its secret ends.
func RedactURL(list string) string {
	parts := strings.Split(list, ",")
	for i, raw := range parts {
		raw = strings.TrimSpace(raw)
		if !strings.Contains(raw, "@") {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || u.User == nil {
			parts[i] = "redacted"
			continue
		}
		u.User = url.User("redacted")
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// FirstServerAddr returns the host:port of the first server in a NATS_URL
// value (one nats:// or tls:// URL, maybe with credentials, or a
// comma-separated list of them): the address a check that NATS answers
// dials, the one scripts/depaddrs.sh checks too. Its error, like
// Validate's, carries no credentials.
func FirstServerAddr(list string) (string, error) {
	for raw := range strings.SplitSeq(list, ",") {
		if raw = strings.TrimSpace(raw); raw == "" {
			continue
		}
		addr, err := serverAddr(raw)
		if err != nil {
			return "", fmt.Errorf("first server of NATS URL %s: %w", RedactURL(list), err)
		}
		return addr, nil
	}
	return "", fmt.Errorf("NATS URL %q names no server", list)
}

func checkURLs(list string) error {
	n := 0
	for raw := range strings.SplitSeq(list, ",") {
		if raw = strings.TrimSpace(raw); raw == "" {
			continue
		}
		n++
		if _, err := serverAddr(raw); err != nil {
			return err
		}
	}
	if n == 0 {
		return errors.New("must not be empty")
	}
	return nil
}

// serverAddr returns the host:port of one nats:// or tls:// URL. Its errors
// do not quote raw, which may hold a password.
func serverAddr(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", errors.New("not a URL (want nats://host:port, or a comma-separated list of them)")
	}
	if u.Scheme != "nats" && u.Scheme != "tls" {
		return "", errors.New("scheme must be nats:// or tls:// (e.g. nats://127.0.0.1:4222)")
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" {
		return "", errors.New("want host:port after the scheme")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "", errors.New("port must be a number from 1 to 65535")
	}
	return u.Host, nil
}

// Conn is a NATS connection with its JetStream context.
type Conn struct {
	NC *nats.Conn
	JS jetstream.JetStream
}

// Connect dials NATS. After the first successful connection the client
// reconnects forever, logging every change of state; the first dial must
// succeed within the context's deadline, and is retried until then unless
// its error is one no retry heals: a URL Validate refuses, or refused
// credentials.
//
// cfg is validated here, before nats.go sees it: nats.go's own parse error
// (a *url.Error) quotes the whole URL, password included, while Validate's
// error carries the redacted URL only.
func Connect(ctx context.Context, cfg Config, name string, log *slog.Logger) (*Conn, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("connect nats: %w", err)
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.Timeout(3 * time.Second),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			// A nil error is our own Close or Drain at shutdown: logging it
			// as a warning would make every clean stop look like a fault.
			if err == nil {
				log.Info("nats connection closed")
				return
			}
			log.Warn("nats disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
		}),
	}
	var nc *nats.Conn
	var err error
	for {
		nc, err = nats.Connect(cfg.URL, opts...)
		if err == nil {
			break
		}
		if cannotHeal(err) {
			return nil, fmt.Errorf("connect nats %s: %w", RedactURL(cfg.URL), err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect nats %s: %w", RedactURL(cfg.URL), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream context: %w", err)
	}
	return &Conn{NC: nc, JS: js}, nil
}

// cannotHeal reports whether a failed first connection would fail the same
// way on every retry. A URL nats.go cannot parse is not among them: Validate,
// which parses each URL the same way, has refused it already.
func cannotHeal(err error) bool {
	return errors.Is(err, nats.ErrAuthorization)
}

// Ping reports whether the connection is up and JetStream answers.
func (c *Conn) Ping(ctx context.Context) error {
	if !c.NC.IsConnected() {
		return fmt.Errorf("nats: %s", c.NC.Status())
	}
	if _, err := c.JS.AccountInfo(ctx); err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	return nil
}

// Drain lets in-flight messages finish, then closes the connection. It
// returns when the connection is closed or ctx ends.
func (c *Conn) Drain(ctx context.Context) error {
	closed := make(chan struct{})
	c.NC.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := c.NC.Drain(); err != nil {
		if errors.Is(err, nats.ErrConnectionClosed) {
			return nil
		}
		return fmt.Errorf("drain nats: %w", err)
	}
	select {
	case <-closed:
		return nil
	case <-ctx.Done():
		c.NC.Close()
		return ctx.Err()
	}
}

// EnsureStream creates the stream or updates it to cfg. It is safe to call at
// every start-up of every replica.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
	}
	return s, nil
}

// StreamConfig returns the stream that carries subjects "<root>.>" under
// name: file storage, limits retention, seven days, and the duplicate window
// the outbox relay's retries rely on (events.DuplicateWindow).
func StreamConfig(name, root string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:       name,
		Subjects:   []string{root + ".>"},
		Storage:    jetstream.FileStorage,
		Retention:  jetstream.LimitsPolicy,
		MaxAge:     7 * 24 * time.Hour,
		Duplicates: events.DuplicateWindow,
	}
}

// EventStream returns the stream carrying subject's root ("order" for
// "order.paid", or the root alone) in the namespace ev: its name
// ev.StreamName, its subjects ev.SubjectPrefix+root+".>", ev.StreamReplicas
// copies.
func EventStream(ev events.Config, subject string) jetstream.StreamConfig {
	root, _, _ := strings.Cut(subject, ".")
	sc := StreamConfig(ev.StreamName(root), ev.Subject(root))
	sc.Replicas = max(ev.StreamReplicas, 1)
	return sc
}
