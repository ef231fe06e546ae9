package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/arielsrv/dynamolock/v2"
)

// explain returns err as lock-example reports it: one line that says what
// went wrong and what to do, in the terms of the command line (flags and
// environment variables), not the SDK's. With --verbose the caller also
// prints the error itself (see errorLines).
func explain(cfg *config, db *dynamodb.Client, err error) string {
	create := "lock-example create-table"
	if cfg.table != defaultTable {
		create = fmt.Sprintf("lock-example --table %s create-table", cfg.table)
	}
	where := "in region " + db.Options().Region
	if ep := aws.ToString(db.Options().BaseEndpoint); ep != "" {
		where = "at " + ep
	}
	var (
		missing *types.ResourceNotFoundException
		schema  *dynamolock.KeySchemaError
		api     smithy.APIError
		resp    *awshttp.ResponseError
	)
	switch {
	case (errors.Is(err, dynamolock.ErrTableNotFound) || errors.As(err, &missing)) && strings.HasPrefix(cfg.table, "arn:"):
		// A table named by its ARN (one of another account, say) is
		// created by its name, from the account that owns it.
		return fmt.Sprintf("table %q not found %s: create it by name in the account and region its ARN names "+
			"(`lock-example --table NAME create-table` there, or deploy/), or check --table and the endpoint", cfg.table, where)
	case errors.Is(err, dynamolock.ErrTableNotFound) || errors.As(err, &missing):
		return fmt.Sprintf("table %q not found %s: create it with `%s`, or check --table, the endpoint and the region",
			cfg.table, where, create)
	case errors.As(err, &schema) && schema.Found != nil:
		return keySchemaText(cfg, schema, create)
	case errors.Is(err, context.Canceled):
		return "interrupted before DynamoDB answered"
	}
	if reason := connectionFailure(err); reason != "" {
		return fmt.Sprintf("cannot reach DynamoDB %s (%s): %s", where, reason, endpointAdvice())
	}
	if errors.As(err, &api) {
		switch code := api.ErrorCode(); code {
		case "UnrecognizedClientException", "InvalidSignatureException", "MissingAuthenticationTokenException",
			"IncompleteSignatureException", "ExpiredTokenException", "InvalidClientTokenId", "SignatureDoesNotMatch":
			return fmt.Sprintf("DynamoDB %s refused the credentials (%s): check AWS_PROFILE, AWS_ACCESS_KEY_ID and "+
				"AWS_SECRET_ACCESS_KEY, or the role lock-example runs with", where, code)
		case "AccessDeniedException":
			return fmt.Sprintf("not allowed %s (%s): the credentials need the IAM permissions lock-example's README "+
				"lists for this command on table %q", where, oneLine(api.ErrorMessage()), cfg.table)
		case "ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded":
			return fmt.Sprintf("DynamoDB %s throttled the calls (%s): try again later, or raise the capacity of table %q",
				where, code, cfg.table)
		}
	}
	if errors.As(err, &resp) && !errors.As(err, &api) {
		// An HTTP answer that is not one of DynamoDB's errors: another server.
		return fmt.Sprintf("the endpoint %s answered HTTP %d, and not as DynamoDB does: %s",
			strings.TrimPrefix(where, "at "), resp.HTTPStatusCode(), endpointAdvice())
	}
	var notJSON *smithy.DeserializationError
	if errors.As(err, &notJSON) {
		return fmt.Sprintf("the endpoint %s did not answer as DynamoDB does: %s", strings.TrimPrefix(where, "at "), endpointAdvice())
	}
	return oneLine(err.Error())
}

// connectionFailure names why a call could not reach the endpoint, or "".
func connectionFailure(err error) string {
	var (
		ce   *dynamolock.ConnectionError
		dns  *net.DNSError
		cert *x509.UnknownAuthorityError
		host x509.HostnameError
		rec  tls.RecordHeaderError
		op   *net.OpError
	)
	var resp *awshttp.ResponseError
	switch {
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"): // net/http's, untyped
		return "it answered plain HTTP to https://; use http://, or its TLS port"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dns):
		return "host name " + dns.Name + " not found"
	case errors.As(err, &cert), errors.As(err, &host):
		return "its TLS certificate was not accepted"
	case errors.As(err, &rec):
		return "it answered plain HTTP to https://"
	case errors.As(err, &op) && op.Timeout():
		return "connection timed out"
	case errors.As(err, &op) && op.Op == "dial":
		return "could not connect"
	case errors.As(err, &ce) && !errors.As(err, new(*smithy.DeserializationError)):
		return ce.Reason
	case errors.As(err, &resp) && resp.HTTPStatusCode() == 0:
		return "no answer" // the request could not be sent
	}
	return ""
}

// endpointAdvice says where the endpoint came from, to check it.
func endpointAdvice() string {
	_, name, err := endpointFromEnv(os.Getenv)
	switch {
	case err != nil, name == "":
		return "check AWS_REGION (or the profile's region) and the network, or set DYNAMODB_ENDPOINT for DynamoDB Local"
	case strings.HasPrefix(name, "AWS_"):
		return "check " + name + " (or set AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true for DynamoDB in the region), and that DynamoDB listens there"
	}
	return "check " + name + ", and that DynamoDB (or DynamoDB Local) listens there"
}

// keySchemaText is explain's text for a table keyed otherwise than the
// flags say. The library's advice names its Go options; say it with flags.
func keySchemaText(cfg *config, schema *dynamolock.KeySchemaError, create string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table %q is not keyed as lock-example expects: it uses %s; the table has %s",
		cfg.table, keyNames(schema.Expected), keyNames(schema.Found))
	typed := false
	for _, k := range schema.Found {
		if k.Type != "" && k.Type != types.ScalarAttributeTypeS {
			typed = true
			role := "partition key"
			if k.KeyType == types.KeyTypeRange {
				role = "sort key"
			}
			fmt.Fprintf(&b, "; the table's %s %q is of type %s, expected S", role, k.Name, k.Type)
		}
	}
	if typed {
		fmt.Fprintf(&b, "; lock keys are strings: use a table whose key attributes are of type S (`%s` makes one under another --table name)", create)
	} else {
		b.WriteString("; set --partition-key-name and --sort-key NAME=VALUE to match it, or use another --table")
	}
	return b.String()
}

// errorLines is what lock-example prints for err: explain's line, and
// with --verbose the error itself, on one more line.
func errorLines(cfg *config, db *dynamodb.Client, err error) string {
	s := explain(cfg, db, err)
	if full := oneLine(err.Error()); cfg.verbose && full != s {
		s += "\nlock-example: the error was: " + full
	}
	return s
}

// explain is errorLines for the run's client.
func (r *runner) explain(err error) string { return errorLines(r.cfg, r.tap.Client, err) }

// errText is explain's one line for the run's client, for a message that
// says more around it.
func (r *runner) errText(err error) string { return explain(r.cfg, r.tap.Client, err) }

// oneLine joins the lines of a message (errors.Join makes several).
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}
