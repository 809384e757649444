package recording

import (
	"bytes"
	"errors"
	"fmt"
	"mime/multipart"
	"net/textproto"
	"strconv"
	"testing"
)

// pythonBody builds the body as the Python SDK's aiohttp MultipartWriter does.
func pythonBody(t testing.TB, parts ...[3]string) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	files := map[string]string{"header": "header.binpb", "chat_history": "chat_history.json", "audio": "recording.ogg"}
	types := map[string]string{"header": "application/protobuf", "chat_history": "application/json", "audio": "audio/ogg"}
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		h.Set("Content-Type", types[p[0]])
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"; filename="%s"`, p[0], files[p[0]]))
		h.Set("Content-Length", strconv.Itoa(len(p[1])))
		w, _ := mw.CreatePart(h)
		_, _ = w.Write([]byte(p[1]))
	}
	_ = mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

func TestParseMultipart(t *testing.T) {
	header := string(sdkHeader(t, "RM_m", "AJ_m", `{"close_reason":"CR_USER_INITIATED"}`))
	chat := string(mustRead(t, "testdata/chat_python.json"))
	body, ct := pythonBody(t, [3]string{"header", header}, [3]string{"chat_history", chat}, [3]string{"audio", "OggS-audio-bytes"})
	for _, contentType := range []string{ct, ""} { // stored content type, or sniffed boundary
		s, audio, err := ParseMultipart(bytes.NewReader(body), contentType, DefaultLimits())
		if err != nil {
			t.Fatalf("content type %q: %v", contentType, err)
		}
		if s.Key != "RM_m/AJ_m" || s.CloseReason != "CR_USER_INITIATED" || s.Chat == nil || len(s.Chat.Items) != 7 || audio != 16 {
			t.Fatalf("session %+v audio %d", s, audio)
		}
	}
	headerOnly, ct2 := pythonBody(t, [3]string{"header", header})
	s, _, err := ParseMultipart(bytes.NewReader(headerOnly), ct2, DefaultLimits())
	if err != nil || s.Chat != nil || len(s.Problems) != 1 || s.Problems[0].Code != "chat_history_missing" {
		t.Fatalf("header only: %v %+v", err, s)
	}
	for name, in := range map[string][]byte{
		"header not first": func() []byte {
			b, _ := pythonBody(t, [3]string{"chat_history", chat}, [3]string{"header", header})
			return b
		}(),
		"not multipart": []byte(`{"items": []}`),
		"empty":         nil,
		"truncated":     body[:len(body)/2],
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := ParseMultipart(bytes.NewReader(in), "", DefaultLimits())
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a ParseError", err)
			}
		})
	}
	t.Run("oversize chat history", func(t *testing.T) {
		lim := DefaultLimits()
		lim.Chat.MaxBytes = 100
		_, _, err := ParseMultipart(bytes.NewReader(body), ct, lim)
		if !errors.Is(err, ErrLimit) {
			t.Fatalf("err = %v", err)
		}
	})
}

func FuzzParseMultipart(f *testing.F) {
	header := string(sdkHeader(f, "RM_m", "AJ_m", `{"close_reason":"CR_ERROR"}`))
	b1, _ := pythonBody(f, [3]string{"header", header}, [3]string{"chat_history", `{"items": []}`})
	b2, _ := pythonBody(f, [3]string{"header", header})
	f.Add(b1)
	f.Add(b2)
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := Limits{HeaderBytes: 4096, Chat: ChatLimits{MaxBytes: 1 << 16, MaxItems: 100}}
		s, _, err := ParseMultipart(bytes.NewReader(data), "", lim)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		if s.Key == "" || s.CloseReason == "" {
			t.Fatalf("session without key or close reason: %+v", s)
		}
	})
}
