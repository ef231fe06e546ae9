//go:build unix

package main

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// --table takes the table's ARN as well as its name: create-table finds
// it, a command runs under a lock in it, list and show read it. An ARN of
// no table is not created: the error says to create it by name.
func TestTableARN(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	out, err := db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(out.Table.TableArn)

	p := runTool(t, "--table", arn, "create-table")
	wantCode(t, p, exitOK)
	if !strings.Contains(p.stdout.String(), "already exists") {
		t.Errorf("create-table by ARN of an existing table: %s", p.stdout.String())
	}
	wantCode(t, runTool(t, flagsFor(arn, "--data", "x", "a", "true")...), exitOK)
	if l := show(t, arn, "a"); !l.Released || l.DataSize != 1 {
		t.Errorf("show by ARN: %+v", l)
	}
	if l := show(t, table, "a"); !l.Released {
		t.Errorf("show by name of the lock taken by ARN: %+v", l)
	}
	p = runTool(t, "--table", arn, "list")
	wantCode(t, p, exitOK)
	if !strings.Contains(p.stdout.String(), "\na ") {
		t.Errorf("list by ARN:\n%s", p.stdout.String())
	}

	missing := strings.TrimSuffix(arn, table) + "no-such-table-62"
	p = runTool(t, "--table", missing, "create-table")
	wantCode(t, p, exitSetup)
	if !strings.Contains(p.stderr.String(), "create it by name in the account and region its ARN names") {
		t.Errorf("create-table by the ARN of no table:\n%s", p.stderr.String())
	}
}
