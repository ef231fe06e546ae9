package dynamolock_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/arielsrv/dynamolock/v2"
)

// A worker's lock on one key: the example of the package documentation,
// which shows the region of docWorker below (TestPackageDocExampleIsRun
// fails when the two differ).
func Example_worker() {
	if err := docWorker(context.Background(), exampleConfig()); err != nil {
		log.Fatal(err)
	}
	// Output: working on customer-42, fencing token issued: true
}

// docWorker is the program around the package documentation's example:
// ctx and cfg are given, and it returns the error.
func docWorker(ctx context.Context, cfg aws.Config) error {
	// snippet:package-doc
	c, err := dynamolock.New(dynamodb.NewFromConfig(cfg), "locks")
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.CreateTableIfNotExists(ctx); err != nil {
		return err
	}
	return c.Do(ctx, "customer-42", func(ctx context.Context, lock *dynamolock.Lock) error {
		// Work on customer 42. ctx is cancelled the moment the lock is
		// lost; pass the fencing token to the stores you write to.
		return process(ctx, "customer-42", lock.FencingToken())
	})
	// snippet:end
}

// process stands for the caller's work in the package documentation's
// example: it stops when ctx ends (the lock was lost), and would send the
// fencing token with every write to a store.
func process(ctx context.Context, customer string, token uint64) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	fmt.Printf("working on %s, fencing token issued: %t\n", customer, token > 0)
	return nil
}
