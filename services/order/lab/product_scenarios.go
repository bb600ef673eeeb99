// Package lab holds the order service's incident scenarios, run by its tests
// and by `make lab` (see pkg/lab). Incident 3, batch product duplication, is
// in the product_*.go files: the catalog is wired as in production on a
// throwaway database and stream, an upstream simulator sends duplicate
// batch-copy requests, and the scenario counts duplicate live products.
// Incident 4 (double submit) is in idempotency_scenarios.go and incident 5
// (overselling) in stock_scenarios.go, both on the order API rig of
// order_api.go. Incident 6 (paid after close) is in close_scenarios.go, the
// order API beside the payment service and the platform simulator; it is
// listed by CloseScenarios, not Scenarios.
package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/config"
	"github.com/oncemall/oncemall/services/order/internal/product"
)

// Scenarios lists the order service's incident scenarios: 3 (batch product
// duplication), 4 (double submit) and 5 (overselling).
func Scenarios() []lab.Scenario {
	return append(append(ProductScenarios(), IdempotencyScenarios()...), StockScenarios()...)
}

// Incident 3's variants.
const (
	// VariantFixedAllOrNothing is the fix with all-or-nothing batches; the
	// plain lab.Fixed variant skips duplicates.
	VariantFixedAllOrNothing = "fixed-all-or-nothing"
)

// Shape of the duplicate-request scenario: the upstream job's batch of
// records, each copying one brand's templates, every record duplicated.
const (
	scenarioBrands            = 10
	scenarioTemplatesPerBrand = 50
	scenarioChunkSize         = 25
	scenarioWorkers           = 16
	scenarioTimeout           = 90 * time.Second
)

// ProductScenarios lists incident 3: duplicate batch-copy requests against
// the broken, orderly and fixed (both batch modes) catalog.
func ProductScenarios() []lab.Scenario {
	return []lab.Scenario{
		{Incident: 3, Variant: lab.Broken, WantHolds: false, Run: duplicateBatchScenario(lab.Broken, "p3b", variant.Broken, product.SkipDuplicates)},
		{Incident: 3, Variant: lab.Orderly, WantHolds: true, Run: duplicateBatchScenario(lab.Orderly, "p3o", config.Orderly, product.SkipDuplicates)},
		{Incident: 3, Variant: lab.Fixed, WantHolds: true, Run: duplicateBatchScenario(lab.Fixed, "p3f", variant.Fixed, product.SkipDuplicates)},
		{Incident: 3, Variant: VariantFixedAllOrNothing, WantHolds: true, Run: duplicateBatchScenario(VariantFixedAllOrNothing, "p3fa", variant.Fixed, product.FailOnDuplicate)},
	}
}

// duplicateBatchScenario runs the story on a rig named by suffix (short:
// database names are limited to 64 characters): the upstream job sends its batch of
// copy requests in a tight loop, each one twice (its duplicate records), and
// the catalog's workers copy them concurrently (one worker when orderly).
func duplicateBatchScenario(variant, suffix string, mode variant.Mode, onDup product.OnDuplicate) func(context.Context, lab.Env) (lab.Result, error) {
	return func(ctx context.Context, env lab.Env) (lab.Result, error) {
		workers := config.Modes{ProductCopy: mode}.CopyWorkers(scenarioWorkers)
		res := lab.Result{
			Incident: 3,
			Title:    "batch product duplication",
			Variant:  variant,
			Injected: fmt.Sprintf("%d batch-copy requests (%d products each) each sent twice within milliseconds, %d worker(s), on_duplicate=%s",
				scenarioBrands, scenarioTemplatesPerBrand, workers, onDup),
			Effect:   "live products beyond one per (name, model)",
			Expected: "= 0",
		}
		rig, err := StartProductRig(ctx, env, suffix, ProductRigConfig{Mode: mode, Workers: scenarioWorkers, ChunkSize: scenarioChunkSize})
		if err != nil {
			return res, err
		}
		defer rig.Close()

		records := make([]CopyRecord, scenarioBrands)
		for b := range records {
			brand := fmt.Sprintf("default-%02d", b)
			if _, err := rig.SeedTemplates(ctx, brand, brand, scenarioTemplatesPerBrand); err != nil {
				return res, err
			}
			records[b] = CopyRecord{RecordID: fmt.Sprintf("rec-%02d", b), SourceBrand: brand, TargetBrand: fmt.Sprintf("shop-%02d", b), OnDuplicate: string(onDup)}
		}
		env.Note("incident 3 %s: sending %d requests, each twice", variant, len(records))
		jobs, err := rig.Upstream().RunJob(ctx, DuplicateRecords(records))
		if err != nil {
			return res, err
		}
		progress, err := rig.WaitJobs(ctx, scenarioTimeout, jobs...)
		if err != nil {
			return res, err
		}
		if res.Count, err = rig.ExtraLiveProducts(ctx); err != nil {
			return res, err
		}
		// The jobs' counters must agree with the database in every mode:
		// each product a job reports created exists, and no other.
		created := 0
		for _, p := range progress {
			created += p.Created
			if p.Created+p.Skipped+p.Failed != p.Job.Total {
				return res, fmt.Errorf("job %s counts %d+%d+%d of %d products", p.Job.ID, p.Created, p.Skipped, p.Failed, p.Job.Total)
			}
		}
		var live int64
		if err := rig.DB.WithContext(ctx).Table("products").Where("deleted = 0").Count(&live).Error; err != nil {
			return res, err
		}
		if int64(created) != live {
			return res, fmt.Errorf("jobs report %d products created, the database holds %d", created, live)
		}
		res.Holds = res.Count == 0
		return res, nil
	}
}
