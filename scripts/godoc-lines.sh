#!/usr/bin/env bash
# How long the way into the package's documentation is: for `go doc` and
# `go doc -all` of the package in the current directory (the repository's
# root by default), the lines printed, and the lines before the first
# complete example: the first block of consecutive non-blank lines that
# makes a client (dynamolock.New) and takes a lock (.Do, .AcquireLock...,
# .Campaign, .RLock or .Lock).
#
#   bash scripts/godoc-lines.sh [DIR]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
for flags in "" "-all"; do
	go doc $flags . | awk -v what="go doc${flags:+ $flags}" '
		/^[[:space:]]*$/ { start = 0; made = 0; next }
		{ if (!start) start = NR }
		/dynamolock\.New\(/ { made = 1 }
		made && /\.(Do|AcquireLock[A-Za-z]*|Campaign|RLock|Lock)\(/ && !found { found = start }
		END {
			if (found) printf "%s: %d lines; %d before the first complete example\n", what, NR, found - 1
			else printf "%s: %d lines; no complete example (all %d before it)\n", what, NR, NR
		}'
done
