// Package clock is the library's one seam for time: every reading of the
// clock and every wait of the lock client goes through a Clock, which
// production wires to the real clock (Real) and the deterministic
// simulation (internal/sim) replaces per client, to give each simulated
// host its own wall-clock offset, rate error and process pauses.
//
// A simulated client gets its Clock through ClientOption, which the root
// package sets when it is initialised. It is the smallest way to give one
// client its own clock that users cannot reach: an internal package cannot
// be imported from outside this module, so no exported option or variable
// of the library carries it, and a package variable (as internal/entropy
// uses) could not tell one client's clock from another's.
package clock

import (
	"context"
	"time"
)

// Clock is where a client reads time and waits.
type Clock interface {
	// Now returns the current time, with a monotonic reading where the
	// clock has one; durations come from differences of two Now.
	Now() time.Time
	// NewTimer returns a timer that sends on its channel once d has passed
	// by this clock, with time.NewTimer's semantics since Go 1.23: after
	// Stop or Reset returns, no stale value is received.
	NewTimer(d time.Duration) Timer
	// WithDeadline returns a copy of ctx that ends, with
	// context.DeadlineExceeded, when this clock reaches t.
	WithDeadline(ctx context.Context, t time.Time) (context.Context, context.CancelFunc)
}

// Timer is a timer of a Clock.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Real is the host's clock: the time package and context's deadlines.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (realClock) WithDeadline(ctx context.Context, t time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, t)
}

type realTimer struct{ *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.Timer.C }

// ClientOption returns a dynamolock.ClientOption (as any: this package
// cannot name the type) that makes the client read time and wait through
// c. The root package sets it at initialisation; only the simulation
// and tests call it.
var ClientOption func(c Clock) any
