package ddbmodel_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"go.uber.org/goleak"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
	"github.com/arielsrv/dynamolock/v2/internal/ddbmodel"
)

var (
	endpoint   string
	diffSeed   = flag.Uint64("ddbmodel.seed", 0, "seed of the differential test (0: from the clock, printed)")
	diffTrace  = flag.Bool("ddbmodel.trace", false, "log every request with both stores' errors")
	diffBudget = flag.Duration("ddbmodel.budget", 4*time.Second, "wall time the differential test drives the library for")
)

func TestMain(m *testing.M) {
	flag.Parse()
	ep, stop, err := ddblocal.Endpoint(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the differential test needs Amazon DynamoDB Local:", err)
		os.Exit(1)
	}
	endpoint = ep
	code := m.Run()
	stop()
	if code == 0 {
		if err := goleak.Find(
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// tee sends every request to the model and to DynamoDB Local, one request
// at a time so that both see the same order, compares the answers, and
// returns DynamoDB Local's. It reaches the model through a connection of
// the public package dynamolocktest, so that what that package gives
// users (the model, the SDK's error wrapping, [dynamolocktest.DB.Items])
// is what is compared.
type tee struct {
	t     testing.TB
	db    *dynamolocktest.DB
	model *dynamolocktest.Conn
	local *dynamodb.Client

	mu       sync.Mutex
	calls    map[string]int // per operation and outcome class
	mismatch []string
	// known counts the answers that differ as a known difference names
	// (known_test.go); lastModel is the model's answer to the last request.
	known     map[string]int
	lastModel error
	lastOut   any // the model's answer to the last request
}

func (d *tee) record(op string, in any, mErr, lErr error, mOut, lOut any) {
	mc, lc := errClass(mErr), errClass(lErr)
	d.calls[op+" "+lc]++
	d.lastModel = mErr
	if k := matchKnown(op, mErr, lErr); k != nil {
		d.known[k.name]++
		return
	}
	fail := func(format string, args ...any) {
		d.mismatch = append(d.mismatch, fmt.Sprintf("%s %s: %s\n  model err: %v\n  local err: %v", op, describe(in), fmt.Sprintf(format, args...), mErr, lErr))
	}
	if mc != lc {
		fail("outcome %s (model) vs %s (DynamoDB Local)", mc, lc)
		return
	}
	if mm, lm := errMessage(mErr), errMessage(lErr); comparable(mm) != comparable(lm) && !approximate(mm) && mc != "TransactionCanceled" {
		fail("messages differ:\n  model %q\n  local %q", mm, lm)
	}
	var mccf, lccf *types.ConditionalCheckFailedException
	if errors.As(mErr, &mccf) && errors.As(lErr, &lccf) && !ddbmodel.ItemsEqual(mccf.Item, lccf.Item) {
		fail("condition failure items differ:\n  model %s\n  local %s", show(mccf.Item), show(lccf.Item))
	}
	var mtce, ltce *types.TransactionCanceledException
	if errors.As(mErr, &mtce) && errors.As(lErr, &ltce) {
		if len(mtce.CancellationReasons) != len(ltce.CancellationReasons) {
			fail("%d cancellation reasons (model) vs %d", len(mtce.CancellationReasons), len(ltce.CancellationReasons))
			return
		}
		for i := range mtce.CancellationReasons {
			mr, lr := mtce.CancellationReasons[i], ltce.CancellationReasons[i]
			if aws.ToString(mr.Code) != aws.ToString(lr.Code) || !ddbmodel.ItemsEqual(mr.Item, lr.Item) {
				fail("reason %d: %s %s (model) vs %s %s", i, aws.ToString(mr.Code), show(mr.Item), aws.ToString(lr.Code), show(lr.Item))
			}
		}
	}
	if lErr != nil {
		return
	}
	if m, l := outItems(mOut), outItems(lOut); !sameItems(m, l) {
		fail("returned items differ:\n  model %s\n  local %s", showAll(m), showAll(l))
	}
	mu, ml := outCapacity(mOut), outCapacity(lOut)
	switch {
	case mu == ml:
		d.calls["capacity "+op]++
	case matchKnownCapacity(in, mu, ml) != "":
		d.known[matchKnownCapacity(in, mu, ml)]++
	default:
		fail("consumed capacity differs: %s (model) vs %s (DynamoDB Local)", mu, ml)
	}
}

// outCapacity is the consumed capacity an answer reports, as text ("" for
// none): each entry's table and units.
func outCapacity(out any) string {
	show := func(cc ...types.ConsumedCapacity) string {
		var b strings.Builder
		for _, c := range cc {
			fmt.Fprintf(&b, "%s=%v", aws.ToString(c.TableName), aws.ToFloat64(c.CapacityUnits))
			if c.Table != nil {
				fmt.Fprintf(&b, "(table %v)", aws.ToFloat64(c.Table.CapacityUnits))
			}
			b.WriteString(" ")
		}
		return b.String()
	}
	one := func(c *types.ConsumedCapacity) string {
		if c == nil {
			return ""
		}
		return show(*c)
	}
	switch o := out.(type) {
	case *dynamodb.GetItemOutput:
		return one(o.ConsumedCapacity)
	case *dynamodb.UpdateItemOutput:
		return one(o.ConsumedCapacity)
	case *dynamodb.PutItemOutput:
		return one(o.ConsumedCapacity)
	case *dynamodb.DeleteItemOutput:
		return one(o.ConsumedCapacity)
	case *dynamodb.QueryOutput:
		return one(o.ConsumedCapacity)
	case *dynamodb.ScanOutput:
		return one(o.ConsumedCapacity)
	case *dynamodb.TransactWriteItemsOutput:
		return show(o.ConsumedCapacity...)
	}
	return ""
}

// errClass names what the test compares of an error: its type or code.
func errClass(err error) string {
	if err == nil {
		return "ok"
	}
	var ccf *types.ConditionalCheckFailedException
	var tce *types.TransactionCanceledException
	var rnf *types.ResourceNotFoundException
	var riu *types.ResourceInUseException
	var ae smithy.APIError
	switch {
	case errors.As(err, &ccf):
		return "ConditionalCheckFailed"
	case errors.As(err, &tce):
		return "TransactionCanceled"
	case errors.As(err, &rnf):
		return "ResourceNotFound"
	case errors.As(err, &riu):
		return "ResourceInUse"
	case errors.As(err, &ae):
		return ae.ErrorCode()
	}
	return "other: " + err.Error()
}

// errMessage is an error's message as DynamoDB gives it, without the SDK's
// wrapping.
func errMessage(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorMessage()
	}
	return ""
}

// approximate reports a model message that does not claim DynamoDB's
// words: its syntax errors and the request shapes it does not implement.
// Every other message is compared to the byte.
func approximate(msg string) bool {
	return strings.Contains(msg, "Syntax error;") || strings.Contains(msg, "ddbmodel: unsupported")
}

// comparable cuts the second path off DynamoDB's message for overlapping
// paths: with three or more paths in an expression, DynamoDB Local 3.3.1
// names as "path two" a path that depends on the order and names of all of
// them (often not the one that overlaps); the model names the overlapping
// one. "path one", the earlier of the two, agrees.
//
// It also sorts the keys DynamoDB lists after "keys: {" (unused
// placeholders): DynamoDB Local lists them in its hash table's order, the
// model in sorted order.
func comparable(msg string) string {
	if i := strings.Index(msg, ", path two: ["); i >= 0 && strings.Contains(msg, "Two document paths overlap") {
		return msg[:i]
	}
	if i := strings.Index(msg, "keys: {"); i >= 0 && strings.HasSuffix(msg, "}") {
		keys := strings.Split(msg[i+len("keys: {"):len(msg)-1], ", ")
		slices.Sort(keys)
		return msg[:i] + "keys: {" + strings.Join(keys, ", ") + "}"
	}
	return msg
}

// outItems extracts the items an answer carries (Scan and Query sorted,
// since the model's order is not DynamoDB's hash order).
func outItems(out any) []ddbmodel.Item {
	switch o := out.(type) {
	case *dynamodb.GetItemOutput:
		return []ddbmodel.Item{o.Item}
	case *dynamodb.UpdateItemOutput:
		return []ddbmodel.Item{o.Attributes}
	case *dynamodb.PutItemOutput:
		return []ddbmodel.Item{o.Attributes}
	case *dynamodb.DeleteItemOutput:
		return []ddbmodel.Item{o.Attributes}
	case *dynamodb.QueryOutput:
		return sorted(o.Items)
	case *dynamodb.ScanOutput:
		return sorted(o.Items)
	case *dynamodb.DescribeTableOutput:
		return []ddbmodel.Item{{"status": &types.AttributeValueMemberS{Value: string(o.Table.TableStatus)}}}
	}
	return nil
}

func sorted(items []ddbmodel.Item) []ddbmodel.Item {
	items = slices.Clone(items)
	slices.SortFunc(items, func(a, b ddbmodel.Item) int { return strings.Compare(show(a), show(b)) })
	return items
}

func sameItems(a, b []ddbmodel.Item) bool {
	return slices.EqualFunc(a, b, func(x, y ddbmodel.Item) bool { return ddbmodel.ItemsEqual(x, y) })
}

func show(it ddbmodel.Item) string {
	if it == nil {
		return "<none>"
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range it {
			if !yield(k) {
				return
			}
		}
	})
	var b strings.Builder
	b.WriteString("{")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %s", k, showValue(it[k]))
	}
	b.WriteString("}")
	return b.String()
}

