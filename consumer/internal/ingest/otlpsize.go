package ingest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

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
	return countIn(b, planOf(md, map[protoreflect.FullName]*countPlan{}), &budget, limit, 0)
}

// countPlan is where a message's message fields are, by field number: the
// count looks each field up in a slice, not through the descriptor (which
// cost a third of the decode's time on a real export).
type countPlan struct {
	name   protoreflect.FullName
	fields []*countPlan // nil where the field number is not a message field
}

// maxPlannedField bounds the field numbers a plan indexes (OTLP's are below 20).
const maxPlannedField = 1 << 10

// planOf is md's plan; seen ties recursive messages (AnyValue in
// ArrayValue in AnyValue) to one plan each.
func planOf(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]*countPlan) *countPlan {
	if p := seen[md.FullName()]; p != nil {
		return p
	}
	p := &countPlan{name: md.FullName()}
	seen[md.FullName()] = p
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Message() == nil || int(fd.Number()) >= maxPlannedField {
			continue
		}
		if n := int(fd.Number()) + 1; n > len(p.fields) {
			p.fields = append(p.fields, make([]*countPlan, n-len(p.fields))...)
		}
		p.fields[fd.Number()] = planOf(fd.Message(), seen)
	}
	return p
}

// sub is the plan of field num, or nil when it is not a message field.
func (p *countPlan) sub(num protowire.Number) *countPlan {
	if int(num) < len(p.fields) {
		return p.fields[num]
	}
	return nil
}

func countIn(b []byte, p *countPlan, budget *int, limit, depth int) error {
	*budget--
	if *budget < 0 {
		return &ElementsError{Limit: limit, Setting: otlpElementsSetting, Message: string(p.name)}
	}
	if depth > otlpRecursionLimit {
		return nil // the decoder refuses it
	}
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
		if sub := p.sub(num); sub != nil {
			if err := countIn(v, sub, budget, limit, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// countJSONElements bounds the messages an OTLP/JSON body decodes into by
// its objects: every message is one, outside strings.
func countJSONElements(b []byte, md protoreflect.MessageDescriptor, limit int) error {
	var j jsonObjects
	return j.scan(b, md, limit)
}

// jsonObjects counts the objects of a JSON text given in pieces.
type jsonObjects struct {
	n                 int
	inString, escaped bool
}

// scan counts the objects opening in b, an *ElementsError past limit.
func (j *jsonObjects) scan(b []byte, md protoreflect.MessageDescriptor, limit int) error {
	for _, c := range b {
		switch {
		case j.escaped:
			j.escaped = false
		case j.inString:
			switch c {
			case '\\':
				j.escaped = true
			case '"':
				j.inString = false
			}
		case c == '"':
			j.inString = true
		case c == '{':
			if j.n++; j.n > limit {
				return &ElementsError{Limit: limit, Setting: otlpElementsSetting, Message: string(md.FullName())}
			}
		}
	}
	return nil
}

// readCounted reads a decompressed body into buf, counting its messages as
// they arrive, so that a body of many small messages is refused once the
// count passes limit, not after all of it is held: the top-level fields are
// read one at a time (each message among them counted whole), an OTLP/JSON
// body's objects as its bytes come. maxBody bounds what is read (413).
// A body it returns without error is counted whole: what the field-by-field
// count cannot follow (a group, a field it cannot parse) is counted after.
func readCounted(r io.Reader, isJSON bool, md protoreflect.MessageDescriptor, limit int, maxBody int64, buf *bytes.Buffer) error {
	if isJSON {
		return readCountedJSON(r, md, limit, maxBody, buf)
	}
	br := bufio.NewReaderSize(r, 32<<10)
	tee := teeByteReader{r: br, buf: buf} // varints land in buf byte for byte, as they were sent
	budget := limit - 1                   // the request itself
	plan := planOf(md, map[protoreflect.FullName]*countPlan{})
	for {
		if _, err := br.Peek(1); err == io.EOF {
			return nil
		}
		tag, err := binary.ReadUvarint(tee)
		if err != nil {
			return copyRest(br, md, limit, maxBody, buf)
		}
		num, typ := protowire.DecodeTag(tag)
		switch typ {
		case protowire.BytesType:
			n, err := binary.ReadUvarint(tee)
			if err != nil {
				return copyRest(br, md, limit, maxBody, buf)
			}
			if n > uint64(maxBody) || int64(buf.Len())+int64(n) > maxBody {
				return copyRest(br, md, limit, maxBody, buf) // over the limit, or a length the body does not have
			}
			start := buf.Len()
			buf.Grow(int(n))
			if _, err := io.CopyN(buf, br, int64(n)); err != nil {
				return copyRest(br, md, limit, maxBody, buf)
			}
			if sub := plan.sub(num); sub != nil {
				if err := countIn(buf.Bytes()[start:], sub, &budget, limit, 1); err != nil {
					return err
				}
			}
		case protowire.VarintType:
			if _, err := binary.ReadUvarint(tee); err != nil {
				return copyRest(br, md, limit, maxBody, buf)
			}
		case protowire.Fixed32Type, protowire.Fixed64Type:
			size := int64(4)
			if typ == protowire.Fixed64Type {
				size = 8
			}
			if _, err := io.CopyN(buf, br, size); err != nil {
				return copyRest(br, md, limit, maxBody, buf)
			}
		default: // groups: not in OTLP; the rest is read as it is, and the decoder judges it
			return copyRest(br, md, limit, maxBody, buf)
		}
		if int64(buf.Len()) > maxBody {
			return errBodyTooLarge
		}
	}
}

// teeByteReader reads bytes from r and keeps each in buf.
type teeByteReader struct {
	r   *bufio.Reader
	buf *bytes.Buffer
}

func (t teeByteReader) ReadByte() (byte, error) {
	c, err := t.r.ReadByte()
	if err == nil {
		t.buf.WriteByte(c)
	}
	return c, err
}

// errBodyTooLarge is a decompressed body over limits.otlp_bytes.
var errBodyTooLarge = errors.New("decompressed body exceeds limits.otlp_bytes")

// copyRest reads what is left of a body whose fields stopped parsing (the
// decoder will judge it), within maxBody, and counts the whole body. A
// reader that failed fails again here, and its error is returned.
func copyRest(r io.Reader, md protoreflect.MessageDescriptor, limit int, maxBody int64, buf *bytes.Buffer) error {
	if _, err := buf.ReadFrom(io.LimitReader(r, maxBody-int64(buf.Len())+1)); err != nil {
		return err
	}
	if int64(buf.Len()) > maxBody {
		return errBodyTooLarge
	}
	return countElements(buf.Bytes(), md, limit) // what the field-by-field count did not reach
}

// readCountedJSON reads an OTLP/JSON body, counting its objects as its
// bytes come.
func readCountedJSON(r io.Reader, md protoreflect.MessageDescriptor, limit int, maxBody int64, buf *bytes.Buffer) error {
	chunk := make([]byte, 32<<10)
	var j jsonObjects
	for {
		k, err := r.Read(chunk)
		if serr := j.scan(chunk[:k], md, limit); serr != nil {
			return serr
		}
		buf.Write(chunk[:k])
		if int64(buf.Len()) > maxBody {
			return errBodyTooLarge
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
