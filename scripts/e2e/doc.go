// Package e2e holds the end-to-end test of incident 2's whole chain, across
// the services as real processes: it builds order, coupon, payment and the
// payment-platform simulator, runs them on free ports with throwaway
// databases and their own JetStream streams, and drives an order with a
// coupon from creation to PAID and the coupon to USED through a storm of
// retried platform notifications (see e2e_test.go for what is asserted).
package e2e
