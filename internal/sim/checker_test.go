package sim

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddbmodel"
)

// tracked is a lock some client was handed, until it has ended.
type tracked struct {
	l      *dynamolock.Lock
	key    string // the item's key in the model (ddbmodel.KeyString)
	pk     string
	owner  string
	token  uint64
	rvn    string // when it was tracked: tells a client's readers of one key apart
	client *simClient
	reader bool // an RWLock's reader: checked by checkRW, not by invariants 1 and 2
	// readerID: a reader's entry in the item (found by its beat when it
	// was tracked; "" if it had changed already).
	readerID string
}

type relKey struct {
	key   string
	owner string
	token uint64
}

// acquireCallKey tags an acquisition's context, so that the hook can record
// the record version numbers that call wrote.
type acquireCallKey struct{}

func itemS(it ddbmodel.Item, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func itemN(it ddbmodel.Item, name string) uint64 {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseUint(v.Value, 10, 64)
		return n
	}
	return 0
}

func released(it ddbmodel.Item) bool { _, ok := it["isReleased"]; return ok }

func showItem(it ddbmodel.Item) string {
	if it == nil {
		return "absent"
	}
	s := fmt.Sprintf("owner=%s rvn=%.8s lease=%s token=%d", itemS(it, "ownerName"), itemS(it, "recordVersionNumber"),
		itemS(it, "leaseDuration"), itemN(it, "fencingToken"))
	if released(it) {
		s += " released"
	}
	if q, ok := it["fairQueue"].(*types.AttributeValueMemberM); ok {
		var ts []string
		for id, e := range q.Value {
			if m, ok := e.(*types.AttributeValueMemberM); ok {
				ts = append(ts, fmt.Sprintf("%.4s:%d", id, itemN(m.Value, "t")))
			}
		}
		sort.Strings(ts)
		s += " queue[" + strings.Join(ts, " ") + "]"
	}
	if r, ok := it["readers"].(*types.AttributeValueMemberM); ok {
		var rs []string
		for id, e := range r.Value {
			if m, ok := e.(*types.AttributeValueMemberM); ok {
				rs = append(rs, fmt.Sprintf("%.4s:%.4s", id, itemS(m.Value, "b")))
			}
		}
		sort.Strings(rs)
		s += " readers[" + strings.Join(rs, " ") + "]"
	}
	if d, ok := it["data"]; ok {
		if _, isB := d.(*types.AttributeValueMemberB); !isB {
			s += " data(not B)"
		}
	}
	return s
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// hook runs after every model request, under the model's mutex: it keeps
// the checker's mirror of the lock table, checks the invariants that are
// about writes (fencing tokens, guarded writes), then every client's
// beliefs.
func (w *world) hook(e ddbmodel.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ops++
	w.seq = e.Seq
	caller, _ := e.Ctx.Value(callerKey{}).(string)
	outcome := "ok"
	if e.Err != nil {
		outcome = errName(e.Err)
		var tce *types.TransactionConflictException
		if errors.As(e.Err, &tce) {
			w.conflictAt[caller] = time.Now() // invariant 20: not a steady backend
		}
	}
	var desc []string
	for _, ch := range e.Changes {
		if ch.Table != w.lockTable {
			desc = append(desc, fmt.Sprintf("data %s token=%d", itemS(ch.After, "key"), itemN(ch.After, "token")))
			continue
		}
		desc = append(desc, fmt.Sprintf("%s: %s", w.pkOf(ch.Key), showItem(ch.After)))
	}
	switch in := e.Input.(type) {
	case *dynamodb.GetItemInput:
		desc = append(desc, itemS(in.Key, w.pkName))
	case *dynamodb.UpdateItemInput:
		if len(e.Changes) == 0 {
			desc = append(desc, itemS(in.Key, w.pkName))
		}
	case *dynamodb.DeleteItemInput:
		if len(e.Changes) == 0 {
			desc = append(desc, itemS(in.Key, w.pkName))
		}
	}
	who := caller
	if c := callOf(e.Ctx); c != nil {
		who = fmt.Sprintf("%s(%s#%d)", caller, c.what, c.id) // the acquiring call that sent it
	}
	if u, ok := e.Input.(*dynamodb.UpdateItemInput); ok && strings.Contains(aws.ToString(u.UpdateExpression), "REMOVE") && len(e.Changes) > 0 {
		desc = append(desc, "("+what(u)+")")
	}
	w.tracef("#%d %s %s %s -> %s", e.Seq, who, e.Op, strings.Join(desc, "; "), outcome)
	if caller == phantomCaller {
		return // another application's transaction: it changes no item
	}
	w.countConflict(e)
	call := callOf(e.Ctx)
	// 9. The library never sends a request DynamoDB rejects as invalid
	// (a limit exceeded: IN operands, expression or key sizes, ...), nor
	// a transaction member DynamoDB cannot apply (a ValidationError
	// reason).
	var ae smithy.APIError
	if errors.As(e.Err, &ae) && ae.ErrorCode() == "ValidationException" && caller != "foreign" {
		w.violate(9, "%s's %s was rejected: %s", caller, e.Op, ae.ErrorMessage())
	}
	var invalidMember *types.TransactionCanceledException
	if errors.As(e.Err, &invalidMember) && caller != "foreign" {
		for i, r := range invalidMember.CancellationReasons {
			if aws.ToString(r.Code) == "ValidationError" {
				w.violate(9, "%s's %s was cancelled: member %d: %s", caller, e.Op, i, aws.ToString(r.Message))
			}
		}
	}

	for _, ch := range e.Changes {
		if ch.Table != w.lockTable || (ch.After == nil && ch.Before == nil) {
			continue
		}
		b, a := ch.Before, ch.After
		w.recordData(ch.Key, a)
		w.resumeHook(e.Ctx, caller, ch)
		w.adversaryHook(caller, ch)
		if caller == "foreign" || caller == v2Caller {
			if w.foreignSeq == nil {
				w.foreignSeq = map[string]uint64{}
			}
			w.foreignSeq[ch.Key] = e.Seq
		}
		w.rwHook(ch, e.Ctx.Value(resumeCallKey{}) != nil)
		w.sessionHook(ch)
		w.orphansHook(caller, call, ch)
		// 4. Fencing tokens of successive acquisitions strictly increase.
		if a != nil && (b == nil || itemN(a, "fencingToken") != itemN(b, "fencingToken")) && itemN(a, "fencingToken") > 0 {
			tok := itemN(a, "fencingToken")
			if tok <= w.maxToken[ch.Key] {
				w.violate(4, "key %s: fencing token %d after %d", w.pkOf(ch.Key), tok, w.maxToken[ch.Key])
			}
			w.maxToken[ch.Key] = tok
		}
		// Record releases: an item of (owner, token) that was held and now is
		// released or gone.
		if b != nil && !released(b) && (a == nil || released(a)) {
			rk := relKey{ch.Key, itemS(b, "ownerName"), itemN(b, "fencingToken")}
			if _, ok := w.releasedBy[rk]; !ok {
				w.releasedBy[rk] = e.Seq
			}
		}
		if a == nil {
			delete(w.current, ch.Key)
		} else {
			w.current[ch.Key] = a
		}
		w.budgetHands(ch.Key)
		// Which RVNs an acquisition call wrote (invariant 6): a write of it
		// that changed the RVN (joining or leaving a fair queue does not).
		if id, ok := e.Ctx.Value(acquireCallKey{}).(int); ok && e.Err == nil && a != nil &&
			(b == nil || itemS(a, "recordVersionNumber") != itemS(b, "recordVersionNumber")) {
			w.acquireRVNs[id] = append(w.acquireRVNs[id], itemS(a, "recordVersionNumber"))
		}
	}
	// 3. A guarded write commits only while the writer's lock is the
	// current item.
	if e.Op == "TransactWriteItems" && e.Err == nil {
		for _, ch := range e.Changes {
			if ch.Table != w.dataTable || ch.After == nil {
				continue
			}
			pk, tok, writer := itemS(ch.After, "key"), itemN(ch.After, "token"), itemS(ch.After, "writer")
			if readerData(pk) {
				continue // a reader's own item (invariant 16 checks its guard)
			}
			var lockItem ddbmodel.Item
			found := false
			for _, lc := range e.Changes {
				if lc.Table == w.lockTable && w.pkOf(lc.Key) == pk {
					lockItem, found = lc.After, true
				}
			}
			if !found || lockItem == nil || itemS(lockItem, "ownerName") != writer || itemN(lockItem, "fencingToken") != tok || released(lockItem) {
				w.violate(3, "guarded write by %s with token %d committed while the lock item is %s", writer, tok, showItem(lockItem))
			}
			if tok < w.dataMax[pk] {
				w.violate(3, "guarded write on %s with token %d after one with token %d", pk, tok, w.dataMax[pk])
			}
			w.dataMax[pk] = max(w.dataMax[pk], tok)
		}
	}
	// 16. A guarded write of a live holder commits (guarded_test.go).
	w.checkGuarded(e)
	w.checkLocked(fmt.Sprintf("after #%d", e.Seq))
	// 21-23: what the calls wrote and read (calls_test.go).
	read := ""
	if in, ok := e.Input.(*dynamodb.GetItemInput); ok && e.Err == nil && aws.ToString(in.TableName) == w.lockTable {
		read = ddbmodel.KeyString(itemS(in.Key, w.pkName), itemS(in.Key, "sk"))
	}
	if call != nil {
		w.callsHook(call, read, e.Changes)
	}
	w.checkOrphans()
	if read != "" {
		w.countRead(call, read)
	}
	w.checkDeadHolders()
}

// what is an update's expression with its placeholders' names filled in,
// for the trace.
func what(u *dynamodb.UpdateItemInput) string {
	s := aws.ToString(u.UpdateExpression)
	names := make([]string, 0, len(u.ExpressionAttributeNames))
	for k := range u.ExpressionAttributeNames {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { // #rv before #r
		if len(names[i]) != len(names[j]) {
			return len(names[i]) > len(names[j])
		}
		return names[i] < names[j]
	})
	for _, k := range names {
		s = strings.ReplaceAll(s, k, u.ExpressionAttributeNames[k])
	}
	return s
}

func errName(err error) string {
	var ccf *types.ConditionalCheckFailedException
	var tce *types.TransactionCanceledException
	switch {
	case errors.As(err, &ccf):
		return "ConditionalCheckFailed"
	case errors.As(err, &tce):
		var codes []string
		for _, r := range tce.CancellationReasons {
			codes = append(codes, *r.Code)
		}
		return "TransactionCanceled" + fmt.Sprint(codes)
	}
	return err.Error()
}

// checkLocked checks what the clients believe against the model, at one
// instant: w.mu is held, and no model request can run meanwhile when called
// from the hook.
func (w *world) checkLocked(where string) {
	live := map[string][]*tracked{}
	readers := map[string][]*tracked{} // RWLock readers, by key
	var keys []string
	for _, tr := range w.sortedTracked() {
		l := tr.l
		doneBefore := closed(l.Done())
		err := l.Err()
		expired := l.IsExpired()
		// 5. Done is closed exactly when the lock has ended.
		if doneBefore && err == nil {
			w.violate(5, "%s: %s's lock on %s (token %d) has Done closed but Err() == nil", where, tr.owner, tr.pk, tr.token)
		}
		if err != nil || expired {
			// A loss blamed on another owner must match the model: once
			// taken over, an acquisition's (owner, token) never comes back.
			if errors.Is(err, dynamolock.ErrLockTakenOver) {
				if it := w.current[tr.key]; it != nil && itemS(it, "ownerName") == tr.owner && itemN(it, "fencingToken") == tr.token && !released(it) {
					w.violate(2, "%s: %s's lock on %s (token %d) was declared taken over, but the model shows it held: %s (%v)",
						where, tr.owner, tr.pk, tr.token, showItem(it), err)
				}
			}
			if closed(l.Done()) {
				w.checkSteadyLoss(tr, err)
				w.tracef("%s's lock on %s (token %d) ended: %v", tr.owner, tr.pk, tr.token, err)
				delete(w.tracked, l)
			}
			continue
		}
		// A lock whose release (or its client's Close) is in flight was
		// given up by its holder: only the answer is missing.
		if w.releasing[l] > 0 || tr.client.closed {
			continue
		}
		// A lock another client took from under its holder without a
		// stale lease (a forced release of a view, a same-owner reentrant
		// adoption: adversaries_test.go) is no longer the holder's; it
		// learns at its next renewal.
		if w.superseded(tr) {
			continue
		}
		if tr.reader {
			readers[tr.key] = append(readers[tr.key], tr)
			continue
		}
		if len(live[tr.key]) == 0 {
			keys = append(keys, tr.key)
		}
		live[tr.key] = append(live[tr.key], tr)
		if tr.pk == rwName {
			w.checkRWWriter(where, tr)
		}
		// 2. A lock its holder believes valid is the item, not released.
		{
			it := w.current[tr.key]
			if it == nil || itemS(it, "ownerName") != tr.owner || itemN(it, "fencingToken") != tr.token || released(it) {
				w.violate(2, "%s: %s believes it holds %s (token %d, lease left %s), but the model has %s", where, tr.owner, tr.pk, tr.token,
					w.leaseLeft(l), showItem(it))
			}
		}
	}
	// 1. At most one client believes it holds a key.
	for _, k := range keys {
		if trs := live[k]; len(trs) > 1 {
			var who []string
			for _, tr := range trs {
				who = append(who, fmt.Sprintf("%s (token %d, lease left %s)", tr.owner, tr.token, w.leaseLeft(tr.l)))
			}
			w.violate(1, "%s: %s held by %s at once", where, trs[0].pk, strings.Join(who, " and "))
		}
	}
	for key, trs := range readers {
		w.checkRW(where, live[key], trs)
	}
	w.checkLeaders(where)
}

// sortedTracked lists the tracked locks in an order that does not depend
// on map iteration: by key, owner, token.
func (w *world) sortedTracked() []*tracked {
	trs := make([]*tracked, 0, len(w.tracked))
	for _, tr := range w.tracked {
		trs = append(trs, tr)
	}
	sort.Slice(trs, func(i, j int) bool {
		a, b := trs[i], trs[j]
		if a.key != b.key {
			return a.key < b.key
		}
		if a.owner != b.owner {
			return a.owner < b.owner
		}
		if a.token != b.token {
			return a.token < b.token
		}
		return a.rvn < b.rvn
	})
	return trs
}

func (w *world) leaseLeft(l *dynamolock.Lock) time.Duration {
	// Not exact (the holder's sentAt is private); the trace has the details.
	return l.LeaseDuration()
}

func (w *world) violate(inv int, format string, args ...any) {
	msg := fmt.Sprintf("invariant %d: ", inv) + fmt.Sprintf(format, args...)
	w.tracef("VIOLATION %s", msg)
	if len(w.violations) < 10 {
		w.violations = append(w.violations, fmt.Sprintf("t=%s %s", w.elapsed(), msg))
	}
}

func (w *world) elapsed() string {
	return fmt.Sprintf("%.3fs", time.Since(w.start).Seconds())
}

func (w *world) tracef(format string, args ...any) {
	w.trace = append(w.trace, w.elapsed()+" "+fmt.Sprintf(format, args...))
}

// note adds a client decision to the trace, as a step (replay_test.go):
// lines of goroutines that run at one instant come in a replayable order.
func (w *world) note(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	w.step("note " + line)
	w.mu.Lock()
	w.tracef("%s", line)
	w.mu.Unlock()
}

// log adds a line to the trace from a goroutine that has just been granted
// a step and has not blocked since.
func (w *world) log(format string, args ...any) {
	w.mu.Lock()
	w.tracef(format, args...)
	w.mu.Unlock()
}

func (w *world) pkOf(key string) string {
	// KeyString is "len:pk|sk".
	i := strings.IndexByte(key, ':')
	n, _ := strconv.Atoi(key[:i])
	return key[i+1 : i+1+n]
}
