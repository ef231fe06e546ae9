package ddblocal

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

// EnvEndpoint is an already running DynamoDB(-Local) endpoint, such as
// http://127.0.0.1:8000. When set, Endpoint and Run start nothing.
const EnvEndpoint = "DYNAMODB_ENDPOINT"

// Endpoint returns $DYNAMODB_ENDPOINT when set, with a no-op stop; otherwise
// it starts an in-memory DynamoDB Local and returns its endpoint and a stop
// function that shuts it down (errors from stopping are printed to stderr).
func Endpoint(ctx context.Context) (endpoint string, stop func(), err error) {
	if e := os.Getenv(EnvEndpoint); e != "" {
		return e, func() {}, nil
	}
	if _, err := exec.LookPath("java"); err != nil {
		return "", nil, fmt.Errorf("ddblocal: %s is unset, so DynamoDB Local must be started, but %w: %s",
			EnvEndpoint, ErrNoJava, javaHint)
	}
	s, err := Start(ctx)
	if err != nil {
		return "", nil, err
	}
	return s.Endpoint, func() {
		if err := s.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}, nil
}
