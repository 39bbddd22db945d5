package replication

import (
	"testing"
	"time"
)

// A primary's INFO replication: online replicas within the lag bound count online, one
// catching up (wait_bgsave) or silent for 11 s only known; the replica-side fields
// (slave_read_repl_offset, slave_repl_offset) are no replicas.
//
// Broken variant tried: every "slave…" line counted (slave_repl_offset made 5 known).
func TestReplicasOf(t *testing.T) {
	info := "# Replication\r\nrole:master\r\nconnected_slaves:3\r\n" +
		"slave0:ip=127.0.0.1,port=7001,state=online,offset=42,lag=0\r\n" +
		"slave1:ip=127.0.0.1,port=7002,state=wait_bgsave,offset=0,lag=0\r\n" +
		"slave2:ip=127.0.0.1,port=7003,state=online,offset=40,lag=11\r\n" +
		"slave_read_repl_offset:42\r\nslave_repl_offset:42\r\nmaster_repl_offset:42\r\n"
	if online, known := replicasOf(info, 10*time.Second); online != 1 || known != 3 {
		t.Errorf("online %d known %d, want 1 and 3", online, known)
	}
	if online, known := replicasOf(info, 20*time.Second); online != 2 || known != 3 {
		t.Errorf("lag bound 20s: online %d known %d, want 2 and 3", online, known)
	}
}

// CLUSTER NODES as a primary sees it: a failed replica of its own still counts, a node in
// handshake does not, a failed primary without slots is a node but serves nothing.
func TestParseClusterNodes(t *testing.T) {
	nodes := "a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460\n" +
		"b1 127.0.0.1:7001@17001 master - 0 0 2 connected 5461-10922\n" +
		"c1 127.0.0.1:7002@17002 master - 0 0 3 connected 10923-16383\n" +
		"a2 127.0.0.1:7003@17003 slave,fail a1 0 0 1 disconnected\n" +
		"b2 127.0.0.1:7004@17004 slave b1 0 0 2 connected\n" +
		"c0 127.0.0.1:7005@17005 master,fail - 0 0 0 disconnected\n" +
		"d9 127.0.0.1:7006@17006 handshake - 0 0 0 connected\n"
	got := parseClusterNodes(nodes)
	if want := (topology{nodes: 6, primaries: 3, replicasOfMyself: 1}); got != want {
		t.Errorf("%+v, want %+v", got, want)
	}
}

// Whatever a server answers, the counts stay within what was read.
func FuzzReplicasParse(f *testing.F) {
	f.Add("slave0:ip=127.0.0.1,port=7001,state=online,offset=42,lag=0\nslave_repl_offset:1", "a myself,master - 0 0 1 connected 0-5460\nb x slave a 0 0 1 connected")
	f.Add("slave0:state=online,lag=-5\nslave1:lag=x,state=online", "a b c d e f g h\n\n")
	f.Fuzz(func(t *testing.T, info, nodes string) {
		online, known := replicasOf(info, MaxLagDefault)
		if online < 0 || online > known {
			t.Errorf("online %d known %d", online, known)
		}
		tp := parseClusterNodes(nodes)
		if tp.primaries > tp.nodes || tp.replicasOfMyself > tp.nodes || tp.primaries < 0 {
			t.Errorf("%+v", tp)
		}
	})
}
