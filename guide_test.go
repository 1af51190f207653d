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
	"unicode"
)

// guideModule is the outside module whose files the guide shows.
const guideModule = "testdata/cartservice"

// guidePage is the guide: docs/guide.md, "Build your own service".
const guidePage = "docs/guide.md"

// guideFiles returns the guide's code blocks by file name.
func guideFiles(t *testing.T) map[string]string { return pageFiles(t, guidePage, "guide") }

// pageFiles returns the code blocks of a docs page by file name: each
// block follows a marker <!-- MARKER: FILE -->.
func pageFiles(t *testing.T, page, marker string) map[string]string {
	t.Helper()
	block := regexp.MustCompile("(?s)<!-- " + marker + ": ([^ ]+) -->\n```[a-z]*\n(.*?)\n```\n")
	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, m := range block.FindAllStringSubmatch(string(text), -1) {
		if _, dup := files[m[1]]; dup {
			t.Fatalf("%s shows %s twice", page, m[1])
		}
		files[m[1]] = m[2] + "\n"
	}
	if len(files) == 0 {
		t.Fatalf("%s has no <!-- %s: FILE --> blocks", page, marker)
	}
	return files
}

// TestOutboxGuide: the outbox guide (docs/outbox.md) shows the files of
// samples/outbox as they are, whose own test runs the outbox end to end.
func TestOutboxGuide(t *testing.T) {
	for name, code := range pageFiles(t, "docs/outbox.md", "outbox") {
		want, err := os.ReadFile(filepath.Join("samples", "outbox", name))
		if err != nil {
			t.Fatalf("docs/outbox.md shows %s, which samples/outbox does not have: %v", name, err)
		}
		if code != string(want) {
			t.Errorf("docs/outbox.md's %s differs from samples/outbox/%s", name, name)
		}
	}
}

// tasteBlock matches the README's taste of a service: the Go block after
// its marker.
var tasteBlock = regexp.MustCompile("(?s)<!-- taste: excerpt of docs/guide.md -->\n```go\n(.*?)\n```\n")

// The README's taste of a service is an excerpt of the guide: every line
// of it but the elisions ("// …") is a line of one of the guide's files,
// so that it compiles as far as the guide does.
func TestReadmeTasteIsFromTheGuide(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := tasteBlock.FindStringSubmatch(string(readme))
	if m == nil {
		t.Fatal("README.md has no <!-- taste: excerpt of docs/guide.md --> block")
	}
	lines := map[string]bool{}
	for _, code := range guideFiles(t) {
		for line := range strings.SplitSeq(code, "\n") {
			lines[strings.TrimSpace(line)] = true
		}
	}
	for i, line := range strings.Split(m[1], "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "// …") {
			continue
		}
		if !lines[line] {
			t.Errorf("README.md's taste, line %d, is in none of the guide's files: %s", i+1, line)
		}
	}
}

// TestBuildYourOwnService runs the guide (docs/guide.md): its code blocks are
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

// docLink matches a Markdown link's target: [text](target).
var docLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// fencedOrCode matches what holds no links: fenced blocks and code spans.
var fencedOrCode = regexp.MustCompile("(?s)```.*?```|`[^`\n]*`")

// headingAnchors returns the anchors GitHub gives a Markdown file's
// headings: lower case, punctuation dropped, spaces as hyphens.
func headingAnchors(md string) map[string]bool {
	anchors := map[string]bool{}
	for line := range strings.SplitSeq(fencedOrCode.ReplaceAllString(md, ""), "\n") {
		title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(title)) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		anchors[b.String()] = true
	}
	return anchors
}

// The README is the way in: it links every page under docs/, and every
// relative link of the README and of those pages reaches a file that
// exists (and, for a link to a heading, a heading that exists).
func TestDocsLinks(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range pages {
		if !strings.Contains(string(readme), "]("+page+")") {
			t.Errorf("README.md does not link %s", page)
		}
	}
	for _, file := range append([]string{"README.md"}, pages...) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := fencedOrCode.ReplaceAllString(string(b), "")
		for _, m := range docLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s links %s, which does not exist", file, target)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			md, err := os.ReadFile(dest)
			if err != nil {
				t.Fatal(err)
			}
			if !headingAnchors(string(md))[anchor] {
				t.Errorf("%s links %s, but %s has no heading #%s", file, target, dest, anchor)
			}
		}
	}
}
