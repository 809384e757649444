package ingest

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// What decoding an OTLP body costs grows with the messages in it, not with
// its bytes: an empty ResourceLogs is 2 bytes on the wire and some 100 in
// memory, so 16 MiB of them decode into a gigabyte. The body's messages are
// counted before it is decoded (limits.otlp_elements), from the wire format
// alone: nothing is allocated.

// otlpElementsSetting is the setting an OTLP body's count is held to.
const otlpElementsSetting = "limits.otlp_elements"

// ErrTooManyElements is a body with more messages than limits.otlp_elements.
var ErrTooManyElements = errors.New("too many elements")

// ElementsError says where the count went over.
type ElementsError struct {
	Limit int
	// Setting names the limit (limits.otlp_elements).
	Setting string
	// Message is the full name of the message whose field went over.
	Message string
}

func (e *ElementsError) Error() string {
	return fmt.Sprintf("%v: more than %d messages (%s), over at %s", ErrTooManyElements, e.Limit, e.Setting, e.Message)
}

func (e *ElementsError) Unwrap() error { return ErrTooManyElements }

// countElements counts the messages a protobuf body decodes into as md,
// stopping with an *ElementsError past limit. A body that is not valid
// protobuf is left for the decoder to refuse.
func countElements(b []byte, md protoreflect.MessageDescriptor, limit int) error {
	budget := limit
	return countIn(b, md, &budget, limit, 0)
}

func countIn(b []byte, md protoreflect.MessageDescriptor, budget *int, limit, depth int) error {
	*budget--
	if *budget < 0 {
		return &ElementsError{Limit: limit, Setting: otlpElementsSetting, Message: string(md.FullName())}
	}
	if depth > otlpRecursionLimit {
		return nil // the decoder refuses it
	}
	fields := md.Fields()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if fd := fields.ByNumber(num); fd != nil && fd.Message() != nil {
			if err := countIn(v, fd.Message(), budget, limit, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// countJSONElements bounds the messages an OTLP/JSON body decodes into by
// its objects: every message is one, outside strings.
func countJSONElements(b []byte, md protoreflect.MessageDescriptor, limit int) error {
	n, inString, escaped := 0, false, false
	for _, c := range b {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch c {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{':
			if n++; n > limit {
				return &ElementsError{Limit: limit, Setting: otlpElementsSetting, Message: string(md.FullName())}
			}
		}
	}
	return nil
}
