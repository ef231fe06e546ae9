package dynamolock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/arielsrv/dynamolock/v2"
)

// Election.Run is the leader loop of a service: it campaigns, runs the
// leader's work while it leads, stops it the moment leadership ends,
// campaigns again, and resigns when its context ends. Here the work ends
// its own term (as a service's shutdown would).
func ExampleElection_Run() {
	table := exampleTable("service")
	c, err := dynamolock.New(exampleDB(), table, dynamolock.WithOwnerName("node-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTableWithContext(context.Background(), table); err != nil {
		log.Fatal(err)
	}

	// snippet:election-run
	ctx, stop := context.WithCancel(context.Background()) // the service's lifetime
	defer stop()
	e := c.NewElection("scheduler")
	mux := http.NewServeMux()                               // the service's
	mux.Handle("/healthz", e.HealthHandler(10*time.Second)) // a liveness probe
	err = e.Run(ctx, []byte("10.0.0.1:8080"), dynamolock.LeaderCallbacks{
		OnStartedLeading: func(term context.Context, lock *dynamolock.Lock) {
			// Lead until term ends (leadership lost, Resign, ctx ended);
			// fence every write with lock.FencingToken().
			fmt.Println("leading, is leader:", e.IsLeader())
			stop() // here: the service shuts down at once
			<-term.Done()
		},
		OnStoppedLeading: func(err error) {
			fmt.Println("stopped leading, err:", err) // nil: ctx ended, resigned
		},
		OnNewLeader: func(l dynamolock.Leader) { log.Println("leader:", l.Owner) },
	})
	fmt.Println("Run returned:", err, "is leader:", e.IsLeader())
	// snippet:end

	// Output:
	// leading, is leader: true
	// stopped leading, err: <nil>
	// Run returned: <nil> is leader: false
}

// A process that keeps its lock's resume token gets the lock back after a
// restart with one conditional write; the old process, if it still runs,
// is fenced off.
func ExampleClient_ResumeLock() {
	ctx := context.Background()
	db, table := exampleDB(), exampleTable("resume")
	before, err := dynamolock.New(db, table, dynamolock.WithOwnerName("worker-before-restart"))
	if err != nil {
		log.Fatal(err)
	}
	defer before.Close()
	if _, err := before.CreateTableWithContext(ctx, table); err != nil {
		log.Fatal(err)
	}
	lock, err := before.AcquireLockWithContext(ctx, "batch-7")
	if err != nil {
		log.Fatal(err)
	}
	// snippet:resume
	token := lock.ResumeToken() // kept in a file or an environment variable
	// ... the process restarts: a new client, a new owner name ...
	after, err := dynamolock.New(db, table)
	if err != nil {
		log.Fatal(err)
	}
	defer after.Close()
	resumed, err := after.ResumeLock(ctx, token)
	if err != nil {
		log.Fatal(err) // *LockNotGrantedError: released, taken, another table...
	}
	fmt.Println("fencing token moved on:", resumed.FencingToken() == lock.FencingToken()+1)
	_, err = after.ResumeLock(ctx, token) // that acquisition is over: refused
	fmt.Println("old token refused:", errors.Is(err, dynamolock.ErrLockTakenOver))
	// snippet:end
	if err := resumed.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// fencing token moved on: true
	// old token refused: true
}

// Who holds a semaphore's slots, and a read/write lock's readers.
func ExampleSemaphore_Holders() {
	ctx := context.Background()
	table := exampleTable("holders")
	c, err := dynamolock.New(exampleDB(), table, dynamolock.WithOwnerName("encoder-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTableWithContext(ctx, table); err != nil {
		log.Fatal(err)
	}
	sem, err := c.NewSemaphore("video-encoders", 4)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := sem.Acquire(ctx); err != nil {
		log.Fatal(err)
	}
	rw, err := c.NewRWLock("shard-map")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := rw.RLock(ctx); err != nil {
		log.Fatal(err)
	}
	// snippet:holders
	slots, err := sem.Holders(ctx) // one GetItem per slot
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range slots {
		fmt.Println("slot held by", s.OwnerName(), "until at least", s.Expiration().After(time.Now()))
	}
	readers, err := rw.Readers(ctx) // one GetItem
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("readers:", len(readers))
	// snippet:end

	// Output:
	// slot held by encoder-1 until at least true
	// readers: 1
}
