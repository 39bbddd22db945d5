package ledger

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/ledger/stock"
)

// scriptError maps an error reply of ledger.lua ("<CODE> <replayed 0|1> <detail>") to
// an error value. ok is false when the reply is not one of the script's codes (a
// connection error, NOSCRIPT, ...).
func scriptError(op, sku string, err error) (e error, replayed, ok bool) {
	msg := err.Error()
	code, rest, _ := strings.Cut(msg, " ")
	sentinel, known := stock.ErrorOfReason(code)
	if !known {
		return err, false, false
	}
	flag, detail, _ := strings.Cut(rest, " ")
	return stock.OpError(op, sku, sentinel, detail), flag == "1", true
}

// Replies of ledger.lua that the Go side answers itself and no caller sees (ledger.lua's
// header says when the script gives them).

// regSeqMoved is ERR_REG_SEQ: the registration number the lot gets (RegisterLot) or has
// (Receive), which its key needs, is not the one the Go side computed the key with.
type regSeqMoved int64

func (n regSeqMoved) Error() string {
	return fmt.Sprintf("ledger: the lot's registration number is %d", int64(n))
}

// regSeqReply returns the registration number of an ERR_REG_SEQ reply.
func regSeqReply(err error) (regSeqMoved, bool) {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return 0, false
	}
	rest, ok := strings.CutPrefix(rerr.Error(), "ERR_REG_SEQ 0 ")
	if !ok {
		return 0, false
	}
	n, perr := strconv.ParseInt(rest, 10, 64)
	return regSeqMoved(n), perr == nil
}

// isReindexReply tells an ERR_REINDEX reply: the SKU's index is in another key layout, or
// a lot has no stored key for its meta.
func isReindexReply(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "ERR_REINDEX ")
}
