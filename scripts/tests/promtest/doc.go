// Package promtest holds the tests of the monitoring files: the Prometheus
// configurations, alert rules and alert unit tests of deploy/prometheus
// (through promtool, which `apt-get install prometheus` provides), the
// Grafana provisioning and dashboard of deploy/grafana, and a run of the
// real Prometheus against the services as processes that checks every
// metric the dashboard and the alert rules select is exported, with the
// labels they match on. See docs/observability.md.
package promtest
