package eventsourced

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/trellis-go/trellis/entities"
)

// The kinds of an [ExportRecord].
const (
	KindSnapshot = "snapshot" // the entity's latest snapshot
	KindEvent    = "event"    // one event
	KindDeleted  = "deleted"  // the entity was deleted after event Seq
)

// ExportRecord is one line of an exported journal: [Export] writes an
// entity's snapshot (when it has one), then its events in order, then
// "deleted" when it was deleted; [Import] reads them back.
type ExportRecord struct {
	EntityType string `json:"entityType"`
	EntityID   string `json:"entityId"`
	Kind       string `json:"kind"`
	Seq        uint64 `json:"seq"`
	// Name is an event's name.
	Name string `json:"name,omitempty"`
	// At is when the event was persisted or the snapshot taken (UTC, to
	// the millisecond).
	At time.Time `json:"at,omitzero"`
	// Data is the event, or the snapshot's state, as stored.
	Data json.RawMessage `json:"data,omitempty"`
}

// exportPage is how many events Export reads at a time.
const exportPage = 1000

// Export writes the journals of entityType's entities ids (every entity
// of the type that has a journal when ids is empty, sorted by id) to w as
// JSON lines (ExportRecord), each entity's in order. What retention
// dropped is not exported: the snapshot stands for it.
func Export(ctx context.Context, store entities.JournalStore, entityType string, w io.Writer, ids ...string) error {
	if len(ids) == 0 {
		var err error
		if ids, err = store.JournalIDs(ctx, entityType); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, id := range ids {
		if err := exportOne(ctx, store, entityType, id, enc); err != nil {
			return fmt.Errorf("export %s %q: %w", entityType, id, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// exportOne writes one entity's journal.
func exportOne(ctx context.Context, store entities.JournalStore, entityType, id string, enc *json.Encoder) error {
	head, _, err := store.ReadJournal(ctx, entityType, id)
	if err != nil {
		return err
	}
	rec := ExportRecord{EntityType: entityType, EntityID: id}
	if s := head.Snapshot; s != nil {
		r := rec
		r.Kind, r.Seq, r.At, r.Data = KindSnapshot, s.Seq, s.At.UTC(), s.Data
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	for after := uint64(0); ; {
		events, err := store.Events(ctx, entityType, id, after, exportPage)
		if err != nil {
			return err
		}
		for _, e := range events {
			r := rec
			r.Kind, r.Seq, r.Name, r.At, r.Data = KindEvent, e.Seq, e.Name, e.At.UTC(), e.Data
			if err := enc.Encode(r); err != nil {
				return err
			}
			after = e.Seq
		}
		if len(events) < exportPage {
			break
		}
	}
	if head.Deleted {
		r := rec
		r.Kind, r.Seq = KindDeleted, head.Seq
		return enc.Encode(r)
	}
	return nil
}

// MaxImportLine is the longest line Import reads, in bytes.
const MaxImportLine = 4 << 20

// ImportReport is what [Import] did.
type ImportReport struct {
	// Lines is the number of lines read.
	Lines int
	// Entities and Events count what was written.
	Entities, Events int
	// Refused lists the entities not imported, and why.
	Refused []ImportRefusal
}

// ImportRefusal is an entity Import did not write: its journal there was
// not whole or in order, or the store holds a journal for it already.
type ImportRefusal struct {
	Line       int // the line of its first record
	EntityType string
	EntityID   string
	Reason     string
}

// Import reads lines that Export wrote and writes each entity's journal
// into store, in one append per entity (with its snapshot and its delete),
// under the fence that fence returns for it (nil: the zero fence, for a
// MemoryStore or a RedisStore). An entity whose records are not in
// order, or that the store holds a journal for already, is refused and
// the rest imported. The events are recorded in the change log as any
// append's are. The error is for what stops the whole import: a line
// that does not parse, reading r, or a store failure.
func Import(ctx context.Context, store entities.JournalStore, r io.Reader, fence func(entityType, id string) entities.Fence) (ImportReport, error) {
	var rep ImportReport
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxImportLine)
	var cur *pendingImport
	flush := func() error {
		if cur == nil {
			return nil
		}
		p := cur
		cur = nil
		return p.write(ctx, store, fence, &rep)
	}
	for sc.Scan() {
		rep.Lines++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var rec ExportRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			return rep, fmt.Errorf("import: line %d does not parse: %w", rep.Lines, err)
		}
		if cur == nil || cur.entityType != rec.EntityType || cur.id != rec.EntityID {
			if err := flush(); err != nil {
				return rep, err
			}
			cur = &pendingImport{line: rep.Lines, entityType: rec.EntityType, id: rec.EntityID}
			if rec.EntityType == "" || rec.EntityID == "" {
				cur.bad = "no entityType or no entityId"
			}
		}
		cur.add(rec)
	}
	if err := sc.Err(); err != nil {
		return rep, fmt.Errorf("import: read line %d: %w", rep.Lines+1, err)
	}
	return rep, flush()
}

// pendingImport is one entity's records, checked as they come.
type pendingImport struct {
	line           int
	entityType, id string
	w              entities.JournalWrite
	bad            string // why it is refused
}

// add checks rec and adds it to p's write.
func (p *pendingImport) add(rec ExportRecord) {
	if p.bad != "" {
		return
	}
	last := uint64(0)
	if n := len(p.w.Events); n > 0 {
		last = p.w.Events[n-1].Seq
	}
	switch {
	case p.w.Delete:
		p.bad = fmt.Sprintf("a %s record after the deleted one", rec.Kind)
	case rec.Kind == KindSnapshot && (p.w.Snapshot != nil || len(p.w.Events) > 0):
		p.bad = "a snapshot record after its first record"
	case rec.Kind == KindSnapshot:
		p.w.Snapshot = &entities.Snapshot{Seq: rec.Seq, Data: compact(rec.Data), At: rec.At}
	case rec.Kind == KindEvent:
		switch {
		case !entities.ValidEventName(rec.Name):
			p.bad = fmt.Sprintf("event %d: %q is not an event name", rec.Seq, rec.Name)
		case last == 0 && p.w.Snapshot == nil && rec.Seq != 1:
			p.bad = fmt.Sprintf("the journal starts at event %d, with no snapshot", rec.Seq)
		case last == 0 && p.w.Snapshot != nil && rec.Seq > p.w.Snapshot.Seq+1:
			p.bad = fmt.Sprintf("event %d follows the snapshot of event %d: a gap", rec.Seq, p.w.Snapshot.Seq)
		case last != 0 && rec.Seq != last+1:
			p.bad = fmt.Sprintf("event %d follows event %d: not in order", rec.Seq, last)
		default:
			p.w.Events = append(p.w.Events, entities.JournalEvent{Seq: rec.Seq, Name: rec.Name, Data: compact(rec.Data), At: rec.At})
		}
	case rec.Kind == KindDeleted:
		p.w.Delete = true
	default:
		p.bad = fmt.Sprintf("unknown record kind %q", rec.Kind)
	}
}

// write appends p's journal, or reports it refused.
func (p *pendingImport) write(ctx context.Context, store entities.JournalStore, fence func(string, string) entities.Fence, rep *ImportReport) error {
	refuse := func(reason string) {
		rep.Refused = append(rep.Refused, ImportRefusal{Line: p.line, EntityType: p.entityType, EntityID: p.id, Reason: reason})
	}
	if p.bad != "" {
		refuse(p.bad)
		return nil
	}
	var f entities.Fence
	if fence != nil {
		f = fence(p.entityType, p.id)
	}
	err := store.Append(ctx, f, p.entityType, p.id, p.w)
	switch {
	case errors.Is(err, entities.ErrConflict), errors.Is(err, entities.ErrJournalDeleted):
		refuse("the store holds a journal for it already")
		return nil
	case err != nil:
		return fmt.Errorf("import %s %q: %w", p.entityType, p.id, err)
	}
	rep.Entities++
	rep.Events += len(p.w.Events)
	return nil
}

// compact is data without insignificant space, as the journal keeps it.
func compact(data []byte) []byte {
	var b bytes.Buffer
	if json.Compact(&b, data) != nil {
		return data
	}
	return b.Bytes()
}
