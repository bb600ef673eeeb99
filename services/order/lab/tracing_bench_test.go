package lab

import (
	"context"
	"fmt"
	"github.com/oncemall/oncemall/pkg/testkit/proccpu"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/tracing"
	"github.com/oncemall/oncemall/pkg/variant"
)

// BenchmarkCreateOrderTracing measures what tracing costs the order
// service's real POST /orders (BenchmarkCreateOrderAPI's rig, with the
// Idempotency-Key guard, as cmd/order runs it): off is the no-op provider
// TRACING_EXPORTER=none gives; on is what TRACING_EXPORTER=otlp gives, every
// trace sampled and its spans exported in batches over OTLP/HTTP, to a
// receiver that reads each export and discards it (decoding and storing
// them is the receiver's cost, on another machine, not the service's). The on/off metric is on's throughput over off's: the target is
// at least 0.9 (tracing on costs at most 10%).
//
// Each iteration is one round of 1,000 requests to each server, 32 in
// flight, back to back in alternating order, so both see the same machine.
// It also reports the CPU time each request cost this process (the server,
// and for on the batch exporter too): on a shared machine, whose load moves
// req/s, that is the steadier measure of what tracing adds.
//
//	cd services/order && go test ./lab -run '^$' -bench BenchmarkCreateOrderTracing -benchtime 5x -count 3
func BenchmarkCreateOrderTracing(b *testing.B) {
	const (
		perRound = 1000
		inFlight = 32
	)
	ctx := context.Background()
	var exported atomic.Int64 // bytes of OTLP received
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		exported.Add(n)
	}))
	defer recv.Close()
	variants := []struct {
		name string
		vars map[string]string
	}{
		{"off", map[string]string{"TRACING_EXPORTER": tracing.ExporterNone}},
		{"on", map[string]string{"TRACING_EXPORTER": tracing.ExporterOTLP, "TRACING_OTLP_ENDPOINT": recv.URL, "TRACING_SAMPLE_RATIO": "1"}},
	}
	apis := make([]*OrderAPI, len(variants))
	products := make([][]uint64, len(variants))
	for i, v := range variants {
		api, err := StartOrderAPI(ctx, labEnv(b), "trace_"+v.name, OrderAPIConfig{Guard: variant.Fixed, Vars: v.vars})
		if err != nil {
			b.Fatal(err)
		}
		defer api.Close()
		apis[i] = api
		for w := range inFlight {
			id, err := api.CreateProduct(ctx, fmt.Sprintf("trace-%d", w), 1999, 1_000_000_000)
			if err != nil {
				b.Fatal(err)
			}
			products[i] = append(products[i], id)
		}
	}
	spent, cpu := make([]time.Duration, len(variants)), make([]time.Duration, len(variants))
	b.ResetTimer()
	for round := range b.N {
		for k := range variants {
			v := (round + k) % len(variants)
			start, cpu0 := time.Now(), proccpu.Read().Self
			if err := postOrders(ctx, apis[v], products[v], perRound); err != nil {
				b.Fatalf("%s: %v", variants[v].name, err)
			}
			spent[v] += time.Since(start)
			cpu[v] += proccpu.Read().Self - cpu0
		}
	}
	b.StopTimer()
	rate := make([]float64, len(variants))
	for v, variant := range variants {
		n := float64(perRound * b.N)
		rate[v] = n / spent[v].Seconds()
		b.ReportMetric(rate[v], variant.name+"-req/s")
		b.ReportMetric(float64(cpu[v].Microseconds())/n, variant.name+"-go-cpu-us/req")
	}
	b.ReportMetric(rate[1]/rate[0], "on/off")
	// The spans did reach the receiver: the on variant really traced.
	// Stopping it flushes its exporter.
	apis[1].Close()
	b.ReportMetric(float64(exported.Load())/float64(perRound*b.N), "on-otlp-bytes/req")
	if exported.Load() < int64(100*perRound*b.N) {
		b.Fatalf("the receiver got %d bytes of OTLP for %d traced requests", exported.Load(), perRound*b.N)
	}
}
