package dynamolock_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

// The deployment code of deploy/ (docs/DEPLOY.md) against the library: the
// IAM actions its policies allow are exactly those of the requests the
// library can send (derived from the source, so that a new operation, or
// one no longer sent, fails here), each feature's statement its own
// actions, and the table's key and TTL attribute the client's. No cloud is
// needed: the files are parsed (JSON with encoding/json, Terraform and the
// CDK's TypeScript with regular expressions).

// features are the statements of deploy/iam/dynamolock-policy.json: what
// each feature of the library sends (README, "IAM actions").
var features = map[string][]string{
	// Acquire, heartbeat, release, Get, Do, Election, Semaphore, RWLock,
	// sessions; DescribeTable for the table check and a *KeySchemaError.
	"Locks": {"DeleteItem", "DescribeTable", "GetItem", "UpdateItem"},
	// AcquireLocks, a fair semaphore's slot beside its queue, and guarded
	// writes (TransactionCondition, TransactionWithRefresh): the actions of
	// the members of a TransactWriteItems, which has no action of its own.
	"Transactions":           {"ConditionCheckItem", "UpdateItem"},
	"Listings":               {"Query", "Scan"},
	"LegacyGlobalTableCheck": {"DescribeGlobalTable"},
	// CreateTable, CreateTableIfNotExists (WithTags: TagResource;
	// WithTimeToLive: UpdateTimeToLive).
	"CreateTable": {"CreateTable", "DescribeTable", "TagResource", "UpdateTimeToLive"},
}

// notShared are the actions a table's owner keeps: DynamoDB allows them
// only in the table's own account (CreateTable, UpdateTimeToLive), or they
// name no shared table (DescribeGlobalTable takes a name in the caller's
// account: a client naming its table by ARN skips it).
var notShared = []string{"CreateTable", "DescribeGlobalTable", "TagResource", "UpdateTimeToLive"}

// sentActions derives, from the library's source (the root package's
// files but tests), the IAM actions of every request it can send: each
// call of a DynamoDB operation (a method of *dynamodb.Client called with a
// context and an input), TransactWriteItems counted by the actions of its
// members (the Update, ConditionCheck, Put and Delete it builds), and
// TagResource for a CreateTableInput with Tags.
func sentActions(t *testing.T, dir string) []string {
	t.Helper()
	ops := map[string]bool{}
	ct := reflect.TypeOf(&dynamodb.Client{})
	for i := range ct.NumMethod() {
		m := ct.Method(i)
		if m.Type.NumIn() == 4 && strings.HasSuffix(m.Type.In(2).Elem().Name(), "Input") {
			ops[m.Name] = true
		}
	}
	members := map[string]string{"Update": "UpdateItem", "ConditionCheck": "ConditionCheckItem", "Put": "PutItem", "Delete": "DeleteItem"}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	actions := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && ops[sel.Sel.Name] && len(n.Args) >= 2 && sel.Sel.Name != "TransactWriteItems" {
					actions[sel.Sel.Name] = true
				}
			case *ast.CompositeLit:
				sel, ok := n.Type.(*ast.SelectorExpr)
				if !ok {
					break
				}
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "types" && members[sel.Sel.Name] != "" {
					actions[members[sel.Sel.Name]] = true
				}
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "dynamodb" && sel.Sel.Name == "CreateTableInput" {
					for _, e := range n.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok && kv.Key.(*ast.Ident).Name == "Tags" {
							actions["TagResource"] = true
						}
					}
				}
			}
			return true
		})
	}
	return sortedKeys(actions)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// drift lists what separates the actions a policy allows from those the
// library sends.
func drift(sent, allowed []string) []string {
	var out []string
	for _, a := range sent {
		if !slices.Contains(allowed, a) {
			out = append(out, "the library sends "+a+", which the policy does not allow")
		}
	}
	for _, a := range allowed {
		if !slices.Contains(sent, a) {
			out = append(out, "the policy allows "+a+", which the library never sends")
		}
	}
	return out
}

// iamPolicy is an IAM policy document.
type iamPolicy struct {
	Statement []struct {
		Sid       string
		Effect    string
		Action    []string
		Resource  any
		Principal any
	}
}

