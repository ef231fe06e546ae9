package ddbmodel

import (
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// What DynamoDB checks of a request before it reads any item, with
// DynamoDB Local 3.3.1's messages (TestRefusals): the table's name, the
// placeholder maps, the sizes of what the placeholders stand for, the
// enumerations of ReturnValues, and request parameters the model does not
// implement (the legacy, pre-expression ones), which fail as unsupported.

// tableNamePattern is a valid table name: 3 to 255 characters of a-z,
// A-Z, 0-9, '_', '-' and '.'.
var tableNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

// placeholderPattern is a placeholder as expressions write them: the mark
// and one or more word characters.
var placeholderPattern = regexp.MustCompile(`^[#:][A-Za-z0-9_]+$`)

// exprParams are the placeholder maps of a request and whether it has an
// expression they may serve; absent names the expressions it could have
// had, for the message of a map given without one ("ConditionExpression
// is null").
type exprParams struct {
	names   map[string]string
	values  map[string]types.AttributeValue
	hasExpr bool
	absent  string
}

// check validates the maps before any expression is read, and returns the
// values normalised.
func (r exprParams) check() (map[string]types.AttributeValue, error) {
	switch {
	case r.names != nil && len(r.names) == 0 && r.hasExpr:
		return nil, validation("ExpressionAttributeNames must not be empty")
	case r.values != nil && len(r.values) == 0 && r.hasExpr:
		return nil, validation("ExpressionAttributeValues must not be empty")
	case len(r.names) > 0 && !r.hasExpr:
		return nil, validation("ExpressionAttributeNames can only be specified when using expressions")
	case len(r.values) > 0 && !r.hasExpr:
		return nil, validation("ExpressionAttributeValues can only be specified when using expressions: %s", r.absent)
	}
	for _, k := range slices.Sorted(maps.Keys(r.names)) {
		if err := checkPlaceholder("ExpressionAttributeNames", k, true); err != nil {
			return nil, err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.values)) {
		if err := checkPlaceholder("ExpressionAttributeValues", k, false); err != nil {
			return nil, err
		}
	}
	if err := checkNames(r.names); err != nil {
		return nil, err
	}
	values := r.values
	if len(values) > 0 {
		var err error
		if values, err = checkValues(values); err != nil {
			return nil, err
		}
	}
	// The Developer Guide's quotas: at most 2 MB for "the sum of the lengths
	// of all ExpressionAttributeNames and ExpressionAttributeValues";
	// DynamoDB Local counts each placeholder and what it stands for, and
	// checks the values alone first.
	size := 0
	for k, v := range values {
		size += len(k) + valueSize(v)
	}
	if size > maxSubstitutions {
		return nil, validation("ExpressionAttributeValues exceeds max size")
	}
	for k, n := range r.names {
		size += len(k) + len(n)
	}
	if size > maxSubstitutions {
		return nil, validation("Combined size of ExpressionAttributeNames and ExpressionAttributeValues exceeds max size")
	}
	return values, nil
}

func checkPlaceholder(param, k string, name bool) error {
	mark := ":"
	if name {
		mark = "#"
	}
	switch {
	case !placeholderPattern.MatchString(k) || !strings.HasPrefix(k, mark):
		return validation("%s contains invalid key: Syntax error; key: %q", param, k)
	case len(k) > maxPlaceholder && name:
		return validation("%s contains invalid key: The expression attribute map contains a key that is too long; size of key: %d", param, len(k))
	case len(k) > maxPlaceholder:
		return validation("%s contains invalid key: The expression attribute map contains a key that is too long;", param)
	}
	return nil
}

// checkNames rejects an empty attribute name, and one over 64 KB, as
// DynamoDB does before it reads any expression.
func checkNames(names map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(names)) {
		if names[k] == "" {
			return validation("ExpressionAttributeNames contains invalid value: Empty attribute name for key %s", k)
		}
		if len(names[k]) > maxAttrName {
			return validation("ExpressionAttributeNames contains invalid value: Attribute name is too large, must be less than %d bytes for key %s", maxAttrName+1, k)
		}
	}
	return nil
}

// checkAllUsed reports the placeholders that were given but not used,
// names first, each kind listed in sorted order (DynamoDB Local lists
// them in its hash order; the differential test compares them as sets).
func (p *placeholders) checkAllUsed() error {
	unused := func(keys []string, used map[string]bool) string {
		var out []string
		for _, k := range keys {
			if !used[k] {
				out = append(out, k)
			}
		}
		return strings.Join(out, ", ")
	}
	if u := unused(slices.Sorted(maps.Keys(p.names)), p.usedNames); u != "" {
		return validation("Value provided in ExpressionAttributeNames unused in expressions: keys: {%s}", u)
	}
	if u := unused(slices.Sorted(maps.Keys(p.values)), p.usedVals); u != "" {
		return validation("Value provided in ExpressionAttributeValues unused in expressions: keys: {%s}", u)
	}
	return nil
}

// substitutedSize is an expression's size as DynamoDB Local counts it
// against maxSubstituted (and, per member, against a transaction's 4 MB):
// its length, plus, for every use of a placeholder, the attribute name it
// stands for or the size of its value.
func substitutedSize(e string, names map[string]string, values map[string]types.AttributeValue) int {
	n := len(e)
	toks, err := lex(e)
	if err != nil {
		return n
	}
	for _, t := range toks {
		switch t.kind {
		case tName:
			n += len(names[t.text])
		case tValue:
			if v, ok := values[t.text]; ok {
				n += valueSize(v)
			}
		}
	}
	return n
}

// legacy refuses the parameters of DynamoDB's API from before expressions
// (Expected, AttributeUpdates, ConditionalOperator, AttributesToGet,
// KeyConditions, QueryFilter, ScanFilter): the model does not implement
// them, so they fail instead of being ignored. given lists which are set.
func legacy(given map[string]bool) error {
	for _, k := range slices.Sorted(maps.Keys(given)) {
		if given[k] {
			return errUnsupported("the legacy parameter " + k + " (use expressions)")
		}
	}
	return nil
}

// checkReturnValues validates ReturnValues against the values op accepts:
// ALL_NEW, UPDATED_OLD and UPDATED_NEW in UpdateItem only.
func checkReturnValues(op string, rv types.ReturnValue) error {
	switch rv {
	case "", types.ReturnValueNone, types.ReturnValueAllOld:
		return nil
	case types.ReturnValueAllNew, types.ReturnValueUpdatedOld, types.ReturnValueUpdatedNew:
		if op == "UpdateItem" {
			return nil
		}
	}
	return validation("Return values set to invalid value")
}

// checkReturnOnFailure validates ReturnValuesOnConditionCheckFailure; at
// names the parameter in the message ("returnValuesOnConditionCheckFailure",
// or a transaction member's path).
func checkReturnOnFailure(at string, rv types.ReturnValuesOnConditionCheckFailure) error {
	switch rv {
	case "", types.ReturnValuesOnConditionCheckFailureNone, types.ReturnValuesOnConditionCheckFailureAllOld:
		return nil
	}
	return validation("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy enum value set: [ALL_OLD, NONE]", rv, at)
}
