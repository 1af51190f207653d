package timers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// The stores keep an import job as its JSON, replaced at each update and
// gone ImportJobRetention after the last.

func (s *RedisStore) importJobKey(id string) string { return s.keys.Key("timers", "import:"+id) }

func (s *RedisStore) putImportJob(ctx context.Context, job ImportJob, ttl time.Duration) (err error) {
	defer s.markWrite(&err)
	b, err := json.Marshal(job)
	if err != nil {
		return fmt.Errorf("encode import job: %w", err)
	}
	return s.client.Set(ctx, s.importJobKey(job.ID), b, ttl).Err()
}

func (s *RedisStore) getImportJob(ctx context.Context, id string) (_ ImportJob, err error) {
	defer markUnavailable(&err)
	b, err := s.client.Get(ctx, s.importJobKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return ImportJob{}, ErrNotFound
	}
	if err != nil {
		return ImportJob{}, err
	}
	var job ImportJob
	if err := json.Unmarshal(b, &job); err != nil {
		return ImportJob{}, fmt.Errorf("decode import job: %w", err)
	}
	return job, nil
}

// memImportJob is an import job kept by a MemoryStore, with when it goes.
type memImportJob struct {
	job     ImportJob
	expires time.Time
}

func (s *MemoryStore) putImportJob(_ context.Context, job ImportJob, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.imports == nil {
		s.imports = map[string]memImportJob{}
	}
	job.Report.Refused = append([]ImportRefusal(nil), job.Report.Refused...)
	s.imports[job.ID] = memImportJob{job: job, expires: s.clk.Now().Add(ttl)}
	return nil
}

func (s *MemoryStore) getImportJob(_ context.Context, id string) (ImportJob, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.imports[id]
	if !ok || !s.clk.Now().Before(j.expires) {
		delete(s.imports, id)
		return ImportJob{}, ErrNotFound
	}
	return j.job, nil
}
