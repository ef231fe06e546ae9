package ddbmodel

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

type cond interface {
	eval(item Item) (bool, error)
}

// operand is one side of a comparison: a document path, a literal value,
// or size() of either.
type operand struct {
	path docPath              // a document path, or
	val  types.AttributeValue // a literal value, or
	size *operand             // size(path) or size(:value)
}

// get returns the operand's value in item; false when the path does not
// resolve, or size() has nothing to measure (a missing attribute, a number,
// a boolean, a null): DynamoDB then makes every comparison false but <>.
func (o operand) get(item Item) (types.AttributeValue, bool) {
	switch {
	case o.size != nil:
		v, ok := o.size.get(item)
		if !ok {
			return nil, false
		}
		n, ok := sizeOf(v)
		if !ok {
			return nil, false
		}
		return &types.AttributeValueMemberN{Value: strconv.Itoa(n)}, true
	case o.path != nil:
		return o.path.resolve(item)
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
		path docPath
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
	_, ok := c.path.resolve(it)
	return ok == c.want, nil
}

func (c cmpCond) eval(it Item) (bool, error) {
	l, lok := c.l.get(it)
	r, rok := c.r.get(it)
	if c.op == "<>" {
		// A missing side differs from everything (DynamoDB Local 3.3.1:
		// "#missing <> :v" and "size(#missing) <> :v" hold).
		return !lok || !rok || !equal(l, r), nil
	}
	if !lok || !rok {
		return false, nil
	}
	if c.op == "=" {
		return equal(l, r), nil
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

// parseCondition parses a condition expression.
func parseCondition(expr string, ph *placeholders) (cond, error) {
	return parseConditionOf("ConditionExpression", expr, ph)
}

// parseConditionOf parses a condition expression, or a key condition
// (kind "KeyConditionExpression"), naming kind in its errors.
func parseConditionOf(kind, expr string, ph *placeholders) (cond, error) {
	invalid := "Invalid " + kind
	if strings.TrimSpace(expr) == "" {
		return nil, validation("%s: The expression can not be empty;", invalid)
	}
	if len(expr) > maxExpression {
		return nil, validation("%s: Expression size has exceeded the maximum allowed size; expression size: %d", invalid, len(expr))
	}
	if substitutedSize(expr, ph.names, ph.values) > maxSubstituted {
		return nil, validation("%s: Expression size has exceeded the maximum allowed size;", invalid)
	}
	toks, err := lex(expr)
	if err != nil {
		return nil, asValidation(invalid, err)
	}
	p := &parser{toks: toks, ph: ph}
	c, err := p.or()
	if err == nil && p.peek().kind != tEOF {
		err = fmt.Errorf("unexpected %q", p.peek().text)
	}
	if err != nil {
		return nil, asValidation(invalid, err)
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
	if p.isCall(t) && !strings.EqualFold(t.text, "size") {
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
			for _, o := range []operand{l, r} {
				if o.literal() && typeName(o.val) != "S" && typeName(o.val) != "B" {
					return nil, operandType("begins_with", o.val)
				}
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
		if t.text != "=" && t.text != "<>" {
			for _, o := range []operand{l, r} {
				if o.literal() && !scalar(o.val) {
					return nil, operandType(t.text, o.val)
				}
			}
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
				if len(list) > maxInOperands {
					return nil, exprErrorf("The IN operator is provided with too many operands; number of operands: %d", len(list))
				}
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
		if err := checkBounds(lo, hi); err != nil {
			return nil, err
		}
		return betweenCond{l, lo, hi}, nil
	}
	if l.size != nil {
		return nil, exprError("The function is not allowed to be used this way in an expression; function: size")
	}
	return nil, fmt.Errorf("expected a comparison, found %q", t.text)
}

// literal reports whether the operand is a value placeholder (not a path,
// not size()).
func (o operand) literal() bool { return o.val != nil && o.path == nil && o.size == nil }

// scalar reports whether v is a string, a number or a binary: what <, <=,
// > and >= and BETWEEN order.
func scalar(v types.AttributeValue) bool {
	switch v.(type) {
	case *types.AttributeValueMemberS, *types.AttributeValueMemberN, *types.AttributeValueMemberB:
		return true
	}
	return false
}

func operandType(op string, v types.AttributeValue) error {
	return exprErrorf("Incorrect operand type for operator or function; operator or function: %s, operand type: %s", op, typeName(v))
}

// checkBounds refuses the bounds of a BETWEEN that DynamoDB refuses before
// reading any item: values of another kind than S, N or B, of two kinds, or
// a lower bound above the upper one.
func checkBounds(lo, hi operand) error {
	for _, o := range []operand{lo, hi} {
		if o.literal() && !scalar(o.val) {
			return operandType("BETWEEN", o.val)
		}
	}
	if !lo.literal() || !hi.literal() {
		return nil
	}
	show := func(v types.AttributeValue) string {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			return "{S:" + v.Value + "}"
		case *types.AttributeValueMemberN:
			return "{N:" + v.Value + "}"
		}
		return "{" + typeName(v) + ":...}"
	}
	bounds := fmt.Sprintf("lower bound operand: AttributeValue: %s, upper bound operand: AttributeValue: %s", show(lo.val), show(hi.val))
	if typeName(lo.val) != typeName(hi.val) {
		return exprErrorf("The BETWEEN operator requires same data type for lower and upper bounds; %s", bounds)
	}
	if n, _ := compare(lo.val, hi.val); n > 0 {
		return exprErrorf("The BETWEEN operator requires upper bound to be greater than or equal to lower bound; %s", bounds)
	}
	return nil
}

// isCall reports whether t starts a function call: a word and "(".
func (p *parser) isCall(t token) bool {
	n := p.toks[min(p.i+1, len(p.toks)-1)]
	return t.kind == tIdent && n.kind == tPunct && n.text == "("
}

func (p *parser) operand() (operand, error) {
	if t := p.peek(); p.isCall(t) && strings.EqualFold(t.text, "size") {
		p.next()
		p.next()
		var in operand
		var err error
		if p.peek().kind == tValue {
			in.val, err = p.value()
			if _, ok := sizeOf(in.val); err == nil && !ok {
				err = exprErrorf("Incorrect operand type for operator or function; operator or function: size, operand type: %s", typeName(in.val))
			}
		} else {
			in.path, err = p.path()
		}
		if err != nil {
			return operand{}, err
		}
		return operand{size: &in}, p.expect(")")
	}
	if p.peek().kind == tValue {
		v, err := p.value()
		return operand{val: v}, err
	}
	path, err := p.path()
	return operand{path: path}, err
}

// ---- updates ----
