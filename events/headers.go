package events

import "time"

// Header is one Kafka record header, kept free of any Kafka client type.
type Header struct {
	Key   string
	Value []byte
}

// CloudEventHeaders returns the CloudEvents Kafka protocol binding headers for e in
// binary content mode: the envelope is the event data and the attributes ride as ce_*
// headers. ce_subject is the memory_id when e carries a revision.
func CloudEventHeaders(e *Envelope, source string) []Header {
	hs := []Header{
		{Key: "ce_specversion", Value: []byte(CloudEventsSpecVersion)},
		{Key: "ce_id", Value: []byte(e.ID)},
		{Key: "ce_source", Value: []byte(source)},
		{Key: "ce_type", Value: []byte(e.Type)},
		{Key: "ce_time", Value: []byte(e.CommittedAt.UTC().Format(time.RFC3339Nano))},
	}
	if e.Revision != nil {
		hs = append(hs, Header{Key: "ce_subject", Value: []byte(e.Revision.MemoryID)})
	}
	return append(hs, Header{Key: "content-type", Value: []byte(ContentType)})
}

// HeaderValue returns the value of the first header named key.
func HeaderValue(hs []Header, key string) (string, bool) {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}
