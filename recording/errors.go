package recording

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// Parts of a recording upload, as named in errors and problems.
const (
	PartHeader      = "header"
	PartSummary     = "session_summary"
	PartChatHistory = "chat_history"
	PartMultipart   = "multipart"
	PartLocation    = "location"
)

// ErrLimit is wrapped by every ParseError caused by a size or count limit.
var ErrLimit = errors.New("limit exceeded")

// ErrNotMultipart is wrapped by the error for an object that is not a
// multipart upload at all (no boundary where one must start): not a
// damaged upload but something else, e.g. a file given by mistake.
var ErrNotMultipart = errors.New("not a multipart upload")

// ParseError says which part failed, where (item index and byte offset when
// known) and which limit was hit, if any. Match limits with errors.Is(err, ErrLimit).
type ParseError struct {
	Part   string // PartHeader, PartChatHistory, …
	Item   int    // item index, or -1
	Offset int64  // byte offset in the part, or -1
	Limit  string // e.g. "max_bytes=33554432", empty when no limit was hit
	Err    error
}

func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString(e.Part)
	if e.Item >= 0 {
		fmt.Fprintf(&b, ": item %d", e.Item)
	}
	if e.Offset >= 0 {
		fmt.Fprintf(&b, ": at byte %d", e.Offset)
	}
	if e.Limit != "" {
		fmt.Fprintf(&b, ": %s", e.Limit)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *ParseError) Unwrap() error { return e.Err }

func parseErr(part string, item int, offset int64, err error) *ParseError {
	return &ParseError{Part: part, Item: item, Offset: offset, Err: err}
}

func limitErr(part string, item int, offset int64, limit string) *ParseError {
	return &ParseError{Part: part, Item: item, Offset: offset, Limit: limit, Err: ErrLimit}
}

// Problem is something wrong with a session that does not stop it from
// being parsed (and scored): it is recorded and reported (the session's
// recording reference and its scorecard's problems carry it).
type Problem struct {
	Part    string `json:"part"`
	Code    string `json:"code"`
	Item    int    `json:"item,omitempty"`
	Message string `json:"message"`
}

// LimitReader returns a reader that fails with ErrLimit once r holds more
// than n bytes. Unlike io.LimitReader it never truncates silently.
func LimitReader(r io.Reader, n int64) io.Reader { return &capReader{r: r, left: n} }
