package faults

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Timeouts configures an SDK client so that a cut network is noticed fast:
// every HTTP attempt gives up after timeout, and a call makes at most
// attempts attempts with short backoff (at most maxBackoff) and no retry
// quota. Without a timeout an attempt on a silently cut connection hangs
// until the caller's context ends.
func Timeouts(timeout time.Duration, attempts int, maxBackoff time.Duration) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.HTTPClient = awshttp.NewBuildableClient().WithTimeout(timeout)
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = attempts
			so.MaxBackoff = maxBackoff
			so.RateLimiter = ratelimit.None
		})
	}
}

// Endpoint points an SDK client at endpoint (for example [Proxy.Endpoint]).
func Endpoint(endpoint string) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) }
}

// Inject adds the service errors of s to an SDK client.
func Inject(s *ServiceErrors) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, s.Register) }
}
