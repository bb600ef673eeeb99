package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/config"
)

// TestDefaultsAreTheFixes: with nothing set, both incidents run their fix,
// the batch copy its documented sizes, and the use cases get a valid
// configuration.
func TestDefaultsAreTheFixes(t *testing.T) {
	var c config.Config
	testenv.Must(t, pkgconfig.LoadFrom(&c, func(string) (string, bool) { return "", false }))
	if c.Modes.OrderIdempotency != variant.Fixed || c.Modes.ProductCopy != variant.Fixed || c.Modes.Stock != variant.Fixed || c.Modes.Close != variant.Fixed {
		t.Fatalf("modes %+v, want fixed", c.Modes)
	}
	if p := c.Products; p.Workers != 16 || p.ChunkSize != 100 || p.MaxAllOrNothing != 5000 {
		t.Fatalf("product defaults %+v", p)
	}
	if err := c.Modes.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := c.Products.Validate(); err != nil {
		t.Fatal(err)
	}
	if o := c.Orders; o.PayTimeout != 15*time.Minute || o.CloseBatch != 100 || o.CloseSchedule == "" || o.ReconcileSchedule == "" {
		t.Fatalf("order defaults %+v", o)
	}
	if err := errors.Join(c.Orders.Validate(), c.Peers.Validate()); err != nil {
		t.Fatal(err)
	}
	if err := c.App().Validate(); err != nil {
		t.Fatalf("the use cases refuse the defaults: %v", err)
	}
}

// TestModesAndProductsNameTheirVariable: each unusable value is refused
// with its variable named.
func TestModesAndProductsNameTheirVariable(t *testing.T) {
	bad := config.Modes{OrderIdempotency: config.Orderly, ProductCopy: "fast", Stock: config.Orderly, Close: config.Optimistic, Numbering: config.Orderly}
	err := bad.Validate()
	for _, v := range []string{"ORDER_IDEMPOTENCY_MODE", "PRODUCT_COPY_MODE", "ORDER_STOCK_MODE", "ORDER_CLOSE_MODE", "ORDER_NUMBERING_MODE"} {
		if err == nil || !strings.Contains(err.Error(), v) {
			t.Errorf("modes error %v does not name %s", err, v)
		}
	}
	err = config.Products{Workers: 0, ChunkSize: 5000, MaxAllOrNothing: 5001}.Validate()
	for _, v := range []string{"PRODUCT_COPY_WORKERS", "PRODUCT_COPY_CHUNK_SIZE", "PRODUCT_COPY_MAX_ALL_OR_NOTHING"} {
		if err == nil || !strings.Contains(err.Error(), v) {
			t.Errorf("products error %v does not name %s", err, v)
		}
	}
}
