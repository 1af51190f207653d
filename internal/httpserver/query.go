package httpserver

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/trellis-go/trellis/api"
)

// CheckQuery is the middleware that refuses a query string that net/url cannot parse (a bad
// percent escape such as %ZZ, a ';' separator) with a 400 naming the
// parameter. url.Values silently drops such a pair, so without this check
// limit=%ZZ would read as no limit at all and the request would go on with
// a default the client never asked for. It goes on the groups of routes
// that read a query (the admin API, after its token check, and the
// application's routes).
func CheckQuery(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
				field, message := badQueryParam(r.URL.RawQuery)
				api.WriteError(w, r, api.InvalidField(field, message))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// badQueryParam names the first parameter of raw, a query string that
// url.ParseQuery refused, and says what is wrong with it.
func badQueryParam(raw string) (field, message string) {
	for pair := range strings.SplitSeq(raw, "&") {
		key, value, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(key)
		if err != nil {
			return key, "is a parameter name that is not validly percent-encoded"
		}
		if strings.Contains(pair, ";") {
			return name, "contains ';': separate the parameters with '&', and send a ';' in a value as %3B"
		}
		if _, err := url.QueryUnescape(value); err != nil {
			return name, "is not validly percent-encoded: a '%' must start an escape such as %20"
		}
	}
	return "query", "is not a valid query string"
}
