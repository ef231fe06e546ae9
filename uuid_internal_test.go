package dynamolock

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

var canonicalV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// Record version numbers and owner-name suffixes are random (version 4)
// UUIDs in canonical form, never the same twice.
func TestRVNsAreCanonicalVersion4UUIDs(t *testing.T) {
	seen := make(map[string]bool)
	for range 1000 {
		s := newRVN()
		if !canonicalV4.MatchString(s) {
			t.Fatalf("%q is not a canonical version 4 UUID", s)
		}
		if seen[s] {
			t.Fatalf("%q came twice", s)
		}
		seen[s] = true
	}
	host, _ := os.Hostname()
	a, b := defaultOwnerName(), defaultOwnerName()
	if a == b || !strings.HasPrefix(a, host+"/") || !canonicalV4.MatchString(strings.TrimPrefix(a, host+"/")) {
		t.Fatalf("default owner names %q and %q: want the host name, a slash and a fresh UUID", a, b)
	}
}
