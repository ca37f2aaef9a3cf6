package memrow

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// fieldErr asserts err is a *FieldError with the given field and code, and
// that its message mentions want (when non-empty).
func fieldErr(t *testing.T, err error, field, code, want string) {
	t.Helper()
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error = %v (%T), want *FieldError", err, err)
	}
	if fe.Field != field || fe.Code != code {
		t.Fatalf("FieldError{Field: %q, Code: %q}, want {%q, %q} (message %q)", fe.Field, fe.Code, field, code, fe.Message)
	}
	if want != "" && !strings.Contains(fe.Message, want) {
		t.Fatalf("message %q does not mention %q", fe.Message, want)
	}
}

func TestFieldErrorText(t *testing.T) {
	err := ValidateKey("")
	if got := err.Error(); !strings.HasPrefix(got, "memory_key: ") {
		t.Fatalf("Error() = %q, want it to name the field first", got)
	}
}

func TestCheckJSONText(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		// want is "" for accepted input, else a fragment of the message.
		want string
	}{
		{"plain", `{"a":"hello"}`, ""},
		{"escaped backslash before u0000", `"\\u0000"`, ""},
		{"two escaped backslashes then real escape", `"\\\\\u0000"`, "\\u0000 escape at byte 5"},
		{"u0000 escape", `"a\u0000b"`, "\\u0000 escape at byte 2"},
		{"u0000 in object key", `{"\u0000":1}`, "\\u0000"},
		{"surrogate pair", `"\ud83d\ude00"`, ""},
		{"surrogate pair upper case hex", `"\uD83D\uDE00"`, ""},
		{"lone high at end of string", `"abc\ud83d"`, "lone UTF-16 high surrogate escape at byte 4"},
		{"lone high before text", `"\ud83dx"`, "high surrogate"},
		{"lone high before other escape", `"\ud83d\n"`, "high surrogate"},
		{"two highs then low", `"\ud83d\ud83d\ude00"`, "high surrogate escape at byte 1"},
		{"lone high before non-surrogate escape", `"\ud83d\u0041"`, "high surrogate"},
		{"lone high at end of input", `"\ud83d`, "high surrogate"},
		{"lone low", `"\ude00"`, "lone UTF-16 low surrogate escape at byte 1"},
		{"low before high", `"\ude00\ud83d"`, "low surrogate"},
		{"raw NUL in string", "\"a\x00\"", "NUL byte at byte 2"},
		{"raw NUL outside string", "[1,\x002]", "NUL byte at byte 3"},
		{"invalid UTF-8 0xff", "\"a\xffb\"", "not valid UTF-8 at byte 2"},
		{"truncated UTF-8", "\"\xe2\x82\"", "not valid UTF-8"},
		{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\"", "not valid UTF-8"},
		{"valid multibyte", `"héllo 世界 😀"`, ""},
		// Outside strings a backslash is a syntax error for Canonical to
		// report, not an escape.
		{"escape-like text outside strings is not an escape", `["a"] \u0000`, ""},
		{"escaped quote keeps string open", `"a\"\u0000"`, "\\u0000"},
		{"u0000 lookalike after escaped quote closes", `["\"", "\\u0000"]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckJSONText("value", []byte(tt.raw))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("CheckJSONText(%q) = %v, want nil", tt.raw, err)
				}
				return
			}
			fieldErr(t, err, "value", CodeValidationFailed, tt.want)
		})
	}
}

func TestCheckText(t *testing.T) {
	for _, s := range []string{"", "plain", "tab\tnewline\n", "世界 😀"} {
		if err := CheckText("note", s); err != nil {
			t.Errorf("CheckText(%q) = %v, want nil", s, err)
		}
	}
	bad := map[string]string{
		"a\x00b":         "NUL byte at byte 1",
		"ab\xff":         "not valid UTF-8 at byte 2",
		"\xed\xa0\x80":   "not valid UTF-8 at byte 0", // UTF-8-encoded surrogate
		"ok\xc3":         "not valid UTF-8 at byte 2",
		"x\u00e9\x00end": "NUL byte at byte 3",
	}
	for s, want := range bad {
		fieldErr(t, CheckText("note", s), "note", CodeValidationFailed, want)
	}
}

func TestCanonicalForm(t *testing.T) {
	tests := []struct{ name, raw, want string }{
		{"keys sorted", `{"b":1,"a":2,"c":{"z":true,"y":null}}`, `{"a":2,"b":1,"c":{"y":null,"z":true}}`},
		{"keys sorted by bytes", `{"é":1,"z":2,"Z":3,"aa":4,"a":5}`, `{"Z":3,"a":5,"aa":4,"z":2,"é":1}`},
		{"whitespace removed", " {\n\t\"a\" : [ 1 , 2 ] ,\r\n \"b\" : { } } \n", `{"a":[1,2],"b":{}}`},
		{"HTML kept", `{"h":"<b>&amp;</b>"}`, `{"h":"<b>&amp;</b>"}`},
		{"number 1.0 kept", `[1.0]`, `[1.0]`},
		{"number 1e3 kept", `{"n":1e3}`, `{"n":1e3}`},
		{"numbers kept literally", `[-0, 1E+2, 0.10, 12345678901234567890123]`, `[-0,1E+2,0.10,12345678901234567890123]`},
		{"unicode kept", `"h\u00e9llo \ud83d\ude00 世界"`, `"héllo 😀 世界"`},
		{"unnecessary escapes dropped", `"\/\u0041\u00e9"`, `"/Aé"`},
		{"required escapes", `"q\"b\\n\nt\tc\u0001d\u001f"`, `"q\"b\\n\nt\tc\u0001d\u001f"`},
		{"short escapes for b f r", `"\u0008\u000c\u000d"`, `"\b\f\r"`},
		{"line separators kept raw", `"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"DEL kept raw", `"\u007f"`, "\"\x7f\""},
		{"bare string", `"hello"`, `"hello"`},
		{"bare number", ` 42 `, `42`},
		{"true", `true`, `true`},
		{"null", `null`, `null`},
		{"empty array", `[ ]`, `[]`},
		{"array order kept", `[3,1,2]`, `[3,1,2]`},
		{"same key at different levels", `{"a":{"a":1}}`, `{"a":{"a":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonical("value", []byte(tt.raw))
			if err != nil {
				t.Fatalf("Canonical(%q): %v", tt.raw, err)
			}
			if string(got) != tt.want {
				t.Fatalf("Canonical(%q) = %s, want %s", tt.raw, got, tt.want)
			}
		})
	}
}

func TestCanonicalRejects(t *testing.T) {
	tests := []struct{ name, raw, want string }{
		{"empty", ``, "not valid JSON"},
		{"whitespace only", "  \n", "not valid JSON"},
		{"truncated object", `{"a":1`, "not valid JSON"},
		{"truncated array", `[1,2`, "not valid JSON"},
		{"trailing comma", `[1,2,]`, "not valid JSON"},
		{"trailing comma in object", `{"a":1,}`, "not valid JSON"},
		{"missing colon", `{"a" 1}`, "not valid JSON"},
		{"missing comma", `[1 2]`, "not valid JSON"},
		{"single quotes", `{'a':1}`, "not valid JSON"},
		{"unquoted key", `{a:1}`, "not valid JSON"},
		{"bad number", `[01]`, "not valid JSON"},
		{"NaN", `NaN`, "not valid JSON"},
		{"bad escape", `"\x41"`, "not valid JSON"},
		{"short unicode escape", `"\u12"`, "not valid JSON"},
		{"raw control char in string", "\"a\nb\"", "not valid JSON"},
		{"trailing garbage", `{"a":1} x`, "not valid JSON"},
		{"escape outside a string", `["a"] \u0000`, "not valid JSON"},
		{"second value", `{"a":1}{"b":2}`, "after the value"},
		{"second scalar", `1 2`, "after the value"},
		{"stray close", `[1]]`, "not valid JSON"},
		{"duplicate keys", `{"a":1,"a":1}`, `duplicate object key "a"`},
		{"nested duplicate keys", `{"x":[{"k":1,"b":2,"k":3}]}`, `duplicate object key "k"`},
		{"duplicate via escape", `{"a":1,"\u0061":2}`, `duplicate object key "a"`},
		{"text check runs first", `{"a":"\u0000"}`, "\\u0000"},
		{"lone surrogate", `["\udc00"]`, "low surrogate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonical("value", []byte(tt.raw))
			if err == nil {
				t.Fatalf("Canonical(%q) = %s, want an error", tt.raw, got)
			}
			fieldErr(t, err, "value", CodeValidationFailed, tt.want)
		})
	}
}

func TestCanonicalNamesField(t *testing.T) {
	_, err := Canonical("metadata", []byte(`{`))
	fieldErr(t, err, "metadata", CodeValidationFailed, "")
}

func TestCanonicalTooDeep(t *testing.T) {
	deep := strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)
	_, err := Canonical("value", []byte(deep))
	fieldErr(t, err, "value", CodeValidationFailed, "nested")

	ok := strings.Repeat("[", 100) + strings.Repeat("]", 100)
	if got, err := Canonical("value", []byte(ok)); err != nil || string(got) != ok {
		t.Fatalf("Canonical(100 nested arrays) = %s, %v", got, err)
	}
}

func TestSameValueSameHash(t *testing.T) {
	a := `{"name":"Ada","langs":["go","sql"],"meta":{"since":2019,"active":true}}`
	b := "{\n  \"meta\": {\"active\": true, \"since\": 2019},\n  \"langs\": [\"go\", \"sql\"],\n  \"name\": \"Ad\\u0061\"\n}"
	ca, err := Canonical("value", []byte(a))
	if err != nil {
		t.Fatal(err)
	}
	cb, err := Canonical("value", []byte(b))
	if err != nil {
		t.Fatal(err)
	}
	if ContentSHA256(ca) != ContentSHA256(cb) {
		t.Fatalf("same object, different hashes:\n%s\n%s", ca, cb)
	}
	// Array order and number spelling are meaningful.
	for _, other := range []string{
		`{"name":"Ada","langs":["sql","go"],"meta":{"since":2019,"active":true}}`,
		`{"name":"Ada","langs":["go","sql"],"meta":{"since":2019.0,"active":true}}`,
	} {
		co, err := Canonical("value", []byte(other))
		if err != nil {
			t.Fatal(err)
		}
		if ContentSHA256(co) == ContentSHA256(ca) {
			t.Fatalf("%s hashes like %s", other, a)
		}
	}
}

func TestContentSHA256(t *testing.T) {
	// sha256("") and sha256(`"a"`), computed independently.
	if got := ContentSHA256(nil); got != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("ContentSHA256(empty) = %s", got)
	}
	if got := ContentSHA256([]byte(`"a"`)); got != "ac8d8342bbb2362d13f0a559a3621bb407011368895164b628a54f7fc33fc43c" {
		t.Fatalf(`ContentSHA256("a") = %s`, got)
	}
}

func TestCharLimit(t *testing.T) {
	// A string counts its own characters, not bytes, nor the quotes and escapes JSON
	// writes it with; another value counts its canonical JSON.
	for raw, want := range map[string]int{`"héllo 😀"`: 7, `"blue"`: 4, `"say \"hi\""`: 8, `{"a":"b"}`: 9, `42`: 2} {
		c, err := Canonical("value", []byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		if n := CharCount(c); n != want {
			t.Errorf("CharCount(%s) = %d, want %d", c, n, want)
		}
	}
	mk := func(chars int) []byte {
		// A JSON string of chars characters, using a multi-byte rune so bytes and
		// characters differ.
		c, err := Canonical("value", []byte(`"`+strings.Repeat("é", chars)+`"`))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if err := CheckCharLimit(mk(100), 100); err != nil {
		t.Fatalf("exactly at the limit: %v", err)
	}
	err := CheckCharLimit(mk(101), 100)
	fieldErr(t, err, "value", CodeCharLimitExceeded, "101")
	fieldErr(t, err, "value", CodeCharLimitExceeded, "100")

	if err := CheckCharLimit(mk(DefaultCharLimit), 0); err != nil {
		t.Fatalf("no limit set, at the default: %v", err)
	}
	fieldErr(t, CheckCharLimit(mk(DefaultCharLimit+1), 0), "value", CodeCharLimitExceeded, "16001")
}

func TestValidateKey(t *testing.T) {
	good := []string{"k", "user.preferences/theme", "clé 世界", " padded ", strings.Repeat("k", MaxKeyBytes), strings.Repeat("é", MaxKeyBytes/2)}
	for _, k := range good {
		if err := ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", k, err)
		}
	}
	bad := map[string]string{
		"":                                   "empty",
		strings.Repeat("k", MaxKeyBytes+1):   "257 bytes",
		strings.Repeat("é", MaxKeyBytes/2+1): "258 bytes",
		"a\x00b":                             "U+0000",
		"a\nb":                               "U+000A",
		"a\x7fb":                             "U+007F",
		"a\u0085b":                           "U+0085", // C1 next line
		"a\xffb":                             "UTF-8",
		"   ":                                "whitespace",
		"\u00a0\u3000":                       "whitespace",
	}
	for k, want := range bad {
		fieldErr(t, ValidateKey(k), "memory_key", CodeValidationFailed, want)
	}
}

func TestValidateIdentity(t *testing.T) {
	for _, v := range []string{DefaultIdentity, "agent-7", "user@example.com", "sess 42", strings.Repeat("u", MaxIdentityBytes)} {
		if err := ValidateIdentity("user_id", v); err != nil {
			t.Errorf("ValidateIdentity(%q) = %v", v, err)
		}
	}
	for _, v := range []string{"", strings.Repeat("u", MaxIdentityBytes+1), "a\tb", "a\x9bb", "\xc0\xaf"} {
		fieldErr(t, ValidateIdentity("session_id", v), "session_id", CodeValidationFailed, "")
	}
}

func TestValidateName(t *testing.T) {
	for _, v := range []string{"a", "acme", "Acme-Corp_2.prod", "0", strings.Repeat("n", MaxNameBytes)} {
		if err := ValidateName("namespace", v); err != nil {
			t.Errorf("ValidateName(%q) = %v", v, err)
		}
	}
	bad := map[string]string{
		"":                                  "empty",
		strings.Repeat("n", MaxNameBytes+1): "129 bytes",
		"acme/prod":                         "'/'",
		".hidden":                           "start",
		"-x":                                "start",
		"_x":                                "start",
		"..":                                "start",
		"has space":                         "' '",
		"café":                              "'é' at byte 3; only ASCII letters",
		"école":                             "start with an ASCII letter (a-z, A-Z) or digit, not 'é'",
		"a:b":                               "':'",
	}
	for v, want := range bad {
		fieldErr(t, ValidateName("org", v), "org", CodeValidationFailed, want)
	}
}

func TestValidateTags(t *testing.T) {
	tags := make([]string, MaxTags)
	for i := range tags {
		tags[i] = strings.Repeat("t", MaxTagBytes)
	}
	if err := ValidateTags(tags); err != nil {
		t.Fatalf("%d tags of %d bytes: %v", MaxTags, MaxTagBytes, err)
	}
	if err := ValidateTags(nil); err != nil {
		t.Fatalf("no tags: %v", err)
	}
	fieldErr(t, ValidateTags(append(tags, "one-more")), "tags", CodeValidationFailed, "65")
	bad := map[string][]string{
		"tag 1":   {"ok", ""},
		"129":     {strings.Repeat("t", MaxTagBytes+1)},
		"U+000A":  {"line\nbreak"},
		"U+0000":  {"nul\x00"},
		"UTF-8":   {"bad\xff"},
		"tag 2 h": {"a", "b", "has\u0090c1"},
	}
	for want, tt := range bad {
		fieldErr(t, ValidateTags(tt), "tags", CodeValidationFailed, want)
	}
}

func TestValidateConfidence(t *testing.T) {
	for _, c := range []float64{0, 0.5, 1} {
		if err := ValidateConfidence(c); err != nil {
			t.Errorf("ValidateConfidence(%v) = %v", c, err)
		}
	}
	for _, c := range []float64{-0.01, 1.0001, math.NaN(), math.Inf(1), math.Inf(-1)} {
		fieldErr(t, ValidateConfidence(c), "confidence", CodeValidationFailed, "between 0 and 1")
	}
}

func TestEmbedText(t *testing.T) {
	tests := []struct{ name, raw, key, want string }{
		{"string", `"the user prefers dark mode"`, "ui.theme", "the user prefers dark mode (#ui.theme)"},
		{"object in canonical order", `{"theme":"dark","font":{"size":14,"bold":false}}`, "prefs",
			"font bold false size 14 theme dark (#prefs)"},
		{"array with null skipped", `["go", null, 1.5, true]`, "k", "go 1.5 true (#k)"},
		{"number", `1e3`, "n", "1e3 (#n)"},
		{"null", `null`, "gone", "(#gone)"},
		{"empty string", `""`, "blank", "(#blank)"},
		{"unicode and html", `{"note":"<b>café</b> 😀"}`, "n", "note <b>café</b> 😀 (#n)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Canonical("value", []byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if got := EmbedText(tt.key, c); got != tt.want {
				t.Fatalf("EmbedText(%q, %s) = %q, want %q", tt.key, c, got, tt.want)
			}
		})
	}
}

func TestValueTextOfAPlainString(t *testing.T) {
	for raw, want := range map[string]string{
		`"prefers aisle seats"`:  "prefers aisle seats",
		`"café ☕ 東京"`:            "café ☕ 東京",
		`""`:                     "",
		`"say \"hi\"\n"`:         "say \"hi\"\n",
		`{"seat":"aisle","n":2}`: "n 2 seat aisle",
		`["a","b"]`:              "a b",
	} {
		c, err := Canonical("value", []byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		if got := ValueText(c); got != want {
			t.Errorf("ValueText(%s) = %q, want %q", c, got, want)
		}
	}
}
