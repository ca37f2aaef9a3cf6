package extraction

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// register_step: an operator who builds loomd registers steps of its own (Steps,
// handed to the process with app.WithExtractionSteps), and a request names them in
// `steps` (or `skip`) as it names the built-in ones. A registered step is in no
// request's pipeline unless the request names it. It sees the facts the steps before
// it left and says which to drop and why; it neither adds facts nor writes.

// Candidate is a fact as a registered step sees it.
type Candidate struct {
	Key, Value   string
	MessageIndex int
	Tags         []string
}

// StepInput is what a registered step is run over.
type StepInput struct {
	Namespace string
	Identity  memrow.Identity // the facts' identity, without a key
	Messages  []Message
	Facts     []Candidate
}

// StepFunc is a registered step: for each of in.Facts, the reason to drop it, or ""
// to keep it (a list as long as in.Facts). Its error fails the request: nothing is
// written that the operator's step did not pass.
type StepFunc func(ctx context.Context, in StepInput) (drop []string, err error)

// Steps are the steps an operator registered, by name. The zero value holds none.
type Steps struct {
	byName map[string]StepFunc
}

// Register registers a step under name: a name of the memory_type shape, never under
// the built-in steps' "loom." prefix, registered once.
func (s *Steps) Register(name string, fn StepFunc) error {
	if fn == nil {
		return fmt.Errorf("register_step %q: no step function", name)
	}
	if strings.HasPrefix(name, "loom.") {
		return fmt.Errorf("register_step %q: the loom. prefix is the built-in steps'", name)
	}
	if err := memrow.ValidateName("step", strings.ReplaceAll(name, ".", "_")); err != nil {
		return fmt.Errorf("register_step %q: %w", name, err)
	}
	if s.byName == nil {
		s.byName = map[string]StepFunc{}
	}
	if s.byName[name] != nil {
		return fmt.Errorf("register_step %q: registered twice", name)
	}
	s.byName[name] = fn
	return nil
}

// lookup is the step registered under name; nil for none (or no registry).
func (s *Steps) lookup(name string) StepFunc {
	if s == nil {
		return nil
	}
	return s.byName[name]
}

// names are the registered steps' names.
func (s *Steps) names() []string {
	if s == nil {
		return nil
	}
	var out []string
	for n := range s.byName {
		out = append(out, n)
	}
	return out
}

// registeredStep runs a registered step over the live facts and drops those it names.
func registeredStep(name string, fn StepFunc) pipelineStep {
	return func(_ *Pipeline, ctx context.Context, st *state) error {
		if len(st.facts) == 0 {
			return nil
		}
		in := StepInput{Namespace: st.ns, Identity: st.identity, Messages: st.req.Messages, Facts: make([]Candidate, len(st.facts))}
		index := map[*candidate]int{}
		for i, c := range st.facts {
			in.Facts[i] = Candidate{Key: c.key, Value: c.value, MessageIndex: c.msg, Tags: append([]string(nil), c.tags...)}
			index[c] = i
		}
		drop, err := fn(ctx, in)
		if err == nil && len(drop) != len(in.Facts) {
			err = fmt.Errorf("answered %d verdicts for %d facts", len(drop), len(in.Facts))
		}
		if err != nil {
			return httperr.New(http.StatusInternalServerError, httperr.CodeInternal,
				fmt.Sprintf("the registered step %s failed: %v; nothing was written", name, err))
		}
		return st.drop(name, func(_ *state, c *candidate) string { return drop[index[c]] })
	}
}
