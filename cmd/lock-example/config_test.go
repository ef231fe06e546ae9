//go:build unix

package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFlagErrors: bad durations are usage errors (125) that name the flag
// the user wrote, found before any DynamoDB call.
func TestFlagErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"--lease", "0", "k", "true"}, "--lease 0s: must be positive"},
		{[]string{"--lease", "1ms", "k", "true"}, "--lease 1ms: too short for lock-example to keep"},
		{[]string{"--lease", "999ms", "k", "true"}, "use --lease 1s or longer"},
		{[]string{"--lease", "10s", "--heartbeat", "1ms", "k", "true"}, "--heartbeat 1ms: too short"},
		{[]string{"--lease", "1s", "--heartbeat", "1s", "k", "true"}, "--heartbeat 1s: must be at most half of --lease 1s"},
		{[]string{"--heartbeat", "-1s", "k", "true"}, "--heartbeat -1s: must be positive"},
		{[]string{"--lease", "3s", "--kill-grace", "2s", "k", "true"}, "--kill-grace 2s: does not fit in --lease 3s"},
		{[]string{"--kill-grace", "-1s", "k", "true"}, "--kill-grace -1s: must not be negative"},
		{[]string{"--timeout", "-1s", "k", "true"}, "--timeout -1s: must not be negative"},
		{[]string{"--sort-key", "novalue", "k", "true"}, `--sort-key "novalue": want NAME=VALUE`},
		{[]string{"--watch", "-1s", "list"}, "--watch -1s: must not be negative"},
		{[]string{"--shared", "--limit", "3", "k", "true"}, "--limit 3: cannot be combined with --shared"},
		{[]string{"--limit", "0", "k", "true"}, "--limit 0: must be between 1 and 100"},
		{[]string{"--limit", "101", "k", "true"}, "--limit 101: must be between 1 and 100"},
		{[]string{"--limit", "-2", "k", "true"}, "--limit -2: must be between 1 and 100"},
		{[]string{"--shared", "--data", "x", "k", "true"}, `--data "x": cannot be used with --shared`},
		{[]string{"--hold-at-least", "-1s", "k", "true"}, "--hold-at-least -1s: must not be negative"},
		{[]string{"--hold-at-least", "25h", "k", "true"}, "--hold-at-least 25h0m0s: must be at most 24h"},
		{[]string{"--hold-at-least", "25h", "k", "true"}, "17280 writes a day at --heartbeat 5s"},
		{[]string{"--shared", "list"}, "--shared: is for running a command, not for list"},
		{[]string{"--hold-at-least", "1m", "show", "k"}, "--hold-at-least: is for running a command, not for show"},
		{[]string{"--limit", "2", "list"}, "--limit 2: is for running a command and for show, not for list"},
		{[]string{"--limit", "2", "force-release", "--owner", "o", "k"}, "name the slot's own key instead"},
		{[]string{"--limit", "0", "show", "k"}, "--limit 0: must be between 1 and 100"},
		// Issue 63: a duration written as a bare number gets the duration
		// it likely meant, not the flag package's "parse error".
		{[]string{"--lease", "10", "k", "true"}, "a duration needs a unit: did you mean --lease 10s?"},
		{[]string{"--heartbeat", "500", "k", "true"}, "did you mean --heartbeat 500ms?"},
		{[]string{"--hold-at-least", "10", "k", "true"}, "did you mean --hold-at-least 10m?"},
		{[]string{"--watch", "30", "list"}, "did you mean --watch 30s?"},
		{[]string{"--lease", "soon", "k", "true"}, "not a duration: give a number and a unit"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			// Nothing listens on port 1: a DynamoDB call would fail differently.
			p := runToolEnv(t, []string{"DYNAMODB_ENDPOINT=http://127.0.0.1:1"}, tt.args...)
			wantCode(t, p, exitSetup)
			if s := p.stderr.String(); !strings.Contains(s, tt.want) || strings.Contains(s, "With") {
				t.Errorf("stderr does not say %q:\n%s", tt.want, s)
			}
		})
	}
}

// TestWaitUnreachable: --wait-for-lock without --timeout gives up with 125
// when DynamoDB cannot be reached for a lease, instead of waiting for ever.
func TestWaitUnreachable(t *testing.T) {
	t.Parallel()
	p := startToolEnv(t, []string{"DYNAMODB_ENDPOINT=http://127.0.0.1:1"}, flagsFor("locks", "--wait-for-lock", "k", "true")...)
	p.waitExit(t, 20*time.Second)
	wantCode(t, p, exitSetup)
	if !strings.Contains(p.stderr.String(), "DynamoDB failed for --lease 3s") {
		t.Errorf("stderr:\n%s", p.stderr.String())
	}
}

