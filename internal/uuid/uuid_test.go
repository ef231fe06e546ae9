package uuid_test

import (
	"regexp"
	"testing"

	"github.com/arielsrv/dynamolock/v2/internal/uuid"
)

var canonicalV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNewIsACanonicalVersion4UUID(t *testing.T) {
	seen := make(map[string]bool)
	for range 1000 {
		s := uuid.New()
		if !canonicalV4.MatchString(s) {
			t.Fatalf("%q is not a canonical version 4 UUID", s)
		}
		if seen[s] {
			t.Fatalf("%q came twice", s)
		}
		seen[s] = true
	}
}
