package scheduler

import "testing"

// TestAddedListedAtStartIsNotNews: an object listed when a watch starts
// (the scheduler reads it before deciding) does not tell the core the
// cluster changed; an object created later may make room and does.
func TestAddedListedAtStartIsNotNews(t *testing.T) {
	s := &informerEvents{inbox: &inbox{}, wake: make(chan struct{}, 1)}
	s.added(nil, true)
	if changed, _, _ := s.inbox.take(); changed {
		t.Fatal("an object from the initial list was reported as a change")
	}
	select {
	case <-s.wake:
	default:
		t.Fatal("an object from the initial list did not wake the loop")
	}
	s.added(nil, false)
	if changed, _, _ := s.inbox.take(); !changed {
		t.Fatal("a new object was not reported as a change")
	}
}
