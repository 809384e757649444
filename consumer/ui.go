package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/consumer/internal/score"
	"github.com/lkscore/lkscore/dashboard"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/wire"
)

// uiServer is the dashboard on the ops listener: it answers 503 until the
// daemon has started, then serves dashboard.Handler.
//
// The index starts following the results stream on the first request, not
// at start-up: every replica serves the dashboard, and none should decode
// every scorecard for a page nobody opened. The first request waits (a few
// seconds at most) for the index to catch up.
type uiServer struct {
	mu      sync.RWMutex
	handler http.Handler
	follow  func()          // starts the index following the stream
	ready   <-chan struct{} // the index caught up
	once    sync.Once
	stopped bool // set by stopUI: no follower starts after it
	cancel  context.CancelFunc
	done    sync.WaitGroup
}

// catchUpWait bounds how long the first dashboard request waits for the index.
const catchUpWait = 3 * time.Second

// alertWindow is how many alert messages the dashboard reads back.
const alertWindow = 1000

func (u *uiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.RLock()
	h, follow, ready := u.handler, u.follow, u.ready
	u.mu.RUnlock()
	if h == nil {
		http.Error(w, "starting", http.StatusServiceUnavailable)
		return
	}
	u.once.Do(follow)
	select {
	case <-ready:
	case <-time.After(catchUpWait):
	case <-r.Context().Done():
		return
	}
	h.ServeHTTP(w, r)
}

