package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// binDir holds the server binary for the package run; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "trellis-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		os.Exit(1)
	}
	binDir = dir
	code := testenv.Servers(m).Run()
	_ = os.RemoveAll(dir)
	// Every process and connection of a test is gone by its end.
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	serverBin string
	buildErr  error
)

// serverBinary builds cmd/server once per package run, as the Dockerfile
// does (no cgo, no race detector), and returns its path.
func serverBinary(t *testing.T) string {
	t.Helper()
	testenv.Long(t)
	buildOnce.Do(func() {
		bin := filepath.Join(binDir, "trellis-server")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/trellis-go/trellis/cmd/server")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build cmd/server: %w\n%s", err, out)
			return
		}
		serverBin = bin
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return serverBin
}