func showValue(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return fmt.Sprintf("S%q", v.Value)
	case *types.AttributeValueMemberN:
		return "N" + v.Value
	case *types.AttributeValueMemberB:
		return fmt.Sprintf("B%x", v.Value)
	case *types.AttributeValueMemberM:
		return "M" + show(v.Value)
	case *types.AttributeValueMemberL:
		s := make([]string, len(v.Value))
		for i, e := range v.Value {
			s[i] = showValue(e)
		}
		return "L[" + strings.Join(s, " ") + "]"
	case *types.AttributeValueMemberBOOL:
		return fmt.Sprintf("BOOL%v", v.Value)
	}
	return fmt.Sprintf("%T", v)
}

func showAll(items []ddbmodel.Item) string {
	s := make([]string, len(items))
	for i, it := range items {
		s[i] = show(it)
	}
	return "[" + strings.Join(s, " ") + "]"
}

func describe(in any) string {
	switch in := in.(type) {
	case *dynamodb.UpdateItemInput:
		return fmt.Sprintf("%s update %q cond %q", show(in.Key), aws.ToString(in.UpdateExpression), aws.ToString(in.ConditionExpression))
	case *dynamodb.DeleteItemInput:
		return fmt.Sprintf("%s cond %q", show(in.Key), aws.ToString(in.ConditionExpression))
	case *dynamodb.PutItemInput:
		return show(in.Item)
	case *dynamodb.GetItemInput:
		return show(in.Key)
	case *dynamodb.QueryInput:
		return fmt.Sprintf("%q", aws.ToString(in.KeyConditionExpression))
	case *dynamodb.TransactWriteItemsInput:
		var parts []string
		for _, ti := range in.TransactItems {
			switch {
			case ti.Update != nil:
				parts = append(parts, fmt.Sprintf("Update %s %q cond %q", show(ti.Update.Key), aws.ToString(ti.Update.UpdateExpression), aws.ToString(ti.Update.ConditionExpression)))
			case ti.ConditionCheck != nil:
				parts = append(parts, fmt.Sprintf("Check %s cond %q", show(ti.ConditionCheck.Key), aws.ToString(ti.ConditionCheck.ConditionExpression)))
			case ti.Put != nil:
				parts = append(parts, "Put "+show(ti.Put.Item))
			case ti.Delete != nil:
				parts = append(parts, "Delete "+show(ti.Delete.Key))
			default:
				parts = append(parts, "empty")
			}
		}
		return "[" + strings.Join(parts, "; ") + "]"
	}
	return fmt.Sprintf("%T", in)
}

