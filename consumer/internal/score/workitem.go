package score

import (
	"errors"
	"fmt"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/internal/work"
)

func validateItem(w work.Item) error {
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
