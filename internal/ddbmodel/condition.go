package ddbmodel

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

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
