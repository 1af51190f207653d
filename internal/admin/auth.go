package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"

	"github.com/trellis-go/trellis/api"
)

// adminRealm names the protection space in WWW-Authenticate.
const adminRealm = "trellis-admin"

// adminDisabledDetail says how to turn the admin API on; it is what every
// admin route answers while no token is configured.
var adminDisabledDetail = "the admin API is disabled: start the service with " + envAdminToken +
	" (or -admin-token) set to a secret of at least 16 characters, then send it as Authorization: Bearer <token>"

// envAdminToken is the variable that sets the admin token (trellis.EnvAdminToken),
// named in what a refused request is told.
const envAdminToken = "TRELLIS_ADMIN_TOKEN"

// adminAuth guards the admin routes with the admin token:
//
//   - no token configured (token == ""): 403 on every request, saying how
//     to enable the admin API, whatever the request carries;
//   - no Authorization header, another scheme than Bearer, or an empty
//     credential: 401 with WWW-Authenticate: Bearer;
//   - a Bearer token that is not the admin token: 401 with
//     WWW-Authenticate: Bearer …, error="invalid_token";
//   - the admin token: the request goes on, and its response is marked
//     Cache-Control: no-store (it describes live state, and may name
//     business ids).
//
// The tokens are compared as SHA-256 digests with
// subtle.ConstantTimeCompare: the digests have a fixed length, so neither
// the content nor the length of the admin token leaks through timing. A
// refusal is logged with its reason, never with a token.
func adminAuth(token string) func(http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if token == "" {
				refuseAdmin(w, r, http.StatusForbidden, "admin API disabled", adminDisabledDetail, "")
				return
			}
			got, ok := bearerToken(r.Header.Get("Authorization"))
			if !ok {
				refuseAdmin(w, r, http.StatusUnauthorized, "no bearer token",
					"the admin API needs the header Authorization: Bearer <"+envAdminToken+">",
					`Bearer realm="`+adminRealm+`"`)
				return
			}
			digest := sha256.Sum256([]byte(got))
			if subtle.ConstantTimeCompare(digest[:], want[:]) != 1 {
				refuseAdmin(w, r, http.StatusUnauthorized, "wrong bearer token",
					"the bearer token is not the admin token",
					`Bearer realm="`+adminRealm+`", error="invalid_token"`)
				return
			}
			w.Header().Set("Cache-Control", "no-store")
			next.ServeHTTP(w, r)
		})
	}
}

// bearerToken extracts the credential of an "Authorization: Bearer <token>"
// header. The scheme is case-insensitive (RFC 9110, 11.1); ok is false
// when the header is missing, has another scheme, or has no credential.
func bearerToken(header string) (token string, ok bool) {
	scheme, rest, found := strings.Cut(header, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(rest)
	return token, token != ""
}

// refuseAdmin answers a refused admin request with a problem (and the
// WWW-Authenticate challenge when there is one) and logs why, without the
// request's credentials.
func refuseAdmin(w http.ResponseWriter, r *http.Request, status int, reason, detail, challenge string) {
	ctx := r.Context()
	api.Logger(ctx).LogAttrs(ctx, slog.LevelWarn, "admin request refused: "+reason,
		slog.String("requestId", api.RequestID(ctx)),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.String("remoteAddr", r.RemoteAddr),
		slog.Int("status", status),
	)
	if challenge != "" {
		w.Header().Set("WWW-Authenticate", challenge)
	}
	api.WriteProblem(w, r, status, detail)
}
