package console

// The tokens the test consoles' APIs take: one reads, one also acts.
const (
	readToken  = "read-token-0123456789"
	adminToken = "admin-token-0123456789"
)

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
