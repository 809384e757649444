package scoring

import (
	"fmt"
	"hash/maphash"
)

// Transcript integrity finding codes.
const (
	CodeLowConfidence       = "low_confidence"
	CodeLowMeanConfidence   = "low_mean_confidence"
	CodeEmptyTranscript     = "empty_transcript"
	CodeUserTurnNoMetrics   = "user_turn_without_metrics"
	CodeDuplicateItemID     = "duplicate_item_id"
	CodeTimestampOutOfOrder = "timestamp_out_of_order"
)

func transcriptFindings(a *analysis, cfg Config) []Finding {
	var out []Finding
	items := a.s.Items
	low := budget{per: 4, cap: 30}
	empty := budget{per: 8, cap: 32}
	noMetrics := budget{per: 2, cap: 10}
	var confSum float64
	var confN int
	for _, i := range a.users {
		it := &items[i]
		if c := it.TranscriptConfidence; c != nil {
			confSum += *c
			confN++
			if *c < cfg.Transcript.LowConfidence {
				out = append(out, Finding{Code: CodeLowConfidence, Severity: Warning, ItemID: it.ID, Turn: some(i),
					Value: some(round(*c)), Threshold: some(cfg.Transcript.LowConfidence), Deduction: low.take(),
					Message: fmt.Sprintf("user transcript confidence %s", num(*c))})
			}
		}
		if !it.HasMetrics {
			out = append(out, Finding{Code: CodeUserTurnNoMetrics, Severity: Info, ItemID: it.ID, Turn: some(i),
				Deduction: noMetrics.take(), Message: "user turn carries no metrics"})
		}
	}
	if confN > 0 {
		if mean := confSum / float64(confN); mean < cfg.Transcript.MeanConfidenceMin {
			out = append(out, Finding{Code: CodeLowMeanConfidence, Severity: Warning, Value: some(round(mean)),
				Threshold: some(cfg.Transcript.MeanConfidenceMin), Deduction: 15,
				Message: fmt.Sprintf("mean user transcript confidence %s over %d turns", num(mean), confN)})
		}
	}
	if !a.s.hasRecording() {
		return out // items made of spans have no text, and their order is the spans'
	}
	order := budget{per: 3, cap: 15}
	last := 0.0
	for i := range items {
		it := &items[i]
		if it.Type == TypeMessage && (it.Role == RoleUser || it.Role == RoleAssistant) && blank(it.Text) {
			sev := Critical
			if it.Role == RoleAssistant {
				sev = Warning
			}
			out = append(out, Finding{Code: CodeEmptyTranscript, Severity: sev, ItemID: it.ID, Turn: some(i), Deduction: empty.take(),
				Message: it.Role + " message with an empty transcript"})
		}
		if it.CreatedAt > 0 {
			if it.CreatedAt < last {
				v := ms(last - it.CreatedAt)
				out = append(out, Finding{Code: CodeTimestampOutOfOrder, Severity: Warning, ItemID: it.ID, Turn: some(i),
					Value: some(round(v)), Deduction: order.take(),
					Message: fmt.Sprintf("created %s ms before the item preceding it", num(v))})
			}
			last = max(last, it.CreatedAt)
		}
	}
	return append(out, duplicateIDs(items, a.scratch)...)
}

// duplicateIDs reports every item whose id an earlier item already used.
// The common case, all ids distinct, is settled with 64-bit hashes of the
// ids in an open-addressing set (much cheaper than a map of strings); only
// when two hashes match does it compare the ids themselves.
func duplicateIDs(items []Item, sc *scratch) []Finding {
	size := 16
	for size < 2*len(items) {
		size <<= 1
	}
	sc.set = grow(sc.set, size)
	set := sc.set // 0 = empty; a zero hash is stored as 1
	clash := false
	for i := range items {
		if items[i].ID == "" {
			continue
		}
		h := max(maphash.String(idSeed, items[i].ID), 1)
		for j := h & uint64(size-1); ; j = (j + 1) & uint64(size-1) {
			if set[j] == 0 {
				set[j] = h
				break
			}
			if set[j] == h {
				clash = true
				break
			}
		}
		if clash {
			break
		}
	}
	if !clash {
		return nil
	}
	var out []Finding
	b := budget{per: 5, cap: 20}
	seen := make(map[string]bool, len(items))
	for i := range items {
		id := items[i].ID
		if id == "" {
			continue
		}
		if seen[id] {
			out = append(out, Finding{Code: CodeDuplicateItemID, Severity: Warning, ItemID: id, Turn: some(i),
				Deduction: b.take(), Message: "item id used more than once"})
		}
		seen[id] = true
	}
	return out
}

// idSeed seeds the id hashes. A random seed changes no output: equal
// hashes are always confirmed by comparing the ids.
var idSeed = maphash.MakeSeed()
