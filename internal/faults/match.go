package faults

import (
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Predicates for [Rule.Match]. They read requests in terms of item
// attributes, not of the placeholders a writer happened to choose, so that
// a rule keeps picking the same writes when their expressions are rebuilt.

// Sets picks an UpdateItem whose update expression assigns attr in its SET
// clause.
func Sets(attr string) func(any) bool {
	return func(in any) bool {
		_, ok := Assigned(in, attr)
		return ok
	}
}

// SetsS picks an UpdateItem that sets attr to the string value v.
func SetsS(attr, v string) func(any) bool {
	return func(in any) bool {
		got, _ := Assigned(in, attr)
		s, ok := got.(*types.AttributeValueMemberS)
		return ok && s.Value == v
	}
}

// Removes picks an UpdateItem whose update expression removes attr.
func Removes(attr string) func(any) bool {
	return func(in any) bool {
		u, ok := in.(*dynamodb.UpdateItemInput)
		if !ok || u.UpdateExpression == nil {
			return false
		}
		for _, path := range parseUpdate(*u.UpdateExpression)["REMOVE"] {
			if resolve(path, u.ExpressionAttributeNames) == attr {
				return true
			}
		}
		return false
	}
}

// ConditionOn picks an UpdateItem, DeleteItem or PutItem whose condition
// expression uses attr.
func ConditionOn(attr string) func(any) bool {
	return func(in any) bool {
		var cond *string
		var names map[string]string
		switch in := in.(type) {
		case *dynamodb.UpdateItemInput:
			cond, names = in.ConditionExpression, in.ExpressionAttributeNames
		case *dynamodb.DeleteItemInput:
			cond, names = in.ConditionExpression, in.ExpressionAttributeNames
		case *dynamodb.PutItemInput:
			cond, names = in.ConditionExpression, in.ExpressionAttributeNames
		}
		if cond == nil {
			return false
		}
		if usesWord(*cond, attr) {
			return true
		}
		for p, name := range names {
			if name == attr && usesWord(*cond, p) {
				return true
			}
		}
		return false
	}
}

// All picks a call every one of ms picks.
func All(ms ...func(any) bool) func(any) bool {
	return func(in any) bool {
		for _, m := range ms {
			if !m(in) {
				return false
			}
		}
		return true
	}
}

// Not picks a call m does not pick.
func Not(m func(any) bool) func(any) bool {
	return func(in any) bool { return !m(in) }
}

// Assigned reports whether in, an *dynamodb.UpdateItemInput, assigns attr
// in its SET clause, and returns the value when it is a single value
// placeholder (nil when it is computed, such as if_not_exists(...) + :one).
func Assigned(in any, attr string) (types.AttributeValue, bool) {
	u, ok := in.(*dynamodb.UpdateItemInput)
	if !ok || u.UpdateExpression == nil {
		return nil, false
	}
	for _, action := range parseUpdate(*u.UpdateExpression)["SET"] {
		path, value, ok := strings.Cut(action, "=")
		if !ok || resolve(strings.TrimSpace(path), u.ExpressionAttributeNames) != attr {
			continue
		}
		return u.ExpressionAttributeValues[strings.TrimSpace(value)], true
	}
	return nil, false
}

func resolve(path string, names map[string]string) string {
	if name, ok := names[path]; ok {
		return name
	}
	return path
}

var updateKeywords = map[string]bool{"SET": true, "REMOVE": true, "ADD": true, "DELETE": true}

// parseUpdate splits an update expression into its clauses (keyed by
// upper-case keyword), each a list of actions separated by top-level
// commas. Keywords cannot be literal attribute names (they are reserved
// words), so a word equal to one outside parentheses starts a clause.
func parseUpdate(expr string) map[string][]string {
	clauses := map[string][]string{}
	keyword, depth := "", 0
	var action strings.Builder
	flush := func() {
		if a := strings.TrimSpace(action.String()); keyword != "" && a != "" {
			clauses[keyword] = append(clauses[keyword], a)
		}
		action.Reset()
	}
	for _, word := range strings.Fields(expr) {
		if depth == 0 && updateKeywords[strings.ToUpper(word)] {
			flush()
			keyword = strings.ToUpper(word)
			continue
		}
		for _, r := range word {
			switch {
			case r == '(':
				depth++
			case r == ')':
				depth--
			case r == ',' && depth == 0:
				flush()
				continue
			}
			action.WriteRune(r)
		}
		action.WriteByte(' ')
	}
	flush()
	return clauses
}

// usesWord reports whether expr contains w as a whole token (so that "#v"
// does not match "#v2").
func usesWord(expr, w string) bool {
	re := regexp.MustCompile(`(^|[^\w#:])` + regexp.QuoteMeta(w) + `($|[^\w])`)
	return re.MatchString(expr)
}