func call[I, O any](d *tee, op string, in I, m, l func(context.Context, I, ...func(*dynamodb.Options)) (O, error)) (O, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	// The library's deadlines must not cut one side's call short: both
	// stores have to see every request.
	ctx := context.Background()
	mOut, mErr := m(ctx, in)
	d.lastOut = mOut
	lOut, lErr := l(ctx, in)
	if c := errClass(lErr); strings.HasPrefix(c, "other: ") {
		d.t.Errorf("DynamoDB Local failed: %v", lErr)
	}
	d.record(op, in, mErr, lErr, mOut, lOut)
	if *diffTrace {
		short := func(s string) string { return s[:min(len(s), 120)] }
		d.t.Logf("%s %s\n  model: %v\n  local: %s", op, short(describe(in)), mErr, short(errMessage(lErr)))
	}
	return lOut, lErr
}

func (d *tee) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return call(d, "GetItem", in, d.model.GetItem, d.local.GetItem)
}

func (d *tee) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return call(d, "PutItem", in, d.model.PutItem, d.local.PutItem)
}

func (d *tee) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return call(d, "UpdateItem", in, d.model.UpdateItem, d.local.UpdateItem)
}

func (d *tee) DeleteItem(_ context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return call(d, "DeleteItem", in, d.model.DeleteItem, d.local.DeleteItem)
}

