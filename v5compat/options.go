package dynamolock

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	native "github.com/arielsrv/dynamolock/v2"
)

// AcquireLockOption configures one [Client.AcquireLock]. It is the root
// package's type, so the engine's own acquisition options
// (native.WithFairness, native.WithLockLease, ...) may be given too.
type AcquireLockOption = native.AcquireLockOption

// WithData stores b in the lock's item (when the item has no data yet,
// unless [ReplaceData] is given too).
func WithData(b []byte) AcquireLockOption { return native.WithData(b) }

// ReplaceData makes [WithData]'s content replace the item's data.
func ReplaceData() AcquireLockOption { return native.ReplaceData() }

// FailIfLocked returns at once with a *[LockNotGrantedError] when a live
// owner holds the lock, instead of waiting. A holder this client has seen
// leave the item unchanged for a full lease is dead: a FailIfLocked
// acquisition tried again after that takes the lock over (v5 never takes
// it while the stale item stays).
func FailIfLocked() AcquireLockOption { return native.FailIfLocked() }

// WithDeleteLockOnRelease makes the lock's release delete its item, rather
// than keep it marked released.
func WithDeleteLockOnRelease() AcquireLockOption { return native.WithDeleteLockOnRelease() }

// WithRefreshPeriod sets how often a waiting acquisition polls the item.
// Default: 1s; 0 is the default, as in v5. Otherwise it must be at least
// 1ms: the acquisition refuses a shorter one, such as
// WithRefreshPeriod(100), 100ns (did you mean 100*time.Millisecond?), and
// a negative one, which v5 reads as the default.
func WithRefreshPeriod(d time.Duration) AcquireLockOption {
	if d == 0 {
		d = v5Default
	}
	return native.WithRefreshPeriod(d)
}

// v5Default is v5's default refresh period and additional time to wait
// for a lock, which it uses for a value of 0.
const v5Default = time.Second

// WithAdditionalTimeToWaitForLock sets how long, beyond the holder's
// lease, an acquisition waits before giving up. Default: 1s; 0 is the
// default, as in v5. Otherwise it must be at least 1ms: the acquisition
// refuses a shorter one, such as WithAdditionalTimeToWaitForLock(5), 5ns
// (did you mean 5*time.Second?), and a negative one, which v5 reads as
// the default.
func WithAdditionalTimeToWaitForLock(d time.Duration) AcquireLockOption {
	if d == 0 {
		d = v5Default
	}
	return native.WithAdditionalTimeToWaitForLock(d)
}

// WithAdditionalAttributes stores attr in the lock's item beside the
// lock's own attributes, merged with those the item already has. The
// lock's own names are refused.
func WithAdditionalAttributes(attr map[string]types.AttributeValue) AcquireLockOption {
	return native.WithAdditionalAttributes(attr)
}

// WithSessionMonitor runs callback once, in its own goroutine, when
// safeTime has passed since the lock's last successful acquire or
// heartbeat, so that the holder can stop its work before the lease runs
// out; callback may be nil (then only [Lock.IsAlmostExpired] tells). It
// never runs after the lock was released or lost. A good safeTime lies
// between the heartbeat period and the lease.
func WithSessionMonitor(safeTime time.Duration, callback func()) AcquireLockOption {
	return native.WithSessionMonitor(safeTime, callback)
}

// ReleaseLockOption configures one [Client.ReleaseLock].
type ReleaseLockOption = native.ReleaseLockOption

// WithDeleteLock makes the release delete the item (true) or keep it,
// marked released (false), whatever the acquisition chose.
func WithDeleteLock(deleteLock bool) ReleaseLockOption { return native.WithDeleteLock(deleteLock) }

// WithDataAfterRelease writes data into the item the release keeps.
func WithDataAfterRelease(data []byte) ReleaseLockOption {
	return native.WithDataAfterRelease(data)
}

// SendHeartbeatOption configures one [Client.SendHeartbeat].
type SendHeartbeatOption = native.SendHeartbeatOption

// DeleteData removes the item's data with the heartbeat.
func DeleteData() SendHeartbeatOption { return native.DeleteData() }

// ReplaceHeartbeatData replaces the item's data with the heartbeat.
func ReplaceHeartbeatData(data []byte) SendHeartbeatOption {
	return native.ReplaceHeartbeatData(data)
}

// HeartbeatRetries retries a heartbeat that failed for a reason other than
// the lock being lost up to retries more times, wait apart.
func HeartbeatRetries(retries int, wait time.Duration) SendHeartbeatOption {
	return native.HeartbeatRetries(retries, wait)
}

// UnsafeMatchOwnerOnly conditions the heartbeat on the owner name only,
// not on the record version number: safe only when owner names are unique
// per process. It never renews a later acquisition of the key by this
// client (another fencing token).
func UnsafeMatchOwnerOnly() SendHeartbeatOption { return native.UnsafeMatchOwnerOnly() }

// CreateTableOption configures one [Client.CreateTable].
type CreateTableOption = native.CreateTableOption

// WithCustomPartitionKeyName names the new table's partition key. Default:
// "key", whatever the client's partition key name, as in v5.
func WithCustomPartitionKeyName(s string) CreateTableOption {
	return native.WithCustomPartitionKeyName(s)
}

// WithSortKeyName gives the new table a string sort key of that name.
// Default: none.
func WithSortKeyName(s string) CreateTableOption { return native.WithSortKeyName(s) }

// WithTags tags the new table.
func WithTags(tags []types.Tag) CreateTableOption { return native.WithTags(tags) }

// WithProvisionedThroughput bills the new table by provisioned
// throughput instead of per request.
func WithProvisionedThroughput(provisionedThroughput *types.ProvisionedThroughput) CreateTableOption {
	return native.WithProvisionedThroughput(provisionedThroughput)
}
