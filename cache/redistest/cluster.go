package redistest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Node is one redis-server process of a Cluster or a Sentinel setup. Unlike Server it
// keeps its working directory, so a killed node restarts with the same identity
// (the cluster's nodes.conf, a sentinel's config).
type Node struct {
	// Port is the node's port on 127.0.0.1.
	Port int
	args []string
	dir  string
	cmd  *exec.Cmd
	t    testing.TB
}

// Addr returns "127.0.0.1:port".
func (n *Node) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.Port) }

// Kill stops the node at once (idempotent).
func (n *Node) Kill() {
	if n.cmd != nil && n.cmd.Process != nil && n.cmd.ProcessState == nil {
		_ = n.cmd.Process.Kill()
		_ = n.cmd.Wait()
	}
}

// Stop freezes the node with SIGSTOP (it keeps its connections but answers nothing);
// Continue resumes it.
func (n *Node) Stop() { _ = n.cmd.Process.Signal(syscall.SIGSTOP) }

// Continue resumes a node frozen by Stop.
func (n *Node) Continue() { _ = n.cmd.Process.Signal(syscall.SIGCONT) }

// Restart starts a killed node again on its port, with its working directory.
func (n *Node) Restart() {
	n.t.Helper()
	n.Kill()
	n.start()
}

func (n *Node) start() {
	n.t.Helper()
	bin := serverBinary(n.t)
	n.cmd = exec.Command(bin, n.args...)
	n.cmd.Dir = n.dir
	var out bytes.Buffer
	n.cmd.Stdout, n.cmd.Stderr = &out, &out
	if err := n.cmd.Start(); err != nil {
		n.t.Fatalf("starting redis-server on %s: %v", n.Addr(), err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", n.Addr(), 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("redis-server on %s did not listen within 10s: %s", n.Addr(), out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func serverBinary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (apt-get install -y redis-server); skipping a test that runs its own Redis")
	}
	return bin
}

// freePorts returns n distinct free ports on 127.0.0.1. Cluster nodes also listen on
// port+10000 (the cluster bus), so a port is only taken when that one is free too.
func freePorts(t testing.TB, n int, bus bool) []int {
	t.Helper()
	var ports []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		p := l.Addr().(*net.TCPAddr).Port
		if bus {
			if p+10000 > 65535 {
				continue
			}
			bl, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
			if err != nil {
				continue
			}
			held = append(held, bl)
		}
		ports = append(ports, p)
	}
	return ports
}

func newNode(t testing.TB, port int, args ...string) *Node {
	t.Helper()
	dir := t.TempDir()
	n := &Node{Port: port, dir: dir, t: t,
		args: append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir}, args...)}
	t.Cleanup(n.Kill)
	return n
}

// Cluster is a Redis Cluster of redis-server processes the test owns.
type Cluster struct {
	// Masters are the nodes that held slots when the cluster was created, in port
	// order; Replicas are their replicas (one each when asked for).
	Masters  []*Node
	Replicas []*Node
}

// StartCluster runs a Redis Cluster of masters nodes (at least 3), each with
// replicasPerMaster replicas, on free ports, creates it with redis-cli --cluster
// create, and waits until every node reports cluster_state:ok. It skips the test when
// redis-server or redis-cli is not installed. Every node is killed when the test ends.
func StartCluster(t testing.TB, masters, replicasPerMaster int) *Cluster {
	t.Helper()
	serverBinary(t)
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli is not installed (apt-get install -y redis-tools); skipping a Redis Cluster test")
	}
	total := masters * (1 + replicasPerMaster)
	ports := freePorts(t, total, true)
	var nodes []*Node
	for _, p := range ports {
		n := newNode(t, p, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "1500", "--cluster-require-full-coverage", "no",
			"--cluster-allow-reads-when-down", "yes", "--cluster-replica-validity-factor", "0")
		n.start()
		nodes = append(nodes, n)
	}
	args := []string{"--cluster", "create"}
	for _, n := range nodes {
		args = append(args, n.Addr())
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicasPerMaster), "--cluster-yes")
	out, err := exec.Command(cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c := &Cluster{}
	// redis-cli makes the first `masters` addresses masters and the rest replicas.
	c.Masters, c.Replicas = nodes[:masters], nodes[masters:]
	c.WaitHealthy(t, 20*time.Second)
	return c
}

// Addrs returns every master's address (seed nodes for a cluster client).
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.Masters {
		out = append(out, n.Addr())
	}
	return out
}

// Nodes returns every node, masters first.
func (c *Cluster) Nodes() []*Node { return append(append([]*Node(nil), c.Masters...), c.Replicas...) }

// WaitHealthy waits until every running node reports cluster_state:ok and every
// slot is served.
func (c *Cluster) WaitHealthy(t testing.TB, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		bad := ""
		for _, n := range c.Nodes() {
			if n.cmd.ProcessState != nil {
				continue // killed
			}
			info, err := nodeCommand(n, "CLUSTER", "INFO")
			if err != nil {
				bad = fmt.Sprintf("%s: %v", n.Addr(), err)
				break
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
				bad = n.Addr() + ": " + firstLines(info, 4)
				break
			}
		}
		if bad == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis cluster not healthy within %s: %s", within, bad)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// MasterFor returns the node that currently serves key's slot as master, asking the
// first running node.
func (c *Cluster) MasterFor(t testing.TB, key string) *Node {
	t.Helper()
	ctx := context.Background()
	for _, n := range c.Nodes() {
		if n.cmd.ProcessState != nil {
			continue
		}
		cl := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
		slot, err := cl.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			_ = cl.Close()
			continue
		}
		slots, err := cl.ClusterSlots(ctx).Result()
		_ = cl.Close()
		if err != nil {
			continue
		}
		for _, s := range slots {
			if int(slot) >= s.Start && int(slot) <= s.End && len(s.Nodes) > 0 {
				for _, m := range c.Nodes() {
					if m.Addr() == s.Nodes[0].Addr {
						return m
					}
				}
			}
		}
	}
	t.Fatalf("no running node knows who serves %q", key)
	return nil
}

