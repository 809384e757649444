package cases

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// The agents SDKs' testing APIs the generated tests use, as read in the
// releases lkscore is tested against (docs/cases.md cites them):
//
//   - Python, livekit-agents 1.7.0: AgentSession.run(user_input=...) returns
//     a RunResult; RunResult.expect (RunAssert) has contains_function_call(
//     name=...), contains_function_call_output(is_error=...) and
//     contains_message(role=...) (livekit-agents/livekit/agents/voice/
//     run_result.py, github.com/livekit/agents).
//   - Node, @livekit/agents 1.9.0: voice.AgentSession.run({ userInput })
//     returns a RunResult (await result.wait()); result.expect has
//     containsFunctionCall({ name }), containsFunctionCallOutput({ isError })
//     and containsMessage({ role }) (agents/src/voice/testing/run_result.ts,
//     github.com/livekit/agents-js).
const (
	PythonSDK = "livekit-agents 1.7.0"
	NodeSDK   = "@livekit/agents 1.9.0"
)

// ErrNoTranscript is a case with no chat history to replay (redacted).
var ErrNoTranscript = errors.New("the case holds no chat history to replay (a redacted session's case carries none)")

// assertion is one thing a replayed turn must get, in SDK-neutral form.
type assertion struct {
	kind    string // "call_ok", "call_output", "answered", or "" (not expressible: a comment only)
	name    string // the function
	finding string // what the call got: code and message
}

// replayTurn is one user turn of the call and what the agent must do after it.
type replayTurn struct {
	item   int // chat item index
	text   string
	checks []assertion
}

// replayPlan reads a case's user turns and places each finding after the
// user turn it follows.
func (f Files) replayPlan() (card session.Scorecard, turns []replayTurn, before []assertion, err error) {
	chat, ok := f[DirRecording+recording.ObjectChatHistory]
	if !ok {
		return card, nil, nil, ErrNoTranscript
	}
	if err := json.Unmarshal(f[FileScorecard], &card); err != nil {
		return card, nil, nil, fmt.Errorf("%s: %w", FileScorecard, err)
	}
	h, err := recording.ParseChatHistoryBytes(chat, recording.DefaultLimits().Chat)
	if err != nil {
		return card, nil, nil, fmt.Errorf("%s: %w", DirRecording+recording.ObjectChatHistory, err)
	}
	byIndex := map[int]recording.Item{}
	for _, it := range h.Items {
		byIndex[it.Index] = it
		if it.Type == scoring.TypeMessage && it.Role == "user" {
			if text := strings.TrimSpace(strings.Join(it.Content, " ")); text != "" {
				turns = append(turns, replayTurn{item: it.Index, text: text})
			}
		}
	}
	for _, c := range card.Components {
		for _, fd := range c.Findings {
			a := assertionFor(fd, byIndex)
			i := len(turns) - 1
			for i >= 0 && turns[i].item > fd.Turn.V {
				i--
			}
			if !fd.Turn.Set || i < 0 {
				before = append(before, a)
				continue
			}
			turns[i].checks = append(turns[i].checks, a)
		}
	}
	return card, turns, before, nil
}

func assertionFor(fd session.Finding, items map[int]recording.Item) assertion {
	a := assertion{finding: oneLine(fd.Code + ": " + fd.Message)}
	it := items[fd.Turn.V]
	switch fd.Code {
	case "unanswered_user_turn":
		a.kind = "answered"
	case "tool_error":
		a.kind, a.name = "call_ok", it.Name
	case "tool_call_without_output":
		a.kind, a.name = "call_output", it.Name
	}
	if (a.kind == "call_ok" || a.kind == "call_output") && a.name == "" {
		a.kind = "" // no function name to assert on
	}
	return a
}

func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// quote is a string literal valid in Python and JavaScript (JSON's).
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	out := strings.TrimSuffix(b.String(), "\n")
	// JSON leaves U+2028/2029 bare, which older JavaScript parsers reject.
	return strings.NewReplacer("\u2028", `\u2028`, "\u2029", `\u2029`).Replace(out)
}