// startUI builds the dashboard and starts its index following the results
// stream, until stopUI.
func (d *Daemon) startUI(ctx context.Context, js jetstream.JetStream, fs *facts.Store, st score.Reader) error {
	index := dashboard.NewIndex(d.cfg.Dashboard.Window, d.cfg.Regression.VersionTag)
	alerts := dashboard.NewAlertIndex(alertWindow)
	lim := d.cfg.Limits
	src := dashboard.Sources{
		Scorecard: func(ctx context.Context, seq uint64) (scoring.Scorecard, error) {
			var sc scoring.Scorecard
			s, err := js.Stream(ctx, d.subjects.ResultStream())
			if err != nil {
				return sc, err
			}
			m, err := s.GetMsg(ctx, seq)
			if err != nil {
				return sc, err
			}
			return sc, json.Unmarshal(m.Data, &sc)
		},
		Items: func(ctx context.Context, key string) ([]scoring.Item, error) {
			f, err := factsOf(ctx, fs, key)
			if err != nil {
				return nil, err
			}
			if f.Recording == nil && len(f.Spans) > 0 {
				// metadata-only: the turns as the scorer built them from
				// the spans (timing, interruptions, tool errors; no text)
				return scoring.ItemsFromSpans(f.Spans), nil
			}
			if f.Recording == nil {
				return nil, errors.New("lkscore has no record of where this session's recording is")
			}
			if f.ContentDroppedAt != nil {
				return nil, errors.New("privacy.mode metadata_only dropped the transcript and audio after scoring")
			}
			ref := f.Recording
			s, err := score.Load(ctx, st, ref, lim.Parser(), lim.UploadBytes())
			if errors.Is(err, recording.ErrNotFound) {
				return nil, fmt.Errorf("the recording is no longer in the store (%s)", ref.Location)
			}
			if err != nil {
				return nil, err
			}
			if s.Chat == nil {
				return nil, errors.New("the upload has no chat history (transcript recording was off)")
			}
			items := s.ScoringInput(ref.Location, "").Items
			if d.cfg.Privacy.Redacted(s.RedactionEnabled || facts.Resolve(f.Observations).RedactionEnabled) {
				redactItems(items)
			}
			return items, nil
		},
		Recording: func(ctx context.Context, key, object string) (io.ReadCloser, error) {
			f, err := recordingOf(ctx, fs, key)
			if err != nil {
				return nil, err
			}
			ref := f.Recording
			if object != recording.ObjectHeader && d.cfg.Privacy.Redacted(facts.Resolve(f.Observations).RedactionEnabled) {
				return nil, errors.New("the session is redacted: its transcript and audio are not served")
			}
			if f.ContentDroppedAt != nil && object != recording.ObjectHeader {
				return nil, errors.New("privacy.mode metadata_only dropped the transcript and audio after scoring")
			}
			if ref.Dir == "" {
				return nil, errors.New("the session is stored as one multipart object; its parts are not served separately")
			}
			rc, err := st.Open(ctx, ref.Dir+object, lim.UploadBytes())
			if errors.Is(err, recording.ErrNotFound) {
				return nil, fmt.Errorf("%s is not in the store", object)
			}
			return rc, err
		},
		Audio: func(ctx context.Context, key string) (bool, string) {
			f, err := recordingOf(ctx, fs, key)
			switch {
			case err != nil:
				return false, err.Error()
			case d.cfg.Privacy.Redacted(facts.Resolve(f.Observations).RedactionEnabled):
				return false, "the session is redacted: its audio is not served"
			case f.ContentDroppedAt != nil:
				return false, "privacy.mode metadata_only dropped the transcript and audio after scoring"
			case f.Recording.Dir == "":
				return false, "the session is stored as one multipart object; its audio is not served separately"
			}
			rc, err := st.Open(ctx, f.Recording.Dir+recording.ObjectAudio, lim.UploadBytes())
			if errors.Is(err, recording.ErrNotFound) {
				return false, "this upload has no recording.ogg (the session's audio recording was off)"
			}
			if err != nil {
				return false, err.Error()
			}
			_ = rc.Close()
			return true, ""
		},
		DeadLetters: func(ctx context.Context) (int, error) {
			s, err := js.Stream(ctx, d.subjects.DLQStream())
			if err != nil {
				return 0, err
			}
			info, err := s.Info(ctx)
			if err != nil {
				return 0, err
			}
			return int(info.State.Msgs), nil
		},
	}
	h, err := dashboard.NewHandler(index, alerts, src, d.cfg.Dashboard.Token, d.log)
	if err != nil {
		return err
	}
	uctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d.ui.mu.Lock()
	d.ui.handler, d.ui.cancel, d.ui.ready = h, cancel, index.CaughtUp()
	d.ui.follow = func() {
		d.ui.mu.Lock()
		defer d.ui.mu.Unlock()
		if d.ui.stopped {
			return
		}
		d.ui.done.Add(2)
		go func() {
			defer d.ui.done.Done()
			index.Follow(uctx, js, d.subjects.ResultStream(), d.log)
		}()
		go func() {
			defer d.ui.done.Done()
			alerts.Follow(uctx, js, d.subjects.AlertStream(), d.log)
		}()
	}
	d.ui.mu.Unlock()
	return nil
}

// stopUI stops the index from following the stream and waits for it.
func (d *Daemon) stopUI() {
	d.ui.mu.Lock()
	cancel := d.ui.cancel
	d.ui.stopped = true
	d.ui.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	d.ui.done.Wait()
}

// redactItems replaces what the user, the agent and tools said with its length.
func redactItems(items []scoring.Item) {
	for i := range items {
		it := &items[i]
		if it.Text != "" {
			it.Text = fmt.Sprintf("[redacted: %d characters]", len([]rune(it.Text)))
		}
		it.Arguments, it.Output = "", ""
	}
}

// factsOf returns the facts of a scorecard's session key.
func factsOf(ctx context.Context, fs *facts.Store, key string) (*wire.SessionFacts, error) {
	room, job, _ := strings.Cut(key, "/")
	f, _, err := fs.Get(ctx, wire.FactsKey(room, recording.FactsJobID(job)))
	return f, err
}

// recordingOf returns a session's facts, which say where its recording is.
func recordingOf(ctx context.Context, fs *facts.Store, key string) (*wire.SessionFacts, error) {
	f, err := factsOf(ctx, fs, key)
	if err != nil {
		return nil, err
	}
	if f.Recording == nil {
		return nil, errors.New("lkscore has no record of where this session's recording is")
	}
	return f, nil
}
