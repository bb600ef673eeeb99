package psp_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/psp"
)

var secret = []byte("test-secret")

func signed(at time.Time, body []byte) http.Header {
	h := http.Header{}
	psp.SignHeaders(h, secret, at, body)
	return h
}

func TestSignatureBaseIsTimestampNonceBody(t *testing.T) {
	got := string(psp.SignatureBase("1700000000", "abc", []byte(`{"a":1}`)))
	if want := "1700000000\nabc\n{\"a\":1}"; got != want {
		t.Fatalf("base = %q, want %q", got, want)
	}
	// A vector computed independently (Python's hmac), so that a change of
	// the base or the encoding shows.
	if got, want := psp.Sign([]byte("k"), "1", "n", []byte("b")), "9456125ffd0a997b1c7ff1a6993b0a809406b01cdc0653cfeee1fe4a06e1241c"; got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

func TestVerify(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"out_trade_no":"P1","amount":100}`)
	window := 5 * time.Minute

	tests := []struct {
		name   string
		header func() http.Header
		body   []byte
		want   error
	}{
		{"valid", func() http.Header { return signed(now, body) }, body, nil},
		{"valid at the window's edge", func() http.Header { return signed(now.Add(-window), body) }, body, nil},
		{"tampered body", func() http.Header { return signed(now, body) }, []byte(`{"out_trade_no":"P1","amount":1}`), psp.ErrBadSignature},
		{"wrong secret", func() http.Header {
			h := http.Header{}
			psp.SignHeaders(h, []byte("other"), now, body)
			return h
		}, body, psp.ErrBadSignature},
		{"tampered timestamp", func() http.Header {
			h := signed(now, body)
			h.Set(psp.HeaderTimestamp, strconv.FormatInt(now.Unix()+1, 10))
			return h
		}, body, psp.ErrBadSignature},
		{"tampered nonce", func() http.Header {
			h := signed(now, body)
			h.Set(psp.HeaderNonce, "00")
			return h
		}, body, psp.ErrBadSignature},
		{"missing signature", func() http.Header {
			h := signed(now, body)
			h.Del(psp.HeaderSignature)
			return h
		}, body, psp.ErrBadSignature},
		{"signature not hex", func() http.Header {
			h := signed(now, body)
			h.Set(psp.HeaderSignature, "zz")
			return h
		}, body, psp.ErrBadSignature},
		{"stale", func() http.Header { return signed(now.Add(-window-time.Second), body) }, body, psp.ErrStale},
		{"from the future", func() http.Header { return signed(now.Add(window+time.Second), body) }, body, psp.ErrStale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := psp.Verify(tt.header(), tt.body, secret, now, window)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestEverySigningHasAFreshNonce(t *testing.T) {
	at := time.Now()
	a, b := signed(at, []byte("x")), signed(at, []byte("x"))
	if a.Get(psp.HeaderNonce) == b.Get(psp.HeaderNonce) || a.Get(psp.HeaderSignature) == b.Get(psp.HeaderSignature) {
		t.Fatal("two signings of the same body at the same second share a nonce or a signature")
	}
}

// TestVerifyRefund: a refund notification is verified like a paid one
// (signature first, then the window) and then decoded and checked; a
// correctly signed body the merchant cannot use is ErrMalformed, a paid
// notification sent to the refund address among them.
func TestVerifyRefund(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	window := 5 * time.Minute
	valid := psp.RefundNotification{Channel: psp.Channel, RefundSerial: "RF1", RefundNo: "RP1", OutTradeNo: "P1",
		Amount: 100, RefundStatus: psp.TradeSuccess, RefundedAt: now.UTC()}
	encode := func(n any) []byte {
		b, err := json.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	with := func(change func(*psp.RefundNotification)) []byte {
		n := valid
		change(&n)
		return encode(n)
	}
	body := encode(valid)
	got, err := psp.VerifyRefund(signed(now, body), body, secret, now, window)
	if err != nil || got != valid {
		t.Fatalf("valid: %+v %v", got, err)
	}
	for _, tc := range []struct {
		name   string
		body   []byte
		header http.Header
		want   error
	}{
		{"tampered body", body, signed(now, with(func(n *psp.RefundNotification) { n.Amount = 1 })), psp.ErrBadSignature},
		{"stale", body, signed(now.Add(-window-time.Second), body), psp.ErrStale},
		{"not JSON", []byte("{"), signed(now, []byte("{")), psp.ErrMalformed},
		{"no refund_no", with(func(n *psp.RefundNotification) { n.RefundNo = "" }), nil, psp.ErrMalformed},
		{"no refund_serial", with(func(n *psp.RefundNotification) { n.RefundSerial = "" }), nil, psp.ErrMalformed},
		{"no out_trade_no", with(func(n *psp.RefundNotification) { n.OutTradeNo = "" }), nil, psp.ErrMalformed},
		{"no amount", with(func(n *psp.RefundNotification) { n.Amount = 0 }), nil, psp.ErrMalformed},
		{"not a success", with(func(n *psp.RefundNotification) { n.RefundStatus = "FAILED" }), nil, psp.ErrMalformed},
		{"unknown channel", with(func(n *psp.RefundNotification) { n.Channel = "x" }), nil, psp.ErrMalformed},
		{"no time", with(func(n *psp.RefundNotification) { n.RefundedAt = time.Time{} }), nil, psp.ErrMalformed},
		{"a paid notification", encode(psp.Notification{Channel: psp.Channel, PlatformSerial: "T1", OutTradeNo: "P1", Amount: 100,
			TradeStatus: psp.TradeSuccess, PaidAt: now}), nil, psp.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			if h == nil {
				h = signed(now, tc.body)
			}
			if _, err := psp.VerifyRefund(h, tc.body, secret, now, window); !errors.Is(err, tc.want) {
				t.Fatalf("VerifyRefund = %v, want %v", err, tc.want)
			}
		})
	}
}
