package wire

import "time"

// IngestAccepted is one endpoint's accepted requests signed by one API key.
type IngestAccepted struct {
	Endpoint string    `json:"endpoint"` // webhook, upload, otlp_logs, otlp_traces, otlp_metrics
	APIKey   string    `json:"api_key"`
	Count    uint64    `json:"count"`
	Last     time.Time `json:"last"`
}

// IngestRefused is one endpoint's requests refused for one reason.
type IngestRefused struct {
	Endpoint string    `json:"endpoint"`
	Reason   string    `json:"reason"`
	Count    uint64    `json:"count"`
	Last     time.Time `json:"last"`
	LastKey  string    `json:"last_api_key,omitempty"` // the key the last one named, unverified
}

// IngestWaiting is a session whose job ended and whose recording has not come.
type IngestWaiting struct {
	Key   string    `json:"key"`
	Since time.Time `json:"since"`
}

// IngestionReport is what one process's ingest saw, as it answers on
// Subjects.Ingestion (JSON).
type IngestionReport struct {
	Process  string           `json:"process"`
	Roles    string           `json:"roles"`
	Since    time.Time        `json:"since"` // the process started counting
	Accepted []IngestAccepted `json:"accepted,omitempty"`
	Refused  []IngestRefused  `json:"refused,omitempty"`
	// Waiting are the oldest sessions waiting for a recording, at most 20; WaitingTotal counts them all.
	Waiting      []IngestWaiting `json:"waiting,omitempty"`
	WaitingTotal int             `json:"waiting_total"`
}
