// Package audio measures turn-taking from a session's stereo recording
// (user on the left channel, agent on the right): Ogg demux per packet, Opus
// decode (pion/opus, pure Go), voice activity per channel, speech segments,
// turns and their metrics. It streams: memory does not grow with the call's
// length. docs/audio.md explains the method and its limits.
package audio

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// maxPacketBytes bounds one Opus packet (RFC 6716: at most 120 ms, 1275
// bytes a frame, 48 frames); a longer one is a corrupt or hostile file.
const maxPacketBytes = 64 << 10

// ErrCorrupt is wrapped by every error about the file's structure.
var ErrCorrupt = errors.New("corrupt or truncated Ogg/Opus")

// oggReader returns an Ogg stream's packets one at a time, with the granule
// position of the page each completes on.
type oggReader struct {
	r       *bufio.Reader
	serial  uint32
	started bool
	seg     []byte // the current page's segment table
	next    int    // next segment in seg
	granule uint64
	eos     bool // the current page ends the stream
	packet  []byte
	offset  int64
}

func newOggReader(r io.Reader) *oggReader {
	return &oggReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// readErr sorts a read failure: a file that ends early is corrupt (or
// truncated); any other failure is the reader's, and the file may be fine.
func readErr(offset int64, what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corrupt(offset, "%s: %v", what, io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("read at byte %d: %w", offset, err)
}

func corrupt(offset int64, format string, a ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrCorrupt, offset, fmt.Sprintf(format, a...))
}

// readPage reads the next page header and segment table.
func (o *oggReader) readPage() error {
	var h [27]byte
	if _, err := io.ReadFull(o.r, h[:]); err != nil {
		if errors.Is(err, io.EOF) && !o.started {
			return corrupt(o.offset, "empty file")
		}
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		return readErr(o.offset, "page header", err)
	}
	if string(h[:4]) != "OggS" || h[4] != 0 {
		return corrupt(o.offset, "no Ogg page here")
	}
	serial := binary.LittleEndian.Uint32(h[14:18])
	if !o.started {
		o.serial, o.started = serial, true
	} else if serial != o.serial {
		return corrupt(o.offset, "a second logical stream (serial %d); chained or multiplexed files are not supported", serial)
	}
	o.granule = binary.LittleEndian.Uint64(h[6:14])
	o.eos = h[5]&0x04 != 0
	n := int(h[26])
	o.seg = make([]byte, n)
	if _, err := io.ReadFull(o.r, o.seg); err != nil {
		return readErr(o.offset, "segment table", err)
	}
	o.next = 0
	o.offset += int64(27 + n)
	return nil
}

// next returns the next packet and the granule position of the page it
// ends on; io.EOF after the last one.
func (o *oggReader) nextPacket() ([]byte, uint64, bool, error) {
	o.packet = o.packet[:0]
	for {
		for o.next >= len(o.seg) {
			if err := o.readPage(); err != nil {
				if errors.Is(err, io.EOF) && len(o.packet) > 0 {
					return nil, 0, false, corrupt(o.offset, "the file ends inside a packet")
				}
				return nil, 0, false, err
			}
		}
		l := int(o.seg[o.next])
		o.next++
		if len(o.packet)+l > maxPacketBytes {
			return nil, 0, false, corrupt(o.offset, "a packet longer than %d bytes", maxPacketBytes)
		}
		start := len(o.packet)
		o.packet = append(o.packet, make([]byte, l)...)
		if _, err := io.ReadFull(o.r, o.packet[start:]); err != nil {
			return nil, 0, false, readErr(o.offset, "page data", err)
		}
		o.offset += int64(l)
		if l < 255 { // a packet ends on a lacing value below 255
			last := o.next >= len(o.seg)
			return o.packet, o.granule, last && o.eos, nil
		}
	}
}

// opusHead is the identification header (RFC 7845 §5.1).
type opusHead struct {
	Channels   int
	PreSkip    int
	InputRate  uint32
	MappingFam int
}

func parseOpusHead(p []byte) (opusHead, error) {
	if len(p) < 19 || string(p[:8]) != "OpusHead" {
		return opusHead{}, fmt.Errorf("%w: the first packet is not an OpusHead", ErrCorrupt)
	}
	if p[8]>>4 != 0 {
		return opusHead{}, fmt.Errorf("%w: OpusHead version %d", ErrCorrupt, p[8])
	}
	return opusHead{Channels: int(p[9]), PreSkip: int(binary.LittleEndian.Uint16(p[10:12])),
		InputRate: binary.LittleEndian.Uint32(p[12:16]), MappingFam: int(p[18])}, nil
}
