package psp

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Verification failures. Both mean "not from the platform, or not now": the
// merchant answers 401 and changes nothing.
var (
	ErrBadSignature = errors.New("psp: missing or invalid signature")
	ErrStale        = errors.New("psp: timestamp outside the accepted window")
)

// SignatureBase is the exact byte string that is signed: the timestamp, the
// nonce and the raw body, separated by newlines. Signing the raw body (not a
// re-encoding of it) keeps both sides independent of JSON formatting.
func SignatureBase(timestamp, nonce string, body []byte) []byte {
	b := make([]byte, 0, len(timestamp)+len(nonce)+len(body)+2)
	b = append(b, timestamp...)
	b = append(b, '\n')
	b = append(b, nonce...)
	b = append(b, '\n')
	return append(b, body...)
}

// Sign returns the hex HMAC-SHA256 of the signature base under secret.
func Sign(secret []byte, timestamp, nonce string, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(SignatureBase(timestamp, nonce, body))
	return hex.EncodeToString(mac.Sum(nil))
}

// NewNonce returns 16 random bytes in hex.
func NewNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// SignHeaders sets the three signature headers on h for body, signed at at.
func SignHeaders(h http.Header, secret []byte, at time.Time, body []byte) {
	ts := strconv.FormatInt(at.Unix(), 10)
	nonce := NewNonce()
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderNonce, nonce)
	h.Set(HeaderSignature, Sign(secret, ts, nonce, body))
}

// Verify checks the signature headers in h against body. The signature is
// compared in constant time (hmac.Equal), so its bytes cannot be guessed one by
// one from response times; the timestamp must lie within window of now in
// either direction, which bounds how long a captured notification can be
// replayed. Replays inside the window are harmless by design: the merchant's
// processing is idempotent.
func Verify(h http.Header, body []byte, secret []byte, now time.Time, window time.Duration) error {
	ts, nonce, sig := h.Get(HeaderTimestamp), h.Get(HeaderNonce), h.Get(HeaderSignature)
	if ts == "" || nonce == "" || sig == "" {
		return ErrBadSignature
	}
	got, err := hex.DecodeString(sig)
	if err != nil {
		return ErrBadSignature
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(SignatureBase(ts, nonce, body))
	if !hmac.Equal(got, mac.Sum(nil)) {
		return ErrBadSignature
	}
	// The timestamp is checked only after the signature, so that an attacker
	// cannot learn anything from the difference between the two answers.
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrBadSignature
	}
	skew := now.Sub(time.Unix(sec, 0))
	if skew < -window || skew > window {
		return ErrStale
	}
	return nil
}

// ErrMalformed is a correctly signed notification whose body the merchant
// cannot use: the merchant answers 400 and changes nothing.
var ErrMalformed = errors.New("psp: malformed notification")

// VerifyRefund verifies a refund notification as Verify does (signature in
// constant time first, then the timestamp window) and decodes it. Errors are
// ErrBadSignature or ErrStale, answered 401, or ErrMalformed (wrapped with
// what is wrong), answered 400.
func VerifyRefund(h http.Header, body []byte, secret []byte, now time.Time, window time.Duration) (RefundNotification, error) {
	if err := Verify(h, body, secret, now, window); err != nil {
		return RefundNotification{}, err
	}
	return ParseRefundNotification(body)
}

// ParseRefundNotification decodes a verified refund notification body and
// checks that it names a refund the merchant can look up: a known channel,
// both numbers, a positive amount, a success status and a time. A paid
// notification sent to the refund address fails here, on its missing
// refund_no.
func ParseRefundNotification(body []byte) (RefundNotification, error) {
	var n RefundNotification
	if err := json.Unmarshal(body, &n); err != nil {
		return RefundNotification{}, fmt.Errorf("%w: not valid JSON", ErrMalformed)
	}
	var problem string
	switch {
	case n.Channel != Channel:
		problem = "unknown channel"
	case n.RefundNo == "" || len(n.RefundNo) > 64:
		problem = "refund_no is required (at most 64 characters)"
	case n.RefundSerial == "" || len(n.RefundSerial) > 64:
		problem = "refund_serial is required (at most 64 characters)"
	case n.OutTradeNo == "" || len(n.OutTradeNo) > 64:
		problem = "out_trade_no is required (at most 64 characters)"
	case n.Amount <= 0:
		problem = "amount must be positive"
	case n.RefundStatus != TradeSuccess:
		problem = "refund_status must be SUCCESS"
	case n.RefundedAt.IsZero():
		problem = "refunded_at is required"
	default:
		return n, nil
	}
	return RefundNotification{}, fmt.Errorf("%w: %s", ErrMalformed, problem)
}
