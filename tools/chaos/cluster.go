package chaos

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/lockhandoff"
)

// redisCluster is chaos's own Redis Cluster for the failover scenario: three masters with
// one replica each, started by the repository's scripts/redis-cluster.sh in the run's
// directory (AOF on, a short cluster-node-timeout), so that killing a master disturbs
// nothing else. The script owns the nodes' configuration; chaos asks it to kill and
// start nodes and reads the topology with CLUSTER NODES.
type redisCluster struct {
	script string
	dir    string
	log    string
	seed   string
	nodes  []string // host:port of every node, masters and replicas
	// proxies, when set, stand in front of every node: each node announces its proxy's
	// port (cluster-announce-port), so cluster clients and replication links go through
	// them, and topology maps the announced addresses back to the nodes'.
	proxies proxies
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr string
	master   bool
	failing  bool   // fail or fail? (suspected)
	masterID string // of a replica
	linked   bool   // the link to it is connected
	slots    []slotRange
}

type slotRange struct{ from, to int }

func (r slotRange) String() string {
	if r.from == r.to {
		return strconv.Itoa(r.from)
	}
	return fmt.Sprintf("%d-%d", r.from, r.to)
}

func (n clusterNode) slotsString() string {
	var s []string
	for _, r := range n.slots {
		s = append(s, r.String())
	}
	return strings.Join(s, ",")
}

func (n clusterNode) owns(slot int) bool {
	return slices.ContainsFunc(n.slots, func(r slotRange) bool { return slot >= r.from && slot <= r.to })
}

// clusterScript finds scripts/redis-cluster.sh: in the repository found upwards from
// the working directory, else beside the running executable's directory (a bin/ next to
// scripts/).
func clusterScript() (string, error) {
	var dirs []string
	if root := repoRoot(); root != "" {
		dirs = append(dirs, root)
	}
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(filepath.Dir(exe)))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "scripts", "redis-cluster.sh")
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("chaos: the Redis Cluster scenario needs the repository's scripts/redis-cluster.sh: run it inside the repository")
}

// startCluster starts the cluster in dir/redis-cluster and returns once every node says
// cluster_state:ok and every replica is in sync with its master.
func startCluster(ctx context.Context, dir string, nodeTimeout time.Duration, replicas int) (*redisCluster, error) {
	for _, b := range []string{"redis-server", "redis-cli", "python3"} {
		if _, err := exec.LookPath(b); err != nil {
			return nil, fmt.Errorf("chaos: the Redis Cluster scenario needs %s: %w", b, err)
		}
	}
	script, err := clusterScript()
	if err != nil {
		return nil, err
	}
	c := &redisCluster{script: script, dir: filepath.Join(dir, "redis-cluster"), log: logPath(dir, "redis-cluster")}
	out, err := c.run(ctx, "up", "--replicas", strconv.Itoa(replicas), "--aof", "everysec",
		"--node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10), c.dir)
	if err != nil {
		// The script stops what it started when it fails, not when it is cut short.
		c.close(false)
		return nil, err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "SEED="); ok {
			c.seed = v
		}
		if v, ok := strings.CutPrefix(line, "NODE="); ok {
			c.nodes = append(c.nodes, v)
		}
	}
	if c.seed == "" || len(c.nodes) != 3*(1+replicas) {
		c.close(false)
		return nil, fmt.Errorf("chaos: %s up printed no seed or not %d nodes:\n%s", script, 3*(1+replicas), out)
	}
	return c, nil
}

// run runs the script; its stderr goes to the cluster's log, its stdout is returned.
func (c *redisCluster) run(ctx context.Context, args ...string) ([]byte, error) {
	f, err := os.OpenFile(c.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fmt.Fprintf(f, "=== %s redis-cluster.sh %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(args, " "))
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, c.script, args...)
	cmd.Stdout, cmd.Stderr = &out, f
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("chaos: redis-cluster.sh %s: %w; see %s", args[0], err, c.log)
	}
	return out.Bytes(), nil
}

// url is a cluster URL naming every node, so that a client starting while one is down
// still finds the cluster.
func (c *redisCluster) url() string {
	u := "redis://" + c.proxies.of(c.seed)
	sep := "?"
	for _, n := range c.nodes {
		if n != c.seed {
			u += sep + "addr=" + c.proxies.of(n)
			sep = "&"
		}
	}
	return u
}

