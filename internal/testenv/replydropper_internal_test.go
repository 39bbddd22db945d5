package testenv

import (
	"bufio"
	"slices"
	"strings"
	"testing"
)

// The proxy relays whole replies and counts them: a nested RESP3 reply is one, a push is
// not a command's, and a command's arguments come back as sent.
//
// Broken variant tried: readValue not reading a map's values: the map's reply was cut in
// two and the count was off by one.
func TestReplyDropperReadsWholeReplies(t *testing.T) {
	replies := []string{
		"+OK\r\n",
		"$5\r\nhello\r\n",
		"$-1\r\n",
		"*2\r\n:1\r\n*1\r\n$3\r\nabc\r\n",
		"%1\r\n+k\r\n*2\r\n_\r\n,1.5\r\n",
		">2\r\n$7\r\nmessage\r\n$1\r\nx\r\n",
		"-NOSCRIPT No matching script\r\n",
	}
	r := bufio.NewReader(strings.NewReader(strings.Join(replies, "")))
	for i, want := range replies {
		raw, push, err := readReply(r)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if string(raw) != want {
			t.Errorf("reply %d: %q, want %q", i, raw, want)
		}
		if push != strings.HasPrefix(want, ">") {
			t.Errorf("reply %d: push %v", i, push)
		}
	}
	cmd := "*3\r\n$7\r\nevalsha\r\n$2\r\nab\r\n$0\r\n\r\n"
	raw, args, err := readCommand(bufio.NewReader(strings.NewReader(cmd)))
	if err != nil || string(raw) != cmd || !slices.Equal(args, []string{"evalsha", "ab", ""}) {
		t.Errorf("command: %q %q %v", raw, args, err)
	}
	if !ScriptCall("AB")([]string{"EVALSHA", "ab"}) || ScriptCall("ab")([]string{"GET", "ab"}) {
		t.Error("ScriptCall matches the wrong commands")
	}
}
