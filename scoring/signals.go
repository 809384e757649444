package scoring

import "slices"

// What a session's SDK sent, as the signal coverage view counts it (the
// dashboard's /ui/signals and lkscore_session_signals_total): the inputs
// it was scored from, audio that was measured, and a close reason some
// signal named.
const (
	SignalRecording   = InputRecording
	SignalLogs        = InputLogs
	SignalTraces      = InputTraces
	SignalAudio       = "audio"
	SignalCloseReason = "close_reason"
)

// Signals are every signal SignalsOf can name, in the order views show them.
var Signals = []string{SignalRecording, SignalLogs, SignalTraces, SignalAudio, SignalCloseReason}

// SignalsOf names the signals card's session had, in Signals' order.
func SignalsOf(card *Scorecard) []string {
	inputs := card.Inputs
	if len(inputs) == 0 {
		inputs = []string{InputRecording} // a recording alone, as Inputs says
	}
	var out []string
	for _, s := range []string{SignalRecording, SignalLogs, SignalTraces} {
		if slices.Contains(inputs, s) {
			out = append(out, s)
		}
	}
	if a := card.Audio; a != nil && a.Refused == "" && len(a.Turns) > 0 {
		out = append(out, SignalAudio)
	}
	if src := card.Completion.CloseReasonSource; src != "" && src != sourceAbsent {
		out = append(out, SignalCloseReason)
	}
	return out
}

// sourceAbsent is the close reason source of a session no signal named
// (recording.SourceAbsent; scoring imports no recording).
const sourceAbsent = "absent"
