package events

import (
	"strconv"
	"time"
)

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

// The CloudEvents distributed-tracing extension's attributes as Kafka headers in the
// binary content mode: the W3C Trace Context of the request that wrote the record, so
// a consumer's span can join its trace. A record written without tracing has neither.
const (
	HeaderTraceParent = "ce_traceparent"
	HeaderTraceState  = "ce_tracestate"
)

// TraceHeaders returns the distributed-tracing headers for a W3C traceparent and
// tracestate; none when traceparent is empty, and no ce_tracestate when it is.
func TraceHeaders(traceparent, tracestate string) []Header {
	if traceparent == "" {
		return nil
	}
	hs := []Header{{Key: HeaderTraceParent, Value: []byte(traceparent)}}
	if tracestate != "" {
		hs = append(hs, Header{Key: HeaderTraceState, Value: []byte(tracestate)})
	}
	return hs
}

// HeaderRefGeneration is Loom's CloudEvents extension attribute (loomrefgen) naming
// the generation of the org's user reference key (loom.user_ref_keys.gen) under which
// the record's plain fields name its user, agent, session (user_ref, agent_ref,
// session_ref): a consumer that matches references across records (a user's erasure
// against the documents it fences) compares only references of one generation. Only
// on records that carry a reference.
const HeaderRefGeneration = "ce_loomrefgen"

// RefGenerationHeader is the HeaderRefGeneration header of generation gen; none for 0
// (a record that names no one by reference).
func RefGenerationHeader(gen int) []Header {
	if gen == 0 {
		return nil
	}
	return []Header{{Key: HeaderRefGeneration, Value: []byte(strconv.Itoa(gen))}}
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
