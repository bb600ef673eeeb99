package config

import (
	"errors"
	"fmt"
	"strings"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/services/order/internal/catalog"
)

// Products configures the product catalog and its batch copy (incident 3).
type Products struct {
	CopyMode        string `env:"PRODUCT_COPY_MODE" default:"fixed" usage:"how products are created: fixed (dedup table, the fix), orderly (one copy worker, check-then-insert) or broken (concurrent check-then-insert, reproduces incident 3)"`
	Workers         int    `env:"PRODUCT_COPY_WORKERS" default:"16" usage:"concurrent batch-copy workers (orderly always uses 1)"`
	ChunkSize       int    `env:"PRODUCT_COPY_CHUNK_SIZE" default:"100" usage:"products per batch-copy message (1..1000)"`
	MaxAllOrNothing int    `env:"PRODUCT_COPY_MAX_ALL_OR_NOTHING" default:"5000" usage:"largest all-or-nothing batch copy, created in one transaction (1..5000)"`
	Stream          string `env:"PRODUCT_STREAM" default:"PRODUCT" usage:"JetStream stream carrying the product subjects"`
	SubjectPrefix   string `env:"PRODUCT_SUBJECT_PREFIX" default:"product" usage:"first subject token of the product stream (product.batch_copy)"`
	Consumer        string `env:"PRODUCT_COPY_CONSUMER" default:"order-product-copy" usage:"durable consumer name of the batch-copy workers"`
}

// Mode returns the parsed copy mode (valid after Validate).
func (p Products) Mode() catalog.Mode {
	m, _ := catalog.ParseMode(p.CopyMode)
	return m
}

// Validate reports every unusable product setting.
func (p Products) Validate() error {
	var errs []error
	errs = append(errs,
		pkgconfig.CheckOneOf("PRODUCT_COPY_MODE", p.CopyMode, catalog.Modes...),
		pkgconfig.CheckPositive("PRODUCT_COPY_WORKERS", p.Workers),
		pkgconfig.CheckPositive("PRODUCT_COPY_CHUNK_SIZE", p.ChunkSize),
		pkgconfig.CheckPositive("PRODUCT_COPY_MAX_ALL_OR_NOTHING", p.MaxAllOrNothing),
	)
	if p.ChunkSize > 1000 {
		errs = append(errs, fmt.Errorf("config: PRODUCT_COPY_CHUNK_SIZE=%d: at most 1000", p.ChunkSize))
	}
	if p.MaxAllOrNothing > 5000 {
		errs = append(errs, fmt.Errorf("config: PRODUCT_COPY_MAX_ALL_OR_NOTHING=%d: at most 5000", p.MaxAllOrNothing))
	}
	if p.Stream == "" || strings.ContainsAny(p.Stream, ".*> ") {
		errs = append(errs, fmt.Errorf("config: PRODUCT_STREAM=%q: a stream name without '.', '*', '>' or spaces", p.Stream))
	}
	if p.SubjectPrefix == "" || strings.ContainsAny(p.SubjectPrefix, ".*> ") {
		errs = append(errs, fmt.Errorf("config: PRODUCT_SUBJECT_PREFIX=%q: one subject token", p.SubjectPrefix))
	}
	if p.Consumer == "" || strings.ContainsAny(p.Consumer, ".*> ") {
		errs = append(errs, fmt.Errorf("config: PRODUCT_COPY_CONSUMER=%q: a consumer name without '.', '*', '>' or spaces", p.Consumer))
	}
	return errors.Join(errs...)
}

// CopySubject is the subject batch-copy chunks travel on.
func (p Products) CopySubject() string {
	return p.SubjectPrefix + strings.TrimPrefix(events.ProductBatchCopy, "product")
}
