package dynamolock

import (
	"context"
	"sync"
)

// keyGates lets callers take turns per key: one at a time on a key, none
// waiting on another key, and every wait ending with its context.
type keyGates struct {
	mu sync.Mutex
	m  map[string]*keyGate
}

type keyGate struct {
	turn chan struct{} // capacity one: holding the turn is having sent
	refs int           // callers holding or waiting for the turn
}

// enter waits for key's turn until ctx ends, and returns the function that
// gives the turn back.
func (g *keyGates) enter(ctx context.Context, key string) (leave func(), err error) {
	g.mu.Lock()
	if g.m == nil {
		g.m = make(map[string]*keyGate)
	}
	gate := g.m[key]
	if gate == nil {
		gate = &keyGate{turn: make(chan struct{}, 1)}
		g.m[key] = gate
	}
	gate.refs++
	g.mu.Unlock()
	select {
	case gate.turn <- struct{}{}:
		return func() {
			<-gate.turn
			g.drop(key, gate)
		}, nil
	case <-ctx.Done():
		g.drop(key, gate)
		return nil, context.Cause(ctx)
	}
}

func (g *keyGates) drop(key string, gate *keyGate) {
	g.mu.Lock()
	gate.refs--
	if gate.refs == 0 {
		delete(g.m, key)
	}
	g.mu.Unlock()
}
