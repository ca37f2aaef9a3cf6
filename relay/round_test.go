package relay

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestOnlyARecordsOwnFaultCountsTowardParking(t *testing.T) {
	for _, err := range []error{
		kerr.MessageTooLarge,
		fmt.Errorf("%w (uncompressed_bytes=17629)", kerr.MessageTooLarge),
		kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage, kerr.InvalidTimestamp,
		fmt.Errorf("%w: row 7 headers: unexpected end of JSON input", errMalformed),
	} {
		if !refused(err) {
			t.Errorf("%v is not counted as a refusal", err)
		}
	}
	// An outage or a misconfigured cluster says nothing about the record: parking on
	// it would empty the stream.
	for _, err := range []error{
		kgo.ErrRecordTimeout, context.DeadlineExceeded, errors.New("dial tcp: connection refused"),
		kerr.TopicAuthorizationFailed, kerr.UnknownTopicOrPartition, kerr.NotLeaderForPartition,
		kerr.RequestTimedOut, kerr.NotEnoughReplicas,
	} {
		if refused(err) {
			t.Errorf("%v is counted as a refusal", err)
		}
	}
}

func TestRetryDelayDoublesUpToTenSeconds(t *testing.T) {
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond}
	for i, w := range want {
		if d := retryDelay(i + 1); d != w {
			t.Errorf("retryDelay(%d) = %s, want %s", i+1, d, w)
		}
	}
	if d := retryDelay(50); d != 10*time.Second {
		t.Errorf("retryDelay(50) = %s, want the 10s ceiling", d)
	}
}
