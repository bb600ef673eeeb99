package app

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"
)

// OrderNumbers is incident 7's choice on the order side: the number an order
// is placed under, which is also the name its coupon lock is held by. The
// service's is KeyedOrderNumbers (here); the incident's, side by side with
// it, is services/order/lab's order_no_broken.go, plugged in only in the lab.
type OrderNumbers interface {
	// OrderNo numbers the order userID places at now with Idempotency-Key
	// key (empty when the request carried none).
	OrderNo(userID uint64, key string, now time.Time) (string, error)
}

// KeyedOrderNumbers derives the number of an order placed with an
// Idempotency-Key from the user and the key, so every try of one request
// is placed under one number:
//
//   - a retry after the order service died between the coupon lock and the
//     commit finds the coupon locked by its own number, and the lock is
//     re-entrant for it: the retry places the order;
//   - two concurrent copies of one request (the entry layer down) lock the
//     coupon under one number, so neither is refused because of the other,
//     and their orders meet on the order number's key: one commits, the
//     other rolls back and is answered with the first's response.
//
// Without a key the number is new for every request.
type KeyedOrderNumbers struct{}

// OrderNo implements OrderNumbers: "O" + 24 hex digits of SHA-256 over the
// user and the key (96 bits: no two keys of a shop meet), or NewOrderNo.
func (KeyedOrderNumbers) OrderNo(userID uint64, key string, now time.Time) (string, error) {
	if key == "" {
		return NewOrderNo(now)
	}
	h := sha256.New()
	_ = binary.Write(h, binary.BigEndian, userID)
	h.Write([]byte(key))
	return "O" + hex.EncodeToString(h.Sum(nil)[:12]), nil
}

// NewOrderNo returns a unique, roughly time-ordered order number:
// "O" + UTC time to the millisecond + 8 random hex digits.
func NewOrderNo(now time.Time) (string, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("order number: %w", err)
	}
	return fmt.Sprintf("O%s%03d%s", now.Format("20060102150405"), now.Nanosecond()/1e6, hex.EncodeToString(b)), nil
}

// newAttempt names one try of an order at the coupon service.
func newAttempt() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("attempt: %w", err)
	}
	return hex.EncodeToString(b), nil
}
