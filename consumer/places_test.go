package consumer

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lkscore/lkscore/consumer/forget"
	"github.com/lkscore/lkscore/internal/population"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/store"
	"github.com/lkscore/lkscore/wire"
)

// keyMatches reports whether a key-value key is matched by a NATS
// filter ("h.>", ">", "RM_x.*", or the key itself).
func keyMatches(filter, key string) bool {
	f, k := strings.Split(filter, "."), strings.Split(key, ".")
	for i, tok := range f {
		switch {
		case tok == ">":
			return len(k) > i
		case i >= len(k):
			return false
		case tok != "*" && tok != k[i]:
			return false
		}
	}
	return len(f) == len(k)
}

// TestEveryPlaceListed: after a full run (uploads, webhooks and OTLP
// scored, regression histories, threshold windows, drift alerts and their
// states, a sealed baseline), every stream, every bucket's key space and
// every path of the data dir is on forget.Places, the one list forget
// walks; and forgetting a session named in an alert and in the sealed
// baseline leaves it in no stream message or bucket entry, the baseline
// sealed again without it (issue 66: forget left it in sealed baselines).
func TestEveryPlaceListed(t *testing.T) {
	t.Parallel()
	gone, kept := newTrustSession("RM_Gone", "AJ_Gone", false), newTrustSession("RM_Kept", "AJ_Kept", false)
	d, cfg, url := scoreBoth(t, gone, kept)
	alerts := driftVersion(t, url, population.Clean("placed", "1"), 51)
	js := testenv.JetStream(t, url)
	ctx := context.Background()

	// lkscore baseline seal, as cmd/lkscore does it: the history's recent samples.
	kv, err := js.KeyValue(ctx, d.subjects.RegressionBucket())
	if err != nil {
		t.Fatal(err)
	}
	hkeys, _ := kv.ListKeysFiltered(ctx, regress.HistoryKeysFilter)
	var sealed regress.Baseline
	for k := range hkeys.Keys() {
		e, _ := kv.Get(ctx, k)
		var h regress.History
		if json.Unmarshal(e.Value(), &h) == nil && h.Key.Agent == "placed" && h.Key.Version == "1" {
			sealed = regress.NewBaseline("placed", "1", h.Key.ScoringVersion, h.Recent())
		}
	}
	if len(sealed.Samples) == 0 {
		t.Fatal("no history to seal")
	}
	data, _ := json.Marshal(sealed)
	if _, err := kv.Put(ctx, regress.BaselineKey("placed", sealed.ScoringVersion), data); err != nil {
		t.Fatal(err)
	}

	places := forget.Places(d.subjects)
	on := func(kind, name string) bool {
		return slices.ContainsFunc(places, func(p forget.Place) bool { return p.Kind == kind && p.Name == name })
	}
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		bucket, isKV := strings.CutPrefix(name, "KV_")
		if !isKV {
			if !on("stream", name) {
				t.Errorf("stream %s is not on forget.Places", name)
			}
			continue
		}
		bkv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			t.Fatal(err)
		}
		keys, _ := bkv.ListKeys(ctx)
		for k := range keys.Keys() {
			if !slices.ContainsFunc(places, func(p forget.Place) bool {
				b, filter, _ := strings.Cut(p.Name, " ")
				return p.Kind == "keys" && b == bucket && keyMatches(filter, k)
			}) {
				t.Errorf("bucket %s key %s is under no key space on forget.Places", bucket, k)
			}
		}
	}
	entries, _ := os.ReadDir(cfg.DataDir)
	for _, e := range entries {
		if !on("dir", e.Name()) {
			t.Errorf("data dir path %s is not on forget.Places", e.Name())
		}
	}
	recs, _ := os.ReadDir(filepath.Join(cfg.DataDir, "recordings"))
	for _, e := range recs {
		if !on("store", e.Name()) && !on("store", e.Name()+"/") && (wire.CheckID("room", e.Name()) != nil || !on("store", "{key_template}")) {
			t.Errorf("recording store path %s is neither a session's nor on forget.Places", e.Name())
		}
	}

	// Forget a session an alert names and the sealed baseline holds.
	var victim string
	for _, a := range alerts {
		for _, r := range a.WorstSessions {
			if slices.ContainsFunc(sealed.Samples, func(s regress.Sample) bool { return s.Session == r.Session }) {
				victim = r.Session
			}
		}
		if victim == "" && a.Session != "" && slices.ContainsFunc(sealed.Samples, func(s regress.Sample) bool { return s.Session == a.Session }) {
			victim = a.Session
		}
	}
	if victim == "" {
		victim = sealed.Samples[0].Session
	}
	if !strings.Contains(storedMessages(t, url), victim) {
		t.Fatalf("before forget, the scan does not find %s: it proves nothing", victim)
	}
	st, err := store.OpenLocalDir(filepath.Join(cfg.DataDir, "recordings"))
	if err != nil {
		t.Fatal(err)
	}
	layout, _ := cfg.Layout()
	var baselineNote string
	for _, s := range forget.Run(ctx, js, d.subjects, st, layout, 2*time.Second, victim) {
		t.Logf("%-55s removed %-3d %s %s", s.Place, s.Removed, s.Note, s.Err)
		if s.Err != "" {
			t.Errorf("%s: %s", s.Place, s.Err)
		}
		if strings.Contains(s.Place, "sealed baselines") {
			baselineNote = s.Note
		}
	}
	if l := leaked(storedMessages(t, url), []string{victim}); len(l) > 0 {
		t.Errorf("after forget, stream messages or bucket entries still name %s: %v", victim, l)
	}
	e, err := kv.Get(ctx, regress.BaselineKey("placed", sealed.ScoringVersion))
	if err != nil {
		t.Fatal(err)
	}
	after, err := regress.ParseBaseline(e.Value())
	if err != nil || after.ID == sealed.ID || len(after.Samples) != len(sealed.Samples)-1 {
		t.Errorf("the sealed baseline after forget: %v, id %s (was %s), %d samples (was %d)", err, after.ID, sealed.ID,
			len(after.Samples), len(sealed.Samples))
	}
	if !strings.Contains(baselineNote, after.ID) {
		t.Errorf("forget's report does not name the baseline it sealed again: %q", baselineNote)
	}
}
