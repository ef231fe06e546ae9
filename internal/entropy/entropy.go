// Package entropy is where the library draws randomness: record version
// numbers, owner-name suffixes and fair-queue ids (Read), and retry and
// polling jitter (Int64N). Production uses crypto/rand and math/rand/v2's
// global source. The deterministic simulation (internal/sim) replaces both
// before it starts, so that one seed gives one run; nothing else may set
// them.
package entropy

import (
	crand "crypto/rand"
	mrand "math/rand/v2"
)

// Read fills b with random bytes.
var Read = func(b []byte) { _, _ = crand.Read(b) }

// Int64N returns a random number in [0, n); n > 0.
var Int64N = mrand.Int64N
