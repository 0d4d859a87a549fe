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
CLI_PKG      := github.com/tessera-gpu/tessera/cmd/tessera/cli
GO_LDFLAGS    = -X $(CLI_PKG).version=$(VERSION) -X $(CLI_PKG).commit=$(COMMIT) -X $(CLI_PKG).buildDate=$(BUILD_DATE)

# go-nvml's cgo code calls NVML functions that its nvml.h marks deprecated,
# so a fresh build of it makes the C compiler print some thirty
# -Wdeprecated-declarations warnings that are not Tessera's to fix. Every Go
# command this Makefile runs compiles C with that one warning class off (on
# top of your CGO_CFLAGS, or Go's default -O2 -g); other warnings and all
# errors still show (scripts/make_test.go checks both).
CGO_QUIET    := -Wno-deprecated-declarations
export CGO_CFLAGS := $(filter-out $(CGO_QUIET),$(or $(shell $(GO) env CGO_CFLAGS 2>/dev/null),-O2 -g)) $(CGO_QUIET)

# The container image (make image) and the real test node's pause image
# (make pause-image): docker-archive tarballs in IMAGE_DIR that `docker load`
# and `ctr -n k8s.io images import` read, packed by tools/image without
# Docker, a registry or a base image. Reproducible: file times and the
# binary's build date come from SOURCE_DATE_EPOCH (default: the commit's
# time), so the same tree gives the same image digest.
IMAGE_DIR    ?= bin
IMAGE        ?= ghcr.io/tessera-gpu/tessera:$(VERSION)
PAUSE_IMAGE  ?= registry.k8s.io/pause:3.10
SOURCE_DATE_EPOCH ?= $(or $(shell git log -1 --format=%ct 2>/dev/null),0)
IMAGE_OUT     = $(abspath $(IMAGE_DIR))
IMAGE_LABELS  = -label org.opencontainers.image.source=https://github.com/tessera-gpu/tessera \
                -label org.opencontainers.image.licenses=Apache-2.0 \
                -label org.opencontainers.image.revision=$(COMMIT)
# Go modules with their own go.mod that unit and lint cover too (tools/promql
# keeps Prometheus's PromQL parser, which deploy/monitoring_test.go runs, out
# of the main go.mod).
TOOL_MODULES := tools/image tools/promql

.PHONY: all build intercept image pause-image run test lint unit e2e-node fuzz bench bench-kube clean

all: build intercept

build:
	@printf 'go build -o %s ./cmd/tessera   (tessera %s, commit %.12s)\n' '$(BIN)' '$(VERSION)' '$(COMMIT)'
	@$(GO) build -ldflags '$(GO_LDFLAGS)' -o $(BIN) ./cmd/tessera

## intercept: the CUDA interception library, intercept/build/libtessera-intercept.so.
intercept:
	$(MAKE) -C intercept

## image: IMAGE_DIR/tessera-image.tar, the image IMAGE (its name also in
## IMAGE_DIR/tessera-image.ref): /usr/local/bin/tessera, the interception
## library at /usr/local/lib/tessera/libtessera-intercept.so, and the C
## libraries tessera loads (ldd), as user 65532. tessera links glibc
## dynamically on purpose: go-nvml dlopens the host's libnvidia-ml.so.1,
## which needs the shared libc.so.6, and a static glibc binary may not
## dlopen it (the linker warns "Using 'dlopen' in statically linked
## applications requires at runtime the shared libraries from the glibc
## version used for linking", and two libcs in one process are unsound).
## It also makes pause-image.
image: BUILD_DATE = $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
image: build intercept pause-image
	@cd tools/image && $(GO) run . -ref '$(IMAGE)' -out '$(IMAGE_OUT)/tessera-image.tar' \
	  -ref-file '$(IMAGE_OUT)/tessera-image.ref' -epoch '$(SOURCE_DATE_EPOCH)' \
	  -add /usr/local/bin/tessera='$(abspath $(BIN))' \
	  -add /usr/local/lib/tessera/libtessera-intercept.so='$(CURDIR)/intercept/build/libtessera-intercept.so' \
	  -libs-of /usr/local/bin/tessera -basics -entrypoint /usr/local/bin/tessera -user 65532:65532 \
	  -label org.opencontainers.image.title=tessera \
	  -label org.opencontainers.image.description='Tessera: GPU sharing and fraction-aware scheduling' \
	  -label org.opencontainers.image.version='$(VERSION)' $(IMAGE_LABELS)

## pause-image: IMAGE_DIR/pause-image.tar, PAUSE_IMAGE for the real test
## node's pods: tools/image/pause, static (CGO_ENABLED=0), as user 65535.
pause-image:
	@mkdir -p '$(IMAGE_OUT)'
	@cd tools/image && CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags '-s -w' -o '$(IMAGE_OUT)/pause' ./pause
	@cd tools/image && $(GO) run . -ref '$(PAUSE_IMAGE)' -out '$(IMAGE_OUT)/pause-image.tar' -ref-file '$(IMAGE_OUT)/pause-image.ref' \
	  -epoch '$(SOURCE_DATE_EPOCH)' -add /pause='$(IMAGE_OUT)/pause' -entrypoint /pause -user 65535:65535 \
	  -label org.opencontainers.image.title=pause \
	  -label org.opencontainers.image.description="Tessera's sandbox program for the real test node, named $(PAUSE_IMAGE)" \
	  -label org.opencontainers.image.version='$(lastword $(subst :, ,$(PAUSE_IMAGE)))' $(IMAGE_LABELS)

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

