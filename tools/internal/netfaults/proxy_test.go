package netfaults_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/goleak"

	"github.com/arielsrv/dynamolock/v2/internal/faults"
	"github.com/arielsrv/dynamolock/v2/tools/internal/netfaults"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// fakeDynamoDB answers every request with an empty JSON object and counts
// the requests it got.
func fakeDynamoDB(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func client(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")}
	return dynamodb.NewFromConfig(cfg, append([]func(*dynamodb.Options){faults.Endpoint(endpoint)}, optFns...)...)
}

func getItem(ctx context.Context, db *dynamodb.Client) error {
	_, err := db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String("t"),
		Key:       map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: "k"}},
	})
	return err
}

func TestProxyFaults(t *testing.T) {
	srv, requests := fakeDynamoDB(t)
	p, err := netfaults.NewProxy(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !strings.HasPrefix(p.Endpoint(), "http://127.0.0.1:") {
		t.Fatalf("endpoint %s", p.Endpoint())
	}
	db := client(p.Endpoint(), faults.Timeouts(300*time.Millisecond, 1, time.Millisecond))
	ctx := context.Background()
	if err := getItem(ctx, db); err != nil {
		t.Fatalf("through a healthy proxy: %v", err)
	}

	// Cut: requests time out and never arrive.
	if err := p.Cut(); err != nil {
		t.Fatal(err)
	}
	before := requests.Load()
	start := time.Now()
	if err := getItem(ctx, db); err == nil {
		t.Fatal("a call through a cut network succeeded")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the cut was noticed after %s", d)
	}
	if requests.Load() != before {
		t.Fatal("a request got through a cut")
	}
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := getItem(ctx, db); err != nil {
		t.Fatalf("after Heal: %v", err)
	}

	// Dropped responses: the request arrives, the answer does not.
	if err := p.DropResponses(); err != nil {
		t.Fatal(err)
	}
	before = requests.Load()
	if err := getItem(ctx, db); err == nil {
		t.Fatal("a call whose response was dropped succeeded")
	}
	if requests.Load() != before+1 {
		t.Fatalf("%d requests arrived while responses were dropped; want 1", requests.Load()-before)
	}
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}

	// Reset after the request landed.
	if err := p.ResetResponses(0); err != nil {
		t.Fatal(err)
	}
	before = requests.Load()
	if err := getItem(ctx, db); err == nil {
		t.Fatal("a call whose connection was reset succeeded")
	}
	if requests.Load() != before+1 {
		t.Fatalf("%d requests arrived before the reset; want 1", requests.Load()-before)
	}
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}

	// Refused: the port is closed until Heal, then the same address works.
	addr := p.Addr()
	p.Refuse()
	if err := getItem(ctx, db); err == nil {
		t.Fatal("a call to a refusing proxy succeeded")
	}
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	if p.Addr() != addr {
		t.Fatalf("address changed from %s to %s", addr, p.Addr())
	}
	if err := getItem(ctx, db); err != nil {
		t.Fatalf("after Refuse and Heal: %v", err)
	}

	// Latency.
	if _, err := p.Latency(netfaults.Downstream, 150*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := getItem(ctx, db); err != nil {
		t.Fatalf("with latency: %v", err)
	}
	if d := time.Since(start); d < 140*time.Millisecond {
		t.Fatalf("a call with 150 ms latency took %s", d)
	}
}
