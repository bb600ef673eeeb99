# oncemall — run `make help` for the targets.
MODULES  := pkg pkg/testkit pkg/lab services/order services/coupon services/payment services/identity services/psp-sim services/web scripts deploy/k8s
SERVICES := order coupon payment identity
GO       ?= go

# make infra writes .infra.mk, which points make test, lab, run and bench at
# the containers of docker-compose.yml (addresses and passwords, as ?=
# assignments, so the environment still wins); make infra-down removes it.
# Without it nothing is set and the local servers' defaults apply.
-include .infra.mk

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-z0-9-]+:.*## /{printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: ## build bin/ and run every program locally (logs in .run/); Ctrl-C stops them, RUN_DETACH=1 returns once ready, REPLICAS=3 three of each service
	@REPLICAS=$(or $(REPLICAS),1) bash scripts/run.sh start

.PHONY: stop
stop: ## stop the programs a detached `make run` left running
	@bash scripts/run.sh stop

.PHONY: observe
observe: tools ## Jaeger (traces, UI on :16686) and Prometheus (:9090) beside `make run`; Ctrl-C stops them, OBSERVE_DETACH=1 returns once ready
	@bash scripts/observe.sh start

.PHONY: observe-stop
observe-stop: ## stop the Jaeger and Prometheus a detached `make observe` left running
	@bash scripts/observe.sh stop

# Jaeger is a Go tool pinned in tools/jaeger/go.mod, a module of its own
# outside go.work (its dependencies are not the services'), so it is built
# with GOWORK=off. A cold build takes minutes: make tools builds it once per
# machine into TOOLS_CACHE, one binary per version, and links .tools/bin/jaeger
# to it. CI runs it before make test, whose scripts/tests/observe test needs it.
TOOLS_CACHE    ?= $(HOME)/.cache/oncemall/tools
JAEGER_VERSION := $(shell awk '$$1 == "github.com/jaegertracing/jaeger" { print $$2 }' tools/jaeger/go.mod 2>/dev/null)
JAEGER_CACHED  := $(TOOLS_CACHE)/jaeger-$(JAEGER_VERSION)/jaeger

# staticcheck, pinned in tools/staticcheck/go.mod (a module of its own, out
# of go.work, so the linter's dependencies never touch the services'), built
# once per machine into .tools/bin and again when the pin changes.
STATICCHECK := .tools/bin/staticcheck
$(STATICCHECK): tools/staticcheck/go.mod tools/staticcheck/go.sum
	cd tools/staticcheck && GOWORK=off $(GO) build -o ../../$(STATICCHECK) honnef.co/go/tools/cmd/staticcheck

.PHONY: tools
tools: jaeger $(STATICCHECK) ## build the pinned tools once per machine (Jaeger and staticcheck: minutes the first time) into .tools/bin

.PHONY: jaeger
jaeger: ## build the pinned Jaeger into TOOLS_CACHE (~/.cache/oncemall/tools) unless it is there, and link .tools/bin/jaeger to it
	@if [ ! -x "$(JAEGER_CACHED)" ]; then \
	  echo "tools: building jaeger $(JAEGER_VERSION) into $(JAEGER_CACHED) (several minutes, once per machine)"; \
	  mkdir -p "$(dir $(JAEGER_CACHED))" && \
	  (cd tools/jaeger && GOWORK=off $(GO) build -o "$(JAEGER_CACHED).tmp" github.com/jaegertracing/jaeger/cmd/jaeger) && \
	  mv "$(JAEGER_CACHED).tmp" "$(JAEGER_CACHED)" || exit 1; \
	fi
	@mkdir -p .tools/bin && ln -sfn "$(JAEGER_CACHED)" .tools/bin/jaeger
	@echo "tools: .tools/bin/jaeger -> $(JAEGER_CACHED)"

.PHONY: build
build: ## build the service binaries into bin/
	@mkdir -p bin
	@for s in $(SERVICES); do echo "build bin/$$s"; $(GO) build -o bin/$$s ./services/$$s/cmd/$$s || exit 1; done

.PHONY: migrate
migrate: build ## apply each service's database migrations and exit
	@bash scripts/preflight.sh
	@for s in $(SERVICES); do echo "== migrate $$s"; bin/$$s migrate || exit 1; done

.PHONY: infra
infra: ## MariaDB, Redis and NATS in Docker; make test, lab, run and bench use them until make infra-down
	@bash scripts/infra.sh up

.PHONY: infra-down
infra-down: ## stop the containers (docker compose down) and go back to the local servers
	@bash scripts/infra.sh down

# make compose-test runs docker compose up --build for real, on a local
# engine (podman) with Compose and stand-ins for the third-party images, all
# pinned and made once per machine into TOOLS_CACHE (docs/compose.md).
.PHONY: compose-tools
compose-tools: ## the container engine, Docker Compose and the stand-in images make compose-test needs, made once per machine (minutes the first time)
	@TOOLS_CACHE="$(TOOLS_CACHE)" GO=$(GO) bash scripts/compose-test.sh tools

.PHONY: compose-test
compose-test: ## docker compose up --build on the real file, a purchase, make infra + make lab, a killed order service, down -v (docs/compose.md)
	@TOOLS_CACHE="$(TOOLS_CACHE)" GO=$(GO) bash scripts/compose-test.sh

