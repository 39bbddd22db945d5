package order

// SetCrash makes p's steps fail where crash says (see Processor.crash).
func SetCrash(p *Processor, crash func(point string) error) { p.crash = crash }

// DoneKey is the key of an entity's done marker for an event id.
var DoneKey = doneKey

// AckResults runs ack.lua as flush does, and AckHash is its SHA-1.
var (
	AckResults = ackResults
	AckHash    = ackScript.Hash()
)

// CommitHash is commit.lua's SHA-1.
var CommitHash = commitScript.Hash()
