package metrics

import (
	"bytes"
	"math"
	"strconv"
	"strings"
)

var (
	// Label values escape backslash, double quote and newline.
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	// HELP text escapes only backslash and newline.
	helpEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

// writeSample appends one line `name{labels} value`, adding le when it is
// not empty.
func writeSample(b *bytes.Buffer, name string, labels, values []string, le string, v float64) {
	writeName(b, name, labels, values, le)
	b.Write(appendFloat(b.AvailableBuffer(), v))
	b.WriteByte('\n')
}

// writeCount is writeSample for histogram counts, written as integers so
// they stay exact and readable at any size.
func writeCount(b *bytes.Buffer, name string, labels, values []string, le string, n uint64) {
	writeName(b, name, labels, values, le)
	b.Write(strconv.AppendUint(b.AvailableBuffer(), n, 10))
	b.WriteByte('\n')
}

func writeName(b *bytes.Buffer, name string, labels, values []string, le string) {
	b.WriteString(name)
	if len(labels) > 0 || le != "" {
		b.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(l)
			b.WriteString(`="`)
			labelEscaper.WriteString(b, values[i])
			b.WriteByte('"')
		}
		if le != "" {
			if len(labels) > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`le="`)
			b.WriteString(le)
			b.WriteByte('"')
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
}

// formatFloat formats f as the Prometheus client does: the shortest 'g'
// form, and +Inf, -Inf and NaN spelled as Prometheus parses them.
func formatFloat(f float64) string { return string(appendFloat(nil, f)) }

func appendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, +1):
		return append(dst, "+Inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-Inf"...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64)
}
