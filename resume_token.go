package dynamolock

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"unicode/utf8"
)

// The resume token (Lock.ResumeToken, Client.ResumeLock): what names one
// acquisition of one lock, in a string a process can keep across its own
// restart.
//
// Format, version 1: "dlr1." followed by the unpadded base64url encoding
// of
//
//	kind     1 byte: 'x' the item's holder, 'r' an RWLock reader,
//	         'X' / 'R' the same held by a session (WithSession)
//	table    string
//	key      string: the partition key value
//	sortKey  1 byte 0 (none) or 1, then the string
//	owner    string: the owner name the item carries
//	token    uvarint: the fencing token of the acquisition
//	entry    string: a reader's entry id ("" for a holder)
//	session  string: the session's key ("" without one)
//	check    4 bytes: CRC-32 (IEEE) of everything before it, big-endian
//
// where a string is its length (uvarint) and its bytes. A token is opaque
// to its users: it names no secret (anyone who may write the table may
// take its locks anyway), and any change of it fails its check.

const resumePrefix = "dlr1."

// resumeKind is what a resume token names.
type resumeKind byte

const (
	resumeHolder        resumeKind = 'x'
	resumeReader        resumeKind = 'r'
	resumeSessionHolder resumeKind = 'X'
	resumeSessionReader resumeKind = 'R'
)

// resumeToken is a decoded resume token.
type resumeToken struct {
	kind    resumeKind
	table   string
	key     string
	sortKey *string
	owner   string
	token   uint64
	entry   string // a reader's entry id
	session string
}

func (t *resumeToken) encode() string {
	b := []byte{byte(t.kind)}
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	str(t.table)
	str(t.key)
	if t.sortKey == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		str(*t.sortKey)
	}
	str(t.owner)
	b = binary.AppendUvarint(b, t.token)
	str(t.entry)
	str(t.session)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	return resumePrefix + base64.RawURLEncoding.EncodeToString(b)
}

// decodeResumeToken reads s, or says what is wrong with it.
func decodeResumeToken(s string) (*resumeToken, error) {
	if s == "" {
		return nil, errors.New("empty")
	}
	body, ok := strings.CutPrefix(s, resumePrefix)
	if !ok {
		if v, _, found := strings.Cut(s, "."); found && strings.HasPrefix(v, "dlr") {
			return nil, errors.New("version " + v[3:] + " is not one this client reads (it reads 1)")
		}
		return nil, errors.New("not a resume token (one starts with " + resumePrefix + ")")
	}
	b, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || len(b) < 5 {
		return nil, errors.New("not base64url, or truncated")
	}
	payload, check := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.ChecksumIEEE(payload) != check {
		return nil, errors.New("altered or truncated: its check does not match")
	}
	r := &tokenReader{b: payload}
	t := &resumeToken{kind: resumeKind(r.byte())}
	t.table = r.str()
	t.key = r.str()
	if r.byte() == 1 {
		sk := r.str()
		t.sortKey = &sk
	}
	t.owner = r.str()
	t.token = r.uvarint()
	t.entry = r.str()
	t.session = r.str()
	switch {
	case r.bad || len(r.b) != 0:
		return nil, errors.New("its fields do not parse")
	case t.kind != resumeHolder && t.kind != resumeReader && t.kind != resumeSessionHolder && t.kind != resumeSessionReader:
		return nil, errors.New("it names no kind of lock this client knows")
	case t.table == "" || t.owner == "" || t.token == 0 && t.entry == "" || !utf8.ValidString(t.key) || !utf8.ValidString(t.owner):
		return nil, errors.New("it lacks a table, an owner or a fencing token")
	case (t.kind == resumeReader || t.kind == resumeSessionReader) != (t.entry != ""):
		return nil, errors.New("a reader's token names its entry, and only a reader's")
	case (t.kind == resumeSessionHolder || t.kind == resumeSessionReader) != (t.session != ""):
		return nil, errors.New("a session's token names its session, and only a session's")
	}
	return t, nil
}

// tokenReader reads a token's fields; bad is set by a read past its end.
type tokenReader struct {
	b   []byte
	bad bool
}

func (r *tokenReader) byte() byte {
	if len(r.b) < 1 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *tokenReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *tokenReader) str() string {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// ResumeToken returns a token that names this acquisition of the lock
// (its table, key, sort key, owner and fencing token; a reader's entry),
// for [Client.ResumeLock] in a later process: keep it where the process
// finds it after a restart (a file, an environment variable). It is
// stable across heartbeats: a renewal does not change it, a new
// acquisition does. It is "" for a nil lock, a read-only view from
// [Client.Get] or a zero Lock. A token of a lock held by a session
// ([WithSession]) is made, and ResumeLock refuses it (see there).
//
// Format: "dlr1." and base64url, versioned and checked; opaque to its
// users (docs/RESUME.md describes it).
func (l *Lock) ResumeToken() string {
	if l == nil || l.kind != heldLock || l.client == nil {
		return ""
	}
	c := l.client
	l.mu.Lock()
	t := &resumeToken{kind: resumeHolder, table: c.cfg.tableName, key: l.partitionKey, sortKey: l.sortKey, owner: l.ownerName, token: l.fencingToken}
	l.mu.Unlock()
	if r, ok := l.shapeOf().(readerShape); ok {
		t.kind, t.entry = resumeReader, r.id
	}
	if s := l.heldBy(); s != nil {
		t.session = s.key
		t.kind = map[resumeKind]resumeKind{resumeHolder: resumeSessionHolder, resumeReader: resumeSessionReader}[t.kind]
	}
	return t.encode()
}
