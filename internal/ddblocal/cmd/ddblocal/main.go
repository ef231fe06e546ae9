// Command ddblocal runs a command against Amazon DynamoDB Local: the one
// launcher behind scripts/ddblocal.sh run (and so make test, bench, demo and
// reliability), built on package ddblocal, which the tests' TestMain use too.
//
//	ddblocal run [--] CMD [ARG...]
//
// With DYNAMODB_ENDPOINT set, CMD runs with it and nothing is started.
// Otherwise an in-memory DynamoDB Local is started on a free 127.0.0.1 port,
// CMD runs with DYNAMODB_ENDPOINT and DDBLOCAL_PID set, and the server is
// stopped when CMD exits; ddblocal exits with CMD's status. Every wait is
// bounded: the start by DDBLOCAL_START_TIMEOUT (seconds, default 120), the
// stop by SIGTERM then SIGKILL 15 s apart, CMD after a signal passed on to
// it by 30 s. The server dies with this process (Linux), never outlives it.
//
// Environment: DDBLOCAL_PORT fixes the port; DYNAMODB_LOCAL_DIR names the
// directory holding DynamoDBLocal.jar (else .cache/ddblocal, as installed
// by scripts/ddblocal.sh install).
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
)

func main() {
	args := os.Args[1:]
	if len(args) == 0 || args[0] != "run" {
		usage()
	}
	args = args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		usage()
	}
	opts, err := optionsFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ddblocal:", err)
		os.Exit(2)
	}
	code, err := ddblocal.Run(context.Background(), args, ddblocal.RunConfig{}, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: ddblocal run [--] CMD [ARG...]")
	os.Exit(2)
}

// optionsFromEnv reads DDBLOCAL_START_TIMEOUT and DDBLOCAL_PORT.
func optionsFromEnv() ([]ddblocal.Option, error) {
	var opts []ddblocal.Option
	if v := os.Getenv("DDBLOCAL_START_TIMEOUT"); v != "" {
		secs, err := strconv.Atoi(v)
		if err != nil || secs <= 0 {
			return nil, fmt.Errorf("DDBLOCAL_START_TIMEOUT=%q: want a positive number of seconds", v)
		}
		opts = append(opts, ddblocal.WithStartTimeout(time.Duration(secs)*time.Second))
	}
	if v := os.Getenv("DDBLOCAL_PORT"); v != "" {
		port, err := strconv.Atoi(v)
		if err != nil || port <= 0 || port > 65535 {
			return nil, fmt.Errorf("DDBLOCAL_PORT=%q: want a TCP port", v)
		}
		opts = append(opts, ddblocal.WithPort(port))
	}
	return opts, nil
}
