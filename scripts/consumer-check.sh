#!/usr/bin/env bash
# The library's module must cost its users nothing beyond what it uses.
#
# Builds a throwaway consumer module in a temporary directory: a program that
# imports only the root package, required with a replace directive pointing
# at this checkout, tidied as a new user's would be (`go mod tidy`). Then
# counts its build list (`go list -m all`) without the consumer itself, the
# library and the AWS SDK's modules (github.com/aws/...), and fails when more
# than MAX_OTHERS remain, printing them.
#
#   scripts/consumer-check.sh            check (exit 1 above the bound)
#   CONSUMER_CHECK_MAX=N scripts/...     another bound (default 19)
#
# The bound was 13 until issue 62: tracing defaults to OpenTelemetry's
# global tracer provider (as its instrumentation libraries do), and the
# package that holds it imports go.opentelemetry.io/auto/sdk, whose go.mod
# lists testify and its dependencies (go-spew, go-difflib, yaml.v3,
# check.v1, kr/pretty, go-internal): six modules in the build list, none
# compiled into the program, and already in the build of any program that
# uses OpenTelemetry's global API.
#
# Needs the module proxy (or a module cache holding every module in the
# build list); touches nothing in the checkout.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MAX_OTHERS="${CONSUMER_CHECK_MAX:-19}"
LIB="$(cd "$ROOT" && go list -m)"
CONSUMER="example.com/dynamolock-consumer"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cat >"$work/main.go" <<'EOF'
// Command consumer uses the library as a new user would: its root package only.
package main

import (
	"fmt"

	"github.com/arielsrv/dynamolock/v2"
)

func main() {
	fmt.Println(dynamolock.DefaultLeaseDuration)
}
EOF

cd "$work"
# GOFLAGS=-mod=mod would let tidy behave differently from a user's; the
# consumer is a plain module outside any workspace.
export GOWORK=off GOFLAGS=
go mod init "$CONSUMER" >/dev/null 2>&1
go mod edit -require="$LIB@v2.0.0" -replace="$LIB=$ROOT"
go mod tidy >/dev/null
go build -o /dev/null . # the consumer must also build

all="$(go list -m all | awk '{print $1 (NF > 1 ? " " $2 : "")}')"
total="$(grep -c . <<<"$all")"
aws="$(awk '$1 ~ /^github\.com\/aws\//' <<<"$all" | grep -c . || true)"
others="$(awk -v me="$CONSUMER" -v lib="$LIB" \
  '$1 != me && $1 != lib && $1 !~ /^github\.com\/aws\//' <<<"$all")"
n="$(grep -c . <<<"$others" || true)"

echo "consumer-check: build list of a consumer of $LIB: $total modules" \
  "(itself, the library, $aws github.com/aws/*, $n others; bound $MAX_OTHERS)"
if (( n > MAX_OTHERS )); then
  echo "consumer-check: FAIL: $n modules besides the consumer, the library and the AWS SDK:" >&2
  sed 's/^/  /' <<<"$others" >&2
  exit 1
fi
sed 's/^/  /' <<<"$others"
