# junban: `make demo` runs the whole thing, `make test` runs every test, `make test-unit` the
# ones that need no service, `make lint` golangci-lint.
GO        ?= go
BIN       := bin
BINARIES  := order-worker persist-worker webhook-gateway junban-api junbanctl
# junban's lab (load, benchmarks, chaos): a module of its own (tools/go.mod), built beside
# the binaries, which link none of it. Every Go target below runs in both modules.
TOOLS     := junbanlab
LAB       := tools
# The two modules are always built apart: a developer's own go.work changes nothing here.
export GOWORK := off
TEST_FLAGS ?= -race -count=1 -timeout 14m
# The pinned golangci-lint: `go run` builds it once into the Go build cache.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT ?= $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
# The binaries, junbanctl, junbanlab and the tests read the stack's endpoints only from the
# file this names: nothing finds .junban/stack.env by itself.
export JUNBAN_STACK_ENV ?= $(CURDIR)/.junban/stack.env

.PHONY: all build release stack stack-down stack-status migrate test test-unit test-rules promtool test-other-sqs vet lint demo console-screenshots chaos bench bench-lock bench-alloc bench-persist bench-e2e bench-api bench-cost bench-cost-baseline bench-expiry bench-queue clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ $(addprefix ./cmd/,$(BINARIES))
	cd $(LAB) && $(GO) build -o $(CURDIR)/$(BIN)/ $(addprefix ./cmd/,$(TOOLS))

## release: every binary for linux/amd64 and linux/arm64, the SBOM (CycloneDX), VERSION and
## SHA256SUMS into dist/<git describe>/ (scripts/release.sh; RELEASE_FLAGS=--dry-run prints it)
RELEASE_FLAGS ?=
release:
	@scripts/release.sh $(RELEASE_FLAGS)

stack:
	@scripts/stack.sh up

stack-down:
	@scripts/stack.sh down

stack-status:
	@scripts/stack.sh status

migrate: build stack
	$(BIN)/junbanctl migrate

vet:
	$(GO) vet ./...
	cd $(LAB) && $(GO) vet ./...

## lint: golangci-lint with .golangci.yml (linters and formatting)
lint:
	$(GOLANGCI_LINT) run ./...
	cd $(LAB) && $(GOLANGCI_LINT) run ./...

# Examples with an Output comment that need Redis: an example cannot skip itself.
UNIT_SKIP := ^(Example|ExampleTurn_Trim)$$

## test-unit: the tests that need no service, binary or server process (under -short,
## internal/testenv skips every test that asks it for one); no stack. The tests themselves
## take about 15 s; the first run spends 2-3 minutes building their binaries on a 2-core
## machine. Go's test cache then keeps the results of the packages an edit did not touch,
## so a rerun builds and runs only those it did; UNIT_FLAGS=-count=1 reruns them all.
UNIT_FLAGS ?=
test-unit:
	$(GO) test -short $(UNIT_FLAGS) -skip '$(UNIT_SKIP)' ./...
	cd $(LAB) && $(GO) test -short $(UNIT_FLAGS) -skip '$(UNIT_SKIP)' ./...

## test-rules: promtool (installed by scripts/promtool.sh when missing) checks the Prometheus
## rules in deploy/prometheus and runs their unit tests. `make test` installs promtool and
## go test ./deploy/ runs the same (TestPrometheusRulesWithPromtool).
test-rules:
	@promtool=$$(scripts/promtool.sh) && cd deploy/prometheus && \
	  $$promtool check rules junban-rules.yaml && $$promtool test rules junban-rules_test.yaml

promtool:
	@scripts/promtool.sh >/dev/null

## test: every test, against the real Redis, PostgreSQL and SQS emulator (started if absent),
## then the queue, end-to-end and DLQ tests again on the second emulator
test: stack vet promtool
	$(GO) test $(TEST_FLAGS) ./...
	cd $(LAB) && $(GO) test $(TEST_FLAGS) ./...
	@$(MAKE) --no-print-directory test-other-sqs

# The tests that depend most on how the SQS server behaves: the queue package, the end
# to end run, and every DLQ path (the consumer's Poison, SQS's redrive, junbanctl dlq).
OTHER_SQS_PACKAGES := ./internal/queue/ ./e2e/
OTHER_SQS_DLQ      := ./cmd/junbanctl/ ./cmd/order-worker/ ./internal/postgres/persist/
OTHER_SQS_DLQ_RUN  := TestDLQ|TestPoison|TestConsumerPoison

