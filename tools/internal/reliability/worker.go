package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

// EnvWorker names the environment variable that turns the test binary into
// a worker: its value is the path of the worker's JSON config.
const EnvWorker = "DYNAMOLOCK_RELIABILITY_WORKER"

// WorkerConfig configures one worker process.
type WorkerConfig struct {
	Proc       int           `json:"proc"`
	Endpoint   string        `json:"endpoint"`
	LockTable  string        `json:"lockTable"`
	DataTable  string        `json:"dataTable"`
	Keys       []string      `json:"keys"`
	Goroutines int           `json:"goroutines"`
	Start      int64         `json:"start"` // Unix nanoseconds: start sections then
	Until      int64         `json:"until"` // Unix nanoseconds: start no section after it
	Lease      time.Duration `json:"lease"`
	Heartbeat  time.Duration `json:"heartbeat"`
	Refresh    time.Duration `json:"refresh"`
	// HTTPTimeout bounds each HTTP attempt; SDKAttempts the attempts per call.
	HTTPTimeout time.Duration `json:"httpTimeout"`
	SDKAttempts int           `json:"sdkAttempts"`
	// Hold is how long a section lasts; it makes Steps increments.
	Hold  time.Duration `json:"hold"`
	Steps int           `json:"steps"`
	// Service errors injected into this worker's calls.
	ErrorRate  float64  `json:"errorRate"`
	ErrorKinds []string `json:"errorKinds"`
	AfterSend  bool     `json:"afterSend"`
	Events     string   `json:"events"` // path of the event log
}

