package scenarios

import _ "embed"

// history200 is a realistic 200-turn Python-form chat_history.json (253 KB,
// 505 items with metrics, tool calls and handoffs), written by the recording
// package's generator (go test ./recording -run TestHistoryFixtureCurrent
// -update-fixture).
//
//go:embed load/history_200turns.json
var history200 []byte

// LoadHistory returns the chat history `lkscore bench` uploads and the
// performance benchmarks parse. The caller must not modify it.
func LoadHistory() []byte { return history200 }
