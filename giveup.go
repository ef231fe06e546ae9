package dynamolock

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A lock this client gives up without a confirmed release (a best-effort
// release whose send failed, a release whose outcome is unknown, a reader's
// alike, an acquisition whose undo failed) frees itself one lease later
// when it has a lease of its own: nobody renews it. A session's lock has
// none: the live session keeps it held for as long as the client runs. So
// its take-back is sent again, once a heartbeat period, until DynamoDB
// answers it (applied, or its condition failed: the item is not that
// write's any more), the session ends (which frees every lock of it), or
// Close begins (which ends the session). docs/SESSIONS.md, "give-ups".
//
// An acquiring write whose answer was lost may not have landed yet when
// its take-back is answered: it may be on its way still (a delayed
// request, a copy the SDK sent before it retried), and land on a free key
// later. Under a session nothing would then free that item: it names the
// live session, and no lock of this client holds it. So the take-back of
// a write in doubt under a session is sent again, whatever it answers,
// until the write can no longer land (writeLandsWithin after the call
// that sent it gave up).

// writeLandsWithin bounds how long after its last send a write can still
// land. DynamoDB accepts a signed request at most 5 minutes after the time
// it was signed at, by DynamoDB's clock, and refuses one signed more than
// 5 minutes in its future; the SDK signs every attempt anew, with its
// clock. A write sent at t (by this client's clock) therefore lands before
// t + 10 minutes, however far this client's wall clock is off: further
// than 5 minutes, DynamoDB refuses the request at once (docs/SESSIONS.md,
// "Writes in doubt").
const writeLandsWithin = 10 * time.Minute

// givenUp is a take-back of a session's lock waiting to be sent again.
type givenUp struct {
	s   *Session
	key string
	in  *dynamodb.UpdateItemInput
	// until is when the write it takes back can no longer land (a write in
	// doubt): sent again until then, whatever it answers. Zero: until it
	// is answered.
	until time.Time
}

// giveUps is the client's take-backs to send again; one goroutine sends
// them, while there are any.
type giveUps struct {
	mu      sync.Mutex
	pending []givenUp
	running bool
}

// freeLater sends in, the take-back of a write held by session s on key,
// again until it is answered (see above). Nothing when s is nil (the lock
// has a lease of its own) or has ended.
func (c *Client) freeLater(s *Session, key string, in *dynamodb.UpdateItemInput) {
	c.giveUp(givenUp{s: s, key: key, in: in}, "a lock held by this client's session was given up without a confirmed release; its release is sent again until it lands")
}

// takeBackInDoubt sends in, the take-back of an acquiring write under
// session s on key that may still land, again until that write can no
// longer land (see writeLandsWithin), whatever the take-backs answer.
// Nothing when s is nil or has ended.
func (c *Client) takeBackInDoubt(s *Session, key string, in *dynamodb.UpdateItemInput) {
	c.giveUp(givenUp{s: s, key: key, in: in, until: c.now().Add(writeLandsWithin)},
		"an acquiring write under this client's session may still land after it was taken back; its take-back is sent again until it can no longer land")
}

// giveUp adds u to the take-backs sent again, and starts their sender.
func (c *Client) giveUp(u givenUp, why string) {
	if u.s == nil || !u.s.lock.held() {
		return
	}
	g := &c.giveUps
	g.mu.Lock()
	g.pending = append(g.pending, u)
	start := !g.running
	g.running = true
	g.mu.Unlock()
	c.cfg.logger.LogAttrs(context.Background(), slog.LevelWarn, why, slogKey(u.key))
	if !start {
		return
	}
	c.mu.RLock()
	if c.closed {
		// Close ends the session, which frees every lock of it.
		c.mu.RUnlock()
		g.mu.Lock()
		g.pending, g.running = nil, false
		g.mu.Unlock()
		return
	}
	c.cleanups.Add(1) // Close waits for it; it ends as Close begins
	c.mu.RUnlock()
	go func() {
		defer c.cleanups.Done()
		c.sendGiveUps()
	}()
}

// sendGiveUps sends the pending take-backs once a heartbeat period until
// none is left, or Close begins.
func (c *Client) sendGiveUps() {
	g := &c.giveUps
	for {
		t := c.newTimer(c.cfg.heartbeatPeriod)
		select {
		case <-t.C():
		case <-c.closing:
			t.Stop()
			g.mu.Lock()
			g.pending, g.running = nil, false
			g.mu.Unlock()
			return
		}
		g.mu.Lock()
		batch := g.pending
		g.pending = nil
		g.mu.Unlock()
		var left []givenUp
		for _, u := range batch {
			if !u.s.lock.held() {
				continue // the session ended: every lock of it is free
			}
			ctx, cancel := c.closingContext(context.Background())
			cctx, ccancel := c.withTimeout(ctx, undoTimeout)
			_, err := c.updateItem(cctx, u.in)
			ccancel()
			cancel()
			var ccf *types.ConditionalCheckFailedException
			answered := err == nil || errors.As(err, &ccf)
			switch {
			case answered && err == nil && !u.until.IsZero():
				c.cfg.logger.LogAttrs(context.Background(), slog.LevelWarn, "an acquiring write given up earlier landed late, and is released", slogKey(u.key))
			case answered && u.until.IsZero():
				c.cfg.logger.LogAttrs(context.Background(), slog.LevelInfo, "a lock given up earlier is released", slogKey(u.key))
			}
			if answered && !c.now().Before(u.until) {
				continue
			}
			left = append(left, u)
		}
		g.mu.Lock()
		g.pending = append(left, g.pending...)
		if len(g.pending) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
	}
}
