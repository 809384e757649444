package recording

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
)

// ParseMultipart reads one object holding the raw multipart/form-data body
// the SDK posted. The boundary comes from contentType when it has one, else
// it is sniffed from the first line ("--boundary"). The header part must
// come first; the chat history is parsed as it streams by, and the audio is
// counted, never held in memory.
func ParseMultipart(r io.Reader, contentType string, lim Limits) (*Session, int64, error) {
	br := bufio.NewReaderSize(r, 4096)
	boundary, err := multipartBoundary(br, contentType)
	if err != nil {
		return nil, 0, err
	}
	mr := multipart.NewReader(br, boundary)
	part, err := mr.NextPart()
	if err != nil {
		return nil, 0, parseErr(PartMultipart, -1, -1, fmt.Errorf("first part: %w", err))
	}
	if part.FormName() != "header" {
		return nil, 0, parseErr(PartMultipart, -1, -1, fmt.Errorf("first part is %q, want \"header\"", part.FormName()))
	}
	hb, err := io.ReadAll(&capReader{r: part, left: int64(lim.HeaderBytes)})
	if err != nil {
		if errors.Is(err, ErrLimit) {
			return nil, 0, limitErr(PartHeader, -1, int64(lim.HeaderBytes), fmt.Sprintf("max_bytes=%d", lim.HeaderBytes))
		}
		return nil, 0, parseErr(PartMultipart, -1, -1, fmt.Errorf("header part: %w", err))
	}
	s, err := NewSession(hb, lim)
	if err != nil {
		return nil, 0, err
	}
	var audio int64
	sawChat := false
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, parseErr(PartMultipart, -1, -1, err)
		}
		switch part.FormName() {
		case "chat_history":
			if sawChat {
				return nil, 0, parseErr(PartMultipart, -1, -1, errors.New("chat_history appears twice"))
			}
			sawChat = true
			chat, err := ParseChatHistory(part, lim.Chat)
			var pe *ParseError
			if err != nil && !errors.As(err, &pe) {
				// A part that ends early is a malformed body (as for any other part).
				return nil, 0, parseErr(PartMultipart, -1, -1, fmt.Errorf("part %q: %w", part.FormName(), err))
			}
			if err != nil {
				return nil, 0, err
			}
			s.AttachChat(chat)
		default: // audio and parts of newer SDKs: counted and skipped
			n, err := io.Copy(io.Discard, part)
			if err != nil {
				return nil, 0, parseErr(PartMultipart, -1, -1, fmt.Errorf("part %q: %w", part.FormName(), err))
			}
			if part.FormName() == "audio" {
				audio += n
			}
		}
	}
	if !sawChat {
		s.Problems = append(s.Problems, Problem{Part: PartChatHistory, Code: "chat_history_missing", Message: "no chat_history part in the upload"})
	}
	return s, audio, nil
}

func multipartBoundary(br *bufio.Reader, contentType string) (string, error) {
	if contentType != "" {
		if mt, params, err := mime.ParseMediaType(contentType); err == nil && mt == "multipart/form-data" && params["boundary"] != "" {
			return params["boundary"], nil
		}
	}
	line, err := br.Peek(72 + 4) // RFC 2046: a boundary is at most 70 characters
	if err != nil && len(line) == 0 {
		return "", parseErr(PartMultipart, -1, 0, fmt.Errorf("empty object: %w", err))
	}
	if !bytes.HasPrefix(line, []byte("--")) {
		return "", parseErr(PartMultipart, -1, 0, fmt.Errorf("no content type and the object does not start with a multipart boundary: %w",
			ErrNotMultipart))
	}
	end := bytes.IndexAny(line, "\r\n")
	if end < 3 {
		return "", parseErr(PartMultipart, -1, 0, errors.New("no multipart boundary line within 72 bytes"))
	}
	return string(line[2:end]), nil
}
