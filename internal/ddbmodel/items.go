package ddbmodel

import (
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attribute values as DynamoDB accepts them, in items and in expression
// attribute values, with DynamoDB Local 3.3.1's messages (TestRefusals):
// a number within DynamoDB's precision and range (numbers.go), a set
// neither empty nor holding one value twice, a NULL whose value is true;
// in an item also an attribute name that is not empty and maps and lists
// nested at most 32 levels deep (the Developer Guide's quotas, "Nested
// attribute depth").

// The messages of an item over the 400 KB limit: a whole item given (PutItem),
// and an item an update would leave.
const (
	msgTooLarge       = "Item size has exceeded the maximum allowed size"
	msgUpdateTooLarge = "Item size to update has exceeded the maximum allowed size"
	msgNesting        = "Nesting Levels have exceeded supported limits: Attributes in the item have nested levels beyond supported limit"
	msgUpdateNesting  = "Nesting Levels have exceeded supported limits"
)

// maxNesting is how many maps and lists may hold one another in an item: a
// top-level attribute and 31 levels below it.
const maxNesting = 31

// checkItem validates an item given whole (PutItem's) and the size limit,
// and normalises its numbers.
func checkItem(it Item) (Item, error) {
	out, tooLarge, err := normalizeItem(it, false)
	if err == nil && tooLarge {
		err = validation(msgTooLarge)
	}
	return out, err
}

// normalizeItem validates an item's attributes (names, values, nesting)
// and normalises its numbers, and reports whether the item exceeds 400 KB
// (the size DynamoDB Local counts: names and values, 3 bytes per map or
// list and 1 per element, numbers in about half their digits; checked
// against it for items of nested maps to the byte). Attributes are
// checked in name order, so that of two faults the same one is reported.
// updated says the item is one an update computed (for the message of one
// nested too deep).
func normalizeItem(it Item, updated bool) (Item, bool, error) {
	out := make(Item, len(it))
	size := 0
	for _, k := range slices.Sorted(maps.Keys(it)) {
		if k == "" {
			return nil, false, validation("Empty attribute name")
		}
		nv, msg := checkValue(it[k])
		if msg != "" {
			return nil, false, validation("%s", msg)
		}
		if nesting(nv) > maxNesting {
			if updated {
				return nil, false, validation(msgUpdateNesting)
			}
			return nil, false, validation(msgNesting)
		}
		out[k] = nv
		size += len(k) + valueSize(nv)
	}
	return out, size > maxItem, nil
}

// checkValues validates the expression attribute values of a request and
// returns them normalised. They are not an item: no size or nesting limit
// applies to them here (requestSizes bounds their total).
func checkValues(values map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out := make(map[string]types.AttributeValue, len(values))
	for _, k := range slices.Sorted(maps.Keys(values)) {
		v, msg := checkValue(values[k])
		if msg != "" {
			return nil, validation("ExpressionAttributeValues contains invalid value: %s for key %s", msg, k)
		}
		out[k] = v
	}
	return out, nil
}

// nesting is how many maps and lists hold one another in v, v included.
func nesting(v types.AttributeValue) int {
	n := 0
	switch v := v.(type) {
	case *types.AttributeValueMemberL:
		for _, e := range v.Value {
			n = max(n, nesting(e))
		}
	case *types.AttributeValueMemberM:
		for _, e := range v.Value {
			n = max(n, nesting(e))
		}
	default:
		return 0
	}
	return n + 1
}

// checkValue returns v normalised, or the message DynamoDB refuses it with.
func checkValue(v types.AttributeValue) (types.AttributeValue, string) {
	switch v := v.(type) {
	case nil:
		return nil, "Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"
	case *types.AttributeValueMemberN:
		n, msg := checkNumber(v.Value)
		return &types.AttributeValueMemberN{Value: n}, msg
	case *types.AttributeValueMemberNULL:
		if !v.Value {
			return nil, "One or more parameter values were invalid: Null attribute value types must have the value of true"
		}
	case *types.AttributeValueMemberSS:
		if len(v.Value) == 0 {
			return nil, "One or more parameter values were invalid: An string set  may not be empty"
		}
		if hasDuplicate(v.Value) {
			return nil, "One or more parameter values were invalid: Input collection [" + strings.Join(v.Value, ", ") + "] contains duplicates"
		}
	case *types.AttributeValueMemberNS:
		if len(v.Value) == 0 {
			return nil, "One or more parameter values were invalid: An number set  may not be empty"
		}
		ns := make([]string, len(v.Value))
		for i, s := range v.Value {
			var msg string
			if ns[i], msg = checkNumber(s); msg != "" {
				return nil, msg
			}
		}
		if hasDuplicate(ns) {
			return nil, "Input collection contains duplicates"
		}
		return &types.AttributeValueMemberNS{Value: ns}, ""
	case *types.AttributeValueMemberBS:
		if len(v.Value) == 0 {
			return nil, "One or more parameter values were invalid: Binary sets should not be empty"
		}
		bs := make([]string, len(v.Value))
		for i, b := range v.Value {
			bs[i] = string(b)
		}
		if hasDuplicate(bs) {
			return nil, "One or more parameter values were invalid: Input collection of type BS contains duplicates."
		}
	case *types.AttributeValueMemberL:
		l := make([]types.AttributeValue, len(v.Value))
		for i, e := range v.Value {
			var msg string
			if l[i], msg = checkValue(e); msg != "" {
				return nil, msg
			}
		}
		return &types.AttributeValueMemberL{Value: l}, ""
	case *types.AttributeValueMemberM:
		mm := make(Item, len(v.Value))
		for _, k := range slices.Sorted(maps.Keys(v.Value)) {
			var msg string
			if mm[k], msg = checkValue(v.Value[k]); msg != "" {
				return nil, msg
			}
		}
		return &types.AttributeValueMemberM{Value: mm}, ""
	}
	return v, ""
}

func hasDuplicate(s []string) bool {
	seen := make(map[string]bool, len(s))
	for _, e := range s {
		if seen[e] {
			return true
		}
		seen[e] = true
	}
	return false
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return (len(v.Value)+1)/2 + 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += (len(s)+1)/2 + 1
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 1
}
