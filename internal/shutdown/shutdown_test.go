package shutdown

import (
	"context"
	"testing"
	"time"
)

func TestOutliveKeepsWorkAliveForTheGraceOnly(t *testing.T) {
	parent, stop := context.WithCancel(context.Background())
	ctx, done := Outlive(parent, 200*time.Millisecond)
	defer done()
	stop()
	if ctx.Err() != nil {
		t.Fatal("the unit's context ended with its parent; it must outlive it by the grace")
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the unit's context outlived the grace")
	}

	ctx, done = Outlive(context.Background(), time.Hour)
	done()
	if ctx.Err() == nil {
		t.Fatal("cancel must end the unit's context")
	}
}
