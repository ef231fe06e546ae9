package integration_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
)

// Issue 40, item 3, against DynamoDB Local through a real proxy: the
// endpoint refuses connections (the proxy stops listening, as a host that
// is down), then comes back. The SDK client is built as a user builds
// one: the SDK's default retryer, with its client-side retry quota.

// userDB is an SDK client for endpoint with the SDK's defaults.
func userDB(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:                          ddblocal.Region,
		Credentials:                     credentials.NewStaticCredentialsProvider(ddblocal.AccessKey, ddblocal.SecretKey, ""),
		BaseEndpoint:                    aws.String(endpoint),
		DisableValidateResponseChecksum: true,
	})
}

// A leader cut off from DynamoDB loses its lease; its next Campaign,
// started during the outage, waits through the rest of it (8 s, longer
// than the few seconds after which a first call gives up) and leads once
// the endpoint is back.
func TestCampaignOutlastsARefusedEndpoint(t *testing.T) {
	const lease, refused = 2 * time.Second, 8 * time.Second
	table := newTable(t, "")
	p := newFaultProxy(t)
	c := newClient(t, userDB(p.Endpoint()), table, dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(500*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := c.NewElection("leader")
	first, err := e.Campaign(ctx, []byte("a"))
	require.NoError(t, err)

	p.Refuse()
	refusedAt := time.Now()
	waitFor(t, 2*lease, "the leader to lose its lease", func() bool { return first.Err() != nil })
	assert.ErrorIs(t, first.Err(), dynamolock.ErrLeaseExpired)

	type result struct {
		l   *dynamolock.Lock
		err error
	}
	campaign := make(chan result, 1)
	go func() {
		l, err := e.Campaign(ctx, []byte("a"))
		campaign <- result{l, err}
	}()
	for time.Since(refusedAt) < refused {
		select {
		case r := <-campaign:
			t.Fatalf("Campaign returned during the outage, %s into it: %v", time.Since(refusedAt).Round(time.Millisecond), r.err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	require.NoError(t, p.Heal())
	healedAt := time.Now()
	select {
	case r := <-campaign:
		require.NoError(t, r.err)
		assert.Greater(t, r.l.FencingToken(), first.FencingToken())
		t.Logf("led again %s after the endpoint came back", time.Since(healedAt).Round(time.Millisecond))
		require.NoError(t, e.Resign(ctx))
	case <-time.After(3 * lease):
		t.Fatal("no leadership three leases after the endpoint came back")
	}
}

// A client whose endpoint refuses connections from its first call is not
// in an outage: its endpoint may be wrong. Campaign gives up after about
// five seconds with a *ConnectionError that says what to check.
func TestCampaignOnAnEndpointThatNeverAnswered(t *testing.T) {
	table := newTable(t, "")
	p := newFaultProxy(t)
	p.Refuse()
	c := newClient(t, userDB(p.Endpoint()), table)
	begin := time.Now()
	_, err := c.NewElection("leader").Campaign(context.Background(), nil)
	took := time.Since(begin)
	t.Logf("after %s: %v", took.Round(time.Millisecond), err)
	var ce *dynamolock.ConnectionError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "nothing at this endpoint has answered this client yet: check the endpoint")
	assert.NotContains(t, err.Error(), "\n")
	assert.GreaterOrEqual(t, took, 5*time.Second)
	assert.Less(t, took, 10*time.Second)
}
