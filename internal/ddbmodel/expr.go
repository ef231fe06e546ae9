package ddbmodel

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The expression language, for the subset the lock library sends:
// conditions with comparisons, IN, BETWEEN, attribute_exists,
// attribute_not_exists, begins_with, size, AND, OR, NOT and parentheses; updates
// with SET (plain values, if_not_exists, one + or -), REMOVE and ADD.
// Attribute paths are document paths into maps (path.go); list indexes are
// rejected as unsupported.

type tokKind uint8

const (
	tEOF   tokKind = iota
	tIdent         // a plain word: keyword, function or attribute name
	tName          // #placeholder
	tValue         // :placeholder
	tPunct         // ( ) , . = <> < <= > >= + -
)

type token struct {
	kind tokKind
	text string
}

func lex(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#' || c == ':' || isWord(c):
			j := i + 1
			for j < len(s) && isWord(s[j]) {
				j++
			}
			k := tIdent
			if c == '#' {
				k = tName
			} else if c == ':' {
				k = tValue
			}
			if j == i+1 && k != tIdent {
				return nil, fmt.Errorf("invalid placeholder at %d", i)
			}
			toks = append(toks, token{k, s[i:j]})
			i = j
		case c == '<' || c == '>':
			if i+1 < len(s) && (s[i+1] == '=' || (c == '<' && s[i+1] == '>')) {
				toks = append(toks, token{tPunct, s[i : i+2]})
				i += 2
			} else {
				toks = append(toks, token{tPunct, s[i : i+1]})
				i++
			}
		case strings.IndexByte("(),=+-", c) >= 0:
			toks = append(toks, token{tPunct, s[i : i+1]})
			i++
		case c == '.':
			toks = append(toks, token{tPunct, "."})
			i++
		case c == '[':
			return nil, errUnsupported("list elements in document paths")
		default:
			return nil, fmt.Errorf("invalid character %q at %d", c, i)
		}
	}
	return append(toks, token{kind: tEOF}), nil
}

func isWord(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// placeholders resolves #names and :values and records which were used, so
// that unused or undefined ones are rejected as DynamoDB does.
type placeholders struct {
	names     map[string]string
	values    map[string]types.AttributeValue
	usedNames map[string]bool
	usedVals  map[string]bool
}

func newPlaceholders(names map[string]string, values map[string]types.AttributeValue) *placeholders {
	return &placeholders{names: names, values: values, usedNames: map[string]bool{}, usedVals: map[string]bool{}}
}

// DynamoDB's limits on requests (the Developer Guide's "Quotas"), with the
// messages DynamoDB Local 3.3.1 gives past them (TestLimits).
const (
	maxExpression      = 4096      // bytes of one expression string
	maxInOperands      = 100       // operands of one IN
	maxAttrName        = 65535     // bytes of an attribute name behind a placeholder
	maxPartitionKey    = 2048      // bytes of a partition key value
	maxSortKey         = 1024      // bytes of a sort key value
	maxTransactItems   = 100       // members of one transaction
	maxTransactSize    = 4 << 20   // bytes of one transaction's items
	maxItem            = 400 << 10 // bytes of one item
	maxPlaceholder     = 255       // bytes of a placeholder (#name, :value)
	maxSubstitutions   = 2 << 20   // bytes of a request's placeholders and what they stand for
	maxSubstituted     = 1 << 20   // bytes of one expression counting what its placeholders stand for
	maxTokenLen        = 36        // bytes of a ClientRequestToken
	maxUpdateOperators = 300       // operators and functions of one update expression
)

type parser struct {
	toks []token
	i    int
	ph   *placeholders
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) isKeyword(t token, kw string) bool {
	return t.kind == tIdent && strings.EqualFold(t.text, kw)
}

func (p *parser) expect(punct string) error {
	if t := p.next(); t.kind != tPunct || t.text != punct {
		return fmt.Errorf("expected %q, found %q", punct, t.text)
	}
	return nil
}

func (p *parser) value() (types.AttributeValue, error) {
	t := p.next()
	if t.kind != tValue {
		return nil, fmt.Errorf("expected a value placeholder, found %q", t.text)
	}
	v, ok := p.ph.values[t.text]
	if !ok {
		return nil, exprErrorf("An expression attribute value used in expression is not defined; attribute value: %s", t.text)
	}
	p.ph.usedVals[t.text] = true
	return v, nil
}

// ---- conditions ----
