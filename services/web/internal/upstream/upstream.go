// Package upstream is the storefront's client of the services' public APIs:
// identity's token endpoint, the order service's catalog and orders, the
// coupon service's coupons, the payment service's payments, and the payment
// platform's answer about a charge. Every call is made for a Caller, whose
// token it carries; a refusal or a failure is an *Error that says which
// service answered what.
package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/metrics"
)

// Caller is the signed-in user a call is made for: the access token from
// the session cookie and the user id the storefront verified it names.
type Caller struct {
	Token  string
	UserID uint64
}

// URLs are the services' base URLs.
type URLs struct {
	Identity, Order, Coupon, Payment, PSP string
}

// Client calls the services.
type Client struct {
	urls  URLs
	http  *http.Client
	calls *prometheus.CounterVec
	// retryWait is how long a request whose Idempotency-Key is still being
	// processed waits before it asks again.
	retryWait time.Duration
}

// New returns a client of the services at urls, calling them with hc. It
// counts its calls in web_upstream_calls_total{service,outcome} on reg (nil:
// uncounted): outcome ok, refused (a 4xx answer) or failed (no answer, or
// a 5xx), the last what an operator watches. Clients on one registry share
// the counter.
func New(urls URLs, hc *http.Client, reg prometheus.Registerer) (*Client, error) {
	s := metrics.NewSet(reg)
	calls := s.Counters("web_upstream_calls_total",
		"Calls of the storefront to the services, by service and outcome (ok, refused: a 4xx answer, failed: no answer or a 5xx).",
		"service", "outcome")
	if err := s.Err(); err != nil {
		return nil, err
	}
	return &Client{urls: urls, http: hc, calls: calls, retryWait: 300 * time.Millisecond}, nil
}

// Error is a call that did not succeed: the service refused it (Status and
// the problem document's fields) or could not be reached (Status 0, Err).
type Error struct {
	Service string // "order", "coupon", ...
	Method  string
	Path    string
	Status  int
	Detail  string
	// Code and Reason are the problem document's machine-readable
	// extensions ("out_of_stock", "not_available"), when it has them.
	Code   string
	Reason string
	Err    error
}

func (e *Error) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("%s %s %s: %v", e.Service, e.Method, e.Path, e.Err)
	}
	return fmt.Sprintf("%s %s %s: %d %s", e.Service, e.Method, e.Path, e.Status, e.Detail)
}

func (e *Error) Unwrap() error { return e.Err }

// Unreachable reports whether the service gave no usable answer: no
// connection, a timeout, or a 5xx. The request may be sent again as it was.
func (e *Error) Unreachable() bool { return e.Status == 0 || e.Status >= 500 }

// StatusOf is err's upstream status, 0 for an error that is not an *Error
// or that got no answer.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// call is one request: body (if not nil) as JSON, or form (if not nil) as a
// form, the caller's token and user id, extra headers; a 2xx answer is
// decoded into out (if not nil), anything else is an *Error.
type call struct {
	service, base, method, path string
	caller                      *Caller
	json                        any
	form                        url.Values
	header                      map[string]string
	out                         any
}

func (c *Client) do(ctx context.Context, r call) (int, error) {
	status, err := c.send(ctx, r)
	outcome := "ok"
	var e *Error
	if errors.As(err, &e) {
		outcome = "refused"
		if e.Unreachable() {
			outcome = "failed"
		}
	}
	c.calls.WithLabelValues(r.service, outcome).Inc()
	return status, err
}

func (c *Client) send(ctx context.Context, r call) (int, error) {
	fail := func(status int, err error) *Error {
		return &Error{Service: r.service, Method: r.method, Path: r.path, Status: status, Err: err}
	}
	var body io.Reader
	contentType := ""
	switch {
	case r.json != nil:
		b, err := json.Marshal(r.json)
		if err != nil {
			return 0, fail(0, err)
		}
		body, contentType = bytes.NewReader(b), "application/json"
	case r.form != nil:
		body, contentType = strings.NewReader(r.form.Encode()), "application/x-www-form-urlencoded"
	}
	req, err := http.NewRequestWithContext(ctx, r.method, r.base+r.path, body)
	if err != nil {
		return 0, fail(0, err)
	}
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if r.caller != nil {
		req.Header.Set("Authorization", "Bearer "+r.caller.Token)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fail(0, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, fail(0, fmt.Errorf("read answer: %w", err))
	}
	if resp.StatusCode/100 != 2 {
		e := fail(resp.StatusCode, nil)
		var p struct {
			Detail string `json:"detail"`
			Title  string `json:"title"`
			Code   string `json:"code"`
			Reason string `json:"reason"`
			Error  string `json:"error"`
		}
		if json.Unmarshal(raw, &p) == nil {
			e.Detail, e.Code, e.Reason = p.Detail, p.Code, p.Reason
			if e.Detail == "" {
				e.Detail = p.Title
			}
			if e.Code == "" {
				e.Code = p.Error
			}
		}
		if e.Detail == "" {
			e.Detail = http.StatusText(resp.StatusCode)
		}
		if resp.StatusCode == http.StatusConflict && resp.Header.Get("Retry-After") != "" && e.Code == "" {
			e.Code = codeInProgress
		}
		return resp.StatusCode, e
	}
	if r.out != nil {
		if err := json.Unmarshal(raw, r.out); err != nil {
			return resp.StatusCode, fail(0, fmt.Errorf("answer %d is not what was expected: %w", resp.StatusCode, err))
		}
	}
	return resp.StatusCode, nil
}

// codeInProgress marks a 409 whose Idempotency-Key is held by a copy of the
// request still running: asked again with the same key, it is answered what
// the copy made.
const codeInProgress = "in_progress"

// keyed sends r with Idempotency-Key key, and while a copy of it holds the
// key (a double click's other request), asks again with the same key, until
// it gets that copy's answer or ctx ends.
func (c *Client) keyed(ctx context.Context, key string, r call) (int, error) {
	r.header = map[string]string{"Idempotency-Key": key}
	for {
		status, err := c.do(ctx, r)
		var e *Error
		if !errors.As(err, &e) || e.Code != codeInProgress {
			return status, err
		}
		select {
		case <-ctx.Done():
			return status, err
		case <-time.After(c.retryWait):
		}
	}
}
