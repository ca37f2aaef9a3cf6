package pg

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestOutcomeUnknown(t *testing.T) {
	lost := fmt.Errorf("write: %w", &commitError{err: io.ErrUnexpectedEOF})
	if !errors.Is(lost, ErrOutcomeUnknown) || !OutcomeUnknown(lost) {
		t.Fatal("a COMMIT cut on the way back is of unknown outcome")
	}
	refused := &commitError{err: &pgconn.PgError{Code: "40001"}}
	if errors.Is(refused, ErrOutcomeUnknown) {
		t.Fatal("a COMMIT the server refused rolled back: its outcome is known")
	}
	if errors.Is(io.ErrUnexpectedEOF, ErrOutcomeUnknown) {
		t.Fatal("a statement cut before COMMIT committed nothing")
	}
}
