package scoring_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

var update = flag.Bool("update", false, "rewrite the golden scorecards")

// dirReader reads a session directory for recording.Load.
type dirReader string

func (d dirReader) Open(_ context.Context, key string, maxBytes int64) (io.ReadCloser, error) {
	f, err := os.Open(filepath.Join(string(d), key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, recording.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{recording.LimitReader(f, maxBytes), f}, nil
}

func scoreDir(t *testing.T, dir string) scoring.Scorecard {
	t.Helper()
	return scoring.Score(sessionOf(t, dir), scoring.DefaultConfig())
}

func sessionOf(t *testing.T, dir string) scoring.Session {
	t.Helper()
	s, err := recording.Load(context.Background(), dirReader(dir), "", recording.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return s.ScoringInput("scenarios/data/"+filepath.Base(dir)+"/", "booking-agent")
}

func marshal(t *testing.T, sc scoring.Scorecard) []byte {
	t.Helper()
	b, err := json.MarshalIndent(sc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func component(sc scoring.Scorecard, name string) scoring.Component {
	for _, c := range sc.Components {
		if c.Name == name {
			return c
		}
	}
	return scoring.Component{}
}

// TestScenarios checks the acceptance criteria of the six scenarios
// explicitly, then compares each scorecard byte for byte with its golden.
func TestScenarios(t *testing.T) {
	checks := map[string]func(t *testing.T, sc scoring.Scorecard){
		"1_clean_call": func(t *testing.T, sc scoring.Scorecard) {
			if sc.Overall.Verdict != scoring.Pass || sc.Completion.CloseReason != "CR_PARTICIPANT_DISCONNECTED" {
				t.Errorf("clean call: %s, %s", sc.Overall.Verdict, sc.Completion.CloseReason)
			}
			if sc.Metrics.E2ELatencyMissing != 1 {
				t.Errorf("the reply after the handoff must be reported missing, got %d", sc.Metrics.E2ELatencyMissing)
			}
		},
		"2_slow_agent": func(t *testing.T, sc scoring.Scorecard) {
			if sc.Metrics.E2ELatencyP95Ms.V <= 2500 || component(sc, scoring.ResponseLatency).Verdict != scoring.Fail {
				t.Errorf("slow agent: p95 %v, latency %s", sc.Metrics.E2ELatencyP95Ms.V, component(sc, scoring.ResponseLatency).Verdict)
			}
		},
		"3_barge_in": func(t *testing.T, sc scoring.Scorecard) {
			if v := component(sc, scoring.TurnHandling).Verdict; v == scoring.Pass {
				t.Errorf("barge-in: turn handling %s", v)
			}
		},
		"4_tool_trouble": func(t *testing.T, sc scoring.Scorecard) {
			if v := component(sc, scoring.ToolReliability).Verdict; v != scoring.Fail {
				t.Errorf("tool trouble: tool reliability %s", v)
			}
		},
		"5_bad_hearing": func(t *testing.T, sc scoring.Scorecard) {
			if v := component(sc, scoring.TranscriptIntegrity).Verdict; v != scoring.Fail {
				t.Errorf("bad hearing: transcript integrity %s", v)
			}
		},
		"6_error_close": func(t *testing.T, sc scoring.Scorecard) {
			if sc.Overall.Verdict != scoring.Fail || sc.Completion.Status != "failed" || sc.Metrics.UnansweredTurns != 1 {
				t.Errorf("error close: %s, completion %s, unanswered %d", sc.Overall.Verdict, sc.Completion.Status, sc.Metrics.UnansweredTurns)
			}
		},
		"7_header_only": func(t *testing.T, sc scoring.Scorecard) {
			// A header and no chat history: no evidence, no verdict.
			if sc.Overall.Verdict != scoring.Unscored || sc.Overall.Score != 0 || !strings.Contains(strings.Join(sc.Overall.Reasons, " "), "no chat history") {
				t.Errorf("header only: %s %v %q", sc.Overall.Verdict, sc.Overall.Score, sc.Overall.Reasons)
			}
			for _, c := range sc.Components {
				if c.Verdict != scoring.NotMeasured || c.NotMeasured == "" {
					t.Errorf("header only: %s is %s", c.Name, c.Verdict)
				}
			}
		},
	}
	dirs, _ := filepath.Glob("../scenarios/data/*")
	if len(dirs) != len(checks)+1 {
		t.Fatalf("%d scenario directories, want %d", len(dirs), len(checks)+1)
	}
	schema := compileSchema(t)
	for _, dir := range dirs {
		name := filepath.Base(dir)
		if _, err := os.Stat(filepath.Join(dir, "webhooks.jsonl")); err == nil {
			// Its facts come from the room's webhooks and the SDK's logs:
			// its golden is the daemon's scorecard (consumer's
			// TestScenariosFromSignals), still valid against the schema.
			want, err := os.ReadFile(filepath.Join(dir, "scorecard.golden.json"))
			if err != nil {
				t.Fatal(err)
			}
			validate(t, schema, want)
			continue
		}
		t.Run(name, func(t *testing.T) {
			sc := scoreDir(t, dir)
			checks[name](t, sc)
			got := marshal(t, sc)
			if again := marshal(t, scoreDir(t, dir)); !bytes.Equal(got, again) {
				t.Fatal("two runs gave different bytes")
			}
			golden := filepath.Join(dir, "scorecard.golden.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("scorecard differs from %s; if intended, rerun with -update and bump scoring.ModelVersion:\n%s", golden, got)
			}
			validate(t, schema, want)
		})
	}
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	s, err := c.Compile("../docs/scorecard.schema.json")
	if err != nil {
		t.Fatalf("compile schema: %v", err)
	}
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, doc []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			t.Errorf("scorecard does not match docs/scorecard.schema.json: %v", ve.BasicOutput())
		} else {
			t.Errorf("scorecard does not match docs/scorecard.schema.json: %v", err)
		}
	}
}

// TestAudioBlockMatchesSchema: a scorecard with every field of the audio
// block set validates against docs/scorecard.schema.json.
func TestAudioBlockMatchesSchema(t *testing.T) {
	seg := []scoring.AudioSegment{{StartMs: 1, EndMs: 2}}
	card := scoring.Score(scoring.Session{Identity: session.Identity{Key: "RM_a/AJ_b"}, Audio: &scoring.Audio{
		UserSegments: seg, AgentSegments: seg, Silences: seg,
		Turns:   []scoring.AudioTurn{{UserStartMs: 1, UserEndMs: 2, AgentStartMs: 5, HeardLatencyMs: 3, BargeIn: true, YieldMs: 4}},
		Metrics: scoring.AudioMetrics{HeardLatencyP50Ms: 3, OverlapRatio: 0.1, SeparationDB: 20},
	}}, scoring.DefaultConfig())
	doc, err := json.Marshal(card)
	if err != nil {
		t.Fatal(err)
	}
	validate(t, compileSchema(t), doc)
	refused := scoring.Score(scoring.Session{Identity: session.Identity{Key: "RM_a/AJ_b"}, Audio: &scoring.Audio{Refused: "not_stereo", Reason: "mono"}}, scoring.DefaultConfig())
	doc, _ = json.Marshal(refused)
	validate(t, compileSchema(t), doc)
}
