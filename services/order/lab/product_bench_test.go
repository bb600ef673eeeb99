package lab

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/oncemall/oncemall/services/order/internal/catalog"
)

// BenchmarkProductCopy10k copies 10,000 products with one batch-copy request
// in each mode: fixed with 16 workers, orderly with its single worker and
// broken with 16 workers, at the service's default chunk size (100 products
// per message) and at 25. Only the copy is timed (request to last chunk
// committed); the templates are seeded with the timer stopped.
//
//	go test ./lab -run '^$' -bench BenchmarkProductCopy10k -benchtime 3x
func BenchmarkProductCopy10k(b *testing.B) {
	const products = 10000
	for _, chunk := range []int{100, 25} {
		for _, c := range []struct {
			name    string
			mode    catalog.Mode
			workers int
		}{
			{"fixed-16-workers", catalog.ModeFixed, 16},
			{"orderly-1-worker", catalog.ModeOrderly, 16},
			{"broken-16-workers", catalog.ModeBroken, 16},
		} {
			b.Run(fmt.Sprintf("chunk-%d/%s", chunk, c.name), func(b *testing.B) {
				ctx := context.Background()
				rig, err := StartProductRig(ctx, labEnv(b), "bench", ProductRigConfig{Mode: c.mode, Workers: c.workers, ChunkSize: chunk})
				if err != nil {
					b.Fatal(err)
				}
				defer rig.Close()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					brand := fmt.Sprintf("src-%d", i)
					if _, err := rig.SeedTemplates(ctx, brand, brand, products); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					job, _, err := rig.App.StartCopy(ctx, catalog.CopyRequest{RequestID: brand, SourceBrand: brand, TargetBrand: "shop"})
					if err != nil {
						b.Fatal(err)
					}
					p, err := rig.WaitJobs(ctx, 5*time.Minute, job.ID)
					if err != nil {
						b.Fatal(err)
					}
					if p[0].Created != products {
						b.Fatalf("created %d of %d", p[0].Created, products)
					}
				}
				b.ReportMetric(float64(products*b.N)/b.Elapsed().Seconds(), "products/s")
			})
		}
	}
}
