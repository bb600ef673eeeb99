package config

import (
	"strings"
	"testing"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
)

func TestProductsDefaultsAndValidation(t *testing.T) {
	var c Config
	if err := pkgconfig.LoadFrom(&c, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	p := c.Products
	if p.CopyMode != "fixed" || p.Workers != 16 || p.ChunkSize != 100 || p.Stream != "PRODUCT" || p.CopySubject() != "product.batch_copy" {
		t.Fatalf("defaults: %+v subject %q", p, p.CopySubject())
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	bad := p
	bad.CopyMode, bad.Workers, bad.ChunkSize, bad.Stream = "fast", 0, 5000, "A.B"
	err := bad.Validate()
	for _, v := range []string{"PRODUCT_COPY_MODE", "PRODUCT_COPY_WORKERS", "PRODUCT_COPY_CHUNK_SIZE", "PRODUCT_STREAM"} {
		if err == nil || !strings.Contains(err.Error(), v) {
			t.Errorf("error %v does not name %s", err, v)
		}
	}
}
