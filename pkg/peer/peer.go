// Package peer is the request code of one service's calls to another's
// internal routes: the base URL, the internal token as a bearer token,
// JSON in and out, and the answer read whole up to MaxAnswer. What an
// answer means is the calling client's (a service's internal/<peer>client).
package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/oncemall/oncemall/pkg/problem"
)

// MaxAnswer is the most of an answer's body a call reads.
const MaxAnswer = 1 << 20

// Client calls one service at a base URL.
type Client struct {
	baseURL string
	token   string
	http    *http.Client
}

// New returns a client of the service at baseURL that presents token
// (INTERNAL_TOKEN; nothing when empty) as its bearer token; hc carries the
// timeout and the tracing (platform.Wiring.HTTPClient).
func New(baseURL, token string, hc *http.Client) *Client {
	return &Client{baseURL: strings.TrimRight(baseURL, "/"), token: token, http: hc}
}

// Answer is the peer's response to one call.
type Answer struct {
	Status int
	Header http.Header
	// Body is at most MaxAnswer bytes of the body.
	Body []byte
}

// Get sends GET path (escaped by the caller). An error means there is no
// answer to read: the request could not be made or sent, or its answer not
// read.
func (c *Client) Get(ctx context.Context, path string) (Answer, error) {
	return c.do(ctx, http.MethodGet, path, nil)
}

// Post sends in as the JSON body of POST path (escaped by the caller), with
// Get's errors.
func (c *Client) Post(ctx context.Context, path string, in any) (Answer, error) {
	return c.send(ctx, http.MethodPost, path, in)
}

// Put is Post's PUT.
func (c *Client) Put(ctx context.Context, path string, in any) (Answer, error) {
	return c.send(ctx, http.MethodPut, path, in)
}

func (c *Client) send(ctx context.Context, method, path string, in any) (Answer, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return Answer{}, err
	}
	return c.do(ctx, method, path, body)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte) (Answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, bytes.NewReader(body))
	if err != nil {
		return Answer{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer))
	if err != nil {
		return Answer{}, fmt.Errorf("read the answer: %w", err)
	}
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: raw}, nil
}

// Decode unmarshals the answer's JSON body into out.
func (a Answer) Decode(out any) error {
	if err := json.Unmarshal(a.Body, out); err != nil {
		return fmt.Errorf("decode the answer: %w", err)
	}
	return nil
}

// IsProblem reports whether the answer is a problem document: the peer's
// own refusal, where a 404 of a proxy or of a wrong base URL is not.
func (a Answer) IsProblem() bool {
	mt, _, err := mime.ParseMediaType(a.Header.Get("Content-Type"))
	return err == nil && mt == problem.ContentType
}

// Excerpt is the start of the body, short enough for an error message.
func (a Answer) Excerpt() string {
	const max = 256
	if len(a.Body) > max {
		return string(a.Body[:max]) + "…"
	}
	return string(a.Body)
}
