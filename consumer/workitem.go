package consumer

import (
	"errors"
	"fmt"
	"time"

	"github.com/lkscore/lkscore/config"
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
	Location string              `json:"location"`
	Origin   string              `json:"origin"` // upload, agent_job_ended, room_finished, egress_ended, sweep
	Problems []recording.Problem `json:"problems,omitempty"`
	// MetadataOnly is set for a session scored from its spans and logs: it
	// uploaded no recording (Dir and Object are empty).
	MetadataOnly bool      `json:"metadata_only,omitempty"`
	LocatedAt    time.Time `json:"located_at"`
	// Facts are the session's settled facts, each from its best source.
	Facts *Resolved `json:"facts,omitempty"`
}

func (w WorkItem) validate() error {
	switch {
	case w.SessionKey == "" || w.RoomID == "":
		return errors.New("work item lacks session_key or room_id")
	case w.MetadataOnly && (w.Dir != "" || w.Object != ""):
		return errors.New("a metadata-only work item has no dir or object")
	case w.MetadataOnly && (w.Facts == nil || len(w.Facts.Spans) == 0):
		return errors.New("a metadata-only work item needs the session's spans in its facts")
	case !w.MetadataOnly && (w.Dir == "") == (w.Object == ""):
		return errors.New("work item needs exactly one of dir and object")
	case !config.ValidCloseReason(w.CloseReason):
		return fmt.Errorf("work item close_reason %q is not a proto name", w.CloseReason)
	}
	return nil
}
