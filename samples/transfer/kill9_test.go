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
	"slices"
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
	killKills     = flag.Int("transfer.kills", 3, "kill -9s of TestBinaryKill9 at random points (one more follows the last transfer's start)")
)

// fate is what TestBinaryKill9 does with a transfer that waits for an
// approval.
type fate int

const (
	noApproval   fate = iota // small enough to need none
	approveNow               // approved as soon as it waits
	approveLater             // approved after the last kill
	rejectLater              // rejected after the last kill
	leftWaiting              // left to time out (TRANSFER_APPROVAL_WAIT)
)

// approvalWait is TRANSFER_APPROVAL_WAIT of TestBinaryKill9's instances:
// the transfers left waiting time out while instances are killed and
// started, on timers that outlive them.
const approvalWait = 30 * time.Second

// TestBinaryKill9 runs the sample's own binary (cmd/server) as three
// instances of one cluster on Redis, starts transfers between wallets
// over HTTP — one in four large enough to wait for an approval, which is
// given at once, or after the last kill, or refused then, or never (the
// transfer times out) — and at random moments kills an instance with
// SIGKILL and starts another; once more after the last transfer starts,
// while some wait for their approval. Afterwards every transfer has
// ended as what was done with it allows (done, refused for want of
// money, compensated, rejected, or timed out: its pause's timer fired,
// though instances were killed since it was armed), and each wallet,
// the fees wallet too, holds exactly its funds plus what the done
// transfers moved in, minus what they moved out — so the money is
// conserved — and counts exactly the deposits and withdrawals those
// transfers made (Wallet.Ops): none was applied twice.
func TestBinaryKill9(t *testing.T) {
	trellistest.Long(t)
	bin := trellistest.BuildBinary(t, "github.com/trellis-go/trellis/samples/transfer/cmd/server")
	prefix := "transfer-kill9-" + strings.ToLower(rand.Text())
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	env := []string{"TRELLIS_REDIS_URL=" + trellistest.RedisURL(t), "TRELLIS_REDIS_PREFIX=" + prefix,
		"TRELLIS_CLUSTER_SECRET=" + hex.EncodeToString(secret), "TRELLIS_CLUSTER_LEASE=2s",
		"TRANSFER_APPROVAL_WAIT=" + approvalWait.String()}
	rdb := trellistest.Redis(t)
	t.Cleanup(func() { deleteKeys(rdb, prefix) }) // after the instances stopped
	live := []*trellistest.Process{}
	for range 3 {
		live = append(live, trellistest.StartProcess(t, bin, env...))
	}
	c := &http.Client{Timeout: 10 * time.Second}
	rng := mrand.New(mrand.NewPCG(mrand.Uint64(), 0))
	anyURL := func() string { return live[rng.IntN(len(live))].URL }
	kill := func(when string) {
		k := rng.IntN(len(live))
		t.Logf("%s: kill -9 %s, and start another", when, live[k].URL)
		live[k].Kill9(t)
		live[k] = trellistest.StartProcess(t, bin, env...)
	}

	nWallets, funds := max(*killWallets, 2), 5000
	want := make(map[string]int, nWallets+1)
	wantOps := make(map[string]int, nWallets+1)
	for i := range nWallets {
		w := fmt.Sprintf("w-%02d", i)
		if status, body := send(c, "POST", live[0].URL+"/wallets/"+w+"/deposit", fmt.Sprintf(`{"amount":%d}`, funds)); status != http.StatusOK {
			t.Fatalf("fund %s: %d %s", w, status, body)
		}
		want[w], wantOps[w] = funds, 1
	}
	want[transfer.FeesWallet] = 0

	n := *killTransfers
	kills := map[int]bool{}
	for len(kills) < min(*killKills, n) {
		kills[rng.IntN(n)] = true
	}
	begun := make(map[string]transfer.Transfer, n)
	fates := make(map[string]fate, n)
	for i := range n {
		if kills[i] {
			kill(fmt.Sprintf("before transfer %d", i))
		}
		from := rng.IntN(nWallets)
		req := transfer.Transfer{From: fmt.Sprintf("w-%02d", from), To: fmt.Sprintf("w-%02d", (from+1+rng.IntN(nWallets-1))%nWallets),
			Amount: 1 + rng.IntN(transfer.ApprovalAbove/2)}
		id := fmt.Sprintf("t-%04d", i)
		if rng.IntN(4) == 0 {
			req.Amount = transfer.ApprovalAbove + 1 + rng.IntN(transfer.ApprovalAbove/2)
			fates[id] = fate(1 + rng.IntN(4))
		}
		body, _ := json.Marshal(req)
		trellistest.Eventually(t, 30*time.Second, "transfer "+id+" starts", func() bool {
			status, _ := send(c, "POST", anyURL()+"/transfers/"+id, string(body))
			return status == http.StatusCreated || status == http.StatusConflict // 409: a try that timed out started it
		})
		begun[id] = req
		if fates[id] == approveNow {
			answer(t, c, anyURL, id, "approve")
		}
	}
	kill("after the last transfer started")
	for id, f := range fates {
		switch f {
		case approveLater:
			answer(t, c, anyURL, id, "approve")
		case rejectLater:
			answer(t, c, anyURL, id, "reject")
		}
	}

	count := map[string]int{}
	for id, req := range begun {
		var got transfer.Transfer
		trellistest.Eventually(t, time.Minute+approvalWait, "transfer "+id+" ends", func() bool {
			status, body := send(c, "GET", anyURL()+"/transfers/"+id, "")
			return status == http.StatusOK && json.Unmarshal(body, &got) == nil && got.Outcome != ""
		})
		outcome, _, _ := strings.Cut(got.Outcome, ":")
		count[outcome]++
		if !endsAs(fates[id], outcome) {
			t.Errorf("transfer %s (%+v, fate %d) ended %q", id, req, fates[id], got.Outcome)
		}
		switch outcome {
		case "done":
			want[req.From] -= req.Amount + got.Fee
			want[req.To] += req.Amount
			want[transfer.FeesWallet] += got.Fee
			wantOps[req.From]++
			wantOps[req.To]++
			wantOps[transfer.FeesWallet]++
		case "compensated": // withdrawn (and the fee paid), then undone
			wantOps[req.From] += 2
			if slices.Contains(got.Undone, "take-back-fee") {
				wantOps[transfer.FeesWallet] += 2
			}
		}
	}
	t.Logf("outcomes: %v", count)
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

// endsAs reports whether a transfer of fate f may end with outcome (its
// part before a colon): one approved, or needing no approval, runs its
// steps; one rejected is rejected; one left waiting times out; and an
// answer given after the wait lapsed finds the transfer timed out.
func endsAs(f fate, outcome string) bool {
	ran := outcome == "done" || outcome == "refused" || outcome == "compensated"
	switch f {
	case noApproval:
		return ran
	case approveNow, approveLater:
		return ran || outcome == "approval timed out"
	case rejectLater:
		return outcome == "rejected" || outcome == "approval timed out"
	default:
		return outcome == "approval timed out"
	}
}

// answer approves or rejects (action) transfer id once it waits for an
// approval, on the instance url gives; a transfer whose wait lapsed
// first needs no answer.
func answer(t *testing.T, c *http.Client, url func() string, id, action string) {
	t.Helper()
	trellistest.Eventually(t, 30*time.Second, action+" transfer "+id, func() bool {
		status, _ := send(c, "POST", url()+"/transfers/"+id+"/"+action, "")
		if status != http.StatusConflict { // 409: it does not wait (yet, or any more)
			return status == http.StatusNoContent
		}
		var got transfer.Transfer
		status, body := send(c, "GET", url()+"/transfers/"+id, "")
		return status == http.StatusOK && json.Unmarshal(body, &got) == nil && got.Outcome == "approval timed out"
	})
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
