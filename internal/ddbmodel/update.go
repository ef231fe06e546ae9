package ddbmodel

import (
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The messages of an update that cannot be applied to its item.
const (
	msgOperandType      = "An operand in the update expression has an incorrect data type"
	msgMissingAttribute = "The provided expression refers to an attribute that does not exist in the item"
	msgInvalidPath      = "The document path provided in the update expression is invalid for update"
)

type setAction struct {
	path docPath
	val  valueExpr
}

type addAction struct {
	path docPath
	val  types.AttributeValue
}

type update struct {
	sets    []setAction
	removes []docPath
	adds    []addAction
	paths   []docPath // every action's path, in the expression's order
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
	path docPath
	dflt term
}

func (t term) get(item Item) (types.AttributeValue, error) {
	if f := t.ifNotExists; f != nil {
		if v, ok := f.path.resolve(item); ok {
			return v, nil
		}
		return f.dflt.get(item)
	}
	v, ok := t.operand.get(item)
	if !ok {
		return nil, validation(msgMissingAttribute)
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
		return nil, validation(msgOperandType)
	}
	return arithmetic(ln.Value, rn.Value, e.op == "-")
}

// arithmetic computes a + b (a - b with neg) of two stored numbers, and
// refuses a result outside DynamoDB's precision or range.
func arithmetic(a, b string, neg bool) (types.AttributeValue, error) {
	x, ok1 := parseDecimal(a)
	y, ok2 := parseDecimal(b)
	if !ok1 || !ok2 {
		return nil, validation(msgOperandType)
	}
	sum := x.add(y, neg)
	if msg := sum.check(); msg != "" {
		return nil, validation("%s", msg)
	}
	return &types.AttributeValueMemberN{Value: sum.String()}, nil
}

func parseUpdate(expr string, ph *placeholders) (*update, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, validation("Invalid UpdateExpression: The expression can not be empty;")
	}
	if len(expr) > maxExpression || substitutedSize(expr, ph.names, ph.values) > maxSubstituted {
		return nil, validation("Invalid UpdateExpression: Expression size has exceeded the maximum allowed size;")
	}
	toks, err := lex(expr)
	if err != nil {
		return nil, asValidation("Invalid UpdateExpression", err)
	}
	p := &parser{toks: toks, ph: ph}
	u := &update{}
	seen := map[string]bool{}
	// Paths of two actions may not overlap (be equal, or one inside the
	// other); DynamoDB names the earlier one first.
	usePath := func(path docPath) error {
		for _, q := range u.paths {
			if q.overlaps(path) {
				return validation("Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths; path one: %s, path two: %s", q, path)
			}
		}
		u.paths = append(u.paths, path)
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
				if !addable(v) {
					return nil, validation("Invalid UpdateExpression: Incorrect operand type for operator or function; operator: ADD, operand type: %s, typeSet: ALLOWED_FOR_ADD_OPERAND", longTypeName(v))
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
	// The Developer Guide's quotas: at most 300 operators or functions in
	// an update expression.
	ops := 0
	for i, t := range toks {
		if t.kind == tPunct && (t.text == "+" || t.text == "-") || t.kind == tIdent && toks[i+1].kind == tPunct && toks[i+1].text == "(" {
			ops++
		}
	}
	if ops > maxUpdateOperators {
		return nil, validation("Invalid UpdateExpression: The expression contains too many operators; operator count: %d", ops)
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
		// A literal that is not a number is refused before anything runs.
		for _, o := range []term{e.l, e.r} {
			if v := o.val; o.ifNotExists == nil && v != nil {
				if _, isN := v.(*types.AttributeValueMemberN); !isN {
					return valueExpr{}, exprErrorf("Incorrect operand type for operator or function; operator or function: %s, operand type: %s", t.text, typeName(v))
				}
			}
		}
	}
	return e, nil
}

// addable reports whether ADD takes v: a number or a set.
func addable(v types.AttributeValue) bool {
	switch v.(type) {
	case *types.AttributeValueMemberN, *types.AttributeValueMemberSS, *types.AttributeValueMemberNS, *types.AttributeValueMemberBS:
		return true
	}
	return false
}

// add is ADD of v to cur: a sum of numbers, or a union of sets of one type.
func add(cur, v types.AttributeValue) (types.AttributeValue, error) {
	switch cur := cur.(type) {
	case *types.AttributeValueMemberN:
		if n, ok := v.(*types.AttributeValueMemberN); ok {
			return arithmetic(cur.Value, n.Value, false)
		}
	case *types.AttributeValueMemberSS:
		if s, ok := v.(*types.AttributeValueMemberSS); ok {
			return &types.AttributeValueMemberSS{Value: union(cur.Value, s.Value)}, nil
		}
	case *types.AttributeValueMemberNS:
		if s, ok := v.(*types.AttributeValueMemberNS); ok {
			return &types.AttributeValueMemberNS{Value: union(cur.Value, s.Value)}, nil
		}
	case *types.AttributeValueMemberBS:
		if s, ok := v.(*types.AttributeValueMemberBS); ok {
			as, bs := make([]string, len(cur.Value)), make([]string, len(s.Value))
			for i, b := range cur.Value {
				as[i] = string(b)
			}
			for i, b := range s.Value {
				bs[i] = string(b)
			}
			u := union(as, bs)
			out := make([][]byte, len(u))
			for i, b := range u {
				out[i] = []byte(b)
			}
			return &types.AttributeValueMemberBS{Value: out}, nil
		}
	}
	return nil, validation(msgOperandType)
}

// union is a followed by the members of b it lacks. Members are compared
// as text: the model keeps numbers in canonical form.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, e := range b {
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

func (p *parser) term() (term, error) {
	t := p.peek()
	if p.isCall(t) {
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
// is evaluated against old, as DynamoDB does. An action on a member of a map
// needs that map to exist (as a map): else the update is invalid, whatever
// the action (DynamoDB checks this after the condition, when it applies the
// update). Since paths of two actions never overlap, no action creates or
// removes the map another one writes into.
func (u *update) apply(old Item, keyNames []string) (Item, error) {
	touched := func(path docPath) error {
		if slices.Contains(keyNames, path.top()) {
			return validation("One or more parameter values were invalid: Cannot update attribute %s. This attribute is part of the key", path.top())
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
		parent, err := s.path.parent(next)
		if err != nil {
			return nil, err
		}
		parent[s.path[len(s.path)-1]] = v
	}
	for _, r := range u.removes {
		if err := touched(r); err != nil {
			return nil, err
		}
		parent, err := r.parent(next)
		if err != nil {
			return nil, err
		}
		delete(parent, r[len(r)-1])
	}
	for _, a := range u.adds {
		if err := touched(a.path); err != nil {
			return nil, err
		}
		parent, err := a.path.parent(next)
		if err != nil {
			return nil, err
		}
		name := a.path[len(a.path)-1]
		cur, ok := parent[name]
		if !ok {
			parent[name] = a.val
			continue
		}
		sum, err := add(cur, a.val)
		if err != nil {
			return nil, err
		}
		parent[name] = sum
	}
	return next, nil
}

// updated is what ReturnValues UPDATED_OLD (of old) or UPDATED_NEW (of
// next) returns, as DynamoDB Local 3.3.1 does: for every action whose path
// resolves in that item, the whole top-level attribute holding it (not
// just the member), whether or not its value changed; nil when none.
func (u *update) updated(of Item) Item {
	var out Item
	for _, p := range u.paths {
		if _, ok := p.resolve(of); ok {
			if out == nil {
				out = Item{}
			}
			out[p.top()] = cloneValue(of[p.top()])
		}
	}
	return out
}
