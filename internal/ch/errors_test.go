package ch

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
)

func TestUnavailableIsWhatARetryMayCure(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&clickhouse.Exception{Code: 60, Message: "Table loom.memory doesn't exist"}, true},
		{fmt.Errorf("search: %w", &clickhouse.Exception{Code: 252, Message: "Too many parts"}), true},
		{&clickhouse.Exception{Code: 62, Message: "Syntax error"}, false},
		{fmt.Errorf("read: %w", context.DeadlineExceeded), true},
		{errors.New("a value ClickHouse refused"), false},
	} {
		if got := Unavailable(c.err); got != c.want {
			t.Errorf("Unavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
