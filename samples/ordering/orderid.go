package ordering

import (
	"net/http"

	"github.com/google/uuid"

	"github.com/trellis-go/trellis/api"
)

// ParseID returns the canonical form (lower case) of an order id given as
// the contract's OrderID parameter defines it: a UUID in its 36-character
// form, 8-4-4-4-12 hexadecimal digits in either case. The other forms
// uuid.Parse accepts (braces, urn:uuid:, no hyphens) are refused, so that
// one order has one URL.
func ParseID(s string) (string, bool) {
	if len(s) != 36 {
		return "", false
	}
	u, err := uuid.Parse(s)
	if err != nil {
		return "", false
	}
	return u.String(), true
}

// checkID answers 400 naming the id when it is not an order id, and
// returns the canonical id otherwise.
func checkID(w http.ResponseWriter, r *http.Request, raw string) (string, bool) {
	id, ok := ParseID(raw)
	if !ok {
		api.WriteError(w, r, api.InvalidField("id", "must be a UUID such as 6f1c9a7e-2d4b-4c1e-9a57-3b8d0f2e4a61"))
	}
	return id, ok
}
