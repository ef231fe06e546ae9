package dynamolock

import (
	"context"
	"errors"
	"log/slog"
	"sync"

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

// givenUp is a take-back of a session's lock waiting to be sent again.
type givenUp struct {
	s   *Session
	key string
	in  *dynamodb.UpdateItemInput
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
	if s == nil || !s.lock.held() {
		return
	}
	g := &c.giveUps
	g.mu.Lock()
	g.pending = append(g.pending, givenUp{s: s, key: key, in: in})
	start := !g.running
	g.running = true
	g.mu.Unlock()
	c.cfg.logger.LogAttrs(context.Background(), slog.LevelWarn,
		"a lock held by this client's session was given up without a confirmed release; its release is sent again until it lands",
		slogKey(key))
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
			if err == nil || errors.As(err, &ccf) {
				c.cfg.logger.LogAttrs(context.Background(), slog.LevelInfo, "a lock given up earlier is released", slogKey(u.key))
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
