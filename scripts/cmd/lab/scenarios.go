package main

import (
	pkglab "github.com/oncemall/oncemall/pkg/lab"
	couponlab "github.com/oncemall/oncemall/services/coupon/lab"
	orderlab "github.com/oncemall/oncemall/services/order/lab"
	paymentlab "github.com/oncemall/oncemall/services/payment/lab"
)

// all lists every incident's scenarios, in incident order.
func all() []pkglab.Scenario {
	var out []pkglab.Scenario
	out = append(out, couponlab.Scenarios()...)  // incident 1: lost commit ACK
	out = append(out, paymentlab.Scenarios()...) // incident 2: payment callback retries
	out = append(out, orderlab.Scenarios()...)   // incident 3: batch product duplication
	return out
}
