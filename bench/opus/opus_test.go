package opus

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	pion "github.com/pion/opus"
	"github.com/pion/opus/pkg/oggreader"
	"github.com/thesyncim/gopus"
)

// packets returns the audio packets of lkscore's two-second stereo fixture.
func packets(b *testing.B) [][]byte {
	data, err := os.ReadFile("../../audio/testdata/short.ogg")
	if err != nil {
		b.Fatal(err)
	}
	r, _, err := oggreader.NewWith(bytes.NewReader(data))
	if err != nil {
		b.Fatal(err)
	}
	var out [][]byte
	for {
		p, _, err := r.ParseNextPacket()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			b.Fatal(err)
		}
		if len(p) >= 8 && (string(p[:8]) == "OpusHead" || string(p[:8]) == "OpusTags") {
			continue
		}
		out = append(out, bytes.Clone(p))
	}
}

// BenchmarkDecoders decodes the same packets to 48 kHz stereo float32 with
// each decoder; x_realtime is seconds of audio per second of CPU.
func BenchmarkDecoders(b *testing.B) {
	pkts := packets(b)
	pcm := make([]float32, 2*5760)
	run := func(b *testing.B, decode func([]byte) (int, error)) {
		samples := 0
		for i := 0; i < b.N; i++ {
			for _, p := range pkts {
				n, err := decode(p)
				if err != nil {
					b.Fatal(err)
				}
				samples += n
			}
		}
		b.ReportMetric(float64(samples)/48000/b.Elapsed().Seconds(), "x_realtime")
	}
	b.Run("pion/opus", func(b *testing.B) {
		d, err := pion.NewDecoderWithOutput(48000, 2)
		if err != nil {
			b.Fatal(err)
		}
		run(b, func(p []byte) (int, error) { return d.DecodeToFloat32(p, pcm) })
	})
	b.Run("thesyncim/gopus", func(b *testing.B) {
		d, err := gopus.NewDecoder(gopus.DecoderConfig{SampleRate: 48000, Channels: 2})
		if err != nil {
			b.Fatal(err)
		}
		run(b, func(p []byte) (int, error) { return d.Decode(p, pcm) })
	})
}
