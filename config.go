package dynamolock

import (
	"log/slog"
	"reflect"
	"regexp"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/arielsrv/dynamolock/v2/internal/clock"
	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// config is a client's configuration: the table and every [ClientOption]'s
// value, with the defaults resolved. [New] builds it (the options write
// into it, then check validates it and New fills in what is left at its
// default); nothing writes it after New returns, so it is read without a
// lock.
type config struct {
	tableName                    string
	partitionKeyName             string
	sortKeyName                  string
	sortKey                      *string // the default sort key value; nil: none
	sortKeyDeclared              bool    // WithSortKey was given
	maxObservations              int
	ownerName                    string
	leaseDuration                time.Duration
	heartbeatPeriod              time.Duration
	leaseSet, heartbeatSet       bool // WithLeaseDuration / WithHeartbeatPeriod given: errors name what the caller set
	heartbeatConcurrency         int
	heartbeatAdmission           float64
	holdLockOnServiceUnavailable bool
	clockSkewBound               time.Duration
	ttlAttribute                 string
	logger                       *slog.Logger
	meterProvider                metric.MeterProvider
	tracerProvider               trace.TracerProvider // nil: the global one
	singleWriterRegion           bool                 // WithSingleWriterRegion
	session                      bool                 // WithSession
	schema                       schema               // the item's key and TTL attribute names, from the fields above
	clock                        clock.Clock          // where the client reads time and waits (clock.go): clock.Real but in the simulation
}

// defaultConfig is the configuration of a client given no option.
func defaultConfig(tableName string) config {
	return config{
		tableName:            tableName,
		partitionKeyName:     DefaultPartitionKeyName,
		leaseDuration:        DefaultLeaseDuration,
		heartbeatPeriod:      DefaultHeartbeatPeriod,
		heartbeatConcurrency: DefaultHeartbeatConcurrency,
		heartbeatAdmission:   DefaultHeartbeatAdmission,
		maxObservations:      DefaultMaxLockObservationCacheSize,
		clock:                clock.Real,
	}
}

// resolve fills in the defaults that depend on the options (or on the
// host): the owner name, the silent logger, the schema. It runs once, after
// check.
func (c *config) resolve() {
	if c.ownerName == "" {
		c.ownerName = defaultOwnerName()
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	c.schema = schema{lockitem.Layout{PartitionKey: c.partitionKeyName, SortKey: c.sortKeyName, TTL: c.ttlAttribute}}
}

var tableNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

// check returns an *[InvalidArgumentError] for the first bad value, naming
// the option that set it. It only reads.
func (c *config) check() error {
	switch {
	case !validTable(c.tableName):
		return invalid("table name", c.tableName, tableNameRule)
	case c.partitionKeyName == "":
		return invalid("WithPartitionKeyName", c.partitionKeyName, "must not be empty")
	case c.sortKeyDeclared && c.sortKeyName == "":
		return invalid("WithSortKey name", c.sortKeyName, "must not be empty")
	case c.sortKeyDeclared && c.sortKeyName == c.partitionKeyName:
		return invalid("WithSortKey name", c.sortKeyName, "must differ from the partition key name")
	case c.sortKey != nil && (len(*c.sortKey) > lockitem.MaxSortKeyBytes || !utf8.ValidString(*c.sortKey)):
		return invalid("WithSortKey value", *c.sortKey, "must be 1 to %d bytes of UTF-8", lockitem.MaxSortKeyBytes)
	case c.maxObservations < 1 || c.maxObservations > 10_000_000:
		return invalid("WithMaxLockObservationCacheSize", c.maxObservations, "must be between 1 and 10000000")
	case !utf8.ValidString(c.ownerName):
		return invalid("WithOwnerName", c.ownerName, "must be valid UTF-8")
	case lockitem.IsOwn(c.partitionKeyName):
		return invalid("WithPartitionKeyName", c.partitionKeyName, "is an attribute the lock itself uses")
	case c.sortKeyDeclared && lockitem.IsOwn(c.sortKeyName):
		return invalid("WithSortKey name", c.sortKeyName, "is an attribute the lock itself uses")
	case c.leaseDuration <= 0:
		return invalid("WithLeaseDuration", c.leaseDuration, "must be positive")
	case c.leaseDuration < minLease:
		return tooShort("WithLeaseDuration", c.leaseDuration, minLease, 24*time.Hour, DefaultLeaseDuration, leaseFloorWhy)
	case c.heartbeatPeriod < 0:
		return invalid("WithHeartbeatPeriod", c.heartbeatPeriod, "must not be negative (0 disables heartbeats)")
	case c.heartbeatPeriod > 0 && c.heartbeatPeriod < minHeartbeatPeriod:
		return tooShort("WithHeartbeatPeriod", c.heartbeatPeriod, minHeartbeatPeriod, c.leaseDuration/2, DefaultHeartbeatPeriod,
			"each renewal is a billed write of every held lock, 20 a second at that period (0 disables heartbeats)")
	case c.heartbeatPeriod > 0 && c.leaseDuration/2 < c.heartbeatPeriod:
		return c.leaseHeartbeatMismatch()
	case c.heartbeatConcurrency < 1 || c.heartbeatConcurrency > 1024:
		return invalid("WithHeartbeatConcurrency", c.heartbeatConcurrency, "must be between 1 and 1024")
	case !(c.heartbeatAdmission >= 0 && c.heartbeatAdmission <= 1): // NaN too
		return invalid("WithHeartbeatAdmission", c.heartbeatAdmission, "must lie between 0 (off) and 1")
	case c.clockSkewBound < 0:
		return invalid("WithClockSkewBound", c.clockSkewBound, "must not be negative")
	case c.session && c.heartbeatPeriod == 0:
		return invalid("WithSession", "DisableHeartbeat", "needs heartbeats: the session is renewed by them")
	}
	if c.ttlAttribute != "" && (c.ttlAttribute == c.partitionKeyName || c.ttlAttribute == c.sortKeyName || lockitem.IsOwn(c.ttlAttribute)) {
		return invalid("WithTTLAttribute", c.ttlAttribute, "is an attribute the lock itself uses")
	}
	return nil
}

// leaseHeartbeatMismatch is the error for a lease under twice the heartbeat
// period, naming the option the caller set rather than one left at its
// default.
func (c *config) leaseHeartbeatMismatch() error {
	const why = "or locks may expire while a heartbeat is late"
	switch {
	case c.heartbeatSet && !c.leaseSet:
		return invalid("WithHeartbeatPeriod", c.heartbeatPeriod,
			"must be at most half the lease duration %s (the default; set a longer one with WithLeaseDuration), %s", c.leaseDuration, why)
	case c.leaseSet && !c.heartbeatSet:
		return invalid("WithLeaseDuration", c.leaseDuration,
			"must be at least twice the heartbeat period %s (the default; set a shorter one with WithHeartbeatPeriod), %s", c.heartbeatPeriod, why)
	}
	return invalid("WithLeaseDuration", c.leaseDuration, "must be at least twice the WithHeartbeatPeriod %s, %s", c.heartbeatPeriod, why)
}

// heartbeatPeriodText describes the heartbeat period for an error about an
// option that must be at least twice it.
func (c *config) heartbeatPeriodText() string {
	if c.heartbeatSet {
		return "the WithHeartbeatPeriod " + c.heartbeatPeriod.String()
	}
	return "the heartbeat period " + c.heartbeatPeriod.String() + " (the default; WithHeartbeatPeriod sets it)"
}

// isNil reports whether v is nil or a typed nil pointer (a nil
// *dynamodb.Client in an interface).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Func, reflect.Slice, reflect.Chan:
		return rv.IsNil()
	}
	return false
}
