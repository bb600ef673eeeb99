package order

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Stock errors.
var (
	// ErrOutOfStock: a product has fewer units available than the order
	// asks for. Nothing of the order was written.
	ErrOutOfStock = errors.New("not enough stock")
	// ErrStockContention: the optimistic stock variant lost its
	// compare-and-set on every attempt it was allowed; nothing was written,
	// and units may still be available.
	ErrStockContention = errors.New("stock changed on every attempt")
)

// Stock is a product's stock row: the units available to sell (units
// reserved by open orders are no longer in it) and the version every write
// increments.
type Stock struct {
	ProductID uint64
	Available int
	Version   uint64
}

// OutOfStock returns ErrOutOfStock for want units of a product.
func OutOfStock(productID uint64, want int) error {
	return fmt.Errorf("%w: product %d has fewer than %d available", ErrOutOfStock, productID, want)
}

// ReservationStatus is where one (order, product) reservation is: RESERVED
// when the order is placed, then CONFIRMED when it is paid or RELEASED (its
// units back in stock) when it is cancelled. CONFIRMED and RELEASED are
// final, so each happens at most once.
type ReservationStatus string

// Reservation statuses.
const (
	Reserved  ReservationStatus = "RESERVED"
	Confirmed ReservationStatus = "CONFIRMED"
	Released  ReservationStatus = "RELEASED"
)

// Reservation is the stock one order holds of one product.
type Reservation struct {
	OrderNo   string
	ProductID uint64
	Quantity  int
	Status    ReservationStatus
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ByProduct returns lines sorted by product id. Every transaction that
// locks the stock or reservation rows of several products locks them in
// this order, so two of them never wait for each other in a cycle.
func ByProduct(lines []Line) []Line {
	out := slices.Clone(lines)
	slices.SortFunc(out, func(a, b Line) int { return cmp.Compare(a.ProductID, b.ProductID) })
	return out
}
