package failure

import (
	"net/http"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// WriteRetryableStatus answers 503 with a protobuf google.rpc.Status carrying
// a google.rpc.RetryInfo detail: the only error the Python agents SDK retries
// (docs/formats.md, "Recording upload").
func WriteRetryableStatus(w http.ResponseWriter, msg string, delay time.Duration) {
	st := &status.Status{Code: int32(code.Code_UNAVAILABLE), Message: msg}
	if d, err := anypb.New(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)}); err == nil {
		st.Details = append(st.Details, d)
	}
	body, err := proto.Marshal(st)
	if err != nil {
		http.Error(w, msg, http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Header().Set("Retry-After", strconv.Itoa(int(delay.Seconds())))
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(body)
}
