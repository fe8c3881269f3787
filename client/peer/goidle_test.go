package peer

import (
	"context"
	"errors"
	"testing"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/signalpb"
)

type recordSignaler struct {
	to   key.Public
	body *signalpb.Body
	err  error
}

func (r *recordSignaler) Send(_ context.Context, to key.Public, b *signalpb.Body) error {
	r.to, r.body = to, b
	return r.err
}

// TestGoIdle: the message is NetBird's GO_IDLE body, addressed to the peer,
// and a failed send is reported.
func TestGoIdle(t *testing.T) {
	var remote key.Public
	remote[0] = 7
	sig := &recordSignaler{}
	if err := GoIdle(context.Background(), sig, remote); err != nil {
		t.Fatal(err)
	}
	if sig.to != remote || sig.body.GetType() != signalpb.Body_GO_IDLE || sig.body.GetPayload() != "" {
		t.Fatalf("sent %v to %v, want an empty GO_IDLE to %v", sig.body, sig.to, remote)
	}
	sig.err = errors.New("signal down")
	if err := GoIdle(context.Background(), sig, remote); !errors.Is(err, sig.err) {
		t.Fatalf("err = %v, want it to wrap %v", err, sig.err)
	}
}

// TestLeftStatus: a peer that left stays marked so through the loop's
// status resets (new sessions), and is no longer once connected again.
func TestLeftStatus(t *testing.T) {
	c := &Conn{status: Status{State: "Connected"}}
	c.setStatus(func(st *Status) { *st = Status{State: "Connecting", Since: st.Since, Left: true} })
	if !c.Status().Left {
		t.Fatal("GO_IDLE did not mark the peer as left")
	}
	c.setStatus(func(st *Status) { *st = Status{State: "Connecting", Since: st.Since} }) // a new session
	if !c.Status().Left {
		t.Fatal("a new session cleared the mark")
	}
	c.setStatus(func(st *Status) { st.State = "Connected" })
	if c.Status().Left {
		t.Fatal("a peer connected again is still marked as left")
	}
}
