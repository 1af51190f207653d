package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// config is the server's configuration: environment variables, overridden
// by command-line flags.
type config struct {
	addr     string     // HTTP listen address (TRELLIS_HTTP_ADDR, -addr)
	logLevel slog.Level // minimum log level (TRELLIS_LOG_LEVEL, -log-level)
}

// parseConfig reads the configuration from getenv and args (without the
// program name). Errors name the variable or flag at fault.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	addr := getenv("TRELLIS_HTTP_ADDR")
	if addr == "" {
		addr = ":9000"
	}
	level := getenv("TRELLIS_LOG_LEVEL")
	if level == "" {
		level = "info"
	}

	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&addr, "addr", addr, "HTTP listen address (env TRELLIS_HTTP_ADDR)")
	fs.StringVar(&level, "log-level", level, "log level: debug|info|warn|error (env TRELLIS_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}

	var cfg config
	cfg.addr = addr
	switch strings.ToLower(level) {
	case "debug":
		cfg.logLevel = slog.LevelDebug
	case "info":
		cfg.logLevel = slog.LevelInfo
	case "warn":
		cfg.logLevel = slog.LevelWarn
	case "error":
		cfg.logLevel = slog.LevelError
	default:
		return config{}, fmt.Errorf("TRELLIS_LOG_LEVEL (or -log-level) = %q: want debug, info, warn or error", level)
	}
	return cfg, nil
}
