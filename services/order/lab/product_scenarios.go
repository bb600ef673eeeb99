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
	"strings"
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

// duplicateBatchScenario runs incident 3 on a rig named by suffix (short:
// database names are limited to 64 characters): the upstream job sends its batch of
// copy requests in a tight loop, each one twice (its duplicate records), and
// the catalog's workers copy them concurrently (one worker when orderly).
func duplicateBatchScenario(variant, suffix string, mode variant.Mode, onDup product.OnDuplicate) func(context.Context, lab.Env) (lab.Result, error) {
	return func(ctx context.Context, env lab.Env) (lab.Result, error) {
		workers := scenarioWorkers
		if mode == Orderly {
			workers = 1
		}
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
		stopWatch := watchJobs(ctx, env.Timeline, rig, jobs)
		progress, err := rig.WaitJobs(ctx, scenarioTimeout, jobs...)
		stopWatch()
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

// watchJobs, when tl is set, polls the copy jobs until each is done and
// puts it on tl: one swimlane per request (a record and its "-dup"), from
// the job's creation to when it was seen done, as an effect when it created
// products (a duplicate when its twin created them too), absorbed when it
// skipped them all, refused when it failed. The returned function waits for
// the watch to end (it ends with ctx, or once every job is done).
func watchJobs(ctx context.Context, tl *lab.Timeline, rig *ProductRig, jobs []string) func() {
	if tl == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		seen := map[string]product.CopyProgress{}
		ended := map[string]time.Time{}
		for len(seen) < len(jobs) && ctx.Err() == nil {
			for _, id := range jobs {
				if _, ok := seen[id]; ok {
					continue
				}
				if p, err := rig.App.CopyProgress(ctx, id); err == nil && p.Done() {
					seen[id], ended[id] = p, time.Now()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
		// A record and its "-dup" may split the work between them (the
		// fix skips what the other created); only what the two created
		// beyond one job's total is duplicated.
		created := map[string]int{} // record id without "-dup" → products its jobs created
		for _, p := range seen {
			created[strings.TrimSuffix(p.Job.RequestID, "-dup")] += p.Created
		}
		for _, id := range jobs {
			p, ok := seen[id]
			if !ok {
				continue
			}
			kind := lab.KindAbsorbed
			switch {
			case p.Created > 0 && created[strings.TrimSuffix(p.Job.RequestID, "-dup")] > p.Job.Total && strings.HasSuffix(p.Job.RequestID, "-dup"):
				kind = lab.KindDuplicate
			case p.Created > 0:
				kind = lab.KindEffect
			case p.Failed > 0 || p.FailedChunk:
				kind = lab.KindRefused
			}
			tl.Add(lab.Event{Actor: p.Job.RequestID, Kind: kind, Start: p.Job.CreatedAt, End: ended[id],
				Label: fmt.Sprintf("created %d, skipped %d, failed %d", p.Created, p.Skipped, p.Failed)})
		}
	}()
	return func() {
		select {
		case <-done:
		case <-time.After(2 * time.Second):
		}
		cancel()
		<-done
	}
}
