package bench

// Goals reported beside the figures of a run, in the Summary and in the
// sections: what the library promises or aims at, so that a reader sees at
// once whether this run met it.
const (
	// AcquireLatencyGoal and ReleaseLatencyGoal: acquire and release p50 ÷
	// raw conditional UpdateItem p50. Acquire's is the looser: its write
	// also carries the fencing token, which costs DynamoDB Local about as
	// much as the rest of the margin.
	AcquireLatencyGoal = 1.10
	ReleaseLatencyGoal = 1.05
	// HeapPerLockTarget: live heap per held lock, in bytes.
	HeapPerLockTarget = 500
	// HeapAtN is the fixed N at which the heap per lock is always reported
	// (when the run held it), beside the largest N held without loss.
	HeapAtN = 1000
	// BoundTarget: locks held with zero losses ÷ the backend bound (raw
	// conditional writes per second × lease, both from the same run).
	BoundTarget = 0.90
	// HeldGoal: locks one client holds through the whole hold with zero
	// losses, at lease 3 s and heartbeat 1 s.
	HeldGoal = 5000
)