// actionsOf returns a statement's actions without "dynamodb:", sorted.
func actionsOf(t *testing.T, actions []string) []string {
	t.Helper()
	out := make([]string, len(actions))
	for i, a := range actions {
		require.True(t, strings.HasPrefix(a, "dynamodb:"), "action %q", a)
		require.NotContains(t, a, "*", "no wildcard action")
		out[i] = strings.TrimPrefix(a, "dynamodb:")
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v), path)
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func TestDeploymentsMatchTheLibrary(t *testing.T) {
	sent := sentActions(t, ".")
	t.Logf("actions of the requests the library can send: %v", sent)
	var union []string
	for _, a := range features {
		union = append(union, a...)
	}
	slices.Sort(union)
	union = slices.Compact(union)
	require.Empty(t, drift(sent, union), "the features' actions against the source")
	shared := slices.DeleteFunc(slices.Clone(sent), func(a string) bool { return slices.Contains(notShared, a) })

	t.Run("iam", func(t *testing.T) {
		var p iamPolicy
		readJSON(t, "deploy/iam/dynamolock-policy.json", &p)
		got := map[string][]string{}
		for _, s := range p.Statement {
			assert.Equal(t, "Allow", s.Effect, s.Sid)
			got[s.Sid] = actionsOf(t, s.Action)
			want := "arn:aws:dynamodb:REGION:ACCOUNT:table/locks"
			if s.Sid == "LegacyGlobalTableCheck" {
				want = "arn:aws:dynamodb::ACCOUNT:global-table/locks"
			}
			assert.Equal(t, want, s.Resource, "%s: the resource", s.Sid)
		}
		assert.Equal(t, features, got, "one statement per feature, with exactly its actions")

		var r iamPolicy
		readJSON(t, "deploy/iam/lock-table-resource-policy.json", &r)
		require.Len(t, r.Statement, 1)
		assert.Empty(t, drift(shared, actionsOf(t, r.Statement[0].Action)), "the resource-based policy: what a client of another account sends")
		assert.NotEqual(t, "*", r.Statement[0].Principal, "shared with named principals, not everyone")
	})

	t.Run("terraform", func(t *testing.T) {
		for _, path := range []string{"deploy/terraform/table/main.tf", "deploy/terraform/multi-region-strong/main.tf"} {
			tf := readText(t, path)
			assert.Regexp(t, `(?m)^\s*hash_key\s*=\s*"`+dynamolock.DefaultPartitionKeyName+`"`, tf, path)
			assert.Regexp(t, `attribute\s*\{\s*name\s*=\s*"`+dynamolock.DefaultPartitionKeyName+`"\s*type\s*=\s*"S"\s*}`, tf, path)
			assert.Regexp(t, `billing_mode\s*=\s*"PAY_PER_REQUEST"`, tf, path)
			assert.Equal(t, ttlAttribute, tfDefault(t, tf, "ttl_attribute"), path)
			assert.Regexp(t, `ttl\s*\{\s*attribute_name\s*=\s*var\.ttl_attribute\s*enabled\s*=\s*true\s*}`, tf, path)
			assert.Equal(t, "false", tfDefault(t, tf, "point_in_time_recovery"), "%s: point-in-time recovery off by default", path)
			assert.Regexp(t, `point_in_time_recovery\s*\{\s*enabled\s*=\s*var\.point_in_time_recovery\s*}`, tf, path)
		}
		table := readText(t, "deploy/terraform/table/main.tf")
		assert.Contains(t, table, `file("${path.module}/../../iam/dynamolock-policy.json")`, "the IAM policy is deploy/iam's")
		assert.Contains(t, table, `file("${path.module}/../../iam/lock-table-resource-policy.json")`, "so is the resource-based policy")
		mrsc := readText(t, "deploy/terraform/multi-region-strong/main.tf")
		assert.Len(t, regexp.MustCompile(`replica\s*\{\s*region_name\s*=\s*"[a-z0-9-]+"\s*consistency_mode\s*=\s*"STRONG"\s*}`).FindAllString(mrsc, -1), 2,
			"two replicas of strong consistency (three Regions)")
	})

	t.Run("cloudformation", func(t *testing.T) {
		type table struct {
			Type       string
			Properties struct {
				BillingMode             string
				AttributeDefinitions    []struct{ AttributeName, AttributeType string }
				KeySchema               []struct{ AttributeName, KeyType string }
				TimeToLiveSpecification struct {
					AttributeName map[string]string
					Enabled       bool
				}
				MultiRegionConsistency string
				Replicas               []struct{ Region string }
				ResourcePolicy         map[string][]json.RawMessage
			}
		}
		type template struct {
			Parameters map[string]struct{ Default string }
			Resources  map[string]json.RawMessage
		}
		check := func(path, wantType string) (template, table) {
			var tmpl template
			readJSON(t, path, &tmpl)
			var tb table
			require.NoError(t, json.Unmarshal(tmpl.Resources["LockTable"], &tb))
			assert.Equal(t, wantType, tb.Type, path)
			p := tb.Properties
			assert.Equal(t, "PAY_PER_REQUEST", p.BillingMode, path)
			require.Len(t, p.KeySchema, 1, path)
			assert.Equal(t, dynamolock.DefaultPartitionKeyName, p.KeySchema[0].AttributeName, path)
			assert.Equal(t, "HASH", p.KeySchema[0].KeyType, path)
			assert.Equal(t, []struct{ AttributeName, AttributeType string }{{dynamolock.DefaultPartitionKeyName, "S"}}, p.AttributeDefinitions, path)
			assert.Equal(t, map[string]string{"Ref": "TtlAttribute"}, p.TimeToLiveSpecification.AttributeName, path)
			assert.True(t, p.TimeToLiveSpecification.Enabled, path)
			assert.Equal(t, ttlAttribute, tmpl.Parameters["TtlAttribute"].Default, path)
			assert.Equal(t, "false", tmpl.Parameters["PointInTimeRecovery"].Default, "%s: point-in-time recovery off by default", path)
			return tmpl, tb
		}
		tmpl, tb := check("deploy/cloudformation/lock-table.json", "AWS::DynamoDB::Table")
		var managed struct {
			Type       string
			Properties struct{ PolicyDocument iamPolicy }
		}
		require.NoError(t, json.Unmarshal(tmpl.Resources["LockClientsPolicy"], &managed))
		assert.Equal(t, "AWS::IAM::ManagedPolicy", managed.Type)
		got := map[string][]string{}
		for _, s := range managed.Properties.PolicyDocument.Statement {
			got[s.Sid] = actionsOf(t, s.Action)
		}
		assert.Equal(t, features, got, "the managed policy: one statement per feature")
		// ResourcePolicy: {"Fn::If": ["Shared", {"PolicyDocument": ...}, {"Ref": "AWS::NoValue"}]}
		require.Len(t, tb.Properties.ResourcePolicy["Fn::If"], 3)
		var shares struct{ PolicyDocument iamPolicy }
		require.NoError(t, json.Unmarshal(tb.Properties.ResourcePolicy["Fn::If"][1], &shares))
		require.Len(t, shares.PolicyDocument.Statement, 1)
		assert.Empty(t, drift(shared, actionsOf(t, shares.PolicyDocument.Statement[0].Action)), "the resource-based policy")

		_, mrsc := check("deploy/cloudformation/lock-table-mrsc.json", "AWS::DynamoDB::GlobalTable")
		assert.Equal(t, "STRONG", mrsc.Properties.MultiRegionConsistency)
		assert.Len(t, mrsc.Properties.Replicas, 3, "MRSC: three Regions")
	})

	t.Run("cdk", func(t *testing.T) {
		ts := readText(t, "deploy/cdk/lock-table.ts")
		assert.Regexp(t, `partitionKey:\s*\{\s*name:\s*'`+dynamolock.DefaultPartitionKeyName+`',\s*type:\s*dynamodb\.AttributeType\.STRING\s*}`, ts)
		assert.Regexp(t, `billing:\s*dynamodb\.Billing\.onDemand\(\)`, ts)
		assert.Regexp(t, `timeToLiveAttribute:\s*props\.ttlAttribute \?\? '`+ttlAttribute+`'`, ts)
		assert.Regexp(t, `pointInTimeRecoveryEnabled:\s*props\.pointInTimeRecovery \?\? false`, ts, "point-in-time recovery off by default")
		assert.Regexp(t, `multiRegionConsistency:\s*dynamodb\.MultiRegionConsistency\.STRONG`, ts)
		got := map[string][]string{}
		for _, m := range regexp.MustCompile(`sid:\s*'(\w+)',(?:\s*principals:\s*[\w.]+,)?\s*actions:\s*\[([^\]]*)\]`).FindAllStringSubmatch(ts, -1) {
			var actions []string
			for _, a := range regexp.MustCompile(`'([^']+)'`).FindAllStringSubmatch(m[2], -1) {
				actions = append(actions, a[1])
			}
			got[m[1]] = actionsOf(t, actions)
		}
		shares := got["LockClientsOfAnotherAccount"]
		delete(got, "LockClientsOfAnotherAccount")
		assert.Equal(t, features, got, "one grant per feature")
		assert.Empty(t, drift(shared, shares), "the resource-based policy")
	})

	t.Run("ttl attribute", func(t *testing.T) {
		// The TTL attribute of the deployments is one the client accepts,
		// and the one docs/DEPLOY.md tells clients to give.
		c, err := dynamolock.New(noCallsDB{}, "locks", dynamolock.WithTTLAttribute(ttlAttribute))
		require.NoError(t, err)
		require.NoError(t, c.Close())
		assert.Contains(t, readText(t, "docs/DEPLOY.md"), `dynamolock.WithTTLAttribute("`+ttlAttribute+`")`)
	})
}

