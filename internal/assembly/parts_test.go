package assembly

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
)

// spec describes a part of a test's list: which of its functions it has
// and whether its start fails.
type spec struct {
	name                     string
	start, stop, cut, failAt bool
	farewell                 bool
}

// listOf makes the parts of specs, each recording "verb name" in *log.
func listOf(specs []spec, log *[]string) parts {
	var ps parts
	for _, s := range specs {
		p := part{name: s.name, farewell: s.farewell}
		if s.start || s.failAt {
			p.start = func(context.Context) error {
				*log = append(*log, "start "+s.name)
				if s.failAt {
					return errors.New("refused")
				}
				return nil
			}
		}
		if s.stop {
			p.stop = func(context.Context) error { *log = append(*log, "stop "+s.name); return nil }
		}
		if s.cut {
			p.cut = func() { *log = append(*log, "cut "+s.name) }
		}
		ps = append(ps, p)
	}
	return ps
}

func TestPartsWalkTheList(t *testing.T) {
	// A service's list in its shape: Redis (stop and cut), the actor
	// system (stop), a drain (a goodbye), the cluster (start, stop, cut),
	// the timers (start, stop), HTTP (stop, cut).
	service := []spec{
		{name: "redis", stop: true, cut: true},
		{name: "actors", stop: true},
		{name: "drain", stop: true, farewell: true},
		{name: "cluster", start: true, stop: true, cut: true},
		{name: "timers", start: true, stop: true},
		{name: "http", stop: true, cut: true},
	}
	failing := slices.Clone(service)
	failing[4].failAt = true // the timers do not start
	for _, tc := range []struct {
		name    string
		specs   []spec
		walk    func(parts) error
		want    []string
		wantErr string
	}{
		{
			name: "a start starts the parts in order", specs: service,
			walk: func(ps parts) error { return ps.startAll(context.Background()) },
			want: []string{"start cluster", "start timers"},
		},
		{
			name: "a failed start stops at the part that failed", specs: failing,
			walk: func(ps parts) error { return ps.startAll(context.Background()) },
			want: []string{"start cluster", "start timers"}, wantErr: "start timers: refused",
		},
		{
			name: "a shutdown stops every part in the reverse order", specs: service,
			walk: func(ps parts) error {
				return ps.stopAll(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)))
			},
			want: []string{"stop http", "stop timers", "stop cluster", "stop drain", "stop actors", "stop redis"},
		},
		{
			name: "a kill cuts first, then stops what has no cut and no goodbye", specs: service,
			walk: func(ps parts) error { ps.kill(context.Background()); return nil },
			want: []string{"cut http", "cut cluster", "cut redis", "stop timers", "stop actors"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			err := tc.walk(listOf(tc.specs, &log))
			if !slices.Equal(log, tc.want) {
				t.Errorf("walked %q, want %q", log, tc.want)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestStopAllReturnsEveryFailure(t *testing.T) {
	fail := func(msg string) func(context.Context) error {
		return func(context.Context) error { return errors.New(msg) }
	}
	ps := parts{{name: "a", stop: fail("first")}, {name: "b"}, {name: "c", stop: fail("second")}}
	err := ps.stopAll(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if want := "stop c: second\nstop a: first"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

func TestServiceEndsOnce(t *testing.T) {
	list := []spec{{name: "actors", stop: true}, {name: "http", stop: true, cut: true}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name  string
		first func(*Service)
		want  []string
	}{
		{name: "a shutdown after a kill stops nothing", first: func(s *Service) { s.kill() },
			want: []string{"cut http", "stop actors"}},
		{name: "a kill after a shutdown cuts nothing", first: func(s *Service) { _ = s.Shutdown(context.Background()) },
			want: []string{"stop http", "stop actors"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			s := &Service{log: quiet, parts: listOf(list, &log)}
			tc.first(s)
			if err := s.Shutdown(context.Background()); err != nil {
				t.Errorf("Shutdown = %v, want nil", err)
			}
			s.kill()
			if !slices.Equal(log, tc.want) {
				t.Errorf("walked %q, want %q", log, tc.want)
			}
		})
	}
}