## test-other-sqs: the queue, e2e and DLQ tests on the emulator that AWS_ENDPOINT_URL_SQS
## does not name (local-aws-sqs by default; none when AWS_ENDPOINT_URL_SQS was given)
test-other-sqs: stack
	@set -e; other=$$(scripts/stack.sh other-sqs); \
	if [ -z "$$other" ]; then echo "test-other-sqs: no second SQS emulator (AWS_ENDPOINT_URL_SQS was given): skipped"; exit 0; fi; \
	ep=$${other#* }; echo "== queue, e2e and DLQ tests on $${other% *} ($$ep) =="; \
	AWS_ENDPOINT_URL_SQS=$$ep $(GO) test $(TEST_FLAGS) $(OTHER_SQS_PACKAGES); \
	AWS_ENDPOINT_URL_SQS=$$ep $(GO) test $(TEST_FLAGS) -run '$(OTHER_SQS_DLQ_RUN)' $(OTHER_SQS_DLQ)

## console-screenshots: the console's browser test (headless Chromium, installed by
## scripts/chromium.sh when missing) writes its PNGs into docs/console/
console-screenshots: stack
	@scripts/chromium.sh >/dev/null
	@mkdir -p docs/console
	cd $(LAB) && JUNBAN_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -run "TestConsoleInBrowser|TestConsoleSkipsAStuckTurn" -v ./consolebrowser/ | grep -E '^(---|ok|FAIL|    browser_test.go)'

## demo: stack up, migrate, the binaries, a sample workload, a summary
demo: build stack
	@scripts/demo.sh

## chaos: fault injection under load (own Redis and PostgreSQL), then the invariants; then the
## Redis Cluster failover three times in a row (abandoned holds, every Redis connection cut
## every 3 s, JUNBAN_REDIS_MIN_REPLICAS=1), a line per run; then two replicas per master
## (MIN_REPLICAS 1, then 2) and a replica restarted from its AOF before its promotion
CHAOS_FAILOVER := --redis-cluster --no-baseline --bin $(BIN)
## Every scenario runs; the target fails at the end if any did.
chaos: build stack
	@failed=""; \
	$(BIN)/junbanlab chaos --events 10000 --bin $(BIN) || failed="$$failed single-Redis"; \
	$(BIN)/junbanlab chaos --locations --events 4000 --duration 30s --bin $(BIN) || failed="$$failed locations"; \
	$(BIN)/junbanlab chaos $(CHAOS_FAILOVER) --runs 3 --cut-connections --events 10000 || failed="$$failed failover-x3"; \
	$(BIN)/junbanlab chaos $(CHAOS_FAILOVER) --replicas 2 --min-replicas 1 --events 4000 --duration 30s || failed="$$failed replicas-2-min-1"; \
	$(BIN)/junbanlab chaos $(CHAOS_FAILOVER) --replicas 2 --min-replicas 2 --events 4000 --duration 30s || failed="$$failed replicas-2-min-2"; \
	$(BIN)/junbanlab chaos $(CHAOS_FAILOVER) --replica-restart --events 4000 --duration 30s || failed="$$failed replica-restart"; \
	if [ -n "$$failed" ]; then echo "make chaos: failed:$$failed" >&2; exit 1; fi

## benchmarks: each prints its figures and compares with its baseline in the same run
bench: bench-lock bench-alloc bench-persist bench-e2e bench-api bench-queue

bench-lock: build stack
	$(BIN)/junbanlab bench lock --duration 10s

bench-alloc: build stack
	$(BIN)/junbanlab bench alloc --duration 5s

bench-persist: build stack
	$(BIN)/junbanlab bench persist --duration 10s

bench-e2e: build stack
	$(BIN)/junbanlab bench e2e --duration 60s

bench-api: build stack
	$(BIN)/junbanlab bench api

bench-queue: build stack
	$(BIN)/junbanlab bench queue

## bench-cost and bench-expiry are not in `make bench` (each runs a whole fleet for minutes):
## what one event costs at 300 events/s, and the delay of thousands of holds expiring at once
bench-cost: build stack
	$(BIN)/junbanlab bench cost

## bench-cost-baseline: bench cost three times, each run beside issue 34's baseline tree
## (BASELINE_REV, built from git into bin/baseline-<rev>) on the same load: ratios that
## hold on any machine (docs/performance.md, "Method")
BASELINE_REV ?= c3ab7ea9a39744ebecc709da2fb65b40370244a0
BASELINE_BIN := $(BIN)/baseline-$(BASELINE_REV)
bench-cost-baseline: build stack $(BASELINE_BIN)/order-worker
	$(BIN)/junbanlab bench cost --runs 3 --idle 0 --baseline-bin $(BASELINE_BIN)

$(BASELINE_BIN)/order-worker:
	@git cat-file -e $(BASELINE_REV)^{commit} 2>/dev/null || { echo "bench-cost-baseline: $(BASELINE_REV) is not in this clone (a shallow clone? git fetch --unshallow)" >&2; exit 1; }
	@tree=$$(mktemp -d) && trap 'rm -rf "$$tree"' EXIT && \
	  git archive $(BASELINE_REV) | tar -x -C "$$tree" && \
	  (cd "$$tree" && $(GO) build -o $(CURDIR)/$(BASELINE_BIN)/ ./cmd/order-worker ./cmd/persist-worker)

bench-expiry: build stack
	$(BIN)/junbanlab bench expiry

clean:
	rm -rf $(BIN) dist