# Test binaries link without DWARF (-ldflags=-w): panics and race reports
# need only Go's own symbol tables, and DWARF is about a third of the link
# time of each of some ninety test binaries. The tools modules' programs
# (test/toolbin) are built by the first test that needs each, inside this
# run: measured on a cold 2-core machine, building them all up front beside
# the tests, or naming the longest packages first with one more package
# than cores at a time, made the run longer (63 and 68+ minutes against 61),
# since its first 35 minutes are CPU-bound anyway and the Kueue build that
# an early start moves away fills the idle end of the run. What did make
# it shorter was less work: with lint's -race build (below), no DWARF and
# tracesim's replays without -race, a cold run took 53 minutes (5,480
# CPU-seconds, against 6,679).
# tracesim runs a second time without -race: its openb replays skip under
# the race detector, which makes them fifteen times slower (380 CPU-seconds
# against 26) though their one concurrency, Matrix's worker pool, is covered
# under -race by the tiny-trace matrices.
UNIT_TEST     = $(GO) test -race -count=1 -timeout 55m -ldflags=-w ./...
unit:
	$(UNIT_TEST)
	$(GO) test -count=1 -ldflags=-w ./tracesim
	@for m in $(TOOL_MODULES); do echo "cd $$m && $(GO) test -count=1 ./..."; (cd $$m && $(GO) test -count=1 ./...) || exit 1; done

# go vet and staticcheck build with -race: they compile every dependency
# (Kubernetes's included) for its export data, and with -race that is the
# same build go test -race reuses from the cache, so a cold run compiles it
# once instead of twice.
lint: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet -race ./...
	GOFLAGS="-race $$GOFLAGS" $(STATICCHECK) ./...
	@for m in $(TOOL_MODULES); do echo "cd $$m && $(GO) vet ./... && staticcheck ./..."; (cd $$m && $(GO) vet ./... && $(STATICCHECK) ./...) || exit 1; done

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
	$(GO) test ./hostd/store -run '^$$' -fuzz '^FuzzJobFolder$$' -fuzztime $(FUZZTIME)
	$(GO) test ./cmd/tessera/cli -run '^$$' -fuzz '^FuzzWriteTables$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/termsafe -run '^$$' -fuzz '^FuzzString$$' -fuzztime $(FUZZTIME)

## bench: Go benchmarks (results and commands are recorded in docs/benchmarks.md).
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## e2e-node: the end-to-end tests on a real node (kubelet and containerd
## built from tools/cluster and tools/containerd, runc and the CNI plugins
## from the machine's packages, as root): Tessera's image (make image) and the
## chart's manifests, pods getting GPU shares from the agent's device plugin
## and from its DRA kubelet plugin (claims kube-scheduler allocates) through
## kubelet restarts and agent restarts. `make unit` runs them too;
## they skip, saying why, where the machine cannot run containers.
e2e-node:
	$(GO) test -count=1 -timeout 40m -v ./test/e2enode/

## bench-kube: pods bound per second, Tessera vs the stock kube-scheduler, on
## a real API server with KWOK nodes (TESSERA_BENCH_NODES, TESSERA_BENCH_PODS).
## TESSERA_BENCH_SCENARIO=mix: 5,000 nodes, fractional, whole, multi-GPU and
## gang pods in two queues, latency percentiles, CPU and peak RSS of both
## (TESSERA_BENCH_TABLE=file, TESSERA_BENCH_PROFILE=dir; docs/benchmarks.md).
## TESSERA_BENCH_SCENARIO=dra: pods with ResourceClaims on Tessera's DRA
## devices, allocated by Tessera's scheduler and by kube-scheduler's DRA plugin.
bench-kube:
	$(GO) test -run '^$$' -bench BindThroughput -benchtime 1x -timeout 120m ./kube/scheduler

clean:
	rm -rf bin .tools
	$(MAKE) -C intercept clean

## manifests: deploy/tessera.yaml and deploy/webhook.yaml rendered from the
## chart deploy/helm/tessera with deploy/helm/manifests-values.yaml (release
## tessera in tessera-system), by helm built from tools/cluster (HELM=path to
## use another build; MANIFESTS_DIR=folder to write elsewhere).
## deploy/manifests_test.go fails when the checked-in files are stale.
HELM_VERSION   = $(shell awk '$$1 == "helm.sh/helm/v4" { print $$2 }' tools/cluster/go.mod)
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

$(TOOLS_BIN)/helm-%: tools/cluster/go.mod tools/cluster/go.sum tools/cluster/helm/main.go
	@mkdir -p $(TOOLS_BIN)
	cd tools/cluster && GOWORK=off CGO_ENABLED=0 $(GO) build -trimpath -o $@ ./helm
