// Package k8s holds oncemall's Kubernetes manifests: a kustomize base
// (base/) and the overlay for a developer's cluster (overlays/local/). It
// has no code; its test renders both kustomizations in process, decodes
// every object strictly into the Kubernetes API types, and checks what
// README.md promises (references, probes, shutdown, replicas, disruption
// budgets, and every variable each program reads). It runs offline against
// the files alone: no cluster is needed.
package k8s
