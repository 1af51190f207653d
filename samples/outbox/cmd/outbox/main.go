// Command outbox runs the outbox sample (package samples/outbox) as a
// service of its own, as an application's main would: its notices are
// mailed by POSTing each as JSON to the URL in OUTBOX_MAIL_URL (a mail
// gateway; the end-to-end test's recorder), and a notice the gateway does
// not answer with 2xx is mailed again later. Trellis's configuration is
// the usual one (see trellis.ConfigFromEnv, or run it with -h).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/samples/outbox"
)

// envMailURL names where notices are POSTed.
const envMailURL = "OUTBOX_MAIL_URL"

func main() {
	url := os.Getenv(envMailURL)
	if url == "" {
		fmt.Fprintln(os.Stderr, "outbox: "+envMailURL+" must be set: where notices are POSTed")
		os.Exit(2)
	}
	m := gateway{url: url, client: &http.Client{Timeout: 5 * time.Second}}
	os.Exit(trellis.Run(context.Background(), outbox.Setup(m)))
}

// gateway mails a notice by POSTing it to a mail gateway.
type gateway struct {
	url    string
	client *http.Client
}

func (g gateway) Mail(ctx context.Context, n outbox.Notice) error {
	body, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("mail %s: %w", n.Hold, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("mail %s: %w", n.Hold, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.client.Do(req)
	if err != nil {
		return fmt.Errorf("mail %s: %w", n.Hold, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("mail %s: the gateway answered %d", n.Hold, resp.StatusCode)
	}
	return nil
}