func (d *tee) CreateTable(_ context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return call(d, "CreateTable", in, d.model.CreateTable, d.local.CreateTable)
}

func (d *tee) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return call(d, "DescribeTable", in, d.model.DescribeTable, d.local.DescribeTable)
}

func (d *tee) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return call(d, "TransactWriteItems", in, d.model.TransactWriteItems, d.local.TransactWriteItems)
}

func (d *tee) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return call(d, "Query", in, d.model.Query, d.local.Query)
}

func (d *tee) Scan(_ context.Context, in *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return call(d, "Scan", in, d.model.Scan, d.local.Scan)
}

func (d *tee) UpdateTimeToLive(_ context.Context, in *dynamodb.UpdateTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	return call(d, "UpdateTimeToLive", in, d.model.UpdateTimeToLive, d.local.UpdateTimeToLive)
}

func (d *tee) DescribeTimeToLive(_ context.Context, in *dynamodb.DescribeTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return call(d, "DescribeTimeToLive", in, d.model.DescribeTimeToLive, d.local.DescribeTimeToLive)
}

func newTee(t *testing.T) *tee {
	local, err := ddblocal.NewClient(context.Background(), endpoint)
	if err != nil {
		t.Fatal(err)
	}
	db := dynamolocktest.New()
	return &tee{t: t, db: db, model: db.Conn(), local: local, calls: map[string]int{}, known: map[string]int{}}
}

func (d *tee) check(t *testing.T) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, m := range d.mismatch {
		if i == 20 {
			t.Errorf("... and %d more mismatches", len(d.mismatch)-20)
			break
		}
		t.Error(m)
	}
}

