package ddblocal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// startForTest starts a server and registers a cleanup that stops it and
// checks that its process is gone. It fails the test when DynamoDB Local is
// not installed or java is missing.
func startForTest(t *testing.T, ctx context.Context, opts ...Option) *Server {
	t.Helper()
	began := time.Now()
	s, err := Start(ctx, opts...)
	if err != nil {
		t.Fatalf("starting DynamoDB Local: %v", err)
	}
	t.Logf("DynamoDB Local pid %d ready at %s after %s", s.PID(), s.Endpoint, time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
		assertGone(t, s)
	})
	return s
}

func assertGone(t *testing.T, s *Server) {
	t.Helper()
	select {
	case <-s.Done():
	default:
		t.Errorf("pid %d: Done not closed after Stop", s.PID())
	}
	if err := syscall.Kill(s.PID(), 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("pid %d still exists after Stop (kill -0: %v)", s.PID(), err)
	}
}

// endpointForTest returns $DYNAMODB_ENDPOINT or starts a server. With neither
// an endpoint nor an installed DynamoDB Local it fails, never skips.
func endpointForTest(t *testing.T, ctx context.Context) string {
	t.Helper()
	if e := os.Getenv(EnvEndpoint); e != "" {
		t.Logf("using %s=%s", EnvEndpoint, e)
		return e
	}
	if _, err := Jar(); err != nil {
		t.Fatalf("%s is unset and DynamoDB Local is not available: %v", EnvEndpoint, err)
	}
	return startForTest(t, ctx).Endpoint
}

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), time.Now().UnixNano())
}

func createTable(t *testing.T, ctx context.Context, c *dynamodb.Client, name string) {
	t.Helper()
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("key"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("key"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatalf("CreateTable %s: %v", name, err)
	}
	w := dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 30*time.Second); err != nil {
		t.Fatalf("waiting for table %s: %v", name, err)
	}
}

func listTables(t *testing.T, ctx context.Context, c *dynamodb.Client) []string {
	t.Helper()
	var names []string
	p := dynamodb.NewListTablesPaginator(c, &dynamodb.ListTablesInput{})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("ListTables: %v", err)
		}
		names = append(names, out.TableNames...)
	}
	return names
}

func TestCreateAndListTable(t *testing.T) {
	ctx := testCtx(t)
	endpoint := endpointForTest(t, ctx)
	c, err := NewClient(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	name := uniqueName("ddblocal-test")
	createTable(t, ctx, c, name)
	t.Cleanup(func() {
		if _, err := c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err != nil {
			t.Errorf("DeleteTable: %v", err)
		}
	})
	if names := listTables(t, ctx, c); !slices.Contains(names, name) {
		t.Fatalf("ListTables = %v, want it to contain %s", names, name)
	}
}

// TestRestartKeepsData checks WithDBPath and WithPort: a server restarted
// on the same port with the same -dbPath still has the table and item, both
// after a clean Stop and after a Kill.
func TestRestartKeepsData(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers; skipped with -short")
	}
	if _, err := Jar(); err != nil {
		if os.Getenv(EnvEndpoint) != "" {
			t.Skipf("needs a local DynamoDB Local install to restart it (%s is set, but: %v)", EnvEndpoint, err)
		}
		t.Fatalf("%s is unset and DynamoDB Local is not available: %v", EnvEndpoint, err)
	}
	ctx := testCtx(t)
	dbPath := t.TempDir()
	s1 := startForTest(t, ctx, WithDBPath(dbPath))
	c, err := NewClient(ctx, s1.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	const table = "restart"
	createTable(t, ctx, c, table)
	if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			"key":  &types.AttributeValueMemberS{Value: "k"},
			"data": &types.AttributeValueMemberS{Value: "v1"},
		},
	}); err != nil {
		t.Fatalf("PutItem: %v", err)
	}
	if err := s1.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertGone(t, s1)

	check := func(s *Server, want string) {
		t.Helper()
		out, err := c.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:      aws.String(table),
			Key:            map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: "k"}},
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			t.Fatalf("GetItem after restart: %v", err)
		}
		got, _ := out.Item["data"].(*types.AttributeValueMemberS)
		if got == nil || got.Value != want {
			t.Fatalf("item after restart = %v, want data=%q", out.Item, want)
		}
	}

	// Same port, same client: a lock client would see the server come back.
	s2 := startForTest(t, ctx, WithDBPath(dbPath), WithPort(s1.Port))
	if s2.Endpoint != s1.Endpoint {
		t.Fatalf("restarted endpoint %s, want %s", s2.Endpoint, s1.Endpoint)
	}
	check(s2, "v1")
	if _, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: "k"}},
		UpdateExpression:          aws.String("SET #d = :v"),
		ExpressionAttributeNames:  map[string]string{"#d": "data"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: "v2"}},
	}); err != nil {
		t.Fatalf("UpdateItem: %v", err)
	}
	if err := s2.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	assertGone(t, s2)

	// While it is down, requests fail (after the client's retries).
	noRetry := func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }
	if _, err := c.ListTables(ctx, &dynamodb.ListTablesInput{}, noRetry); err == nil {
		t.Fatal("ListTables succeeded while the server was down")
	}

	s3 := startForTest(t, ctx, WithDBPath(dbPath), WithPort(s1.Port))
	check(s3, "v2")
}

