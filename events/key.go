package events

import (
	"fmt"
	"strconv"
	"strings"
)

// RecordKey is the Kafka record key "org/namespace": a namespace's records share a
// partition, so they arrive in seq order.
func RecordKey(org, namespace string) []byte {
	return []byte(org + "/" + namespace)
}

// RecordID is "org/namespace/seq", the id of a namespace generation's record.
func RecordID(org, namespace string, seq int64) string {
	return org + "/" + namespace + "/" + strconv.FormatInt(seq, 10)
}

// ParseRecordID splits a RecordID. Org and namespace never contain '/', and seq is a
// canonical decimal >= 1, so every id has exactly one spelling.
func ParseRecordID(id string) (org, namespace string, seq int64, err error) {
	parts := strings.Split(id, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return "", "", 0, fmt.Errorf("events: record id %q is not org/namespace/seq", id)
	}
	if !isCanonicalPositive(parts[2]) {
		return "", "", 0, fmt.Errorf("events: record id %q: seq is not a decimal >= 1", id)
	}
	seq, err = strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return "", "", 0, fmt.Errorf("events: record id %q: %w", id, err)
	}
	return parts[0], parts[1], seq, nil
}

// isCanonicalPositive reports whether s is [1-9][0-9]*, which ParseInt alone would
// widen with signs and leading zeros.
func isCanonicalPositive(s string) bool {
	if s == "" || s[0] < '1' || s[0] > '9' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
