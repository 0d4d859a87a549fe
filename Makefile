# Tessera build and test entry points. `make run` and `make test` are the two
# commands in the README; .ci/run calls `make test`.

GO           ?= go
TOOLS_BIN    := $(CURDIR)/.tools/bin
STATICCHECK_VERSION := v0.8.2
STATICCHECK  := $(TOOLS_BIN)/staticcheck-$(STATICCHECK_VERSION)
BIN          := bin/tessera
FUZZTIME     ?= 10s

# What `tessera version` reports, linked into the binary `make build` makes;
# each may be given on the command line (make build VERSION=v1.2.3), not
# through the environment.
VERSION       = $(or $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null),v0.0.0-dev)
COMMIT        = $(or $(shell git rev-parse HEAD 2>/dev/null),unknown)$(shell git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo -dirty)
BUILD_DATE    = $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
CLI_PKG      := github.com/tessera-gpu/tessera/internal/cli
GO_LDFLAGS    = -X $(CLI_PKG).version=$(VERSION) -X $(CLI_PKG).commit=$(COMMIT) -X $(CLI_PKG).buildDate=$(BUILD_DATE)

# go-nvml's cgo code calls NVML functions that its nvml.h marks deprecated,
# so a fresh build of it makes the C compiler print some thirty
# -Wdeprecated-declarations warnings that are not Tessera's to fix. Every Go
# command this Makefile runs compiles C with that one warning class off (on
# top of your CGO_CFLAGS, or Go's default -O2 -g); other warnings and all
# errors still show (scripts/make_test.go checks both).
CGO_QUIET    := -Wno-deprecated-declarations
export CGO_CFLAGS := $(filter-out $(CGO_QUIET),$(or $(shell $(GO) env CGO_CFLAGS 2>/dev/null),-O2 -g)) $(CGO_QUIET)

.PHONY: all build intercept run test lint unit fuzz bench bench-kube clean

all: build intercept

build:
	@printf 'go build -o %s ./cmd/tessera   (tessera %s, commit %.12s)\n' '$(BIN)' '$(VERSION)' '$(COMMIT)'
	@$(GO) build -ldflags '$(GO_LDFLAGS)' -o $(BIN) ./cmd/tessera

## intercept: the CUDA interception library, intercept/build/libtessera-intercept.so.
intercept:
	$(MAKE) -C intercept

## run: the demo (scripts/demo.sh): the host daemon on one simulated H200
## sharing it between three jobs at once, with a fourth queued until room
## frees; no GPU needed. The interception library is built quietly when a C
## compiler is there; if that fails, its output and a note say so and the
## demo runs its jobs without it.
run: build
	@out=$$($(MAKE) -s --no-print-directory -C intercept 2>&1) || { printf '%s\n' "$$out" | tail -n 20; \
	  echo "note: could not build the interception library (make -C intercept; needs gcc); the demo's jobs run without it"; }
	@bash scripts/demo.sh $(BIN)

## test: every check CI runs: formatting, vet, staticcheck and all tests.
test: lint unit

unit:
	$(GO) test -race -count=1 -timeout 30m ./...

lint: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

$(STATICCHECK):
	@mkdir -p $(TOOLS_BIN)
	GOBIN=$(TOOLS_BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(TOOLS_BIN)/staticcheck $(STATICCHECK)

## fuzz: a short run of every fuzz target (FUZZTIME each).
fuzz:
	$(GO) test ./quantity -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)
	$(GO) test ./discovery/simulated -run '^$$' -fuzz FuzzSpec -fuzztime $(FUZZTIME)
	$(GO) test ./binding -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME)
	$(GO) test ./arbiter/nvmlmeter -run '^$$' -fuzz FuzzParseCgroup -fuzztime $(FUZZTIME)
	$(GO) test ./kube/admission -run '^$$' -fuzz 'FuzzMutate$$' -fuzztime $(FUZZTIME)
	$(GO) test ./kube/admission -run '^$$' -fuzz FuzzMutateResources -fuzztime $(FUZZTIME)
	$(GO) test ./hostd/server -run '^$$' -fuzz '^FuzzSubmit$$' -fuzztime $(FUZZTIME)
	$(GO) test ./hostd -run '^$$' -fuzz '^FuzzParseConfig$$' -fuzztime $(FUZZTIME)

## bench: Go benchmarks (results and commands are recorded in docs/benchmarks.md).
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## bench-kube: pods bound per second, Tessera vs the stock kube-scheduler, on
## a real API server with KWOK nodes (TESSERA_BENCH_NODES, TESSERA_BENCH_PODS).
bench-kube:
	$(GO) test -run '^$$' -bench BindThroughput -benchtime 1x -timeout 60m ./kube/scheduler

clean:
	rm -rf bin .tools
	$(MAKE) -C intercept clean

## manifests: deploy/tessera.yaml and deploy/webhook.yaml rendered from the
## chart deploy/helm/tessera with deploy/helm/manifests-values.yaml (release
## tessera in tessera-system), by helm built from tools/helm (HELM=path to
## use another build; MANIFESTS_DIR=folder to write elsewhere).
## deploy/manifests_test.go fails when the checked-in files are stale.
HELM_VERSION   = $(shell awk '$$1 == "require" && $$2 == "helm.sh/helm/v4" { print $$3 }' tools/helm/go.mod)
HELM          ?= $(TOOLS_BIN)/helm-$(HELM_VERSION)
MANIFESTS_DIR ?= deploy
MANIFESTS_HELM = $(HELM) template tessera deploy/helm/tessera --namespace tessera-system --values deploy/helm/manifests-values.yaml
MANIFESTS_HEAD = \# Rendered from the chart deploy/helm/tessera by `make manifests` (values:\n\# deploy/helm/manifests-values.yaml). Do not edit: change the chart and run it.\n
.PHONY: manifests
manifests: $(HELM)
	@mkdir -p '$(MANIFESTS_DIR)'
	@{ printf '$(MANIFESTS_HEAD)'; $(MANIFESTS_HELM) --set webhook.enabled=false; } > '$(MANIFESTS_DIR)/tessera.yaml.tmp'
	@{ printf '$(MANIFESTS_HEAD)'; $(MANIFESTS_HELM) --set scheduler.enabled=false,agent.enabled=false,createNamespace=false; } > '$(MANIFESTS_DIR)/webhook.yaml.tmp'
	@mv '$(MANIFESTS_DIR)/tessera.yaml.tmp' '$(MANIFESTS_DIR)/tessera.yaml'
	@mv '$(MANIFESTS_DIR)/webhook.yaml.tmp' '$(MANIFESTS_DIR)/webhook.yaml'
	@echo 'rendered $(MANIFESTS_DIR)/tessera.yaml and $(MANIFESTS_DIR)/webhook.yaml'

$(TOOLS_BIN)/helm-%: tools/helm/go.mod tools/helm/go.sum tools/helm/main.go
	@mkdir -p $(TOOLS_BIN)
	cd tools/helm && GOWORK=off CGO_ENABLED=0 $(GO) build -trimpath -o $@ .
