# Tessera build and test entry points. `make run` and `make test` are the two
# commands in the README; .ci/run calls `make test`.

GO           ?= go
TOOLS_BIN    := $(CURDIR)/.tools/bin
STATICCHECK_VERSION := v0.8.2
STATICCHECK  := $(TOOLS_BIN)/staticcheck-$(STATICCHECK_VERSION)
BIN          := bin/tessera
FUZZTIME     ?= 10s

.PHONY: all build intercept run test lint unit fuzz bench bench-kube clean

all: build intercept

build:
	$(GO) build -o $(BIN) ./cmd/tessera

## intercept: the CUDA interception library, intercept/build/libtessera-intercept.so.
intercept:
	$(MAKE) -C intercept

## run: the main job on the embedded default: the host daemon (real GPUs,
## else simulated 8xH200) running a sample job on a GPU fraction.
## The interception library is built when a C compiler is there; without
## one the demo runs its job without it (and says so).
run: build
	@$(MAKE) -s -C intercept >/dev/null 2>&1 || echo "note: could not build the interception library (needs gcc); the job runs without it"
	bash scripts/demo.sh ./$(BIN)

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
