// Package offline holds the commands that read recordings without the
// daemon: `lkscore inspect` and `lkscore score`. It links the recording
// parser, the store and the scoring model, never NATS or the daemon
// (checked by .ci/run).
package offline

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/urfave/cli/v3"

	"github.com/lkscore/lkscore/audio"
	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/store"
)

// inspectOutput is what `lkscore inspect` prints.
type inspectOutput struct {
	Source string `json:"source"`
	*recording.Session
	Chat       *chatSummary `json:"chat,omitempty"`
	AudioBytes *int64       `json:"audio_bytes,omitempty"`
	// NoTranscript says why there is no chat history, when there is none.
	NoTranscript string `json:"no_transcript,omitempty"`
}

// noTranscriptWhy is what inspect says of an upload without a chat history.
const noTranscriptWhy = "no chat_history.json: the agent recorded no transcript, or lkscore ran with " +
	"privacy.mode metadata_only, which removes the transcript and audio once the session is scored " +
	"(the session facts record content_dropped_at)"

type chatSummary struct {
	Items         int            `json:"items"`
	Counts        map[string]int `json:"counts"`
	TimestampUnit string         `json:"timestamp_unit,omitempty"`
	KeyStyle      string         `json:"key_style,omitempty"`
}

// Inspect is `lkscore inspect`.
func Inspect(getenv func(string) string, stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "parse a recording upload and print it as JSON",
		ArgsUsage: "PATH | s3://bucket/key | https://egress-location | --audio recording.ogg",
		Description: "PATH is a session directory (header.binpb, chat_history.json), a header.binpb file, or a file\n" +
			"holding a raw multipart upload. s3:// and egress location URLs are read with the default AWS\n" +
			"credential chain and LKSCORE_S3_ENDPOINT / LKSCORE_S3_REGION / LKSCORE_S3_FORCE_PATH_STYLE.\n" +
			"--audio FILE measures a stereo Ogg/Opus recording (user left, agent right) instead: speech segments\n" +
			"per channel, turns with the heard latency, and the call's metrics, or why it cannot be measured\n" +
			"(docs/audio.md). Exit 0 when measured, 3 when refused.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "audio", Usage: "a recording.ogg to measure (heard turn-taking) instead of an upload"},
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			if path := c.String("audio"); path != "" {
				return inspectAudio(path, stdout)
			}
			if c.Args().Len() != 1 {
				return ExitError{Code: 2, Err: errors.New("inspect: want exactly one PATH or URL")}
			}
			out, err := loadSession(ctx, c.Args().First(), getenv, nil)
			if err != nil {
				return ExitError{Code: 1, Err: fmt.Errorf("inspect %s: %w", c.Args().First(), err)}
			}
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		},
	}
}

