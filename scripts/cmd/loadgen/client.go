package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// client sends the customers' and the operator's requests, spreading them
// over the replicas, and retries what a real client retries.
type client struct {
	http     *http.Client
	targets  Targets
	retryFor time.Duration
	stats    *stats
	next     atomic.Uint64 // round robin over the replicas
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

// request is one logical request: sent, and sent again with the same
// headers (so the same Idempotency-Key) to another replica after a
// timeout, a refused connection, a 5xx or a 409 "still in progress".
type request struct {
	step    string // the stats' name for it: "POST /orders", …
	method  string
	urls    []string
	path    string
	headers map[string]string
	body    any
	// retry says whether the client retries at all (reads and the
	// operator's setup calls are retried too; every write carries a key).
	retry bool
	// timeout replaces the client's bound for this request (a reconciler
	// reads whole tables).
	timeout time.Duration
}

// errGaveUp is returned when every try failed for longer than retryFor.
var errGaveUp = errors.New("gave up retrying")

// do sends r until it gets an answer that is not worth retrying, and
// returns it. Every try is timed and counted; every failed try is
// counted by kind.
func (c *client) do(ctx context.Context, r request) (answer, error) {
	var raw []byte
	if r.body != nil {
		var err error
		if raw, err = json.Marshal(r.body); err != nil {
			return answer{}, err
		}
	}
	deadline := time.Now().Add(c.retryFor)
	backoff := 100 * time.Millisecond
	var last error
	for try := 1; ; try++ {
		if try > 1 {
			c.stats.retry(r.step)
		}
		a, err := c.once(ctx, r, raw)
		kind := failureKind(a, err)
		if kind == "" {
			return a, nil
		}
		c.stats.fail(r.step, kind)
		last = fmt.Errorf("%s: %s", r.step, kind)
		if err == nil {
			last = fmt.Errorf("%s: %d %.200s", r.step, a.Status, a.Body)
		}
		if !r.retry || time.Now().After(deadline) || ctx.Err() != nil {
			if !r.retry && err == nil {
				return a, nil
			}
			return a, fmt.Errorf("%w: %w", errGaveUp, last)
		}
		wait := backoff
		if s := a.Header.Get("Retry-After"); s != "" {
			if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 10 {
				wait = time.Duration(n) * time.Second
			}
		}
		select {
		case <-ctx.Done():
			return a, fmt.Errorf("%w: %w", errGaveUp, last)
		case <-time.After(wait):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
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
	case a.Status >= 500:
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

func (c *client) once(ctx context.Context, r request, raw []byte) (answer, error) {
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
	began := time.Now()
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
	c.stats.observe(r.step, time.Since(began))
	return answer{Status: resp.StatusCode, Body: b, Header: resp.Header}, nil
}

// admin returns the operator's headers.
func (c *client) admin() map[string]string {
	return map[string]string{"Authorization": "Bearer " + c.targets.AdminToken}
}