// behindProxies puts a cutProxy in front of every node and has each node announce its
// proxy's port (CONFIG SET cluster-announce-port, written to its redis.conf so that a
// restart keeps it); it returns once every node's CLUSTER NODES names the proxies only.
func (c *redisCluster) behindProxies(ctx context.Context, timeout time.Duration) error {
	ps, err := startProxies(c.nodes)
	if err != nil {
		return err
	}
	c.proxies = ps
	for _, a := range c.nodes {
		rc := node(a)
		err := rc.ConfigSet(ctx, "cluster-announce-port", strconv.Itoa(ps[a].port())).Err()
		if err == nil {
			err = rc.ConfigRewrite(ctx).Err()
		}
		rc.Close()
		if err != nil {
			return fmt.Errorf("chaos: announce the proxy of %s: %w", a, err)
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		left := ""
		for _, a := range c.nodes {
			rc := node(a)
			s, err := rc.ClusterNodes(ctx).Result()
			rc.Close()
			if err != nil {
				left = a + ": " + err.Error()
				break
			}
			for _, n := range c.nodes {
				if strings.Contains(s, " "+n+"@") {
					left = a + " still sees " + n
				}
			}
		}
		if left == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: the proxies' ports not announced within %s: %s", timeout, left)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// close stops the nodes; keep leaves their directories (logs, AOF, nodes.conf).
func (c *redisCluster) close(keep bool) {
	c.proxies.close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	what := "down"
	if keep {
		what = "stop"
	}
	c.run(ctx, what, c.dir)
}

func port(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }

// node is a plain client of one node.
func node(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
}

// topology is CLUSTER NODES as the first node to answer (other than skip) sees it.
func (c *redisCluster) topology(ctx context.Context, skip string) ([]clusterNode, error) {
	var last error
	for _, a := range c.nodes {
		if a == skip {
			continue
		}
		rc := node(a)
		s, err := rc.ClusterNodes(ctx).Result()
		rc.Close()
		if err != nil {
			last = err
			continue
		}
		nodes, err := parseClusterNodes(s)
		for i := range nodes {
			nodes[i].addr = c.proxies.node(nodes[i].addr)
		}
		return nodes, err
	}
	return nil, fmt.Errorf("chaos: no cluster node answers: %w", last)
}

// parseClusterNodes reads CLUSTER NODES: id addr@bus flags master-id ping pong epoch
// link slot...
func parseClusterNodes(s string) ([]clusterNode, error) {
	var out []clusterNode
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("chaos: CLUSTER NODES line %q", sc.Text())
		}
		n := clusterNode{id: f[0], addr: strings.SplitN(f[1], "@", 2)[0], linked: f[7] == "connected"}
		for _, flag := range strings.Split(f[2], ",") {
			switch flag {
			case "master":
				n.master = true
			case "fail", "fail?":
				n.failing = true
			}
		}
		if f[3] != "-" {
			n.masterID = f[3]
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated
			}
			from, to, ok := strings.Cut(r, "-")
			if !ok {
				to = from
			}
			a, err1 := strconv.Atoi(from)
			b, err2 := strconv.Atoi(to)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("chaos: CLUSTER NODES slots %q", r)
			}
			n.slots = append(n.slots, slotRange{a, b})
		}
		out = append(out, n)
	}
	return out, sc.Err()
}

// victim picks the master to kill and returns it with its replicas, the first of them in
// sync. Among the masters that serve slots and have a replica in sync it takes the i-th
// (round robin, by first slot); with preferDue, the one whose slots hold the most due
// entries of holds instead (ties: round robin), so that the failover meets holds about to
// end. due is the number of due entries on the victim.
func (c *redisCluster) victim(ctx context.Context, i int, preferDue bool) (m clusterNode, replicas []clusterNode, due int64, err error) {
	nodes, err := c.topology(ctx, "")
	if err != nil {
		return clusterNode{}, nil, 0, err
	}
	type pair struct {
		m   clusterNode
		rs  []clusterNode
		due int64
	}
	var pairs []pair
	for _, m := range nodes {
		if !m.master || m.failing || len(m.slots) == 0 {
			continue
		}
		var synced, others []clusterNode
		for _, r := range nodes {
			if r.master || r.masterID != m.id {
				continue
			}
			if !r.failing && r.linked && c.inSync(ctx, r.addr) == nil {
				synced = append(synced, r)
			} else {
				others = append(others, r)
			}
		}
		if len(synced) > 0 {
			pairs = append(pairs, pair{m: m, rs: append(synced, others...)})
		}
	}
	if len(pairs) == 0 {
		return clusterNode{}, nil, 0, errors.New("chaos: no master with a replica in sync to kill")
	}
	slices.SortFunc(pairs, func(a, b pair) int { return a.m.slots[0].from - b.m.slots[0].from })
	for k := range pairs {
		if pairs[k].due, err = dueEntries(ctx, pairs[k].m.addr); err != nil {
			return clusterNode{}, nil, 0, err
		}
	}
	p := pairs[i%len(pairs)]
	if preferDue {
		for k := range pairs {
			if q := pairs[(i+k)%len(pairs)]; q.due > p.due {
				p = q
			}
		}
	}
	return p.m, p.rs, p.due, nil
}

