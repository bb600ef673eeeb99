package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// client sends the customers' and the operator's requests, spreading them
// over the replicas, and retries what a real client retries.
type client struct {
	http     *http.Client
	targets  Targets
	retryFor time.Duration
	// atOnce makes the customers the bad client: every retry is sent at
	// once, whatever Retry-After says, with no budget (still within
	// retryFor).
	atOnce bool
	budget *retryBudget // the customers' retries; nil: unbounded
	stats  *stats
	next   atomic.Uint64 // round robin over the replicas
}

func newClient(t Targets, timeout, retryFor time.Duration, st *stats) *client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConns:        2000,
		MaxIdleConnsPerHost: 500,
		IdleConnTimeout:     30 * time.Second,
	}
	return &client{http: &http.Client{Transport: tr, Timeout: timeout}, targets: t, retryFor: retryFor, stats: st}
}

// pick returns one replica's base URL, in turn.
func (c *client) pick(urls []string) string {
	return urls[c.next.Add(1)%uint64(len(urls))]
}

// answer is one HTTP answer.
type answer struct {
	Status int
	Body   []byte
	Header http.Header
}

// problemCode returns the "code" (or "reason") of a problem document.
func (a answer) problemCode() string {
	var p struct {
		Code   string `json:"code"`
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(a.Body, &p)
	if p.Code != "" {
		return p.Code
	}
	return p.Reason
}

// retryPolicy is how a request is retried.
type retryPolicy int

const (
	// retryNever keeps the first answer, whatever it is.
	retryNever retryPolicy = iota
	// retryOperator retries until retryFor: the setup's and the checks'
	// calls, which must get through and are not part of the load.
	retryOperator
	// retryCustomer retries as a customer's client does: after the
	// server's Retry-After (with jitter) or a jittered backoff, within the
	// retry budget; with atOnce, at once.
	retryCustomer
)

// request is one logical request: sent, and sent again with the same
// headers (so the same Idempotency-Key) to another replica after a
// timeout, a refused connection, a 5xx, a 429 or a 409 "still in
// progress".
type request struct {
	step    string // the stats' name for it: "POST /orders", …
	method  string
	urls    []string
	path    string
	headers map[string]string
	body    any
	retry   retryPolicy
	// timeout replaces the client's bound for this request (a reconciler
	// reads whole tables).
	timeout time.Duration
}

var (
	// errGaveUp is returned when every try failed for longer than retryFor.
	errGaveUp = errors.New("gave up retrying")
	// errBudget is returned when a customer's retry was refused by the
	// retry budget.
	errBudget = errors.New("retry budget spent")
)

// do sends r until it gets an answer that is not worth retrying, and
// returns it. Every try is timed and counted by what it got.
func (c *client) do(ctx context.Context, r request) (answer, error) {
	var raw []byte
	if r.body != nil {
		var err error
		if raw, err = json.Marshal(r.body); err != nil {
			return answer{}, err
		}
	}
	customer := r.retry == retryCustomer
	if customer && c.budget != nil && !c.atOnce {
		c.budget.firstTry()
	}
	deadline := time.Now().Add(c.retryFor)
	backoff := 100 * time.Millisecond
	for try := 1; ; try++ {
		if try > 1 {
			c.stats.retry(r.step)
		}
		a, err := c.once(ctx, r, raw, customer)
		kind := failureKind(a, err)
		if kind == "" {
			return a, nil
		}
		last := fmt.Errorf("%s: %s", r.step, kind)
		if err == nil {
			last = fmt.Errorf("%s: %d %.200s", r.step, a.Status, a.Body)
		}
		if r.retry == retryNever {
			if err == nil {
				return a, nil
			}
			return a, fmt.Errorf("%w: %w", errGaveUp, last)
		}
		wait := c.wait(a, backoff, customer)
		if time.Now().Add(wait).After(deadline) || ctx.Err() != nil {
			return a, fmt.Errorf("%w: %w", errGaveUp, last)
		}
		if customer && c.budget != nil && !c.atOnce && !c.budget.retry() {
			return a, fmt.Errorf("%w: %w", errBudget, last)
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
				return a, fmt.Errorf("%w: %w", errGaveUp, last)
			case <-time.After(wait):
			}
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// wait is how long to wait before the next try: nothing for the bad
// client; the server's Retry-After stretched by up to half again at random
// (clients told the same second do not all come back in it); else the
// backoff, half of it fixed and half at random.
func (c *client) wait(a answer, backoff time.Duration, customer bool) time.Duration {
	if customer && c.atOnce {
		return 0
	}
	if ra, ok := retryAfter(a.Header, time.Now()); ok {
		return ra + time.Duration(rand.Float64()*0.5*float64(ra))
	}
	return backoff/2 + time.Duration(rand.Float64()*float64(backoff/2))
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP date
// (RFC 9110 §10.2.3), capped at a minute.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0, false
		}
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = max(0, t.Sub(now))
	} else {
		return 0, false
	}
	return min(d, time.Minute), true
}

// failureKind names what a try's outcome was, when it is one a client
// retries: "" for an answer to keep.
func failureKind(a answer, err error) string {
	var ne net.Error
	switch {
	case err == nil:
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	default:
		return "connection"
	}
	switch {
	case a.Status >= 500 || a.Status == http.StatusTooManyRequests:
		return strconv.Itoa(a.Status)
	case a.Status == http.StatusConflict && a.Header.Get("Retry-After") != "":
		// The Idempotency-Key's first request is still running (or its
		// holder died and the key's lock has not run out yet).
		return "409 in progress"
	case a.Status == http.StatusConflict && a.problemCode() == "price_changed":
		return "409 price_changed"
	}
	return ""
}

// classify sorts a try's outcome for the stats: a refusal is a 503 or a
// 429 (the server declined the work: shed, or a dependency down), a
// failure is no answer at all.
func classify(a answer, err error) tryClass {
	switch {
	case err != nil:
		return tryFailed
	case a.Status == http.StatusServiceUnavailable || a.Status == http.StatusTooManyRequests:
		return tryRefused
	case failureKind(a, nil) != "":
		return tryRetried
	}
	return tryAnswered
}

// once sends one try and records it.
func (c *client) once(ctx context.Context, r request, raw []byte, customer bool) (a answer, err error) {
	var body io.Reader
	if raw != nil {
		body = bytes.NewReader(raw)
	}
	if r.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.pick(r.urls)+r.path, body)
	if err != nil {
		return answer{}, err
	}
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	sent := time.Now()
	defer func() {
		c.stats.observe(r.step, sent, time.Since(sent), classify(a, err), a.Status, customer, failureKind(a, err))
	}()
	hc := c.http
	if r.timeout > 0 {
		hc = &http.Client{Transport: c.http.Transport, Timeout: r.timeout}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return answer{}, err
	}
	return answer{Status: resp.StatusCode, Body: b, Header: resp.Header}, nil
}

// admin returns the operator's headers.
func (c *client) admin() map[string]string {
	return map[string]string{"Authorization": "Bearer " + c.targets.AdminToken}
}