// MaybeRunWorker runs a worker and exits when the environment variable
// EnvWorker is set; otherwise it returns at once. Call it first in TestMain.
func MaybeRunWorker() {
	path := os.Getenv(EnvWorker)
	if path == "" {
		return
	}
	if err := runWorker(path); err != nil {
		fmt.Fprintln(os.Stderr, "reliability worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runWorker(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var cfg WorkerConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	log, err := createLog(cfg.Events)
	if err != nil {
		return err
	}
	ctx := context.Background()

	se := &faults.ServiceErrors{Rate: cfg.ErrorRate, AfterSend: cfg.AfterSend}
	for _, k := range cfg.ErrorKinds {
		kind, err := faults.ParseKind(k)
		if err != nil {
			return err
		}
		se.Kinds = append(se.Kinds, kind)
	}
	optFns := []func(*dynamodb.Options){faults.Timeouts(cfg.HTTPTimeout, cfg.SDKAttempts, 100*time.Millisecond)}
	if cfg.ErrorRate > 0 {
		optFns = append(optFns, faults.Inject(se))
	}
	db, err := ddblocal.NewClient(ctx, cfg.Endpoint, optFns...)
	if err != nil {
		return err
	}
	client, err := dynamolock.New(db, cfg.LockTable,
		dynamolock.WithLeaseDuration(cfg.Lease),
		dynamolock.WithHeartbeatPeriod(cfg.Heartbeat),
		dynamolock.WithOwnerName("proc"+strconv.Itoa(cfg.Proc)+"-pid"+strconv.Itoa(os.Getpid())))
	if err != nil {
		return err
	}

	time.Sleep(time.Until(time.Unix(0, cfg.Start)))
	var wg sync.WaitGroup
	for i := range cfg.Goroutines {
		w := &worker{cfg: &cfg, id: i, db: db, client: client, log: log,
			rng: rand.New(rand.NewPCG(uint64(cfg.Proc)<<32|uint64(i), uint64(time.Now().UnixNano())))}
		wg.Go(w.run)
	}
	wg.Wait()

	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st := client.Stats()
	ws := &WorkerStats{HeartbeatsSent: st.HeartbeatsSent, HeartbeatErrors: st.HeartbeatErrors,
		LocksLost: st.LocksLost, DynamoDBCalls: st.DynamoDBCalls}
	if err := client.CloseWithContext(cctx); err != nil {
		ws.CloseErr = err.Error()
	}
	if _, inj := se.Counts(); len(inj) > 0 {
		ws.Injected = map[string]uint64{}
		for k, n := range inj {
			ws.Injected[k.String()] = n
		}
	}
	log.add(Event{Type: EvStats, Proc: cfg.Proc, Stats: ws})
	return log.close()
}

type worker struct {
	cfg    *WorkerConfig
	id     int
	db     *dynamodb.Client
	client *dynamolock.Client
	log    *eventLog
	rng    *rand.Rand
	seq    int
}

func now() int64 { return time.Now().UnixNano() }

func (w *worker) run() {
	cfg := w.cfg
	until := time.Unix(0, cfg.Until)
	ctx := context.Background()
	for time.Now().Before(until) {
		key := cfg.Keys[w.rng.IntN(len(cfg.Keys))]
		sec := Event{Type: EvSection, Proc: cfg.Proc, Worker: w.id, Key: key, AcquireStart: now()}
		actx, cancel := context.WithDeadline(ctx, until.Add(cfg.Lease))
		l, err := w.client.AcquireLockWithContext(actx, key,
			dynamolock.WithRefreshPeriod(cfg.Refresh), dynamolock.WithAdditionalTimeToWaitForLock(cfg.Lease))
		cancel()
		if err != nil {
			w.log.add(Event{Type: EvAcquireErr, Proc: cfg.Proc, Worker: w.id, Key: key, Err: acquireErrClass(err)})
			time.Sleep(cfg.Refresh)
			continue
		}
		sec.Acquired = now()
		sec.Owner = l.OwnerName()
		sec.Token = l.FencingToken()
		sec.Start = now()
		for step := range cfg.Steps {
			if w.lossObserved(l, key) {
				break
			}
			w.guardedIncrement(ctx, l, key)
			w.unguardedIncrement(ctx, l, key)
			if step < cfg.Steps-1 {
				time.Sleep(cfg.Hold / time.Duration(cfg.Steps))
			}
		}
		// End first, validity second: a pause between the two can only make
		// a section that was valid look expired, never the reverse.
		sec.End = now()
		sec.Valid = l.Err() == nil && !l.IsExpired()
		if err := l.Err(); err != nil {
			sec.Lost = lossCause(err)
		}
		sec.Released, sec.ReleaseErr = w.release(ctx, l)
		w.log.add(sec)
	}
}

// release releases l, retrying while the failure leaves the lock held: a
// release that fails for any reason but the loss of the lock keeps it held
// and heartbeated until it is retried or the client closes.
func (w *worker) release(ctx context.Context, l *dynamolock.Lock) (bool, string) {
	var err error
	for try := 0; try < 20; try++ {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var ok bool
		ok, err = w.client.ReleaseLockWithContext(rctx, l)
		cancel()
		if ok {
			return true, ""
		}
		if l.Err() != nil { // released or lost meanwhile: nothing left to release
			return false, lossCause(err)
		}
		time.Sleep(w.cfg.Refresh)
	}
	return false, "gave up: " + errClass(err)
}

// lossObserved is the holder's check before each step of guarded work: the
// one users are told to make, watching Done. It also records when the lease
// had already run out by the lock's own clock while Done was still open:
// work done then was done without observing the loss.
func (w *worker) lossObserved(l *dynamolock.Lock, key string) bool {
	// Expiry first, Done second: the other order counts a lease that ran
	// out between the two calls, which no check could have seen.
	expired := l.IsExpired()
	select {
	case <-l.Done():
		return true
	default:
	}
	if expired {
		w.log.add(Event{Type: EvStaleDone, Proc: w.cfg.Proc, Worker: w.id, Key: key, Token: l.FencingToken(), At: now()})
	}
	return false
}

func (w *worker) opID() string {
	w.seq++
	return "p" + strconv.Itoa(w.cfg.Proc) + "w" + strconv.Itoa(w.id) + "-" + strconv.Itoa(w.seq)
}

func (w *worker) read(ctx context.Context, item string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := w.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(w.cfg.DataTable),
		Key:            map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: item}},
		ConsistentRead: aws.Bool(true),
		// Not the growing list of applied ops: keep responses small.
		ProjectionExpression:     aws.String("#v"),
		ExpressionAttributeNames: map[string]string{"#v": "v"},
	})
	if err != nil {
		return 0, err
	}
	return counterValue(out.Item)
}

func counterValue(item map[string]types.AttributeValue) (int64, error) {
	v, ok := item["v"].(*types.AttributeValueMemberN)
	if !ok {
		return 0, nil
	}
	return strconv.ParseInt(v.Value, 10, 64)
}

