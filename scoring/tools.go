package scoring

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Tool reliability finding codes.
const (
	CodeToolCallWithoutOutput = "tool_call_without_output"
	CodeToolOutputWithoutCall = "tool_output_without_call"
	CodeToolError             = "tool_error"
	CodeDuplicateCallID       = "duplicate_call_id"
	CodeSlowTool              = "slow_tool"
	CodeToolRetrySameArgs     = "tool_retry_same_args"
)

func toolFindings(a *analysis, cfg Config) []Finding {
	var out []Finding
	items := a.s.Items
	// A call without output and an error output share one budget, so
	// answering a missing call with an error never raises the score.
	failed := budget{per: 20, cap: 60}
	orphan := budget{per: 10, cap: 30}
	dup := budget{per: 10, cap: 30}
	slow := budget{per: 5, cap: 20}
	retry := budget{per: 10, cap: 30}
	// The calls of the current agent turn: a retry is the same tool with the
	// same arguments again before the user speaks again. Turns hold few
	// calls, so a slice beats a map.
	var turnCalls []*Item

	for i := range items {
		it := &items[i]
		switch it.Type {
		case TypeMessage:
			if it.Role == RoleUser {
				turnCalls = turnCalls[:0]
			}
		case TypeFunctionCall:
			if first := a.tools[it.CallID].call; int(first) != i && it.CallID != "" {
				out = append(out, Finding{Code: CodeDuplicateCallID, Severity: Warning, ItemID: it.ID, Turn: some(i),
					Deduction: dup.take(), Message: fmt.Sprintf("call_id %q used by more than one call", it.CallID)})
			}
			for k := len(turnCalls) - 1; k >= 0; k-- {
				if prev := turnCalls[k]; prev.Name == it.Name {
					if prev.Arguments == it.Arguments {
						out = append(out, Finding{Code: CodeToolRetrySameArgs, Severity: Warning, ItemID: it.ID, Turn: some(i),
							Deduction: retry.take(), Message: fmt.Sprintf("%s called again with the same arguments", it.Name)})
					}
					break // compare with the tool's last call only
				}
			}
			turnCalls = append(turnCalls, it)
		case TypeFunctionCallOutput:
			c := int(a.tools[it.CallID].call)
			hasCall := c >= 0 && c < i // a call after its output does not explain it
			if !hasCall {
				out = append(out, Finding{Code: CodeToolOutputWithoutCall, Severity: Warning, ItemID: it.ID, Turn: some(i),
					Deduction: orphan.take(), Message: fmt.Sprintf("output for call_id %q, which was never called", it.CallID)})
			}
			if it.IsError {
				out = append(out, Finding{Code: CodeToolError, Severity: Critical, ItemID: it.ID, Turn: some(i),
					Deduction: failed.take(), Message: toolErrorMessage(it, a.s.Redacted)})
			}
			if hasCall && items[c].CreatedAt > 0 && it.CreatedAt > 0 {
				if d := ms(it.CreatedAt - items[c].CreatedAt); d > cfg.Tools.SlowMs {
					out = append(out, Finding{Code: CodeSlowTool, Severity: Warning, ItemID: it.ID, Turn: some(i),
						Value: some(round(d)), Threshold: some(cfg.Tools.SlowMs), Deduction: slow.take(),
						Message: fmt.Sprintf("%s took %s ms", it.Name, num(d))})
				}
			}
		}
	}
	for i := range items {
		it := &items[i]
		if it.Type != TypeFunctionCall || int(a.tools[it.CallID].call) != i {
			continue
		}
		if a.tools[it.CallID].output < 0 {
			out = append(out, Finding{Code: CodeToolCallWithoutOutput, Severity: Critical, ItemID: it.ID, Turn: some(i),
				Deduction: failed.take(), Message: fmt.Sprintf("%s (call_id %q) never returned an output", it.Name, it.CallID)})
		}
	}
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// toolErrorMessage describes a failed tool call. A redacted session's
// message never quotes the output (it routinely holds personal data): it
// names the tool, the kind of error and the output's length.
func toolErrorMessage(it *Item, redacted bool) string {
	if it.Output == "" && strings.HasPrefix(it.ID, "span:") {
		return fmt.Sprintf("%s returned an error (function_tool span; its output is not recorded)", orUnknown(it.Name))
	}
	if !redacted {
		return fmt.Sprintf("%s returned an error: %s", it.Name, clip(it.Output, 120))
	}
	return fmt.Sprintf("%s returned an error (%s; %d characters, not quoted: the session is redacted)",
		it.Name, errorClass(it.Output), utf8.RuneCountInString(it.Output))
}

// errorClass sorts an error output into a coarse class by keywords.
func errorClass(out string) string {
	o := strings.ToLower(out)
	for _, c := range []struct{ class, any string }{
		{"timeout", "timeout|timed out|deadline"},
		{"unavailable", "unavailable|503|connection refused|unreachable"},
		{"not_found", "not found|404|no such"},
		{"denied", "denied|forbidden|unauthorized|401|403"},
		{"invalid_input", "invalid|bad request|400|malformed"},
		{"rate_limited", "rate limit|429|too many"},
	} {
		for _, k := range strings.Split(c.any, "|") {
			if strings.Contains(o, k) {
				return c.class
			}
		}
	}
	return "other"
}
