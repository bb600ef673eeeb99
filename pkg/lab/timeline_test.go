package lab

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestNilTimelineRecordsNothing: a scenario records unconditionally; the
// tests give it no timeline and nothing may break.
func TestNilTimelineRecordsNothing(t *testing.T) {
	var tl *Timeline
	tl.Point("a", KindStep, "x")
	tl.Span("a", KindEffect, "x", time.Now())
	tl.SetCaption("c")
	tl.MarkDuplicates(1)
	if tl.Events() != nil || tl.Len() != 0 || tl.Caption() != "" {
		t.Fatal("a nil timeline holds something")
	}
}

// TestTimelineConcurrentAndOrdered: racing actors each get their event,
// returned by start time, and an event ending before its start is made a
// point.
func TestTimelineConcurrentAndOrdered(t *testing.T) {
	tl := NewTimeline()
	base := time.Now()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			start := base.Add(time.Duration(50-i) * time.Millisecond)
			tl.Add(Event{Actor: fmt.Sprintf("actor %02d", i), Kind: KindStep, Start: start, End: start.Add(-time.Second)})
		})
	}
	wg.Wait()
	events := tl.Events()
	if len(events) != 50 {
		t.Fatalf("%d events, want 50", len(events))
	}
	for i, e := range events {
		if i > 0 && e.Start.Before(events[i-1].Start) {
			t.Fatalf("event %d starts before event %d", i, i-1)
		}
		if !e.End.Equal(e.Start) {
			t.Errorf("%s ends before it starts: not made a point", e.Actor)
		}
	}
	if events[0].Actor != "actor 49" {
		t.Errorf("first event is %s, want actor 49 (the earliest start)", events[0].Actor)
	}
}

// TestMarkDuplicates keeps the first effects to end and turns the later
// ones into duplicates, leaving other kinds alone.
func TestMarkDuplicates(t *testing.T) {
	base := time.Now()
	tl := NewTimeline()
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	tl.Add(Event{Actor: "late", Kind: KindEffect, Start: at(0), End: at(30)})
	tl.Add(Event{Actor: "first", Kind: KindEffect, Start: at(5), End: at(10)})
	tl.Add(Event{Actor: "second", Kind: KindEffect, Start: at(1), End: at(20)})
	tl.Add(Event{Actor: "absorbed", Kind: KindAbsorbed, Start: at(0), End: at(40)})
	tl.MarkDuplicates(2)
	want := map[string]string{"first": KindEffect, "second": KindEffect, "late": KindDuplicate, "absorbed": KindAbsorbed}
	for _, e := range tl.Events() {
		if e.Kind != want[e.Actor] {
			t.Errorf("%s is %s, want %s", e.Actor, e.Kind, want[e.Actor])
		}
	}
}
