package reliability

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

// Event types a worker logs, one JSON object per line.
const (
	EvSection    = "section"     // one critical section: one acquisition of one key
	EvGuarded    = "guarded"     // a guarded increment of the key's counter
	EvUnguarded  = "unguarded"   // an unguarded increment of the key's shadow counter
	EvStaleDone  = "stale_done"  // a loss check found the lease run out but Done still open
	EvAcquireErr = "acquire_err" // an acquisition that failed
	EvStats      = "stats"       // the client's counters at exit
)

// Results of a write.
const (
	ResultOK      = "ok"      // DynamoDB acknowledged it
	ResultFailed  = "failed"  // DynamoDB refused it (transaction cancelled): not applied
	ResultUnknown = "unknown" // no answer (timeout, lost response, 5xx): may or may not have applied
)

// Event is one line of a worker's log. Times are Unix nanoseconds from the
// wall clock, comparable across processes on one host.
type Event struct {
	Type   string `json:"t"`
	Proc   int    `json:"p"`
	Worker int    `json:"w"`
	Key    string `json:"k,omitempty"`
	Owner  string `json:"o,omitempty"`
	Token  uint64 `json:"tok,omitempty"`

	// Sections.
	AcquireStart int64  `json:"as,omitempty"` // AcquireLock called
	Acquired     int64  `json:"aq,omitempty"` // AcquireLock returned the lock
	Start        int64  `json:"s,omitempty"`
	End          int64  `json:"e,omitempty"`
	Valid        bool   `json:"v,omitempty"`  // at End the lease had not run out and Done was open
	Lost         string `json:"l,omitempty"`  // the loss cause when Done closed during the section
	Released     bool   `json:"r,omitempty"`  // the release succeeded
	ReleaseErr   string `json:"re,omitempty"` // why it did not

	// Writes.
	Op         string `json:"op,omitempty"` // unique id of the write
	ReadCall   int64  `json:"rc,omitempty"`
	ReadReturn int64  `json:"rr,omitempty"`
	From       int64  `json:"f"`
	To         int64  `json:"to,omitempty"`
	Call       int64  `json:"c,omitempty"`
	Return     int64  `json:"ret,omitempty"`
	Result     string `json:"res,omitempty"`
	Err        string `json:"err,omitempty"`

	// Stale Done checks.
	At int64 `json:"at,omitempty"`

	// Stats.
	Stats *WorkerStats `json:"stats,omitempty"`
}

// WorkerStats are a worker process's totals.
type WorkerStats struct {
	HeartbeatsSent  uint64            `json:"hb"`
	HeartbeatErrors uint64            `json:"hbe"`
	LocksLost       uint64            `json:"lost"`
	DynamoDBCalls   uint64            `json:"calls"`
	Injected        map[string]uint64 `json:"inj,omitempty"` // service errors injected, by kind
	CloseErr        string            `json:"closeErr,omitempty"`
}

// eventLog appends events to a file; safe for concurrent use.
type eventLog struct {
	mu sync.Mutex
	f  *os.File
	w  *bufio.Writer
	n  int
}

func createLog(path string) (*eventLog, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &eventLog{f: f, w: bufio.NewWriterSize(f, 64<<10)}, nil
}

func (l *eventLog) add(e Event) {
	b, err := json.Marshal(e)
	if err != nil {
		panic(err) // only plain fields: cannot happen
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Write(b)
	l.w.WriteByte('\n')
	if l.n++; l.n%64 == 0 {
		l.w.Flush()
	}
}

func (l *eventLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.w.Flush(); err != nil {
		return err
	}
	return l.f.Close()
}

// readLog reads a worker's event log.
func readLog(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var evs []Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return evs, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		evs = append(evs, e)
	}
	return evs, sc.Err()
}
