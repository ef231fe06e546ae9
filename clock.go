package dynamolock

import (
	"context"
	"time"

	"github.com/arielsrv/dynamolock/v2/internal/clock"
)

// The client reads time and waits only through the methods below, on its
// clock (clock.Real unless the simulation gave it another): this file is the
// library's one time seam, and TestTimeHasOneSeam keeps it so.

func init() {
	clock.ClientOption = func(k clock.Clock) any {
		return ClientOption(func(c *Client) { c.cfg.clock = k })
	}
}

// deadlinePassed reports whether ctx has a deadline that has passed.
// Context deadlines are instants of the process's clock (time.Now; the
// simulation's per-client clocks put theirs there too), whatever the
// client's clock reads.
func deadlinePassed(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// now returns the current time by the client's clock.
func (c *Client) now() time.Time { return c.cfg.clock.Now() }

// since returns the time passed since t by the client's clock.
func (c *Client) since(t time.Time) time.Duration { return c.cfg.clock.Now().Sub(t) }

// until returns the time left until t by the client's clock.
func (c *Client) until(t time.Time) time.Duration { return t.Sub(c.cfg.clock.Now()) }

// newTimer returns a timer of the client's clock.
func (c *Client) newTimer(d time.Duration) clock.Timer { return c.cfg.clock.NewTimer(d) }

// withTimeout is context.WithTimeout on the client's clock, for the work
// the client does on its own (clean-ups, undo, a session's start): it also
// ends when the context given to Close ends (Client.abandon), so that
// CloseWithContext returns by its deadline, whatever its clean-ups were
// given.
func (c *Client) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := c.cfg.clock.WithDeadline(ctx, c.cfg.clock.Now().Add(d))
	if c.abandoned == nil {
		return ctx, cancel
	}
	stop := context.AfterFunc(c.abandoned, cancel)
	return ctx, func() { stop(); cancel() }
}

// withDeadline is context.WithDeadline on the client's clock.
func (c *Client) withDeadline(ctx context.Context, t time.Time) (context.Context, context.CancelFunc) {
	return c.cfg.clock.WithDeadline(ctx, t)
}

// now returns the current time by the clock of the lock's client.
func (l *Lock) now() time.Time { return l.client.now() }

// callTimeout bounds each DynamoDB call the library sends, the SDK's own
// retries of it included, until DynamoDB has answered the client: an
// endpoint that accepts connections and never answers (a listener that is
// not DynamoDB, a black-holed route) ends the first call with a
// *ConnectionError after the same wait as an endpoint that refuses them
// (unreachableWait), rather than keep it, and whatever waits on it, for
// ever: the SDK's HTTP client has no such bound. Once DynamoDB has
// answered, a call is bounded by the client's lease instead, if longer
// (see callBound): DynamoDB answers in milliseconds, and no answer that
// comes later than a lease can keep or take a lock that the lease would
// still cover, while a slow backend is not cut off before that.
const callTimeout = unreachableWait

// callBound is the bound of one call (see callTimeout).
func (c *Client) callBound() time.Duration {
	if c.answered.Load() {
		return max(callTimeout, c.cfg.leaseDuration)
	}
	return callTimeout
}

// minCallTime is the least time a call of an acquisition is given when
// the wait it serves is about to end, or has ended (see withCallBound). A
// takeover's write comes in the wait's last second, or just after its end
// (the holder must be seen unrenewed for a lease, and a read answered at
// the end may show it so): a healthy DynamoDB answers it in milliseconds,
// a loaded one in a few hundred, and a second lets it land rather than cut
// it into a write of unknown outcome to undo. A silent network is not
// waited on longer for it: the first call that gets no answer spans the
// wait and ends with it.
const minCallTime = time.Second

// lateCallTime is the least time the undo of a failed acquisition's writes
// is given (see acquisition.undoBound): it may free the key at once, and
// the lease frees it anyway.
const lateCallTime = 100 * time.Millisecond

type callBoundKey struct{}

type callBoundValue struct {
	until time.Time
	floor time.Duration
}

// withCallBound makes the calls sent with ctx end by until (on the
// client's clock) as well, but each given at least floor: the end of an
// acquisition's wait, so that a call with no answer does not keep the
// acquisition past the wait its caller was promised.
func withCallBound(ctx context.Context, until time.Time, floor time.Duration) context.Context {
	return context.WithValue(ctx, callBoundKey{}, callBoundValue{until, floor})
}

// bounded returns ctx bounded by callBound (or sooner by its call bound,
// see withCallBound) for one call of op, and the function that ends it: given
// the call's error, it returns the *ConnectionError that says no answer
// came when the bound, not ctx, ended the call. A ctx that ends sooner
// keeps its own deadline (and costs no timer).
func (c *Client) bounded(ctx context.Context, op string) (context.Context, func(error) error) {
	d := c.callBound()
	if b, ok := ctx.Value(callBoundKey{}).(callBoundValue); ok {
		d = min(d, max(c.until(b.until), b.floor))
	}
	if dl, ok := ctx.Deadline(); ok && c.until(dl) <= d {
		return ctx, keepErr
	}
	bctx, cancel := c.cfg.clock.WithDeadline(ctx, c.cfg.clock.Now().Add(d))
	return bctx, func(err error) error {
		bound := bctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err != nil && bound {
			return c.noAnswer(op, d, err)
		}
		return err
	}
}

func keepErr(err error) error { return err }
