// Package e2e holds the end-to-end tests of a purchase across the services
// as real processes: it builds order, coupon, payment and the payment
// platform simulator, runs them on free ports with throwaway databases and
// their own JetStream streams, and drives purchases through them: a payment
// through a storm of duplicate notifications, a cancel, a payment that lands
// after the close job closed its order (refunded), a platform that never
// notifies (found by the active query), and the "Buy something" commands
// of docs/purchase-flow.md. Each counts its effects in the databases and on
// the streams (see e2e_test.go and readme_test.go).
package e2e