// guardedIncrement reads the key's counter and writes it plus one, with the
// op id appended to its list of applied ops, in one transaction with the
// lock's TransactionCondition. Only the lock protects the counter: the
// update itself has no condition.
func (w *worker) guardedIncrement(ctx context.Context, l *dynamolock.Lock, key string) {
	e := Event{Type: EvGuarded, Proc: w.cfg.Proc, Worker: w.id, Key: key, Token: l.FencingToken(), Op: w.opID()}
	e.ReadCall = now()
	v, err := w.read(ctx, "ctr#"+key)
	e.ReadReturn = now()
	if err != nil {
		return // nothing written
	}
	e.From, e.To = v, v+1
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	e.Call = now()
	_, err = w.db.TransactWriteItems(tctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		l.TransactionCondition(),
		{Update: &types.Update{
			TableName:                aws.String(w.cfg.DataTable),
			Key:                      map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: "ctr#" + key}},
			UpdateExpression:         aws.String("SET #v = :to, #ops = list_append(if_not_exists(#ops, :empty), :op)"),
			ExpressionAttributeNames: map[string]string{"#v": "v", "#ops": "ops"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":to":    &types.AttributeValueMemberN{Value: strconv.FormatInt(e.To, 10)},
				":op":    &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: e.Op}}},
				":empty": &types.AttributeValueMemberL{Value: []types.AttributeValue{}},
			},
		}},
	}})
	e.Return = now()
	var tce *types.TransactionCanceledException
	switch {
	case err == nil:
		e.Result = ResultOK
	case errors.As(err, &tce):
		e.Result = ResultFailed
		e.Err = "cancelled"
	default:
		e.Result = ResultUnknown
		e.Err = errClass(err)
	}
	w.log.add(e)
}

// unguardedIncrement does the same to the key's shadow counter with a plain
// UpdateItem: what a holder without guarded writes would do.
func (w *worker) unguardedIncrement(ctx context.Context, l *dynamolock.Lock, key string) {
	e := Event{Type: EvUnguarded, Proc: w.cfg.Proc, Worker: w.id, Key: key, Token: l.FencingToken(), Op: w.opID()}
	e.ReadCall = now()
	v, err := w.read(ctx, "shadow#"+key)
	e.ReadReturn = now()
	if err != nil {
		return
	}
	e.From, e.To = v, v+1
	uctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	e.Call = now()
	_, err = w.db.UpdateItem(uctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(w.cfg.DataTable),
		Key:                      map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: "shadow#" + key}},
		UpdateExpression:         aws.String("SET #v = :to"),
		ExpressionAttributeNames: map[string]string{"#v": "v"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":to": &types.AttributeValueMemberN{Value: strconv.FormatInt(e.To, 10)},
		},
	})
	e.Return = now()
	if err == nil {
		e.Result = ResultOK
	} else {
		e.Result = ResultUnknown
		e.Err = errClass(err)
	}
	w.log.add(e)
}

func lossCause(err error) string {
	switch {
	case errors.Is(err, dynamolock.ErrLockAlreadyReleased):
		return "released"
	case errors.Is(err, dynamolock.ErrLockTakenOver):
		return "taken over"
	case errors.Is(err, dynamolock.ErrLeaseExpired):
		return "lease expired"
	case errors.Is(err, dynamolock.ErrClientClosed):
		return "client closed"
	}
	return errClass(err)
}

func acquireErrClass(err error) string {
	var te *dynamolock.TimeoutError
	switch {
	case errors.As(err, &te):
		return "timeout (held by a live owner)"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "run over (context ended)"
	}
	return errClass(err)
}

// errClass names a DynamoDB error by its kind rather than its text.
func errClass(err error) string {
	if err == nil {
		return "none"
	}
	var ae smithy.APIError
	var re interface{ HTTPStatusCode() int }
	switch {
	case errors.As(err, &ae) && errors.As(err, &re) && re.HTTPStatusCode() > 0:
		return fmt.Sprintf("HTTP %d %s", re.HTTPStatusCode(), ae.ErrorCode())
	case errors.As(err, &ae):
		return ae.ErrorCode()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "context ended"
	case errors.As(err, &re):
		return "network error"
	}
	return shortErr(err)
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
