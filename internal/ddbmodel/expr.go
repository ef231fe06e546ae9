package ddbmodel

import (
	"bytes"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The expression language, for the subset the lock library sends:
// conditions with comparisons, IN, BETWEEN, attribute_exists,
// attribute_not_exists, begins_with, AND, OR, NOT and parentheses; updates
// with SET (plain values, if_not_exists, one + or -), REMOVE and ADD.
// Attribute paths are top-level names only (a placeholder or a plain name);
// nested paths are rejected as unsupported.

type tokKind uint8

const (
	tEOF   tokKind = iota
	tIdent         // a plain word: keyword, function or attribute name
	tName          // #placeholder
	tValue         // :placeholder
	tPunct         // ( ) , = <> < <= > >= + -
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
		case c == '.' || c == '[':
			return nil, errUnsupported("nested attribute paths")
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

// checkAllUsed reports a placeholder that was given but not used.
func (p *placeholders) checkAllUsed() error {
	for n := range p.names {
		if !p.usedNames[n] {
			return validation("Value provided in ExpressionAttributeNames unused in expressions: keys: {%s}", n)
		}
	}
	for v := range p.values {
		if !p.usedVals[v] {
			return validation("Value provided in ExpressionAttributeValues unused in expressions: keys: {%s}", v)
		}
	}
	return nil
}

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

// path reads an attribute name: a #placeholder or a plain word.
func (p *parser) path() (string, error) {
	t := p.next()
	switch t.kind {
	case tName:
		n, ok := p.ph.names[t.text]
		if !ok {
			return "", validation("An expression attribute name used in the document path is not defined; attribute name: %s", t.text)
		}
		p.ph.usedNames[t.text] = true
		return n, nil
	case tIdent:
		if reservedWord(t.text) {
			return "", validation("Attribute name is a reserved keyword; reserved keyword: %s", t.text)
		}
		return t.text, nil
	}
	return "", fmt.Errorf("expected an attribute name, found %q", t.text)
}

func (p *parser) value() (types.AttributeValue, error) {
	t := p.next()
	if t.kind != tValue {
		return nil, fmt.Errorf("expected a value placeholder, found %q", t.text)
	}
	v, ok := p.ph.values[t.text]
	if !ok {
		return nil, validation("An expression attribute value used in expression is not defined; attribute value: %s", t.text)
	}
	p.ph.usedVals[t.text] = true
	return v, nil
}

// A few words DynamoDB refuses as plain attribute names; the library never
// uses plain names, so the list only needs the ones tests might try.
func reservedWord(s string) bool {
	switch strings.ToUpper(s) {
	case "KEY", "DATA", "NAME", "OWNER", "VALUE", "TABLE", "TIME", "TTL", "STATUS", "SIZE", "COUNT", "DELETE", "SET",
		"REMOVE", "ADD", "AND", "OR", "NOT", "IN", "BETWEEN", "TOKEN", "VERSION", "LOCK", "RELEASED":
		return true
	}
	return false
}

// ---- conditions ----

type cond interface {
	eval(item Item) (bool, error)
}

type operand struct {
	path string               // attribute name, or
	val  types.AttributeValue // a literal value
}

func (o operand) get(item Item) (types.AttributeValue, bool) {
	if o.path != "" {
		v, ok := item[o.path]
		return v, ok
	}
	return o.val, true
}

type (
	orCond  struct{ l, r cond }
	andCond struct{ l, r cond }
	notCond struct{ c cond }
	cmpCond struct {
		op   string
		l, r operand
	}
	inCond struct {
		l    operand
		list []operand
	}
	betweenCond struct{ v, lo, hi operand }
	existsCond  struct {
		path string
		want bool
	}
	beginsCond struct{ l, r operand }
)

func (c orCond) eval(it Item) (bool, error) {
	a, err := c.l.eval(it)
	if err != nil || a {
		return a, err
	}
	return c.r.eval(it)
}

func (c andCond) eval(it Item) (bool, error) {
	a, err := c.l.eval(it)
	if err != nil || !a {
		return false, err
	}
	return c.r.eval(it)
}

func (c notCond) eval(it Item) (bool, error) {
	a, err := c.c.eval(it)
	return !a, err
}

func (c existsCond) eval(it Item) (bool, error) {
	_, ok := it[c.path]
	return ok == c.want, nil
}

func (c cmpCond) eval(it Item) (bool, error) {
	l, lok := c.l.get(it)
	r, rok := c.r.get(it)
	if !lok || !rok {
		return false, nil
	}
	switch c.op {
	case "=":
		return equal(l, r), nil
	case "<>":
		return !equal(l, r), nil
	}
	n, ok := compare(l, r)
	if !ok {
		return false, nil
	}
	switch c.op {
	case "<":
		return n < 0, nil
	case "<=":
		return n <= 0, nil
	case ">":
		return n > 0, nil
	default:
		return n >= 0, nil
	}
}

func (c inCond) eval(it Item) (bool, error) {
	l, ok := c.l.get(it)
	if !ok {
		return false, nil
	}
	for _, o := range c.list {
		if r, ok := o.get(it); ok && equal(l, r) {
			return true, nil
		}
	}
	return false, nil
}

func (c betweenCond) eval(it Item) (bool, error) {
	v, ok1 := c.v.get(it)
	lo, ok2 := c.lo.get(it)
	hi, ok3 := c.hi.get(it)
	if !ok1 || !ok2 || !ok3 {
		return false, nil
	}
	a, ok := compare(v, lo)
	b, ok2b := compare(v, hi)
	return ok && ok2b && a >= 0 && b <= 0, nil
}

func (c beginsCond) eval(it Item) (bool, error) {
	l, ok1 := c.l.get(it)
	r, ok2 := c.r.get(it)
	if !ok1 || !ok2 {
		return false, nil
	}
	switch l := l.(type) {
	case *types.AttributeValueMemberS:
		if r, ok := r.(*types.AttributeValueMemberS); ok {
			return strings.HasPrefix(l.Value, r.Value), nil
		}
	case *types.AttributeValueMemberB:
		if r, ok := r.(*types.AttributeValueMemberB); ok {
			return bytes.HasPrefix(l.Value, r.Value), nil
		}
	}
	return false, nil
}

// parseCondition parses a condition expression (or a key condition).
func parseCondition(expr string, ph *placeholders) (cond, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, validation("Invalid ConditionExpression: The expression can not be empty;")
	}
	toks, err := lex(expr)
	if err != nil {
		return nil, asValidation("Invalid ConditionExpression", err)
	}
	p := &parser{toks: toks, ph: ph}
	c, err := p.or()
	if err == nil && p.peek().kind != tEOF {
		err = fmt.Errorf("unexpected %q", p.peek().text)
	}
	if err != nil {
		return nil, asValidation("Invalid ConditionExpression", err)
	}
	return c, nil
}

func (p *parser) or() (cond, error) {
	l, err := p.and()
	for err == nil && p.isKeyword(p.peek(), "OR") {
		p.next()
		var r cond
		if r, err = p.and(); err == nil {
			l = orCond{l, r}
		}
	}
	return l, err
}

func (p *parser) and() (cond, error) {
	l, err := p.not()
	for err == nil && p.isKeyword(p.peek(), "AND") {
		p.next()
		var r cond
		if r, err = p.not(); err == nil {
			l = andCond{l, r}
		}
	}
	return l, err
}

func (p *parser) not() (cond, error) {
	if p.isKeyword(p.peek(), "NOT") {
		p.next()
		c, err := p.not()
		return notCond{c}, err
	}
	return p.primary()
}

func (p *parser) primary() (cond, error) {
	t := p.peek()
	if t.kind == tPunct && t.text == "(" {
		p.next()
		c, err := p.or()
		if err != nil {
			return nil, err
		}
		return c, p.expect(")")
	}
	if t.kind == tIdent && p.toks[p.i+1].kind == tPunct && p.toks[p.i+1].text == "(" {
		p.next()
		p.next()
		var c cond
		switch strings.ToLower(t.text) {
		case "attribute_exists", "attribute_not_exists":
			path, err := p.path()
			if err != nil {
				return nil, err
			}
			c = existsCond{path: path, want: strings.EqualFold(t.text, "attribute_exists")}
		case "begins_with":
			l, err := p.operand()
			if err != nil {
				return nil, err
			}
			if err := p.expect(","); err != nil {
				return nil, err
			}
			r, err := p.operand()
			if err != nil {
				return nil, err
			}
			c = beginsCond{l, r}
		default:
			return nil, errUnsupported("function " + t.text)
		}
		return c, p.expect(")")
	}
	l, err := p.operand()
	if err != nil {
		return nil, err
	}
	t = p.next()
	switch {
	case t.kind == tPunct && slices.Contains([]string{"=", "<>", "<", "<=", ">", ">="}, t.text):
		r, err := p.operand()
		if err != nil {
			return nil, err
		}
		return cmpCond{t.text, l, r}, nil
	case p.isKeyword(t, "IN"):
		if err := p.expect("("); err != nil {
			return nil, err
		}
		var list []operand
		for {
			o, err := p.operand()
			if err != nil {
				return nil, err
			}
			list = append(list, o)
			if n := p.next(); n.kind == tPunct && n.text == ")" {
				break
			} else if n.kind != tPunct || n.text != "," {
				return nil, fmt.Errorf("expected , or ) in IN list, found %q", n.text)
			}
		}
		return inCond{l, list}, nil
	case p.isKeyword(t, "BETWEEN"):
		lo, err := p.operand()
		if err != nil {
			return nil, err
		}
		if !p.isKeyword(p.next(), "AND") {
			return nil, fmt.Errorf("expected AND in BETWEEN")
		}
		hi, err := p.operand()
		if err != nil {
			return nil, err
		}
		return betweenCond{l, lo, hi}, nil
	}
	return nil, fmt.Errorf("expected a comparison, found %q", t.text)
}

func (p *parser) operand() (operand, error) {
	if p.peek().kind == tValue {
		v, err := p.value()
		return operand{val: v}, err
	}
	path, err := p.path()
	return operand{path: path}, err
}

// ---- updates ----

type setAction struct {
	path string
	val  valueExpr
}

type addAction struct {
	path string
	val  types.AttributeValue
}

type update struct {
	sets    []setAction
	removes []string
	adds    []addAction
}

// valueExpr is the right-hand side of a SET action: an operand or
// if_not_exists, optionally combined with a second one by + or -.
type valueExpr struct {
	l, r  term
	op    string // "+" or "-" when hasOp
	hasOp bool
}

type term struct {
	operand
	ifNotExists *ifNotExists
}

type ifNotExists struct {
	path string
	dflt term
}

func (t term) get(item Item) (types.AttributeValue, error) {
	if f := t.ifNotExists; f != nil {
		if v, ok := item[f.path]; ok {
			return v, nil
		}
		return f.dflt.get(item)
	}
	v, ok := t.operand.get(item)
	if !ok {
		return nil, validation("The provided expression refers to an attribute that does not exist in the item")
	}
	return v, nil
}

func (e valueExpr) eval(item Item) (types.AttributeValue, error) {
	l, err := e.l.get(item)
	if err != nil {
		return nil, err
	}
	if !e.hasOp {
		return l, nil
	}
	r, err := e.r.get(item)
	if err != nil {
		return nil, err
	}
	ln, ok1 := l.(*types.AttributeValueMemberN)
	rn, ok2 := r.(*types.AttributeValueMemberN)
	if !ok1 || !ok2 {
		return nil, validation("An operand in the update expression has an incorrect data type")
	}
	a, _ := new(big.Rat).SetString(ln.Value)
	b, _ := new(big.Rat).SetString(rn.Value)
	if a == nil || b == nil {
		return nil, validation("An operand in the update expression has an incorrect data type")
	}
	if e.op == "+" {
		a.Add(a, b)
	} else {
		a.Sub(a, b)
	}
	return &types.AttributeValueMemberN{Value: formatRat(a)}, nil
}

func parseUpdate(expr string, ph *placeholders) (*update, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, validation("Invalid UpdateExpression: The expression can not be empty;")
	}
	toks, err := lex(expr)
	if err != nil {
		return nil, asValidation("Invalid UpdateExpression", err)
	}
	p := &parser{toks: toks, ph: ph}
	u := &update{}
	seen := map[string]bool{}
	paths := map[string]bool{}
	usePath := func(path string) error {
		if paths[path] {
			return validation("Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [%s], path two: [%s]", path, path)
		}
		paths[path] = true
		return nil
	}
	for p.peek().kind != tEOF {
		kw := p.next()
		clause := strings.ToUpper(kw.text)
		if kw.kind != tIdent || (clause != "SET" && clause != "REMOVE" && clause != "ADD" && clause != "DELETE") {
			return nil, validation("Invalid UpdateExpression: Syntax error; token: %q", kw.text)
		}
		if seen[clause] {
			return nil, validation("Invalid UpdateExpression: The \"%s\" section can only be used once in an update expression;", clause)
		}
		seen[clause] = true
		for {
			path, err := p.path()
			if err != nil {
				return nil, asValidation("Invalid UpdateExpression", err)
			}
			if err := usePath(path); err != nil {
				return nil, err
			}
			switch clause {
			case "SET":
				if err := p.expect("="); err != nil {
					return nil, asValidation("Invalid UpdateExpression", err)
				}
				v, err := p.valueExpr()
				if err != nil {
					return nil, asValidation("Invalid UpdateExpression", err)
				}
				u.sets = append(u.sets, setAction{path, v})
			case "REMOVE":
				u.removes = append(u.removes, path)
			case "ADD":
				v, err := p.value()
				if err != nil {
					return nil, asValidation("Invalid UpdateExpression", err)
				}
				u.adds = append(u.adds, addAction{path, v})
			default:
				return nil, errUnsupported("DELETE in update expressions")
			}
			if t := p.peek(); t.kind == tPunct && t.text == "," {
				p.next()
				continue
			}
			break
		}
	}
	return u, nil
}

