// Package smoke holds the end-to-end smoke test: it builds each service
// binary, runs it as a process against the real MariaDB/MySQL, Redis and
// NATS, and checks start-up, readiness, bad configuration and a clean
// SIGTERM shutdown from the outside, as an operator would see them. It also
// runs the CI entry point, .ci/run, with stubs for what it starts.
package smoke
