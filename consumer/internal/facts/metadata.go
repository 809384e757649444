package facts

import (
	"encoding/json"
	"strconv"
)

// MaxMetadataValue bounds the one metadata value lkscore keeps of a
// webhook (regression.version_metadata_key's): a version, not free text.
const MaxMetadataValue = 128

// MetadataValue is key's value in the first of metadata (JSON objects, as
// LiveKit carries job and room metadata) that has it as a non-empty string
// or a number, bounded to MaxMetadataValue bytes; "" when none has it or
// key is "". Ingest reads it before a stored webhook loses its metadata
// (docs/security.md): nothing else of the metadata is kept.
func MetadataValue(key string, metadata ...string) string {
	if key == "" {
		return ""
	}
	for _, md := range metadata {
		if md == "" {
			continue
		}
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(md), &m) != nil {
			continue
		}
		raw, ok := m[key]
		if !ok {
			continue
		}
		var val any
		if json.Unmarshal(raw, &val) != nil {
			continue
		}
		switch v := val.(type) {
		case string:
			if v != "" {
				return Bounded(v, MaxMetadataValue)
			}
		case float64:
			return Bounded(strconv.FormatFloat(v, 'f', -1, 64), MaxMetadataValue)
		}
	}
	return ""
}