.PHONY: up
up: ## docker compose up -d --build
	docker compose up -d --build

.PHONY: down
down: ## docker compose down
	docker compose down

# JETSTREAM_PKGS are pkg's JetStream-heavy tests, run a second time on the
# nats-server version compose pins (2.15, in process, with deploy/nats.conf's
# JetStream settings; scripts/tools/natsrun): the other runs use NATS_URL's
# server, 2.9 on this project's machines.
JETSTREAM_PKGS := ./outbox/ ./inbox/ ./natsjs/ ./platform/


.PHONY: check
check: $(STATICCHECK) ## the gates CI runs before make test: gofmt, go vet, staticcheck and go mod tidy -diff in every module
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt -l: these files need gofmt -w:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES) tools/staticcheck; do echo "== check $$m"; \
	  (cd $$m && $(GO) mod tidy -diff >/dev/null) || { echo "$$m: go mod tidy -diff is not clean; run go mod tidy there"; exit 1; }; \
	  [ $$m = tools/staticcheck ] && continue; \
	  (cd $$m && $(GO) vet ./... && $(CURDIR)/$(STATICCHECK) ./...) || exit 1; done

.PHONY: test
test: ## check MariaDB/MySQL, Redis and NATS answer, then every module's tests under the race detector (the gates are make check)
	@bash scripts/preflight.sh
	@for m in $(MODULES); do echo "== test $$m"; (cd $$m && $(GO) test -race -count=1 -timeout 10m ./...) || exit 1; done

.PHONY: test-nats
test-nats: ## pkg's JetStream tests again, on the NATS version compose runs (in process; CI runs it after make test)
	@cd pkg && $(GO) run ../scripts/tools/natsrun -jetstream-from ../deploy/nats.conf -- $(GO) test -race -count=1 -timeout 10m $(JETSTREAM_PKGS)

.PHONY: e2e
e2e: ## end-to-end: the services and psp-sim as processes; a storm, a cancel, a payment after the close, a quiet platform, the purchase of docs/purchase-flow.md
	@bash scripts/preflight.sh
	cd scripts && $(GO) test -count=1 -v ./tests/e2e/

.PHONY: new-service
new-service: ## create services/NAME from the service template and wire it in everywhere (NAME=inventory, PORT=8084 optional)
	@GO=$(GO) $(GO) run ./scripts/tools/newservice -name "$(NAME)" $(if $(PORT),-port $(PORT))

template-test: ## the slow template checks make test leaves out: a generated service's every test, and docs/forking.md's recipe run for it and each service (tens of minutes on 2 cores)
	@cd scripts && $(GO) test -tags templatetest -count=1 -timeout 60m -run 'TestGeneratedServicePassesEveryTest|TestForkRecipe' ./tools/newservice/

.PHONY: template-test

.PHONY: lint
lint: check ## an alias of make check

# -tags nomsgpack leaves gin's MessagePack codec (github.com/ugorji/go/codec) out
# of the lab binary: nothing here speaks MessagePack, and that one package was a
# fifth of the compile time of a first `make lab` on a cold build cache.
.PHONY: lab
lab: ## run the incident scenarios: each broken variant must reproduce, each fixed one hold; writes lab-report.html (INCIDENT=n for one, LAB_FLAGS=--wide)
	@bash scripts/preflight.sh
	@$(GO) run -tags nomsgpack ./scripts/tools/lab --incident $(or $(INCIDENT),0) --html lab-report.html $(LAB_FLAGS)

.PHONY: bench
bench: ## run the benchmark suites and write docs/benchmarks.md with the targets judged (BENCH_FLAGS=--only outbox,idempotency)
	@bash scripts/preflight.sh
	GO=$(GO) $(GO) run ./scripts/bench $(BENCH_FLAGS)

# loadgen drives `make run`'s programs (REPLICAS as make run was given);
# chaos starts a private rig of its own (NATS and Redis on free ports, never
# the shared ones) and breaks it while the load runs. docs/chaos.md.
.PHONY: loadgen
loadgen: ## drive the whole purchase flow against `make run` and check the invariants (RATE=50 DURATION=30s REPLICAS=1 LOADGEN_FLAGS=--json)
	@$(GO) run ./scripts/loadgen --rate $(or $(RATE),50) --duration $(or $(DURATION),30s) --replicas $(or $(REPLICAS),1) $(LOADGEN_FLAGS)

.PHONY: chaos
chaos: ## loadgen on a private rig while processes are killed, NATS and Redis restarted, COMMIT acks and platform answers lost (SEED=1 REPLICAS=3)
	@bash scripts/preflight.sh
	@$(GO) run ./scripts/loadgen --chaos --seed $(or $(SEED),1) --replicas $(or $(REPLICAS),3) --rate $(or $(RATE),20) --duration $(or $(DURATION),60s) $(LOADGEN_FLAGS)

.PHONY: dupproof
dupproof: ## race goroutines for one Redis key: check-then-set vs SET NX vs sliding window
	@bash scripts/preflight.sh
	$(GO) run ./scripts/tools/dupproof
