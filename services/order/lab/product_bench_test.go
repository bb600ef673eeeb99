package lab

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/config"
	"github.com/oncemall/oncemall/services/order/internal/product"
)

// BenchmarkProductCopy10k copies 10,000 products with one batch-copy request
// in each mode, in one run: fixed with 16 workers, orderly with its single
// worker and broken with 16 workers (plus fixed with 4 workers, for
// comparison), at the service's default chunk size
// (100 products per message). Each iteration copies once per mode, starting
// with a different mode each time, so the three share whatever else the
// machine is doing. Only the copies are timed (request to last chunk
// committed); the templates are seeded with the timer stopped. It reports
// each mode's products/s and the two ratios the targets are about.
//
//	go test ./lab -run '^$' -bench BenchmarkProductCopy10k -benchtime 3x
func BenchmarkProductCopy10k(b *testing.B) {
	const products = 10000
	modes := []struct {
		name    string
		mode    variant.Mode
		workers int
	}{
		{"fixed", variant.Fixed, 16},
		{"orderly", config.Orderly, 16}, // orderly runs one worker whatever is configured
		{"broken", variant.Broken, 16},
		// Not a target: the fix with fewer workers, to show what sixteen
		// cost on a machine with two cores (see docs/benchmarks/products.md).
		{"fixed4", variant.Fixed, 4},
	}
	ctx := context.Background()
	rigs := make([]*ProductRig, len(modes))
	for i, m := range modes {
		rig, err := StartProductRig(ctx, labEnv(b), "bench_"+m.name, ProductRigConfig{Mode: m.mode, Workers: m.workers, ChunkSize: 100})
		if err != nil {
			b.Fatal(err)
		}
		defer rig.Close()
		rigs[i] = rig
	}
	spent := make([]time.Duration, len(modes))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range modes {
			m := (i + k) % len(modes)
			rig := rigs[m]
			b.StopTimer()
			brand := fmt.Sprintf("src-%d", i)
			if _, err := rig.SeedTemplates(ctx, brand, brand, products); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			start := time.Now()
			job, _, err := rig.App.StartCopy(ctx, product.CopyRequest{RequestID: brand, SourceBrand: brand, TargetBrand: "shop"})
			if err != nil {
				b.Fatal(err)
			}
			p, err := rig.WaitJobs(ctx, 5*time.Minute, job.ID)
			if err != nil {
				b.Fatal(err)
			}
			spent[m] += time.Since(start)
			if p[0].Created != products {
				b.Fatalf("%s: created %d of %d", modes[m].name, p[0].Created, products)
			}
		}
	}
	rate := make([]float64, len(modes))
	for m := range modes {
		rate[m] = float64(products*b.N) / spent[m].Seconds()
		b.ReportMetric(rate[m], modes[m].name+"-products/s")
	}
	b.ReportMetric(rate[0]/rate[1], "fixed/orderly")
	b.ReportMetric(rate[0]/rate[2], "fixed/broken")
	b.ReportMetric(rate[3]/rate[1], "fixed4/orderly")
}
