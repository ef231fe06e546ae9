package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"
)

// Region and credentials for DynamoDB Local on this machine when the
// default chain has none: DynamoDB Local accepts whatever it is sent.
const (
	localRegion    = "us-east-1"
	localAccessKey = "local"
	localSecretKey = "local"
)

// credentialsTimeout bounds the look-up of credentials for a loopback
// endpoint (without one, the chain ends by asking instance metadata, which
// can take a while off EC2).
const credentialsTimeout = 3 * time.Second

// newDynamoDB builds the DynamoDB client the way AWS tools do: the SDK's
// default chain (environment, shared config and credentials files with
// AWS_PROFILE, SSO, container and instance roles; AWS_ENDPOINT_URL_DYNAMODB),
// plus DYNAMODB_ENDPOINT as dynamolock v2's example reads it. Only for an
// endpoint on this machine (DynamoDB Local) does it fill in a region and
// dummy credentials that the chain did not provide, and turn off the
// validation of response checksums (DynamoDB Local's answers to failed
// conditions make the SDK warn about them).
func newDynamoDB(ctx context.Context, getenv func(string) string) (*dynamodb.Client, error) {
	endpoint, _, err := endpointFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	id := firstSet(getenv, "AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY")
	secret := firstSet(getenv, "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY")
	if (id == "") != (secret == "") {
		return nil, errors.New("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together")
	}
	local := endpoint != "" && isLoopback(endpoint)
	var opts []func(*awsconfig.LoadOptions) error
	if local {
		// The chain's providers would warn about what DynamoDB Local does
		// not need (no instance metadata, say).
		opts = append(opts, awsconfig.WithLogger(logging.Nop{}))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if local {
		if cfg.Region == "" {
			cfg.Region = localRegion
		}
		if !hasCredentials(ctx, cfg.Credentials) {
			cfg.Credentials = credentials.NewStaticCredentialsProvider(localAccessKey, localSecretKey, "")
		}
	}
	if cfg.Region == "" {
		return nil, errors.New("no AWS region: set AWS_REGION or a profile's region (DynamoDB Local on 127.0.0.1 or localhost needs none)")
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.DisableValidateResponseChecksum = local
	}), nil
}

// hasCredentials reports whether the default chain finds credentials.
func hasCredentials(ctx context.Context, p aws.CredentialsProvider) bool {
	if p == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, credentialsTimeout)
	defer cancel()
	_, err := p.Retrieve(ctx)
	return err == nil
}

// isLoopback reports whether endpoint (a valid URL) names this machine:
// localhost or a loopback address. Names are not resolved.
func isLoopback(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// endpointFromEnv returns the endpoint URL to use, or "" for AWS's own,
// and the environment variable that set it.
func endpointFromEnv(getenv func(string) string) (endpoint, name string, err error) {
	name = "DYNAMODB_ENDPOINT"
	endpoint = getenv(name)
	if endpoint == "" && !strings.EqualFold(getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"), "true") {
		for _, n := range []string{"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL"} {
			if endpoint = getenv(n); endpoint != "" {
				name = n
				break
			}
		}
	}
	if endpoint == "" {
		return "", "", nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", name, fmt.Errorf("%s=%q: want a URL such as http://127.0.0.1:8000", name, endpoint)
	}
	return endpoint, name, nil
}

func firstSet(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := getenv(n); v != "" {
			return v
		}
	}
	return ""
}
