package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis/api"
)

// files are the page's template and assets, built into the binary.
//
//go:embed templates assets
var files embed.FS

// asset is one embedded file, ready to serve.
type asset struct {
	body []byte
	etag string
}

// assets are the files under assets/, by name, and assetVersion a digest
// of them all, read once: they cannot change while the process runs.
var assets, assetVersion = loadAssets()

func loadAssets() (map[string]asset, string) {
	entries, err := fs.ReadDir(files, "assets")
	if err != nil {
		panic("console: the embedded assets cannot be read: " + err.Error())
	}
	out := make(map[string]asset, len(entries))
	all := sha256.New()
	for _, e := range entries {
		b, err := files.ReadFile(path.Join("assets", e.Name()))
		if err != nil {
			panic("console: the embedded asset " + e.Name() + " cannot be read: " + err.Error())
		}
		sum := sha256.Sum256(b)
		out[e.Name()] = asset{body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		all.Write(sum[:])
	}
	return out, hex.EncodeToString(all.Sum(nil)[:6])
}

// serveAsset serves one asset with its ETag, so that a browser revalidates
// it cheaply (304) instead of fetching it again.
func serveAsset(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "file")
	a, ok := assets[name]
	if !ok {
		api.WriteProblem(w, r, http.StatusNotFound, "no console asset "+name)
		return
	}
	w.Header().Set("ETag", a.etag)
	w.Header().Set("Cache-Control", "no-cache")
	// ServeContent sets the Content-Type from the extension and answers
	// conditional and range requests.
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
}
