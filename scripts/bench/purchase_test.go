package main

import (
	"strings"
	"testing"
)

// purchaseOutput is the purchase suite's output: three runs of the
// purchase benchmark and one of the hot product.
const purchaseOutput = `pkg: github.com/oncemall/oncemall/scripts/tests/lab
BenchmarkPurchaseOrder-2   	       3	16132506989 ns/op	       333.7 plain-req/s	       202.3 purchase-req/s	         0.6064 purchase/plain
BenchmarkPurchaseOrder-2   	       3	16132506989 ns/op	       300.0 plain-req/s	       140.0 purchase-req/s	         0.4667 purchase/plain
BenchmarkPurchaseOrder-2   	       3	16132506989 ns/op	       310.0 plain-req/s	       170.0 purchase-req/s	         0.5484 purchase/plain
BenchmarkHotProductStock-2 	       3	 900000000 ns/op	       250.0 fixed-orders/s	         0 fixed-oversold/round	       320.0 broken-orders/s	        37.33 broken-oversold/round	       180.0 optimistic-orders/s	         1 optimistic-oversold/round	      1200 spread-orders/s
PASS
`

// TestEvaluatePurchase judges the purchase suite's targets: the purchase
// ratio on the median run, the hot product's oversold counts against zero,
// and its throughputs as figures.
func TestEvaluatePurchase(t *testing.T) {
	checks := Evaluate(Summarise(Parse(strings.NewReader(purchaseOutput))), nil)
	got := map[string]string{}
	for _, c := range checks {
		got[c.Area+": "+c.Target] = c.Status + " " + c.Value
	}
	for target, want := range map[string]string{
		"purchase: POST /orders with a coupon ≥ 50% of without (BenchmarkPurchaseOrder, median of the runs' purchase/plain)": "met 55%", // the median of 61%, 47%, 55%
		"hot product: fixed: no unit sold twice, 100 concurrent orders of one product":                                       "met 0 oversold per round",
		"hot product: optimistic: no unit sold twice, 100 concurrent orders of one product":                                  "not met 1 oversold per round",
		"hot product: fixed: orders sold per second":                                                                         "figure only 250 orders/s",
		"hot product: spread: orders sold per second":                                                                        "figure only 1,200 orders/s",
		"hot product: broken: units sold twice per round (reproduces incident 5)":                                            "figure only 37.3",
	} {
		if got[target] != want {
			t.Errorf("%s: %q, want %q", target, got[target], want)
		}
	}
	if _, err := selectSuites("purchase"); err != nil {
		t.Fatal(err)
	}
}
