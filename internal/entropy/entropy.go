// Package entropy is where the library draws randomness: record version
// numbers, owner-name suffixes and fair-queue ids (Read), and retry and
// polling jitter (Int64N). Production uses crypto/rand and math/rand/v2's
// global source. The deterministic simulation (internal/sim) replaces both
// before it starts, so that one seed gives one run, and the root package's
// TestGoldenRequests while it runs (it is not parallel); nothing else may
// set them.
//
// A draw made for a held lock (its next heartbeat's record version number,
// the jitter of a heartbeat's retry) names the lock: its partition key and
// the record version number it holds, which no other held lock of the
// client has together; other draws pass "", "". Production ignores the
// names. The simulation keys a draw by the virtual instant, the drawing
// goroutine's call stack and the names, so that goroutines with one call
// stack drawing at one instant for different locks (a client's heartbeat
// workers) get the same numbers whichever of them the Go scheduler runs
// first.
package entropy

import (
	crand "crypto/rand"
	mrand "math/rand/v2"
)

// Read fills b with random bytes, for the lock (key, rvn) if named.
var Read = func(b []byte, key, rvn string) { _, _ = crand.Read(b) }

// Int64N returns a random number in [0, n), for the lock (key, rvn) if
// named; n > 0.
var Int64N = func(n int64, key, rvn string) int64 { return mrand.Int64N(n) }
