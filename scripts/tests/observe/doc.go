// Package observe holds the test that one purchase is one trace in Jaeger:
// it starts the pinned Jaeger (.tools/bin/jaeger, built by `make tools`)
// and order, coupon, payment and the payment-platform simulator as
// processes exporting their spans to it, makes one purchase through a
// storm of platform notifications, and reads the whole trace back through
// Jaeger's query API (see observe_test.go for what is asserted).
package observe