// compareTables scans a table in both stores and compares every item.
func (d *tee) compareTables(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		in := &dynamodb.ScanInput{TableName: aws.String(name), ConsistentRead: aws.Bool(true)}
		var local []ddbmodel.Item
		for {
			out, err := d.local.Scan(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			local = append(local, out.Items...)
			if len(out.LastEvaluatedKey) == 0 {
				break
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
		model := d.db.Items(name)
		if !sameItems(sorted(model), sorted(local)) {
			t.Errorf("table %s differs at the end:\n  model %s\n  local %s", name, showAll(sorted(model)), showAll(sorted(local)))
		}
		if len(local) == 0 {
			t.Errorf("table %s is empty at the end: the run exercised nothing", name)
		}
	}
}

const (
	attrKey = "key"
	attrSK  = "sk"
)

// TestDifferential drives several lock clients with random operations
// (every request shape the library sends, with its options) through the
// tee, plus requests the library does not send but must survive (foreign
// and malformed items, invalid requests), and fails on any difference
// between the model and DynamoDB Local.
func TestDifferential(t *testing.T) {
	seed := *diffSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./internal/ddbmodel -run TestDifferential -ddbmodel.seed=%d)", seed, seed)
	d := newTee(t)
	suffix := fmt.Sprintf("%d", rand.Uint32())
	plain, sorted_, guarded := "diff_plain_"+suffix, "diff_sorted_"+suffix, "diff_data_"+suffix

	admin, err := dynamolock.New(d, plain)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mustOK := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustOK(admin.CreateTableWithContext(ctx, plain, dynamolock.WithTimeToLive("ttl")))
	mustOK(admin.CreateTableWithContext(ctx, sorted_, dynamolock.WithSortKeyName(attrSK)))
	mustOK(admin.CreateTableWithContext(ctx, guarded))
	// Creating it again is an error in both.
	_, _ = d.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(plain),
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeS}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err := admin.Close(); err != nil {
		t.Fatal(err)
	}

	invalidRequests(ctx, d, plain, sorted_)
	timeToLive(ctx, d, plain, sorted_)
	fairShapes(ctx, d, plain)
	resumeShapes(ctx, t, d, plain)

	deadline := time.Now().Add(*diffBudget)
	// Under load (six agents on two cores) a budget can pass before any
	// guarded write commits: go on until one has, for at most four budgets.
	hard := time.Now().Add(4 * *diffBudget)
	more := func() bool {
		now := time.Now()
		return now.Before(deadline) || now.Before(hard) && len(d.db.Items(guarded)) == 0
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			table := plain
			var opts []dynamolock.ClientOption
			if i%2 == 1 {
				table = sorted_
				opts = append(opts, dynamolock.WithSortKey(attrSK, []string{"a", "b"}[r.IntN(2)]))
			}
			if r.IntN(2) == 0 {
				opts = append(opts, dynamolock.WithClockSkewBound(50*time.Millisecond))
			}
			if r.IntN(3) == 0 {
				opts = append(opts, dynamolock.WithTTLAttribute("ttl"))
			}
			opts = append(opts, dynamolock.WithOwnerName(fmt.Sprintf("owner%d", i%3)),
				dynamolock.WithLeaseDuration(600*time.Millisecond), dynamolock.WithHeartbeatPeriod(150*time.Millisecond))
			c, err := dynamolock.New(d, table, opts...)
			if err != nil {
				t.Error(err)
				return
			}
			w := &worker{r: r, c: c, d: d, table: table, data: guarded}
			for more() {
				w.step(ctx)
			}
			_ = c.Close()
		})
	}
	// The fair mode's queue requests, on items of their own.
	fair := &fairActor{r: rand.New(rand.NewPCG(seed, 100)), d: d, table: plain}
	wg.Go(func() {
		for time.Now().Before(deadline) {
			fair.step(ctx)
			fair.sent++
		}
	})
	wg.Wait()
	fixedShapes(ctx, d, plain, guarded)
	d.check(t)
	d.compareTables(t, plain, sorted_, guarded)
	t.Logf("calls by operation and outcome: %v", d.calls)
	t.Logf("known differences met (the model follows the service's documentation): %v", d.known)
	t.Logf("the fair actor's random requests: %d", fair.sent)
}

// worker is one lock client doing random operations.
type worker struct {
	r        *rand.Rand
	c        *dynamolock.Client
	d        *tee
	table    string
	data     string
	held     []*dynamolock.Lock
	released *dynamolock.Lock // the last lock this worker released
}

var keys = []string{"k0", "k1", "k2"}

