package ddbmodel

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Document paths: a top-level attribute name followed by map member names
// (#q.#w, or plain words), as the fair mode addresses the members of its
// queue map. List elements ([n]) are not supported: the library sends none.

// docPath is an attribute path: the top-level name, then member names.
type docPath []string

// top is the name of the top-level attribute the path lies in.
func (p docPath) top() string { return p[0] }

// String formats the path as DynamoDB does in its overlap message:
// [fairQueue, waiter].
func (p docPath) String() string { return "[" + strings.Join(p, ", ") + "]" }

// overlaps reports whether one path is a prefix of the other (or they are
// equal): two actions of one update expression may not touch such paths.
func (p docPath) overlaps(q docPath) bool {
	n := min(len(p), len(q))
	for i := range n {
		if p[i] != q[i] {
			return false
		}
	}
	return true
}

// resolve returns the value at the path, if there is one: every step but
// the last must be a map that holds the next name.
func (p docPath) resolve(item Item) (types.AttributeValue, bool) {
	cur := item
	for i, name := range p {
		v, ok := cur[name]
		if !ok {
			return nil, false
		}
		if i == len(p)-1 {
			return v, true
		}
		m, ok := v.(*types.AttributeValueMemberM)
		if !ok {
			return nil, false
		}
		cur = m.Value
	}
	return nil, false
}

// parent returns the map that holds the path's last name, for an update
// that writes or removes that member: the item itself for a top-level
// path, else the map value at the path without its last name, which must
// exist. The map is item's own (not a copy), so that the caller can change
// it in place.
func (p docPath) parent(item Item) (Item, error) {
	if len(p) == 1 {
		return item, nil
	}
	v, ok := p[:len(p)-1].resolve(item)
	if m, isMap := v.(*types.AttributeValueMemberM); ok && isMap {
		if m.Value == nil {
			m.Value = Item{}
		}
		return m.Value, nil
	}
	return nil, errInvalidUpdatePath()
}

func errInvalidUpdatePath() error {
	return validation(msgInvalidPath)
}

// path reads a document path: names (#placeholders or plain words)
// separated by dots.
func (p *parser) path() (docPath, error) {
	var out docPath
	for {
		n, err := p.name()
		if err != nil {
			return nil, err
		}
		out = append(out, n)
		if t := p.peek(); t.kind != tPunct || t.text != "." {
			return out, nil
		}
		p.next()
	}
}

// name reads one name of a path: a #placeholder or a plain word.
func (p *parser) name() (string, error) {
	t := p.next()
	switch t.kind {
	case tName:
		n, ok := p.ph.names[t.text]
		if !ok {
			return "", exprErrorf("An expression attribute name used in the document path is not defined; attribute name: %s", t.text)
		}
		p.ph.usedNames[t.text] = true
		return n, nil
	case tIdent:
		if reservedWord(t.text) {
			return "", exprErrorf("Attribute name is a reserved keyword; reserved keyword: %s", t.text)
		}
		return t.text, nil
	}
	return "", fmt.Errorf("expected an attribute name, found %q", t.text)
}
