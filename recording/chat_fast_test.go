package recording

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzChatPathsAgree: wherever the fast path answers, its answer is the
// streaming path's, item for item and problem for problem.
func FuzzChatPathsAgree(f *testing.F) {
	for _, p := range []string{"testdata/chat_python.json", "testdata/chat_js.json", "testdata/chat_js_camel.json",
		fieldDir + "py_020a.json", fieldDir + "js_020a.json"} {
		f.Add(mustRead(f, p))
	}
	for _, s := range []string{
		`{"items": [], "items": [{"type": "message"}]}`,
		`{"items": [], "Items": [{"type": "message"}]}`,
		`{"ITEMS": [{"type": "message"}]}`,
		`{"\u0069tems": [{"type": "message", "content": ["a"]}]}`,
		`{"items": null}`,
		`{}`,
		`{"items": [{"id": "a", "type": "message"}], "it\u0065ms": [{"id": "b"}]}`,
		`{"items": [{"id": "a", "type": "message"}], "ITEMS": [{"id": "b"}]}`,
		`{"items": [{"id": "a", "type": "message", "content": ["\\u0065"]}]}`,
		`{"x": 1}`,
		`{"items": []}`,
		`{"items": [{"type": "message"}, {"id": "b", "type": "message"}]}`,
		`{"items": [{"id": "a", "type": "message"}, {"type": "message"}]}`,
		`{"items": [{"id": "\\u0000lkscore:absent", "type": "message"}]}`,
		`{"items": [{"id": "a", "type": "message", "created_at": 1}], "itemſ": [{"id": "b"}]}`,
		`{"items": [{"type": "message", "created_at": 1e400}]}`,
		`{"items": [{"type": "message", "created_at": null, "createdAt": 1764417600000}]}`,
		`{"items": [{"type": "message", "Role": "user", "ROLE": "assistant", "role": "x"}]}`,
		`{"items": [{"type": "message", "content": ["a", {"type": "image"}, "b"], "metrics": {"e2e_latency": "slow"}}]}`,
		`{"items": [{"type": "message", "content": "\ud800 lone surrogate"}]}`,
		`{"items": [{"type": "message", "content": ["caf\u00e9"], "interrupted": 1}]}`,
		`{"items": [{"type": "agent_config_update", "instructions": {"type": "instructions", "text": "t"}}]}`,
		`{"items": [{"type": "function_call_output", "callId": "c", "isError": true, "is_error": false}]} `,
		`{"items": [{"type": "message"}]} x`,
		"{\"items\": [{\"type\": \"message\", \"content\": [\"\xff\"]}]}",
	} {
		f.Add([]byte(s))
	}
	// other fills a decoder's memory between the fuzzer's inputs.
	other := mustRead(f, fieldDir+"js_020a.json")
	var warm ChatDecoder
	if _, err := warm.Decode(bytes.NewReader(other), ChatLimits{}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := ChatLimits{MaxBytes: 1 << 16, MaxItems: 20}.withDefaults()
		fast, ok := fastChat(data, lim, new(chatScratch))
		if !ok {
			return
		}
		slow, err := streamChat(bytes.NewReader(data), lim)
		if err != nil {
			t.Fatalf("fast path accepted what the streaming path rejects (%v)", err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("paths disagree:\nfast %+v\nslow %+v", fast, slow)
		}
		// A ChatDecoder that decoded another history first gives the same.
		reused, err := warm.Decode(bytes.NewReader(data), lim)
		if err != nil || !reflect.DeepEqual(reused, slow) {
			t.Fatalf("a reused decoder disagrees (%v):\nreused %+v\nslow %+v", err, reused, slow)
		}
		if _, err := warm.Decode(bytes.NewReader(other), ChatLimits{}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFastPathTakesSDKFiles: the fast path really answers for the SDKs' own
// files (a fast path that always declined would pass the fuzz test).
func TestFastPathTakesSDKFiles(t *testing.T) {
	field, _ := filepath.Glob(fieldDir + "*.json")
	if len(field) != 10 {
		t.Fatalf("%d field fixtures in %s, want 10", len(field), fieldDir)
	}
	for _, p := range append([]string{"testdata/chat_python.json", "testdata/chat_js.json", "testdata/chat_js_camel.json", historyFixture}, field...) {
		data := mustRead(t, p)
		lim := ChatLimits{}.withDefaults()
		fast, ok := fastChat(data, lim, new(chatScratch))
		if !ok {
			t.Fatalf("%s: the fast path declined an SDK's own file", p)
		}
		slow, err := streamChat(bytes.NewReader(data), lim)
		if err != nil || !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%s: paths disagree (%v)", p, err)
		}
		if len(fast.Problems) != 0 {
			t.Errorf("%s: problems %v", p, fast.Problems)
		}
	}
}

// TestChatKeysGenerated: chat_keys_gen.go is what tools/genchatkeys writes
// from the struct tags now, so a key added to rawItem or rawMetrics reaches
// the scanner (or the test says to run go generate ./recording).
func TestChatKeysGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds tools/genchatkeys")
	}
	out := filepath.Join(t.TempDir(), "gen.go")
	cmd := exec.Command("go", "run", "../tools/genchatkeys", "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("genchatkeys: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("chat_keys_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("chat_keys_gen.go is out of date with chat_item.go's struct tags: run go generate ./recording")
	}
}

// TestChatHistoryKeepsNoViewOfItsBytes: ParseChatHistory reads into pooled
// buffers, which is safe only if nothing a parse returns points into the
// bytes it parsed. Every fixture and field history is parsed on both paths,
// its bytes overwritten, and the result compared with a parse of a copy.
func TestChatHistoryKeepsNoViewOfItsBytes(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(fieldDir + "*.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no field histories in %s: %v", fieldDir, err)
	}
	paths = append(paths, "testdata/chat_python.json", "testdata/chat_js.json", "testdata/chat_js_camel.json")
	docs := [][]byte{[]byte(`{"items": [{"id": "a", "type": "message", "role": "user", "content": ["hi", {"type": "image"}],` +
		` "metrics": {"e2e_latency": 1.5}}, {"id": "b", "type": "agent_handoff", "new_agent_id": "x", "instructions": {"a": [1]}}]}`)}
	for _, p := range paths {
		docs = append(docs, mustRead(t, p))
	}
	lim := ChatLimits{}.withDefaults()
	parsers := map[string]func([]byte) (*ChatHistory, error){
		"fast path or fallback": func(b []byte) (*ChatHistory, error) { return ParseChatHistoryBytes(b, lim) },
		"stream":                func(b []byte) (*ChatHistory, error) { return streamChat(bytes.NewReader(b), lim) },
	}
	for i, doc := range docs {
		for name, parse := range parsers {
			want, err := parse(bytes.Clone(doc))
			if err != nil {
				t.Fatalf("doc %d (%s): %v", i, name, err)
			}
			data := bytes.Clone(doc)
			got, err := parse(data)
			if err != nil {
				t.Fatal(err)
			}
			for j := range data {
				data[j] = 'x'
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("doc %d (%s): the history changed when the bytes it was parsed from did", i, name)
			}
		}
	}
}
