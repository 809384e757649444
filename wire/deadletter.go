package wire

import (
	"strconv"
	"time"
)

// DeadLetter is one message in the dead-letter stream, as its headers
// describe it (the body is the original message's).
type DeadLetter struct {
	Seq        uint64    `json:"seq"`
	Stage      string    `json:"stage"`
	Error      string    `json:"error"`
	Subject    string    `json:"subject"`
	Stream     string    `json:"stream"`
	StreamSeq  uint64    `json:"stream_seq"`
	Deliveries uint64    `json:"deliveries"`
	At         time.Time `json:"at"`
	SessionKey string    `json:"session_key,omitempty"`
	Bytes      int       `json:"bytes"`
}

// DeadLetterFrom reads the dead letter at stream sequence seq from its
// headers (header returns one header's value) and its body's size.
func DeadLetterFrom(seq uint64, header func(key string) string, size int) DeadLetter {
	u := func(k string) uint64 { v, _ := strconv.ParseUint(header(k), 10, 64); return v }
	at, _ := time.Parse(time.RFC3339Nano, header(HeaderDLQAt))
	return DeadLetter{Seq: seq, Stage: header(HeaderDLQStage), Error: header(HeaderDLQError), Subject: header(HeaderDLQSubject),
		Stream: header(HeaderDLQStream), StreamSeq: u(HeaderDLQSeq), Deliveries: u(HeaderDLQDeliveries), At: at,
		SessionKey: header(HeaderSessionKey), Bytes: size}
}
