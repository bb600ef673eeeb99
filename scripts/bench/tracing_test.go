package main

import (
	"strings"
	"testing"
)

// TestTracingTargetReadsTheBenchmark: the tracing suite's real output is
// judged on the median of its runs' on/off, met at 0.91 here.
func TestTracingTargetReadsTheBenchmark(t *testing.T) {
	out := `BenchmarkCreateOrderTracing-2 	 3	2141962779 ns/op	 790.9 off-go-cpu-us/req	 1028 off-req/s	 907.1 on-go-cpu-us/req	 456.2 on-otlp-bytes/req	 880.6 on-req/s	 0.8568 on/off
BenchmarkCreateOrderTracing-2 	 3	2039019486 ns/op	 778.5 off-go-cpu-us/req	 1043 off-req/s	 902.9 on-go-cpu-us/req	 456.2 on-otlp-bytes/req	 953.1 on-req/s	 0.9137 on/off
BenchmarkCreateOrderTracing-2 	 3	2652927409 ns/op	 1025 off-go-cpu-us/req	 786.4 off-req/s	 1117 on-go-cpu-us/req	 456.2 on-otlp-bytes/req	 743.6 on-req/s	 0.9455 on/off
BenchmarkCreateOrderTracing-2 	 3	2390506554 ns/op	 971.5 off-go-cpu-us/req	 817.3 off-req/s	 907.8 on-go-cpu-us/req	 456.2 on-otlp-bytes/req	 880.1 on-req/s	 1.077 on/off
BenchmarkCreateOrderTracing-2 	 3	2947319225 ns/op	 1142 off-go-cpu-us/req	 719.9 off-req/s	 1335 on-go-cpu-us/req	 456.2 on-otlp-bytes/req	 658.3 on-req/s	 0.9144 on/off
`
	f := Summarise(Parse(strings.NewReader(out)))
	for _, c := range Evaluate(f, nil) {
		if c.Area != "tracing" {
			continue
		}
		if c.Status != Met || !strings.Contains(c.Value, "91%") {
			t.Fatalf("tracing check %+v, want met at 91%%", c)
		}
		return
	}
	t.Fatal("no tracing check")
}
