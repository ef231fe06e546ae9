package dynamolock_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

// A process that kept its lock's token gets the lock back after a restart
// (a new client, with a new owner name) in one UpdateItem, within 100 ms:
// the fencing token moves on, the data stays, the old process's guarded
// writes are refused and it learns of the loss at its next heartbeat.
func TestResumeLockAfterRestart(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	old := newClient(t, db, table, append(fast, dynamolock.WithOwnerName("before-restart"))...)
	ctx := context.Background()
	l, err := old.AcquireLockWithContext(ctx, "job", dynamolock.WithData([]byte("state")))
	require.NoError(t, err)
	token := l.ResumeToken()
	require.True(t, strings.HasPrefix(token, "dlr1."), token)
	sent := old.Stats().HeartbeatsSent
	waitFor(t, 3*time.Second, "a renewal", func() bool { return old.Stats().HeartbeatsSent > sent })
	require.Equal(t, token, l.ResumeToken(), "renewals do not change the token")
	require.NoError(t, guardedPut(ctx, db, table, l, "before", 1))

	db2, cc := newDB(t)
	restarted := newClient(t, db2, table, append(fast, dynamolock.WithOwnerName("after-restart"))...)
	cc.reset()
	start := time.Now()
	r, err := restarted.ResumeLock(ctx, token)
	took := time.Since(start)
	require.NoError(t, err)
	calls := tableChecked(t, cc.reset())
	t.Logf("resumed in %s with %v", took, calls)
	assert.Equal(t, map[string]int{"UpdateItem": 1}, calls, "one conditional write")
	assert.Less(t, took, 100*time.Millisecond)
	assert.Equal(t, "after-restart", r.OwnerName())
	assert.Equal(t, l.FencingToken()+1, r.FencingToken())
	assert.Equal(t, "state", string(r.Data()))
	require.NoError(t, r.Err())
	assert.NotEqual(t, token, r.ResumeToken(), "a new acquisition: a new token")

	var tce *types.TransactionCanceledException
	require.ErrorAs(t, guardedPut(ctx, db, table, l, "zombie", 1), &tce, "the old process's guarded write is refused")
	require.NoError(t, guardedPut(ctx, db, table, r, "resumed", 1))
	require.True(t, closedWithin(l.Done(), 2*time.Second), "the old process learns at its next heartbeat")
	require.ErrorIs(t, l.Err(), dynamolock.ErrLockTakenOver)
	require.NoError(t, r.Err(), "the resumed lock is renewed")
	time.Sleep(1200 * time.Millisecond) // past the old lease: the resumed lock was renewed meanwhile
	require.NoError(t, r.Err())
	got, err := old.Get("job")
	require.NoError(t, err)
	assert.Equal(t, "after-restart", got.OwnerName())
	ok, err := restarted.ReleaseLock(r)
	require.NoError(t, err)
	require.True(t, ok)
}

