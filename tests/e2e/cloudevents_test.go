package e2e

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// Every record is a CloudEvent in the Kafka protocol binding's binary mode, as the
// CloudEvents Go SDK reads it: the ce_* headers are the attributes, content-type is
// datacontenttype, and the record value (the envelope) is the data.
func TestRecordsAreCloudEventsInBinaryMode(t *testing.T) {
	n, url := env.SharedAPI(t)
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns := testenv.Unique(t, "ce")
	first := c.Set(t, ns, "k", "a value the CloudEvents SDK never sees in the clear")
	c.Set(t, ns, "k", "its revision")
	if r := c.Search(t, ns, "a value", 1); r.Status != 200 {
		t.Fatalf("search: %d %s", r.Status, r.Body)
	}

	checked := 0
	for _, r := range env.TopicRecords(t) {
		if string(r.Key) != "acme/"+ns {
			continue
		}
		env, err := events.Decode(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		msg := recordMessage{r}
		if msg.ReadEncoding() != binding.EncodingBinary {
			t.Fatalf("record %s is not in binary mode", env.ID)
		}
		ev, err := binding.ToEvent(context.Background(), msg)
		if err != nil {
			t.Fatalf("the SDK cannot read record %s: %v", env.ID, err)
		}
		if err := ev.Validate(); err != nil {
			t.Fatalf("record %s is not a valid CloudEvent: %v", env.ID, err)
		}
		if ev.SpecVersion() != "1.0" || ev.ID() != env.ID || ev.Type() != string(env.Type) || ev.Source() != "loom" ||
			!ev.Time().Equal(env.CommittedAt) || ev.Subject() != first["memory_id"] || ev.DataContentType() != "application/json" {
			t.Fatalf("event attributes %s do not match envelope %s (%s, memory %v, committed %s)",
				ev.Context, env.ID, env.Type, first["memory_id"], env.CommittedAt)
		}
		if !bytes.Equal(ev.Data(), r.Value) {
			t.Fatalf("event data is not the record value")
		}
		checked++
	}
	if checked != 2 {
		t.Fatalf("checked %d records of the namespace, want 2", checked)
	}
}

// ceSpecs are the CloudEvents attribute names as the Kafka binding spells them.
var ceSpecs = spec.WithPrefix("ce_")

// recordMessage is a kgo record read as a binding.Message: the SDK has no franz-go
// binding, so this does what its sarama binding does with a sarama message.
type recordMessage struct{ r *kgo.Record }

func (m recordMessage) header(key string) (string, bool) {
	for _, h := range m.r.Headers {
		if strings.EqualFold(h.Key, key) {
			return string(h.Value), true
		}
	}
	return "", false
}

func (m recordMessage) version() spec.Version {
	v, ok := m.header(ceSpecs.PrefixedSpecVersionName())
	if !ok {
		return nil
	}
	return ceSpecs.Version(v)
}

func (m recordMessage) ReadEncoding() binding.Encoding {
	if m.version() != nil {
		return binding.EncodingBinary
	}
	return binding.EncodingUnknown
}

func (m recordMessage) ReadStructured(context.Context, binding.StructuredWriter) error {
	return binding.ErrNotStructured
}

func (m recordMessage) ReadBinary(_ context.Context, w binding.BinaryWriter) error {
	v := m.version()
	if v == nil {
		return binding.ErrNotBinary
	}
	for _, h := range m.r.Headers {
		key := strings.ToLower(h.Key)
		var err error
		switch {
		case key == "content-type":
			err = w.SetAttribute(v.AttributeFromKind(spec.DataContentType), string(h.Value))
		case strings.HasPrefix(key, ceSpecs.Prefix()):
			if attr := v.Attribute(key); attr != nil {
				err = w.SetAttribute(attr, string(h.Value))
			} else {
				err = w.SetExtension(strings.TrimPrefix(key, ceSpecs.Prefix()), string(h.Value))
			}
		}
		if err != nil {
			return err
		}
	}
	return w.SetData(bytes.NewReader(m.r.Value))
}

// GetAttribute and GetExtension make it a binding.MessageMetadataReader, which
// binding.ToEvent asserts for a binary message even when it applies no transformer.
func (m recordMessage) GetAttribute(k spec.Kind) (spec.Attribute, interface{}) {
	v := m.version()
	if v == nil {
		return nil, nil
	}
	attr := v.AttributeFromKind(k)
	if attr == nil {
		return nil, nil
	}
	name := attr.PrefixedName()
	if k == spec.DataContentType {
		name = "content-type"
	}
	if val, ok := m.header(name); ok {
		return attr, val
	}
	return attr, nil
}

func (m recordMessage) GetExtension(name string) interface{} {
	if val, ok := m.header(ceSpecs.Prefix() + name); ok {
		return val
	}
	return nil
}

func (m recordMessage) Finish(error) error { return nil }

var (
	_ binding.Message               = recordMessage{}
	_ binding.MessageMetadataReader = recordMessage{}
)