// loadSession reads one recording upload from a local path or an S3/egress
// URL with the recording parser, for inspect and score.
//
// dec, when not nil, is the memory a batch decodes chat histories into (the
// session's Chat is valid until the next load with it).
func loadSession(ctx context.Context, src string, getenv func(string) string, dec *recording.ChatDecoder) (*inspectOutput, error) {
	lim := recording.DefaultLimits()
	if strings.Contains(src, "://") && !strings.HasPrefix(src, "file://") {
		return inspectS3(ctx, src, getenv, lim)
	}
	path := strings.TrimPrefix(src, "file://")
	// A session directory, the common case, is read without a stat first
	// (one system call of ten a session); anything else is told apart below.
	if s, err := dec.Load(ctx, sessionFiles(path), "", lim); err == nil {
		return output(src, s, nil), nil
	} else if !errors.Is(err, recording.ErrNotFound) {
		return nil, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	dir := path
	if !st.IsDir() {
		if filepath.Base(path) != recording.ObjectHeader {
			f, err := os.Open(path)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			return fromMultipart(src, f, lim)
		}
		dir = filepath.Dir(path)
	}
	s, err := dec.Load(ctx, sessionFiles(dir), "", lim)
	if errors.Is(err, recording.ErrNotFound) {
		if _, serr := os.Stat(filepath.Join(dir, recording.ObjectHeader)); errors.Is(serr, os.ErrNotExist) {
			return nil, notSessionDir(dir)
		}
	}
	if err != nil {
		return nil, err
	}
	return output(src, s, nil), nil
}

// notSessionDir explains a directory without header.binpb, naming the
// session directories below it (a data dir's recordings/RM_…/AJ_…), if any.
func notSessionDir(dir string) error {
	var found []string
	glob := ""
	for _, levels := range []string{"*", "*/*", "*/*/*"} {
		m, _ := filepath.Glob(filepath.Join(dir, levels, recording.ObjectHeader))
		for _, h := range m {
			found = append(found, filepath.Dir(h))
		}
		if len(found) > 0 {
			glob = filepath.Join(dir, levels)
			break
		}
	}
	msg := fmt.Sprintf("%s is not a session directory: it has no %s", dir, recording.ObjectHeader)
	switch {
	case len(found) == 0:
		return errors.New(msg + " (a session directory holds header.binpb and chat_history.json, as lkscore stores an upload)")
	case len(found) <= 5:
		return fmt.Errorf("%s; the session directories below it: %s", msg, strings.Join(found, " "))
	default:
		return fmt.Errorf("%s; %d session directories are below it, e.g. %s (pass them all with %s)", msg, len(found),
			strings.Join(found[:3], " "), glob)
	}
}

func inspectS3(ctx context.Context, src string, getenv func(string) string, lim recording.Limits) (*inspectOutput, error) {
	s3cfg, err := config.S3FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	loc, err := recording.LocationParser{Endpoint: s3cfg.Endpoint, ForcePathStyle: s3cfg.ForcePathStyle}.Parse(src)
	if err != nil {
		return nil, err
	}
	if loc.Scheme != "s3" {
		return nil, fmt.Errorf("%s is not an S3 location", src)
	}
	s3cfg.Bucket = loc.Bucket
	st, err := store.NewS3(ctx, s3cfg)
	if err != nil {
		return nil, err
	}
	key := loc.Key
	switch {
	case strings.HasSuffix(key, "/"):
		return loadDir(ctx, src, st, key, lim)
	case strings.HasSuffix(key, "/"+recording.ObjectHeader) || key == recording.ObjectHeader:
		return loadDir(ctx, src, st, recording.SessionDir(key), lim)
	}
	rc, err := st.Open(ctx, key, config.Default().Limits.UploadBytes())
	if errors.Is(err, store.ErrNotFound) {
		// Maybe a directory given without its trailing slash.
		return loadDir(ctx, src, st, key+"/", lim)
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return fromMultipart(src, rc, lim)
}

func loadDir(ctx context.Context, src string, store recording.ObjectReader, dir string, lim recording.Limits) (*inspectOutput, error) {
	s, err := recording.Load(ctx, store, dir, lim)
	if err != nil {
		return nil, err
	}
	return output(src, s, nil), nil
}

func fromMultipart(src string, r io.Reader, lim recording.Limits) (*inspectOutput, error) {
	s, audio, err := recording.ParseMultipart(bufio.NewReader(r), "", lim)
	if errors.Is(err, recording.ErrNotMultipart) {
		return nil, fmt.Errorf("%s is not something lkscore reads: pass a session directory (header.binpb and "+
			"chat_history.json, as lkscore stores an upload), a header.binpb, a multipart upload as the agents SDK posts it, "+
			"or an s3:// URL (%w)", src, err)
	}
	if err != nil {
		return nil, err
	}
	return output(src, s, &audio), nil
}

func output(src string, s *recording.Session, audio *int64) *inspectOutput {
	out := &inspectOutput{Source: src, Session: s, AudioBytes: audio}
	if s.Chat != nil {
		out.Chat = &chatSummary{Items: len(s.Chat.Items), Counts: s.Chat.Counts, TimestampUnit: s.Chat.TimestampUnit, KeyStyle: s.Chat.KeyStyle}
	} else {
		out.NoTranscript = noTranscriptWhy
	}
	return out
}

// ExitError carries an exit code to main.
type ExitError struct {
	Code int
	Err  error
}

func (e ExitError) Error() string { return e.Err.Error() }

// ExitCode is the process exit code.
func (e ExitError) ExitCode() int { return e.Code }

// inspectAudio prints audio.Analyze's result for a file as JSON.
func inspectAudio(path string, stdout io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return ExitError{Code: 1, Err: fmt.Errorf("inspect --audio: %w", err)}
	}
	defer f.Close()
	res, err := audio.Analyze(f, audio.Config{})
	if err != nil {
		return ExitError{Code: 1, Err: fmt.Errorf("inspect --audio %s: %w", path, err)}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return ExitError{Code: 1, Err: err}
	}
	if res.Refused != "" {
		return ExitError{Code: ExitGate, Err: fmt.Errorf("inspect --audio %s: refused (%s): %s", path, res.Refused, res.Reason)}
	}
	return nil
}

// localAudio measures a session directory's recording.ogg, as the daemon
// does, so that a recording scores the same here and there. Other sources
// (a multipart file, S3) are scored without it.
func localAudio(src string, sc scoring.AudioConfig) (*session.Audio, error) {
	path := filepath.Join(strings.TrimPrefix(src, "file://"), recording.ObjectAudio)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res, err := audio.Analyze(f, audio.ForScoring(sc, config.Default().Audio.MaxDuration))
	if err != nil {
		return nil, err
	}
	return res.Scoring(), nil
}
