package rescore

import (
	"crypto/sha256"
	"sort"

	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
)

// digest is a scorecard's bytes as the run keeps them: their SHA-256.
type digest = [sha256.Size]byte

// oldCard is what a run keeps of a session's latest scorecard under another
// scoring version: its brief for the diff and where to read it back.
type oldCard struct {
	seq      uint64 // in the results stream
	version  string
	agent    string
	model    string // its model version: its audio measurement is reusable under the same
	hasAudio bool
	brief    CardSummary
}

// briefOf is what a run keeps of a stored scorecard.
func briefOf(c *session.Scorecard, seq uint64) *oldCard {
	return &oldCard{seq: seq, version: c.ScoringVersion, agent: c.Session.AgentName, model: c.ModelVersion, hasAudio: c.Audio != nil,
		brief: summarize(c)}
}

// choice is what a run does with one session.
type choice struct {
	// removed: the session cannot be scored, its work item is gone.
	removed bool
	// reuseAudio: its audio is read from its old scorecard, not measured.
	reuseAudio bool
}

// decide chooses for one session: hasItem says its work item is still in
// the sessions stream, old is its latest scorecard under another version
// (nil: none), metadataOnly the item's flag, measureAudio the option.
func decide(hasItem bool, old *oldCard, metadataOnly, measureAudio bool) choice {
	if !hasItem {
		return choice{removed: true}
	}
	return choice{reuseAudio: !measureAudio && old != nil && old.model == scoring.ModelVersion && !metadataOnly}
}

// sessionsOf are the sessions a run considers, sorted: every one with a
// work item, and every one with only an old scorecard (reported removed).
func sessionsOf[I, C any](items map[string]I, old map[string]C) []string {
	keys := make([]string, 0, len(items)+len(old))
	for k := range items {
		keys = append(keys, k)
	}
	for k := range old {
		if _, ok := items[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// publishPlan splits the scored sessions (fresh) between those already
// published under the version (counted), those an earlier run enqueued
// (waited for) and those to enqueue now (todo, sorted).
func publishPlan(fresh map[string]digest, published, enqueued map[string]bool) (todo, waiting []string, already int) {
	for key := range fresh {
		switch {
		case published[key]:
			already++
		case enqueued[key]:
			waiting = append(waiting, key)
		default:
			todo = append(todo, key)
		}
	}
	sort.Strings(todo)
	sort.Strings(waiting)
	return todo, waiting, already
}

// outcome compares what the workers published (got: the digests of their
// scorecards) with this run's scorecards for the sessions it waited for:
// those not published yet, and those whose bytes differ; both sorted.
func outcome(waitedFor []string, got, fresh map[string]digest) (notYet, mismatched []string) {
	for _, key := range waitedFor {
		g, ok := got[key]
		switch {
		case !ok:
			notYet = append(notYet, key)
		case g != fresh[key]:
			mismatched = append(mismatched, key)
		}
	}
	sort.Strings(notYet)
	sort.Strings(mismatched)
	return notYet, mismatched
}
