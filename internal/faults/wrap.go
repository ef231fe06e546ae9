package faults

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
)

// API is the part of the DynamoDB API that dynamolock's DynamoDBClient
// names, with the SDK's signatures; *dynamodb.Client implements it.
type API interface {
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, params *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	CreateTable(ctx context.Context, params *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

// ErrUnsupported is returned by a [Client] method that the wrapped client
// does not implement.
var ErrUnsupported = errors.New("faults: the wrapped client does not implement this operation")

// Rule picks some calls of one operation and says what happens to them.
// The steps run in this order: Before; then the request is sent (not at
// all with Drop, twice with Replay); then After; then the caller gets the
// answer, or a lost-connection error with Drop or LoseAnswer.
type Rule struct {
	// Op is the operation name: "UpdateItem", "GetItem", "DeleteItem",
	// "PutItem", "CreateTable", "TransactWriteItems", "Query", "Scan",
	// "DescribeTable" or "UpdateTimeToLive".
	Op string
	// Match picks the calls the rule applies to, given the operation's input
	// (for example a *dynamodb.UpdateItemInput); nil picks every call of Op.
	Match func(input any) bool
	// Times is how many picked calls the rule applies to, the first ones;
	// 0 means all of them.
	Times int

	// Before runs before the request is sent, with the caller's context.
	// It may block (a delay: [Sleep], [Gate.Wait]) or let another client
	// act first. If it returns an error the request is not sent and the
	// caller gets that error, wrapped as the SDK wraps errors.
	Before func(ctx context.Context) error
	// Drop never sends the request: the caller gets a lost-connection error.
	Drop bool
	// Replay sends the request twice, as the SDK does when it retries after
	// a lost answer, and returns the second answer.
	Replay bool
	// LoseAnswer sends the request (the write lands) and returns a
	// lost-connection error instead of its answer.
	LoseAnswer bool
	// After runs once the request was sent and answered, before the caller
	// gets the answer, with the caller's context.
	After func(ctx context.Context)
	// Late holds the request until the caller's context ends, and gives
	// the caller its context's error as the SDK does ([Canceled]), as if
	// the request were still on its way; the request is sent, with a
	// context of its own, once Late is closed, and lands then: a write
	// that arrives after its caller gave up (and took it back). With Drop
	// too, the caller gets a lost-connection error at once instead (a
	// request whose answer was lost, that lands later). Before, Replay,
	// LoseAnswer and After do not apply. [Client.Landed] tells when it was
	// answered, and with what error.
	Late <-chan struct{}

	hits int // picked calls so far; guarded by Client.mu
	// landed is closed once a Late request was sent and answered, with
	// lateErr its answer's error.
	landed  chan struct{}
	lateErr error
}

// Client wraps a DynamoDB client and applies rules to its calls. Calls no
// rule picks go through unchanged. Safe for concurrent use.
//
// It has every method dynamolock may look for (TransactWriteItems, Query,
// Scan, DescribeTable, UpdateTimeToLive); those the wrapped client lacks
// return [ErrUnsupported].
type Client struct {
	db API

	mu    sync.Mutex
	rules []*Rule
}

// Wrap returns a client that sends calls to db, applying rules.
func Wrap(db API, rules ...*Rule) *Client {
	return &Client{db: db, rules: rules}
}

// Add adds a rule after the existing ones.
func (c *Client) Add(r *Rule) {
	c.mu.Lock()
	c.rules = append(c.rules, r)
	c.mu.Unlock()
}

// Landed returns a channel closed once the request r held (Rule.Late)
// was sent and answered, and a function that returns that answer's error
// once the channel is closed.
func (c *Client) Landed(r *Rule) (<-chan struct{}, func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.landed == nil {
		r.landed = make(chan struct{})
	}
	return r.landed, func() error { return r.lateErr }
}

// Hits returns how many calls r applied to so far.
func (c *Client) Hits(r *Rule) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return r.hits
}

// pick returns the first rule that applies to a call, counting the call.
func (c *Client) pick(op string, in any) *Rule {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.rules {
		if r.Op != op || (r.Times > 0 && r.hits >= r.Times) || (r.Match != nil && !r.Match(in)) {
			continue
		}
		r.hits++
		return r
	}
	return nil
}

// apply runs one call of op through the rule that picks it, if any.
func apply[In, Out any](c *Client, ctx context.Context, op string, in In, send func(context.Context, In) (Out, error)) (Out, error) {
	r := c.pick(op, in)
	if r == nil {
		return send(ctx, in)
	}
	var zero Out
	if r.Late != nil {
		if !r.Drop {
			<-ctx.Done()
		}
		c.Landed(r)
		landed := r.landed // set by Landed, never changed after
		go func() {
			<-r.Late
			_, r.lateErr = send(context.WithoutCancel(ctx), in)
			close(landed)
		}()
		if r.Drop {
			return zero, LostConnection(op)
		}
		return zero, Canceled(op, ctx.Err())
	}
	if r.Before != nil {
		if err := r.Before(ctx); err != nil {
			return zero, &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op, Err: err}
		}
	}
	var out Out
	var err error
	if !r.Drop {
		out, err = send(ctx, in)
		if r.Replay {
			out, err = send(ctx, in)
		}
	}
	if r.After != nil {
		r.After(ctx)
	}
	if r.Drop || r.LoseAnswer {
		return zero, LostConnection(op)
	}
	return out, err
}