func (w *worker) step(ctx context.Context) {
	r := w.r
	key := keys[r.IntN(len(keys))]
	switch n := r.IntN(20); {
	case n < 5: // acquire
		var opts []dynamolock.AcquireLockOption
		if r.IntN(2) == 0 {
			opts = append(opts, dynamolock.FailIfLocked())
		} else {
			opts = append(opts, dynamolock.WithRefreshPeriod(50*time.Millisecond), dynamolock.WithAdditionalTimeToWaitForLock(0))
		}
		if r.IntN(3) == 0 {
			opts = append(opts, dynamolock.WithData([]byte{byte(r.IntN(256))}))
		}
		if r.IntN(4) == 0 {
			opts = append(opts, dynamolock.ReplaceData())
		}
		if r.IntN(4) == 0 {
			opts = append(opts, dynamolock.WithReentrant())
		}
		if r.IntN(4) == 0 {
			opts = append(opts, dynamolock.WithDeleteLockOnRelease())
		}
		if r.IntN(8) == 0 {
			opts = append(opts, dynamolock.WithAcquireOnlyIfLockAlreadyExists())
		}
		if r.IntN(5) == 0 {
			opts = append(opts, dynamolock.WithAdditionalAttributes(map[string]types.AttributeValue{
				"extra": &types.AttributeValueMemberN{Value: fmt.Sprintf("%d", r.IntN(100))}}))
		}
		actx, cancel := context.WithTimeout(ctx, time.Second)
		l, err := w.c.AcquireLockWithContext(actx, key, opts...)
		cancel()
		if err == nil {
			w.held = append(w.held, l)
		}
	case n < 8 && len(w.held) > 0: // release
		l := w.pick()
		var opts []dynamolock.ReleaseLockOption
		if r.IntN(3) == 0 {
			opts = append(opts, dynamolock.WithDeleteLock(r.IntN(2) == 0))
		}
		if r.IntN(3) == 0 {
			opts = append(opts, dynamolock.WithDataAfterRelease([]byte("after")))
		}
		if r.IntN(5) == 0 {
			opts = append(opts, dynamolock.WithBestEffort())
		}
		if ok, _ := w.c.ReleaseLockWithContext(ctx, l, opts...); ok {
			w.released = l
		}
	case n < 10 && len(w.held) > 0: // manual heartbeat
		l := w.pick()
		var opts []dynamolock.SendHeartbeatOption
		switch r.IntN(5) {
		case 0:
			opts = append(opts, dynamolock.DeleteData())
		case 1:
			opts = append(opts, dynamolock.ReplaceHeartbeatData([]byte("beat")))
		case 2:
			opts = append(opts, dynamolock.WithLeaseDurationToEnsure(time.Second))
		case 3:
			opts = append(opts, dynamolock.UnsafeMatchOwnerOnly())
		}
		_ = w.c.SendHeartbeatWithContext(ctx, l, opts...)
	case n < 12 && (len(w.held) > 0 || w.released != nil): // guarded write
		var l *dynamolock.Lock
		if len(w.held) > 0 && (w.released == nil || r.IntN(4) > 0) {
			l = w.pick()
		} else {
			l = w.released // a released lock: the transaction must be cancelled
		}
		put := types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(w.data),
			Item: map[string]types.AttributeValue{
				attrKey: &types.AttributeValueMemberS{Value: key},
				"token": &types.AttributeValueMemberN{Value: fmt.Sprintf("%d", l.FencingToken())},
			},
		}}
		if r.IntN(2) == 0 {
			_, _ = w.d.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{l.TransactionCondition(), put}})
		} else {
			item, record := l.TransactionWithRefresh()
			_, _ = record(w.d.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put, item}}))
		}
	case n < 14: // read
		if l, err := w.c.GetWithContext(ctx, key); err == nil && l != nil {
			_ = l.IsExpired()
		}
	case n < 15: // listings
		for range w.c.AllLocks(ctx) {
		}
		for range w.c.LocksByPartitionKey(ctx, key) {
		}
	case n < 17: // a foreign or hostile item, then the library meets it
		w.foreign(ctx, key)
	case n == 17 && (len(w.held) > 0 || w.released != nil): // a resume, as by a restarted process
		l := w.released
		if len(w.held) > 0 && (l == nil || r.IntN(3) > 0) {
			l = w.pick()
		}
		if got, err := w.c.ResumeLock(ctx, l.ResumeToken()); err == nil {
			w.held = append(w.held, got)
		}
	default: // do nothing for a moment: heartbeats run, leases age
		time.Sleep(time.Duration(r.IntN(200)) * time.Millisecond)
	}
	w.held = slices.DeleteFunc(w.held, func(l *dynamolock.Lock) bool { return l.IsExpired() })
}

func (w *worker) pick() *dynamolock.Lock { return w.held[w.r.IntN(len(w.held))] }

