//go:build unix

package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestErrorsOneLine: an endpoint that refuses connections, or one that is
// not DynamoDB (an HTTP server answering HTML), is reported in one line
// that names the endpoint and the variable to check, for every subcommand
// and for a run, instead of the SDK's error (issue 40, item 5). With
// --verbose the SDK's error follows on one more line.
func TestErrorsOneLine(t *testing.T) {
	t.Parallel()
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotImplemented)
		_, _ = w.Write([]byte("<html><body>Not Implemented</body></html>"))
	}))
	t.Cleanup(html.Close)
	endpoints := []struct {
		name, env, want string
	}{
		{"refused", "DYNAMODB_ENDPOINT=http://127.0.0.1:1",
			"cannot reach DynamoDB at http://127.0.0.1:1 (connection refused): check DYNAMODB_ENDPOINT"},
		{"refused, AWS variable", "AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:1",
			"cannot reach DynamoDB at http://127.0.0.1:1 (connection refused): check AWS_ENDPOINT_URL_DYNAMODB"},
		{"not DynamoDB", "DYNAMODB_ENDPOINT=" + html.URL,
			"the endpoint " + html.URL + " answered HTTP 501, and not as DynamoDB does: check DYNAMODB_ENDPOINT"},
	}
	commands := [][]string{
		{"list"}, {"show", "k"}, {"force-release", "--owner", "o", "k"}, {"create-table"}, {"k", "true"},
	}
	for _, ep := range endpoints {
		for _, args := range commands {
			t.Run(ep.name+"/"+args[0], func(t *testing.T) {
				t.Parallel()
				env := []string{ep.env}
				if !strings.HasPrefix(ep.env, "DYNAMODB_ENDPOINT=") {
					env = append(env, "DYNAMODB_ENDPOINT=") // childEnv's endpoint must not win
				}
				p := startToolEnv(t, env, args...)
				p.wait(t)
				wantCode(t, p, exitSetup)
				s := p.stderr.String()
				if lines := strings.Split(strings.TrimSpace(s), "\n"); len(lines) != 1 || !strings.Contains(s, ep.want) ||
					strings.Contains(s, "operation error") {
					t.Errorf("stderr, want one line with %q:\n%s", ep.want, s)
				}
			})
		}
	}
	t.Run("verbose", func(t *testing.T) {
		t.Parallel()
		p := runToolEnv(t, []string{"DYNAMODB_ENDPOINT=http://127.0.0.1:1"}, "--verbose", "list")
		wantCode(t, p, exitSetup)
		if s := p.stderr.String(); !strings.Contains(s, "lock-example: cannot reach DynamoDB") ||
			!strings.Contains(s, "\nlock-example: the error was: ") || !strings.Contains(s, "connection refused") {
			t.Errorf("stderr:\n%s", s)
		}
	})
}
