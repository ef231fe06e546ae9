package dynamolock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

// TestRWLockReaderTokenSurvivesAFailedSessionRead: a reader's granting
// write is answered (ALL_NEW) and shows a reader entry held by a session
// (the reader's own, under WithSession, or another client's). Learning
// that answer reads the session's item; when that read failed with a
// transient error, the view was forgotten before the reader's record was
// built from it, and the reader was returned with fencing token 0 instead
// of the item's token.
func TestRWLockReaderTokenSurvivesAFailedSessionRead(t *testing.T) {
	for _, own := range []bool{true, false} {
		t.Run(map[bool]string{true: "own session", false: "another client's session"}[own], func(t *testing.T) {
			table := newTable(t, "")
			db, _ := newDB(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// A writer gives the item a token, then leaves.
			writer := newClient(t, db, table, rwOpts...)
			w, err := newRW(t, writer, "k").Lock(ctx)
			require.NoError(t, err)
			require.NoError(t, w.Close())
			if !own {
				// Another client's reader, held by its session.
				holder := newClient(t, db, table, sessionOpts...)
				r0, err := newRW(t, holder, "k").RLock(ctx)
				require.NoError(t, err)
				require.Equal(t, w.FencingToken(), r0.FencingToken())
			}
			// Every read of an item other than the lock's (a session's) fails
			// once armed, as a connection reset does.
			var armed atomic.Bool
			sessionRead := &faults.Rule{Op: "GetItem", Times: 1, Drop: true, Match: func(in any) bool {
				g, _ := in.(*dynamodb.GetItemInput)
				k, _ := g.Key["key"].(*types.AttributeValueMemberS)
				return armed.Load() && (k == nil || k.Value != "k")
			}}
			fdb := faults.Wrap(db, sessionRead)
			opts := rwOpts
			if own {
				opts = sessionOpts
			}
			c := newClient(t, fdb, table, opts...)
			if own {
				_, err := c.Session(ctx) // started before the rule is armed
				require.NoError(t, err)
			}
			armed.Store(true)
			r, err := newRW(t, c, "k").RLock(ctx, rwFast)
			require.NoError(t, err)
			require.Equal(t, 1, fdb.Hits(sessionRead), "the session's read failed")
			require.Equal(t, w.FencingToken(), r.FencingToken(), "a reader after a writer has the writer's token")
			require.NoError(t, r.Close())
		})
	}
}
