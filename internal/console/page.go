package console

import (
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/trellis-go/trellis/api"
)

// defaultRefresh is how often the page refreshes its data until the
// operator picks another interval.
const defaultRefresh = 5 * time.Second

// pageData is what the page template shows before any data is loaded.
type pageData struct {
	// RefreshChoices are the refresh intervals the operator can pick, in
	// milliseconds (0: no refresh); defaultRefresh is the one selected.
	RefreshChoices []refreshChoice
	// PageSizes are the page sizes offered, DefaultPageSize selected.
	PageSizes       []int
	DefaultPageSize int
	// AssetVersion is a digest of the assets, in their addresses, so
	// that a browser fetches them again when they change.
	AssetVersion string
}

// refreshChoice is one option of the refresh picker.
type refreshChoice struct {
	Millis   int64
	Label    string
	Selected bool
}

var page = template.Must(template.ParseFS(files, "templates/console.html.tmpl"))

// servePage serves the page. It holds no data and no secret: everything
// it shows is fetched by its script with the token the operator enters.
func servePage(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/") {
		// The page's addresses are relative to the directory it is in.
		http.Redirect(w, r, r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]+"/", http.StatusPermanentRedirect)
		return
	}
	data := pageData{
		RefreshChoices:  refreshChoices(),
		PageSizes:       []int{10, 25, 50, 100},
		DefaultPageSize: 25,
		AssetVersion:    assetVersion,
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	if err := page.Execute(w, data); err != nil {
		// The template is fixed and its data plain: only a failed write
		// to a client that went away gets here.
		api.Logger(r.Context()).Warn("console: write the page", "err", err, "requestId", api.RequestID(r.Context()))
	}
}

func refreshChoices() []refreshChoice {
	choices := []refreshChoice{{Millis: 0, Label: "off"}}
	for _, d := range []time.Duration{time.Second, defaultRefresh, 30 * time.Second} {
		choices = append(choices, refreshChoice{Millis: d.Milliseconds(), Label: d.String(), Selected: d == defaultRefresh})
	}
	return choices
}
