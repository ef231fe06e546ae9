// Package dynamolocktest is an in-memory DynamoDB for testing code that
// uses dynamolock: a leader loop that must step down, a worker that must
// fence its writes, a job that must stop when its lock is lost. It needs no
// DynamoDB, no Docker and no JVM, and inside a testing/synctest bubble a
// lease of a minute runs out in microseconds of wall time.
//
// # Getting started
//
// [New] makes an empty [DB]; [DB.Conn] makes one host's connection to it,
// a [*Conn] that the lock library takes in place of a *dynamodb.Client:
//
//	db := dynamolocktest.New()
//	c, err := dynamolock.New(db.Conn(), "locks")
//	...
//	_, err = c.CreateTableIfNotExists(ctx)
//
// Everything of the library works on it: acquisition, heartbeats and
// release, Client.Do, elections, semaphores, multi-key acquisition,
// listings, fencing tokens, and guarded writes (Lock.TransactionCondition
// in your own TransactWriteItems, sent through a Conn). Your own tables live in the same DB: create them
// with CreateTable through any Conn.
//
// # Faults
//
// Each Conn has its own faults, so that a test can cut one host off while
// the others go on:
//
//   - [Conn.Partition] / [Conn.Heal]: every request fails as when
//     DynamoDB's endpoint is unreachable.
//   - [Conn.LoseAnswers]: the next writes land, their answers are lost.
//   - [Conn.LoseAnswersAndRetry]: the next writes land, their answers are
//     lost, and the SDK's retry meets what they did (a conditional write
//     fails its condition against its own first attempt).
//   - [Conn.Throttle]: the next requests are throttled for the table's
//     capacity, not applied; [Conn.ThrottleHotKey]: for their key's
//     partition. Each carries the reason DynamoDB gives since 2025.
//   - [Conn.TransactionConflicts]: the next writes meet a transaction in
//     progress on their item (TransactionConflictException, or a
//     transaction cancelled with the reason TransactionConflict).
//   - [Conn.HoldTransactions]: the connection's transactions take effect
//     in two steps, so that other connections' writes meet them.
//   - [Conn.Delay]: every request waits before it reaches the DB.
//   - [Conn.Stall]: every request is taken and never answered, until its
//     context ends (a silent network).
//
// Each fails a request with the error the AWS SDK returns for the same
// failure, so the lock library (and your code) handles it as it would in
// production: a partitioned host's lock is lost when its lease runs out
// (Done closes), and another host takes it over with a higher fencing
// token. Some of them DynamoDB Local never produces (a transaction
// conflict, the retry of a write whose answer was lost): the fake is the
// place to test them.
//
// # Assertions
//
// [DB.Items] returns a table's items as the SDK's attribute values;
// [Conn.Calls] counts the requests one connection made, per operation.
//
// # Virtual time
//
// Neither DB nor Conn starts a goroutine or a timer of its own, so inside
// a testing/synctest bubble the only clocks are the library's and your
// code's, and they run in virtual time: when every goroutine of the bubble
// waits on a timer, time jumps to the next one. This failover test waits
// two minutes of lease time (the leader's lease runs out, then the
// standby watches the item for a lease before it takes over) and takes
// milliseconds of wall time:
//
//	func TestFailover(t *testing.T) {
//		synctest.Test(t, func(t *testing.T) {
//			ctx := context.Background()
//			db := dynamolocktest.New()
//			hostA, hostB := db.Conn(), db.Conn()
//			opts := []dynamolock.ClientOption{
//				dynamolock.WithLeaseDuration(time.Minute),
//				dynamolock.WithHeartbeatPeriod(10 * time.Second),
//			}
//			a, _ := dynamolock.New(hostA, "locks", opts...)
//			defer a.Close()
//			b, _ := dynamolock.New(hostB, "locks", opts...)
//			defer b.Close()
//			if _, err := a.CreateTableIfNotExists(ctx); err != nil {
//				t.Fatal(err)
//			}
//			leader, err := a.NewElection("leader").Campaign(ctx, nil)
//			if err != nil {
//				t.Fatal(err)
//			}
//
//			hostA.Partition()
//			<-leader.Done() // its lease runs out: a steps down
//			next, err := b.NewElection("leader").Campaign(ctx, nil)
//			if err != nil {
//				t.Fatal(err)
//			}
//			if next.FencingToken() <= leader.FencingToken() {
//				t.Fatal("the new leader's fencing token is not higher")
//			}
//		})
//	}
//
// Everything the test starts inside the bubble must end inside it: close
// every client (Close stops its goroutines) before the bubble's function
// returns. A DB may be made outside a bubble and used inside one.
// Outside a bubble the package is an ordinary fake: leases take real time,
// so use short ones.
//
// # What it models, and what it does not
//
// The DB is the model of DynamoDB that the lock library's own simulation
// runs on (internal/ddbmodel in this module): every request takes effect
// at one instant, in one order, as DynamoDB's strongly consistent reads and
// conditional writes do in one Region. It implements exactly the requests
// and expressions the library sends (CreateTable, DescribeTable, GetItem,
// PutItem, UpdateItem, DeleteItem, TransactWriteItems, Query, Scan,
// UpdateTimeToLive, DescribeTimeToLive), and is checked, request by
// request, against Amazon DynamoDB Local by a differential test in the
// library's test suite. It answers as the DynamoDB service does: what the
// service refuses it refuses, with the service's ValidationException
// (reserved words as plain attribute names, an empty
// ExpressionAttributeValues map, numbers past 38 digits or DynamoDB's
// range, ADD of a string, items past 400 KB or nested past 32 levels,
// expressions past DynamoDB's quotas, ...), a ClientRequestToken reused
// within ten minutes for another request fails with an
// IdempotentParameterMismatchException, and where DynamoDB Local departs
// from the service's documentation the DB follows the documentation. A
// request shape it does not implement (a list element in an expression, a
// secondary index, a legacy parameter such as Expected) fails with a
// ValidationException whose message starts "ddbmodel: unsupported", never
// with a success. Each request consumes the capacity units DynamoDB would
// charge, which its answer carries when it asks (ReturnConsumedCapacity),
// and a table ARN names its table wherever a name does (but CreateTable).
// It does not model throttling other than [Conn.Throttle] and
// [Conn.ThrottleHotKey], TTL deletion, DeleteTable, secondary indexes,
// streams, or global tables.
package dynamolocktest
