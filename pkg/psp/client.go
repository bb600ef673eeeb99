package psp

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
)

// Errors of the platform's answers that a merchant acts on. Any other
// failure (a timeout, a 5xx, an undecodable answer) is transient: the
// outcome is unknown and the call may be repeated, because every call is
// keyed by the merchant's number.
var (
	// ErrUnknownCharge: the platform has no charge with this out_trade_no
	// (404 to a close or a query).
	ErrUnknownCharge = errors.New("psp: no such charge")
	// ErrChargeClosed: the charge was closed and cannot be paid (409 to a
	// charge).
	ErrChargeClosed = errors.New("psp: charge closed")
	// ErrRefused: the platform refused the request as it stands (any other
	// 4xx): repeating it changes nothing.
	ErrRefused = errors.New("psp: request refused")
)

// Client calls the platform's API: charge, close, query and refund.
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
// synchronously with its serial and notifies the outcome asynchronously. A
// closed out_trade_no is ErrChargeClosed.
func (c *Client) Charge(ctx context.Context, req ChargeRequest) (ChargeResponse, error) {
	var out ChargeResponse
	if err := c.call(ctx, http.MethodPost, "/charges", req, &out); err != nil {
		return ChargeResponse{}, fmt.Errorf("charge %s: %w", req.OutTradeNo, err)
	}
	return out, nil
}

// Close asks the platform to close the charge of outTradeNo so that it can no
// longer be paid. The answer is CloseClosed, or ClosePaid with the
// transaction when the customer paid first. A platform that never saw the
// charge answers ErrUnknownCharge, which means closed too: nothing was paid.
func (c *Client) Close(ctx context.Context, outTradeNo string) (CloseResponse, error) {
	var out CloseResponse
	if err := c.call(ctx, http.MethodPost, "/charges/"+url.PathEscape(outTradeNo)+"/close", nil, &out); err != nil {
		return CloseResponse{}, fmt.Errorf("close %s: %w", outTradeNo, err)
	}
	if out.Status != CloseClosed && out.Status != ClosePaid {
		return CloseResponse{}, fmt.Errorf("close %s: platform answered status %q", outTradeNo, out.Status)
	}
	return out, nil
}

// Query asks the platform what became of the charge of outTradeNo: the
// active query a merchant makes when notifications do not come.
// ErrUnknownCharge when the platform never saw it.
func (c *Client) Query(ctx context.Context, outTradeNo string) (Trade, error) {
	var out Trade
	if err := c.call(ctx, http.MethodGet, "/charges?out_trade_no="+url.QueryEscape(outTradeNo), nil, &out); err != nil {
		return Trade{}, fmt.Errorf("query %s: %w", outTradeNo, err)
	}
	return out, nil
}

// Refund asks the platform to give a payment back under req.RefundNo. The
// platform accepts it synchronously and notifies the outcome
// asynchronously; a repeat of the same RefundNo returns the same refund.
func (c *Client) Refund(ctx context.Context, req RefundRequest) (RefundResponse, error) {
	var out RefundResponse
	if err := c.call(ctx, http.MethodPost, "/refunds", req, &out); err != nil {
		return RefundResponse{}, fmt.Errorf("refund %s: %w", req.RefundNo, err)
	}
	return out, nil
}

// call sends in (nil for no body) and decodes a 2xx answer into out; a 4xx
// becomes one of the errors above.
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return ErrUnknownCharge
	case resp.StatusCode == http.StatusConflict && path == "/charges":
		return ErrChargeClosed
	case resp.StatusCode/100 == 4:
		return fmt.Errorf("%w: platform answered %d: %s", ErrRefused, resp.StatusCode, bytes.TrimSpace(raw))
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("platform answered %d: %s", resp.StatusCode, bytes.TrimSpace(raw))
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}
