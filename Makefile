# junban: `make demo` runs the whole thing, `make test` runs every test.
GO        ?= go
BIN       := bin
BINARIES  := order-worker persist-worker webhook-gateway junban-api junbanctl
TEST_FLAGS ?= -race -count=1 -timeout 14m

.PHONY: all build stack stack-down stack-status migrate test vet demo console-screenshots chaos bench bench-lock bench-alloc bench-persist bench-e2e clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ $(addprefix ./cmd/,$(BINARIES))

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

## test: every test, against the real Redis, PostgreSQL and SQS emulator (started if absent)
test: stack vet
	$(GO) test $(TEST_FLAGS) ./...

## console-screenshots: the console's browser test (headless Chromium, installed by
## scripts/chromium.sh when missing) writes its PNGs into docs/console/
console-screenshots: stack
	@scripts/chromium.sh >/dev/null
	@mkdir -p docs/console
	JUNBAN_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -run "TestConsoleInBrowser|TestConsoleSkipsAStuckTurn" -v ./internal/console/ | grep -E '^(---|ok|FAIL|    browser_test.go)'

## demo: stack up, migrate, the binaries, a sample workload, a summary
demo: build stack
	@scripts/demo.sh

## chaos: fault injection under load (own Redis and PostgreSQL), then the invariants
chaos: build stack
	$(BIN)/junbanctl chaos --events 10000 --bin $(BIN)

## benchmarks: each prints its figures and compares with its baseline in the same run
bench: bench-lock bench-alloc bench-persist bench-e2e

bench-lock: build stack
	$(BIN)/junbanctl bench lock --duration 10s

bench-alloc: build stack
	$(BIN)/junbanctl bench alloc --duration 5s

bench-persist: build stack
	$(BIN)/junbanctl bench persist --duration 10s

bench-e2e: build stack
	$(BIN)/junbanctl bench e2e --duration 60s

clean:
	rm -rf $(BIN)