// identifier makes a test name from a session key.
func identifier(key string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(key) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// dialect is how a language's test writes a replayed turn and its
// assertions (the SDK's testing API).
type dialect struct {
	indent, comment string
	run             string // a Printf format of the quoted user text
	answered        string
	call            string // a Printf format of the quoted function name
	callOK, output  string
}

var (
	python = dialect{indent: "        ", comment: "# ", run: "result = await session.run(user_input=%s)\n",
		answered: "result.expect.contains_message(role=\"assistant\")\n",
		call:     "result.expect.contains_function_call(name=%s)\n",
		callOK:   "result.expect.contains_function_call_output(is_error=False)\n",
		output:   "result.expect.contains_function_call_output()\n"}
	node = dialect{indent: "    ", comment: "// ", run: "result = session.run({ userInput: %s });\n    await result.wait();\n",
		answered: "result.expect.containsMessage({ role: 'assistant' });\n",
		call:     "result.expect.containsFunctionCall({ name: %s });\n",
		callOK:   "result.expect.containsFunctionCallOutput({ isError: false });\n",
		output:   "result.expect.containsFunctionCallOutput();\n"}
)

// turns writes the findings before the first turn (comments), then each
// turn's run and its assertions.
func (d dialect) turns(b *strings.Builder, turns []replayTurn, before []assertion) {
	for _, a := range before {
		fmt.Fprintf(b, "%s%slkscore %s\n%s%s(before the caller's first turn) %s\n", d.indent, d.comment, a.finding, d.indent, d.comment, notExpressible)
	}
	for i, t := range turns {
		fmt.Fprintf(b, "\n%s%sTurn %d (chat item %d)\n", d.indent, d.comment, i+1, t.item)
		fmt.Fprintf(b, d.indent+d.run, quote(t.text))
		for _, a := range t.checks {
			fmt.Fprintf(b, "%s%slkscore %s\n", d.indent, d.comment, a.finding)
			switch a.kind {
			case "answered":
				b.WriteString(d.indent + d.answered)
			case "call_ok", "call_output":
				fmt.Fprintf(b, d.indent+d.call, quote(a.name))
				if a.kind == "call_ok" {
					b.WriteString(d.indent + d.callOK)
				} else {
					b.WriteString(d.indent + d.output)
				}
			default:
				fmt.Fprintf(b, "%s%s%s\n", d.indent, d.comment, notExpressible)
			}
		}
	}
}

const notExpressible = "the SDK's testing API cannot assert this (timing, audio, retries, scores): lkscore check --cases does"

// Pytest is the case as a pytest test for livekit-agents' testing API.
func (f Files) Pytest() ([]byte, error) {
	card, turns, before, err := f.replayPlan()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, `"""lkscore case %s, as a test for the livekit-agents testing framework.

The call was scored %s (scoring %s). This test replays the caller's %d turns
of that call against your agent and asserts what the call got wrong, with the
public testing API of %s: AgentSession.run(user_input=...) and
RunResult.expect (contains_function_call, contains_function_call_output,
contains_message; livekit-agents/livekit/agents/voice/run_result.py).
Replace the agent import and the LLM with your own (docs/cases.md).
"""

import pytest

from livekit.agents import AgentSession
from livekit.plugins import openai

from agent import Assistant  # lkscore: your agent's module and class


@pytest.mark.asyncio
async def test_%s() -> None:
    async with openai.LLM(model="gpt-4o-mini") as llm, AgentSession(llm=llm) as session:
        await session.start(Assistant())
`, oneLine(card.Session.Key), card.Overall.Verdict, card.ScoringVersion, len(turns), PythonSDK, identifier(card.Session.Key))
	python.turns(&b, turns, before)
	return []byte(b.String()), nil
}

// Vitest is the case as a vitest test (ES module) for agents-js' testing
// API.
func (f Files) Vitest() ([]byte, error) {
	card, turns, before, err := f.replayPlan()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, `// lkscore case %s, as a test for the agents-js testing framework.
//
// The call was scored %s (scoring %s). This test replays the caller's %d
// turns of that call against your agent and asserts what the call got wrong,
// with the public testing API of %s: voice.AgentSession.run({ userInput })
// and RunResult.expect (containsFunctionCall, containsFunctionCallOutput,
// containsMessage; agents/src/voice/testing/run_result.ts).
// Replace the agent import and the LLM with your own (docs/cases.md).
import { voice } from '@livekit/agents';
import * as openai from '@livekit/agents-plugin-openai';
import { afterAll, beforeAll, describe, it } from 'vitest';

import { Agent } from './agent.js'; // lkscore: your agent's module and class

describe(%s, { timeout: 120_000 }, () => {
  let session;

  beforeAll(async () => {
    session = new voice.AgentSession({ llm: new openai.LLM({ model: 'gpt-4o-mini', temperature: 0 }) });
    await session.start({ agent: new Agent() });
  });

  afterAll(async () => {
    await session?.close();
  });

  it('does not repeat what the call got wrong', async () => {
    let result;
`, oneLine(card.Session.Key), card.Overall.Verdict, card.ScoringVersion, len(turns), NodeSDK, quote("lkscore case "+card.Session.Key))
	node.turns(&b, turns, before)
	b.WriteString("  });\n});\n")
	return []byte(b.String()), nil
}
