package dynamolock

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// unreachableWait bounds how long an acquisition keeps retrying calls that
// cannot connect to DynamoDB at all, as long as DynamoDB never answered
// the client: past it, the first such failure ends the acquisition with a
// *ConnectionError. It does not depend on the lease, so a wrong endpoint is
// reported in seconds, not after a lease (nor never, with a context that
// does not end). See unreachable.
const unreachableWait = 5 * time.Second

// keySchemaMessages are the texts with which DynamoDB (and DynamoDB Local)
// reject a key that does not fit the table's key schema.
var keySchemaMessages = []string{
	"The provided key element does not match the schema",
	"One of the required keys was not given a value",
	"Type mismatch for key",
	"The number of conditions on the keys is invalid",
	"Missing the key",
	"Query condition missed key schema element",
	"Condition parameter type does not match schema type",
}

// Errors are classified where a call fails, not checked once at New: New
// makes no call (and has no context), a check at New would cost every
// program a DescribeTable and miss a table deleted or an endpoint lost
// later, while classification costs nothing until a call fails and covers
// every call. Only a key schema error pays one DescribeTable, to say what
// the table has. CreateTableIfNotExists is the explicit check at start-up.
//
// classifyAs turns the error of the DynamoDB call op into one that says
// what to do: a missing table matches [ErrTableNotFound] naming the table
// and endpoint, a key the table rejects becomes a *[KeySchemaError] (with
// one DescribeTable, on this error path only, to tell what the table has),
// and a failure to connect or to speak TLS a *[ConnectionError] naming the
// endpoint and op. The SDK's error stays wrapped, so errors.As to its types
// still works. Other errors come back unchanged, but for a write whose
// earlier attempt's outcome is unknown (unknown): that is said with
// mayHaveLandedError.
func (c *Client) classifyAs(ctx context.Context, op string, err error, unknown bool) error {
	err = c.classifyErr(ctx, op, err)
	if unknown && !mayHaveLanded(err) {
		err = &mayHaveLandedError{err: err}
	}
	return err
}

func (c *Client) classifyErr(ctx context.Context, op string, err error) error {
	if err == nil || alreadyClassified(err) {
		return err
	}
	var rnf *types.ResourceNotFoundException
	if errors.As(err, &rnf) {
		return c.tableNotFound(err)
	}
	if reason := foreignError(err); reason != "" {
		return &ConnectionError{Endpoint: c.endpointOf(err), Op: op, Reason: reason, Err: err, answered: c.answered.Load()}
	}
	if te := throttlingError(op, err); te != nil {
		return te
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if ae.ErrorCode() == "ValidationException" && isKeySchemaMessage(ae.ErrorMessage()) {
			return c.keySchemaError(c.describeKeySchema(ctx), err)
		}
		return flat(err)
	}
	reason := connectionFailure(err)
	if reason == "" {
		reason = notDynamoDB(err)
	}
	if reason != "" {
		return &ConnectionError{Endpoint: c.endpointOf(err), Op: op, Reason: reason, Err: err, answered: c.answered.Load()}
	}
	return flat(err)
}

// answer records that DynamoDB answered a call whose error is err (nil, or
// an error DynamoDB sent): its endpoint is right, and a later failure to
// reach it is an outage (see unreachable).
func (c *Client) answer(err error) {
	var ae smithy.APIError
	if (err == nil || errors.As(err, &ae) && foreignError(err) == "") && !c.answered.Load() {
		c.answered.Store(true)
	}
}

// notDynamoDB names why err shows an answer that did not come from
// DynamoDB: an HTTP answer whose body the SDK could not read as DynamoDB's
// JSON (an HTML page, say); "" otherwise. A proxy's error page in front of
// DynamoDB is one too: so, unlike connectionFailure, it does not say that
// the request never reached DynamoDB.
func notDynamoDB(err error) string {
	var de *smithy.DeserializationError
	if !errors.As(err, &de) {
		return ""
	}
	if s := httpStatus(err); s != 0 {
		return fmt.Sprintf("%s: it answered HTTP %d with a body that is not DynamoDB's JSON", reasonNotDynamoDBPrefix, s)
	}
	return reasonNotDynamoDBPrefix + ": its answer is not DynamoDB's JSON"
}

