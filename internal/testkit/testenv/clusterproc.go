package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of its own: 3 masters with a replica each,
// every node a redis-server process on a free loopback port with a
// directory of its own. A test starts one (StartCluster) when it must
// break a cluster (kill -9 a master) and so cannot use the shared one of
// RedisClusterURL; the shared one is a Cluster too, when the test command
// did not start one (see shared.go).
type Cluster struct {
	t     testing.TB // the test that started it; nil for the shared one
	dir   string     // the nodes' directories are below it
	args  []string   // more redis-server arguments for every node
	mu    sync.Mutex
	nodes []*clusterNode
}

type clusterNode struct {
	addr, dir string
	cmd       *exec.Cmd
	done      chan struct{} // closed once the process was waited for
}

// NodeTimeout is the cluster-node-timeout of a Cluster: how long a master
// must be unreachable before its replica is promoted (plus an election of
// about a second).
const NodeTimeout = 2 * time.Second

// StartCluster starts a Cluster (redis-server and redis-cli from PATH),
// each node with the redis-server arguments args besides its own, and
// waits until every node sees it as ok. Every node is stopped when the
// test ends.
func StartCluster(t testing.TB, args ...string) *Cluster {
	t.Helper()
	ClusterCase(t)
	c := &Cluster{t: t, dir: t.TempDir(), args: args}
	t.Cleanup(c.stop)
	if err := c.start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// start starts the nodes, joins them into a cluster and waits until it is
// whole; on an error the caller stops what did start.
func (c *Cluster) start() error {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return errors.New(installHint + " (redis-cli comes with it)")
	}
	var addrs []string
	for range 6 {
		n, err := c.startNode()
		if err != nil {
			return err
		}
		addrs = append(addrs, n.addr)
	}
	create := append([]string{"--cluster", "create"}, addrs...)
	create = append(create, "--cluster-replicas", "1", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "redis-cli", create...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range c.nodes {
		if err := c.waitNode(n.addr, "cluster_state:ok", time.Minute); err != nil {
			return err
		}
	}
	// Replicas are attached after the slots are assigned, and gossip
	// spreads the news: wait until every node knows 3 replicas, and each
	// replica has synchronised with its master, so that a failover has a
	// replica to promote.
	for _, n := range c.nodes {
		if !poll(time.Minute, func() bool {
			client := redis.NewClient(&redis.Options{Addr: n.addr, MaxRetries: -1})
			defer client.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			text, err := client.ClusterNodes(ctx).Result()
			replicas := 0
			for _, r := range parseRoles(text) {
				if !r.Master && r.Of != "" {
					replicas++
				}
			}
			if err != nil || replicas != 3 {
				return false
			}
			info, err := client.Info(ctx, "replication").Result()
			return err == nil && (strings.Contains(info, "role:master") || strings.Contains(info, "master_link_status:up"))
		}) {
			return fmt.Errorf("node %s does not see 3 masters with a replica each within a minute", n.addr)
		}
	}
	return nil
}

// startNode starts one cluster-enabled node on a free port whose bus port
// (port+10000) is free too.
func (c *Cluster) startNode() (*clusterNode, error) {
	for attempt := 0; ; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if port+10000 > 65535 {
			continue
		}
		if bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000)); err != nil {
			continue
		} else {
			_ = bus.Close()
		}
		n := &clusterNode{addr: "127.0.0.1:" + strconv.Itoa(port), dir: filepath.Join(c.dir, strconv.Itoa(port)), done: make(chan struct{})}
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return nil, err
		}
		args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", n.dir,
			"--save", "", "--appendonly", "no", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(int(NodeTimeout / time.Millisecond)),
			"--logfile", filepath.Join(n.dir, "redis.log"), "--daemonize", "no"}, c.args...)
		if n.cmd, err = redisServer(args...); err != nil {
			return nil, err
		}
		go func() { _ = n.cmd.Wait(); close(n.done) }()
		if c.answers(n, 10*time.Second) {
			c.mu.Lock()
			c.nodes = append(c.nodes, n)
			c.mu.Unlock()
			return n, nil
		}
		_ = n.cmd.Process.Kill()
		<-n.done
		if attempt == 3 {
			log, _ := os.ReadFile(filepath.Join(n.dir, "redis.log"))
			return nil, fmt.Errorf("redis-server on %s did not answer:\n%s", n.addr, log)
		}
	}
}

// answers waits up to limit for n to answer; false if it exited, did not
// answer, or another server answers on its port.
func (c *Cluster) answers(n *clusterNode, limit time.Duration) bool {
	client := redis.NewClient(&redis.Options{Addr: n.addr, MaxRetries: -1, DialTimeout: time.Second})
	defer client.Close()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-n.done:
			return false
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ours, err := answersAs(ctx, client, n.cmd.Process.Pid)
		cancel()
		if err == nil {
			return ours // another test's server took the port: not n
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// waitNode polls CLUSTER INFO on addr until it contains want.
func (c *Cluster) waitNode(addr, want string, limit time.Duration) error {
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer client.Close()
	var info string
	if !poll(limit, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		info, _ = client.ClusterInfo(ctx).Result()
		return strings.Contains(info, want)
	}) {
		return fmt.Errorf("cluster node %s does not report %s within %v:\n%s", addr, want, limit, info)
	}
	return nil
}

// URL is the cluster's URL in go-redis's cluster form, naming every node.
func (c *Cluster) URL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := "redis://" + c.nodes[0].addr + "?"
	for i, n := range c.nodes[1:] {
		if i > 0 {
			u += "&"
		}
		u += "addr=" + n.addr
	}
	return u
}