// dueEntries counts the entries of the holds' due index (order.DueKey's shards) on the
// node at addr.
func dueEntries(ctx context.Context, addr string) (int64, error) {
	rc := node(addr)
	defer rc.Close()
	var n int64
	iter := rc.Scan(ctx, 0, lockhandoff.Key(KeyPrefix, "junban-due:*", "due"), 1000).Iterator()
	for iter.Next(ctx) {
		c, err := rc.ZCard(ctx, iter.Val()).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return 0, err
		}
		n += c
	}
	return n, iter.Err()
}

// inSync tells (nil) whether the node at addr is a replica whose link to its master is
// up with the initial sync done.
func (c *redisCluster) inSync(ctx context.Context, addr string) error {
	rc := node(addr)
	defer rc.Close()
	info, err := rc.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	switch {
	case !strings.Contains(info, "role:slave"):
		return fmt.Errorf("%s is not a replica", addr)
	case !strings.Contains(info, "master_link_status:up"), !strings.Contains(info, "master_sync_in_progress:0"):
		return fmt.Errorf("%s is not in sync with its master", addr)
	}
	return nil
}

// probeKey returns a key that hashes to the node's first slot, asking the cluster.
func (c *redisCluster) probeKey(ctx context.Context, n clusterNode) (string, error) {
	rc := node(n.addr)
	defer rc.Close()
	for i := range 100_000 {
		k := "chaos-probe-" + strconv.Itoa(i)
		slot, err := rc.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			return "", err
		}
		if n.owns(int(slot)) {
			return k, nil
		}
	}
	return "", fmt.Errorf("chaos: no probe key for slots %s", n.slotsString())
}

// waitPromoted waits until the surviving nodes show one of the candidates (the dead
// master's replicas) as a master serving slots and the cluster client rc reads a key of
// the dead master's slots again. It returns the promoted node.
func (c *redisCluster) waitPromoted(ctx context.Context, rc redis.UniversalClient, dead clusterNode, candidates []clusterNode, probe string, timeout time.Duration) (clusterNode, error) {
	deadline := time.Now().Add(timeout)
	var promoted *clusterNode
	for {
		if promoted == nil {
			if nodes, err := c.topology(ctx, dead.addr); err == nil {
				for _, n := range nodes {
					if n.master && !n.failing && len(n.slots) > 0 && slices.ContainsFunc(candidates, func(r clusterNode) bool { return r.id == n.id }) {
						promoted = &n
					}
				}
			}
		}
		if promoted != nil {
			err := rc.Get(ctx, probe).Err()
			if err == nil || errors.Is(err, redis.Nil) {
				return *promoted, nil
			}
			if cc, ok := rc.(*redis.ClusterClient); ok {
				// The client may still route the slots to the dead node: ask again.
				cc.ReloadState(ctx)
			}
		}
		if time.Now().After(deadline) {
			return clusterNode{}, fmt.Errorf("chaos: no replica of %s promoted within %s (promoted in CLUSTER NODES: %v)", dead.addr, timeout, promoted != nil)
		}
		select {
		case <-ctx.Done():
			return clusterNode{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// restart starts a killed node again and waits until it is a replica in sync, or a
// master again (when no replica took its slots). It returns its role.
func (c *redisCluster) restart(ctx context.Context, n clusterNode, timeout time.Duration) (string, error) {
	if _, err := c.run(ctx, "start", c.dir, port(n.addr)); err != nil {
		return "", err
	}
	deadline := time.Now().Add(timeout)
	for {
		err := c.inSync(ctx, n.addr)
		if err == nil {
			return "replica", nil
		}
		if nodes, terr := c.topology(ctx, ""); terr == nil {
			for _, m := range nodes {
				if m.id == n.id && m.master && len(m.slots) > 0 {
					return "master", nil
				}
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("chaos: %s did not rejoin within %s: %w", n.addr, timeout, err)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// kill SIGKILLs a node and returns once its port is closed.
func (c *redisCluster) kill(ctx context.Context, n clusterNode) error {
	_, err := c.run(ctx, "kill", c.dir, port(n.addr))
	return err
}

// pause SIGSTOPs a node, resume SIGCONTs it.
func (c *redisCluster) pause(ctx context.Context, n clusterNode) error {
	_, err := c.run(ctx, "pause", c.dir, port(n.addr))
	return err
}

func (c *redisCluster) resume(ctx context.Context, n clusterNode) error {
	_, err := c.run(ctx, "resume", c.dir, port(n.addr))
	return err
}

// cutReplicas closes the master's replication links (CLIENT KILL TYPE replica): what it
// acknowledges from then on stays in its own memory until a replica reconnects.
func (c *redisCluster) cutReplicas(ctx context.Context, master clusterNode) error {
	rc := node(master.addr)
	defer rc.Close()
	if err := rc.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		return fmt.Errorf("chaos: CLIENT KILL TYPE replica on %s: %w", master.addr, err)
	}
	return nil
}