// ttlAttribute is the TTL attribute every deployment defaults to.
const ttlAttribute = "ttl"

// tfDefault returns the default of Terraform variable name.
func tfDefault(t *testing.T, tf, name string) string {
	t.Helper()
	m := regexp.MustCompile(`variable\s+"` + name + `"\s*\{[^}]*default\s*=\s*"?([^"\s]+)"?`).FindStringSubmatch(tf)
	require.NotNil(t, m, "variable %s has a default", name)
	return m[1]
}

// A library that gains an operation its policies lack, or loses one they
// allow, fails the test: the derivation sees a new call in the source,
// and drift reports either way.
func TestDeploymentDriftIsReported(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "calls.go"), []byte(`package dynamolock

func (c *Client) putItem(ctx context.Context, in *dynamodb.PutItemInput) {
	c.db.PutItem(ctx, in)
	c.db.GetItem(ctx, nil)
}
`), 0o600))
	sent := sentActions(t, dir)
	assert.Equal(t, []string{"GetItem", "PutItem"}, sent)
	assert.Equal(t, []string{
		"the library sends PutItem, which the policy does not allow",
		"the policy allows DeleteItem, which the library never sends",
	}, drift(sent, []string{"DeleteItem", "GetItem"}))
}

// noCallsDB is a DynamoDBClient for a client that makes no call.
type noCallsDB struct{ dynamolock.DynamoDBClient }
