package projector

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/internal/revisions"
)

// A batch that fills over several polls (a replay, a backlog) spent its poll waiting
// on fetches with a core idle, and then decoded all its records at once before its
// first write: decoding the envelopes (their JSON, the sealed content's base64) is a
// tenth of a replay's CPU, all of it between one batch's write and the next. So the
// records a poll brings are decoded while the batch goes on polling, and a batch
// polled ahead is decoded while the one before it is written. A batch's first
// attempt applies what was decoded here; a retry decodes its records afresh, as
// before: the first attempt opened their sealed content in place (OpenInPlace),
// which spends it.

// decoding decodes a batch's records, fetch by fetch, in the order they are handed
// to it.
type decoding struct {
	fetched chan []*kgo.Record
	done    chan struct{}
	recs    []revisions.Record
}

// decodingQueue is how many polls' records wait for the decoder before a poll waits
// for it: a 10,000-record batch takes a few dozen polls.
const decodingQueue = 256

// startDecoding starts decoding a batch's records as they are polled.
func (p *Projector) startDecoding() *decoding {
	d := &decoding{fetched: make(chan []*kgo.Record, decodingQueue), done: make(chan struct{})}
	go func() {
		defer close(d.done)
		for recs := range d.fetched {
			d.recs = append(d.recs, revisions.Decode(recs, func(r *kgo.Record, err error) { undecodable(p.undecoded, p.log, r, err) })...)
		}
	}()
	return d
}

// add hands the decoder records just polled; they are not changed after.
func (d *decoding) add(recs []*kgo.Record) {
	if len(recs) > 0 {
		d.fetched <- recs
	}
}

// finish waits for every record handed over to be decoded, and gives the batch.
func (d *decoding) finish() batch {
	close(d.fetched)
	<-d.done
	return batchOf(d.recs)
}
