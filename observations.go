package dynamolock

import (
	"sync"
	"time"
)

// observations remembers, per key, the record version number this client
// last saw in another owner's item and when it first saw it. It lets
// FailIfLocked take over a dead owner's lock across calls. Bounded: when
// full, an arbitrary entry is dropped (it only delays a takeover).
type observations struct {
	mu  sync.Mutex
	m   map[string]observation
	max int
}

type observation struct {
	rvn  string
	seen time.Time
}

// observe records that key carried rvn at now and returns when this client
// first saw that rvn on key.
func (o *observations) observe(key, rvn string, now time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ob, ok := o.m[key]; ok && ob.rvn == rvn {
		return ob.seen
	}
	if len(o.m) >= o.max {
		for k := range o.m {
			delete(o.m, k)
			break
		}
	}
	o.m[key] = observation{rvn: rvn, seen: now}
	return now
}

func (o *observations) forget(key string) {
	o.mu.Lock()
	delete(o.m, key)
	o.mu.Unlock()
}
