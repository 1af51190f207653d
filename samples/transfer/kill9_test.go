package transfer_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/samples/transfer"
	"github.com/trellis-go/trellis/trellistest"
)

// Sizes of TestBinaryKill9: CI's by default; more for a long run
// (-transfer.transfers=1000 -transfer.wallets=100 -transfer.kills=20).
var (
	killTransfers = flag.Int("transfer.transfers", 60, "transfers of TestBinaryKill9")
	killWallets   = flag.Int("transfer.wallets", 10, "wallets of TestBinaryKill9 (at least 2)")
	killKills     = flag.Int("transfer.kills", 3, "kill -9s of TestBinaryKill9")
)

// TestBinaryKill9 runs the sample's own binary (cmd/server) as three
// instances of one cluster on Redis, starts transfers between wallets
// over HTTP, and at random moments kills an instance with SIGKILL and
// starts another. Afterwards every transfer has ended (done, refused for
// want of money, or compensated), and each wallet holds exactly its funds
// plus what the done transfers moved in, minus what they moved out — so
// the money is conserved — and counts exactly the deposits and withdrawals
// those transfers made (Wallet.Ops): none was applied twice.
func TestBinaryKill9(t *testing.T) {
	trellistest.Long(t)
	bin := trellistest.BuildBinary(t, "github.com/trellis-go/trellis/samples/transfer/cmd/server")
	prefix := "transfer-kill9-" + strings.ToLower(rand.Text())
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	env := []string{"TRELLIS_REDIS_URL=" + trellistest.RedisURL(t), "TRELLIS_REDIS_PREFIX=" + prefix,
		"TRELLIS_CLUSTER_SECRET=" + hex.EncodeToString(secret), "TRELLIS_CLUSTER_LEASE=2s"}
	rdb := trellistest.Redis(t)
	t.Cleanup(func() { deleteKeys(rdb, prefix) }) // after the instances stopped
	live := []*trellistest.Process{}
	for range 3 {
		live = append(live, trellistest.StartProcess(t, bin, env...))
	}
	c := &http.Client{Timeout: 10 * time.Second}
	rng := mrand.New(mrand.NewPCG(mrand.Uint64(), 0))

	nWallets, funds := max(*killWallets, 2), 1000
	want := make(map[string]int, nWallets)
	wantOps := make(map[string]int, nWallets)
	for i := range nWallets {
		w := fmt.Sprintf("w-%02d", i)
		if status, body := send(c, "POST", live[0].URL+"/wallets/"+w+"/deposit", fmt.Sprintf(`{"amount":%d}`, funds)); status != http.StatusOK {
			t.Fatalf("fund %s: %d %s", w, status, body)
		}
		want[w], wantOps[w] = funds, 1
	}

	n := *killTransfers
	kills := map[int]bool{}
	for len(kills) < min(*killKills, n) {
		kills[rng.IntN(n)] = true
	}
	begun := make(map[string]transfer.Transfer, n)
	for i := range n {
		if kills[i] {
			k := rng.IntN(len(live))
			t.Logf("before transfer %d: kill -9 %s, and start another", i, live[k].URL)
			live[k].Kill9(t)
			live[k] = trellistest.StartProcess(t, bin, env...)
		}
		from := rng.IntN(nWallets)
		req := transfer.Transfer{From: fmt.Sprintf("w-%02d", from), To: fmt.Sprintf("w-%02d", (from+1+rng.IntN(nWallets-1))%nWallets),
			Amount: 1 + rng.IntN(transfer.ApprovalAbove/2)}
		id := fmt.Sprintf("t-%04d", i)
		body, _ := json.Marshal(req)
		trellistest.Eventually(t, 30*time.Second, "transfer "+id+" starts", func() bool {
			status, _ := send(c, "POST", live[rng.IntN(len(live))].URL+"/transfers/"+id, string(body))
			return status == http.StatusCreated || status == http.StatusConflict // 409: a try that timed out started it
		})
		begun[id] = req
	}

	for id, req := range begun {
		var got transfer.Transfer
		trellistest.Eventually(t, time.Minute, "transfer "+id+" ends", func() bool {
			status, body := send(c, "GET", live[rng.IntN(len(live))].URL+"/transfers/"+id, "")
			return status == http.StatusOK && json.Unmarshal(body, &got) == nil && got.Outcome != ""
		})
		switch {
		case got.Outcome == "done":
			want[req.From] -= req.Amount
			want[req.To] += req.Amount
			wantOps[req.From]++
			wantOps[req.To]++
		case got.Outcome == "compensated": // withdrawn, then refunded
			wantOps[req.From] += 2
		case strings.HasPrefix(got.Outcome, "refused: "):
		default:
			t.Errorf("transfer %s ended %q", id, got.Outcome)
		}
	}
	total := 0
	for w, balance := range want {
		var got transfer.Wallet
		status, body := send(c, "GET", live[0].URL+"/wallets/"+w, "")
		if status != http.StatusOK || json.Unmarshal(body, &got) != nil {
			t.Fatalf("GET /wallets/%s: %d %s", w, status, body)
		}
		if got.Balance != balance {
			t.Errorf("wallet %s holds %d, want %d: a withdrawal or deposit was lost or applied twice", w, got.Balance, balance)
		}
		if got.Ops != wantOps[w] {
			t.Errorf("wallet %s applied %d deposits and withdrawals, want %d", w, got.Ops, wantOps[w])
		}
		total += got.Balance
	}
	if total != nWallets*funds {
		t.Errorf("the wallets hold %d in all, want %d", total, nWallets*funds)
	}
}

// send makes one request; status 0 when it got no answer.
func send(c *http.Client, method, url, body string) (int, []byte) {
	req, err := http.NewRequest(method, url, bytes.NewBufferString(body))
	if err != nil {
		return 0, nil
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// deleteKeys removes the test's keys from Redis.
func deleteKeys(rdb *redis.Client, prefix string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}
