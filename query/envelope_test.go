package query

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/httperr"
)

func TestBehindIsProjectionBehind(t *testing.T) {
	err := envelope(fmt.Errorf("search: %w", &BehindError{Namespace: "ns", Generation: 9, Watermark: 7, Budget: 5 * time.Second}))
	var he *httperr.Error
	if !errors.As(err, &he) || he.Status != 503 || he.Code != httperr.CodeProjectionBehind || !he.Retryable || he.RetryAfter <= 0 {
		t.Fatalf("%v, want a retryable 503 PROJECTION_BEHIND", err)
	}
	if he.Message != "ClickHouse has not caught up with namespace ns within 5s; retry" {
		t.Fatalf("message %q", he.Message)
	}
	if he.Extra["namespace"] != "ns" || he.Extra["generation"] != int64(9) || he.Extra["watermark"] != int64(7) {
		t.Fatalf("extra %v", he.Extra)
	}
	other := httperr.NotFound("memory not found")
	if envelope(other) != error(other) {
		t.Fatal("an envelope passes as it is")
	}
}
