package dynamolocktest_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
)

// TestFailover is the test in the package documentation, as a user copies
// it (keep the two the same). It waits two minutes of lease time; run
// `go test -race -run '^TestFailover$' -v ./dynamolocktest` to see its wall
// time.
func TestFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := dynamolocktest.New()
		hostA, hostB := db.Conn(), db.Conn()
		opts := []dynamolock.ClientOption{
			dynamolock.WithLeaseDuration(time.Minute),
			dynamolock.WithHeartbeatPeriod(10 * time.Second),
		}
		a, _ := dynamolock.New(hostA, "locks", opts...)
		defer a.Close()
		b, _ := dynamolock.New(hostB, "locks", opts...)
		defer b.Close()
		if _, err := a.CreateTableIfNotExists(ctx); err != nil {
			t.Fatal(err)
		}
		leader, err := a.NewElection("leader").Campaign(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}

		hostA.Partition()
		<-leader.Done() // its lease runs out: a steps down
		next, err := b.NewElection("leader").Campaign(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if next.FencingToken() <= leader.FencingToken() {
			t.Fatal("the new leader's fencing token is not higher")
		}
	})
}

// TestDocTestIsTestFailover keeps the test in the package documentation
// and TestFailover the same.
func TestDocTestIsTestFailover(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("doc_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var snippet []string
	in := false
	for line := range strings.SplitSeq(string(doc), "\n") {
		in = in || strings.HasPrefix(line, "//\tfunc TestFailover(")
		if !in {
			continue
		}
		if !strings.HasPrefix(line, "//\t") && line != "//" {
			break
		}
		snippet = append(snippet, strings.TrimPrefix(strings.TrimPrefix(line, "//"), "\t"))
	}
	if len(snippet) < 10 || !strings.Contains(string(src), strings.TrimSpace(strings.Join(snippet, "\n"))) {
		t.Fatalf("the test in doc.go is not TestFailover in doc_test.go:\n%s", strings.Join(snippet, "\n"))
	}
}
