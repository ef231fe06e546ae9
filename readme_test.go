package dynamolock_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite README.md's Go snippets from example_test.go")

// snippetRegion matches a region of example_test.go that README.md shows:
// the lines between "// snippet:NAME" and "// snippet:end".
var snippetRegion = regexp.MustCompile(`(?ms)^[ \t]*// snippet:([a-z0-9-]+)\n(.*?)^[ \t]*// snippet:end\n`)

// readmeGoBlock matches a Go block of README.md with the marker that names
// its region: <!-- snippet:NAME --> on the line before the opening fence;
// <!-- snippet:file:PATH --> shows the whole file PATH of the repository
// (a complete program, which go vet and TestQuickStartProgram build).
var readmeGoBlock = regexp.MustCompile("(?ms)^(?:<!-- snippet:([a-z0-9-]+|file:[a-z0-9/._-]+) -->\\n)?```go\\n(.*?)^```\\n")

// exampleSnippets returns the regions of example_test.go and of the other
// example*_test.go files, de-indented.
func exampleSnippets(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("example*_test.go")
	require.NoError(t, err)
	snippets := map[string]string{}
	for _, name := range files {
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		for _, m := range snippetRegion.FindAllStringSubmatch(string(src), -1) {
			require.NotContains(t, snippets, m[1], "two regions named %q", m[1])
			snippets[m[1]] = dedent(m[2])
		}
	}
	return snippets
}

// dedent removes the indentation common to every non-empty line.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	prefix := ""
	first := true
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		ind := l[:len(l)-len(strings.TrimLeft(l, "\t"))]
		if first || len(ind) < len(prefix) {
			prefix, first = ind, false
		}
	}
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, prefix)
	}
	return strings.Join(lines, "\n")
}

// Every Go block in README.md is a region of example_test.go, which CI
// compiles and runs against DynamoDB Local: a README edit that is not made
// in the example (or the reverse) fails here. To bring README.md in line
// after changing an example: go test -run TestReadmeSnippets -update-readme
func TestReadmeSnippets(t *testing.T) {
	snippets := exampleSnippets(t)
	require.NotEmpty(t, snippets)
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)

	used := map[string]bool{}
	var problems []string
	out := readmeGoBlock.ReplaceAllStringFunc(string(readme), func(block string) string {
		m := readmeGoBlock.FindStringSubmatch(block)
		name, body := m[1], m[2]
		if name == "" {
			problems = append(problems, fmt.Sprintf("a Go block without a <!-- snippet:NAME --> marker:\n%s", body))
			return block
		}
		want, ok := snippets[name]
		if path, isFile := strings.CutPrefix(name, "file:"); isFile {
			b, err := os.ReadFile(path)
			want, ok = string(b), err == nil
			snippets[name] = want
		}
		if !ok {
			problems = append(problems, fmt.Sprintf("README.md shows snippet %q, which example_test.go does not have", name))
			return block
		}
		used[name] = true
		if body != want {
			problems = append(problems, fmt.Sprintf("snippet %q differs from example_test.go:\nREADME.md:\n%s\nexample_test.go:\n%s", name, body, want))
		}
		return "<!-- snippet:" + name + " -->\n```go\n" + want + "```\n"
	})
	for name := range snippets {
		if !used[name] {
			problems = append(problems, fmt.Sprintf("example_test.go region %q is not shown in README.md", name))
		}
	}
	if *updateReadme && out != string(readme) {
		require.NoError(t, os.WriteFile("README.md", []byte(out), 0o644))
		t.Logf("rewrote README.md")
		return
	}
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) > 0 {
		t.Log("run: go test -run TestReadmeSnippets -update-readme")
	}
}

// The README's quick start (Example) runs twice in a row, unchanged,
// against the same table, with the same output.
func TestQuickStartRunsTwice(t *testing.T) {
	for run := 1; run <= 2; run++ {
		got := captureStdout(t, Example)
		assert.Equal(t, "lock content: some content a\nreleased: true\n", got, "run %d", run)
	}
}

// captureStdout runs f with os.Stdout redirected and returns what f wrote.
func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	saved := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, r)
		done <- b.Bytes()
	}()
	defer func() { os.Stdout = saved }()
	f()
	require.NoError(t, w.Close())
	out := <-done
	require.NoError(t, r.Close())
	return string(out)
}

// The README's complete program (examples/quickstart) builds as shown and
// runs against DynamoDB Local with only the SDK's own environment
// variables, twice in a row.
func TestQuickStartProgram(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "quickstart")
	build := exec.Command("go", "build", "-o", bin, "./examples/quickstart")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	env = append(env, "AWS_ENDPOINT_URL_DYNAMODB="+endpoint, "AWS_REGION="+ddblocal.Region,
		"AWS_ACCESS_KEY_ID="+ddblocal.AccessKey, "AWS_SECRET_ACCESS_KEY="+ddblocal.SecretKey,
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	for run := 1; run <= 2; run++ {
		cmd := exec.Command(bin)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "run %d: %s", run, out)
		assert.Regexp(t, `^working on customer-42, fencing token [1-9][0-9]*\n$`, string(out), "run %d", run)
	}

	// Issue 63: a run that finds the lock held (its acquiring write fails
	// its condition, on DynamoDB Local an answer without a checksum) prints
	// its line alone, with none of the SDK's checksum warnings.
	db, _ := newDB(t)
	holder := newClient(t, db, "locks", dynamolock.WithLeaseDuration(3*time.Second), dynamolock.WithHeartbeatPeriod(time.Second))
	held, err := holder.AcquireLockWithContext(context.Background(), "customer-42")
	require.NoError(t, err)
	cmd := exec.Command(bin)
	cmd.Env = env
	var waited bytes.Buffer
	cmd.Stdout, cmd.Stderr = &waited, &waited
	require.NoError(t, cmd.Start())
	// It waits in the key's queue once its write has failed.
	waitFor(t, 30*time.Second, "the third run to wait for the held lock", func() bool {
		q, ok := rawItem(t, db, "locks", keyOf("customer-42"))["fairQueue"].(*types.AttributeValueMemberM)
		return ok && len(q.Value) > 0
	})
	_, err = holder.ReleaseLockWithContext(context.Background(), held)
	require.NoError(t, err)
	require.NoError(t, cmd.Wait(), "%s", waited.String())
	assert.Regexp(t, `^working on customer-42, fencing token [1-9][0-9]*\n$`, waited.String(), "the run that waited")
}
