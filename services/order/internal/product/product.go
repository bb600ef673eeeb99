// Package product is the domain of the order service's product catalog:
// products with logical deletion and the key that makes two of them the same
// product, the templates a batch copy creates products from, batch-copy jobs,
// their chunks and the rules that decide what a chunk creates and what it
// skips as a duplicate (incident 3), and the Store and Tx interfaces the use
// cases need. It does no I/O; services/order/PRODUCTS.md tells the story.
package product

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Limits of the stored columns; input beyond them is refused, not truncated.
const (
	MaxBrandLen = 64
	MaxNameLen  = 130
	MaxModelLen = 255
	// MaxTemplateIDs bounds one batch-copy request that lists template ids.
	MaxTemplateIDs = 20000
	// MaxRequestIDLen is the longest caller request id accepted.
	MaxRequestIDLen = 64
)

// Sentinel errors. The HTTP layer maps them to statuses in one place.
var (
	ErrNotFound = errors.New("not found")
	ErrInvalid  = errors.New("invalid input")
	// ErrJobExists: a batch copy with this request id was accepted before.
	ErrJobExists = errors.New("a batch copy with this request id exists")
	// ErrKeyTaken: another live product holds the key (name, model) of a
	// product being created. Nothing of the insert that met it is left
	// written.
	ErrKeyTaken = errors.New("product key taken")
	// ErrDeadlock: the database chose the transaction as a deadlock victim
	// and rolled all of it back; running it again is safe and will see the
	// transaction it collided with.
	ErrDeadlock = errors.New("transaction rolled back as a deadlock victim")
)

// Product is one catalog entry. A deleted product is invisible to every read.
type Product struct {
	ID        uint64
	Brand     string
	Name      string
	Model     string
	Price     int64 // cents
	CreatedAt time.Time
	// Available is how many units can still be ordered (product_stock; zero
	// when no stock was ever set). It is shown on reads; creating a product
	// ignores it, and SetStock changes it.
	Available int
}

// MaxStock bounds the units an operator can make available for one
// product.
const MaxStock = 1_000_000_000

// Stock is a product's stock as an operator set it.
type Stock struct {
	ProductID uint64
	Available int
}

// NewStock validates the units an operator makes available.
func NewStock(productID uint64, available int) (Stock, error) {
	if available < 0 || available > MaxStock {
		return Stock{}, invalid("available must be between 0 and %d", MaxStock)
	}
	return Stock{ProductID: productID, Available: available}, nil
}

// Key is what makes two live products the same product.
func (p Product) Key() Key { return Key{Name: p.Name, Model: p.Model} }

// Key is a product's identity for deduplication: its name and model.
type Key struct {
	Name  string
	Model string
}

func (k Key) String() string { return fmt.Sprintf("(%q, %q)", k.Name, k.Model) }

// NewProduct validates and normalises a product to create. Surrounding spaces
// are trimmed, because the database compares keys without them anyway.
func NewProduct(brand, name, model string, price int64) (Product, error) {
	p := Product{
		Brand: strings.TrimSpace(brand),
		Name:  strings.TrimSpace(name),
		Model: strings.TrimSpace(model),
		Price: price,
	}
	var errs []error
	errs = append(errs, checkText("brand", p.Brand, MaxBrandLen), checkText("name", p.Name, MaxNameLen), checkText("model", p.Model, MaxModelLen))
	if price < 0 {
		errs = append(errs, invalid("price must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return Product{}, err
	}
	return p, nil
}

func checkText(field, v string, max int) error {
	switch {
	case v == "":
		return invalid("%s is required", field)
	case len([]rune(v)) > max:
		return invalid("%s is longer than %d characters", field, max)
	}
	return nil
}

// invalid returns an ErrInvalid carrying a message for the client.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// DuplicateError says a live product with the same key already exists.
type DuplicateError struct {
	Key        Key
	ExistingID uint64
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("product %s already exists as product %d", e.Key, e.ExistingID)
}

// Template is default product data a batch copy creates products from.
type Template struct {
	ID    uint64
	Brand string
	Name  string
	Model string
	Price int64
}

// NewTemplate validates a template like a product.
func NewTemplate(brand, name, model string, price int64) (Template, error) {
	p, err := NewProduct(brand, name, model, price)
	if err != nil {
		return Template{}, err
	}
	return Template{Brand: p.Brand, Name: p.Name, Model: p.Model, Price: p.Price}, nil
}

// Invalidf returns an ErrInvalid carrying a message for the client.
func Invalidf(format string, args ...any) error { return invalid(format, args...) }
