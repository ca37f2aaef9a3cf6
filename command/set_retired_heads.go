package command

import "github.com/loomplane/loom/internal/userref"

// While a rotation of an org's user reference key runs (docs/architecture.md, issue
// 28), a key's head may still be named under the retired key until the rewrite reaches
// it. A write of the key revises that head: the round finds it (keyRefs names the keys
// under every live key), the commit locks it and checks its version as its own, writes
// the new head under the current key and deletes the one under the retired key in the
// same transaction. Without this the write made a second memory of the key.

// nameRetired names pr's row under the org's retired key too, when a rotation runs
// (live holds it after the current key); else pr.retiredRefs stays nil.
func nameRetired(pr *pending, live []userref.Generation) error {
	if len(live) < 2 {
		return nil
	}
	refs, err := columnRefsOf(live[1].Key, pr.row.Identity)
	if err != nil {
		return err
	}
	pr.retiredRefs = &refs
	return nil
}
