package ddbmodel

import (
	"bytes"
	"math/big"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

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

// sizeOf is DynamoDB's size(): the length of a string (in UTF-16 code
// units, as DynamoDB Local counts: "é" is 1, an emoji 2), a binary, a set,
// a list or a map. Numbers, booleans and nulls have none.
func sizeOf(v types.AttributeValue) (int, bool) {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(utf16.Encode([]rune(v.Value))), true
	case *types.AttributeValueMemberB:
		return len(v.Value), true
	case *types.AttributeValueMemberSS:
		return len(v.Value), true
	case *types.AttributeValueMemberNS:
		return len(v.Value), true
	case *types.AttributeValueMemberBS:
		return len(v.Value), true
	case *types.AttributeValueMemberL:
		return len(v.Value), true
	case *types.AttributeValueMemberM:
		return len(v.Value), true
	}
	return 0, false
}

// typeName is the name DynamoDB gives a value's type in its messages.
func typeName(v types.AttributeValue) string {
	switch v.(type) {
	case *types.AttributeValueMemberS:
		return "S"
	case *types.AttributeValueMemberN:
		return "N"
	case *types.AttributeValueMemberB:
		return "B"
	case *types.AttributeValueMemberSS:
		return "SS"
	case *types.AttributeValueMemberNS:
		return "NS"
	case *types.AttributeValueMemberBS:
		return "BS"
	case *types.AttributeValueMemberL:
		return "L"
	case *types.AttributeValueMemberM:
		return "M"
	case *types.AttributeValueMemberBOOL:
		return "BOOL"
	case *types.AttributeValueMemberNULL:
		return "NULL"
	}
	return "?"
}

// longTypeName is the name DynamoDB gives a value's type in an ADD
// operand's message.
func longTypeName(v types.AttributeValue) string {
	switch v.(type) {
	case *types.AttributeValueMemberS:
		return "STRING"
	case *types.AttributeValueMemberN:
		return "NUMBER"
	case *types.AttributeValueMemberB:
		return "BINARY"
	case *types.AttributeValueMemberBOOL:
		return "BOOLEAN"
	case *types.AttributeValueMemberNULL:
		return "NULL"
	case *types.AttributeValueMemberL:
		return "LIST"
	case *types.AttributeValueMemberM:
		return "MAP"
	}
	return typeName(v)
}
