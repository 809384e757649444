package consumer

import (
	"errors"
	"fmt"
	"time"

	"github.com/lkscore/lkscore/recording"
)

// WorkItem is one session's work on lkscore.session.<CLOSE_REASON>: where
// its recording is and what the locator learned, never the recording itself.
type WorkItem struct {
	SessionKey        string `json:"session_key"`
	RoomID            string `json:"room_id"`
	RoomName          string `json:"room_name,omitempty"`
	JobID             string `json:"job_id,omitempty"`
	AgentName         string `json:"agent_name,omitempty"`
	CloseReason       string `json:"close_reason"`
	CloseReasonSource string `json:"close_reason_source"`
	// Dir is the store key prefix of a directory-layout upload ("RM_x/AJ_y/").
	Dir string `json:"dir,omitempty"`
	// Object is the key of a raw multipart upload object, instead of Dir;
	// Bucket names its S3 bucket when it is not the store's own.
	Object string `json:"object,omitempty"`
	Bucket string `json:"bucket,omitempty"`
	// Location points back at the recording (file://…, s3://…) for the scorecard.
	Location  string              `json:"location"`
	Origin    string              `json:"origin"` // upload, agent_job_ended, room_finished, egress_ended, sweep
	Problems  []recording.Problem `json:"problems,omitempty"`
	LocatedAt time.Time           `json:"located_at"`
}

func (w WorkItem) validate() error {
	switch {
	case w.SessionKey == "" || w.RoomID == "":
		return errors.New("work item lacks session_key or room_id")
	case (w.Dir == "") == (w.Object == ""):
		return errors.New("work item needs exactly one of dir and object")
	case !validCloseReason(w.CloseReason):
		return fmt.Errorf("work item close_reason %q is not a proto name", w.CloseReason)
	}
	return nil
}

func validCloseReason(r string) bool {
	switch r {
	case "CR_UNKNOWN", "CR_ERROR", "CR_JOB_SHUTDOWN", "CR_PARTICIPANT_DISCONNECTED", "CR_USER_INITIATED", "CR_COMPLETED":
		return true
	}
	return false
}

// permanentError marks an error that retrying cannot fix: the message is
// dead-lettered at once and terminated.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// isPermanent reports errors to dead-letter: marked ones, malformed
// recordings and store errors retrying cannot fix.
func isPermanent(err error) bool {
	var pe *permanentError
	var parse *recording.ParseError
	return errors.As(err, &pe) || errors.As(err, &parse) || errors.Is(err, ErrPermanent) || errors.Is(err, recording.ErrLimit)
}

// backoff is the redelivery delay after n deliveries: base doubling, at most 5 min.
func backoff(base time.Duration, n uint64) time.Duration {
	d := base
	for i := uint64(1); i < n && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute)
}
