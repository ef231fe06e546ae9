package faults

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Errors as the SDK hands them to the caller, for test doubles that answer
// without HTTP (the public dynamolocktest package, the simulation): each is
// wrapped exactly as the SDK wraps the same failure, so that code written
// against the SDK (errors.As to the SDK's types, the lock library's error
// classification) cannot tell the double from DynamoDB.

// RefusedConnection returns the error the SDK returns for op when no
// connection to DynamoDB can be made (here: refused by the host, as for an
// endpoint that is down or cut off): an *smithy.OperationError around an
// *awshttp.ResponseError (HTTP status 0) around a
// *smithyhttp.RequestSendError around the dial's *net.OpError. It matches
// syscall.ECONNREFUSED. endpoint is the URL the request was posted to
// ("" for a placeholder); the lock library names it in its
// *ConnectionError. Nothing was sent: the request did not land.
func RefusedConnection(op, endpoint string) error {
	return sendError(op, endpoint, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})
}

// sendError wraps a transport error of op, posting to endpoint, as the SDK
// does.
func sendError(op, endpoint string, err error) error {
	if endpoint == "" {
		endpoint = "http://dynamodb.faults.invalid/"
	}
	conn := &url.Error{Op: "Post", URL: endpoint, Err: err}
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op, Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{Header: http.Header{}, Body: http.NoBody}},
			Err:      &smithyhttp.RequestSendError{Err: conn},
		},
	}}
}

// APIError wraps err, an error DynamoDB answered op with (a
// *types.ConditionalCheckFailedException, a ValidationException, ...), as
// the SDK hands it to the caller: an *smithy.OperationError around an
// *awshttp.ResponseError carrying the HTTP status (500 for a server fault,
// else 400) and requestID. nil stays nil.
func APIError(op, requestID string, err error) error {
	if err == nil {
		return nil
	}
	status := http.StatusBadRequest
	if ae, ok := err.(smithy.APIError); ok && ae.ErrorFault() == smithy.FaultServer {
		status = http.StatusInternalServerError
	}
	return apiError(op, requestID, status, err)
}

func apiError(op, requestID string, status int, err error) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op, Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{
				StatusCode: status,
				Status:     strconv.Itoa(status) + " " + http.StatusText(status),
				Header:     http.Header{},
				Body:       io.NopCloser(strings.NewReader("")),
			}},
			Err: err,
		},
		RequestID: requestID,
	}}
}

// ServiceError returns the error the SDK returns for op when DynamoDB
// answers it with k, wrapped as [APIError] wraps (the same typed error the
// SDK decodes from the response [ServiceErrors] injects: a
// *types.ProvisionedThroughputExceededException for
// ProvisionedThroughputExceeded, a *types.TransactionConflictException for
// TransactionConflict, ...). Nothing was applied. (For a TransactWriteItems
// meeting a transaction, wrap the model's cancellation with [APIError].)
func ServiceError(op string, k Kind) error {
	msg := aws.String("injected by faults")
	var err error
	switch k {
	case Throttle:
		err = &types.ThrottlingException{Message: msg}
	case ProvisionedThroughputExceeded:
		err = &types.ProvisionedThroughputExceededException{Message: msg}
	case InternalServerError:
		err = &types.InternalServerError{Message: msg}
	case TransactionConflict:
		err = &types.TransactionConflictException{Message: aws.String(msgConflict)}
	default:
		_, code := k.response()
		err = &smithy.GenericAPIError{Code: code, Message: *msg}
	}
	status, _ := k.response()
	return apiError(op, "faults-injected", status, err)
}

// Throttled returns the error the SDK returns for op when DynamoDB
// throttles it and says why, as it does since 2025: a
// *types.ThrottlingException (code "ThrottlingException", an on-demand
// table's answer) or a *types.ProvisionedThroughputExceededException (any
// other code) whose ThrottlingReasons hold reason (for example
// "TableReadKeyRangeThroughputExceeded") on resource (a table's ARN).
// Nothing was applied.
func Throttled(op, code, reason, resource string) error {
	msg := aws.String("injected by faults")
	reasons := []types.ThrottlingReason{{Reason: aws.String(reason), Resource: aws.String(resource)}}
	var err error = &types.ProvisionedThroughputExceededException{Message: msg, ThrottlingReasons: reasons}
	if code == "ThrottlingException" {
		err = &types.ThrottlingException{Message: msg, ThrottlingReasons: reasons}
	}
	return apiError(op, "faults-injected", 400, err)
}

// Canceled returns the error the SDK returns for op when the caller's
// context ends (cause is ctx.Err()) before the answer arrives; it matches
// cause with errors.Is.
func Canceled(op string, cause error) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op, Err: &aws.RequestCanceledError{Err: cause}}
}
