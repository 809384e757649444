package recording

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// DefaultKeyTemplate is the directory layout the collector writes.
const DefaultKeyTemplate = "{room_id}/{job_id}/"

// Object names of a recording upload in the directory layout. An upload is
// complete once its header exists: writers put it last.
const (
	ObjectHeader      = "header.binpb"
	ObjectChatHistory = "chat_history.json"
	ObjectAudio       = "recording.ogg"
)

// Vars are the values a key template is expanded with.
type Vars struct {
	RoomID    string `json:"room_id,omitempty"`
	RoomName  string `json:"room_name,omitempty"`
	JobID     string `json:"job_id,omitempty"`
	AgentName string `json:"agent_name,omitempty"`
	Date      string `json:"date,omitempty"` // YYYY-MM-DD (UTC)
}

func (v Vars) get(name string) string {
	switch name {
	case "room_id":
		return v.RoomID
	case "room_name":
		return v.RoomName
	case "job_id":
		return v.JobID
	case "agent_name":
		return v.AgentName
	case "date":
		return v.Date
	}
	return ""
}

// Layout maps sessions to store directories with a key template such as
// "{room_id}/{job_id}/" or "recordings/{date}/{agent_name}/{room_id}/{job_id}/".
// Placeholders: {prefix}, {room_id}, {room_name}, {job_id}, {agent_name}, {date}.
// The store prefix is put in front unless the template places {prefix} itself.
type Layout struct {
	prefix   string
	template string
	names    []string // placeholders in order, {prefix} expanded away
	re       *regexp.Regexp
}

var placeholderRE = regexp.MustCompile(`\{([a-z_]+)\}`)

// NewLayout validates a template. It must end in "/", hold {room_id} and
// {job_id} (the session key), and use no unknown placeholder.
func NewLayout(prefix, template string) (Layout, error) {
	if template == "" {
		template = DefaultKeyTemplate
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if !strings.Contains(template, "{prefix}") {
		template = "{prefix}" + template
	}
	template = strings.ReplaceAll(template, "{prefix}", prefix)
	var errs []error
	if !strings.HasSuffix(template, "/") {
		errs = append(errs, fmt.Errorf("key template %q must end with /", template))
	}
	l := Layout{prefix: prefix, template: template}
	var pattern strings.Builder
	pattern.WriteString("^")
	last := 0
	seen := map[string]bool{}
	for _, m := range placeholderRE.FindAllStringSubmatchIndex(template, -1) {
		name := template[m[2]:m[3]]
		pattern.WriteString(regexp.QuoteMeta(template[last:m[0]]))
		last = m[1]
		switch {
		case !isVar(name):
			errs = append(errs, fmt.Errorf("key template: unknown placeholder {%s}", name))
		case seen[name]:
			errs = append(errs, fmt.Errorf("key template: {%s} appears twice", name))
		}
		seen[name] = true
		l.names = append(l.names, name)
		pattern.WriteString(`([^/]+)`)
	}
	pattern.WriteString(regexp.QuoteMeta(template[last:]))
	pattern.WriteString(regexp.QuoteMeta(ObjectHeader) + "$")
	for _, need := range []string{"room_id", "job_id"} {
		if !seen[need] {
			errs = append(errs, fmt.Errorf("key template %q lacks {%s}", template, need))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Layout{}, err
	}
	l.re = regexp.MustCompile(pattern.String())
	return l, nil
}

func isVar(name string) bool {
	switch name {
	case "room_id", "room_name", "job_id", "agent_name", "date":
		return true
	}
	return false
}

// Dir expands the template for one session. Empty values become "_" so a
// key never has an empty segment; "/" in values becomes "_".
func (l Layout) Dir(v Vars) string {
	return placeholderRE.ReplaceAllStringFunc(l.template, func(m string) string {
		return segment(v.get(m[1 : len(m)-1]))
	})
}

// maxSegment bounds one expanded placeholder: a room name is the
// application's free text, and a path segment over the file system's 255
// bytes is refused for good (ENAMETOOLONG). Every template holds {room_id}
// and {job_id}, so two names cut to one segment stay apart.
const maxSegment = 200

func segment(s string) string {
	if s == "" || s == "." || s == ".." {
		return "_"
	}
	if len(s) > maxSegment {
		n := maxSegment
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	// '/' would split the segment; NUL and other control bytes are refused
	// by file systems (EINVAL) or unreadable in a key.
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < 0x20 || r == 0x7f {
			return '_'
		}
		return r
	}, s)
}

// RoomPrefix is the longest key prefix shared by every session of a room:
// list it, then Match each key ending in header.binpb. Expansion stops at the
// first placeholder whose value is not known for a whole room.
func (l Layout) RoomPrefix(v Vars) string {
	var b strings.Builder
	rest := l.template
	for {
		m := placeholderRE.FindStringSubmatchIndex(rest)
		if m == nil {
			b.WriteString(rest)
			return b.String()
		}
		b.WriteString(rest[:m[0]])
		name := rest[m[2]:m[3]]
		val := v.get(name)
		if (name != "room_id" && name != "room_name") || val == "" {
			s := b.String()
			return s[:strings.LastIndex(s, "/")+1]
		}
		b.WriteString(segment(val))
		rest = rest[m[1]:]
	}
}

// Match reports whether key is a header object in this layout, and the
// session's values parsed from it.
func (l Layout) Match(key string) (Vars, bool) {
	m := l.re.FindStringSubmatch(key)
	if m == nil {
		return Vars{}, false
	}
	var v Vars
	for i, name := range l.names {
		val := m[i+1]
		switch name {
		case "room_id":
			v.RoomID = val
		case "room_name":
			v.RoomName = val
		case "job_id":
			v.JobID = val
		case "agent_name":
			v.AgentName = val
		case "date":
			v.Date = val
		}
	}
	return v, true
}

// SessionDir returns the directory of a header key (key minus "header.binpb").
func SessionDir(headerKey string) string {
	return strings.TrimSuffix(headerKey, ObjectHeader)
}
