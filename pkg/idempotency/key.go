package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
)

// Key length bounds, from the IETF httpapi draft's guidance and Stripe's limit.
const (
	MinKeyLen = 8
	MaxKeyLen = 255
)

var (
	errKeyLength  = errors.New("Idempotency-Key must be 8 to 255 characters long")
	errKeyCharset = errors.New("Idempotency-Key must be printable ASCII")
)

// ParseKey validates the Idempotency-Key header value. The draft defines the
// field as a structured-field string, so a quoted value ("abc…") is accepted
// and unquoted; a bare token is accepted as well.
func ParseKey(raw string) (string, error) {
	key := raw
	if len(key) >= 2 && key[0] == '"' && key[len(key)-1] == '"' {
		key = key[1 : len(key)-1]
	}
	if len(key) < MinKeyLen || len(key) > MaxKeyLen {
		return "", errKeyLength
	}
	if !printableASCII(key) {
		return "", errKeyCharset
	}
	return key, nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// Fingerprint identifies a request's content: SHA-256 over the method, the
// route and the canonical form of the body, hex encoded. Two JSON bodies that
// differ only in key order or whitespace have the same fingerprint.
func Fingerprint(method, route string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write([]byte(route))
	h.Write([]byte{0})
	h.Write(CanonicalBody(body))
	return hex.EncodeToString(h.Sum(nil))
}

// CanonicalBody returns a JSON body re-encoded with sorted object keys, no
// insignificant whitespace and numbers kept as written; any other body is
// returned unchanged, compared byte for byte.
func CanonicalBody(body []byte) []byte {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return body
	}
	out, err := json.Marshal(v) // map keys come out sorted
	if err != nil {
		return body
	}
	return out
}

// scopeOf joins the caller, method and route: the namespace one key lives in.
func scopeOf(caller, method, route string) string {
	return strings.Join([]string{caller, method, route}, " ")
}