// Every refusal is a LockNotGrantedError saying which case, and leaves the
// item as it was; a token that cannot be this client's is refused before
// any call.
func TestResumeLockRefusals(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	holder := newClient(t, db, table, append(fast, dynamolock.WithOwnerName("holder"))...)
	rdb, cc := newDB(t)
	resumer := newClient(t, rdb, table, append(fast, dynamolock.WithOwnerName("resumer"))...)
	refused := func(t *testing.T, key, token string, cause error, says string) {
		t.Helper()
		before := rawItem(t, db, table, keyOf(key))
		cc.reset()
		_, err := resumer.ResumeLock(ctx, token)
		var lng *dynamolock.LockNotGrantedError
		require.ErrorAs(t, err, &lng)
		require.ErrorIs(t, err, cause)
		assert.Contains(t, err.Error(), says)
		assert.Equal(t, before, rawItem(t, db, table, keyOf(key)), "no write landed")
		calls := cc.reset()
		delete(calls, "DescribeTable")
		assert.LessOrEqual(t, calls["UpdateItem"], 1, "one conditional write at most: %v", calls)
		t.Logf("%v", err)
	}

	t.Run("released", func(t *testing.T) {
		l, err := holder.AcquireLockWithContext(ctx, "released")
		require.NoError(t, err)
		token := l.ResumeToken()
		require.NoError(t, l.Close())
		refused(t, "released", token, dynamolock.ErrLockAlreadyReleased, "it was released")
	})
	t.Run("deleted", func(t *testing.T) {
		l, err := holder.AcquireLockWithContext(ctx, "deleted")
		require.NoError(t, err)
		token := l.ResumeToken()
		_, err = holder.ReleaseLock(l, dynamolock.WithDeleteLock(true))
		require.NoError(t, err)
		refused(t, "deleted", token, dynamolock.ErrLockAlreadyReleased, "the item is gone")
	})
	t.Run("expired and taken", func(t *testing.T) {
		dead := newClient(t, db, table, dynamolock.WithOwnerName("dead"), dynamolock.WithLeaseDuration(time.Second), dynamolock.DisableHeartbeat())
		l, err := dead.AcquireLockWithContext(ctx, "taken")
		require.NoError(t, err)
		token := l.ResumeToken()
		_, err = holder.AcquireLockWithContext(ctx, "taken", dynamolock.WithRefreshPeriod(100*time.Millisecond))
		require.NoError(t, err, "taken over after its lease")
		refused(t, "taken", token, dynamolock.ErrLockTakenOver, `taken by owner "holder" (fencing token`)
	})
	t.Run("resumed already", func(t *testing.T) {
		l, err := holder.AcquireLockWithContext(ctx, "twice")
		require.NoError(t, err)
		token := l.ResumeToken()
		first, err := resumer.ResumeLock(ctx, token)
		require.NoError(t, err)
		other := newClient(t, rdb, table, append(fast, dynamolock.WithOwnerName("resumer"))...)
		_, err = other.ResumeLock(ctx, token)
		require.ErrorIs(t, err, dynamolock.ErrLockTakenOver)
		refused(t, "twice", token, dynamolock.ErrLockTakenOver, `taken by owner "resumer"`)
		require.NoError(t, first.Err())
		require.NoError(t, first.Close()) // its renewals would count as the next cases' calls
	})
	t.Run("released and acquired again", func(t *testing.T) {
		l, err := holder.AcquireLockWithContext(ctx, "again")
		require.NoError(t, err)
		token := l.ResumeToken()
		require.NoError(t, l.Close())
		l2, err := holder.AcquireLockWithContext(ctx, "again")
		require.NoError(t, err)
		refused(t, "again", token, dynamolock.ErrLockTakenOver, "resumed already, or acquired again")
		require.NoError(t, l2.Close())
		refused(t, "again", token, dynamolock.ErrLockAlreadyReleased, "acquired again since")
	})
	t.Run("before any call", func(t *testing.T) {
		l, err := holder.AcquireLockWithContext(ctx, "k")
		require.NoError(t, err)
		good := l.ResumeToken()
		otherTable := newClient(t, rdb, table+"x", fast...)
		sorted := newClient(t, rdb, table, append(fast, dynamolock.WithSortKey("sk", "v"))...)
		altered := []byte(good)
		if altered[12] == 'A' {
			altered[12] = 'B'
		} else {
			altered[12] = 'A'
		}
		for name, tc := range map[string]struct {
			c     *dynamolock.Client
			token string
			says  string
		}{
			"empty":       {resumer, "", "malformed token"},
			"garbage":     {resumer, "not a token", "not a resume token"},
			"altered":     {resumer, string(altered), "altered or truncated"},
			"truncated":   {resumer, good[:len(good)-5], "malformed token"},
			"version":     {resumer, "dlr9." + good[5:], "version 9"},
			"other table": {otherTable, good, "names a lock of table"},
			"sort key":    {sorted, good, "names no sort key value"},
		} {
			t.Run(name, func(t *testing.T) {
				cc.reset()
				_, err := tc.c.ResumeLock(ctx, tc.token)
				var lng *dynamolock.LockNotGrantedError
				require.ErrorAs(t, err, &lng)
				require.ErrorIs(t, err, dynamolock.ErrInvalidArgument)
				assert.Contains(t, err.Error(), tc.says)
				assert.Zero(t, cc.total(), "no call")
			})
		}
		_, err = resumer.ResumeLock(ctx, good, dynamolock.WithData([]byte("x")))
		require.ErrorIs(t, err, dynamolock.ErrInvalidArgument)
		_, err = resumer.ResumeLock(ctx, good, dynamolock.WithSortKeyValue("x"))
		require.ErrorIs(t, err, dynamolock.ErrInvalidArgument)
		require.NoError(t, l.Close())
	})
	t.Run("session", func(t *testing.T) {
		sess := newClient(t, db, table, append(fast, dynamolock.WithOwnerName("sess"), dynamolock.WithSession())...)
		l, err := sess.AcquireLockWithContext(ctx, "s")
		require.NoError(t, err)
		cc.reset()
		_, err = resumer.ResumeLock(ctx, l.ResumeToken())
		require.ErrorIs(t, err, dynamolock.ErrInvalidArgument)
		assert.Contains(t, err.Error(), "cannot be resumed")
		assert.Zero(t, cc.total(), "no call")
		require.NoError(t, l.Err())
	})
	t.Run("held here", func(t *testing.T) {
		l, err := resumer.AcquireLockWithContext(ctx, "mine")
		require.NoError(t, err)
		cc.reset()
		again, err := resumer.ResumeLock(ctx, l.ResumeToken())
		require.NoError(t, err)
		require.Same(t, l, again, "the lock this client holds, with no call")
		assert.Zero(t, cc.total())
		require.NoError(t, l.Close())
	})
	var nilLock *dynamolock.Lock
	assert.Empty(t, nilLock.ResumeToken())
	view, err := resumer.Get("k")
	require.NoError(t, err)
	assert.Empty(t, view.ResumeToken(), "a read-only view names no acquisition")
}