// foreignError names why err, an error the SDK read from an HTTP answer,
// did not come from DynamoDB; "" otherwise. DynamoDB names the type of
// every error it returns (in the body's __type, or a header), so an error
// the SDK could not name ("UnknownError": a JSON body without a type, a
// web framework's {"message": "Not Found"}) is another server's; and
// DynamoDB answers a request it refuses with HTTP 400 (413 for one too
// large), never with another 4xx or a 3xx (a 404, a 405, a redirect), so
// those are another server's too, whatever their body. A 5xx may be
// DynamoDB's own failure (or a proxy's in front of it) and stays a server
// error, retried.
func foreignError(err error) string {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return ""
	}
	status := httpStatus(err)
	switch {
	case ae.ErrorCode() == "UnknownError" && status != 0:
		return fmt.Sprintf("%s: it answered HTTP %d with an error that names no DynamoDB error type", reasonNotDynamoDBPrefix, status)
	case status >= 300 && status < 500 && status != 400 && status != 413 && status != 429:
		return fmt.Sprintf("%s: it answered HTTP %d, which DynamoDB never does", reasonNotDynamoDBPrefix, status)
	}
	return ""
}

func alreadyClassified(err error) bool {
	var kse *KeySchemaError
	var ce *ConnectionError
	var te *ThrottlingError
	return errors.Is(err, ErrTableNotFound) || errors.As(err, &kse) || errors.As(err, &ce) || errors.As(err, &te)
}

func (c *Client) tableNotFound(err error) error {
	if err == nil {
		return fmt.Errorf("%w: %q at %s", ErrTableNotFound, c.cfg.tableName, c.endpointOf(nil))
	}
	advice := "create it with CreateTableIfNotExists, or check the table name, region and endpoint"
	if _, isARN := parseTableARN(c.cfg.tableName); isARN {
		advice = "create it by name in the account and Region its ARN names, or check the ARN and the endpoint"
	}
	return fmt.Errorf("%w: %q at %s (%s): %w", ErrTableNotFound, c.cfg.tableName, c.endpointOf(err), advice, flat(err))
}

