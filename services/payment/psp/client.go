package psp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Client calls the platform's charge API.
type Client struct {
	baseURL string
	http    *http.Client
}

// NewClient returns a client for the platform at baseURL
// (http://127.0.0.1:8090 for the simulator).
func NewClient(baseURL string, hc *http.Client) *Client {
	return &Client{baseURL: strings.TrimRight(baseURL, "/"), http: hc}
}

// Charge asks the platform to collect a payment. The platform answers
// synchronously with its serial and notifies the outcome asynchronously.
func (c *Client) Charge(ctx context.Context, req ChargeRequest) (ChargeResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return ChargeResponse{}, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+"/charges", bytes.NewReader(body))
	if err != nil {
		return ChargeResponse{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(hreq)
	if err != nil {
		return ChargeResponse{}, fmt.Errorf("charge %s: %w", req.OutTradeNo, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode/100 != 2 {
		return ChargeResponse{}, fmt.Errorf("charge %s: platform answered %d: %s", req.OutTradeNo, resp.StatusCode, bytes.TrimSpace(raw))
	}
	var out ChargeResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		return ChargeResponse{}, fmt.Errorf("charge %s: decode answer: %w", req.OutTradeNo, err)
	}
	return out, nil
}
