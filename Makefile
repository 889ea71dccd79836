# agentq — see README.md. `make help` lists the targets.
GO            ?= go
STATICCHECK   := honnef.co/go/tools/cmd/staticcheck@v0.8.2
BIN           := bin
# -race needs cgo (a C compiler); without one the tests run without it.
RACE          := $(shell $(GO) env CGO_ENABLED 2>/dev/null | grep -q 1 && command -v gcc >/dev/null 2>&1 && echo -race)
TEST_TIMEOUT  ?= 15m
# vet, staticcheck and every go command a test runs share the images'
# build configuration (internal/gobuild), so an empty build cache compiles
# the repository once for them all; the race build of the tests is the other
BUILD_ENV     := CGO_ENABLED=0 GOFLAGS="$(strip $(GOFLAGS) -trimpath)"

.PHONY: help build test test-race lint vet staticcheck rules demo fuzz clean bench drill

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build every binary into bin/
	$(GO) build -o $(BIN)/ ./cmd/...

test: vet staticcheck rules ## vet, staticcheck, Prometheus rule tests, all tests (with -race when cgo is available; the fuzz targets on their seed corpora)
	@[ -n "$(RACE)" ] || echo "note: no C compiler for cgo; running the tests without -race"
	@command -v redis-server >/dev/null 2>&1 || [ -n "$$AGENTQ_TEST_REDIS" ] || echo "note: no redis-server on PATH; the tests fall back to in-process miniredis (install redis-server to test against real Redis)"
	@# -parallel 16: the engine's long tests (t.Parallel, mostly idle: the
	@# ones that wait out asynq's one-minute recoverer after a SIGKILL, the
	@# drills) wait together, in one wave rather than three
	@# -vet=off: make vet has run all of vet's checks
	$(GO) test $(RACE) -vet=off -parallel 16 -timeout $(TEST_TIMEOUT) ./...

test-race: ## all tests with the race detector (needs cgo)
	$(GO) test -race -timeout $(TEST_TIMEOUT) ./...

lint: vet staticcheck ## go vet and staticcheck

rules: ## check and unit-test the Prometheus rules (needs promtool: Debian's prometheus package)
	@if command -v promtool >/dev/null 2>&1; then \
		promtool check rules deploy/prometheus/rules.yml && \
		cd deploy/prometheus/tests && promtool test rules rules_test.yml; \
	elif [ "$$CI" = true ]; then echo "CI=true but promtool is missing" >&2; exit 1; \
	else echo "note: no promtool on PATH; skipping the Prometheus rule tests (apt-get install prometheus)"; fi

vet:
	$(BUILD_ENV) $(GO) vet ./...

staticcheck:
	$(BUILD_ENV) $(GO) run $(STATICCHECK) ./...

demo: ## the analyst example: an agent workflow through a scripted outage, no services needed
	$(GO) run ./examples/analyst

FUZZTIME ?= 10000x
# FUZZTIME: a count, not a duration, is safe under load: Go 1.26's fuzz
# coordinator can fail a target with "context deadline exceeded" when a
# duration ends under load (golang/go#75804, fixed in Go 1.27)
fuzz: ## run each fuzz target on new inputs for FUZZTIME (default 10000x; Nx for N executions, or a duration); make test runs their seed corpora only
	$(GO) test -vet=off -run '^$$' -fuzz '^FuzzParseSpec$$' -fuzztime $(FUZZTIME) ./internal/spec
	$(GO) test -vet=off -run '^$$' -fuzz '^FuzzRenderTemplate$$' -fuzztime $(FUZZTIME) ./internal/spec
	$(GO) test -vet=off -run '^$$' -fuzz '^FuzzDecodePayload$$' -fuzztime $(FUZZTIME) ./tasks
	$(GO) test -vet=off -run '^$$' -fuzz '^FuzzParseJSONAnswer$$' -fuzztime $(FUZZTIME) ./internal/spec
	$(GO) test -vet=off -run '^$$' -fuzz '^FuzzClassify$$' -fuzztime $(FUZZTIME) ./retry
	$(GO) test -vet=off -run '^$$' -fuzz '^FuzzParseScenario$$' -fuzztime $(FUZZTIME) ./internal/chaosllm
	$(GO) test -vet=off -run '^$$' -fuzz '^FuzzParseRequest$$' -fuzztime $(FUZZTIME) ./internal/chaosllm
	$(GO) test -vet=off -run '^$$' -fuzz '^FuzzRedact$$' -fuzztime $(FUZZTIME) ./redact
	$(GO) test -vet=off -run '^$$' -fuzz '^FuzzRedactAnySecret$$' -fuzztime $(FUZZTIME) ./redact

clean: ## remove build output
	rm -rf $(BIN)

DRILL_WORKFLOWS ?= 300
DRILL_MAP_ITEMS ?= 100
DRILL_DETACH ?= 3m
drill: ## the failover drills at full size (Sentinel and Cluster, redis.durability on; needs redis-server): DRILL_WORKFLOWS workflows each (maps of DRILL_MAP_ITEMS), replicas away DRILL_DETACH; figures in the -v output (no -race: it times failovers, and make test runs the same drills under -race at a small size)
	AGENTQ_DRILL_WORKFLOWS=$(DRILL_WORKFLOWS) AGENTQ_DRILL_MAP_ITEMS=$(DRILL_MAP_ITEMS) AGENTQ_DRILL_DETACH=$(DRILL_DETACH) \
		$(GO) test -run 'FailoverDrill|WithoutUsingRetries' -v -count 1 -timeout 60m ./internal/engine

bench: ## orchestration vs bare asynq and Celery, resources, hot path, outage drills, RSS under hostile bodies (not part of make test; bench/README.md)
	$(GO) run ./bench -chords 1000 -members 10 -chains 300 -length 10 -runs 3 -floor -celery -resources 50,500 -json bench/last.json
	$(GO) run ./bench -chords 300 -members 10 -chains 100 -latency 20ms
	$(GO) run ./bench -codestep -chords 1000 -members 10 -chains 300 -length 10 -runs 3 && $(GO) run ./bench -codestep -chords 300 -members 10 -chains 100 -length 10 -latency 20ms -runs 3
	$(GO) test -run '^$$' -bench . -benchmem ./retry ./llmclient ./internal/store ./internal/engine ./internal/mcptool
	$(GO) run ./bench/drill -out bench/reports bench/scenarios/*.yaml
	$(GO) run ./bench/hostile -window 30s -parallel 8
