package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Dummy credentials and region for an explicit endpoint without any in the
// environment: DynamoDB Local accepts whatever it is sent.
const (
	localRegion    = "us-east-1"
	localAccessKey = "local"
	localSecretKey = "local"
)

// newDynamoDB builds the DynamoDB client the way AWS tools do: the SDK's
// default chain (environment, shared config and credentials files with
// AWS_PROFILE, SSO, container and instance roles; AWS_ENDPOINT_URL_DYNAMODB),
// plus DYNAMODB_ENDPOINT as dynamolock v2's example reads it. With an
// explicit endpoint and no region or credentials configured (DynamoDB
// Local), it fills in dummy ones so that nothing needs configuring.
func newDynamoDB(ctx context.Context, getenv func(string) string) (*dynamodb.Client, error) {
	endpoint, err := endpointFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	id := firstSet(getenv, "AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY")
	secret := firstSet(getenv, "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY")
	if (id == "") != (secret == "") {
		return nil, errors.New("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together")
	}
	var opts []func(*awsconfig.LoadOptions) error
	if endpoint != "" {
		if firstSet(getenv, "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE") == "" {
			opts = append(opts, awsconfig.WithRegion(localRegion))
		}
		if id == "" && getenv("AWS_PROFILE") == "" {
			opts = append(opts, awsconfig.WithCredentialsProvider(
				credentials.NewStaticCredentialsProvider(localAccessKey, localSecretKey, "")))
		}
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("no AWS region: set AWS_REGION or a profile's region, or DYNAMODB_ENDPOINT for DynamoDB Local")
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}

// endpointFromEnv returns the endpoint URL to use, or "" for AWS's own.
func endpointFromEnv(getenv func(string) string) (string, error) {
	name := "DYNAMODB_ENDPOINT"
	endpoint := getenv(name)
	if endpoint == "" && !strings.EqualFold(getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"), "true") {
		for _, n := range []string{"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL"} {
			if endpoint = getenv(n); endpoint != "" {
				name = n
				break
			}
		}
	}
	if endpoint == "" {
		return "", nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s=%q: want a URL such as http://127.0.0.1:8000", name, endpoint)
	}
	return endpoint, nil
}

func firstSet(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := getenv(n); v != "" {
			return v
		}
	}
	return ""
}
