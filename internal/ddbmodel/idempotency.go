package ddbmodel

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The idempotency of TransactWriteItems (the Developer Guide, "Amazon
// DynamoDB Transactions: How it works", Idempotency): a ClientRequestToken
// is valid for ten minutes after the first request that used it finished.
// Within them, the same request again succeeds without making any change,
// and a request that differs in any other parameter fails with an
// IdempotentParameterMismatchException. While the first request is still
// in progress, the same request fails with a
// TransactionInProgressException, which the SDK retries. A transaction
// that was cancelled leaves no trace: its token may be used again, for the
// same request or another (as DynamoDB Local 3.3.1 does; the service's
// documentation does not say).

// idempotencyWindow is how long a committed transaction's token is kept.
const idempotencyWindow = 10 * time.Minute

type tokenState struct {
	fingerprint string
	done        bool      // committed; else in progress
	finished    time.Time // when it committed
}

// tokenLog is the model's record of ClientRequestTokens.
type tokenLog struct {
	states   map[string]*tokenState
	finished []string // committed tokens, in the order they committed
}

// begin records tok for a request with this fingerprint, or reports that
// the request is a replay of a committed one (replay), or refuses it.
func (l *tokenLog) begin(tok, fingerprint string, now time.Time) (replay bool, err error) {
	l.expire(now)
	s := l.states[tok]
	switch {
	case s == nil:
		if l.states == nil {
			l.states = map[string]*tokenState{}
		}
		l.states[tok] = &tokenState{fingerprint: fingerprint}
		return false, nil
	case s.fingerprint != fingerprint:
		// DynamoDB Local's message is empty.
		return false, &types.IdempotentParameterMismatchException{Message: aws.String("")}
	case !s.done:
		return false, &types.TransactionInProgressException{Message: aws.String("The transaction with the given request token is already in progress")}
	}
	return true, nil
}

// drop forgets a token whose transaction did not commit.
func (l *tokenLog) drop(tok string) {
	if s := l.states[tok]; s != nil && !s.done {
		delete(l.states, tok)
	}
}

// finish records that tok's transaction committed at now.
func (l *tokenLog) finish(tok string, now time.Time) {
	if s := l.states[tok]; s != nil && !s.done {
		s.done, s.finished = true, now
		l.finished = append(l.finished, tok)
	}
}

// expire forgets the tokens whose window has passed.
func (l *tokenLog) expire(now time.Time) {
	n := 0
	for _, tok := range l.finished {
		s := l.states[tok]
		if s == nil || now.Sub(s.finished) < idempotencyWindow {
			break
		}
		delete(l.states, tok)
		n++
	}
	l.finished = slices.Delete(l.finished, 0, n)
}

// fingerprint encodes every parameter of a transaction but its token, so
// that two requests have one fingerprint exactly when they are the same.
func fingerprint(in *dynamodb.TransactWriteItemsInput) string {
	cp := *in
	cp.ClientRequestToken = nil
	var b strings.Builder
	encode(&b, reflect.ValueOf(cp))
	return b.String()
}

// encode writes v with its types, maps in key order, pointers followed.
func encode(b *strings.Builder, v reflect.Value) {
	switch v.Kind() {
	case reflect.Invalid:
		b.WriteString("nil")
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		if v.Kind() == reflect.Interface {
			b.WriteString(v.Elem().Type().String())
		}
		encode(b, v.Elem())
	case reflect.Struct:
		b.WriteString("{")
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				b.WriteString(f.Name + ":")
				encode(b, v.Field(i))
				b.WriteString(",")
			}
		}
		b.WriteString("}")
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(x, y reflect.Value) int { return strings.Compare(fmt.Sprint(x), fmt.Sprint(y)) })
		b.WriteString("map[")
		for _, k := range keys {
			fmt.Fprintf(b, "%q:", fmt.Sprint(k))
			encode(b, v.MapIndex(k))
			b.WriteString(",")
		}
		b.WriteString("]")
	case reflect.Slice, reflect.Array:
		b.WriteString("[")
		for i := range v.Len() {
			encode(b, v.Index(i))
			b.WriteString(",")
		}
		b.WriteString("]")
	case reflect.String:
		fmt.Fprintf(b, "%q", v.String())
	default:
		fmt.Fprintf(b, "%v", v)
	}
}