// recordingProxy is an HTTP proxy on 127.0.0.1 that forwards every request
// to DynamoDB Local and records the Authorization headers it saw.
type recordingProxy struct {
	mu    sync.Mutex
	auths []string
	url   string
}

func newRecordingProxy(t *testing.T) *recordingProxy {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingProxy{}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.auths = append(p.auths, r.Host+" "+r.Header.Get("Authorization"))
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	p.url = "http://" + ln.Addr().String()
	return p
}

func (p *recordingProxy) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.auths...)
}

// TestCredentialsDefaultChain: with AWS_ENDPOINT_URL_DYNAMODB naming a host
// that is not this machine, region and credentials come from the default
// chain (here the shared config and credentials files), never the dummy
// ones meant for DynamoDB Local. The requests reach DynamoDB Local through
// an HTTP proxy on 127.0.0.1 that records how they were signed.
func TestCredentialsDefaultChain(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "config")
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(config, []byte("[default]\nregion = eu-west-3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(creds, []byte("[default]\naws_access_key_id = AKIDFROMFILE\naws_secret_access_key = secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	proxy := newRecordingProxy(t)
	env := []string{"DYNAMODB_ENDPOINT=", "AWS_ENDPOINT_URL_DYNAMODB=http://dynamodb.example.test:8000",
		"HTTP_PROXY=" + proxy.url, "http_proxy=" + proxy.url, "NO_PROXY=", "no_proxy=", "AWS_CONFIG_FILE=" + config}

	p := runToolEnv(t, append(env, "AWS_SHARED_CREDENTIALS_FILE="+creds), flagsFor(table, "k", "true")...)
	wantCode(t, p, exitOK)
	seen := proxy.seen()
	if len(seen) == 0 {
		t.Fatal("no request went through the proxy")
	}
	for _, s := range seen {
		if !strings.HasPrefix(s, "dynamodb.example.test:8000 ") || !strings.Contains(s, "Credential=AKIDFROMFILE/") ||
			!strings.Contains(s, "/eu-west-3/dynamodb/") {
			t.Errorf("request not signed with the default chain's credentials and region: %s", s)
		}
	}

	// No credentials anywhere: no dummy ones for an endpoint elsewhere.
	n := len(proxy.seen())
	p = runToolEnv(t, append(env, "AWS_SHARED_CREDENTIALS_FILE=/dev/null"), flagsFor(table, "k", "true")...)
	wantCode(t, p, exitSetup)
	for _, s := range proxy.seen()[n:] {
		if strings.Contains(s, "Credential=") {
			t.Errorf("a request was signed without credentials configured: %s", s)
		}
	}
}

// runToolEnv runs lock-example with extra environment variables to the end.
func runToolEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := startToolEnv(t, env, args...)
	p.wait(t)
	return p
}

// TestWatch: list --watch and show --watch tell a live holder (renewing)
// from a dead one (unchanged for its lease), by watching the items.
func TestWatch(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	hold(t, table, "live", 2*time.Second) // renewed every 500ms
	putLock(t, table, "dead", "dead-host", "1s")

	p := runTool(t, "--table", table, "list", "--json", "--watch", "2s")
	wantCode(t, p, exitOK)
	var locks []lockJSON
	if err := json.Unmarshal([]byte(p.stdout.String()), &locks); err != nil {
		t.Fatalf("list --json --watch: %v\n%s", err, p.stdout.String())
	}
	if len(locks) != 2 || locks[0].Key != "dead" || locks[1].Key != "live" {
		t.Fatalf("list: %+v", locks)
	}
	if d, l := locks[0], locks[1]; d.RenewalsSeen != 0 || !strings.Contains(d.ObservedStatus, "over its lease") ||
		l.RenewalsSeen == 0 || l.RenewedWithin == "" || !strings.HasPrefix(l.ObservedStatus, "renewed") {
		t.Errorf("list --watch:\ndead %+v\nlive %+v", d, l)
	}

	p = runTool(t, "--table", table, "show", "--watch", "1500ms", "live")
	wantCode(t, p, exitOK)
	if !strings.Contains(p.stdout.String(), "renewed, last at most") {
		t.Errorf("show --watch:\n%s", p.stdout.String())
	}
	p = runTool(t, "--table", table, "list")
	wantCode(t, p, exitOK)
	if strings.Contains(p.stdout.String(), "SEEN") {
		t.Errorf("list without --watch:\n%s", p.stdout.String())
	}
}