func isKeySchemaMessage(msg string) bool {
	for _, m := range keySchemaMessages {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// keySchemaError reports that the table's key schema found (nil: not known)
// is not this client's; err is DynamoDB's rejection, if any.
func (c *Client) keySchemaError(found []KeyAttribute, err error) *KeySchemaError {
	e := &KeySchemaError{Table: c.cfg.tableName, Expected: c.keySchema(), Found: found, Err: err}
	if c.cfg.sortKey != nil {
		e.sortKeyValue = *c.cfg.sortKey
	}
	return e
}

// keySchema is the key schema this client reads and writes.
func (c *Client) keySchema() []KeyAttribute {
	keys := []KeyAttribute{{Name: c.cfg.partitionKeyName, KeyType: types.KeyTypeHash, Type: types.ScalarAttributeTypeS}}
	if c.cfg.sortKeyDeclared {
		keys = append(keys, KeyAttribute{Name: c.cfg.sortKeyName, KeyType: types.KeyTypeRange, Type: types.ScalarAttributeTypeS})
	}
	return keys
}

// describeKeySchema reads the table's key schema, or returns nil when the
// client cannot DescribeTable or the call fails.
func (c *Client) describeKeySchema(ctx context.Context) []KeyAttribute {
	if !c.canDescribe() || ctx.Err() != nil {
		return nil
	}
	out, err := c.describeTable(ctx, "DescribeTable", c.cfg.tableName)
	if err != nil || out.Table == nil {
		return nil
	}
	return tableKeySchema(out.Table)
}

// tableKeySchema lists a table's key attributes, partition key first, with
// their types.
func tableKeySchema(t *types.TableDescription) []KeyAttribute {
	typeOf := make(map[string]types.ScalarAttributeType, len(t.AttributeDefinitions))
	for _, d := range t.AttributeDefinitions {
		typeOf[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	keys := make([]KeyAttribute, 0, len(t.KeySchema))
	for _, k := range t.KeySchema {
		name := aws.ToString(k.AttributeName)
		ka := KeyAttribute{Name: name, KeyType: k.KeyType, Type: typeOf[name]}
		if k.KeyType == types.KeyTypeHash {
			keys = append([]KeyAttribute{ka}, keys...)
		} else {
			keys = append(keys, ka)
		}
	}
	return keys
}

// sameKeySchema reports whether two key schemas have the same attributes,
// roles and (where both are known) types.
func sameKeySchema(a, b []KeyAttribute) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].KeyType != b[i].KeyType || (a[i].Type != "" && b[i].Type != "" && a[i].Type != b[i].Type) {
			return false
		}
	}
	return true
}

// connectionFailure names why err means that no exchange with DynamoDB
// took place: a refused, unroutable or failed dial, an unresolvable host,
// a failed TLS handshake, or no endpoint to call; "" otherwise. An error on
// an established connection (a reset, a timeout waiting for the answer) is
// not one: the call may have reached DynamoDB.
func connectionFailure(err error) string {
	var dns *net.DNSError
	var rhe tls.RecordHeaderError
	var cve *tls.CertificateVerificationError
	var uae x509.UnknownAuthorityError
	var he x509.HostnameError
	var cie x509.CertificateInvalidError
	var alert tls.AlertError
	var op *net.OpError
	switch {
	case errors.Is(err, http.ErrSchemeMismatch):
		return reasonScheme
	case errors.As(err, &cve), errors.As(err, &uae), errors.As(err, &he), errors.As(err, &cie):
		return reasonCertificate
	case errors.As(err, &rhe), errors.As(err, &alert):
		return reasonTLS
	case errors.As(err, &dns) && dns.IsNotFound:
		return reasonNoSuchHost
	case errors.As(err, &dns):
		return reasonDial // a resolver that did not answer: may pass
	case errors.Is(err, syscall.ECONNREFUSED):
		return reasonRefused
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return reasonUnreachable
	case errors.As(err, &op) && op.Op == "dial":
		return reasonDial
	case strings.Contains(err.Error(), "failed to resolve service endpoint"):
		return reasonNoEndpoint
	}
	return ""
}

// neverSent reports whether err shows that a request never reached
// DynamoDB: no connection was made, or no endpoint was found.
func neverSent(err error) bool { return connectionFailure(err) != "" }

// endpointOf names where the client sends its calls: the URL in err if the
// HTTP client reported one, else the SDK client's BaseEndpoint, else its
// region.
func (c *Client) endpointOf(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
			return u.Scheme + "://" + u.Host
		}
	}
	if opts, ok := c.sdkOptions(); ok {
		if ep := aws.ToString(opts.BaseEndpoint); ep != "" {
			return ep
		}
		if opts.Region != "" {
			return "the DynamoDB endpoint of region " + opts.Region
		}
	}
	return "the DynamoDB client's endpoint"
}

// unreachable reports whether an acquisition that has been going for
// waited should stop retrying err. This is the one policy of every call
// that waits (an acquisition of any kind: AcquireLock, Do, Campaign,
// AcquireLocks, a semaphore, a read/write lock) for a DynamoDB it cannot
// reach or speak to:
//
//   - before DynamoDB ever answered the client, the endpoint may be wrong:
//     a configuration mistake ends the call at once, and a refused,
//     unroutable or timed-out connection once the call has waited
//     unreachableWait;
//   - once DynamoDB has answered the client, the endpoint is right: any
//     failure to reach it is an outage, retried (once a refresh period)
//     for as long as the call's wait lasts (its context, or the deadline
//     of WithAdditionalTimeToWaitForLock or of AcquireLock's v2 bound),
//     so that a leader loop outlasts a partition and leads after it heals.
//
// The answer is carried by the *ConnectionError itself (classified with
// what the client knew then), so that every caller gets the same policy
// from err alone.
func unreachable(err error, waited time.Duration) bool {
	var ce *ConnectionError
	return errors.As(err, &ce) && !ce.answered && (ce.permanent() || waited >= unreachableWait)
}
