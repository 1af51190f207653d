package trellis_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// guideModule is the outside module whose files the README's guide shows.
const guideModule = "testdata/cartservice"

// guideBlock matches a block of the guide: its marker naming the file,
// then the fenced code.
var guideBlock = regexp.MustCompile("(?s)<!-- guide: ([^ ]+) -->\n```[a-z]*\n(.*?)\n```\n")

// guideFiles returns the README guide's code blocks by file name.
func guideFiles(t *testing.T) map[string]string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, guide, ok := strings.Cut(string(readme), "## Build your own service\n")
	if !ok {
		t.Fatal(`README.md has no "## Build your own service" section`)
	}
	guide, _, _ = strings.Cut(guide, "\n## ")
	files := map[string]string{}
	for _, m := range guideBlock.FindAllStringSubmatch(guide, -1) {
		files[m[1]] = m[2] + "\n"
	}
	if len(files) == 0 {
		t.Fatal("the guide has no <!-- guide: FILE --> blocks")
	}
	return files
}

// TestBuildYourOwnService runs the README's guide: its code blocks are
// the files of testdata/cartservice, and in a module of their own (that
// module's go.mod and go.sum, with the replace pointing at this
// repository) they generate, vet and pass their tests, and the program
// they make answers -h and refuses an invalid setting of its own.
func TestBuildYourOwnService(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module: not in -short")
	}
	files := guideFiles(t)
	for name, code := range files {
		want, err := os.ReadFile(filepath.Join(guideModule, name))
		if err != nil {
			t.Fatalf("the guide shows %s, which %s does not have: %v", name, guideModule, err)
		}
		if code != string(want) {
			t.Errorf("the guide's %s differs from %s/%s", name, guideModule, name)
		}
	}
	repo, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, code := range files {
		writeFile(t, filepath.Join(dir, name), []byte(code))
	}
	mod, err := os.ReadFile(filepath.Join(guideModule, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod = bytes.Replace(mod, []byte("=> ../.."), []byte("=> "+repo), 1)
	writeFile(t, filepath.Join(dir, "go.mod"), mod)
	sum, err := os.ReadFile(filepath.Join(guideModule, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "go.sum"), sum)

	bin := filepath.Join(dir, "cartservice")
	for _, args := range [][]string{
		{"generate", "./..."},
		{"vet", "./..."},
		{"test", "-count=1", "./..."},
		{"build", "-o", bin, "."},
	} {
		goCmd(t, dir, args...)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-h").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "-cart-idle") || !strings.Contains(string(out), "-redis-url") {
		t.Errorf("cartservice -h: %v, want exit 0 listing -cart-idle beside -redis-url:\n%s", err, out)
	}
	out, err = exec.CommandContext(ctx, bin, "-addr", "127.0.0.1:0", "-cart-idle", "0s").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "-cart-idle: must be positive") {
		t.Errorf("cartservice -cart-idle 0s: %v, want exit code 2 naming -cart-idle:\n%s", err, out)
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// goCmd runs the go command in dir, failing the test with its output.
func goCmd(t *testing.T, dir string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
