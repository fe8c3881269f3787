package updates

import "testing"

func TestHub(t *testing.T) {
	h := NewHub()
	a := h.Subscribe("acc", "p1")
	b := h.Subscribe("acc", "p2")
	other := h.Subscribe("other", "p9")
	h.AccountChanged("acc")
	h.AccountChanged("acc") // coalesces
	for _, s := range []*Sub{a, b} {
		select {
		case <-s.Wake():
		default:
			t.Fatal("not woken")
		}
		select {
		case <-s.Wake():
			t.Fatal("second wake not coalesced")
		default:
		}
	}
	select {
	case <-other.Wake():
		t.Fatal("other account woken")
	default:
	}
	a2 := h.Subscribe("acc", "p1")
	select {
	case <-a.Replaced():
	default:
		t.Fatal("old stream not told it was replaced")
	}
	if h.Unsubscribe(a) {
		t.Fatal("replaced stream unsubscribed the new one")
	}
	if h.Connected() != 3 {
		t.Fatalf("connected = %d", h.Connected())
	}
	if !h.Unsubscribe(a2) || !h.Unsubscribe(b) || !h.Unsubscribe(other) || h.Connected() != 0 || len(h.Accounts()) != 0 {
		t.Fatal("cleanup")
	}
}
