package events

import (
	"encoding/json"

	fastjson "github.com/segmentio/encoding/json"
)

// unmarshal decodes the JSON b into a new T. Records are decoded with
// segmentio/encoding/json, a drop-in for encoding/json tested against its behaviour
// that makes a single pass over the input (encoding/json validates it in a pass of its
// own, then decodes it in another, over every kilobyte of base64 a record carries);
// that is most of what a replay of the topic costs. What it refuses is decoded by
// encoding/json, whose verdict and error stand, so nothing encoding/json accepts is
// refused.
func unmarshal[T any](b []byte) (*T, error) {
	var v T
	if fastjson.Unmarshal(b, &v) == nil {
		return &v, nil
	}
	var std T
	if err := json.Unmarshal(b, &std); err != nil {
		return nil, err
	}
	return &std, nil
}
