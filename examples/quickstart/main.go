// Command quickstart runs a job for one customer under a lock on DynamoDB:
// started on several hosts at once, only one runs it at a time.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/arielsrv/dynamolock/v2"
)

func main() {
	ctx := context.Background()
	// The AWS SDK's own configuration: credentials and Region from the
	// environment; for DynamoDB Local, AWS_ENDPOINT_URL_DYNAMODB too.
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		// DynamoDB Local, at AWS_ENDPOINT_URL_DYNAMODB, sends no checksum
		// with its error answers, which every contended lock gets: the SDK
		// would log a warning for each.
		o.DisableValidateResponseChecksum = os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") != ""
	})
	c, err := dynamolock.New(db, "locks",
		dynamolock.WithLeaseDuration(3*time.Second),
		dynamolock.WithHeartbeatPeriod(time.Second),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// Create the table unless it exists; if it does, check its key schema.
	if _, err := c.CreateTableIfNotExists(ctx); err != nil {
		log.Fatal(err)
	}

	// Do waits while another host holds the lock, runs the function while
	// this one holds it, and releases it.
	err = c.Do(ctx, "customer-42", func(ctx context.Context, lock *dynamolock.Lock) error {
		// ctx ends the moment the lock is lost: long work checks it.
		fmt.Println("working on customer-42, fencing token", lock.FencingToken())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}