func TestJarMissingDir(t *testing.T) {
	t.Setenv(EnvDir, t.TempDir())
	_, err := Jar()
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Jar() error = %v, want ErrNotInstalled", err)
	}
	for _, want := range []string{EnvDir, "make ddblocal", "Java 17"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Jar() error %q does not mention %q", err, want)
		}
	}
}

func TestJarFromEnvDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/"+JarName, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvDir, dir)
	got, err := Jar()
	if err != nil || got != dir {
		t.Fatalf("Jar() = %q, %v; want %q", got, err, dir)
	}
}

func TestEndpointFromEnv(t *testing.T) {
	t.Setenv(EnvEndpoint, "http://127.0.0.1:1")
	e, stop, err := Endpoint(context.Background())
	if err != nil || e != "http://127.0.0.1:1" {
		t.Fatalf("Endpoint() = %q, %v", e, err)
	}
	stop()
}

func TestEndpointNoJava(t *testing.T) {
	t.Setenv(EnvEndpoint, "")
	t.Setenv("PATH", t.TempDir())
	_, _, err := Endpoint(context.Background())
	if !errors.Is(err, ErrNoJava) || !strings.Contains(err.Error(), "openjdk-17-jre-headless") {
		t.Fatalf("Endpoint() without java: err = %v, want ErrNoJava naming openjdk-17-jre-headless", err)
	}
}

type captureLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *captureLogger) Logf(c logging.Classification, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(c)+" "+fmt.Sprintf(format, v...))
}

// TestConditionalFailureIsQuiet checks that an expected error such as
// ConditionalCheckFailedException comes back typed and makes the SDK log
// nothing (no spurious CRC32 warning, see NewClient).
func TestConditionalFailureIsQuiet(t *testing.T) {
	ctx := testCtx(t)
	endpoint := endpointForTest(t, ctx)
	logger := &captureLogger{}
	c, err := NewClient(ctx, endpoint, func(o *dynamodb.Options) { o.Logger = logger })
	if err != nil {
		t.Fatal(err)
	}
	name := uniqueName("ddblocal-cond")
	createTable(t, ctx, c, name)
	t.Cleanup(func() {
		_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	put := func() error {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                aws.String(name),
			Item:                     map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: "k"}},
			ConditionExpression:      aws.String("attribute_not_exists(#k)"),
			ExpressionAttributeNames: map[string]string{"#k": "key"},
		})
		return err
	}
	if err := put(); err != nil {
		t.Fatalf("first PutItem: %v", err)
	}
	var ccf *types.ConditionalCheckFailedException
	if err := put(); !errors.As(err, &ccf) {
		t.Fatalf("second PutItem: err = %v, want ConditionalCheckFailedException", err)
	}
	logger.mu.Lock()
	defer logger.mu.Unlock()
	if len(logger.lines) > 0 {
		t.Fatalf("SDK logged %q", logger.lines)
	}
}
