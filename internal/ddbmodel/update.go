package ddbmodel

import (
	"math/big"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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
	if len(expr) > maxExpression {
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
		cn, ok1 := cur.(*types.AttributeValueMemberN)
		an, ok2 := a.val.(*types.AttributeValueMemberN)
		if !ok1 || !ok2 {
			return nil, errUnsupported("ADD of a non-number")
		}
		x, _ := new(big.Rat).SetString(cn.Value)
		y, _ := new(big.Rat).SetString(an.Value)
		parent[name] = &types.AttributeValueMemberN{Value: formatRat(x.Add(x, y))}
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