// LostConnection returns the error the SDK returns for op when the
// connection breaks before the answer arrives (here: reset by the peer),
// with the same wrapping: an *smithy.OperationError around an
// *awshttp.ResponseError (HTTP status 0) around a
// *smithyhttp.RequestSendError. It matches syscall.ECONNRESET.
func LostConnection(op string) error {
	return sendError(op, "", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)})
}

// Sleep returns a Before step that holds the request for d, or until the
// caller's context ends.
func Sleep(d time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Gate holds requests until a test opens it. Use [Gate.Wait] as a rule's
// Before step and [Gate.Arrived] to learn that a request is being held.
// The zero Gate is not usable; call [NewGate].
type Gate struct {
	open, arrived         chan struct{}
	openOnce, arrivedOnce sync.Once
}

// NewGate returns a closed gate.
func NewGate() *Gate {
	return &Gate{open: make(chan struct{}), arrived: make(chan struct{})}
}

// Wait holds the calling request until the gate opens or ctx ends (then it
// returns ctx.Err(), as the SDK does when a context ends mid-request).
func (g *Gate) Wait(ctx context.Context) error {
	g.arrivedOnce.Do(func() { close(g.arrived) })
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Arrived is closed once a request reached the gate.
func (g *Gate) Arrived() <-chan struct{} { return g.arrived }

// Open lets every held and later request through. Safe to call more than
// once.
func (g *Gate) Open() { g.openOnce.Do(func() { close(g.open) }) }

// OpenAfter opens the gate after d, whatever the test does meanwhile: a
// bound on how long a request stays held.
func (g *Gate) OpenAfter(d time.Duration) { time.AfterFunc(d, g.Open) }

// Opened is closed once the gate is open.
func (g *Gate) Opened() <-chan struct{} { return g.open }

// GetItem sends a GetItem call through the rules.
func (c *Client) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return apply(c, ctx, "GetItem", in, func(ctx context.Context, in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
		return c.db.GetItem(ctx, in, optFns...)
	})
}

// PutItem sends a PutItem call through the rules.
func (c *Client) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return apply(c, ctx, "PutItem", in, func(ctx context.Context, in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
		return c.db.PutItem(ctx, in, optFns...)
	})
}

// UpdateItem sends an UpdateItem call through the rules.
func (c *Client) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return apply(c, ctx, "UpdateItem", in, func(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		return c.db.UpdateItem(ctx, in, optFns...)
	})
}

// DeleteItem sends a DeleteItem call through the rules.
func (c *Client) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return apply(c, ctx, "DeleteItem", in, func(ctx context.Context, in *dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) {
		return c.db.DeleteItem(ctx, in, optFns...)
	})
}

// CreateTable sends a CreateTable call through the rules.
func (c *Client) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return apply(c, ctx, "CreateTable", in, func(ctx context.Context, in *dynamodb.CreateTableInput) (*dynamodb.CreateTableOutput, error) {
		return c.db.CreateTable(ctx, in, optFns...)
	})
}

// TransactWriteItems sends a TransactWriteItems call through the rules.
func (c *Client) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	db, ok := c.db.(interface {
		TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	})
	if !ok {
		return nil, ErrUnsupported
	}
	return apply(c, ctx, "TransactWriteItems", in, func(ctx context.Context, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		return db.TransactWriteItems(ctx, in, optFns...)
	})
}

// Query sends a Query call through the rules.
func (c *Client) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	db, ok := c.db.(interface {
		Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	})
	if !ok {
		return nil, ErrUnsupported
	}
	return apply(c, ctx, "Query", in, func(ctx context.Context, in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
		return db.Query(ctx, in, optFns...)
	})
}

// Scan sends a Scan call through the rules.
func (c *Client) Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	db, ok := c.db.(interface {
		Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	})
	if !ok {
		return nil, ErrUnsupported
	}
	return apply(c, ctx, "Scan", in, func(ctx context.Context, in *dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
		return db.Scan(ctx, in, optFns...)
	})
}

// DescribeTable sends a DescribeTable call through the rules.
func (c *Client) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	db, ok := c.db.(interface {
		DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	})
	if !ok {
		return nil, ErrUnsupported
	}
	return apply(c, ctx, "DescribeTable", in, func(ctx context.Context, in *dynamodb.DescribeTableInput) (*dynamodb.DescribeTableOutput, error) {
		return db.DescribeTable(ctx, in, optFns...)
	})
}

// UpdateTimeToLive sends an UpdateTimeToLive call through the rules.
func (c *Client) UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	db, ok := c.db.(interface {
		UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	})
	if !ok {
		return nil, ErrUnsupported
	}
	return apply(c, ctx, "UpdateTimeToLive", in, func(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput) (*dynamodb.UpdateTimeToLiveOutput, error) {
		return db.UpdateTimeToLive(ctx, in, optFns...)
	})
}
