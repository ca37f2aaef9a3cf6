package config

import (
	"strings"
	"testing"
	"time"
)

func TestTracingIsOffUntilAnOTLPEndpointIsSet(t *testing.T) {
	c, err := Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Tracing.On() || c.Tracing.ServiceName != "loomd" || c.Tracing.Sampler != "parentbased_always_on" || c.Tracing.ExportDelay != 5*time.Second {
		t.Fatalf("defaults: %+v", c.Tracing)
	}
	for _, tc := range []struct {
		set  map[string]string
		want string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"}, "http://collector:4318/v1/traces"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces.example/v9/t"}, "https://traces.example/v9/t"},
	} {
		c, err := Load(env(tc.set))
		if err != nil {
			t.Fatal(err)
		}
		if !c.Tracing.On() || c.Tracing.Endpoint != tc.want {
			t.Errorf("%v: endpoint %q (on %v), want %q", tc.set, c.Tracing.Endpoint, c.Tracing.On(), tc.want)
		}
	}
	c, err = Load(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}))
	if err != nil || c.Tracing.On() {
		t.Fatalf("OTEL_SDK_DISABLED=true: on %v, err %v", c.Tracing.On(), err)
	}
}

func TestMalformedTracingSettingsAreNamed(t *testing.T) {
	on := "http://collector:4318"
	for _, tc := range []struct {
		set  map[string]string
		name string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, "OTEL_TRACES_SAMPLER_ARG"},
		{map[string]string{"OTEL_TRACES_SAMPLER_ARG": "half"}, "OTEL_TRACES_SAMPLER_ARG"},
	} {
		if _, err := Load(env(tc.set)); err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%v: err %v, want one naming %s", tc.set, err, tc.name)
		}
	}
}
