package query

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// appendParkedPool appends the pool as parked: the JSON encoding/json gives
// []parkedCandidate, written without reflection or a map sort per candidate, since a
// search parks its whole pool (hundreds of candidates) on every first page.
func appendParkedPool(buf []byte, pool []*candidate) ([]byte, error) {
	buf = append(buf, '[')
	var legs []Leg
	for i, c := range pool {
		if i > 0 {
			buf = append(buf, ',')
		}
		id := c.identity
		buf = append(buf, `{"id":{"org":`...)
		buf = appendJSONString(buf, id.Org)
		buf = append(buf, `,"namespace":`...)
		buf = appendJSONString(buf, id.Namespace)
		buf = append(buf, `,"agent":`...)
		buf = appendJSONString(buf, id.Agent)
		buf = append(buf, `,"user_id":`...)
		buf = appendJSONString(buf, id.UserID)
		buf = append(buf, `,"session_id":`...)
		buf = appendJSONString(buf, id.SessionID)
		buf = append(buf, `,"memory_key":`...)
		buf = appendJSONString(buf, id.MemoryKey)
		buf = append(buf, `},"sha":`...)
		buf = appendJSONString(buf, c.contentSHA256)
		buf = append(buf, `,"type":`...)
		buf = appendJSONString(buf, c.memoryType)
		buf = append(buf, `,"scores":`...)
		if c.scores == nil {
			buf = append(buf, "null"...)
		} else {
			legs = legs[:0]
			for l := range c.scores {
				legs = append(legs, l)
			}
			slices.Sort(legs)
			buf = append(buf, '{')
			for j, l := range legs {
				if j > 0 {
					buf = append(buf, ',')
				}
				buf = appendJSONString(buf, string(l))
				buf = append(buf, ':')
				var err error
				if buf, err = appendJSONFloat(buf, c.scores[l]); err != nil {
					return nil, err
				}
			}
			buf = append(buf, '}')
		}
		for _, f := range []struct {
			name string
			v    float64
		}{{`,"coverage":`, c.coverage}, {`,"fused":`, c.fused}, {`,"relevance":`, c.relevance}} {
			buf = append(buf, f.name...)
			var err error
			if buf, err = appendJSONFloat(buf, f.v); err != nil {
				return nil, err
			}
		}
		buf = append(buf, '}')
	}
	return append(buf, ']'), nil
}

// appendJSONFloat appends f as encoding/json writes a float64.
func appendJSONFloat(buf []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("a parked score is not a number JSON holds: %v", f)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	buf = strconv.AppendFloat(buf, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		if n := len(buf); n >= 4 && buf[n-4] == 'e' && buf[n-3] == '-' && buf[n-2] == '0' {
			buf[n-2] = buf[n-1]
			buf = buf[:n-1]
		}
	}
	return buf, nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted as encoding/json quotes it: control characters,
// quotes and backslashes escaped, <, > and & as \u escapes, invalid UTF-8 as U+FFFD,
// and U+2028 and U+2029 escaped.
func appendJSONString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch b {
			case '"', '\\':
				buf = append(buf, '\\', b)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