// A reader of a read/write lock resumes into a new entry: the old entry's
// guard fails, the old reader learns at its next heartbeat, and a writer
// still waits for the resumed reader.
func TestResumeLockReader(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	old := newClient(t, db, table, append(fast, dynamolock.WithOwnerName("old"))...)
	restarted := newClient(t, db, table, append(fast, dynamolock.WithOwnerName("new"))...)
	rw, err := old.NewRWLock("rw")
	require.NoError(t, err)
	r, err := rw.RLock(ctx)
	require.NoError(t, err)
	resumed, err := restarted.ResumeLock(ctx, r.ResumeToken())
	require.NoError(t, err)
	assert.Equal(t, r.FencingToken(), resumed.FencingToken(), "a reader's token is the last writer's")
	var tce *types.TransactionCanceledException
	require.ErrorAs(t, guardedPut(ctx, db, table, r, "old reader", 1), &tce)
	require.NoError(t, guardedPut(ctx, db, table, resumed, "new reader", 1))
	require.True(t, closedWithin(r.Done(), 2*time.Second), "the old reader learns at its next heartbeat")
	require.ErrorIs(t, r.Err(), dynamolock.ErrLockLost)

	wrw, err := restarted.NewRWLock("rw")
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	_, err = wrw.Lock(wctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a writer waits for the resumed reader")
	require.NoError(t, resumed.Close())
	w, err := wrw.Lock(ctx)
	require.NoError(t, err)
	_, err = restarted.ResumeLock(ctx, r.ResumeToken())
	require.ErrorIs(t, err, dynamolock.ErrLockTakenOver, "a writer holds it")
	require.NoError(t, w.Close())
	_, err = restarted.ResumeLock(ctx, r.ResumeToken())
	require.ErrorIs(t, err, dynamolock.ErrLockAlreadyReleased, "the entry is gone")
}

// A resume whose answer is lost is sent again, and the retry, refused by
// the first one's own write, is claimed: one lock, not a refusal.
func TestResumeLockAnswerLost(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	old := newClient(t, db, table, append(fast, dynamolock.WithOwnerName("old"))...)
	l, err := old.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	fdb := faults.Wrap(db)
	lose := &faults.Rule{Op: "UpdateItem", Match: faults.ConditionOn("fencingToken"), Times: 1, LoseAnswer: true}
	fdb.Add(lose)
	restarted := newClient(t, fdb, table, append(fast, dynamolock.WithOwnerName("new"))...)
	r, err := restarted.ResumeLock(ctx, l.ResumeToken(), dynamolock.WithRefreshPeriod(50*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, 1, fdb.Hits(lose))
	assert.Equal(t, l.FencingToken()+1, r.FencingToken())
	require.NoError(t, r.Close())
}

// The resume's latency on DynamoDB Local: p50 and p99 over many trials.
func TestResumeLockLatency(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	old := newClient(t, db, table, append(fast, dynamolock.WithOwnerName("old"))...)
	restarted := newClient(t, db, table, append(fast, dynamolock.WithOwnerName("new"))...)
	_, err := restarted.Get("warm") // no write: the first write's table check is not timed below
	require.NoError(t, err)
	w, err := restarted.AcquireLockWithContext(ctx, "warm")
	require.NoError(t, err)
	require.NoError(t, w.Close())
	const n = 100
	var took []time.Duration
	for i := range n {
		l, err := old.AcquireLockWithContext(ctx, "k"+strings.Repeat("x", i%3))
		require.NoError(t, err)
		start := time.Now()
		r, err := restarted.ResumeLock(ctx, l.ResumeToken())
		took = append(took, time.Since(start))
		require.NoError(t, err)
		require.NoError(t, r.Close())
		_ = l.Close() // lost: taken by the resume
	}
	slices.Sort(took)
	p50, p99 := took[n/2], took[n*99/100]
	t.Logf("ResumeLock on DynamoDB Local over %d trials: p50 %s, p99 %s, max %s", n, p50, p99, took[n-1])
	assert.Less(t, p50, 100*time.Millisecond)
}
