package mcp

import "testing"

// checkFraming passes what the go-sdk answers faithfully and refuses, with JSON-RPC's
// code, what it would answer under another id or read more loosely than REST.
func TestCheckFraming(t *testing.T) {
	for body, want := range map[string]int{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`:                          0,
		`{"jsonrpc":"2.0","id":"a","method":"ping","params":{}}`:            0,
		`{"jsonrpc":"2.0","id":9007199254740992,"method":"ping"}`:           0,
		`{"jsonrpc":"2.0","id":-9007199254740992,"method":"ping"}`:          0,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\r\n":   0,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`:                        0,
		`{"jsonrpc":"2.0","id":1,"result":{}}`:                              0,
		`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`:           codeInvalidRequest,
		`{"jsonrpc":"2.0","id":99999999999999999999999999,"method":"ping"}`: codeInvalidRequest,
		`{"jsonrpc":"2.0","id":0.5,"method":"ping"}`:                        codeInvalidRequest,
		`{"jsonrpc":"2.0","id":1.0,"method":"ping"}`:                        codeInvalidRequest,
		`{"jsonrpc":"2.0","id":-0,"method":"ping"}`:                         codeInvalidRequest,
		`{"jsonrpc":"2.0","id":true,"method":"ping"}`:                       codeInvalidRequest,
		`{"jsonrpc":"2.0","id":1,"method":3}`:                               codeInvalidRequest,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}`:             codeInvalidRequest,
		`{"jsonrpc":"2.0","id":1,"method":"ping","extra":1}`:                codeInvalidRequest,
		`{"jsonrpc":"1.0","id":1,"method":"ping"}`:                          codeInvalidRequest,
		`[]`:                   codeInvalidRequest,
		`[1]`:                  codeInvalidRequest,
		`"ping"`:               codeInvalidRequest,
		``:                     codeParseError,
		`{"jsonrpc":"2.0",`:    codeParseError,
		`{"jsonrpc":"2.0"} {}`: codeParseError,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\x00":    codeParseError,
		"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}": codeParseError,
	} {
		got := 0
		if r := checkFraming([]byte(body)); r != nil {
			got = r.code
		}
		if got != want {
			t.Errorf("%q: code %d, want %d", body, got, want)
		}
	}
}
