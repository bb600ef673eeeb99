package lab

import (
	"slices"
	"sync"
	"time"
)

// Kinds of timeline event. The lab report colours an event by its kind.
const (
	// KindEffect: the actor wrote the effect the scenario counts (a ledger
	// row, a payment record, an order).
	KindEffect = "effect"
	// KindDuplicate: an effect beyond what the invariant allows (the second
	// deduction, the eleventh unit of ten sold). MarkDuplicates sets it.
	KindDuplicate = "duplicate"
	// KindAbsorbed: the actor saw the work was done already and did nothing
	// (a duplicate answered, a retry absorbed).
	KindAbsorbed = "absorbed"
	// KindRefused: the actor was turned away without an effect (a 409, out
	// of stock, a failed message).
	KindRefused = "refused"
	// KindFault: something the scenario injected (a lost COMMIT ACK).
	KindFault = "fault"
	// KindError: the actor saw an error.
	KindError = "error"
	// KindStep: anything else worth drawing.
	KindStep = "step"
)

// Event is one thing one actor did during a scenario run: a swimlane bar
// from Start to End (a point when End is Start).
type Event struct {
	Actor string    `json:"actor"` // the swimlane: "attempt 1", "retry job", "delivery 07"
	Kind  string    `json:"kind"`  // one of the Kind constants
	Label string    `json:"label"` // what it did, short: "deducted", "COMMIT ACK lost"
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// Timeline records the events of one scenario run for the lab report. It is
// safe for concurrent use, and a nil *Timeline records nothing, so a
// scenario records unconditionally and the tests, which give it none, pay
// nothing.
type Timeline struct {
	mu      sync.Mutex
	events  []Event
	caption string
}

// NewTimeline returns an empty timeline.
func NewTimeline() *Timeline { return &Timeline{} }

// Add records e.
func (t *Timeline) Add(e Event) {
	if t == nil {
		return
	}
	if e.End.Before(e.Start) {
		e.End = e.Start
	}
	t.mu.Lock()
	t.events = append(t.events, e)
	t.mu.Unlock()
}

// Point records an instant event of actor now.
func (t *Timeline) Point(actor, kind, label string) {
	now := time.Now()
	t.Add(Event{Actor: actor, Kind: kind, Label: label, Start: now, End: now})
}

// Span records an event of actor from start until now.
func (t *Timeline) Span(actor, kind, label string, start time.Time) {
	t.Add(Event{Actor: actor, Kind: kind, Label: label, Start: start, End: time.Now()})
}

// SetCaption says in one line what the timeline shows, when it is not the
// whole run (for example "storm 2 of 3, the one with the most records").
func (t *Timeline) SetCaption(s string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.caption = s
	t.mu.Unlock()
}

// Caption returns what SetCaption set.
func (t *Timeline) Caption() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.caption
}

// Events returns the events recorded so far, by start time.
func (t *Timeline) Events() []Event {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	out := slices.Clone(t.events)
	t.mu.Unlock()
	slices.SortStableFunc(out, func(a, b Event) int { return a.Start.Compare(b.Start) })
	return out
}

// MarkDuplicates turns every KindEffect event after the first keep (in
// order of their end, when the effect was committed) into KindDuplicate: the
// invariant allows keep effects, the rest are the incident.
func (t *Timeline) MarkDuplicates(keep int) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var idx []int
	for i, e := range t.events {
		if e.Kind == KindEffect {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return t.events[a].End.Compare(t.events[b].End) })
	for n, i := range idx {
		if n >= keep {
			t.events[i].Kind = KindDuplicate
		}
	}
}

// Len returns how many events were recorded.
func (t *Timeline) Len() int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.events)
}