// foreign writes an item as another writer would: Amazon's Java client, an
// old dynamolock, or a broken tool.
func (w *worker) foreign(ctx context.Context, key string) {
	r := w.r
	it := map[string]types.AttributeValue{
		attrKey:               &types.AttributeValueMemberS{Value: key},
		"ownerName":           &types.AttributeValueMemberS{Value: "java-host"},
		"recordVersionNumber": &types.AttributeValueMemberS{Value: fmt.Sprintf("rvn-%d", r.Uint32())},
		"leaseDuration":       &types.AttributeValueMemberS{Value: []string{"500", "400ms", "0.5s"}[r.IntN(3)]},
	}
	if w.table != "" && strings.HasPrefix(w.table, "diff_sorted_") {
		it[attrSK] = &types.AttributeValueMemberS{Value: []string{"a", "b"}[r.IntN(2)]}
	}
	switch r.IntN(5) {
	case 0:
		it["isReleased"] = &types.AttributeValueMemberS{Value: "1"}
		it["data"] = &types.AttributeValueMemberS{Value: "not binary"}
	case 1:
		it["isReleased"] = &types.AttributeValueMemberBOOL{Value: true}
		it["leaseExpiresAt"] = &types.AttributeValueMemberN{Value: "1"}
	case 2:
		delete(it, "recordVersionNumber")
	case 3:
		it["fencingToken"] = &types.AttributeValueMemberN{Value: "000042"}
	}
	// Only where the key is free or released, so that live locks of the
	// workers are not clobbered (that would only test the library).
	_, _ = w.d.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(w.table),
		Item:                                it,
		ConditionExpression:                 aws.String("attribute_not_exists(#k) OR attribute_exists(#r)"),
		ExpressionAttributeNames:            map[string]string{"#k": attrKey, "#r": "isReleased"},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
}

// fixedShapes sends failing conditional requests the random run may not
// reach: a delete and a transaction whose conditions fail, with ALL_OLD.
func fixedShapes(ctx context.Context, d *tee, plain, guarded string) {
	s := func(v string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: v} }
	for _, k := range append(keys, "counter", "absent") {
		key := map[string]types.AttributeValue{attrKey: s(k)}
		_, _ = d.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(plain), Key: key,
			ConditionExpression: aws.String("#o = :o"), ExpressionAttributeNames: map[string]string{"#o": "ownerName"},
			ExpressionAttributeValues:           map[string]types.AttributeValue{":o": s("nobody")},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
		_, _ = d.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(guarded), Item: map[string]types.AttributeValue{attrKey: s(k), "token": &types.AttributeValueMemberN{Value: "1"}}}},
			{ConditionCheck: &types.ConditionCheck{TableName: aws.String(plain), Key: key,
				ConditionExpression: aws.String("#o = :o"), ExpressionAttributeNames: map[string]string{"#o": "ownerName"},
				ExpressionAttributeValues:           map[string]types.AttributeValue{":o": s("nobody")},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
			{ConditionCheck: &types.ConditionCheck{TableName: aws.String(plain), Key: map[string]types.AttributeValue{attrKey: s(k + "x")},
				ConditionExpression: aws.String("attribute_not_exists(#k)"), ExpressionAttributeNames: map[string]string{"#k": attrKey}}},
		}})
	}
}

