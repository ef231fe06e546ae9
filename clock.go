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
