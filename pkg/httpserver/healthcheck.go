package httpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// HealthcheckTimeout bounds one Healthcheck: below the compose
// healthchecks' timeout (3s), so the probe reports its own error first.
const HealthcheckTimeout = 2 * time.Second

// Healthcheck is the `<program> healthcheck URL` command every program has,
// for container healthchecks in images with no shell, curl or wget: it GETs
// the one URL in args (the program's own /readyz or /healthz) and returns
// nil on a 2xx answer, and an error naming the URL and the status or the
// failure otherwise, so the process exits 1.
func Healthcheck(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: healthcheck URL (for example http://127.0.0.1:8081/readyz)")
	}
	u, err := url.Parse(args[0])
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("healthcheck: %q is not an http URL", args[0])
	}
	ctx, cancel := context.WithTimeout(ctx, HealthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("healthcheck: GET %s: %s: %s", u, resp.Status, body)
	}
	return nil
}