func (p *parser) valueExpr() (valueExpr, error) {
	l, err := p.term()
	if err != nil {
		return valueExpr{}, err
	}
	e := valueExpr{l: l}
	if t := p.peek(); t.kind == tPunct && (t.text == "+" || t.text == "-") {
		p.next()
		if e.r, err = p.term(); err != nil {
			return valueExpr{}, err
		}
		e.op, e.hasOp = t.text, true
	}
	return e, nil
}

func (p *parser) term() (term, error) {
	t := p.peek()
	if t.kind == tIdent && p.toks[p.i+1].kind == tPunct && p.toks[p.i+1].text == "(" {
		if !strings.EqualFold(t.text, "if_not_exists") {
			return term{}, errUnsupported("function " + t.text)
		}
		p.next()
		p.next()
		path, err := p.path()
		if err != nil {
			return term{}, err
		}
		if err := p.expect(","); err != nil {
			return term{}, err
		}
		d, err := p.term()
		if err != nil {
			return term{}, err
		}
		return term{ifNotExists: &ifNotExists{path: path, dflt: d}}, p.expect(")")
	}
	o, err := p.operand()
	return term{operand: o}, err
}

// apply evaluates u against old (the stored item, or an item of only the
// key) and returns the new item; old is not modified. Every right-hand side
// is evaluated against old, as DynamoDB does.
func (u *update) apply(old Item, keyNames []string) (Item, error) {
	touched := func(path string) error {
		if slices.Contains(keyNames, path) {
			return validation("One or more parameter values were invalid: Cannot update attribute %s. This attribute is part of the key", path)
		}
		return nil
	}
	next := cloneItem(old)
	for _, s := range u.sets {
		if err := touched(s.path); err != nil {
			return nil, err
		}
		v, err := s.val.eval(old)
		if err != nil {
			return nil, err
		}
		next[s.path] = v
	}
	for _, r := range u.removes {
		if err := touched(r); err != nil {
			return nil, err
		}
		delete(next, r)
	}
	for _, a := range u.adds {
		if err := touched(a.path); err != nil {
			return nil, err
		}
		cur, ok := old[a.path]
		if !ok {
			next[a.path] = a.val
			continue
		}
		cn, ok1 := cur.(*types.AttributeValueMemberN)
		an, ok2 := a.val.(*types.AttributeValueMemberN)
		if !ok1 || !ok2 {
			return nil, errUnsupported("ADD of a non-number")
		}
		x, _ := new(big.Rat).SetString(cn.Value)
		y, _ := new(big.Rat).SetString(an.Value)
		next[a.path] = &types.AttributeValueMemberN{Value: formatRat(x.Add(x, y))}
	}
	return next, nil
}