// ReplicaOf returns the running node that replicates master now, asking each
// running node that is not master for its master's port; the test fails when none
// does.
func (c *Cluster) ReplicaOf(t testing.TB, master *Node) *Node {
	t.Helper()
	want := "master_port:" + strconv.Itoa(master.Port)
	for _, n := range c.Nodes() {
		if n == master || n.cmd.ProcessState != nil {
			continue
		}
		info, err := nodeCommand(n, "INFO", "replication")
		if err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, want+"\r\n") {
			return n
		}
	}
	t.Fatalf("no running node replicates %s", master.Addr())
	return nil
}

// Do sends one command to the node alone (no cluster redirection) and returns its
// reply as go-redis decodes it.
func (n *Node) Do(args ...any) (any, error) {
	cl := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer cl.Close()
	return cl.Do(context.Background(), args...).Result()
}

func nodeCommand(n *Node, args ...any) (string, error) {
	cl := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer cl.Close()
	return cl.Do(context.Background(), args...).Text()
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.TrimSpace(strings.Join(lines, " "))
}

// Sentinel is one master, its replicas and three sentinels watching them, all
// redis-server processes the test owns.
type Sentinel struct {
	// MasterName is the name the sentinels monitor the master under.
	MasterName string
	// Master is the initial master; Replicas replicate it.
	Master   *Node
	Replicas []*Node
	// Sentinels are the sentinel processes.
	Sentinels []*Node
}

// StartSentinel runs a master, replicas replicas of it and three sentinels (quorum 2,
// down-after 1s) on free ports, and waits until the sentinels agree on the master
// and see every replica. It skips the test when redis-server is not installed.
func StartSentinel(t testing.TB, replicas int) *Sentinel {
	t.Helper()
	serverBinary(t)
	ports := freePorts(t, 1+replicas+3, false)
	s := &Sentinel{MasterName: "factgate-test"}
	s.Master = newNode(t, ports[0])
	s.Master.start()
	for i := 0; i < replicas; i++ {
		r := newNode(t, ports[1+i], "--replicaof", "127.0.0.1", strconv.Itoa(ports[0]))
		r.start()
		s.Replicas = append(s.Replicas, r)
	}
	for i := 0; i < 3; i++ {
		p := ports[1+replicas+i]
		n := newNode(t, p)
		conf := fmt.Sprintf("port %d\nbind 127.0.0.1\nsentinel resolve-hostnames no\n"+
			"sentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %s 1000\n"+
			"sentinel failover-timeout %s 4000\n"+
			"sentinel parallel-syncs %s 1\n", p, s.MasterName, ports[0], s.MasterName, s.MasterName, s.MasterName)
		path := filepath.Join(n.dir, "sentinel.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		// A sentinel rewrites its config file; it must come first, then --sentinel.
		n.args = []string{path, "--sentinel"}
		n.start()
		s.Sentinels = append(s.Sentinels, n)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if s.ready() {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("sentinels did not see master %s with %d replica(s) within 20s", s.Master.Addr(), replicas)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ready reports whether every sentinel can take part in a failover at once: it
// names the master, knows the two other sentinels (a leader needs their votes),
// and has a report from every replica whose link to the master is up (a
// sentinel promotes only a replica it has heard from).
func (s *Sentinel) ready() bool {
	ctx := context.Background()
	for _, n := range s.Sentinels {
		cl := redis.NewSentinelClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
		ok := func() bool {
			defer cl.Close()
			addr, err := cl.GetMasterAddrByName(ctx, s.MasterName).Result()
			if err != nil || len(addr) != 2 || addr[1] != strconv.Itoa(s.Master.Port) {
				return false
			}
			m, err := cl.Master(ctx, s.MasterName).Result()
			if err != nil || m["num-other-sentinels"] != strconv.Itoa(len(s.Sentinels)-1) {
				return false
			}
			reps, err := cl.Replicas(ctx, s.MasterName).Result()
			if err != nil || len(reps) < len(s.Replicas) {
				return false
			}
			for _, r := range reps {
				if r["master-link-status"] != "ok" || strings.Contains(r["flags"], "disconnected") {
					return false
				}
			}
			return true
		}()
		if !ok {
			return false
		}
	}
	return true
}

// Addrs returns the sentinels' addresses.
func (s *Sentinel) Addrs() []string {
	var out []string
	for _, n := range s.Sentinels {
		out = append(out, n.Addr())
	}
	return out
}

// CurrentMaster asks the sentinels which address is the master now.
func (s *Sentinel) CurrentMaster(t testing.TB) string {
	t.Helper()
	for _, n := range s.Sentinels {
		cl := redis.NewSentinelClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		addr, err := cl.GetMasterAddrByName(context.Background(), s.MasterName).Result()
		_ = cl.Close()
		if err == nil && len(addr) == 2 {
			return net.JoinHostPort(addr[0], addr[1])
		}
	}
	t.Fatalf("no sentinel answers for %s", s.MasterName)
	return ""
}
