package dynamolock

import (
	"slices"
	"sync"
	"sync/atomic"
)

// wakeups lets acquisitions waiting on a key that this client holds learn
// at once that the lock ended here (released or lost), instead of at their
// next poll. It changes nothing for waiters in other processes: they still
// poll, and the woken waiter still has to win the same conditional write.
type wakeups struct {
	mu sync.Mutex
	m  map[string]*wakeup
	// ended counts the locks that ended here, on any key: an acquisition
	// notes it before each call, so that it can tell whether the holder
	// here that the answer named may have ended since.
	ended atomic.Uint64
}

type wakeup struct {
	ch     chan struct{} // closed when a lock on the key ends here
	refs   int
	notify []chan<- struct{} // also told, without blocking (an acquisition waiting on several keys)
}

// watch returns a channel closed when a lock on key ends in this client,
// and the function that stops watching. notify, when not nil, is also sent
// to (without blocking) when that happens, so that one wait can watch
// several keys.
func (w *wakeups) watch(key string, notify chan<- struct{}) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = make(map[string]*wakeup)
	}
	u := w.m[key]
	if u == nil {
		u = &wakeup{ch: make(chan struct{})}
		w.m[key] = u
	}
	u.refs++
	if notify != nil {
		u.notify = append(u.notify, notify)
	}
	return u.ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if i := slices.Index(u.notify, notify); notify != nil && i >= 0 {
			u.notify = slices.Delete(u.notify, i, i+1)
		}
		if u.refs--; u.refs == 0 && w.m[key] == u {
			delete(w.m, key)
		}
	}
}

// wake wakes every acquisition watching key.
func (w *wakeups) wake(key string) {
	w.ended.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if u := w.m[key]; u != nil {
		close(u.ch)
		for _, n := range u.notify {
			select {
			case n <- struct{}{}:
			default:
			}
		}
		delete(w.m, key)
	}
}