// ---- values ----

func equal(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		if !ok {
			return false
		}
		n, ok := compare(a, b)
		return ok && n == 0
	case *types.AttributeValueMemberB:
		b, ok := b.(*types.AttributeValueMemberB)
		return ok && bytes.Equal(a.Value, b.Value)
	case *types.AttributeValueMemberBOOL:
		b, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberNULL:
		_, ok := b.(*types.AttributeValueMemberNULL)
		return ok
	case *types.AttributeValueMemberSS:
		b, ok := b.(*types.AttributeValueMemberSS)
		return ok && sameSet(a.Value, b.Value)
	case *types.AttributeValueMemberNS:
		b, ok := b.(*types.AttributeValueMemberNS)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		as, bs := make([]string, len(a.Value)), make([]string, len(b.Value))
		for i := range a.Value {
			as[i], _ = canonicalN(a.Value[i])
			bs[i], _ = canonicalN(b.Value[i])
		}
		return sameSet(as, bs)
	case *types.AttributeValueMemberBS:
		b, ok := b.(*types.AttributeValueMemberBS)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		as, bs := make([]string, len(a.Value)), make([]string, len(b.Value))
		for i := range a.Value {
			as[i], bs[i] = string(a.Value[i]), string(b.Value[i])
		}
		return sameSet(as, bs)
	case *types.AttributeValueMemberL:
		b, ok := b.(*types.AttributeValueMemberL)
		return ok && slices.EqualFunc(a.Value, b.Value, equal)
	case *types.AttributeValueMemberM:
		b, ok := b.(*types.AttributeValueMemberM)
		return ok && ItemsEqual(a.Value, b.Value)
	}
	return false
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// ItemsEqual reports whether two items hold the same attributes with equal
// values (numbers compared by value, sets as sets). A nil and an empty item
// are equal.
func ItemsEqual(a, b map[string]types.AttributeValue) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !equal(v, w) {
			return false
		}
	}
	return true
}

// compare orders two scalars of the same type (S, N or B).
func compare(a, b types.AttributeValue) (int, bool) {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		if b, ok := b.(*types.AttributeValueMemberS); ok {
			return strings.Compare(a.Value, b.Value), true
		}
	case *types.AttributeValueMemberN:
		if b, ok := b.(*types.AttributeValueMemberN); ok {
			x, ok1 := new(big.Rat).SetString(a.Value)
			y, ok2 := new(big.Rat).SetString(b.Value)
			if ok1 && ok2 {
				return x.Cmp(y), true
			}
		}
	case *types.AttributeValueMemberB:
		if b, ok := b.(*types.AttributeValueMemberB); ok {
			return bytes.Compare(a.Value, b.Value), true
		}
	}
	return 0, false
}

// canonicalN returns DynamoDB's form of a number: no leading zeros, no
// trailing fractional zeros, no exponent.
func canonicalN(s string) (string, bool) {
	r, ok := new(big.Rat).SetString(strings.TrimSpace(s))
	if !ok || strings.ContainsAny(s, "/") {
		return "", false
	}
	return formatRat(r), true
}

func formatRat(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	s := r.FloatString(40)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
