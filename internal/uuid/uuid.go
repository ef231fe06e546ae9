// Package uuid generates random (version 4) UUIDs, the library's owner-name
// suffixes and record version numbers. It exists so that the library's
// module needs no third-party module for sixteen random bytes: every module
// the library requires lands in its users' build lists.
package uuid

import (
	"encoding/hex"

	"github.com/arielsrv/dynamolock/v2/internal/entropy"
)

// New returns a random UUID (RFC 9562, version 4, variant 10) in its
// canonical form: 36 characters, lowercase hex in groups of 8-4-4-4-12.
// Its 122 random bits come from crypto/rand (through internal/entropy),
// which never fails (Go 1.24+).
func New() string {
	var b [16]byte
	entropy.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // variant 10
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], b[10:16])
	return string(s[:])
}
