// otlp-receiver: a real OTLP/HTTP receiver (the OpenTelemetry Collector's own otlpreceiver)
// for the trace tests. It listens on a loopback address only and appends every trace batch
// it receives to a file, one JSON object per line (OTLP's JSON encoding, as the Collector's
// pdata marshals it), so a test can read what an exporter sent.
//
// Usage: otlp-receiver -listen 127.0.0.1:PORT -out FILE
//
// It stops on SIGTERM or SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
)

// nopHost is the component.Host of a receiver that runs outside a collector: no extensions.
type nopHost struct{}

func (nopHost) GetExtensions() map[component.ID]component.Component { return nil }

// traceFile appends each batch as one line of OTLP JSON; one writer at a time.
type traceFile struct {
	mu   sync.Mutex
	file *os.File
}

func (t *traceFile) consume(_ context.Context, td ptrace.Traces) error {
	line, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := t.file.Write(append(line, '\n')); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "otlp-receiver: %d spans\n", td.SpanCount())
	return nil
}

// loopback refuses an address whose host is not a loopback IP.
func loopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s is not a loopback address (listen on 127.0.0.1)", addr)
	}
	return nil
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:4318", "loopback host:port of the OTLP/HTTP endpoint")
	out := flag.String("out", "", "file the received trace batches are appended to (OTLP JSON, one per line)")
	flag.Parse()
	if *out == "" {
		return fmt.Errorf("-out FILE is required")
	}
	if err := loopback(*listen); err != nil {
		return err
	}
	file, err := os.OpenFile(*out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer file.Close()
	sink := &traceFile{file: file}

	logger, err := zap.NewProduction()
	if err != nil {
		return err
	}
	factory := otlpreceiver.NewFactory()
	cfg := factory.CreateDefaultConfig().(*otlpreceiver.Config)
	http := cfg.Protocols.HTTP.GetOrInsertDefault()
	http.ServerConfig.NetAddr.Endpoint = *listen
	cfg.Protocols.GRPC = configoptional.None[configgrpc.ServerConfig]()
	set := receiver.Settings{
		ID: component.NewID(factory.Type()),
		TelemetrySettings: component.TelemetrySettings{
			Logger:         logger,
			TracerProvider: tracenoop.NewTracerProvider(),
			MeterProvider:  noop.NewMeterProvider(),
		},
		BuildInfo: component.NewDefaultBuildInfo(),
	}
	next, err := consumer.NewTraces(sink.consume)
	if err != nil {
		return err
	}
	ctx := context.Background()
	traces, err := factory.CreateTraces(ctx, set, cfg, next)
	if err != nil {
		return err
	}
	if err := traces.Start(ctx, nopHost{}); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "otlp-receiver: listening on http://%s, writing %s\n", *listen, *out)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	return traces.Shutdown(ctx)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "otlp-receiver: %v\n", err)
		os.Exit(1)
	}
}
