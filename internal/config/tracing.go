package config

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Tracing is where a process sends its OpenTelemetry traces, read from the standard
// OTEL_* variables. With no OTLP endpoint (or OTEL_SDK_DISABLED=true) tracing is off:
// the roles get a no-op tracer and the records carry no trace context. The exporter
// reads the rest of its standard variables itself (OTEL_EXPORTER_OTLP_HEADERS,
// _TIMEOUT, _COMPRESSION, _CERTIFICATE…), and the resource OTEL_RESOURCE_ATTRIBUTES.
type Tracing struct {
	// Endpoint is the OTLP/HTTP traces URL: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it
	// is, else OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces appended. "": tracing off.
	Endpoint string
	// Protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL:
	// only http/protobuf is exported.
	Protocol    string
	Disabled    bool   // OTEL_SDK_DISABLED
	ServiceName string // OTEL_SERVICE_NAME
	// Sampler is OTEL_TRACES_SAMPLER (always_on, always_off, traceidratio and their
	// parentbased_ forms), SamplerArg OTEL_TRACES_SAMPLER_ARG (a ratio's value).
	Sampler    string
	SamplerArg float64
	// ExportDelay is OTEL_BSP_SCHEDULE_DELAY: how long finished spans wait to be sent
	// in one batch.
	ExportDelay time.Duration
}

// On reports whether the process exports traces.
func (t Tracing) On() bool { return t.Endpoint != "" && !t.Disabled }

// Tracing's protocol and samplers.
const (
	TracingProtocolHTTP = "http/protobuf"
)

var tracingSamplers = []string{"always_on", "always_off", "traceidratio",
	"parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"}

func readTracing(r *reader) Tracing {
	t := Tracing{
		Endpoint:    r.str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ""),
		Protocol:    r.str("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", r.str("OTEL_EXPORTER_OTLP_PROTOCOL", TracingProtocolHTTP)),
		Disabled:    r.bool("OTEL_SDK_DISABLED", false),
		ServiceName: r.str("OTEL_SERVICE_NAME", "loomd"),
		Sampler:     strings.ToLower(r.str("OTEL_TRACES_SAMPLER", "parentbased_always_on")),
		ExportDelay: r.ms("OTEL_BSP_SCHEDULE_DELAY", 5000),
	}
	if base := r.str("OTEL_EXPORTER_OTLP_ENDPOINT", ""); t.Endpoint == "" && base != "" {
		t.Endpoint = strings.TrimSuffix(base, "/") + "/v1/traces"
	}
	if arg := r.str("OTEL_TRACES_SAMPLER_ARG", ""); arg != "" {
		f, err := strconv.ParseFloat(arg, 64)
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG: %q is not a number", arg))
		}
		t.SamplerArg = f
	} else {
		t.SamplerArg = 1
	}
	return t
}

// Validate checks the tracing settings when tracing is on.
func (t Tracing) Validate() error {
	if !t.On() {
		return nil
	}
	var errs []error
	if u, err := url.Parse(t.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: %q is not an http(s) URL", t.Endpoint))
	}
	if t.Protocol != TracingProtocolHTTP {
		errs = append(errs, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %q is not supported; loomd exports traces over %s", t.Protocol, TracingProtocolHTTP))
	}
	known := false
	for _, s := range tracingSamplers {
		known = known || s == t.Sampler
	}
	if !known {
		errs = append(errs, fmt.Errorf("OTEL_TRACES_SAMPLER: unknown sampler %q (%s)", t.Sampler, strings.Join(tracingSamplers, ", ")))
	}
	if strings.HasSuffix(t.Sampler, "traceidratio") && (t.SamplerArg < 0 || t.SamplerArg > 1) {
		errs = append(errs, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG: the ratio %v is not in [0, 1]", t.SamplerArg))
	}
	if t.ExportDelay <= 0 {
		errs = append(errs, errors.New("OTEL_BSP_SCHEDULE_DELAY must be positive"))
	}
	return errors.Join(errs...)
}
