// Command lambda is the pattern for holding a dynamolock lock in an AWS
// Lambda function: one lock per invocation, its lease bounded by the
// invocation's deadline, released before the handler returns, and no
// heartbeat left running to be frozen between invocations (handler.go;
// README.md beside this file).
//
// In a function, main is the AWS Lambda Go runtime's (not a dependency of
// this module):
//
//	import "github.com/aws/aws-lambda-go/lambda"
//
//	func main() {
//		h := newHandler(context.Background())
//		lambda.Start(h.Handle)
//	}
//
// This main runs one invocation locally instead: the event is read from
// stdin as JSON ({"key":"customer-42"}), with a deadline of
// LAMBDA_TIMEOUT (default 10s), as Lambda gives one.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/arielsrv/dynamolock/v2"
)

// newHandler builds what an execution environment keeps across
// invocations: the SDK client and one lock client without heartbeats.
func newHandler(ctx context.Context) *Handler {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	table := os.Getenv("LOCK_TABLE")
	if table == "" {
		table = "locks"
	}
	locks, err := dynamolock.New(dynamodb.NewFromConfig(cfg), table, dynamolock.DisableHeartbeat())
	if err != nil {
		log.Fatal(err)
	}
	return &Handler{Locks: locks, Work: func(ctx context.Context, ev Event, lock *dynamolock.Lock) (string, error) {
		// The work: every write it makes carries lock.FencingToken(), or
		// goes in a transaction with lock.TransactionCondition().
		return fmt.Sprintf("processed %s", ev.Key), nil
	}}
}

func main() {
	timeout := 10 * time.Second
	if v := os.Getenv("LAMBDA_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			log.Fatalf("LAMBDA_TIMEOUT: %v", err)
		}
		timeout = d
	}
	var ev Event
	if err := json.NewDecoder(os.Stdin).Decode(&ev); err != nil {
		log.Fatalf("event: %v", err)
	}
	h := newHandler(context.Background())
	defer h.Locks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := h.Handle(ctx, ev)
	if err != nil {
		log.Fatal(err)
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
}