// invalidRequests sends requests both stores must reject the same way.
func invalidRequests(ctx context.Context, d *tee, plain, sorted string) {
	s := func(v string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: v} }
	key := map[string]types.AttributeValue{attrKey: s("k0")}
	_, _ = d.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("no_such_table_x"), Key: key})
	_, _ = d.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(plain), Key: map[string]types.AttributeValue{attrKey: s("")}})
	_, _ = d.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(plain), Key: map[string]types.AttributeValue{attrKey: &types.AttributeValueMemberN{Value: "1"}}})
	_, _ = d.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(sorted), Key: key})
	_, _ = d.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("no_such_table_x")})
	_, _ = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("no_such_table_x"), Key: key,
		UpdateExpression: aws.String("SET #a = :a"), ExpressionAttributeNames: map[string]string{"#a": "a"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": s("x")}})
	// An unused placeholder, an undefined one, a syntax error, a key update.
	_, _ = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(plain), Key: key,
		UpdateExpression: aws.String("SET #a = :a"), ExpressionAttributeNames: map[string]string{"#a": "a", "#b": "b"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": s("x")}})
	_, _ = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(plain), Key: key,
		UpdateExpression: aws.String("SET #a = :b"), ExpressionAttributeNames: map[string]string{"#a": "a"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": s("x")}})
	_, _ = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(plain), Key: key,
		UpdateExpression: aws.String("SET #a = = :a"), ExpressionAttributeNames: map[string]string{"#a": "a"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": s("x")}})
	_, _ = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(plain), Key: key,
		UpdateExpression: aws.String("SET #a = :a"), ExpressionAttributeNames: map[string]string{"#a": attrKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": s("x")}})
	// Arithmetic on a missing attribute, and on a string.
	_, _ = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(plain), Key: key,
		UpdateExpression: aws.String("SET #a = #a + :one"), ExpressionAttributeNames: map[string]string{"#a": "counter"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}}})
	_, _ = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(plain), Key: key,
		UpdateExpression: aws.String("SET #a = if_not_exists(#a, :s) + :one"), ExpressionAttributeNames: map[string]string{"#a": "counter"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}, ":s": s("x")}})
	// Two operations on one item in a transaction; an empty member.
	cc := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(plain), Key: key,
		ConditionExpression: aws.String("attribute_not_exists(#k)"), ExpressionAttributeNames: map[string]string{"#k": attrKey}}}
	_, _ = d.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{cc, cc}})
	_, _ = d.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{cc, {}}})
	// A valid counter write, so that arithmetic and number formats are compared.
	for _, v := range []string{"1", "0041", "2.50", "-3"} {
		_, _ = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(plain), Key: map[string]types.AttributeValue{attrKey: s("counter")},
			UpdateExpression: aws.String("SET #a = if_not_exists(#a, :z) + :v"), ExpressionAttributeNames: map[string]string{"#a": "counter"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":z": &types.AttributeValueMemberN{Value: "0"}, ":v": &types.AttributeValueMemberN{Value: v}},
			ReturnValues:              types.ReturnValueAllNew})
	}
}

// timeToLive changes and reads the TTL setting of two tables, plain's
// enabled on "ttl" when it was created: every way an UpdateTimeToLive can
// fail, and the settings it leaves.
func timeToLive(ctx context.Context, d *tee, plain, sorted string) {
	update := func(table, attr string, on bool) {
		_, _ = d.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(table),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attr), Enabled: aws.Bool(on)}})
	}
	describe := func(table string) {
		m, mErr := d.model.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
		l, lErr := d.local.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
		ttl := func(o *dynamodb.DescribeTimeToLiveOutput, err error) string {
			if err != nil {
				return errClass(err) + ": " + errMessage(err)
			}
			return fmt.Sprintf("%s %s", o.TimeToLiveDescription.TimeToLiveStatus, aws.ToString(o.TimeToLiveDescription.AttributeName))
		}
		if mt, lt := ttl(m, mErr), ttl(l, lErr); mt != lt {
			d.mu.Lock()
			d.mismatch = append(d.mismatch, fmt.Sprintf("DescribeTimeToLive %s: model %q, DynamoDB Local %q", table, mt, lt))
			d.mu.Unlock()
		}
	}
	describe(plain)
	describe(sorted)
	describe("no_such_table_x")
	update(plain, "ttl", true)    // already enabled
	update(plain, "other", true)  // enabled on another attribute
	update(plain, "other", false) // disabling another attribute
	update(sorted, "ttl", false)  // already disabled
	update("no_such_table_x", "ttl", true)
	update(sorted, "expires", true)
	describe(sorted)
	// A second change within the hour: the service refuses it, DynamoDB
	// Local does not (a known difference). Local is then put back where
	// the model stayed.
	update(sorted, "expires", false)
	_, _ = d.local.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(sorted),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expires"), Enabled: aws.Bool(true)}})
	describe(sorted)
}