// Client returns a cluster client (closed when the test ends).
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	opts, err := redis.ParseClusterURL(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	// As the service does: follow a failover within a second.
	opts.ClusterStateReloadInterval = time.Second
	client := redis.NewClusterClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// Role is one line of CLUSTER NODES as a live node sees it.
type Role struct {
	Addr   string
	Master bool
	Failed bool   // flagged fail (or fail?) by the node asked
	Of     string // a replica's master's address
}

// Roles asks a live node (one other than except) for every node's role.
func (c *Cluster) Roles(except string) ([]Role, error) {
	c.mu.Lock()
	nodes := append([]*clusterNode(nil), c.nodes...)
	c.mu.Unlock()
	for _, n := range nodes {
		if n.addr == except {
			continue
		}
		client := redis.NewClient(&redis.Options{Addr: n.addr, MaxRetries: -1, DialTimeout: time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		text, err := client.ClusterNodes(ctx).Result()
		cancel()
		_ = client.Close()
		if err != nil {
			continue
		}
		return parseRoles(text), nil
	}
	return nil, fmt.Errorf("no live node answers CLUSTER NODES")
}

// parseRoles reads CLUSTER NODES: id addr@bus flags master-id ….
func parseRoles(text string) []Role {
	ids := map[string]string{}
	type line struct{ addr, flags, master string }
	var lines []line
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(l)
		if len(f) < 4 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		ids[f[0]] = addr
		lines = append(lines, line{addr, f[2], f[3]})
	}
	roles := make([]Role, 0, len(lines))
	for _, l := range lines {
		roles = append(roles, Role{Addr: l.addr, Master: strings.Contains(l.flags, "master"),
			Failed: strings.Contains(l.flags, "fail"), Of: ids[l.master]})
	}
	return roles
}

// Kill9 kills the node at addr with SIGKILL, as a crash would, and waits
// for the process to be gone.
func (c *Cluster) Kill9(addr string) {
	c.t.Helper()
	n := c.node(addr)
	if err := n.cmd.Process.Kill(); err != nil {
		c.t.Fatalf("kill -9 %s: %v", addr, err)
	}
	<-n.done
}

// Freeze stops the node at addr with SIGSTOP: it answers nothing, and a
// replica frozen so falls behind its master, until Thaw.
func (c *Cluster) Freeze(addr string) {
	c.t.Helper()
	if err := c.node(addr).cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		c.t.Fatalf("freeze %s: %v", addr, err)
	}
}

// Thaw resumes a frozen node (SIGCONT).
func (c *Cluster) Thaw(addr string) {
	c.t.Helper()
	if err := c.node(addr).cmd.Process.Signal(syscall.SIGCONT); err != nil {
		c.t.Fatalf("thaw %s: %v", addr, err)
	}
}

// node is the node at addr; no such node fails the test.
func (c *Cluster) node(addr string) *clusterNode {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.addr == addr {
			return n
		}
	}
	c.t.Fatalf("no node %s", addr)
	return nil
}

// stop ends every node still running (SIGKILL: nothing is kept anyway).
func (c *Cluster) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		_ = n.cmd.Process.Kill()
	}
	for _, n := range c.nodes {
		<-n.done
	}
}

// WaitReplicated waits until every replica has every write its master had
// when it was called: replication is asynchronous, so a master killed
// before that takes its last writes with it.
func (c *Cluster) WaitReplicated(t testing.TB) {
	t.Helper()
	roles, err := c.Roles("")
	if err != nil {
		t.Fatal(err)
	}
	offset := func(addr, field string) int64 {
		client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		info, err := client.Info(ctx, "replication").Result()
		if err != nil {
			return -1
		}
		for _, l := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(l, field+":"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		return -1
	}
	for _, r := range roles {
		if r.Master || r.Failed {
			continue
		}
		want := offset(r.Of, "master_repl_offset")
		Eventually(t, 10*time.Second, "replica "+r.Addr+" to catch up with "+r.Of, func() bool {
			return offset(r.Addr, "slave_repl_offset") >= want
		})
	}
}

// ResetCommandStats zeroes INFO commandstats on every master (CONFIG
// RESETSTAT), so that CommandShares counts what follows.
func ResetCommandStats(t testing.TB, client *redis.ClusterClient) {
	t.Helper()
	err := client.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		return m.ConfigResetStat(ctx).Err()
	})
	if err != nil {
		t.Fatalf("CONFIG RESETSTAT on the masters: %v", err)
	}
}

// CommandShares reads INFO commandstats on every master and describes the
// share of all commands each served, e.g. "127.0.0.1:7000 33.1 % (41021
// calls), …", in address order.
func CommandShares(t testing.TB, client *redis.ClusterClient) string {
	t.Helper()
	var mu sync.Mutex
	calls := map[string]int64{}
	err := client.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		info, err := m.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		var n int64
		for _, l := range strings.Split(info, "\r\n") {
			// cmdstat_evalsha:calls=123,usec=…
			if _, rest, ok := strings.Cut(l, ":calls="); ok && strings.HasPrefix(l, "cmdstat_") {
				v, _, _ := strings.Cut(rest, ",")
				k, _ := strconv.ParseInt(v, 10, 64)
				n += k
			}
		}
		mu.Lock()
		calls[m.Options().Addr] = n
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatalf("INFO commandstats on the masters: %v", err)
	}
	var total int64
	addrs := make([]string, 0, len(calls))
	for a, n := range calls {
		total += n
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	var parts []string
	for _, a := range addrs {
		parts = append(parts, fmt.Sprintf("%s %.1f %% (%d calls)", a, 100*float64(calls[a])/float64(max(total, 1)), calls[a]))
	}
	return strings.Join(parts, ", ")
}
