# oncemall — run `make help` for the targets.
MODULES := pkg services/order services/coupon services/payment scripts
GO      ?= go

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-z-]+:.*## /{printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: test
test: ## vet and test every module against the local MariaDB/MySQL, Redis and NATS
	@for m in $(MODULES); do echo "== $$m"; (cd $$m && $(GO) vet ./... && $(GO) test -count=1 -timeout 10m ./...) || exit 1; done
